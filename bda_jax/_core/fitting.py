"""Reliability, per-agent priors and confusion rows from labeled tasks ([BDA] §3 Eq. 3,
Appendix D.1; docs/evaluation.md).

Every estimator takes task *weights* ``w`` [T] (1 for a training task, 0 otherwise) instead of a
boolean subset, so that fold-wise fits keep static shapes and vmap over folds and grids.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .counts import Counts

__all__ = ["BetaPrior", "gold_consistent", "labeled_count", "reliability", "reliability_totals",
           "reliability_from_totals", "prior_from_reliability", "uniform_error_confusion",
           "fit_confusion", "confusion_totals", "confusion_from_totals", "class_log_prior",
           "labeled_weights"]


class BetaPrior(NamedTuple):
    """Per-agent Beta(alpha_i, beta_i) reliability priors, [I] each (a pytree)."""

    alpha: jax.Array
    beta: jax.Array


def labeled_weights(counts: Counts) -> jax.Array:
    """[T] 1.0 for tasks with a gold answer (a candidate, or given but not a candidate), else 0."""
    return ((counts.gold >= 0) | counts.gold_missing).astype(jnp.float32)


def labeled_count(counts: Counts) -> int:
    """Number of labeled tasks (the nonzero entries of :func:`labeled_weights`), on the host."""
    return int(np.sum((np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing)))


def gold_consistent(counts: Counts) -> jax.Array:
    """c_i(g*) [T, I]: each agent's moves consistent with the gold answer.

    For a task whose gold is not a candidate (``gold_missing``) every rejection is consistent
    and every endorsement inconsistent, so c_i(g*) = N_i - sum_g e_i(g) (docs/trace-format.md). Unlabeled
    tasks give 0 (callers weight them out).
    """
    g = jnp.maximum(counts.gold, 0)
    at_gold = jnp.take_along_axis(counts.c, g[:, None, None], axis=2)[..., 0]
    rejections = counts.N - counts.e.sum(-1)
    out = jnp.where((counts.gold >= 0)[:, None], at_gold, 0)
    return jnp.where(counts.gold_missing[:, None], rejections, out)


def reliability(counts: Counts, weights=None) -> jax.Array:
    """r_i = sum_train c_i(g*) / sum_train N_i, [I] ([BDA] §3, before Eq. 3).

    ``weights`` [T] selects the training tasks (default: all labeled tasks). The basis (all
    informative moves, propose-only, round-0) is chosen by how ``counts`` was tallied
    (``tally(..., forces=("propose",))``, ``tally(..., max_round=0)``). An agent without any
    training move gets the mean reliability of the others (no evidence: the pooled value); if no
    agent has one, 0.5. It is :func:`reliability_from_totals` of :func:`reliability_totals`.
    """
    return reliability_from_totals(*reliability_totals(counts, weights))


def reliability_totals(counts: Counts, weights=None) -> tuple[jax.Array, jax.Array]:
    """``(num, den)`` [I] each: the weighted sums over labeled tasks of the gold-consistent
    counts c_i(g*) and of N_i (``weights`` [T] as in :func:`reliability`; default 1)."""
    w = labeled_weights(counts) if weights is None else jnp.asarray(weights, jnp.float32)
    w = w * labeled_weights(counts)
    num = jnp.einsum("t,ti->i", w, gold_consistent(counts).astype(jnp.float32))
    den = jnp.einsum("t,ti->i", w, jnp.asarray(counts.N).astype(jnp.float32))
    return num, den


def reliability_from_totals(num, den) -> jax.Array:
    """r_i = num_i / den_i [I] ([BDA] §3, before Eq. 3) from :func:`reliability_totals` (or
    totals updated label by label); an agent with ``den_i = 0`` gets the mean reliability of the
    agents with one, 0.5 if none has. Jit- and vmap-friendly."""
    seen = den > 0
    r = jnp.where(seen, num / jnp.where(seen, den, 1.0), 0.0)
    pooled = jnp.where(seen.any(), jnp.sum(r * seen) / jnp.maximum(seen.sum(), 1), 0.5)
    return jnp.where(seen, r, pooled)


def prior_from_reliability(r, b, kappa, s) -> BetaPrior:
    """Eq. (3): mu_i = clip(b + kappa (r_i - r_bar), 0.05, 0.95), alpha = mu s, beta = (1 - mu) s.

    r_bar is the plain mean of the r_i over agents (this reading reproduces the worked example of
    Table 20, pi(True) = 0.89). kappa = 0 gives the shared prior. Vmappable over (b, kappa, s).
    """
    r = jnp.asarray(r)
    mu = jnp.clip(b + kappa * (r - jnp.mean(r)), 0.05, 0.95)
    return BetaPrior(mu * s, (1.0 - mu) * s)


def uniform_error_confusion(K: int, diagonal: float = 0.6) -> jax.Array:
    """[K, K] confusion with ``diagonal`` on the diagonal and (1 - diagonal)/(K - 1) elsewhere."""
    if K == 1:
        return jnp.ones((1, 1))
    off = (1.0 - diagonal) / (K - 1)
    return jnp.full((K, K), off) + jnp.eye(K) * (diagonal - off)


def fit_confusion(counts: Counts, lam, weights=None, diagonal: float = 0.6) -> jax.Array:
    """Per-agent confusion rows, the Dirichlet posterior mean of [BDA] §3 (Eq. 4) / docs/evaluation.md.

    P_i(h | g) = (lam m(h | g) + n_i(g, h)) / (lam + sum_h' n_i(g, h')), with
    n_i(g, h) = sum over training tasks with gold g of c[t, i, h] (the consistent counts, i.e. the
    pseudo-observations of Definition 1) and m the uniform-error confusion (``diagonal`` 0.6).
    Returns [I, K, K] indexed [agent, true answer, observed cell].

    Rows are indexed by candidate *slot*. With a shared candidate list (``counts.vocab``; semantic
    labels such as True/False) a slot is a label identity. Otherwise slots are positions (option
    letters, first-seen open answers) and a row describes positional behaviour only ([BDA],
    Appendix F.11); the aggregators record which in ``label_space_``. Tasks whose gold is not a
    candidate have no row and are left out.
    """
    return confusion_from_totals(confusion_totals(counts, weights), lam, diagonal)


def confusion_totals(counts: Counts, weights=None) -> jax.Array:
    """n [I, K, K]: n_i(g, h), the weighted sum of c[t, i, h] over the training tasks with gold
    g (``weights`` [T] as in :func:`fit_confusion`; tasks whose gold is not a candidate left
    out)."""
    K = counts.e.shape[2]
    gold = jnp.asarray(counts.gold)
    w = labeled_weights(counts) if weights is None else jnp.asarray(weights, jnp.float32)
    w = w * (gold >= 0)
    onehot = jax.nn.one_hot(jnp.maximum(gold, 0), K) * w[:, None]       # [T, K]
    return jnp.einsum("tg,tih->igh", onehot, jnp.asarray(counts.c).astype(jnp.float32))


def confusion_from_totals(n, lam, diagonal: float = 0.6) -> jax.Array:
    """[BDA] Eq. 4's rows from totals ``n`` [I, K, K] (:func:`confusion_totals`):
    (lam m + n) / (lam + sum_h n), m the uniform-error confusion. Jit- and vmap-friendly."""
    m = uniform_error_confusion(n.shape[-1], diagonal)[None]
    return (lam * m + n) / (lam + n.sum(-1, keepdims=True))


def class_log_prior(counts: Counts, weights=None, smoothing: float = 1.0,
                    n_iter: int = 100) -> jax.Array:
    """log pi0 [K], the train-fitted candidate prior of [BDA] Eq. 4 / Appendix D.6.

    The kernels restrict pi0 to each task's candidates and renormalize, so a task with candidate
    mask M_t sees ``P(g* = k) = pi_k / sum_{j in M_t} pi_j`` (a Luce choice model). ``pi`` is its
    penalized maximum-likelihood fit on the training gold (``weights`` [T], default: every labeled
    task; tasks whose gold is not a candidate carry no slot and are left out), with
    ``smoothing`` pseudo-wins per slot counted as races over all K slots, by the
    minorize-maximize iteration of Hunter (2004): ``pi_k <- (n_k + s) / (sum_t w_t [k in M_t] /
    pi(M_t) + s K)``, ``n_iter`` steps from the frequencies. When every task has all K slots this
    is exactly the add-``smoothing`` gold frequency ``(n_k + s) / (n + s K)`` (the fixed point is
    reached in one step); with ragged K it corrects the frequency's bias against the slots only
    the larger tasks have (a slot that exists on a quarter of the tasks is gold less often for
    that reason alone). A slot no training task offers keeps its pseudo-count share. Leak-free
    by construction: only tasks with weight > 0 enter. Jittable (traced ``weights``).
    """
    K = counts.e.shape[2]
    w = labeled_weights(counts) if weights is None else jnp.asarray(weights, jnp.float32)
    w = w * (counts.gold >= 0)
    mask = counts.mask.astype(jnp.float32)                                       # [T, K]
    wins = jnp.einsum("t,tk->k", w, jax.nn.one_hot(jnp.maximum(counts.gold, 0), K)) + smoothing
    races = smoothing * K                               # pseudo-races over the full slot set

    def step(_, p):
        offered = jnp.einsum("t,tk->k", w / jnp.maximum(mask @ p, 1e-30), mask)
        den = offered + races / p.sum()
        p = jnp.where(den > 0, wins / jnp.where(den > 0, den, 1.0), 0.0)
        return p / jnp.maximum(p.sum(), 1e-30)

    p = jax.lax.fori_loop(0, n_iter, step, wins / jnp.maximum(wins.sum(), 1e-30))
    return jnp.log(p)
