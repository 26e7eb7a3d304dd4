"""The results document of ``bda evaluate`` (``kind`` ``"bda_jax.evaluation"``): every arm
evaluated as one resumable cell."""
from __future__ import annotations

from typing import Callable, Sequence

from .._core.errors import DataError
from .._core.fitting import labeled_count
from .._core.traces import Trace
from .._core.version import __version__
from ._json import strict_json

__all__ = ["EVALUATION_KIND", "CONSTANT_CONFIDENCE_SPREAD", "confidence_flags",
           "evaluation_results"]

#: ``kind`` of the document :func:`evaluation_results` returns.
EVALUATION_KIND = "bda_jax.evaluation"

#: an arm whose scored confidences span at most this much (max - min) has constant confidence
CONSTANT_CONFIDENCE_SPREAD = 0.02


def confidence_flags(confidence) -> dict:
    """How much an arm's confidences vary, and whether it may be ranked on calibration.

    ``confidence`` [n]: the top-label confidence scored on each labeled task (NaN entries are
    dropped). Returns ``{"n", "min", "max", "spread", "sd", "constant_confidence"}``:
    ``spread`` = max - min, ``sd`` the population standard deviation, and
    ``constant_confidence`` true when ``spread`` <= :data:`CONSTANT_CONFIDENCE_SPREAD`. An arm
    that states (nearly) one confidence for every task puts all of them in one bin: its ECE is
    |confidence - accuracy|, a statement about the accuracy level, not about calibration, so the
    report flags it and never ranks it on ECE.

    >>> confidence_flags([0.5, 0.5, 0.5])["constant_confidence"]
    True
    >>> confidence_flags([0.5, 0.9])["spread"]
    0.4
    """
    import numpy as np

    c = np.asarray(confidence, np.float64).ravel()
    c = c[np.isfinite(c)]
    if c.size == 0:
        return {"n": 0, "min": None, "max": None, "spread": None, "sd": None,
                "constant_confidence": False}
    spread = float(c.max() - c.min())
    return {"n": int(c.size), "min": round(float(c.min()), 6), "max": round(float(c.max()), 6),
            "spread": round(spread, 6), "sd": round(float(c.std()), 6),
            "constant_confidence": bool(spread <= CONSTANT_CONFIDENCE_SPREAD)}


def evaluation_results(traces: Sequence[Trace], arms: Sequence[str], *, folds: int = 5,
                       label_budget: int | None = None, reference: str = "majority",
                       n_resamples: int = 2000, seed: int = 0, cache=None,
                       progress: Callable[[str, int, int], None] | None = None,
                       source: str | None = None, methods: Sequence = (),
                       set_alpha: float | None = None, set_method: str = "lac",
                       set_fraction: float = 0.5) -> dict:
    """Nested cross-validated evaluation of ``arms`` and ``reference`` ([BDA] Appendix D.1) as a
    results document, one cell per arm.

    Every arm is evaluated on its own with the same outer folds (``folds``, grouped by cluster,
    from ``seed``); the metrics of an arm do not depend on the other arms, so the table equals
    one joint :func:`bda_jax.evaluate`. ``cache``: optional path of a
    :class:`~bda_jax.report.CellCache` keeping each finished arm (fingerprinted by the counts,
    folds and settings: a cache of other data or settings is refused); a rerun computes only the
    arms it lacks. ``progress``: optional ``(description, done, total)`` callback. ``source``:
    the trace file's name, recorded as ``traces`` and named by errors.

    ``methods``: LLM-method arms (objects of the harness' method protocol, e.g.
    :class:`bda_jax.council.MoA` or a stored :class:`bda_jax.council.MethodRun`), scored on the
    same tasks after the named arms; they are not cell-cached (a method's calls are, in its
    reply cache).

    ``set_alpha`` / ``set_method`` / ``set_fraction``: answer sets per arm, as in
    :func:`bda_jax.evaluate` (rows gain ``coverage``, ``mean_set_size``, ``empty_sets``; the
    document records ``sets``).

    Returns the document of ``bda evaluate --out``: ``table``, ``bootstrap`` (paired cluster
    bootstrap against ``reference``), ``selected``, ``methods`` (per method arm: reads the
    council, gamma, parse report, calibration note, ledger), ``calibration`` (per arm: the
    spread of its scored confidences, :func:`confidence_flags`; a constant-confidence arm is
    never ranked on ECE by the report), ``folds``, the data's sizes and
    ``cells`` (how many arms the cache held).
    """
    from .._core.cache import CellCache, fingerprint
    from .._core.counts import tally
    from .._core.selection import make_folds
    from ..aggregators import evaluate, fingerprint_counts, make_arm

    for arm in list(arms) + [reference]:
        make_arm(arm)                          # a DataError naming the known arms
    counts = tally(list(traces))
    n_labeled = labeled_count(counts)
    if n_labeled < 2:
        raise DataError(f"evaluation needs labeled tasks; the traces have {n_labeled}",
                        field="gold", file=source)
    outer = make_folds(counts, folds, seed)
    all_arms = list(dict.fromkeys(list(arms) + [reference]))
    sets = dict(set_alpha=set_alpha, set_method=set_method, set_fraction=set_fraction)
    store = None
    if cache is not None:
        # a cache written without answer sets keeps its fingerprint
        extra = () if set_alpha is None else (set_alpha, set_method, set_fraction)
        store = CellCache(cache, fingerprint(
            "bda evaluate", fingerprint_counts(counts), outer.tolist(), label_budget, reference,
            n_resamples, seed, __version__, *extra))
    cached = 0 if store is None else sum(a in store for a in all_arms)
    cells = {}
    for done, arm in enumerate(all_arms):
        if progress is not None:
            progress(f"evaluating {arm}", done, len(all_arms))

        def compute(arm=arm):
            ev = evaluate(counts, [arm], folds=outer, label_budget=label_budget, seed=seed,
                          reference=reference, n_resamples=n_resamples, **sets)
            row = next(r for r in ev.table if r["arm"] == arm)
            return strict_json({"row": row, "bootstrap": ev.bootstrap.get(arm),
                                "selected": ev.selected.get(arm),
                                "calibration": _flags(ev, arm, counts)})
        cells[arm] = compute() if store is None else store.get_or_compute(arm, compute)
    method_info = {}
    total = len(all_arms) + len(methods)
    for done, method in enumerate(methods, len(all_arms)):
        if progress is not None:
            progress(f"evaluating {method.name}", done, total)
        ev = evaluate(list(traces), [method], folds=outer, label_budget=label_budget, seed=seed,
                      reference=reference, n_resamples=n_resamples, **sets)
        row = next(r for r in ev.table if r["arm"] == method.name)
        cells[method.name] = strict_json({"row": row, "bootstrap": ev.bootstrap.get(method.name),
                                          "selected": None,
                                          "calibration": _flags(ev, method.name, counts)})
        method_info[method.name] = strict_json(ev.methods[method.name])
    all_arms = all_arms + [m.name for m in methods]
    if progress is not None:
        progress("evaluated", total, total)
    return {"schema_version": 1, "kind": EVALUATION_KIND, "package_version": __version__,
            "traces": source, "n_tasks": int(counts.N.shape[0]), "n_labeled": n_labeled,
            "agents": list(counts.agents), "K_max": int(counts.e.shape[2]),
            "arms": all_arms, "reference": reference,
            "label_budget": label_budget, "seed": seed, "n_folds": int(outer.max()) + 1,
            "n_resamples": n_resamples,
            "table": [cells[a]["row"] for a in all_arms],
            "bootstrap": {a: cells[a]["bootstrap"] for a in all_arms
                          if cells[a]["bootstrap"] is not None},
            "selected": {a: cells[a]["selected"] for a in all_arms
                         if cells[a]["selected"] is not None},
            "methods": method_info,
            "calibration": {a: cells[a]["calibration"] for a in all_arms
                            if cells[a].get("calibration") is not None},
            "sets": None if set_alpha is None else {"alpha": set_alpha, "method": set_method,
                                                    "fraction": set_fraction},
            "folds": outer.tolist(),
            "cells": {"cache": None if cache is None else str(cache), "loaded": cached,
                      "computed": len(all_arms) - len(methods) - cached}}


def _flags(ev, arm: str, counts) -> dict | None:
    """:func:`confidence_flags` of ``arm``'s scored confidences on the labeled tasks of an
    :class:`~bda_jax.Evaluation` (its own ``confidence`` where it has one, else the top
    out-of-fold probability)."""
    import numpy as np

    labeled = (np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing, bool)
    conf = (ev.confidence or {}).get(arm)
    if conf is None:
        proba = ev.proba.get(arm)
        if proba is None:
            return None
        p = np.where(np.asarray(counts.mask, bool), np.asarray(proba, np.float64), -np.inf)
        conf = p.max(-1)
    conf = np.asarray(conf, np.float64)
    return confidence_flags(conf[labeled]) if conf.shape == labeled.shape else None
