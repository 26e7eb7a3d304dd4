"""Answer sets with coverage: split conformal prediction over any posterior (docs/answer-sets.md).

A posterior ``proba`` [T, K] over each task's candidates (0 on padding slots) becomes a set of
candidates per task, a boolean [T, K] mask, such that on a new task exchangeable with the
calibration tasks the true answer lies in its set with probability at least ``1 - alpha``
(Vovk et al. 2005; Lei et al. 2018). Two nonconformity scores:

* ``"lac"`` (least ambiguous set-valued classifier, Sadinle, Lei & Wasserman 2019): the score of
  candidate ``k`` is ``1 - p_k``; a set holds every candidate with ``p_k >= 1 - q``. Smallest
  sets on average; a task may get an empty set when every candidate is unlikely.
* ``"aps"`` (adaptive prediction sets, Romano, Sesia & Candès 2020): candidates in order of
  decreasing probability (exact ties: lower slot first); the score of ``k`` is the mass ranked
  before it plus ``u * p_k``, with ``u ~ U(0, 1)`` drawn per task from an explicit key
  (``randomized=True``, exact coverage in expectation) or ``u = 1`` (``randomized=False``: the
  cumulative mass up to and including ``k``, conservative). Sets grow where the posterior is
  flat.

The threshold ``q`` is the ``ceil((n + 1)(1 - alpha))``-th smallest of the ``n`` calibration
scores (the scores of the calibration tasks' true answers), ``+inf`` when that rank exceeds
``n`` (too few calibration tasks for this ``alpha``: every set is the whole candidate list). A
calibration task whose true answer is not among its candidates (``gold_missing``) scores
``+inf``: no set can cover it. With continuous scores and exchangeable tasks the coverage lies
in ``[1 - alpha, 1 - alpha + 1 / (n + 1))``.

Every function here is pure: ``conformal_scores`` and ``prediction_sets`` are jitted over
arrays, ``conformal_threshold`` reads host scores.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .errors import DataError

__all__ = ["SET_METHODS", "check_alpha", "check_set_method", "conformal_scores",
           "conformal_threshold", "prediction_sets", "set_coverage"]

SET_METHODS = ("lac", "aps")


def check_set_method(method: str) -> str:
    """``method`` if it is one of :data:`SET_METHODS`, else :class:`DataError`."""
    if method not in SET_METHODS:
        raise DataError(f"method must be one of {SET_METHODS}, got {method!r}", field="method")
    return method


def check_alpha(alpha) -> float:
    """``alpha`` as a float in (0, 1), else :class:`DataError` naming the field."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) \
            or not 0.0 < float(alpha) < 1.0:
        raise DataError(f"alpha must be a number in (0, 1), got {alpha!r}", field="alpha")
    return float(alpha)


def _ranked_mass(proba, mask):
    """Per slot: the probability mass of the candidates ranked strictly before it (decreasing
    probability, exact ties broken towards the lower slot) [T, K]."""
    p = jnp.where(mask, proba, 0.0)
    K = p.shape[-1]
    slot = jnp.arange(K)
    # j is ranked before k when p_j > p_k, or p_j == p_k and j < k (masked slots rank last)
    before = mask[..., :, None] & ((p[..., :, None] > p[..., None, :])
                                    | ((p[..., :, None] == p[..., None, :])
                                       & (slot[:, None] < slot[None, :])))
    return jnp.sum(jnp.where(before, p[..., :, None], 0.0), axis=-2)


def _slot_scores(proba, mask, method, u):
    """Nonconformity score of every candidate slot [T, K] (+inf on padding slots)."""
    p = jnp.where(mask, proba, 0.0)
    if method == "lac":
        s = 1.0 - p
    else:
        s = _ranked_mass(p, mask) + u[..., None] * p
    return jnp.where(mask, s, jnp.inf)


def _uniforms(key, T, randomized, dtype):
    if not randomized:
        return jnp.ones((T,), dtype)
    if key is None:
        raise DataError("randomized APS needs a key (jax.random.key(seed))", field="key")
    return jax.random.uniform(key, (T,), dtype)


@partial(jax.jit, static_argnames=("method", "randomized"))
def _scores(proba, gold, gold_missing, mask, key, method, randomized):
    u = _uniforms(key, proba.shape[0], randomized, proba.dtype)
    s = _slot_scores(proba, mask, method, u)
    at_gold = jnp.take_along_axis(s, jnp.clip(gold, 0)[:, None], axis=-1)[:, 0]
    return jnp.where(gold_missing | (gold < 0), jnp.inf, at_gold)


def conformal_scores(proba, gold, mask, *, method: str = "lac", gold_missing=None, key=None,
                     randomized: bool = True) -> jax.Array:
    """Nonconformity scores of the true answers [n] of ``n`` calibration tasks.

    Args:
      proba: [n, K] posteriors over each task's candidates (0 on padding slots).
      gold: [n] true slot of each task (``-1``: unknown, scored ``+inf``).
      mask: [n, K] valid candidate slots.
      method: ``"lac"`` or ``"aps"`` (module docstring).
      gold_missing: [n] bool, the true answer is none of the candidates (scored ``+inf``).
      key: JAX key of the APS uniforms (``randomized=True``); unused by LAC.
      randomized: APS with a uniform draw per task (exact) or ``u = 1`` (conservative).
    """
    check_set_method(method)
    proba = jnp.asarray(proba)
    gold = jnp.asarray(gold, jnp.int32)
    gm = jnp.zeros(gold.shape, bool) if gold_missing is None else jnp.asarray(gold_missing, bool)
    randomized = bool(randomized) and method == "aps"
    return _scores(proba, gold, gm, jnp.asarray(mask, bool),
                   key if randomized else None, method, randomized)


def conformal_threshold(scores, alpha) -> float:
    """The split-conformal threshold: the ``ceil((n + 1)(1 - alpha))``-th smallest of ``scores``
    [n] (``+inf`` when that rank exceeds ``n``, or ``n == 0``)."""
    alpha = check_alpha(alpha)
    s = np.sort(np.asarray(scores, np.float64).reshape(-1))
    rank = math.ceil((s.size + 1) * (1.0 - alpha) - 1e-9)      # 1-based; guard float round-up
    return float(s[rank - 1]) if 1 <= rank <= s.size else math.inf


@partial(jax.jit, static_argnames=("method", "randomized"))
def _sets(proba, mask, threshold, key, method, randomized):
    u = _uniforms(key, proba.shape[0], randomized, proba.dtype)
    return mask & (_slot_scores(proba, mask, method, u) <= threshold[..., None])


def prediction_sets(proba, mask, threshold, *, method: str = "lac", key=None,
                    randomized: bool = True) -> jax.Array:
    """Answer sets [T, K] (bool, False on padding slots): the candidates whose score is at most
    ``threshold`` (:func:`conformal_threshold`; a scalar, or one per task [T], e.g. from
    several calibrations at once), under the same ``method`` and ``randomized`` as the
    calibration scores (a fresh ``key`` for the new tasks' APS uniforms)."""
    check_set_method(method)
    randomized = bool(randomized) and method == "aps"
    proba = jnp.asarray(proba)
    threshold = jnp.broadcast_to(jnp.asarray(threshold, proba.dtype), proba.shape[:1])
    return _sets(proba, jnp.asarray(mask, bool), threshold, key if randomized else None, method,
                 randomized)


def set_coverage(sets, gold, gold_missing=None) -> dict:
    """Empirical coverage and size of answer sets on labeled tasks: ``coverage`` (share of tasks
    whose true answer is in its set; a ``gold_missing`` task is never covered), ``mean_size``
    (mean number of candidates per set, over every task), ``empty`` (share of empty sets) and
    ``n_labeled``. ``sets`` [T, K] bool, ``gold`` [T] (``-1``: unlabeled, left out of
    coverage)."""
    sets = np.asarray(sets, bool)
    gold = np.asarray(gold)
    gm = np.zeros(gold.shape, bool) if gold_missing is None else np.asarray(gold_missing, bool)
    labeled = (gold >= 0) | gm
    hit = np.zeros(gold.shape, bool)
    ok = gold >= 0
    hit[ok] = sets[np.flatnonzero(ok), gold[ok]]
    size = sets.sum(-1)
    n = int(labeled.sum())
    return {"coverage": float(hit[labeled].mean()) if n else None,
            "mean_size": float(size.mean()) if size.size else None,
            "empty": float((size == 0).mean()) if size.size else None, "n_labeled": n}
