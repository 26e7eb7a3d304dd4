"""Nested leak-free CV of BDA per-agent over the paper's full grid, vectorized vs a Python loop.

Workload: 4,500 simulated binary council traces (1,500 questions x 3 seeds as clusters, seats at
.74/.68/.68, 3 rounds; ``bda_jax.simulate``). Both implementations run the same protocol in the
same process: 5 outer folds (grouped by cluster, stratified by gold), 5 inner folds per outer
training part, the 80-row (b, kappa, s) grid of docs/evaluation.md, selection on the mean inner
multiclass Brier, refit on the outer training part, predictions on the outer test fold.

* ``bda_jax``: :func:`bda_jax.select_and_predict` — one compiled call for all 5 x 5 x 80 fits.
  First call (trace + compile + run) and warm calls are timed separately.
* ``python_loop``: the straightforward implementation a user would write: Python loops over outer
  folds, inner folds and grid rows, NumPy reliabilities, SciPy float64 ``betaln`` posteriors
  (vectorized over tasks).

Reported: times, speedup (loop / bda_jax warm), and agreement (selected rows per outer fold and
the max |difference| of the out-of-fold probabilities). Run from the repository root:
``python -m benchmarks.bench_nested_cv`` (writes benchmarks/results/nested_cv_cpu.json).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import numpy as np
from scipy.special import betaln, logsumexp

import bda_jax
from bda_jax.simulate import simulate_council


def loop_reference(counts, outer, inner, grid):
    """Plain Python/NumPy/SciPy nested CV; returns (log_proba [T,K], selected rows [F, 4])."""
    N = np.asarray(counts.N, np.float64)
    e = np.asarray(counts.e, np.float64)
    c = np.asarray(counts.c, np.float64)
    gold = np.asarray(counts.gold)
    mask = np.asarray(counts.mask)
    K = np.asarray(counts.K)
    T, I, Kmax = e.shape
    c_gold = np.take_along_axis(c, np.maximum(gold, 0)[:, None, None], 2)[..., 0]
    labeled = gold >= 0
    onehot = np.eye(Kmax)[np.maximum(gold, 0)] * labeled[:, None]

    def posterior(train, b, kappa, s):
        den = N[train].sum(0)
        r = np.where(den > 0, c_gold[train].sum(0) / np.maximum(den, 1), 0.0)
        r = np.where(den > 0, r, r[den > 0].mean() if (den > 0).any() else 0.5)
        mu = np.clip(b + kappa * (r - r.mean()), 0.05, 0.95)
        a, bb = (mu * s)[None, :, None], ((1 - mu) * s)[None, :, None]
        score = (betaln(a + c, bb + N[..., None] - c)
                 - (N[..., None] - e) * np.log(np.maximum(K - 1, 1))[:, None, None]).sum(1)
        score = np.where(mask, score, -np.inf)
        return score - logsumexp(score, axis=1, keepdims=True)

    out = np.full((T, Kmax), -np.inf)
    selected = []
    for f in range(int(outer.max()) + 1):
        scores = []
        for row in grid:
            total = n = 0.0
            for j in range(int(inner[f].max()) + 1):
                train = (inner[f] >= 0) & (inner[f] != j) & labeled
                val = (inner[f] == j) & labeled
                p = np.where(mask, np.exp(posterior(train, *row[:3])), 0.0)
                total += (((p - onehot) ** 2) * mask).sum(1)[val].sum()
                n += val.sum()
            scores.append(total / n)
        best = grid[int(np.argmin(scores))]
        selected.append(best)
        test = outer == f
        out[test] = posterior((outer != f) & labeled, *best[:3])[test]
    return out, np.array(selected)


def timed(fn, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1500)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "nested_cv_cpu.json"))
    args = parser.parse_args(argv)

    traces = simulate_council(0, args.questions, [0.74, 0.68, 0.68], seeds_per_question=args.seeds)
    counts = bda_jax.tally(traces)
    outer = bda_jax.make_folds(counts, 5, seed=0)
    inner = bda_jax.inner_folds(counts, outer, 5, seed=0)
    grid = bda_jax.GRIDS["bda-per-agent"]

    def ours():
        return jax.block_until_ready(bda_jax.select_and_predict(counts, "bda-per-agent", outer, inner))

    t0 = time.perf_counter()
    result = ours()
    first = time.perf_counter() - t0
    warm_median, warm_min = timed(ours, args.reps)

    t0 = time.perf_counter()
    ref_lp, ref_sel = loop_reference(counts, outer, inner, grid)
    loop_s = time.perf_counter() - t0

    ours_p = np.where(np.asarray(counts.mask), np.exp(np.asarray(result.log_proba, np.float64)), 0)
    ref_p = np.where(np.asarray(counts.mask), np.exp(ref_lp), 0)
    same_selection = bool(np.allclose(np.asarray(result.selected), ref_sel))
    report = {
        "schema_version": 1,
        "benchmark": "nested_cv_bda_per_agent",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "jax": jax.__version__,
                    "numpy": np.__version__, "backend": jax.default_backend()},
        "workload": {"traces": len(traces), "agents": counts.N.shape[1], "K": counts.e.shape[2],
                     "outer_folds": 5, "inner_folds": 5, "grid_rows": int(grid.shape[0]),
                     "fits": 5 * 5 * int(grid.shape[0]) + 5},
        "bda_jax": {"first_call_s": first, "warm_median_s": warm_median, "warm_min_s": warm_min},
        "python_loop": {"run_s": loop_s},
        "speedup_vs_loop": loop_s / warm_median,
        "agreement": {"same_selected_rows": same_selection,
                      "max_abs_diff_proba": float(np.abs(ours_p - ref_p).max())},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    os.replace(tmp, out)
    print(f"nested CV, BDA per-agent, {len(traces)} traces, 5x5 folds x {grid.shape[0]} grid rows")
    print(f"  bda_jax      warm median {warm_median * 1e3:8.1f} ms (first call {first:.2f} s)")
    print(f"  python loop  {loop_s:8.2f} s")
    print(f"  speedup {loop_s / warm_median:.1f}x; same selections: {same_selection}; "
          f"max |dp| {report['agreement']['max_abs_diff_proba']:.2e}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
