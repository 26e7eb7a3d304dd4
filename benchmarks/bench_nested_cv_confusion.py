"""Nested leak-free CV of the BDA confusion arm over the paper's full (lambda, tau) grid,
vectorized vs a Python loop.

Workload: the 4,500 simulated binary council traces of ``bench_nested_cv.py`` (1,500 questions
x 3 seeds as clusters, seats at .74/.68/.68, 3 rounds; ``bda_jax.simulate``). Both
implementations run the same protocol in the same process: 5 outer folds (grouped by cluster,
stratified by gold), 5 inner folds per outer training part, the 36-row grid
lambda in {0.3, 1, 3, 10, 30, 100} x tau in {0.1, 0.15, 0.25, 0.5, 0.75, 1} (docs/evaluation.md),
selection on the mean inner multiclass Brier, refit on the outer training part, predictions on
the outer test fold.

* ``bda_jax``: :func:`bda_jax.select_and_predict` with arm ``"bda-confusion"`` -- one compiled
  call for all 5 x 5 x 36 fits. First call (trace + compile + run) and warm calls are timed
  separately.
* ``python_loop``: the straightforward implementation a user would write: Python loops over
  outer folds, inner folds and grid rows; for each, the Dirichlet posterior-mean confusion of
  docs/evaluation.md (uniform-error prior mean, diagonal 0.6, concentration lambda) fitted in float64
  NumPy and the Eq. 4 posterior log pi(g) = tau sum_i sum_h c[t,i,h] log P_i(h | g) (+ const)
  in float64 NumPy, both vectorized over tasks with matrix products (BLAS).

Reported: times, speedup (loop / bda_jax warm median), and agreement (selected rows per outer
fold and the max |difference| of the out-of-fold probabilities). Targets: warm
<= 2 s and >= 20x the loop. Run from the repository root:
``python -m benchmarks.bench_nested_cv_confusion`` (writes
benchmarks/results/nested_cv_confusion_cpu.json).
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
from scipy.special import logsumexp

import bda_jax
from bda_jax.simulate import simulate_council
from benchmarks.bench_nested_cv import timed

TARGET_WARM_S = 2.0
TARGET_SPEEDUP = 20.0
DIAGONAL = 0.6


def loop_reference(counts, outer, inner, grid):
    """Plain Python/NumPy nested CV of the confusion arm; returns (log_proba [T, K], selected
    rows [F, 2])."""
    c = np.asarray(counts.c, np.float64)
    gold = np.asarray(counts.gold)
    gold_missing = np.asarray(counts.gold_missing)
    mask = np.asarray(counts.mask)
    T, I, K = c.shape
    c_flat = c.reshape(T, I * K)
    labeled = ((gold >= 0) | gold_missing).astype(np.float64)
    onehot = (np.arange(K)[None, :] == gold[:, None]).astype(np.float64)   # gold -1: zeros
    off = (1.0 - DIAGONAL) / (K - 1)
    m = np.full((K, K), off) + np.eye(K) * (DIAGONAL - off)
    tiny = np.finfo(np.float32).tiny             # the kernel's clip of zero probabilities

    def fit(w, lam):
        """Dirichlet posterior mean P[i, g, h] from the tasks weighted by w (gold known)."""
        n = ((onehot * w[:, None]).T @ c_flat).reshape(K, I, K).transpose(1, 0, 2)
        return (lam * m[None] + n) / (lam + n.sum(-1, keepdims=True))

    def posterior(P, tau):
        log_p = np.log(np.clip(P, tiny, None))                                   # [I, g, h]
        score = tau * (c_flat @ log_p.transpose(0, 2, 1).reshape(I * K, K))      # [T, g]
        score = np.where(mask, score, -np.inf)
        return score - logsumexp(score, axis=1, keepdims=True)

    def brier(log_p):
        p = np.where(mask, np.exp(log_p), 0.0)
        return np.where(mask, (p - onehot) ** 2, 0.0).sum(1)

    out = np.full((T, K), -np.inf)
    selected = []
    for f in range(int(outer.max()) + 1):
        scores = []
        for lam, tau in grid:
            total = n = 0.0
            for j in range(int(inner[f].max()) + 1):
                train = ((inner[f] >= 0) & (inner[f] != j)) * labeled
                val = (inner[f] == j) * labeled
                total += (brier(posterior(fit(train, lam), tau)) * val).sum()
                n += val.sum()
            scores.append(total / max(n, 1.0))
        best = grid[int(np.argmin(scores))]
        selected.append(best)
        test = outer == f
        out[test] = posterior(fit((outer != f) * labeled, best[0]), best[1])[test]
    return out, np.array(selected)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1500)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=5, help="warm bda_jax runs")
    parser.add_argument("--loop-reps", type=int, default=3, help="Python-loop runs (median)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"
                                             / "nested_cv_confusion_cpu.json"))
    args = parser.parse_args(argv)

    traces = simulate_council(0, args.questions, [0.74, 0.68, 0.68],
                              seeds_per_question=args.seeds)
    counts = bda_jax.tally(traces)
    outer = bda_jax.make_folds(counts, 5, seed=0)
    inner = bda_jax.inner_folds(counts, outer, 5, seed=0)
    grid = bda_jax.GRIDS["bda-confusion"]
    load_start = list(os.getloadavg())

    def ours():
        return jax.block_until_ready(bda_jax.select_and_predict(counts, "bda-confusion", outer,
                                                                inner))

    t0 = time.perf_counter()
    result = ours()
    first = time.perf_counter() - t0
    warm_median, warm_min = timed(ours, args.reps)

    loop_times = []
    for _ in range(args.loop_reps):
        t0 = time.perf_counter()
        ref_lp, ref_sel = loop_reference(counts, outer, inner, grid)
        loop_times.append(time.perf_counter() - t0)
    loop_s = statistics.median(loop_times)

    ours_p = np.where(np.asarray(counts.mask), np.exp(np.asarray(result.log_proba, np.float64)), 0)
    ref_p = np.where(np.asarray(counts.mask), np.exp(ref_lp), 0)
    same_selection = bool(np.allclose(np.asarray(result.selected), ref_sel))
    speedup = loop_s / warm_median
    report = {
        "schema_version": 1,
        "benchmark": "nested_cv_bda_confusion",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "jax": jax.__version__,
                    "numpy": np.__version__, "backend": jax.default_backend(),
                    "loadavg_start": load_start, "loadavg_end": list(os.getloadavg())},
        "workload": {"traces": len(traces), "agents": counts.N.shape[1], "K": counts.e.shape[2],
                     "outer_folds": 5, "inner_folds": 5, "grid_rows": int(grid.shape[0]),
                     "grid": "lambda in {0.3, 1, 3, 10, 30, 100} x tau in "
                             "{0.1, 0.15, 0.25, 0.5, 0.75, 1}",
                     "fits": 5 * 5 * int(grid.shape[0]) + 5},
        "bda_jax": {"first_call_s": first, "warm_median_s": warm_median, "warm_min_s": warm_min,
                    "reps": args.reps},
        "python_loop": {"run_s": loop_s, "runs_s": loop_times,
                        "implementation": "loops over outer x inner folds x grid rows; float64 "
                                          "NumPy fit (Dirichlet posterior mean) and Eq. 4 "
                                          "posterior, matrix products over tasks"},
        "speedup_vs_loop": speedup,
        "selected": np.asarray(result.selected).tolist(),
        "agreement": {"same_selected_rows": same_selection,
                      "max_abs_diff_proba": float(np.abs(ours_p - ref_p).max())},
        "targets": {"warm_s": TARGET_WARM_S, "speedup_vs_loop": TARGET_SPEEDUP},
        "meets_warm_2s": bool(warm_median <= TARGET_WARM_S),
        "meets_speedup_20x": bool(speedup >= TARGET_SPEEDUP),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    os.replace(tmp, out)
    print(f"nested CV, BDA confusion, {len(traces)} traces, 5x5 folds x {grid.shape[0]} grid rows")
    print(f"  bda_jax      warm median {warm_median * 1e3:8.1f} ms (first call {first:.2f} s)")
    print(f"  python loop  {loop_s:8.2f} s")
    print(f"  speedup {speedup:.1f}x; same selections: {same_selection}; "
          f"max |dp| {report['agreement']['max_abs_diff_proba']:.2e}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
