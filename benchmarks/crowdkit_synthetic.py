"""crowd-kit 1.4.2 on a seeded synthetic Dawid-Skene data set: 20,000 tasks x 5 workers, K = 4.

Standalone: run from the repository root with the interpreter of crowd-kit's own virtual
environment (never the project's .venv; it does not import bda_jax)::

    /work/crowdkit-venv/bin/python -m benchmarks.crowdkit_synthetic

The data come from :func:`make_synthetic_ds` below, which uses NumPy only and can be copied as
is (e.g. into bda_jax's tests) to regenerate the identical data:

* class prior ``PRIOR = [0.40, 0.30, 0.20, 0.10]`` over labels 0..3;
* five fixed per-worker confusion matrices ``CONF[w, true, observed]`` (rows sum to 1; listed
  below; no randomness in them);
* ``rng = np.random.default_rng(seed)`` (PCG64, default seed 12345); only ``rng.random`` is used
  (its stream is stable across NumPy versions), and categorical draws are made by inverse CDF:
  first ``u = rng.random(n_tasks)``, ``truth[t] = #{k < K-1 : u[t] >= cumsum(PRIOR)[k]}``; then
  ``v = rng.random((n_tasks, n_workers))`` (row-major: task-major, worker-minor) and
  ``label[t, w] = #{k < K-1 : v[t, w] >= cumsum(CONF[w, truth[t]])[k]}``;
* every worker labels every task (dense, no duplicates), long format ordered task-major:
  row ``t * n_workers + w`` = (task t, worker w, label[t, w]); ids and labels are integers
  (written as strings for crowd-kit, like the real data sets).

The answers go to ``benchmarks/results/synthetic_ds_20k.csv.gz`` (``task,worker,label``) and the
truth to ``benchmarks/results/synthetic_ds_20k_gold.csv.gz`` (``task,truth``) when both together
are under 1 MB (otherwise only the generator and checksums are recorded). crowd-kit's
MajorityVote (context), DawidSkene, OneCoinDawidSkene, GLAD and MACE are then fitted with their
defaults (timed with ``time.perf_counter`` in a forked child with a per-fit cap, a warm rerun for
fits under ``--warm-below`` s), and one run record (accuracy on all tasks, timings, parameters,
convergence, plus the Bayes-optimal accuracy under the true parameters) is *appended* to
``benchmarks/results/crowdkit_synthetic.json``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import hashlib
import io
import json
import sys
from pathlib import Path

import numpy as np

PRIOR = np.array([0.40, 0.30, 0.20, 0.10])
# CONF[w, true, observed]
CONF = np.array(
    [
        # w0: good, symmetric errors
        [[0.85, 0.05, 0.05, 0.05], [0.05, 0.85, 0.05, 0.05], [0.05, 0.05, 0.85, 0.05], [0.05, 0.05, 0.05, 0.85]],
        # w1: confuses adjacent classes
        [[0.75, 0.20, 0.03, 0.02], [0.10, 0.75, 0.12, 0.03], [0.03, 0.12, 0.75, 0.10], [0.02, 0.03, 0.20, 0.75]],
        # w2: class-dependent accuracy
        [[0.90, 0.04, 0.03, 0.03], [0.15, 0.70, 0.10, 0.05], [0.10, 0.15, 0.60, 0.15], [0.10, 0.10, 0.20, 0.60]],
        # w3: biased toward label 0
        [[0.80, 0.10, 0.05, 0.05], [0.35, 0.55, 0.05, 0.05], [0.35, 0.05, 0.55, 0.05], [0.35, 0.05, 0.05, 0.55]],
        # w4: near-spammer that mostly answers 1
        [[0.30, 0.50, 0.10, 0.10], [0.10, 0.70, 0.10, 0.10], [0.10, 0.50, 0.30, 0.10], [0.10, 0.50, 0.10, 0.30]],
    ]
)


def make_synthetic_ds(seed: int = 12345, n_tasks: int = 20000, prior: np.ndarray = PRIOR, conf: np.ndarray = CONF):
    """NumPy-only Dawid-Skene generator. Returns (task, worker, label, truth) int64 arrays;
    task/worker/label have n_tasks * n_workers entries in task-major order, truth has n_tasks."""
    prior = np.asarray(prior, dtype=np.float64)
    conf = np.asarray(conf, dtype=np.float64)
    n_workers = conf.shape[0]
    rng = np.random.default_rng(seed)
    u = rng.random(n_tasks)
    truth = (u[:, None] >= np.cumsum(prior)[None, :-1]).sum(axis=1)
    v = rng.random((n_tasks, n_workers))
    cdf = np.cumsum(conf[np.arange(n_workers)[None, :], truth[:, None]], axis=-1)  # [T, W, K]
    labels = (v[..., None] >= cdf[..., :-1]).sum(axis=-1)
    task = np.repeat(np.arange(n_tasks), n_workers)
    worker = np.tile(np.arange(n_workers), n_tasks)
    return task.astype(np.int64), worker.astype(np.int64), labels.reshape(-1).astype(np.int64), truth.astype(np.int64)


def bayes_posterior(task, worker, label, n_tasks, prior=PRIOR, conf=CONF):
    """Exact posterior under the true parameters (the Bayes-optimal reference)."""
    ll = np.zeros((n_tasks, len(prior))) + np.log(prior)[None]
    np.add.at(ll, task, np.log(conf[worker, :, label]))
    ll -= ll.max(1, keepdims=True)
    p = np.exp(ll)
    return p / p.sum(1, keepdims=True)


def _csv_gz(header: str, cols: list[np.ndarray]) -> bytes:
    buf = io.StringIO()
    buf.write(header + "\n")
    np.savetxt(buf, np.column_stack(cols), fmt="%d", delimiter=",")
    raw = buf.getvalue().encode()
    return gzip.compress(raw, compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--methods", default="MV,DS,OneCoinDS,GLAD,MACE")
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--warm-below", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=here / "results" / "crowdkit_synthetic.json")
    ap.add_argument("--data-out", type=Path, default=here / "results" / "synthetic_ds_20k.csv.gz")
    ap.add_argument("--no-save-data", action="store_true")
    args = ap.parse_args(argv)

    import pandas as pd

    # the sibling module: same crowd-kit runner, versions, machine info (imported here: it
    # imports crowd-kit, which only crowd-kit's venv has; make_synthetic_ds needs NumPy alone)
    from benchmarks import crowdkit_reference as ref

    task, worker, label, truth = make_synthetic_ds(args.seed, args.tasks)
    n_workers, K = CONF.shape[0], CONF.shape[1]
    arr_sha = hashlib.sha256(np.stack([task, worker, label]).astype("<i8").tobytes() + truth.astype("<i8").tobytes()).hexdigest()
    data_info = {
        "generator": "make_synthetic_ds in benchmarks/crowdkit_synthetic.py (NumPy only; copyable)",
        "seed": args.seed,
        "rng": "np.random.default_rng(seed) (PCG64); draws: rng.random(n_tasks) for truth, then rng.random((n_tasks, n_workers)) for labels; inverse-CDF categorical",
        "n_tasks": args.tasks,
        "n_workers": n_workers,
        "K": K,
        "n_labels": int(len(label)),
        "prior": PRIOR.tolist(),
        "conf[w][true][observed]": CONF.tolist(),
        "truth_counts": np.bincount(truth, minlength=K).tolist(),
        "label_counts": np.bincount(label, minlength=K).tolist(),
        "first_10_truth": truth[:10].tolist(),
        "first_10_labels_task0_1": label[: 2 * n_workers].tolist(),
        "sha256_of_int64_le(task,worker,label stacked; then truth)": arr_sha,
    }
    post = bayes_posterior(task, worker, label, args.tasks)
    data_info["bayes_optimal_accuracy_true_params"] = float((post.argmax(1) == truth).mean())
    emp = np.zeros((n_workers, K, K))
    np.add.at(emp, (worker, truth[task], label), 1)
    data_info["empirical_worker_accuracy"] = (np.trace(emp, axis1=1, axis2=2) / emp.sum((1, 2))).round(4).tolist()

    if not args.no_save_data:
        ans = _csv_gz("task,worker,label", [task, worker, label])
        gold = _csv_gz("task,truth", [np.arange(args.tasks), truth])
        gold_path = args.data_out.with_name(args.data_out.name.replace(".csv.gz", "_gold.csv.gz"))
        total = len(ans) + len(gold)
        if total < 1_000_000:
            args.data_out.parent.mkdir(parents=True, exist_ok=True)
            args.data_out.write_bytes(ans)
            gold_path.write_bytes(gold)
            def _rel(p: Path) -> str:
                try:
                    return str(p.resolve().relative_to(here.parent))
                except ValueError:
                    return str(p)

            data_info["files"] = {
                _rel(args.data_out): {"bytes": len(ans), "sha256": hashlib.sha256(ans).hexdigest()},
                _rel(gold_path): {"bytes": len(gold), "sha256": hashlib.sha256(gold).hexdigest()},
            }
        else:
            data_info["files"] = f"not saved: {total} bytes >= 1 MB; regenerate with make_synthetic_ds"
    print(f"data: {args.tasks} tasks x {n_workers} workers, K={K}; Bayes-optimal acc {data_info['bayes_optimal_accuracy_true_params']:.4f}", flush=True)

    df = pd.DataFrame({"task": task.astype(str), "worker": worker.astype(str), "label": label.astype(str)})
    gold_s = pd.Series(truth.astype(str), index=pd.Index(np.arange(args.tasks).astype(str)))
    records = []
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        load = list(__import__("os").getloadavg())
        rec = {"method": method, "loadavg_before": load, **ref.run_capped(method, df, gold_s, args.warm_below, args.cap, True)}
        records.append(rec)
        if rec["status"] == "ok":
            conv = rec["convergence"]
            it = conv.get("n_iterations_run", conv.get("n_sweeps", ""))
            w = rec["fit_seconds_warm"]
            print(f"   {method:10s} acc={rec['accuracy']:.4f} fit={rec['fit_seconds']:.2f}s" + (f" warm={w:.2f}s" if w is not None else "") + f" iters={it}", flush=True)
        else:
            print(f"   {method:10s} {rec['status']}: {rec.get('reason') or rec.get('error', '')[-500:]}", flush=True)

    run = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": ref.versions(),
        "machine": ref.machine_info(),
        "settings": {"per_fit_cap_s": args.cap, "warm_rerun_below_s": args.warm_below, "timed_call": "fit_predict(df) in a forked child, time.perf_counter"},
        "data": data_info,
        "records": records,
    }
    doc = {"schema_version": 1, "generated_by": "benchmarks/crowdkit_synthetic.py", "runs": []}
    if args.out.exists():
        try:
            old = json.loads(args.out.read_text())
            if old.get("schema_version") == 1:
                doc = old
        except ValueError:
            pass
    doc["runs"].append(run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(ref._jsonable(doc), indent=1))
    print(f"appended run {len(doc['runs'])} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
