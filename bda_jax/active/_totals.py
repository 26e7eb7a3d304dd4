"""The labeled-count totals the supervised BDA fits read, and the closed-form refit on them
([BDA] §3 Eq. 3 for the one-coin arms, the Dirichlet rows of Eq. 4 for the confusion arm).

Both fits are sums over labeled tasks, so labeling one more task t with answer k adds that
task's counts to a few totals and the refit is a handful of array operations:

* one-coin (``bda-shared``, ``bda-per-agent``, ``bda-tempered``): ``num`` [I] =
  sum_labeled c_i(g*), ``den`` [I] = sum_labeled N_i, so r_i = num_i / den_i (the reliability
  before Eq. 3) and a label k on t adds ``c[t, :, k]`` to ``num`` and ``N[t]`` to ``den``;
* confusion (``bda-confusion``): ``n`` [I, K, K] with n_i(g, h) = sum over labeled tasks of
  gold g of c[t, i, h], so a label k on t adds ``c[t]`` to row k of every agent.

A *soft* label q [K] (a distribution over t's answers) adds the q-weighted mixture of the hard
updates: ``num += sum_k q_k c[t, :, k]``, ``den += N[t]``, ``n[:, k, :] += q_k c[t]``. The
batch selection uses it to condition on a task whose label is chosen but not yet known
(:func:`bda_jax.active.select_batch`). The hyperparameters ((b, kappa, s, tau) or
(lambda, tau)) are held fixed during such a refit: only the counts move.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.counts import Counts
from .._core.errors import DataError
from .._core.fitting import (confusion_from_totals, confusion_totals, prior_from_reliability,
                             reliability_from_totals, reliability_totals)
from .._core.kernels import confusion_log_posterior, onecoin_log_posterior
from .._core.selection import GRID_COLUMNS

__all__ = ["LabelTotals", "ARMS", "DEFAULT_PARAMS", "label_totals", "add_label",
           "reliability_from_totals", "arm_theta", "check_arm", "totals_log_posterior"]

#: the BDA arms the acquisition can refit in closed form (``bda_jax.aggregators.BDA`` arms)
ARMS = ("bda-shared", "bda-per-agent", "bda-tempered", "bda-confusion")

#: hyperparameters used before enough labels exist for cross-validation: a row of each arm's
#: grid (docs/evaluation.md) near its middle; ``bda-tempered`` and ``bda-confusion`` temper by
#: 0.5 (correlated moves over-count evidence, [BDA] §6)
DEFAULT_PARAMS = {
    "bda-shared": {"b": 0.55, "kappa": 0.0, "s": 8.0, "tau": 1.0},
    "bda-per-agent": {"b": 0.55, "kappa": 2.0, "s": 8.0, "tau": 1.0},
    "bda-tempered": {"b": 0.55, "kappa": 2.0, "s": 8.0, "tau": 0.5},
    "bda-confusion": {"lambda": 10.0, "tau": 0.5},
}


class LabelTotals(NamedTuple):
    """Sufficient statistics of the labeled tasks (a pytree): ``num`` [I] = sum c_i(g*),
    ``den`` [I] = sum N_i (one-coin, Eq. 3) and ``n`` [I, K, K] = n_i(g, h) (confusion rows,
    indexed [agent, gold slot, observed cell]). Float32, so soft labels add fractions."""

    num: jax.Array
    den: jax.Array
    n: jax.Array


def check_arm(arm: str) -> str:
    """``arm`` if it is one of :data:`ARMS`, else a :class:`~bda_jax.DataError`."""
    if arm not in ARMS:
        raise DataError(f"unknown BDA arm {arm!r}; expected one of {list(ARMS)}", field="arm")
    return arm


def arm_theta(arm: str, params=None) -> np.ndarray:
    """The arm's hyperparameter row as float64 [P] in ``GRID_COLUMNS`` order ((b, kappa, s, tau)
    for one-coin arms, (lambda, tau) for the confusion arm) from a dict such as
    ``BDA.params_`` (``None``: :data:`DEFAULT_PARAMS`). ``bda-shared`` forces kappa = 0."""
    check_arm(arm)
    params = DEFAULT_PARAMS[arm] if params is None else dict(params)
    cols = GRID_COLUMNS[arm]
    missing = [c for c in cols if c not in params]
    if missing:
        raise DataError(f"params for {arm} need {list(cols)}, missing {missing}", field="params")
    theta = np.array([float(params[c]) for c in cols], np.float64)
    if not np.all(np.isfinite(theta)):
        raise DataError(f"params must be finite, got {params}", field="params")
    if arm == "bda-shared":
        theta[1] = 0.0
    if arm == "bda-confusion":
        if theta[0] <= 0 or theta[1] < 0:
            raise DataError("bda-confusion needs lambda > 0 and tau >= 0", field="params")
    elif theta[2] <= 0 or theta[3] < 0:
        raise DataError(f"{arm} needs s > 0 and tau >= 0", field="params")
    return theta


def label_totals(counts: Counts, weights=None) -> LabelTotals:
    """The totals of the labeled tasks of ``counts`` (gold >= 0, or a gold that is not a
    candidate), each weighted by ``weights`` [T] (default 1).

    The library fits are made of the same sums: :func:`bda_jax.reliability` is
    :func:`reliability_from_totals` of ``(num, den)``, and :func:`bda_jax.fit_confusion` is
    (lam m + n) / (lam + sum_h n) of ``n``. Tasks whose gold is not a candidate count in
    ``num`` / ``den`` (every rejection is consistent) but have no confusion row, as in those
    fits.
    """
    num, den = reliability_totals(counts, weights)
    n = confusion_totals(counts, weights)
    return LabelTotals(num, den, n)


def add_label(totals: LabelTotals, c_t, N_t, q) -> LabelTotals:
    """The totals after labeling one task with counts ``c_t`` [I, K] and ``N_t`` [I] with the
    label distribution ``q`` [K] (one-hot: a hard label k; else a soft label)."""
    c_t = jnp.asarray(c_t, jnp.float32)
    q = jnp.asarray(q, jnp.float32)
    return LabelTotals(totals.num + c_t @ q, totals.den + jnp.asarray(N_t, jnp.float32),
                       totals.n + q[None, :, None] * c_t[:, None, :])


def totals_log_posterior(arm: str, counts: Counts, totals: LabelTotals, theta, *,
                         table_size: int | None = None, counts_below: int | None = None):
    """Log-posteriors [T, K] of ``counts`` under the arm fitted on ``totals`` with the fixed
    hyperparameters ``theta`` (:func:`arm_theta`): Eq. 3 priors into the one-coin kernel
    (Eqs. 1-2), or the Dirichlet rows into the confusion kernel (Eq. 4). pi0 is uniform for
    every arm: the confusion estimator's train-fitted pi0 ([BDA] Appendix D.6) is an iterative
    fit, not a sum over labeled tasks, and is left out of the refit. Jit- and vmap-friendly in
    ``totals`` and ``theta``."""
    if arm == "bda-confusion":
        return confusion_log_posterior(counts, confusion_from_totals(totals.n, theta[0]), theta[1])
    r = reliability_from_totals(totals.num, totals.den)
    prior = prior_from_reliability(r, theta[0], theta[1], theta[2])
    return onecoin_log_posterior(counts, prior.alpha, prior.beta, theta[3],
                                 table_size=table_size, counts_below=counts_below)
