import atexit
import os
import shutil
import tempfile

# One persistent XLA compilation cache per test session (set before anything imports jax; the
# notebook kernels and subprocess tests inherit it): NumPyro re-traces its sampling loop on every
# MCMC.run, and many tests compile identical programs, so a session cache saves minutes. A fresh
# directory each session, removed at exit, so no run reads another run's executables. Under
# pytest-xdist (`make test` runs `-n auto`) the controller process runs this first and its workers
# inherit the variable: every worker reads and writes the same folder and only the controller
# removes it. Every program is kept, however quick to compile (threshold 0 s): a worker, a CLI
# subprocess or a notebook kernel starts cold and would otherwise compile again the hundreds of
# small eager programs (each a few hundredths of a second) the others already compiled.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.mkdtemp(prefix="bda-jax-xla-cache-")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache_dir
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# The report's figures are drawn by this process, not by background workers: the suite already
# keeps both cores busy (`-n auto`), and the tests that spy on matplotlib see only this
# process. The tests of the workers ask for them (``FigureRenderer(workers=...)``, or this
# variable set for one test).
os.environ.setdefault("BDA_JAX_FIGURE_WORKERS", "0")

import numpy as np
import pytest
from hypothesis import settings

# The default run is reproducible (same examples every time, so CI cannot flake on a fresh random
# draw); HYPOTHESIS_PROFILE=explore draws new random examples, more of them.
settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)



# ---- pytest-xdist (`make test`: `-n auto --dist loadscope`): what runs together on one worker.
# A scope is one file (its module-scoped fixtures, a fit, a simulated study, a demo run, are built
# once, not once per worker), except the groups below, which span files: their tests share
# compiled programs or the one local model server, and run on one worker one after another. The
# groups are handed out first (they are the longest units), then the files, most tests first
# (xdist's order).
# (xdist's own `xdist_group` marks need `--dist loadgroup`, which pytest >= 9.2 no longer honours.)
XDIST_GROUPS = {
    # notebook 03 fits its NUTS samplers at test_hierarchical.py's shapes: one compile serves both
    "tests/integration/test_notebooks.py::test_notebook_executes_and_renders_a_figure"
    "[03_model_comparison]": "nuts-council-shapes",
    "tests/models/test_hierarchical.py": "nuts-council-shapes",
    # one llama.cpp server at a time (two would share the cores and slow both)
    "tests/council/test_local.py": "local-model",
    "tests/council/test_live_local.py": "local-model",
}


def xdist_scope(nodeid: str) -> str:
    """The scheduling unit of a test id: its group, else its file."""
    for prefix, group in XDIST_GROUPS.items():
        if nodeid == prefix or nodeid.startswith(prefix + "::"):
            return group
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupedFileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return xdist_scope(nodeid)

        def _assign_work_unit(self, node):
            if not getattr(self, "_ordered", False):          # once, before the first unit
                # longest first (the last run's seconds per scope, SCOPE_SECONDS), so that no
                # long file starts last and keeps one worker busy after the other is done;
                # groups lead, and a scope the record does not know yet counts as 1 s
                known = scope_seconds()
                order = sorted(self.workqueue, key=lambda s: (s not in XDIST_GROUPS.values(),
                                                              -known.get(s, 1.0)))
                for scope in reversed(order):
                    self.workqueue.move_to_end(scope, last=False)
                self._ordered = True
            super()._assign_work_unit(node)

    return GroupedFileScheduling(config, log)


# Seconds per scheduling scope of the last timed run (`python -m benchmarks.bench_suite` writes
# it from the suite's JUnit report; a missing or unreadable file only loses the ordering).
SCOPE_SECONDS = os.path.join(os.path.dirname(__file__), "scope_seconds.json")


def scope_seconds() -> dict:
    import json
    try:
        with open(SCOPE_SECONDS, encoding="utf-8") as f:
            data = json.load(f)
        return {str(k): float(v) for k, v in data["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
