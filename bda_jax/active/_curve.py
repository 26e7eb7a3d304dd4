"""Label-efficiency curves: a strategy acquires labels from a pool, batch by batch, and the
supervised arm fitted on them is scored on a disjoint holdout at each budget ([BDA] Appendix
E.6 with the random draw replaced by a strategy; docs/active.md).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import numpy as np

from .._core.checks import positive_int
from .._core.counts import Counts
from .._core.errors import DataError
from ..aggregators import BDA
from ..metrics import brier_mc, correctness, summary
from ._gold import keep_labels
from ._select import labeled_mask, select_batch

__all__ = ["LabelCurve", "label_curve", "DEFAULT_BUDGETS"]

DEFAULT_BUDGETS = (5, 10, 25, 50, 100)


class LabelCurve(NamedTuple):
    """One strategy's label-efficiency curve.

    ``budgets`` (n labels); ``metrics``: per budget the holdout row of
    :func:`bda_jax.metrics.summary` (accuracy, ece_ew, ece_em, brier_mc, ...) plus the fitted
    ``params``; ``per_task``: per budget ``correct``, ``confidence`` and ``brier`` [H] on the
    holdout (for paired bootstraps against another strategy on the same holdout);
    ``order`` the pool indices in acquisition order; ``rounds``: per acquisition round the
    number of labels before it, the picks and the acquisition's ``params`` and
    ``params_source`` (``"default"``, ``"given"``: the last budget's CV choice, or ``"cv"``)."""

    budgets: tuple[int, ...]
    metrics: tuple[dict, ...]
    per_task: tuple[dict, ...]
    order: np.ndarray
    rounds: tuple[dict, ...]

    def to_json(self) -> dict:
        """Plain JSON values (per-task arrays as lists)."""
        return {"budgets": list(self.budgets), "metrics": list(self.metrics),
                "per_task": [{k: np.asarray(v).tolist() for k, v in p.items()}
                             for p in self.per_task],
                "order": [int(i) for i in self.order], "rounds": list(self.rounds)}


def _round_seed(seed: int, r: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(r)]).generate_state(1)[0])


def label_curve(pool: Counts, holdout: Counts, strategy: str,
                budgets: Sequence[int] = DEFAULT_BUDGETS, *, batch_size: int = 5, seed: int = 0,
                arm: str = "bda-per-agent", eval_arm: str | None = None, n_folds: int = 5,
                params_schedule: str = "budget", **select_options) -> LabelCurve:
    """Acquire labels from ``pool`` with ``strategy`` and score the fitted arm on ``holdout``.

    ``pool`` carries the gold of every task it may reveal (a task without gold is never picked);
    the selection only ever sees the labels acquired so far (:func:`bda_jax.active.keep_labels`).
    Rounds of ``batch_size`` picks (:func:`bda_jax.active.select_batch` with ``arm`` and
    ``select_options``; round r draws from the seed ``SeedSequence([seed, r])``), shortened so
    that every budget is hit exactly. At each budget ``eval_arm`` (default ``arm``) is fitted by
    its own ``n_folds``-fold CV on the acquired labels (``bda_jax.aggregators.BDA``) and
    predicts ``holdout``; ties in the decision are broken from ``seed``. ``pool`` and
    ``holdout`` must share the agent list (tally them with one ``agents``).

    The acquisition's hyperparameters (``params_schedule``): ``"budget"`` (default) refits them
    at the budgets only, as a deployment that re-runs its CV at checkpoints: rounds before the
    first budget use :data:`bda_jax.active.DEFAULT_PARAMS`, later rounds the CV choice of the
    last budget's fit (of ``arm``; its eval fit when ``eval_arm`` is ``arm``). ``"round"``: the
    CV runs before every round (``select_batch(params="cv")``), as ``bda label next`` does on
    each call; one CV fit per round instead of per budget.
    """
    budgets = tuple(sorted({positive_int(b, "budgets") for b in budgets}))
    if not budgets:
        raise DataError("budgets must hold at least one label count", field="budgets")
    batch_size = positive_int(batch_size, "batch_size")
    if pool.agents is not None and holdout.agents is not None and pool.agents != holdout.agents:
        raise DataError("pool and holdout must share one agent list", field="holdout")
    has_gold = labeled_mask(pool)
    if budgets[-1] > int(has_gold.sum()):
        raise DataError(f"budget {budgets[-1]} exceeds the {int(has_gold.sum())} labeled pool "
                        "tasks", field="budgets")
    eval_arm = arm if eval_arm is None else eval_arm
    if params_schedule not in ("budget", "round"):
        raise DataError(f"params_schedule must be 'budget' or 'round', got {params_schedule!r}",
                        field="params_schedule")
    if "params" in select_options:
        raise DataError("label_curve sets the acquisition's params (see params_schedule)",
                        field="params")
    params = "cv" if params_schedule == "round" else "default"
    key = jax.random.key(seed)
    gold, gm, mask = (np.asarray(holdout.gold), np.asarray(holdout.gold_missing),
                      np.asarray(holdout.mask))
    acquired = np.zeros(pool.N.shape[0], bool)
    order: list[int] = []
    metrics, per_task, rounds = [], [], []
    r = 0
    for budget in budgets:
        while len(order) < budget:
            b = min(batch_size, budget - len(order))
            seen = keep_labels(pool, acquired)
            sel = select_batch(seen, b, strategy, seed=_round_seed(seed, r), arm=arm,
                               params=params, exclude=~has_gold, **select_options)
            acquired[sel.index] = True
            order += [int(i) for i in sel.index]
            rounds.append({"labels_before": len(order) - len(sel.index),
                           "picked": [int(i) for i in sel.index],
                           "params_source": sel.params_source,
                           "params": sel.params})
            r += 1
        labeled_now = keep_labels(pool, acquired)
        fitted = BDA(eval_arm, n_folds=n_folds, seed=seed).fit(labeled_now)
        if params_schedule == "budget":
            params = (dict(fitted.params_) if eval_arm == arm
                      else dict(BDA(arm, n_folds=n_folds, seed=seed).fit(labeled_now).params_))
        proba = fitted.predict_proba(holdout)
        row = summary(proba, gold, gm, mask, key=key)
        row["params"] = dict(fitted.params_)
        scored = correctness(proba, gold, gm, mask, key=key)
        metrics.append(row)
        per_task.append({"correct": np.asarray(scored.correct, np.float64),
                         "confidence": np.asarray(scored.confidence, np.float64),
                         "brier": np.asarray(brier_mc(proba, gold, gm, mask, reduce=False),
                                             np.float64)})
    return LabelCurve(budgets, tuple(metrics), tuple(per_task), np.asarray(order, np.int64),
                      tuple(rounds))
