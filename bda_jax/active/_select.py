"""Choosing the next b tasks to label (docs/active.md): the strategies, the batch rule and the
seeded draws.

Strategies (:data:`STRATEGIES`):

* ``"expected-brier"``: the expected reduction of the pool's posterior Brier
  (:func:`bda_jax.active.expected_brier_reduction`);
* ``"uncertainty"``: the task's own expected Brier under the current fit, 1 - sum_g p_t(g)^2
  (uncertainty sampling with the Brier score);
* ``"disagreement"``: the agents' normalized vote entropy
  (:func:`bda_jax.active.vote_disagreement`); reads no model;
* ``"random"``: a seeded uniform draw without replacement, the control of [BDA] Appendix E.6.

Batch rule (``batch``, :data:`BATCH_MODES`) for the two model-based strategies: ``"greedy"``
(default) picks one task at a time and, before scoring the next, conditions the fit on it with
its *expected* label: the totals gain the task's counts weighted by its current posterior (a
soft label, :func:`bda_jax.active.add_label`), the task leaves the target, and the posteriors
are recomputed. A task whose label would teach the same thing as an earlier pick then scores
lower: the batch spreads over agents and answers. ``"top"`` takes the b best scores of one pass.
The model-free strategies rank once (both rules coincide).

Randomness (``seed``): the candidate subsample (``n_candidates``, expected-brier only), the
target subsample (``n_target``), the random strategy and the tie-break (a seeded random
priority per task: among equal scores the higher priority wins) each draw from their own
``numpy.random.default_rng([seed, stream])``; the same inputs give the same selection.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._core.checks import positive_int
from .._core.counts import Counts
from .._core.errors import DataError
from .._core.selection import GRID_COLUMNS
from ..aggregators import BDA
from ._brier import posterior_proba, reduction_scores
from ._disagreement import ROUNDS, vote_disagreement
from ._totals import DEFAULT_PARAMS, add_label, arm_theta, check_arm, label_totals

__all__ = ["STRATEGIES", "BATCH_MODES", "MIN_CV_LABELS", "Selection", "acquisition_params",
           "labeled_mask", "select_batch"]

STRATEGIES = ("expected-brier", "uncertainty", "disagreement", "random")
BATCH_MODES = ("greedy", "top")
#: fewest labeled tasks for which ``params="cv"`` runs the arm's cross-validation; below it the
#: acquisition uses :data:`bda_jax.active.DEFAULT_PARAMS`
MIN_CV_LABELS = 5
_CANDIDATES, _TARGET, _RANDOM, _TIES = 1, 2, 3, 4      # rng streams


class Selection(NamedTuple):
    """The tasks chosen for labeling, in pick order.

    ``index`` [b] task indices into the counts; ``score`` [b] each pick's score when it was
    picked (NaN for ``"random"``); ``strategy``; ``params`` the acquisition's hyperparameters
    (``None`` for the model-free strategies) and ``params_source`` (``"cv"``, ``"default"``,
    ``"given"`` or ``None``); ``n_scored`` how many candidates were scored per pick."""

    index: np.ndarray
    score: np.ndarray
    strategy: str
    params: dict | None
    params_source: str | None
    n_scored: int

    def to_dict(self) -> dict:
        """Plain JSON values (a NaN score as ``None``)."""
        return {"index": [int(i) for i in self.index],
                "score": [None if not np.isfinite(s) else float(s) for s in self.score],
                "strategy": self.strategy, "params": self.params,
                "params_source": self.params_source, "n_scored": int(self.n_scored)}


def labeled_mask(counts: Counts) -> np.ndarray:
    """[T] bool: the tasks with a label (gold a candidate, or given but not a candidate)."""
    return (np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing)


def acquisition_params(counts: Counts, arm: str = "bda-per-agent", seed: int = 0
                       ) -> tuple[dict, str]:
    """The hyperparameters the acquisition refits with, and where they come from: the arm's own
    cross-validation on the labeled tasks (``bda_jax.aggregators.BDA(arm, seed=seed)``,
    ``params_``; ``"cv"``) once at least :data:`MIN_CV_LABELS` tasks from two or more clusters
    are labeled, else :data:`bda_jax.active.DEFAULT_PARAMS` (``"default"``)."""
    check_arm(arm)
    lab = labeled_mask(counts)
    if lab.sum() >= MIN_CV_LABELS and np.unique(np.asarray(counts.cluster)[lab]).size >= 2:
        fitted = BDA(arm, seed=seed).fit(counts)
        return {c: float(fitted.params_[c]) for c in GRID_COLUMNS[arm]}, "cv"
    return dict(DEFAULT_PARAMS[arm]), "default"


def _order(scores, priority):
    """Indices sorting ``scores`` descending, ties by ``priority`` descending (NaN last)."""
    s = np.where(np.isnan(scores), -np.inf, scores)
    return np.lexsort((-priority, -s))


def select_batch(counts: Counts, batch_size: int, strategy: str = "expected-brier", *,
                 seed: int = 0, arm: str = "bda-per-agent", params="cv",
                 n_candidates: int | None = 256, n_target: int | None = None, target=None,
                 batch: str = "greedy", count_self: bool = False, rounds: str = "round0",
                 exclude=None) -> Selection:
    """Choose up to ``batch_size`` unlabeled tasks of ``counts`` to label next (module docstring).

    Args:
      counts: :class:`~bda_jax.Counts`; tasks with a gold answer are labeled (gold -1 means
        unlabeled, as after :func:`bda_jax.active.apply_gold`).
      batch_size: b >= 1; fewer come back when fewer unlabeled tasks remain.
      strategy: one of :data:`STRATEGIES`.
      seed: seeds every draw (module docstring).
      arm: the BDA arm whose fit the model-based strategies read (:data:`bda_jax.active.ARMS`).
      params: ``"cv"`` (default: :func:`acquisition_params`), ``"default"``
        (:data:`bda_jax.active.DEFAULT_PARAMS`) or a dict of the arm's hyperparameters.
      n_candidates: expected-brier scores at most this many unlabeled tasks, a seeded uniform
        subsample (``None``: all); the others are never picked in this call.
      n_target: average the pool Brier over at most this many target tasks, a seeded subsample
        (``None``: all).
      target: [T] weights of the tasks whose Brier counts (default: the unlabeled tasks).
      batch: ``"greedy"`` or ``"top"`` (:data:`BATCH_MODES`).
      count_self: see :func:`bda_jax.active.expected_brier_reduction`.
      rounds: the votes of ``"disagreement"`` (:data:`bda_jax.active.ROUNDS`).
      exclude: [T] bool or task indices never to pick (e.g. tasks already sent out).

    Returns a :class:`Selection`. Raises :class:`~bda_jax.DataError` (naming the option) on a
    bad option and when no task is left to pick.
    """
    b = positive_int(batch_size, "batch_size")
    if strategy not in STRATEGIES:
        raise DataError(f"unknown strategy {strategy!r}; expected one of {list(STRATEGIES)}",
                        field="strategy")
    if batch not in BATCH_MODES:
        raise DataError(f"batch must be one of {list(BATCH_MODES)}, got {batch!r}",
                        field="batch")
    if rounds not in ROUNDS:
        raise DataError(f"rounds must be one of {list(ROUNDS)}, got {rounds!r}", field="rounds")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}", field="seed")
    check_arm(arm)
    n_cand = None if n_candidates is None else positive_int(n_candidates, "n_candidates")
    n_tgt = None if n_target is None else positive_int(n_target, "n_target")
    T = counts.N.shape[0]
    lab = labeled_mask(counts)
    pool = ~lab
    if exclude is not None:
        ex = np.asarray(exclude)
        if ex.dtype == bool:
            if ex.shape != (T,):
                raise DataError(f"exclude must be [T] = [{T}] bool or task indices",
                                field="exclude")
            pool &= ~ex
        else:
            if ex.size and (ex.ndim != 1 or ex.min() < 0 or ex.max() >= T):
                raise DataError(f"exclude must hold task indices in [0, {T})", field="exclude")
            pool[ex.astype(np.int64)] = False
    pool_idx = np.flatnonzero(pool)
    if pool_idx.size == 0:
        raise DataError("no unlabeled task is left to pick", field="batch_size")
    b = min(b, pool_idx.size)
    priority = np.random.default_rng([int(seed), _TIES]).permutation(T).astype(np.float64)

    if strategy == "random":
        pick = np.random.default_rng([int(seed), _RANDOM]).permutation(pool_idx)[:b]
        return Selection(pick, np.full(b, np.nan), strategy, None, None, int(pool_idx.size))
    if strategy == "disagreement":
        s = vote_disagreement(counts, rounds)[pool_idx]
        order = _order(s, priority[pool_idx])[:b]
        return Selection(pool_idx[order], s[order], strategy, None, None, int(pool_idx.size))

    if isinstance(params, str):
        if params == "cv":
            params, source = acquisition_params(counts, arm, int(seed))
        elif params == "default":
            params, source = dict(DEFAULT_PARAMS[arm]), "default"
        else:
            raise DataError(f"params must be 'cv', 'default' or a dict, got {params!r}",
                            field="params")
    else:
        source = "given"
    theta = arm_theta(arm, params)
    params = {c: float(v) for c, v in zip(GRID_COLUMNS[arm], theta)}
    totals = label_totals(counts)
    proba = posterior_proba(arm, counts, totals, theta)

    cand = pool_idx
    if strategy == "expected-brier":
        if n_cand is not None and cand.size > n_cand:
            rng = np.random.default_rng([int(seed), _CANDIDATES])
            cand = np.sort(rng.choice(cand, n_cand, replace=False))
        w_full = ((~lab).astype(np.float32) if target is None
                  else np.asarray(target, np.float32))
        if w_full.shape != (T,) or not np.all(np.isfinite(w_full)) or (w_full < 0).any():
            raise DataError(f"target must be [T] = [{T}] finite weights >= 0", field="target")
        support = np.flatnonzero(w_full > 0)
        if n_tgt is not None and support.size > n_tgt:
            rng = np.random.default_rng([int(seed), _TARGET])
            target_index = np.sort(rng.choice(support, n_tgt, replace=False))
        else:
            target_index = np.arange(T)
        target_counts = counts if target_index.size == T else counts.take(target_index)
        target_w = w_full[target_index].copy()
        position = {int(t): j for j, t in enumerate(target_index)}

    n_scored = int(cand.size)
    open_ = np.ones(cand.size, bool)
    if strategy == "expected-brier":
        # a fixed number of candidate slots (padding never picked): one compiled score
        # function for a pool of any number of unlabeled tasks
        width = min(T, n_cand if n_cand is not None else T)
        pad = width - cand.size
        cand = np.concatenate([cand, np.full(pad, cand[0], cand.dtype)])
        open_ = np.concatenate([open_, np.zeros(pad, bool)])
    c_all, N_all = np.asarray(counts.c), np.asarray(counts.N)
    picks, scores = [], []
    for _ in range(b if batch == "greedy" else 1):
        if strategy == "expected-brier":
            s = reduction_scores(arm, counts, totals, theta, cand, target_counts, target_w,
                                 target_index, count_self=count_self, proba=proba)
        else:
            p = proba[cand]
            s = 1.0 - np.sum(p * p, axis=-1)
        s = np.where(open_, s, np.nan)
        order = _order(s, priority[cand])
        if batch == "top":
            order = order[:b]
            picks, scores = list(cand[order]), list(s[order])
            break
        j = int(order[0])
        t = int(cand[j])
        picks.append(t)
        scores.append(float(s[j]))
        open_[j] = False
        totals = add_label(totals, c_all[t], N_all[t], proba[t])     # the expected label
        if strategy == "expected-brier" and t in position:
            target_w[position[t]] = 0.0
        if len(picks) < b:
            proba = posterior_proba(arm, counts, totals, theta)
    return Selection(np.asarray(picks, np.int64), np.asarray(scores, np.float64), strategy,
                     params, source, n_scored)
