"""Expected reduction of the pool's posterior Brier score from labeling one task (docs/active.md).

The score of candidate task t is the expected error reduction of Roy and McCallum (2001) with
the multiclass Brier score as the loss, computed in closed form because the supervised BDA fits
are closed form on counts ([BDA] §3 Eq. 3 / Eq. 4; :mod:`bda_jax.active._totals`):

    reduction(t) = B_now(t) - sum_k p_t(k) B_after(t, k),
    B(pi) = sum_u w_u (1 - sum_g pi_u(g)^2) / sum_u w_u     over the target tasks u != t,

where p_t is t's current posterior, B_after(t, k) the same average under the posteriors after
refitting the per-agent prior (or confusion rows) with t labeled k, and 1 - sum_g pi_u(g)^2 is
the multiclass Brier score of pi_u expected under pi_u itself (the model's own estimate of its
Brier on an unlabeled task: the gold is unknown, so the posterior is the only distribution over
it). The target weights w [T] say whose Brier matters (default: every unlabeled task).

Readings, each a parameter:

* ``count_self=False`` (default): t itself leaves the average, so the score is the information
  t's label carries about the agents and nothing else. ``count_self=True`` keeps t in the
  target, its Brier dropping to 0 once labeled: the score then adds t's own uncertainty
  w_t (1 - sum p_t^2) / sum w.
* The hyperparameters stay fixed during the refit (the expected-label refit moves the counts
  only); the caller passes those of its current fit.

The (t, k) refits are vmapped over k and mapped over candidates in chunks (``jax.lax.map``),
each one a kernel call on the target tasks: cost ~ C K T_target I K.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._core.counts import Counts
from .._core.errors import DataError
from .._core.kernels import table_size_for
from ._totals import (LabelTotals, add_label, arm_theta, check_arm, label_totals,
                      totals_log_posterior)

__all__ = ["expected_brier_reduction", "expected_brier", "reduction_scores", "posterior_proba"]

_CHUNK_CELLS = 1 << 22      # posterior cells (T_target I K per refit) evaluated at once


def expected_brier(log_post, mask) -> jax.Array:
    """[T] the multiclass Brier score of each posterior expected under itself,
    1 - sum_g pi(g)^2 over the task's valid slots (``log_post`` [T, K], ``mask`` [T, K])."""
    p = jnp.where(mask, jnp.exp(log_post), 0.0)
    return 1.0 - jnp.sum(p * p, axis=-1)


def posterior_proba(arm: str, counts: Counts, totals: LabelTotals, theta) -> np.ndarray:
    """Posterior probabilities [T, K] (0 on padding) of ``counts`` under ``totals`` and the
    fixed hyperparameters ``theta``, on the host."""
    lp = totals_log_posterior(arm, counts, totals, jnp.asarray(theta, jnp.float32))
    return np.where(np.asarray(counts.mask), np.exp(np.asarray(lp, np.float64)), 0.0)


def _static_table(target: Counts):
    size = table_size_for(target)
    top = target.max_count
    return size, (size if top is not None and top < size else None)


@partial(jax.jit, static_argnames=("arm", "count_self", "chunk", "table_size", "counts_below"))
def _scores(arm, count_self, chunk, table_size, counts_below, totals, theta, target, target_w,
            cand_c, cand_N, cand_pos, p_cand):
    post = partial(totals_log_posterior, arm, target, table_size=table_size,
                   counts_below=counts_below)
    slots = jnp.arange(target_w.shape[0])
    K = cand_c.shape[-1]
    labels = jnp.concatenate([jnp.eye(K), jnp.zeros((1, K))])       # k = 0..K-1, then none
    keep = jnp.concatenate([jnp.ones(K), jnp.zeros(1)])

    def one(args):
        c_t, N_t, pos, p_t = args
        w_rest = target_w * (slots != pos)
        w_self = jnp.where(pos >= 0, target_w[jnp.maximum(pos, 0)], 0.0) if count_self else 0.0
        den = jnp.sum(w_rest) + w_self
        safe = jnp.where(den > 0, den, 1.0)

        def brier(q, on):
            # the K refits and, with on = 0, the current fit: one code path, so that a label
            # that changes no prior (kappa = 0) scores exactly 0, not float noise
            refit = add_label(totals, c_t * on, N_t * on, q)
            return expected_brier(post(refit, theta), target.mask)             # [Tt]

        b = jax.vmap(brier)(labels, keep)                                      # [K + 1, Tt]
        b_now = b[K]
        gain = (b_now[None, :] - b[:K]) @ w_rest                               # [K]
        self_now = w_self * b_now[jnp.maximum(pos, 0)] if count_self else 0.0
        return jnp.where(den > 0, (jnp.sum(p_t * gain) + self_now) / safe, 0.0)

    return jax.lax.map(one, (cand_c, cand_N, cand_pos, p_cand), batch_size=chunk)


def reduction_scores(arm: str, counts: Counts, totals: LabelTotals, theta, candidates,
                     target: Counts, target_w, target_index, *, count_self: bool = False,
                     proba=None) -> np.ndarray:
    """Expected Brier reductions [C] of the tasks ``candidates`` (indices into ``counts``) for
    the target tasks ``target`` = ``counts.take(target_index)`` weighted by ``target_w``
    [T_target]. ``proba`` [T, K]: the current posteriors of ``counts`` if already computed.
    The building block of :func:`expected_brier_reduction` and the batch selection."""
    candidates = np.asarray(candidates, np.int64)
    if candidates.size == 0:
        return np.zeros(0)
    if proba is None:
        proba = posterior_proba(arm, counts, totals, theta)
    position = np.full(counts.N.shape[0], -1, np.int64)
    position[np.asarray(target_index)] = np.arange(len(target_index))
    Tt, I, K = target.e.shape
    chunk = int(max(1, min(candidates.size, _CHUNK_CELLS // max(1, K * Tt * I * K))))
    size, below = _static_table(target)
    out = _scores(arm, bool(count_self), chunk, size, below, totals, jnp.asarray(theta, jnp.float32),
                  target, jnp.asarray(target_w, jnp.float32),
                  jnp.asarray(np.asarray(counts.c)[candidates], jnp.float32),
                  jnp.asarray(np.asarray(counts.N)[candidates], jnp.float32),
                  jnp.asarray(position[candidates], jnp.int32),
                  jnp.asarray(proba[candidates], jnp.float32))
    return np.asarray(out, np.float64)


def expected_brier_reduction(counts: Counts, candidates=None, *, arm: str = "bda-per-agent",
                             params=None, target=None, count_self: bool = False,
                             totals: LabelTotals | None = None) -> np.ndarray:
    """Expected reduction of the target tasks' posterior Brier from labeling each candidate
    (module docstring; docs/active.md).

    Args:
      counts: :class:`~bda_jax.Counts`; its labeled tasks (gold given) are the current labels.
      candidates: [C] task indices to score (default: every unlabeled task, in order).
      arm: the BDA arm refitted (:data:`bda_jax.active.ARMS`).
      params: its hyperparameters (a dict as ``BDA.params_``; default
        :data:`bda_jax.active.DEFAULT_PARAMS`), fixed during the refit.
      target: [T] weights of the tasks whose Brier is averaged (default: 1 on every unlabeled
        task, 0 on labeled ones).
      count_self: keep the candidate in the average (its Brier 0 once labeled).
      totals: the labeled totals to start from (default :func:`label_totals` of ``counts``).

    Returns [C] float64: the expected reduction (positive: the label is expected to lower the
    pool's Brier), 0 where the target is empty.
    """
    check_arm(arm)
    theta = arm_theta(arm, params)
    T = counts.N.shape[0]
    labeled = (np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing)
    if candidates is None:
        candidates = np.flatnonzero(~labeled)
    candidates = np.asarray(candidates)
    if candidates.ndim != 1 or (candidates.size and (candidates.min() < 0
                                                     or candidates.max() >= T)):
        raise DataError(f"candidates must be [C] task indices in [0, {T})", field="candidates")
    w = (~labeled).astype(np.float32) if target is None else np.asarray(target, np.float32)
    if w.shape != (T,) or not np.all(np.isfinite(w)) or (w < 0).any():
        raise DataError(f"target must be [T] = [{T}] finite weights >= 0", field="target")
    totals = label_totals(counts) if totals is None else totals
    return reduction_scores(arm, counts, totals, theta, candidates, counts, w, np.arange(T),
                            count_self=count_self)
