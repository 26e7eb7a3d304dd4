"""Crowd EM speed on the seeded synthetic Dawid-Skene set (20,000 tasks x 5 workers, K = 4):
bda_jax's DawidSkene, OneCoinDawidSkene, GLAD and MACE against crowd-kit 1.4.2's times from the
latest run recorded in benchmarks/results/crowdkit_synthetic.json (run
``python -m benchmarks.crowdkit_synthetic`` with crowd-kit's own virtual environment right
before this script, on the same quiet machine, for an honest ratio).

Same data (``make_synthetic_ds`` regenerates it with NumPy alone), crowd-kit's default tolerance
and iteration caps. Each method runs once cold (compile included, reported separately) and
three times warm (median reported), through the DataFrame surface users call. Writes
benchmarks/results/crowd_em_cpu.json. Run from the repository root:
``python -m benchmarks.bench_crowd_em``.
"""
from __future__ import annotations

import argparse

import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from bda_jax import crowd
from benchmarks.crowdkit_synthetic import make_synthetic_ds

ROOT = Path(__file__).resolve().parents[1]

METHODS = {"DS": lambda: crowd.DawidSkene(n_iter=100, tol=1e-5),
           "OneCoinDS": lambda: crowd.OneCoinDawidSkene(n_iter=100, tol=1e-5,
                                                        prior="estimate"),
           "GLAD": lambda: crowd.GLAD(n_iter=100, tol=1e-5),
           "MACE": lambda: crowd.MACE(n_restarts=10, n_iter=50, seed=0)}


def main(out=ROOT / "benchmarks" / "results" / "crowd_em_cpu.json"):
    task, worker, label, truth = make_synthetic_ds()
    df = pd.DataFrame({"task": task, "worker": worker, "label": label})
    gold = pd.Series(truth, index=np.arange(truth.size))
    ck_path = ROOT / "benchmarks" / "results" / "crowdkit_synthetic.json"
    crowdkit = {}
    if ck_path.exists():
        for run in json.loads(ck_path.read_text())["runs"]:      # latest record per method
            for r in run.get("records", []):
                crowdkit[r["method"]] = {"seconds": r.get("fit_seconds_warm")
                                         or r.get("fit_seconds"), "accuracy": r.get("accuracy"),
                                         "date": run.get("date")}
    rows = []
    for name, make in METHODS.items():
        t0 = time.perf_counter()
        make().fit(df)
        cold = time.perf_counter() - t0
        warm = []
        for _ in range(3):
            t0 = time.perf_counter()
            model = make().fit(df)
            warm.append(time.perf_counter() - t0)
        acc = float((model.labels_.loc[gold.index].to_numpy() == gold.to_numpy()).mean())
        ck = crowdkit.get(name, {})
        row = {"method": name, "seconds_warm_median": statistics.median(warm),
               "seconds_first_call": cold, "accuracy": acc, "n_iter": model.n_iter_,
               "log_likelihood": getattr(model, "log_likelihood_", None),
               "crowdkit_seconds": ck.get("seconds"), "crowdkit_accuracy": ck.get("accuracy"),
               "crowdkit_run": ck.get("date")}
        row["speedup"] = (ck["seconds"] / row["seconds_warm_median"]) if ck.get("seconds") \
            else None
        rows.append(row)
        print(f"{name:10s} warm {row['seconds_warm_median']:.3f} s (first {cold:.2f} s) "
              f"acc {acc:.4f} | crowd-kit {ck.get('seconds')} s acc {ck.get('accuracy')} | "
              f"speed-up {row['speedup'] and round(row['speedup'], 1)}", flush=True)
    record = {"schema_version": 1, "data": "make_synthetic_ds(seed=12345): 20,000 x 5, K = 4",
           "platform": {"python": platform.python_version(), "jax": jax.__version__,
                        "backend": jax.default_backend(), "cpus": os.cpu_count(),
                        "loadavg": list(os.getloadavg())}, "rows": rows}
    Path(out).write_text(json.dumps(record, indent=1, allow_nan=False))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "crowd_em_cpu.json"),
                    help="result JSON (run_all --device gpu writes crowd_em_gpu.json)")
    main(ap.parse_args().out)
