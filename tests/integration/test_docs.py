"""The maps in docs/ stay true: every function docs/equations.md names imports and lives in the
file the table gives; docs/architecture.md lists every subpackage and module; no docstring cites
the papers by seed number, a design-note section or an issue number."""
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
DOCS = ROOT / "docs"
_ROW = re.compile(r"^\|(?P<ref>[^|]*)\|(?P<what>[^|]*)\|(?P<by>[^|]*)\|(?P<file>[^|]*)\|\s*$")


def _resolve(name: str):
    """The object of a fully qualified public name (module attribute chain)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


def source_file(name: str) -> str:
    """Repository-relative path of the file that defines the public name ``name``."""
    if name.startswith(("benchmarks/", "notebooks/")):
        return name
    obj = inspect.unwrap(_resolve(name))
    if inspect.isroutine(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
        path = Path(inspect.getsourcefile(obj)).resolve()
    else:       # a constant: the module that defines it is the one holding it, not a re-export
        attr = name.rsplit(".", 1)[-1]
        owners = [m for m in list(sys.modules.values())
                  if getattr(m, "__name__", "").startswith("bda_jax.")
                  and not getattr(m, "__file__", "").endswith("__init__.py")
                  and vars(m).get(attr) is obj
                  and re.search(rf"^{attr}\s*[:=]", Path(m.__file__).read_text(), re.M)]
        assert len(owners) == 1, f"{name}: defined in {[m.__name__ for m in owners]}"
        path = Path(owners[0].__file__).resolve()
    return str(path.relative_to(ROOT))


def equation_rows():
    """(reference with its paper label, implementing names, files) per table row."""
    rows, paper = [], "?"
    for line in (DOCS / "equations.md").read_text().splitlines():
        if line.startswith("## ["):
            paper = line[3:].split("]")[0] + "]"
        m = _ROW.match(line)
        if not m or set(m["ref"].strip()) <= {"-", " "} or m["ref"].strip() == "Reference":
            continue
        names = re.findall(r"`([^`]+)`", m["by"])
        files = re.findall(r"`([^`]+)`", m["file"])
        rows.append((f"{paper} {m['ref'].strip()}", names, files))
    return rows


def test_equations_table_is_not_empty():
    rows = equation_rows()
    assert len(rows) >= 30
    assert {r[0].split()[0] for r in rows} >= {"[BDA]", "[DASE]", "[Audit]"}


@pytest.mark.parametrize("ref,names,files", equation_rows(), ids=lambda v: str(v)[:40])
def test_equation_names_resolve_to_their_files(ref, names, files):
    assert names, f"{ref}: no implementing name"
    expected = sorted({source_file(n) for n in names})
    assert sorted(set(files)) == expected, f"{ref}: File column should be {expected}"
    for f in files:
        assert (ROOT / f).exists(), f


def test_architecture_lists_every_module():
    text = (DOCS / "architecture.md").read_text()
    missing = []
    for path in sorted((ROOT / "bda_jax").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "data":
            continue
        if str(rel) not in text and f"`{path.name}`" not in text:
            missing.append(str(rel))
    assert not missing, missing


def test_no_citations_outside_the_repo():
    bad = []
    pattern = re.compile(r"seed 00\d|DESIGN §|DESIGN\.md|\bissue \d+|\bIssue \d+")
    for path in sorted(list((ROOT / "bda_jax").rglob("*.py")) + list((ROOT / "models").glob("*.py"))):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_references_name_the_three_papers():
    text = (DOCS / "references.md").read_text()
    for label in ("[BDA]", "[DASE]", "[Audit]"):
        assert label in text
