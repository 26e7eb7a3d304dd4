"""NUTS for the hand-marginalized Bayesian Dawid–Skene (issue 6 target: ≤ 15 s, r̂ ≤ 1.01).

20,000 tasks × 5 workers, K = 4, data from ``make_synthetic_ds()`` (benchmarks/crowdkit_synthetic.py),
2 chains × (500 warmup + 500 samples). Each chain method runs twice on one MCMC object: the first
run includes compilation, the second ("warm") reuses it; compile ≈ first − warm. Writes
benchmarks/results/nuts_ds_cpu.json. Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_nuts_ds.py``.
The funsor-enumerated comparison of the issue is not run here (not done yet).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS, init_to_value

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from crowdkit_synthetic import make_synthetic_ds  # noqa: E402

try:
    from bda_jax.models import dawid_skene as ds, _diagnostics as dg, inference as inf  # noqa: E402
except ImportError:
    from models import dawid_skene as ds, _diagnostics as dg, inference as inf  # noqa: E402


def main(out=HERE / "results" / "nuts_ds_cpu.json"):
    task, worker, label, truth = make_synthetic_ds()
    t0 = time.perf_counter()
    data = ds.prepare(task, worker, label, K=4)
    prep_s = time.perf_counter() - t0
    votes = np.zeros((data.n_tasks, 4)); np.add.at(votes, (task, label), 1)
    mv_acc = float((votes.argmax(1) == truth).mean())   # ties -> lowest label

    record = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "jax": jax.__version__, "backend": jax.default_backend()},
              "data": {"n_tasks": data.n_tasks, "n_workers": data.n_workers, "K": 4,
                       "n_labels": int(task.size), "n_patterns": data.n_patterns},
              "prepare_s": prep_s, "majority_vote_accuracy": mv_acc,
              "config": {"num_chains": 2, "num_warmup": 500, "num_samples": 500,
                         "prior": ds.DSPrior()._asdict()},
              "runs": {}}
    for method in ("sequential", "vectorized"):
        kernel = NUTS(ds.ds_model, init_strategy=init_to_value(values=ds.default_init(data)))
        mcmc = MCMC(kernel, num_warmup=500, num_samples=500, num_chains=2, chain_method=method,
                    progress_bar=False)
        times = []
        for seed in (0, 1):
            t0 = time.perf_counter()
            mcmc.run(jax.random.key(seed), data, extra_fields=("num_steps",))
            jax.block_until_ready(mcmc.get_samples())
            times.append(time.perf_counter() - t0)
        samples = mcmc.get_samples(group_by_chain=True)
        t0 = time.perf_counter()
        ll = jax.block_until_ready(inf.draws_log_lik(ds.SPEC, samples, data))
        ll_s = time.perf_counter() - t0
        dt = dg.to_datatree(mcmc, ll)
        conv = dg.convergence(dt)
        probs = np.asarray(inf.class_posterior(ds.SPEC, samples, data))
        acc = float((probs.argmax(1) == truth).mean())
        steps = np.asarray(mcmc.get_extra_fields()["num_steps"])
        record["runs"][method] = {
            "first_run_s": times[0], "warm_s": times[1], "compile_s_est": times[0] - times[1],
            "mean_leapfrog_steps": float(steps.mean()),
            "log_lik_s": ll_s, **conv, "accuracy": acc,
            "meets_15s": times[1] <= 15.0, "meets_rhat_1.01": conv["max_rhat"] <= 1.01,
        }
        print(method, json.dumps(record["runs"][method]), flush=True)
    Path(out).write_text(json.dumps(record, indent=2) + "\n")
    return record


if __name__ == "__main__":
    main()
