#!/usr/bin/env bash
# The package as a user installs it (`make wheel-check`; .ci/run runs it outside the test suite):
#   1. build the wheel (setuptools must not warn: every package and its data declared);
#   2. install it, not editable, with its dependencies, in a fresh virtual environment;
#   3. from a folder outside the repository: `bda --version` is the source's version, the
#      subpackages, the bundled data and py.typed are in the installed package, and
#      `bda demo --quick` writes its report with a cold compilation cache;
#   4. README's Python blocks type-check against the installed package (mypy reads its py.typed).
# About 2.5 minutes here, most of it pip installing JAX & co. from its cache.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"          # make's venv: Python >= 3.12, pip, pytest for the extractor
[ -x "$PY" ] || { echo "wheel-check: $PY is missing (run make first)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bda-wheel-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
start=$(date +%s)
step() { echo "==> wheel-check [$(( $(date +%s) - start )) s] $*"; }

step "building the wheel"
"$PY" -m pip wheel -v --no-deps -w "$WORK/dist" . > "$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; echo "wheel-check: the wheel did not build" >&2; exit 1; }
if grep -nE "would be ignored|BuildBackendWarning|SetuptoolsDeprecationWarning|is absent from the .packages." \
     "$WORK/build.log"; then
  echo "wheel-check: setuptools warns (above); declare the packages in pyproject.toml" >&2
  exit 1
fi
WHEEL=$(ls "$WORK"/dist/bda_jax-*.whl)
echo "    $(basename "$WHEEL") ($(( $(stat -c %s "$WHEEL") / 1024 )) KiB)"

step "installing it (not editable) in a fresh virtual environment"
MYPY_REQ=$("$PY" -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"] if r.startswith("mypy")))')
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "$WHEEL" "$MYPY_REQ"

EXPECTED="bda_jax $("$PY" -c 'import runpy; print(runpy.run_path("bda_jax/_core/version.py")["__version__"])')"
mkdir "$WORK/elsewhere"
cd "$WORK/elsewhere"                 # nothing of the repository on sys.path from here on
step "bda --version"
GOT=$("$WORK/venv/bin/bda" --version)
[ "$GOT" = "$EXPECTED" ] || { echo "wheel-check: bda --version printed '$GOT', expected '$EXPECTED'" >&2; exit 1; }
echo "    $GOT"

step "the installed package: subpackages, bundled data, py.typed"
"$WORK/venv/bin/python" - "$WORK/venv" <<'EOF'
import importlib, sys
from importlib.resources import files
from pathlib import Path

import bda_jax

venv = Path(sys.argv[1]).resolve()
assert venv in Path(bda_jax.__file__).resolve().parents, f"bda_jax imported from {bda_jax.__file__}"
for name in ("active", "adversarial", "aggregators", "audit", "cli", "council", "crowd", "datasets",
             "metrics", "models", "report", "simulate", "stopping"):
    importlib.import_module(f"bda_jax.{name}")
data = files("bda_jax.data")
for rel in ("example_council.jsonl", "bluebirds/labels.yaml", "bluebirds/gt.yaml",
            "bluebirds/LICENSE.TXT", "active_crowd_toolkit/CF.csv.gz",
            "dase_council_traces/safe_DASE_Bellman_History_8_alpha0_2.head20.jsonl"):
    assert (data / rel).is_file(), f"bundled file missing from the wheel: bda_jax/data/{rel}"
assert (files("bda_jax") / "py.typed").is_file(), "py.typed missing from the wheel"
from bda_jax.datasets import load_crowd
assert len(load_crowd("bluebirds").labels) > 0
print("    ok:", bda_jax.__file__)
EOF

step "bda demo --quick (cold compilation cache)"
BDA_JAX_CACHE_DIR="$WORK/jax-cache" "$WORK/venv/bin/bda" demo --quick --no-progress --out report \
  > "$WORK/demo.log" 2>&1 || { tail -40 "$WORK/demo.log"; echo "wheel-check: bda demo --quick failed" >&2; exit 1; }
for f in report/index.html report/results.json; do
  [ -s "$f" ] || { echo "wheel-check: bda demo --quick wrote no $f" >&2; exit 1; }
done
tail -2 "$WORK/demo.log" | sed 's/^/    /'

step "README's Python blocks type-check against the installed package"
"$PY" "$ROOT/tests/integration/test_readme.py" --write-python "$WORK/readme" > /dev/null
"$WORK/venv/bin/mypy" --cache-dir "$WORK/mypy-cache" --python-version 3.12 "$WORK/readme"

step "done"
