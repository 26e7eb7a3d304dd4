"""Fit an arm on traces into a model file, and predict with a model file: the library side of
``bda fit`` and ``bda predict`` (the CLI only parses options and formats these results)."""
from __future__ import annotations

import time
from typing import Sequence

import jax
import numpy as np

from .._core.conformal import set_coverage
from .._core.counts import tally
from .._core.errors import DataError
from .._core.fitting import labeled_count
from .._core.traces import Trace
from ._artifacts import (ModelArtifact, check_agents, check_model_out, fingerprint_counts,
                         save_model)
from ._evaluation import fitted_hyperparameters, is_supervised, make_arm

__all__ = ["fit_model_file", "predict_tasks"]


def fit_model_file(traces: Sequence[Trace], arm: str, out, *, seed: int = 0,
                   source: str | None = None) -> dict:
    """Fit arm ``arm`` (a name of :data:`ARMS`, or an ``iso:`` / ``temp:`` wrapper) on labeled
    ``traces`` and save it to ``out`` (:func:`save_model`, with the training data's fingerprint).

    ``source`` names the trace file in errors and in the model's metadata. A supervised arm needs
    at least 2 labeled tasks (:class:`~bda_jax.DataError` on field ``gold`` otherwise). Returns the
    summary ``bda fit --json`` prints: ``model``, ``arm``, ``estimator``, ``agents``, ``n_tasks``,
    ``n_labeled``, ``params`` (the selected hyperparameters), ``counts_fingerprint``, ``seconds``.

    Before fitting, an existing array file beside ``out`` that the model file at ``out`` does not
    own is refused (:func:`check_model_out`, a :class:`~bda_jax.DataError`), so a long fit never
    ends in a refused save; nothing is written unless the whole model is.
    """
    model = make_arm(arm, seed)
    check_model_out(out)
    counts = tally(traces)
    n_labeled = labeled_count(counts)
    if is_supervised(arm) and n_labeled < 2:
        raise DataError(f"arm {arm!r} is supervised: it needs at least 2 labeled tasks, the "
                        f"traces have {n_labeled}", file=source, field="gold")
    t0 = time.perf_counter()
    model.fit(counts)
    elapsed = time.perf_counter() - t0
    fp = fingerprint_counts(counts)
    meta = {"arm": arm, "seed": seed, "traces": source, "n_tasks": len(traces),
            "n_labeled": n_labeled}
    save_model(out, model, counts_fingerprint=fp, meta=meta)
    return {"command": "fit", "model": str(out), "arm": arm,
            "estimator": type(model).__name__, "agents": list(counts.agents),
            "n_tasks": len(traces), "n_labeled": n_labeled,
            "params": fitted_hyperparameters(model), "counts_fingerprint": fp,
            "seconds": elapsed}


def predict_tasks(artifact: ModelArtifact, traces: Sequence[Trace], *, seed: int | None = None,
                  allow_missing_agents: bool = False, source: str | None = None,
                  set_alpha: float | None = None, set_method: str = "lac",
                  calibration: Sequence[Trace] | None = None, calibration_source: str | None = None
                  ) -> tuple[list[dict], dict]:
    """Per-task posterior, decision and confidence of a loaded model on ``traces``.

    The traces' agents must be the model's (:func:`check_agents`; ``allow_missing_agents`` lets a
    model seat be silent). ``seed`` overrides the model's tie-break seed. Returns ``(rows,
    summary)``: one row per task (``task_id``, ``candidates``, ``proba`` over them, ``decision``,
    ``index``, ``confidence``, and ``gold`` / ``correct`` where the task is labeled; a gold outside
    the candidates is ``None`` and never correct) and the summary ``bda predict --json`` prints
    (``estimator``, ``arm``, ``n_tasks``, ``n_labeled``, ``accuracy``, ``training_data``: whether
    these are the very traces the model was fitted on). The confidence is the estimator's own
    (``decide``, e.g. a recalibrated one, unclipped) where it has one, else the decision's
    probability.

    ``set_alpha``: also an answer set per task (row ``set``: the candidates in it), split
    conformal with ``set_method`` (``"lac"`` / ``"aps"``; docs/answer-sets.md) calibrated on the
    labeled tasks of ``calibration`` (default: of ``traces``). A model file does not hold its
    training data, so calibration tasks must be labeled tasks the model was not fitted on: the
    training traces themselves (same fingerprint) are refused. The summary gains ``set``
    (``alpha``, ``method``, ``n_calibration``, ``calibrated_on_these_tasks``, and on the labeled
    tasks of ``traces`` the ``coverage``, ``mean_size``, ``empty`` of
    :func:`bda_jax.set_coverage`: an honest coverage estimate only with separate calibration
    traces).
    """
    check_agents(artifact, [m.agent for t in traces for m in t.moves], file=source,
                 allow_missing=allow_missing_agents)
    counts = tally(traces, agents=artifact.agents)
    est = artifact.estimator
    key = None if seed is None else jax.random.key(seed)
    proba = np.asarray(est.predict_proba(counts), np.float64)
    index = np.asarray(est.predict(counts, key))
    confidence = (np.asarray(est.decide(counts, key).confidence, np.float64)
                  if hasattr(est, "decide") else proba[np.arange(len(index)), index])
    sets = set_summary = None
    if set_alpha is not None:
        sets, set_summary = _answer_sets(artifact, counts, set_alpha, set_method, calibration,
                                         calibration_source, key)
    rows, n_lab, n_ok = [], 0, 0
    for t, task_id in enumerate(counts.task_ids):
        cands = counts.candidates[t]
        k, g = int(index[t]), int(counts.gold[t])
        row = {"task_id": task_id, "candidates": list(cands),
               "proba": [float(proba[t, j]) for j in range(len(cands))],
               "decision": cands[k], "index": k, "confidence": float(confidence[t])}
        if sets is not None:
            row["set"] = [c for j, c in enumerate(cands) if sets[t, j]]
        if g >= 0 or counts.gold_missing[t]:
            row["gold"] = cands[g] if g >= 0 else None
            row["correct"] = k == g
            n_lab += 1
            n_ok += k == g
        rows.append(row)
    in_sample = artifact.counts_fingerprint is not None and \
        artifact.counts_fingerprint == fingerprint_counts(counts)
    summary = {"estimator": artifact.name, "arm": artifact.meta.get("arm"),
               "n_tasks": len(rows), "n_labeled": n_lab,
               "accuracy": (n_ok / n_lab) if n_lab else None, "training_data": in_sample}
    if set_summary is not None:
        summary["set"] = set_summary
    return rows, summary


def _answer_sets(artifact, counts, alpha, method, calibration, calibration_source, key):
    """Sets [T, K] for :func:`predict_tasks` and their summary."""
    if calibration is None:
        cal, where = counts, "the predicted traces"
    else:
        check_agents(artifact, [m.agent for t in calibration for m in t.moves],
                     file=calibration_source, allow_missing=True)
        cal, where = tally(calibration, agents=artifact.agents), "the calibration traces"
    if artifact.counts_fingerprint is not None and \
            artifact.counts_fingerprint == fingerprint_counts(cal):
        raise DataError(f"{where} are the model's training data: calibrating answer sets on "
                        "them would under-cover; pass labeled tasks the model was not fitted on",
                        file=calibration_source if calibration is not None else None,
                        field="calibration")
    n_cal = int(((np.asarray(cal.gold) >= 0) | np.asarray(cal.gold_missing)).sum())
    sets = artifact.estimator.predict_set(counts, alpha, method=method, calibration=cal, key=key)
    # coverage on the labeled tasks of the predicted traces; when they also calibrated the sets
    # (no separate calibration traces) it is at least 1 - alpha by construction
    return sets, {"alpha": float(alpha), "method": method, "n_calibration": n_cal,
                  "calibrated_on_these_tasks": calibration is None,
                  **set_coverage(sets, counts.gold, counts.gold_missing)}
