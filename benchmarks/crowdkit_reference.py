"""Reference accuracies, timings and convergence traces of crowd-kit 1.4.2 on real crowd datasets.

Standalone: run it with the interpreter of a *separate* virtual environment that holds crowd-kit
(it does not import bda_jax, and crowd-kit must never be installed into the project's .venv)::

    /root/.pyenv/versions/3.12.1/bin/python -m venv /work/crowdkit-venv
    /work/crowdkit-venv/bin/pip install crowd-kit==1.4.2 "scikit-learn<1.6"   # Wawa needs sklearn < 1.6
    /work/crowdkit-venv/bin/python -m benchmarks.crowdkit_reference            # everything
    /work/crowdkit-venv/bin/python -m benchmarks.crowdkit_reference --only zheng_d_product,zheng_s4_relevance --methods DS,MV

What it does, per dataset (the categorical crowd label sets in ``shared/data``, read directly from
the files, because crowd-kit's own downloaders need the network):

* builds a DataFrame ``task, worker, label`` with every column as a *string* (labels too), keeping
  duplicate (task, worker) rows exactly as they are in the files (their count is recorded);
* runs crowd-kit's MajorityVote, Wawa, DawidSkene, OneCoinDawidSkene, GLAD and MACE with
  crowd-kit's defaults (DawidSkene is built as ``DawidSkene(n_iter=100, tol=1e-5)``, which *is*
  its default); every constructor parameter actually used is written out;
* times ``fit_predict`` with ``time.perf_counter`` (a second, "warm" run is done when the first
  one took less than ``--warm-below`` seconds; both are recorded), in a forked child process so
  that a per-fit time cap (``--cap``) can stop a fit that runs too long (then the record says so);
* accuracy on the gold subset only (tasks that have a gold label and at least one answer), plus
  the accuracy with exact ties of ``probas_`` split fractionally (context; crowd-kit itself breaks
  ties with ``DataFrame.idxmax``, i.e. the first maximal column of ``probas_``; with pandas 3.1
  the columns of MajorityVote / DawidSkene / OneCoinDawidSkene / MACE are the labels in order of
  first appearance in the data, those of Wawa / GLAD in sorted string order);
* convergence: ``loss_history_`` (DS / OneCoinDS: ELBO per answer row; GLAD: expected
  complete-data log-likelihood incl. Gaussian priors, per (answer row x label)), its final
  value, the number of iterations run and whether the ``tol`` test fired. MACE exposes nothing
  (fixed ``n_restarts x n_iter`` sweeps, no tolerance); for it the final log marginal likelihood
  is recomputed with crowd-kit's private ``_e_step`` after the fit (outside the timing).

Results: ``benchmarks/results/crowdkit_reference.json`` (schema_version 1). With ``--only`` /
``--methods`` the new records replace the matching (dataset, method) records of an existing file.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import multiprocessing as mp
import os
import platform
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

warnings.filterwarnings("ignore")  # crowd-kit 1.4.2 on recent pandas emits many FutureWarnings

import crowdkit  # noqa: E402
from crowdkit.aggregation import (  # noqa: E402
    GLAD,
    MACE,
    DawidSkene,
    MajorityVote,
    OneCoinDawidSkene,
    Wawa,
)

SCHEMA_VERSION = 1
REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "crowdkit_reference.json"


def _default_data_dir() -> Path:
    for cand in (REPO / "shared" / "data", REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if (cand / "INDEX.md").exists():
            return cand
    return Path("/work/shared/data")


# ----------------------------------------------------------------------------------------------
# Loaders. Each returns (answers DataFrame[task, worker, label] as str, gold Series task -> str,
# info dict). Labels/ids are read as text and stripped (several files have CRLF line endings).
# ----------------------------------------------------------------------------------------------


def _strip(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({c: df[c].astype(str).str.strip() for c in df.columns})
    return out


def _read_csv(path: Path, **kw: Any) -> pd.DataFrame:
    return _strip(pd.read_csv(path, dtype=str, keep_default_na=False, **kw))


def _gold_from_rows(task: pd.Series, gold: pd.Series) -> tuple[pd.Series, int]:
    """Per-row gold -> per-task gold; returns (gold, number of tasks with inconsistent rows)."""
    g = pd.DataFrame({"task": task.values, "gold": gold.values})
    g = g[g["gold"] != ""]
    n_incons = int((g.groupby("task")["gold"].nunique() > 1).sum())
    return g.groupby("task", sort=False)["gold"].first(), n_incons


def load_zheng(folder: str) -> Callable[[Path], tuple]:
    def _load(root: Path) -> tuple:
        d = root / folder
        a = _read_csv(d / "answer.csv")
        a.columns = ["task", "worker", "label"]  # question|id, worker, answer
        t = _read_csv(d / "truth.csv")
        t.columns = ["task", "gold"]
        gold = t.drop_duplicates("task").set_index("task")["gold"]
        return a, gold, {"files": [f"{folder}/answer.csv", f"{folder}/truth.csv"]}

    return _load


def load_zhang(name: str) -> Callable[[Path], tuple]:
    def _load(root: Path) -> tuple:
        d = root / "zhang2016_spectral"
        a = _strip(pd.read_csv(d / f"{name}_crowd.txt", sep=r"\s+", header=None, dtype=str))
        a.columns = ["task", "worker", "label"]
        t = _strip(pd.read_csv(d / f"{name}_truth.txt", sep=r"\s+", header=None, dtype=str))
        t.columns = ["task", "gold"]
        n_incons = int((t.groupby("task")["gold"].nunique() > 1).sum())
        gold = t.drop_duplicates("task").set_index("task")["gold"]
        return a, gold, {
            "files": [f"zhang2016_spectral/{name}_crowd.txt", f"zhang2016_spectral/{name}_truth.txt"],
            "gold_tasks_with_inconsistent_rows": n_incons,
        }

    return _load


def load_snow(name: str) -> Callable[[Path], tuple]:
    def _load(root: Path) -> tuple:
        f = root / "snow2008" / f"{name}.standardized.tsv"
        r = _read_csv(f, sep="\t")
        a = pd.DataFrame({"task": r["orig_id"], "worker": r["!amt_worker_ids"], "label": r["response"]})
        gold, n_incons = _gold_from_rows(r["orig_id"], r["gold"])
        return a, gold, {"files": [f"snow2008/{name}.standardized.tsv"], "gold_tasks_with_inconsistent_rows": n_incons}

    return _load


def load_act(name: str) -> Callable[[Path], tuple]:
    def _load(root: Path) -> tuple:
        f = root / "active_crowd_toolkit" / f"{name}.csv"
        r = _strip(pd.read_csv(f, header=None, dtype=str, keep_default_na=False))
        a = pd.DataFrame({"task": r[1], "worker": r[0], "label": r[2]})
        gold, n_incons = _gold_from_rows(r[1], r[3])
        return a, gold, {
            "files": [f"active_crowd_toolkit/{name}.csv"],
            "columns": "worker,task,label,gold" + (",extra" if r.shape[1] > 4 else ""),
            "gold_tasks_with_inconsistent_rows": n_incons,
        }

    return _load


def load_crowdscale(root: Path) -> tuple:
    d = root / "crowdscale2013_fact_eval"
    a = _read_csv(d / "label.csv")
    a.columns = ["task", "worker", "label"]
    t = _read_csv(d / "truth.csv")
    t.columns = ["task", "gold"]
    gold = t.drop_duplicates("task").set_index("task")["gold"]
    return a, gold, {"files": ["crowdscale2013_fact_eval/label.csv", "crowdscale2013_fact_eval/truth.csv"]}


DATASETS: dict[str, Callable[[Path], tuple]] = {
    "bluebirds": load_zheng("bluebirds"),
    "zheng_d_product": load_zheng("zheng_d_product"),
    "zheng_d_sentiment": load_zheng("zheng_d_sentiment"),
    "zheng_s4_dog": load_zheng("zheng_s4_dog"),
    "zheng_s4_face": load_zheng("zheng_s4_face"),
    "zheng_s4_relevance": load_zheng("zheng_s4_relevance"),
    "zheng_s5_adult": load_zheng("zheng_s5_adult"),
    "zhang2016_bluebird": load_zhang("bluebird"),
    "zhang2016_rte": load_zhang("rte"),
    "zhang2016_trec": load_zhang("trec"),
    "zhang2016_dog": load_zhang("dog"),
    "zhang2016_web": load_zhang("web"),
    "snow2008_rte": load_snow("rte"),
    "snow2008_temp": load_snow("temp"),
    "snow2008_wsd": load_snow("wsd"),
    "act_CF": load_act("CF"),
    "act_CF_amt": load_act("CF_amt"),
    "act_MS": load_act("MS"),
    "act_SP": load_act("SP"),
    "act_SP_amt": load_act("SP_amt"),
    "act_ZenCrowd_all": load_act("ZenCrowd_all"),
    "act_ZenCrowd_in": load_act("ZenCrowd_in"),
    "act_ZenCrowd_us": load_act("ZenCrowd_us"),
    "crowdscale2013_fact_eval": load_crowdscale,
}

# Aliases used in the brief's reference numbers.
ALIASES = {
    "D_Product": "zheng_d_product",
    "D_PosSent": "zheng_d_sentiment",
    "S_Rel": "zheng_s4_relevance",
    "S_Adult": "zheng_s5_adult",
}

METHODS: dict[str, Callable[[], Any]] = {
    "MV": lambda: MajorityVote(),
    "Wawa": lambda: Wawa(),
    "DS": lambda: DawidSkene(n_iter=100, tol=1e-5),
    "OneCoinDS": lambda: OneCoinDawidSkene(),
    "GLAD": lambda: GLAD(),
    "MACE": lambda: MACE(),
}


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return _jsonable(float(v))
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)


def init_params(agg: Any) -> dict:
    """Every constructor (attrs init=True) parameter of a crowd-kit aggregator and its value."""
    import attr

    return {f.name: _jsonable(getattr(agg, f.name)) for f in attr.fields(type(agg)) if f.init}


def derived_params(method: str, agg: Any, df: pd.DataFrame) -> dict:
    K = int(df["label"].nunique())
    if method == "GLAD":
        return {
            "label_prior": "uniform 1/K over the labels present in the data, fixed (never re-estimated)",
            "alpha_init": 1.0,
            "beta_init (log inverse difficulty; a = sigmoid(alpha * exp(beta)))": 1.0,
            "alpha_prior": "N(1, 1) per worker (alphas_priors_mean=None -> 1.0)",
            "beta_prior": "N(1, 1) per task on beta (betas_priors_mean=None -> 1.0)",
            "m_step": f"scipy.optimize.minimize(method='CG', tol={agg.m_step_tol}, maxiter={agg.m_step_max_iter}), warm-started",
            "stop": "Q_t = Q/(n_answer_rows*K) after each M-step; break if Q_t - Q_{t-1} < tol; Q_0 is the UNnormalised Q "
            "after the initial E-step, so iteration 1 never stops",
            "labels": "argmax of the posteriors of the last E-step (computed before the final M-step)",
            "K": K,
        }
    if method == "MACE":
        return {
            "smoothing_used_by_fit": 0.01 / K,
            "smoothing_note": "fit() sets smoothing_ = 0.01 / n_labels; it is used only by method='em'",
            "theta_priors (Beta on [spam, know])": [agg.alpha, agg.beta],
            "strategy_priors (Dirichlet per label)": 10.0,
            "init": "scipy.stats.uniform(loc=1, scale=1+default_noise).rvs(random_state=random_state), rows normalised",
            "restarts_identical": "every restart re-seeds with the same random_state, so all n_restarts runs are identical",
            "label_prior": "uniform 1/K (fixed)",
            "convergence_test": "none: always n_restarts x n_iter E/M sweeps",
            "quirk_index_alignment": "in _e_step, strategy_expected_counts comes from groupby(['worker','label']).unstack() "
            "(sorted worker rows, sorted label columns) but is used positionally (.values) against pd.factorize order "
            "(first appearance) of workers and labels; so the per-worker spam distributions are permuted and results depend "
            "on id strings / row order (e.g. bluebirds vs zhang2016_bluebird: identical data, different ids)",
            "K": K,
        }
    if method in ("DS", "OneCoinDS"):
        return {
            "init": "probas = MajorityVote().fit_predict_proba(data) (vote fractions); priors = probas.mean(); errors = M-step(probas)",
            "stop": "after iteration t: break if L_t - L_{t-1} < tol (L_0 = -inf), L = crowd-kit's 'ELBO' / n_answer_rows",
            "loss_quirk": "crowd-kit's ELBO adds log prior once per ANSWER row (not once per task), so L is not the exact ELBO and "
            "can decrease; a decrease (or a rise < tol) stops the loop; see ds_numpy_reference",
            "eps_clip": 1e-10,
            "K": K,
        }
    return {"K": K}


def ds_numpy_reference(df: pd.DataFrame, n_iter: int = 100, tol: float = 1e-5, onecoin: bool = False) -> tuple:
    """NumPy re-statement of crowd-kit 1.4.2 DawidSkene / OneCoinDawidSkene.fit (no true_labels, no
    initial_error), written to pin down the exact algorithm; it reproduces ``loss_history_`` to
    ~1e-14 and the labels exactly (checked per dataset, see ``numpy_reimplementation_check``).

    * labels sorted (string order) -> columns 0..K-1; duplicates count as separate answers.
    * init: q = majority-vote fractions per task; then p, e = M(q).
    * M-step: p = mean_t q[t]; DS: n[w, l, c] = sum over w's answers with label l of q[task, c],
      kept only for labels l the worker used, clipped below at 1e-10, normalised over l
      (per worker and true class c). One-coin: s_w = mean over w's answers of q[task, answer],
      e[w, l, c] = s_w if l == c else (1 - s_w) / (K - 1), clipped to [1e-10, 1 - 1e-10].
    * E-step: log q[t, c] = log max(p_c, 1e-10) + sum_answers log e[w, l, c], softmax over c.
    * loop (at most n_iter times): q = E(p, e); p, e = M(q);
      L = [sum_answers sum_c q[t,c] (log e[w,l,c] + log max(p_c,1e-10)) - sum_t sum_c q' log q'] / n_answers
      with q' = max(q, 1e-10); note the log prior is counted once per ANSWER, not once per task,
      so L is not the exact ELBO and need not increase; break if L - L_prev < tol (L_prev = -inf
      at the first iteration); the returned labels are argmax of the last q (first max wins).
    """
    EPS = 1e-10
    t, tn = pd.factorize(df["task"])
    w, wn = pd.factorize(df["worker"])
    labs = np.array(sorted(df["label"].unique()))
    lab = np.searchsorted(labs, df["label"].to_numpy())
    T, W, K, N = len(tn), len(wn), len(labs), len(df)
    C = np.zeros((T, K))
    np.add.at(C, (t, lab), 1.0)
    q = C / C.sum(1, keepdims=True)
    used = np.zeros((W, K), bool)
    used[w, lab] = True

    def mstep(q: np.ndarray) -> tuple:
        p = q.mean(0)
        if not onecoin:
            n = np.zeros((W, K, K))
            np.add.at(n, (w, lab), q[t])
            n = np.where(used[:, :, None], np.maximum(n, EPS), 0.0)
            return p, n / n.sum(1, keepdims=True)
        s = np.bincount(w, q[t, lab], W) / np.bincount(w, None, W)
        e = np.where(np.eye(K, dtype=bool)[None], s[:, None, None], ((1 - s) / (K - 1))[:, None, None])
        return p, np.clip(e, EPS, 1 - EPS)

    def estep(p: np.ndarray, e: np.ndarray) -> np.ndarray:
        ll = np.zeros((T, K)) + np.log(np.maximum(p, EPS))[None]
        np.add.at(ll, t, np.log(e[w, lab]))
        ll -= ll.max(1, keepdims=True)
        q = np.exp(ll)
        return q / q.sum(1, keepdims=True)

    def loss(q: np.ndarray, p: np.ndarray, e: np.ndarray) -> float:
        joint = (q[t] * (np.log(e[w, lab]) + np.log(np.maximum(p, EPS))[None])).sum()
        qc = np.maximum(q, EPS)
        return float((joint - (qc * np.log(qc)).sum()) / N)

    p, e = mstep(q)
    hist: list[float] = []
    prev = -np.inf
    for _ in range(n_iter):
        q = estep(p, e)
        p, e = mstep(q)
        L = loss(q, p, e)
        hist.append(L)
        if L - prev < tol:
            break
        prev = L
    return pd.Series(labs[q.argmax(1)], index=tn), hist


def _numpy_check(method: str, agg: Any, df: pd.DataFrame, pred: pd.Series) -> dict:
    t0 = time.perf_counter()
    mine, hist = ds_numpy_reference(df, int(agg.n_iter), float(agg.tol), onecoin=(method == "OneCoinDS"))
    secs = time.perf_counter() - t0
    ck = np.asarray(agg.loss_history_, dtype=float)
    same_len = len(ck) == len(hist)
    return {
        "same_n_iterations": same_len,
        "n_iterations_numpy": len(hist),
        "max_abs_loss_diff": float(np.max(np.abs(ck - np.asarray(hist)))) if same_len else None,
        "label_agreement": float((pred.reindex(mine.index.astype(str)).to_numpy() == mine.to_numpy().astype(str)).mean()),
        "numpy_seconds": secs,
    }


def _argmax_tie_stats(probas: pd.DataFrame, pred: pd.Series, gold: pd.Series) -> dict:
    p = probas.loc[gold.index]
    vals = p.to_numpy(dtype=float)
    mx = vals.max(axis=1, keepdims=True)
    is_max = vals == mx
    n_max = is_max.sum(axis=1)
    cols = np.asarray([str(c) for c in p.columns])
    gold_in = np.array([g in set(cols[row]) for g, row in zip(gold.values, is_max)])
    frac = np.where(gold_in, 1.0 / n_max, 0.0)
    all_vals = probas.to_numpy(dtype=float)
    all_ties = int(((all_vals == all_vals.max(axis=1, keepdims=True)).sum(axis=1) > 1).sum())
    return {
        "accuracy_ties_split": float(frac.mean()),
        "n_gold_tasks_with_exact_tie": int((n_max > 1).sum()),
        "n_tasks_with_exact_tie": all_ties,
    }


def _convergence(method: str, agg: Any, df: pd.DataFrame) -> dict:
    if method in ("DS", "OneCoinDS", "GLAD"):
        hist = [float(x) for x in getattr(agg, "loss_history_", [])]
        n_iter = int(agg.n_iter)
        last_delta = hist[-1] - hist[-2] if len(hist) >= 2 else None
        stopped_by_tol = bool(len(hist) < n_iter or (last_delta is not None and last_delta < agg.tol))
        what = {
            "DS": "ELBO / n_answer_rows (E-step posteriors with the following M-step's priors/errors), increasing",
            "OneCoinDS": "ELBO / n_answer_rows (same formula as DS with one-coin error matrices)",
            "GLAD": "Q / (n_answer_rows * K): expected complete log-lik + log N(alpha-1) + log N(beta-1), increasing",
        }[method]
        return {
            "exposed": "loss_history_",
            "loss_definition": what,
            "n_iterations_run": len(hist),
            "n_iter_cap": n_iter,
            "tol": float(agg.tol),
            "stopped_by_tol": stopped_by_tol,
            "final_loss": _jsonable(hist[-1]) if hist else None,
            "last_delta": _jsonable(last_delta),
            "loss_history": _jsonable(hist),
        }
    if method == "MACE":
        workers, worker_names = pd.factorize(df["worker"])
        labels, label_names = pd.factorize(df["label"])
        tasks, task_names = pd.factorize(df["task"])
        ll, _, _, _ = agg._e_step(df.copy(deep=True), task_names, worker_names, label_names, tasks, workers, labels)
        return {
            "exposed": "nothing (no loss_history_)",
            "n_sweeps": int(agg.n_restarts) * int(agg.n_iter),
            "final_log_marginal_likelihood": _jsonable(float(ll)),
            "final_log_marginal_likelihood_note": "sum_task log(sum_k prod_answers p(a|k)/K + 1e-8), recomputed with the private _e_step after fit",
        }
    return {"exposed": "nothing (closed form, no iterations)"}


def run_one(method: str, df: pd.DataFrame, gold: pd.Series, warm_below: float) -> dict:
    agg = METHODS[method]()
    params = init_params(agg)
    t0 = time.perf_counter()
    pred = agg.fit_predict(df)
    t1 = time.perf_counter()
    rec: dict[str, Any] = {"fit_seconds": t1 - t0, "fit_seconds_warm": None}
    if t1 - t0 < warm_below:
        agg2 = METHODS[method]()
        t2 = time.perf_counter()
        pred2 = agg2.fit_predict(df)
        rec["fit_seconds_warm"] = time.perf_counter() - t2
        rec["warm_run_same_labels"] = bool((pred2.reindex(pred.index).astype(str) == pred.astype(str)).all())
    pred = pred.astype(str)
    pred.index = pred.index.astype(str)
    g = gold[gold.index.isin(pred.index)]
    correct = pred.loc[g.index].values == g.values
    rec["accuracy"] = float(correct.mean()) if len(g) else None
    rec["n_correct"] = int(correct.sum())
    probas = agg.probas_.copy()
    probas.index = probas.index.astype(str)
    probas.columns = [str(c) for c in probas.columns]
    rec.update(_argmax_tie_stats(probas, pred, g))
    rec["params"] = params
    rec["derived_params"] = derived_params(method, agg, df)
    rec["convergence"] = _convergence(method, agg, df)
    if method in ("DS", "OneCoinDS"):
        rec["numpy_reimplementation_check"] = _numpy_check(method, agg, df, pred)
    rec["pred_label_counts"] = {str(k): int(v) for k, v in pred.value_counts().sort_index().items()}
    return rec


def _child(q: Any, method: str, df: pd.DataFrame, gold: pd.Series, warm_below: float) -> None:
    try:
        q.put(("ok", run_one(method, df, gold, warm_below)))
    except BaseException:  # noqa: BLE001
        q.put(("error", traceback.format_exc()))


def run_capped(method: str, df: pd.DataFrame, gold: pd.Series, warm_below: float, cap: float, fork: bool) -> dict:
    if not fork:
        try:
            return {"status": "ok", **run_one(method, df, gold, warm_below)}
        except Exception:  # noqa: BLE001
            return {"status": "error", "error": traceback.format_exc()}
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, method, df, gold, warm_below))
    start = time.perf_counter()
    p.start()
    res = None
    # The child times itself; the cap is applied to the wall time of the whole child (first fit,
    # plus a warm rerun only when the first fit was shorter than --warm-below).
    while True:
        remaining = cap + 2 * warm_below + 30 - (time.perf_counter() - start)
        try:
            res = q.get(timeout=max(0.5, min(5.0, remaining)))
            break
        except Exception:  # queue.Empty
            if not p.is_alive():
                break
            if time.perf_counter() - start > cap:
                p.terminate()
                p.join(5)
                return {"status": "skipped_time_cap", "reason": f"fit still running after the per-fit cap of {cap:.0f} s; child process terminated"}
    p.join(10)
    if res is None:
        return {"status": "error", "error": f"child exited with code {p.exitcode} and no result"}
    kind, payload = res
    if kind == "ok":
        return {"status": "ok", **payload}
    return {"status": "error", "error": payload}


def describe(df: pd.DataFrame, gold: pd.Series) -> dict:
    labels = sorted(df["label"].unique())
    dup = df.duplicated(["task", "worker"], keep=False)
    dup_pairs = int(df[dup].drop_duplicates(["task", "worker"]).shape[0])
    g = gold[gold.index.isin(set(df["task"]))]
    mv_counts = df.groupby(["task", "label"]).size().unstack(fill_value=0)
    mvg = mv_counts.loc[g.index]
    ties = int(((mvg.values == mvg.values.max(axis=1, keepdims=True)).sum(axis=1) > 1).sum())
    return {
        "n_tasks": int(df["task"].nunique()),
        "n_workers": int(df["worker"].nunique()),
        "n_labels": int(len(df)),
        "K": len(labels),
        "labels": labels,
        "n_gold": int(len(g)),
        "n_gold_rows_in_file": int(len(gold)),
        "gold_labels_not_in_answers": sorted(set(g.values) - set(labels)),
        "duplicate_task_worker_rows": int(dup.sum() - dup_pairs),
        "duplicate_task_worker_pairs": dup_pairs,
        "duplicates_kept": True,
        "n_gold_tasks_with_mv_tie": ties,
    }


def machine_info() -> dict:
    try:
        aff = len(os.sched_getaffinity(0))
    except AttributeError:
        aff = None
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": aff,
        "python": sys.version.split()[0],
        "loadavg_1_5_15_at_write": list(os.getloadavg()),
        "note": "timings are wall-clock on a shared machine; other processes may have been running (see loadavg_before per record)",
    }


def versions() -> dict:
    import scipy
    import sklearn

    return {
        "crowd-kit": crowdkit.__version__ if hasattr(crowdkit, "__version__") else _dist_version("crowd-kit"),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "scikit-learn": sklearn.__version__,
        "scipy": scipy.__version__,
        "python": sys.version.split()[0],
    }


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated dataset names (or aliases D_Product, D_PosSent, S_Rel, S_Adult)")
    ap.add_argument("--methods", default="", help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--data-dir", type=Path, default=_default_data_dir())
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--cap", type=float, default=600.0, help="per-fit wall-time cap in seconds (default 600)")
    ap.add_argument("--warm-below", type=float, default=10.0, help="do a second (warm) fit when the first took less (s)")
    ap.add_argument("--no-fork", action="store_true", help="run fits in-process (no time cap)")
    ap.add_argument("--skip", default="", help="comma-separated DATASET:METHOD pairs to skip (recorded with the reason 'skipped by --skip')")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)

    if args.list:
        print("\n".join(DATASETS))
        return 0
    names = [ALIASES.get(n.strip(), n.strip()) for n in args.only.split(",") if n.strip()] or list(DATASETS)
    for n in names:
        if n not in DATASETS:
            ap.error(f"unknown dataset {n!r}; use --list")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] or list(METHODS)
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; choose from {list(METHODS)}")
    skip = {tuple(s.split(":", 1)) for s in args.skip.split(",") if ":" in s}

    out: dict[str, Any] = {}
    if args.out.exists() and (args.only or args.methods):
        try:
            out = json.loads(args.out.read_text())
            if out.get("schema_version") != SCHEMA_VERSION:
                out = {}
        except (OSError, ValueError):
            out = {}
    datasets_meta = out.get("datasets", {})
    records = {(r["dataset"], r["method"]): r for r in out.get("records", [])}

    t_all = time.perf_counter()
    run_started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for name in names:
        t_load = time.perf_counter()
        df, gold, info = DATASETS[name](args.data_dir)
        df = df[["task", "worker", "label"]].reset_index(drop=True)
        gold.index = gold.index.astype(str)
        gold = gold.astype(str)
        meta = {**info, **describe(df, gold), "load_seconds": time.perf_counter() - t_load}
        datasets_meta[name] = meta
        g = gold[gold.index.isin(set(df["task"]))]
        print(f"[{name}] tasks={meta['n_tasks']} workers={meta['n_workers']} answers={meta['n_labels']} K={meta['K']} "
              f"gold={meta['n_gold']} dup_rows={meta['duplicate_task_worker_rows']}", flush=True)
        for method in methods:
            base = {
                "dataset": name,
                "method": method,
                "n_tasks": meta["n_tasks"],
                "n_workers": meta["n_workers"],
                "n_labels": meta["n_labels"],
                "n_gold": meta["n_gold"],
                "K": meta["K"],
            }
            if (name, method) in skip:
                rec = {**base, "status": "skipped", "reason": "skipped by --skip"}
            else:
                base["loadavg_before"] = list(os.getloadavg())
                base["per_fit_cap_s"] = args.cap
                base["run_started"] = run_started
                rec = {**base, **run_capped(method, df, g, args.warm_below, args.cap, not args.no_fork)}
            records[(name, method)] = rec
            if rec["status"] == "ok":
                conv = rec["convergence"]
                it = conv.get("n_iterations_run", conv.get("n_sweeps", ""))
                warm = rec["fit_seconds_warm"]
                print(f"   {method:10s} acc={rec['accuracy']:.4f} (ties split {rec['accuracy_ties_split']:.4f}) "
                      f"fit={rec['fit_seconds']:.2f}s" + (f" warm={warm:.2f}s" if warm is not None else "")
                      + f" iters={it}", flush=True)
            else:
                print(f"   {method:10s} {rec['status']}: {rec.get('reason') or rec.get('error', '')[-500:]}", flush=True)
            # write after every fit so partial progress survives
            _write(args, out, datasets_meta, records)
    print(f"total {time.perf_counter() - t_all:.1f} s -> {args.out}")
    return 0


def _write(args: argparse.Namespace, out: dict, datasets_meta: dict, records: dict) -> None:
    order = {n: i for i, n in enumerate(DATASETS)}
    morder = {m: i for i, m in enumerate(METHODS)}
    doc = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "benchmarks/crowdkit_reference.py",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "machine": machine_info(),
        "settings": {
            "data_dir": str(args.data_dir),
            "per_fit_cap_s": f"{args.cap} in the latest invocation; each record carries the cap it ran under",
            "warm_rerun_below_s": args.warm_below,
            "timed_call": "fit_predict(df) in a forked child, time.perf_counter" if not args.no_fork else "fit_predict(df) in-process, time.perf_counter",
            "labels": "all ids and labels read as strings (stripped); duplicate (task, worker) rows kept",
            "accuracy": "mean(pred == gold) over tasks that have gold and at least one answer; crowd-kit's own tie-break (idxmax = first column)",
        },
        "crowdkit_defaults": {m: init_params(METHODS[m]()) for m in METHODS},
        "tie_breaking": {
            "rule": "every method returns probas_.idxmax(axis=1): an exact tie goes to the first maximal column of probas_",
            "MV": "probas_ = data[['task','label']].value_counts().unstack('label') row-normalised; with pandas 3.1 the MultiIndex levels "
            "(hence the columns) are in order of first appearance of each label in the data, so a tie goes to the label that occurs "
            "first in the file (pandas-version dependent: older pandas gave sorted levels)",
            "Wawa": "weighted MV via groupby(['task','label']).sum().unstack(): columns in sorted (string) label order",
            "DS/OneCoinDS": "columns inherited from the MajorityVote initialisation: first-appearance order",
            "GLAD": "groupby(['task','variable']) (sort=True) then unstack: sorted (string) label order",
            "MACE": "pd.factorize(data['label']): first-appearance order",
        },
        "datasets": dict(sorted(datasets_meta.items(), key=lambda kv: order.get(kv[0], 999))),
        "records": [records[k] for k in sorted(records, key=lambda k: (order.get(k[0], 999), morder.get(k[1], 99)))],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_jsonable(doc), indent=1))
    tmp.replace(args.out)


if __name__ == "__main__":
    sys.exit(main())
