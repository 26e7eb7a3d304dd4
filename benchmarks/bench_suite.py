"""Wall time of the default test suite, as README's test command runs it (``make test``), and its
20 slowest tests (issue 20: the default suite stays under 6 minutes on 2 cores).

The suite runs once in a subprocess with ``PYTEST_ADDOPTS`` adding a JUnit XML report (pytest
reads the variable on top of ``[tool.pytest.ini_options]``), so the command is exactly the one
users and CI run. Reported: wall seconds, the sum of the per-test times (larger than the wall
time when tests run in parallel workers), the number of tests by outcome, the 20 slowest tests,
the load average before and after (the 2 cores are often shared), the machine's speed that hour
(``machine_speed``: a fixed pure-Python loop and a fixed XLA compile in a fresh process, timed
before the suite, so runs of different days can be compared), target and met. A passing
run also rewrites ``tests/scope_seconds.json`` (seconds per xdist scheduling scope), which
``tests/conftest.py`` reads to hand out the longest files first.

Run from the repository root::

    python -m benchmarks.bench_suite                  # writes benchmarks/results/suite_cpu.json
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "suite_cpu.json"
SCOPES_OUT = ROOT / "tests" / "scope_seconds.json"     # read by tests/conftest.py
SCHEMA_VERSION = 1
TARGET_S = 360.0


_SPEED_CHILD = r"""
import json, time
loops = []
for _ in range(3):
    t = time.perf_counter()
    s = 0
    for i in range(3_000_000):
        s += i * i
    loops.append(time.perf_counter() - t)
import jax, jax.numpy as jnp
jax.config.update("jax_enable_compilation_cache", False)

def em_like(x, steps):               # a while loop of small fused steps, like the crowd EM
    def body(c):
        i, q = c
        w = jnp.log(q.sum(0) + 1.0)
        q = jax.nn.softmax(x * w[None, :] + jnp.log(q + 1e-9), axis=-1)
        return i + 1, q
    return jax.lax.while_loop(lambda c: c[0] < steps, body, (0, jax.nn.softmax(x, -1)))[1]

compiles = []
for steps in (50, 51, 52):           # three different programs: no cache serves the next
    lowered = jax.jit(em_like, static_argnums=1).lower(jnp.ones((500, 4)), steps)
    t = time.perf_counter()
    lowered.compile()
    compiles.append(time.perf_counter() - t)
print(json.dumps({"python_loop_s": min(loops), "xla_compile_s": min(compiles)}))
"""


def machine_speed() -> dict:
    """Seconds of a fixed pure-Python loop (3 M multiply-adds) and of one fixed XLA compile (a
    while loop of small steps), each the best of three, in a fresh interpreter with no
    compilation cache: how fast this machine runs the two kinds of work the suite's time is made
    of, that hour."""
    out = subprocess.run([sys.executable, "-c", _SPEED_CHILD], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
    return {k: round(v, 3) for k, v in json.loads(out.stdout.splitlines()[-1]).items()}


def slowest(junit: Path, n: int = 20) -> tuple[list[dict], dict]:
    """The ``n`` slowest test cases of a JUnit XML report and the counts by outcome."""
    root = ET.parse(junit).getroot()
    cases, outcomes = [], {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for tc in root.iter("testcase"):
        kind = next((c.tag for c in tc if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes[{"failure": "failed"}.get(kind, kind)] += 1
        cases.append({"test": f"{tc.get('classname')}::{tc.get('name')}",
                      "seconds": float(tc.get("time") or 0.0)})
    cases.sort(key=lambda c: -c["seconds"])
    return cases[:n], {**outcomes, "sum_of_test_seconds": sum(c["seconds"] for c in cases)}


def scope_seconds(junit: Path) -> dict[str, float]:
    """Seconds per pytest-xdist scheduling scope (a file, or a group of
    ``tests/conftest.py``'s ``XDIST_GROUPS``) from a JUnit XML report: the record
    ``tests/scope_seconds.json`` the scheduler reads to hand out the longest scopes first."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_suite_conftest", ROOT / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    out: dict[str, float] = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        parts = (tc.get("classname") or "").split(".")
        # the longest prefix of the class name that is a file: tests.a.test_b.TestC -> tests/a/test_b.py
        path = next(("/".join(parts[:k]) + ".py" for k in range(len(parts), 0, -1)
                     if (ROOT / ("/".join(parts[:k]) + ".py")).is_file()), None)
        if path is None:
            continue
        scope = conftest.xdist_scope(f"{path}::{tc.get('name')}")
        out[scope] = out.get(scope, 0.0) + float(tc.get("time") or 0.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--command", default="make test", help="the suite command (README's)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bda-suite-") as tmp:
        junit = Path(tmp) / "junit.xml"
        env = dict(os.environ, PYTEST_ADDOPTS=(os.environ.get("PYTEST_ADDOPTS", "")
                                               + f" --junitxml={junit}").strip())
        load_before = list(os.getloadavg())
        speed = machine_speed()
        t0 = time.perf_counter()
        rc = subprocess.run(args.command, shell=True, cwd=ROOT, env=env).returncode
        wall = time.perf_counter() - t0
        top, outcomes = slowest(junit) if junit.exists() else ([], {})
        if junit.exists() and rc == 0:
            seconds = {k: round(v, 2) for k, v in scope_seconds(junit).items()}
            SCOPES_OUT.write_text(json.dumps({"schema_version": 1, "seconds": seconds},
                                             indent=1) + "\n")
    record = {"schema_version": SCHEMA_VERSION, "benchmark": "test_suite",
              "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "python": sys.version.split()[0],
                          "cpu_count": os.cpu_count(),
                          "sched_affinity": len(os.sched_getaffinity(0))},
              "load_average": {"before": load_before, "after": list(os.getloadavg())},
              "machine_speed": speed,
              "command": args.command, "exit_code": rc, "wall_s": wall, "outcomes": outcomes,
              "slowest_20": top, "target_s": TARGET_S, "met": rc == 0 and wall <= TARGET_S}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"suite: {wall:.0f} s (target <= {TARGET_S:.0f} s), exit {rc}; wrote {args.out}")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
