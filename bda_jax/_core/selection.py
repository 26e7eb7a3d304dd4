"""Leak-free model selection: folds and vectorized nested cross-validation on the multiclass
Brier score ([BDA] §5 and Appendix D.1; docs/evaluation.md).

Folds are weights, not subsets: every fit reads task weights [T], so one compiled call evaluates
a whole hyperparameter grid over all inner folds of all outer folds (vmap over grid x folds).

Compiled once per *bucket* of task counts, not per T: the task axis is padded to
:func:`task_bucket` sizes (four per doubling, from 64) with empty tasks (no move, one candidate,
no gold) of weight zero, which no sum over tasks sees (reliabilities, class priors, confusion
rows, Brier sums, fold sizes), and outputs are sliced back. Folds are drawn on the real tasks.
"""
from __future__ import annotations

import itertools
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .counts import Counts
from .errors import DataError
from .exported import persistent_jit
from .fitting import class_log_prior, fit_confusion, labeled_weights, prior_from_reliability, reliability
from .kernels import (DEFAULT_TABLE_SIZE, onecoin_grid_log_posterior, confusion_log_posterior,
                      onecoin_log_posterior, table_size_for)
from .scoring import brier_mc_per_task

__all__ = ["make_folds", "inner_folds", "training_weights", "training_folds", "GRIDS",
           "arm_log_posterior", "select_and_predict", "nested_grid_search", "task_bucket",
           "pad_tasks", "device_counts", "small_counts_for", "CVResult", "multiclass_brier"]

_B = (0.52, 0.55, 0.58, 0.60)
_KAPPA = (0.0, 1.0, 2.0, 3.0, 4.0)
_S = (4.0, 8.0, 16.0, 32.0)
_LAMBDA = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
_TAU = (0.1, 0.15, 0.25, 0.5, 0.75, 1.0)

#: The paper's grids (docs/evaluation.md), one row per configuration.
#: one-coin arms: columns (b, kappa, s, tau); confusion: (lambda, tau).
GRIDS = {
    "bda-shared": np.array([(b, 0.0, s, 1.0) for b, s in itertools.product(_B, _S)]),
    "bda-per-agent": np.array([(b, k, s, 1.0) for b, k, s in itertools.product(_B, _KAPPA, _S)]),
    "bda-tempered": np.array([(b, k, s, t) for b, k, s, t in
                              itertools.product(_B, _KAPPA, _S, _TAU)]),
    "bda-confusion": np.array(list(itertools.product(_LAMBDA, _TAU))),
}
GRID_COLUMNS = {"bda-shared": ("b", "kappa", "s", "tau"), "bda-per-agent": ("b", "kappa", "s", "tau"),
                "bda-tempered": ("b", "kappa", "s", "tau"), "bda-confusion": ("lambda", "tau")}


_BUCKET_MIN = 64           # smallest padded task axis


def task_bucket(T: int) -> int:
    """The padded length of a task axis of ``T`` tasks: 64 up to 64, then the next multiple of
    2^(k - 2) for 2^k < T <= 2^(k + 1) (64, 80, 96, 112, 128, 160, 192, ...: four sizes per
    doubling, at most 25 % padding), so datasets of nearby sizes share one compiled program.

    >>> [task_bucket(t) for t in (1, 64, 65, 100, 129, 500, 1000)]
    [64, 64, 80, 112, 160, 512, 1024]
    """
    T = int(T)
    if T <= _BUCKET_MIN:
        return _BUCKET_MIN
    step = 1 << max((T - 1).bit_length() - 3, 0)      # 2^(k - 2): four steps per doubling
    return -(-T // step) * step


def pad_tasks(counts: Counts, size: int) -> Counts:
    """``counts`` with the task axis padded to ``size`` by empty tasks (host arrays, no names).

    A padding task has no move (N, e, c, e0 zero; conf0 NaN), one candidate (K 1, mask on slot
    0 only: every kernel gives it a finite posterior), no gold (-1, not gold_missing: weight 0 in
    every fit) and cluster -1. Tasks ``:T`` are ``counts``' own, unchanged.
    """
    T = counts.N.shape[0]
    if size < T:
        raise DataError(f"cannot pad {T} tasks to {size}", field="size")
    fill = {"N": 0, "e": 0, "c": 0, "e0": 0, "conf0": np.nan, "mask": False, "K": 1, "gold": -1,
            "gold_missing": False, "cluster": -1}
    out = {}
    for name, value in fill.items():
        x = np.asarray(getattr(counts, name))
        if size > T:
            pad = np.full((size - T,) + x.shape[1:], value, x.dtype)
            if name == "mask":
                pad[:, 0] = True
            x = np.concatenate([x, pad])
        out[name] = x
    return Counts(**out)


def _pad_axis(x, size: int, axis: int, value=0):
    """Host array ``x`` padded with ``value`` to ``size`` along ``axis``."""
    x = np.asarray(x)
    width = [(0, 0)] * x.ndim
    width[axis] = (0, size - x.shape[axis])
    return np.pad(x, width, constant_values=value)


def make_folds(counts: Counts, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Fold id [T] per task: grouped by cluster, stratified by gold where answer classes repeat.

    Clusters (e.g. several seeds of one question) never straddle folds. With a shared candidate
    list (``counts.vocab``) clusters are shuffled, ordered by their gold class and dealt to folds
    round-robin, so every fold sees each class in proportion; otherwise (open or positional
    answer spaces) shuffled clusters are dealt round-robin. Deterministic in ``seed``.
    """
    if not isinstance(n_folds, int) or n_folds < 2:
        raise DataError(f"n_folds must be an integer >= 2, got {n_folds!r}", field="folds")
    cluster = np.asarray(counts.cluster)
    ids, first = np.unique(cluster, return_index=True)
    if ids.size < n_folds:
        raise DataError(f"{ids.size} clusters cannot fill {n_folds} folds", field="folds")
    rng = np.random.default_rng(seed)
    order = rng.permutation(ids.size)
    if counts.vocab is not None:
        stratum = np.asarray(counts.gold)[first][order]      # -1 (unlabeled) forms its own stratum
        order = order[np.argsort(stratum, kind="stable")]
    fold_of_cluster = np.empty(ids.size, np.int32)
    fold_of_cluster[order] = np.arange(ids.size) % n_folds
    return fold_of_cluster[np.searchsorted(ids, cluster)]


def training_weights(counts: Counts, weights) -> np.ndarray:
    """[T] float32 training weights, zero on tasks without a gold answer."""
    T = counts.N.shape[0]
    if weights is None:
        w = np.ones(T, np.float32)
    else:
        w = np.asarray(weights, np.float32)
        if w.shape != (T,) or not np.isfinite(w).all() or (w < 0).any():
            raise DataError(f"weights must be [T] = [{T}] finite and >= 0", field="weights")
    w = w * ((np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing))   # labeled_weights
    if not (w > 0).any():
        raise DataError("no labeled training task (weight > 0 and a gold answer)",
                        field="weights")
    return w


def training_folds(counts: Counts, w: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    """[T] fold ids of the training tasks (w > 0), -1 elsewhere; built from the training tasks
    alone so no other label can move a fold boundary. Fewer clusters than ``n_folds``: one fold
    per cluster (at least 2 are needed)."""
    idx = np.flatnonzero(w > 0)
    n_clusters = np.unique(np.asarray(counts.cluster)[idx]).size
    n = min(int(n_folds), n_clusters)
    if n < 2:
        raise DataError(f"cross-validation needs training tasks from >= 2 clusters, got "
                        f"{n_clusters}", field="weights")
    folds = np.full(counts.N.shape[0], -1, np.int32)
    folds[idx] = make_folds(counts.take(idx), n, seed)
    return folds


def inner_folds(counts: Counts, outer: np.ndarray, n_inner: int = 5, seed: int = 0,
                train_weights=None) -> np.ndarray:
    """[F_out, T] inner fold ids within each outer training part (-1 elsewhere).

    The training part of outer fold f is ``outer != f``, or the tasks with
    ``train_weights[f] > 0`` (e.g. a label budget drawn from it).
    """
    outer = np.asarray(outer)
    F = int(outer.max()) + 1
    parts = ((outer[None, :] != np.arange(F)[:, None]) if train_weights is None
             else np.asarray(train_weights) > 0)
    return np.stack([training_folds(counts, parts[f], n_inner, seed + 1 + f) for f in range(F)])


def multiclass_brier(log_post, gold, mask) -> jax.Array:
    """[T] multiclass Brier of log-posteriors (:func:`bda_jax.metrics.brier_mc_per_task`)."""
    return brier_mc_per_task(jnp.where(mask, jnp.exp(log_post), 0.0), gold, mask)


def arm_log_posterior(arm: str, theta, weights, counts: Counts, fit_counts: Counts | None = None,
                      class_prior: bool = False, table_size: int | None = None,
                      small_counts: bool = False):
    """Log-posterior [T, K] of a BDA arm at hyperparameters ``theta`` fitted on ``weights``.

    ``fit_counts`` (default ``counts``) are the counts reliabilities are estimated from (e.g. a
    propose-only tally); ``class_prior`` uses training gold frequencies as pi0 (else uniform).
    ``small_counts``: every N of ``counts`` is below ``table_size`` (known on the host; see
    :func:`small_counts_for`), so traced counts compile the table path alone.
    """
    fit_counts = counts if fit_counts is None else fit_counts
    log_prior = class_log_prior(fit_counts, weights) if class_prior else None
    if arm == "bda-confusion":
        lam, tau = theta[0], theta[1]
        return confusion_log_posterior(counts, fit_confusion(fit_counts, lam, weights), tau,
                                       log_prior)
    b, kappa, s, tau = theta[0], theta[1], theta[2], theta[3]
    prior = prior_from_reliability(reliability(fit_counts, weights), b, kappa, s)
    return onecoin_log_posterior(counts, prior.alpha, prior.beta, tau, log_prior,
                                 table_size=table_size,
                                 counts_below=table_size if small_counts else None)


def small_counts_for(counts: Counts, table_size: int) -> bool:
    """Whether every N of ``counts`` is below ``table_size`` (read once per collection)."""
    top = counts.max_count
    return top is not None and top < table_size


class CVResult(NamedTuple):
    """Out-of-fold predictions and what was selected.

    ``log_proba`` [T, K]: each task scored by the model fitted without its outer fold.
    ``selected`` [F_out, P]: the chosen grid row per outer fold; ``inner_brier`` [F_out, G]:
    mean inner-fold multiclass Brier of every grid row.
    """

    log_proba: jax.Array
    selected: jax.Array
    inner_brier: jax.Array


@partial(persistent_jit, static_argnames=("arm", "class_prior", "table_size", "refit",
                                        "small_counts"))
def nested_grid_search(arm, grid, outer_train, inner_train, inner_val, counts, fit_counts, class_prior,
            table_size=DEFAULT_TABLE_SIZE, refit=True, small_counts=False):
    """The nested grid search of :func:`select_and_predict` as one compiled call.

    ``grid`` [G, P]; per outer fold f (F of them) ``outer_train`` [F, T] training weights and
    ``inner_train``, ``inner_val`` [F, F_in, T] inner-fold weights; ``counts`` (and
    ``fit_counts``, the reliability basis) with T tasks. Returns ``(log_post, selected,
    scores)``: [F, T, K] posteriors refitted on each outer training part at its selected row
    (``None`` with ``refit=False``: the selection alone), [F, P] selected rows, [F, G] mean
    inner-fold Brier. Weights are the only task selection, so padding tasks of weight zero
    change nothing (:func:`pad_tasks`). ``small_counts`` (static; :func:`small_counts_for`):
    every N is below ``table_size``, so only the kernels' table path is compiled.
    """
    labeled = labeled_weights(counts)

    def fold_score(theta, w_train, w_val):                       # one config, one inner fold
        lp = arm_log_posterior(arm, theta, w_train, counts, fit_counts, class_prior, table_size,
                               small_counts)
        brier = multiclass_brier(lp, counts.gold, counts.mask)
        return jnp.sum(brier * w_val), jnp.sum(w_val)

    def grid_scores(w_in_train, w_in_val):                       # [G, F_in] inner Brier sums
        if arm == "bda-confusion" or class_prior:
            if w_in_train.shape[0] == 1:
                # one inner fold (BDA.fit runs one search fold per inner fold): no fold axis to
                # batch, so the kernels are traced under one vmap (the grid's), not two
                total, n = jax.vmap(fold_score, (0, None, None))(grid, w_in_train[0] * labeled,
                                                                 w_in_val[0] * labeled)
                return total[:, None], n[:, None]
            per = jax.vmap(jax.vmap(fold_score, (None, 0, 0)), (0, None, None))
            return per(grid, w_in_train * labeled, w_in_val * labeled)
        # one-coin arms: all (grid row, inner fold) priors scored by one matrix product
        r = jax.vmap(lambda w: reliability(fit_counts, w))(w_in_train * labeled)      # [F_in, I]
        prior = jax.vmap(lambda th: jax.vmap(
            lambda ri: prior_from_reliability(ri, th[0], th[1], th[2]))(r))(grid)    # [G, F_in, I]
        G, F_in, I = prior.alpha.shape
        taus = jnp.repeat(grid[:, 3], F_in)
        lps = onecoin_grid_log_posterior(counts.N, counts.e, counts.c, counts.mask, counts.K,
                            prior.alpha.reshape(G * F_in, I), prior.beta.reshape(G * F_in, I),
                            taus, jnp.zeros((1, counts.e.shape[2]), grid.dtype), table_size,
                            small_counts)
        brier = jax.vmap(lambda lp: multiclass_brier(lp, counts.gold, counts.mask))(lps)
        val = w_in_val * labeled                                                       # [F_in, T]
        total = jnp.einsum("gft,ft->gf", brier.reshape(G, F_in, -1), val)
        return total, jnp.broadcast_to(val.sum(-1), (G, F_in))

    def outer_fold(args):
        w_outer, w_in_train, w_in_val = args
        total, n = grid_scores(w_in_train, w_in_val)                     # [G, F_in]
        score = total.sum(1) / jnp.maximum(n.sum(1), 1.0)                   # [G]
        best = jnp.argmin(score)                                           # first of ties
        if not refit:
            return grid[best], score
        lp = arm_log_posterior(arm, grid[best], w_outer * labeled, counts, fit_counts, class_prior,
                               table_size, small_counts)
        return lp, grid[best], score

    # outer folds one after another (lax.map): the grid x inner-fold batch is the wide axis
    out = jax.lax.map(outer_fold, (outer_train, inner_train, inner_val))
    return out if refit else (None, *out)


def select_and_predict(counts: Counts, arm: str, outer, inner=None, *, grid=None,
                       fit_counts: Counts | None = None, class_prior: bool = False,
                       n_inner: int = 5, seed: int = 0, train_weights=None) -> CVResult:
    """Nested leak-free CV (Appendix D.1): for each outer fold, choose the grid row with the
    lowest mean inner-fold multiclass Brier (reliabilities refit inside every inner training
    part), refit on the whole outer training part, and score the outer test fold.

    ``outer`` [T] fold ids (e.g. :func:`make_folds`); ``inner`` [F_out, T] (default:
    :func:`inner_folds`); ``train_weights`` [F_out, T] restricts each outer training part (a label
    budget; default: every other fold). Unlabeled tasks are scored but never fit. One compiled
    call evaluates
    every (outer fold, inner fold, grid row). A test label never influences its own prediction:
    permuting the gold of an outer fold leaves that fold's predictions bit-identical.
    """
    if arm not in GRIDS:
        raise DataError(f"unknown BDA arm {arm!r}; expected one of {sorted(GRIDS)}", field="arm")
    outer = np.asarray(outer)
    if outer.shape != (counts.N.shape[0],) or outer.min() < 0:
        raise DataError("outer folds must be [T] non-negative fold ids", field="folds")
    F = int(outer.max()) + 1
    if train_weights is not None:
        train_weights = np.asarray(train_weights, np.float32)
        if train_weights.shape != (F, outer.size) or (train_weights[outer[None, :] ==
                                                                    np.arange(F)[:, None]] != 0).any():
            raise DataError("train_weights must be [F_out, T] and zero on each outer test fold",
                            field="train_weights")
    inner = (inner_folds(counts, outer, n_inner, seed, train_weights) if inner is None
             else np.asarray(inner))
    n_in = int(inner.max()) + 1
    T = outer.size
    size = task_bucket(T)                # padded task axis: one compiled call per bucket
    grid = np.asarray(GRIDS[arm] if grid is None else grid, np.float32)
    outer_train = (outer[None, :] != np.arange(F)[:, None] if train_weights is None
                   else train_weights).astype(np.float32)                                # [F, T]
    inner_train = ((inner[:, None, :] >= 0)
                   & (inner[:, None, :] != np.arange(n_in)[None, :, None])).astype(np.float32)
    inner_val = (inner[:, None, :] == np.arange(n_in)[None, :, None]).astype(np.float32)
    fit_counts = counts if fit_counts is None else fit_counts
    lps, selected, scores = nested_grid_search(
        arm, grid, _pad_axis(outer_train, size, 1), _pad_axis(inner_train, size, 2),
        _pad_axis(inner_val, size, 2), pad_tasks(counts, size), pad_tasks(fit_counts, size),
        class_prior, table_size_for(counts),
        small_counts=small_counts_for(counts, table_size_for(counts)))
    # each task from the fit without its outer fold (one term per task: an exact sum), on the host
    lps = np.asarray(lps)[:, :T]
    test = (outer[None, :] == np.arange(F)[:, None])[..., None]                         # [F, T, 1]
    log_proba = np.sum(np.where(test, lps, np.float32(0.0)), axis=0)
    log_proba = np.where(np.asarray(counts.mask), log_proba, np.float32(-np.inf))
    return CVResult(jax.device_put(log_proba), selected, scores)


def device_counts(counts: Counts) -> Counts:
    """The same counts as device arrays without names (a clean jit argument). ``device_put``,
    not ``jnp.asarray``: the latter compiles a copy program per array shape."""
    return jax.tree.map(jax.device_put, counts)
