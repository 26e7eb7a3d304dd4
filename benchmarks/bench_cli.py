"""Compile once: cold and warm ``bda demo`` and ``bda fit`` with the persistent compilation cache.

What is measured (from the repository root, on the CPU): each command runs in a fresh
interpreter (``python -m bda_jax ...``, the ``bda`` entry point), timed around the whole
subprocess (interpreter start, imports, reading, compiling or loading compiled programs,
fitting, writing): what a user waits for. ``BDA_JAX_CACHE_DIR`` points at a temporary folder
(``JAX_COMPILATION_CACHE_DIR`` and ``BDA_JAX_COMPILATION_CACHE`` are removed from the child's
environment), so nothing outside this run is read or written.

* ``startup``: ``bda --version`` (imports only): the floor of every call.
* ``fit``: ``bda fit TRACES --out MODEL``, the command as a user types it (the default arm,
  ``auto``: :class:`bda_jax.aggregators.BDAAuto` choosing among the BDA variants by inner CV;
  the default progress bar, on a stderr that is not a terminal), on a 500-task trace file
  written here by :func:`bda_jax.simulate.simulate_council` (seed 0, 250 questions x 2 seeds,
  five seats, 2-4 candidates). ``uncached``: ``--no-compile-cache`` (what every call cost
  before the cache); ``cold``: an empty cache folder; ``warm``: the same folder again. Target:
  warm < 3 s. ``chose``: the line ``bda fit`` prints about the winner (last warm run). For
  context, ``per_agent``: ``--arm bda-per-agent`` (one variant) warm on the same folders.
* ``demo``: ``bda demo --no-resume`` into a temporary folder (every cell recomputed): ``cold``
  with an empty cache folder, ``warm`` the run after it on the same folder. Target: the warm
  run at least 3x faster than the cold one (``speedup`` = cold / warm, both measured here). The
  demo's own section timings (``results.json``, ``run.timings_s``) are kept per run.

Each number is the best of ``--reps`` runs (others share these CPUs; a cold run gets a new empty
folder each time). The cache's size after each command is recorded.

Run::

    python -m benchmarks.bench_cli                          # writes the JSON below (~10 min)
    python -m benchmarks.bench_cli --quick --out /tmp/cli.json    # bda demo --quick, 1 rep
    python -m benchmarks.bench_cli --fit-only --reps 5 --out /tmp/cli.json   # startup and fit

Writes ``benchmarks/results/cli_cpu.json`` (schema_version 2: ``fit`` is the default ``auto``
arm and has ``chose`` and ``per_agent``; ``demo`` is ``null`` with ``--fit-only``; version 1
timed ``--arm bda-per-agent`` alone).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCHEMA_VERSION = 2
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "cli_cpu.json"
FIT_WARM_TARGET_S = 3.0
DEMO_SPEEDUP_TARGET = 3.0
N_QUESTIONS, SEEDS_PER_QUESTION = 250, 2          # 500 tasks
RELIABILITIES = (0.74, 0.70, 0.68, 0.68, 0.66)


def write_traces(path: Path) -> int:
    """The 500-task trace file of the ``fit`` rows; returns its number of tasks."""
    import bda_jax as bda
    from bda_jax.simulate import simulate_council

    traces = simulate_council(0, N_QUESTIONS, RELIABILITIES, seeds_per_question=SEEDS_PER_QUESTION,
                              n_candidates=(2, 4))
    bda.write_traces(traces, path)
    return len(traces)


def child_env(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "BDA_JAX_COMPILATION_CACHE")}
    env.update(BDA_JAX_CACHE_DIR=str(cache), JAX_PLATFORMS="cpu")
    return env


def run_bda(args: list[str], cache: Path) -> float:
    """Wall seconds of ``python -m bda_jax ARGS`` in a fresh interpreter (fails loudly)."""
    return run_bda_output(args, cache)[0]


def run_bda_output(args: list[str], cache: Path) -> tuple[float, str]:
    """:func:`run_bda` and the command's stdout."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bda_jax", *args], cwd=str(ROOT),
                          env=child_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"bda {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def cache_size(cache: Path) -> dict:
    files = [p for p in cache.glob("*-cache") if p.is_file()] if cache.is_dir() else []
    return {"entries": len(files), "mib": sum(p.stat().st_size for p in files) / 2**20}


def fit_rows(work: Path, traces: Path, reps: int) -> dict:
    """The ``fit`` rows: the default command uncached, cold and warm (``reps`` cache folders,
    ``reps`` warm runs each, interleaved with as many warm ``--arm bda-per-agent`` runs)."""
    model = work / "model.json"
    cmd = ["fit", str(traces), "--out", str(model)]
    per_agent = ["fit", str(traces), "--arm", "bda-per-agent", "--out", str(work / "pa.json")]
    uncached = min(run_bda(["--no-compile-cache", *cmd], work / "unused") for _ in range(reps))
    colds, warms, pa_warms, size, chose = [], [], [], {}, None
    for r in range(reps):
        cache = work / f"fit-cache-{r}"
        colds.append(run_bda(cmd, cache))
        size = cache_size(cache)
        run_bda(per_agent, cache)                       # its cold run: not a warm measurement
        for _ in range(reps):
            wall, out = run_bda_output(cmd, cache)
            warms.append(wall)
            chose = next((ln for ln in out.splitlines() if ln.startswith("chose ")), None)
            pa_warms.append(run_bda(per_agent, cache))
    warm = min(warms)
    return {"command": "bda fit TRACES --out MODEL", "arm": "auto", "uncached_s": uncached,
            "cold_s": min(colds), "warm_s": warm, "warm_runs_s": warms, "cache": size,
            "chose": chose,
            "per_agent": {"command": "bda fit TRACES --arm bda-per-agent --out MODEL",
                          "warm_s": min(pa_warms), "warm_runs_s": pa_warms},
            "target": f"warm < {FIT_WARM_TARGET_S:g} s", "met": bool(warm < FIT_WARM_TARGET_S)}


def demo_rows(work: Path, reps: int, quick: bool) -> dict:
    out = work / "demo"
    cmd = ["demo", "--no-resume", "--no-progress", "--out", str(out)] + (["--quick"] if quick
                                                                       else [])
    runs = []
    for r in range(reps):
        cache = work / f"demo-cache-{r}"
        cold = run_bda(cmd, cache)
        cold_sections = json.loads((out / "results.json").read_text())["run"]["timings_s"]
        size = cache_size(cache)
        warm = run_bda(cmd, cache)
        warm_sections = json.loads((out / "results.json").read_text())["run"]["timings_s"]
        runs.append({"cold_s": cold, "warm_s": warm, "cache": size,
                     "cold_sections_s": cold_sections, "warm_sections_s": warm_sections})
    cold, warm = min(r["cold_s"] for r in runs), min(r["warm_s"] for r in runs)
    speedup = cold / warm
    return {"command": "bda demo --no-resume --out DIR" + (" --quick" if quick else ""),
            "cold_s": cold, "warm_s": warm, "speedup": speedup, "runs": runs,
            "target": f"cold / warm >= {DEMO_SPEEDUP_TARGET:g}",
            "met": bool(speedup >= DEMO_SPEEDUP_TARGET and not quick)}


def machine() -> dict:
    import jax
    import numpy as np

    import bda_jax
    return {"platform": platform.platform(), "machine": platform.machine(),
            "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "sched_affinity": len(os.sched_getaffinity(0)), "numpy": np.__version__,
            "jax": jax.__version__, "bda_jax": bda_jax.__version__,
            "load_average": list(os.getloadavg())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2, help="runs per measurement (best kept)")
    ap.add_argument("--quick", action="store_true",
                    help="bda demo --quick (a smoke run: its row is never 'met')")
    ap.add_argument("--fit-only", action="store_true",
                    help="startup and fit rows only (no demo; the file's 'met' is null)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bda-bench-cli-"))
    try:
        traces = work / "traces_500.jsonl"
        n_tasks = write_traces(traces)
        startup = min(run_bda(["--version"], work / "startup-cache") for _ in range(3))
        print(f"startup (bda --version): {startup:.2f} s", flush=True)
        fit = fit_rows(work, traces, max(args.reps, 3))
        print(f"fit (auto): uncached {fit['uncached_s']:.2f} s, cold {fit['cold_s']:.2f} s, "
              f"warm {fit['warm_s']:.2f} s (target < {FIT_WARM_TARGET_S:g} s, met "
              f"{fit['met']}); {fit['chose']}; --arm bda-per-agent warm "
              f"{fit['per_agent']['warm_s']:.2f} s", flush=True)
        demo = None
        if not args.fit_only:
            demo = demo_rows(work, args.reps, args.quick)
            print(f"demo: cold {demo['cold_s']:.1f} s, warm {demo['warm_s']:.1f} s, speedup "
                  f"{demo['speedup']:.1f}x (target >= {DEMO_SPEEDUP_TARGET:g}x, met "
                  f"{demo['met']})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "cli_compile_cache",
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "workload": {"fit_traces": {"n_tasks": n_tasks, "generator": "simulate_council",
                                    "seed": 0, "reliabilities": list(RELIABILITIES),
                                    "n_candidates": [2, 4]},
                     "reps": args.reps, "quick": args.quick, "fit_only": args.fit_only},
        "startup": {"command": "bda --version", "wall_s": startup},
        "fit": fit,
        "demo": demo,
        "met": None if demo is None else bool(fit["met"] and demo["met"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
