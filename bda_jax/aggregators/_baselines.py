"""Supervised and zero-cost baselines of the BDA paper, and leak-free recalibration wrappers
([BDA] Appendix B.1 "the methods, one by one", Appendix E.1 and E.3; docs/trace-format.md and docs/evaluation.md).

Every class is an :class:`~bda_jax.aggregators.Aggregator`: ``fit(data, weights=None)``
returns ``self``, ``predict_proba`` gives [T, K] probabilities (0 on padding slots), ``predict``
the chosen slot with a seeded random tie-break (Appendix D.6). Fitted attributes end in ``_``.

Training tasks. ``weights`` [T] (default: all ones) marks the training tasks; a supervised fit
reads only tasks with weight > 0 *and* a gold answer (``gold >= 0`` or ``gold_missing``), so a
harness can pass an outer-training mask and the other tasks' labels never matter: permuting the
gold of zero-weight tasks leaves every prediction bit-identical (tested). Inner folds are built
by :func:`~bda_jax._core.selection.make_folds` on the training tasks alone (grouped by cluster,
stratified by gold when ``vocab`` is shared), so not even the fold assignment sees other labels.

Round-0 accuracy (gated vote, best member). A seat's round-0 answer on a task is its round-0
positive endorsements ``e0[t, i, :]``; its accuracy on that task is the fraction of those that
endorse the gold (0/1 for the usual single proposal; a task whose gold is not a candidate scores
0). Tasks where the seat endorsed nothing in round 0 are left out of its accuracy and its chance
level. Chance is 1/K_t averaged over the same tasks (so per-task K is handled).

>>> import numpy as np
>>> from bda_jax import Counts
>>> e0 = np.zeros((4, 2, 2), int); e0[:, 0, 0] = 1; e0[:, 1, 1] = 1   # seat 0 says A, seat 1 B
>>> cts = Counts.from_arrays(N=e0.sum(-1), e=e0, c=e0, gold=[0, 0, 0, 1])
>>> BestMember().fit(cts).member_
0
>>> np.round(BestMember().fit(cts).predict_proba(cts)[0], 2).tolist()
[0.75, 0.25]
"""
from __future__ import annotations

import copy
from abc import ABC, abstractmethod
import inspect
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._base import Aggregator
from .._core.counts import Counts
from .._core.decisions import Decision, argmax_random_ties, vote_shares
from .._core.errors import DataError
from .._core.exported import persistent_jit
from .._core.fitting import labeled_weights
from .._core.selection import device_counts, multiclass_brier, training_folds, training_weights

__all__ = ["LogisticStacking", "GatedVote", "VerbalizedVote", "BestMember",
           "IsotonicRecalibrated", "TemperatureScaled", "SeatAccuracy", "round0_accuracy",
           "stacking_features", "pav", "isotonic_regression", "fit_posterior_temperature"]

L2_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0)


# ----------------------------------------------------------------------------- shared helpers

def _fit_with_weights(model, data, w):
    """``model.fit(data, weights=w)``, or ``model.fit(data)`` for an unsupervised model whose
    ``fit`` takes no weights (e.g. :class:`Majority`)."""
    if "weights" in inspect.signature(model.fit).parameters:
        return model.fit(data, weights=w)
    return model.fit(data)


def _check_fitted(model, attr):
    if not hasattr(model, attr):
        raise DataError(f"fit the {type(model).__name__} first", field="fit")


def _check_seats(model, counts: Counts, n_seats: int):
    I = counts.N.shape[1]
    if I != n_seats:
        raise DataError(f"{type(model).__name__} was fitted on {n_seats} seats, counts have {I}",
                        field="agents")
    fitted, given = getattr(model, "agents_", None), counts.agents
    if fitted is not None and given is not None and tuple(fitted) != tuple(given):
        raise DataError(f"agents differ from the fit: {list(given)} vs {list(fitted)}",
                        field="agents")


def _masked_log(p, mask):
    return jnp.where(mask, jnp.log(p), -jnp.inf)


# ----------------------------------------------------------------------------- round-0 accuracy

class SeatAccuracy(NamedTuple):
    """Round-0 accuracy per seat on the training tasks: ``accuracy`` [I] (NaN: no answered
    training task), ``chance`` [I] (mean 1/K_t over the same tasks), ``n`` [I] (their weight)."""

    accuracy: jax.Array
    chance: jax.Array
    n: jax.Array


@jax.jit
def _round0_accuracy(counts: Counts, w):
    e0 = counts.e0.astype(jnp.float32) * counts.mask[:, None, :]
    total = e0.sum(-1)                                                   # [T, I]
    g = jnp.maximum(counts.gold, 0)
    hit = jnp.take_along_axis(e0, g[:, None, None], axis=2)[..., 0]
    hit = jnp.where((counts.gold >= 0)[:, None], hit, 0.0)               # gold_missing: wrong
    answered = total > 0
    frac = jnp.where(answered, hit / jnp.where(answered, total, 1.0), 0.0)
    wt = jnp.where(answered, w[:, None], 0.0)
    n = wt.sum(0)
    safe = jnp.where(n > 0, n, 1.0)
    acc = jnp.where(n > 0, jnp.sum(wt * frac, 0) / safe, jnp.nan)
    chance = jnp.where(n > 0, jnp.sum(wt / counts.K[:, None], 0) / safe, jnp.nan)
    return SeatAccuracy(acc, chance, n)


def round0_accuracy(counts: Counts, weights=None) -> SeatAccuracy:
    """Each seat's round-0 accuracy on the training tasks ([BDA] Appendix B.1 gated vote,
    Appendix E.3 best member).

    Per task, the fraction of the seat's round-0 endorsements ``e0[t, i, :]`` that hit the gold;
    averaged with ``weights`` [T] (default: all labeled tasks) over the tasks where the seat
    endorsed something in round 0. Tasks without gold never count; a gold that is not a candidate
    scores 0. Returns :class:`SeatAccuracy` of [I] arrays.
    """
    T = counts.N.shape[0]
    w = np.ones(T, np.float32) if weights is None else np.asarray(weights, np.float32)
    w = w * np.asarray(labeled_weights(counts), np.float32)
    return _round0_accuracy(device_counts(counts), jnp.asarray(w))


# ----------------------------------------------------------------------------- logistic stacking

def stacking_features(counts: Counts, intercept: bool = False) -> jax.Array:
    """[T, K, P] conditional-logit features of every candidate slot: the per-seat tallies
    ``[c_i(g)]_i`` then ``[d_i(g)]_i`` (P = 2I), then, with ``intercept``, a one-hot of the slot
    (P = 2I + K). Padding slots are all zero."""
    mask = counts.mask
    c = jnp.asarray(counts.c, jnp.float32)
    d = (jnp.asarray(counts.N, jnp.float32)[..., None] - c)
    x = jnp.concatenate([c, d], axis=1) * mask[:, None, :]               # [T, 2I, K]
    x = jnp.moveaxis(x, 1, 2)                                            # [T, K, 2I]
    if intercept:
        K = x.shape[1]
        onehot = jnp.broadcast_to(jnp.eye(K, dtype=jnp.float32), (x.shape[0], K, K))
        x = jnp.concatenate([x, onehot * mask[..., None]], axis=-1)
    return x


def _feature_scale(x, mask, w, is_tally):
    """Root-mean-square of each tally feature over the valid slots of the weighted tasks (1 for
    a constant-zero feature and for intercept columns): puts every seat on one L2 scale."""
    cell = w[:, None] * mask                                             # [T, K]
    ms = jnp.einsum("tk,tkp->p", cell, x * x) / jnp.maximum(cell.sum(), 1e-12)
    rms = jnp.sqrt(ms)
    rms = jnp.where(rms > 0, rms, 1.0)
    return jnp.where(is_tally, rms, 1.0)


def _stack_log_proba(x, mask, coef):
    z = jnp.einsum("tkp,p->tk", x, coef)
    return jax.nn.log_softmax(jnp.where(mask, z, -jnp.inf), axis=-1)


def _stack_fit_one(x, gold, mask, is_tally, w, lam, *, steps, optimizer, learning_rate):
    """One L2-regularized conditional-logit fit on weighted tasks; returns raw-scale coef [P]."""
    scale = _feature_scale(x, mask, w, is_tally)
    xs = x / scale
    wl = w * (gold >= 0)                    # gold not a candidate: no target in the softmax
    wsum = jnp.maximum(wl.sum(), 1e-12)
    g = jnp.maximum(gold, 0)

    def loss(theta):
        lp = _stack_log_proba(xs, mask, theta)
        nll = -jnp.take_along_axis(lp, g[:, None], axis=1)[:, 0]
        nll = jnp.where(wl > 0, nll, 0.0)
        return jnp.sum(wl * nll) / wsum + 0.5 * lam * jnp.sum(theta * theta)

    import optax        # here, not at module level: 0.1 s of every CLI start, used by stacking only

    theta0 = jnp.zeros(x.shape[-1], jnp.float32)
    if optimizer == "lbfgs":
        opt = optax.lbfgs(learning_rate=learning_rate,
                          linesearch=optax.scale_by_backtracking_linesearch(
                              max_backtracking_steps=20))
    else:
        opt = optax.adam(0.05 if learning_rate is None else learning_rate)
    value_and_grad = jax.value_and_grad(loss)

    def body(_, carry):
        theta, state = carry
        value, grad = value_and_grad(theta)
        if optimizer == "lbfgs":
            updates, state = opt.update(grad, state, theta, value=value, grad=grad,
                                        value_fn=loss)
        else:
            updates, state = opt.update(grad, state, theta)
        return optax.apply_updates(theta, updates), state

    theta, _ = jax.lax.fori_loop(0, steps, body, (theta0, opt.init(theta0)))
    return theta / scale


@partial(persistent_jit, static_argnames=("steps", "optimizer", "learning_rate"))
def _stack_grid(x, gold, mask, is_tally, w_fit, w_val, lams, *, steps, optimizer, learning_rate):
    """Fit every (L2 value, weight row) in one vmapped call.

    ``w_fit`` [F + 1, T]: the F inner training parts, then the whole training set; ``w_val``
    [F, T] the inner validation folds. Returns coef [G, F + 1, P] and the mean inner-fold
    multiclass Brier [G] of every L2 value.
    """
    fit = partial(_stack_fit_one, x, gold, mask, is_tally, steps=steps, optimizer=optimizer,
                  learning_rate=learning_rate)
    coef = jax.vmap(jax.vmap(fit, (0, None)), (None, 0))(w_fit, lams)         # [G, F+1, P]

    def val_brier(cf, wv):
        b = multiclass_brier(_stack_log_proba(x, mask, cf), gold, mask)
        return jnp.sum(jnp.where(wv > 0, b, 0.0) * wv)

    F = w_val.shape[0]
    total = jax.vmap(jax.vmap(val_brier, (0, 0)), (0, None))(coef[:, :F], w_val)  # [G, F]
    return coef, total.sum(1) / jnp.maximum(w_val.sum(), 1e-12)


class LogisticStacking(Aggregator):
    """L2-regularized logistic stacking on the per-seat tallies ([BDA] Appendix B.1).

    A conditional logit: candidate g of task t scores ``z(g) = sum_i w_c[i] c_i(g) +
    w_d[i] d_i(g)`` (+ ``b[g]`` with an intercept), one weight vector shared by all candidates
    and tasks, and ``p(g) = softmax_g z`` over the task's valid candidates (padding: 0). The
    features are the sufficient statistics BDA reads (``c``, ``d = N - c``; docs/evaluation.md).

    * Since d_i(g) = N_i - c_i(g) and N_i is constant across candidates, only w_c[i] - w_d[i]
      moves the softmax; the L2 penalty splits it between the two (``coef_`` reports both).
      A bias per seat-feature would be constant across candidates and cancels, so there is none.
    * A per-candidate intercept ``b[g]`` means something only when slots are label identities:
      ``intercept="auto"`` (default) adds it iff every training task shares one candidate list
      (``counts.vocab``), ``True``/``False`` force it. Predicting with an intercept on counts
      whose ``vocab`` differs from the fit's raises :class:`DataError`.
    * Features are divided by their root-mean-square over the training tasks' valid slots
      before fitting (one L2 scale for every seat); ``coef_`` is on the raw count scale.
    * Objective: weighted mean NLL over training tasks with a gold candidate + (l2 / 2)|w|^2
      (intercept included, so separable data stay bounded). Tasks whose gold is not a candidate
      have no target in the softmax and are left out of the fit (they do count in the inner
      validation Brier, as in :func:`~bda_jax.select_and_predict`).
    * ``l2`` is chosen by ``n_folds``-fold CV on the multiclass Brier (folds from
      :func:`make_folds` on the training tasks, grouped by cluster; first of ties); the whole
      L2 grid x (inner folds + the final refit) is one vmapped, jitted call.
    * Optimizer: optax ``lbfgs`` (backtracking Armijo line search, which compiles several times
      faster than the zoom search under vmap; ``learning_rate`` None) or ``adam``
      (``learning_rate`` default 0.05), full batch, ``steps`` fixed iterations from zero:
      deterministic. A non-finite fit raises :class:`DataError`.

    Fitted: ``coef_`` [I, 2] (columns: c, d), ``intercept_`` [K] or None, ``theta_`` [P] (all
    weights, the order of :func:`stacking_features`), ``l2_``,
    ``cv_brier_`` [G], ``agents_``, ``vocab_``.
    """

    def __init__(self, l2_grid=L2_GRID, n_folds: int = 5, seed: int = 0, steps: int = 50,
                 learning_rate: float | None = None, optimizer: str = "lbfgs",
                 intercept="auto"):
        self.l2_grid, self.n_folds, self.seed, self.steps = l2_grid, n_folds, seed, steps
        self.learning_rate, self.optimizer, self.intercept = learning_rate, optimizer, intercept
        self._check_params()

    def _check_params(self) -> None:
        if self.optimizer not in ("lbfgs", "adam"):
            raise DataError(f"optimizer must be 'lbfgs' or 'adam', got {self.optimizer!r}",
                            field="optimizer")
        try:
            known = self.intercept in ("auto", True, False)
        except (TypeError, ValueError):          # e.g. an array: no single truth value
            known = False
        if not known:
            raise DataError(f"intercept must be 'auto', True or False, got {self.intercept!r}",
                            field="intercept")
        self._l2_values()
        if isinstance(self.steps, (bool, np.bool_)) or \
                not isinstance(self.steps, (int, np.integer)) or self.steps < 0:
            raise DataError(f"steps must be an integer >= 0, got {self.steps!r}", field="steps")

    def _l2_values(self) -> np.ndarray:
        """``l2_grid`` as a [G] float64 array (checked: 1-D, non-empty, finite, >= 0)."""
        try:
            grid = np.asarray(self.l2_grid, np.float64)
        except (TypeError, ValueError):
            grid = None
        if grid is None or grid.ndim != 1 or grid.size == 0 or not np.isfinite(grid).all() \
                or (grid < 0).any():
            raise DataError(f"l2_grid must be a non-empty list of finite numbers >= 0, got "
                            f"{self.l2_grid!r}", field="l2_grid")
        return grid

    def fit(self, data, weights=None) -> "LogisticStacking":
        grid = self._l2_values()
        counts = self._counts(data)
        self.agents_ = counts.agents
        w = training_weights(counts, weights)
        folds = training_folds(counts, w, self.n_folds, self.seed)
        F = int(folds.max()) + 1
        use_b = counts.vocab is not None if self.intercept == "auto" else bool(self.intercept)
        self.vocab_ = counts.vocab
        I = counts.N.shape[1]
        x = stacking_features(counts, use_b)
        in_fold = folds[None, :] == np.arange(F)[:, None]                  # [F, T]
        w_fit = np.concatenate([np.where(in_fold, 0.0, w), w[None]]).astype(np.float32)
        w_val = np.where(in_fold, w, 0.0).astype(np.float32)
        lr = None if self.learning_rate is None else float(self.learning_rate)
        is_tally = jnp.arange(x.shape[-1]) < 2 * I         # traced: councils of one shape share
        coef, score = _stack_grid(x, jnp.asarray(counts.gold), jnp.asarray(counts.mask),
                                  is_tally, jnp.asarray(w_fit), jnp.asarray(w_val),
                                  jnp.asarray(grid, jnp.float32),
                                  steps=int(self.steps), optimizer=self.optimizer,
                                  learning_rate=lr)
        self.cv_brier_ = np.asarray(score)
        best = int(np.argmin(self.cv_brier_))
        self.l2_ = float(grid[best])
        theta = np.asarray(coef[best, F])
        if not np.isfinite(theta).all():
            raise DataError(f"logistic stacking did not converge to finite weights at l2 = "
                            f"{self.l2_}; try a larger l2_grid or more steps", field="l2_grid")
        self.theta_ = theta
        self.coef_ = theta[:2 * I].reshape(2, I).T.copy()
        self.intercept_ = theta[2 * I:].copy() if use_b else None
        return self

    def _log_proba(self, counts):
        _check_fitted(self, "coef_")
        _check_seats(self, counts, self.coef_.shape[0])
        use_b = self.intercept_ is not None
        if use_b:
            if counts.e.shape[2] != self.intercept_.shape[0]:
                raise DataError(f"fitted with an intercept on K = {self.intercept_.shape[0]} "
                                f"slots, got {counts.e.shape[2]}", field="K")
            if counts.vocab is not None and self.vocab_ is not None and \
                    tuple(counts.vocab) != tuple(self.vocab_):
                raise DataError(f"vocab {counts.vocab} differs from the fit's {self.vocab_}",
                                field="vocab")
        x = stacking_features(counts, use_b)
        return _stack_log_proba(x, jnp.asarray(counts.mask), jnp.asarray(self.theta_))


# ----------------------------------------------------------------------------- gated vote

@jax.jit
def _gated_log_proba(e0, mask, gate):
    e0 = e0.astype(jnp.float32)
    gated = jnp.einsum("tik,i->tk", e0, gate.astype(jnp.float32))
    everyone = e0.sum(1)
    votes = jnp.where(jnp.sum(gated * mask, -1, keepdims=True) > 0, gated, everyone)
    return _masked_log(vote_shares(votes, mask), mask)


class GatedVote(Aggregator):
    """Plurality of round-0 endorsements among the seats whose calibration round-0 accuracy
    clears chance ([BDA] Appendix B.1 "Gated vote").

    Gate: seat i passes iff its round-0 accuracy on the training tasks (:func:`round0_accuracy`)
    is strictly above its chance level, 1/K_t averaged over the same tasks. A seat with no
    answered training task does not pass. If no seat passes, every seat does (``fallback_``).
    Decision: the most-endorsed candidate (round-0 endorsements ``e0`` of the gated seats,
    seeded random ties); confidence: vote shares among the gated seats. A task where no gated
    seat endorsed anything falls back to all seats' round-0 votes, and to uniform without any.

    Fitted: ``gate_`` [I] bool, ``seat_accuracy_`` [I], ``chance_`` [I], ``fallback_``,
    ``agents_``.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, data, weights=None) -> "GatedVote":
        counts = self._counts(data)
        self.agents_ = counts.agents
        acc = round0_accuracy(counts, training_weights(counts, weights))
        self.seat_accuracy_ = np.asarray(acc.accuracy)
        self.chance_ = np.asarray(acc.chance)
        gate = np.isfinite(self.seat_accuracy_) & (self.seat_accuracy_ > self.chance_)
        self.fallback_ = not gate.any()
        self.gate_ = np.ones_like(gate) if self.fallback_ else gate
        return self

    def _log_proba(self, counts):
        _check_fitted(self, "gate_")
        _check_seats(self, counts, self.gate_.shape[0])
        return _gated_log_proba(jnp.asarray(counts.e0), jnp.asarray(counts.mask),
                                jnp.asarray(self.gate_))


# ----------------------------------------------------------------------------- best member

@jax.jit
def _member_log_proba(e0, mask, K, accuracy):
    s = vote_shares(e0.astype(jnp.float32), mask)                  # uniform if the seat is silent
    answered = jnp.sum(e0 * mask, -1, keepdims=True) > 0
    Km1 = (K - 1).astype(jnp.float32)[:, None]
    rest = jnp.where(Km1 > 0, (1.0 - s) / jnp.where(Km1 > 0, Km1, 1.0), 0.0)
    p = accuracy * s + (1.0 - accuracy) * rest
    p = jnp.where(answered, jnp.where(Km1 > 0, p, 1.0), s) * mask
    return _masked_log(p, mask)


class BestMember(Aggregator):
    """The single most reliable seat, selected leak-free ([BDA] Appendix E.3).

    Fit: the seat with the highest round-0 accuracy on the training tasks
    (:func:`round0_accuracy`; seats with no answered training task are not eligible; exact ties
    broken at random from ``seed``). Predict: that seat's round-0 answer with confidence ``a`` =
    its training accuracy, the rest ``1 - a`` spread uniformly over the task's other candidates.
    Precisely, with s(g) the seat's round-0 endorsement shares on the task (one-hot for a single
    proposal), p(g) = a s(g) + (1 - a)(1 - s(g)) / (K_t - 1); a task with one candidate gets 1;
    a task where the seat endorsed nothing in round 0 gets the uniform distribution. ``a`` is
    not smoothed: a seat perfect on its training tasks predicts with probability 1.

    Fitted: ``member_`` (seat index), ``seat_accuracy_`` [I], ``agents_``.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, data, weights=None) -> "BestMember":
        counts = self._counts(data)
        self.agents_ = counts.agents
        acc = np.asarray(round0_accuracy(counts, training_weights(counts, weights)).accuracy)
        if not np.isfinite(acc).any():
            raise DataError("no seat endorsed anything in round 0 on a training task",
                            field="e0")
        best = np.nanmax(acc)
        tied = np.flatnonzero(np.isfinite(acc) & (acc == best))
        self.member_ = int(tied[np.random.default_rng(self.seed).integers(tied.size)])
        self.seat_accuracy_ = acc
        return self

    def _log_proba(self, counts):
        _check_fitted(self, "member_")
        _check_seats(self, counts, self.seat_accuracy_.shape[0])
        m = self.member_
        return _member_log_proba(jnp.asarray(counts.e0)[:, m, :], jnp.asarray(counts.mask),
                                 jnp.asarray(counts.K),
                                 jnp.float32(self.seat_accuracy_[m]))


# ----------------------------------------------------------------------------- verbalized vote

@partial(jax.jit, static_argnames=("mode",))
def _verbalized(key, e0, conf0, mask, missing, *, mode):
    """Winner [T] and probabilities [T, K] of the confidence-weighted round-0 vote."""
    endorses = (e0 > 0) & mask[:, None, :]
    stated = jnp.isfinite(conf0)
    value = jnp.where(stated, conf0, missing)              # missing: NaN -> the seat is skipped
    counted = endorses & jnp.isfinite(value)
    score = jnp.sum(jnp.where(counted, value, 0.0), 1)                    # [T, K]
    n = jnp.sum(counted, 1).astype(jnp.float32)
    any_vote = jnp.sum(n * mask, -1, keepdims=True) > 0
    uniform = mask / mask.sum(-1, keepdims=True)
    winner = argmax_random_ties(key, jnp.where(any_vote, score, 0.0), mask)
    if mode == "share":
        p = vote_shares(score, mask)
        p = jnp.where(any_vote & (jnp.sum(score * mask, -1, keepdims=True) > 0), p, uniform)
        return winner, p
    top = jax.nn.one_hot(winner, mask.shape[-1], dtype=bool)
    mean_conf = jnp.sum(jnp.where(top, score, 0.0), -1) / jnp.maximum(
        jnp.sum(jnp.where(top, n, 0.0), -1), 1.0)                          # [T]
    others = mask & ~top
    rest_votes = jnp.where(others, score, 0.0)
    rest_total = rest_votes.sum(-1, keepdims=True)
    n_others = others.sum(-1, keepdims=True)
    rest = jnp.where(rest_total > 0, rest_votes / jnp.where(rest_total > 0, rest_total, 1.0),
                     others / jnp.maximum(n_others, 1))
    single = n_others[:, 0] == 0                                  # one candidate: probability 1
    c = jnp.where(single, 1.0, mean_conf)[:, None]
    p = jnp.where(top, c, (1.0 - c) * rest)
    return winner, jnp.where(any_vote, p, uniform)


class VerbalizedVote(Aggregator):
    """The council's own stated confidence ([BDA] Appendix B.1 "soundness baselines", E.3).

    Evidence: round-0 positive endorsements ``e0`` and their stated confidences ``conf0``. Each
    seat that endorsed candidate g in round 0 contributes its stated confidence v_i(g) (a seat
    endorsing several candidates contributes to each); score(g) = sum_i v_i(g).
    Decision: argmax score (seeded random ties). Probabilities (``confidence``):

    * ``"mean"`` (default; the paper's "confidence-weighted vote, reporting the winner's mean
      stated confidence", Table 6): p(winner) = the mean stated confidence of the seats that
      endorsed the winner; the remaining 1 - p(winner) goes to the other candidates in
      proportion to their scores (uniformly if none has one). ``predict`` returns the winner,
      which is also the argmax of ``predict_proba`` whenever that mean is >= 1/2.
    * ``"share"``: p(g) = score(g) / sum_h score(h) (confidence-weighted vote shares).

    Missing confidence: ``missing=None`` (default) skips a seat that stated none (it neither
    votes nor enters the mean); a float imputes that value instead. A task with no counted vote
    gets the uniform distribution. Unsupervised: ``fit`` only records ``agents_`` (labels and
    weights are ignored). BDA never reads ``conf0`` (Property 3).
    """

    def __init__(self, seed: int = 0, confidence: str = "mean", missing: float | None = None):
        self.seed, self.confidence, self.missing = seed, confidence, missing
        self._check_params()

    def _check_params(self) -> None:
        if self.confidence not in ("mean", "share"):
            raise DataError(f"confidence must be 'mean' or 'share', got {self.confidence!r}",
                            field="confidence")
        missing = self.missing
        if missing is not None and (
                isinstance(missing, (bool, np.bool_))
                or not isinstance(missing, (int, float, np.integer, np.floating))
                or not 0.0 <= float(missing) <= 1.0):
            raise DataError(f"missing must be None or in [0, 1], got {missing!r}",
                            field="missing")

    def fit(self, data=None, weights=None) -> "VerbalizedVote":
        if data is not None:
            self.agents_ = self._counts(data).agents
        return self

    def _run(self, counts, key):
        missing = jnp.float32(np.nan if self.missing is None else self.missing)
        return _verbalized(key, jnp.asarray(counts.e0), jnp.asarray(counts.conf0),
                           jnp.asarray(counts.mask), missing, mode=self.confidence)

    def _log_proba(self, counts):
        _, p = self._run(counts, jax.random.key(self.seed))
        return _masked_log(p, jnp.asarray(counts.mask))

    def predict(self, data, key=None) -> np.ndarray:
        counts = self._counts(data)
        key = jax.random.key(self.seed) if key is None else key
        return np.asarray(self._run(counts, key)[0])


# ----------------------------------------------------------------------------- recalibration

def pav(y, w=None) -> np.ndarray:
    """Pool-adjacent-violators: the non-decreasing f minimizing sum_j w_j (y_j - f_j)^2, for
    ``y`` already in the order of its abscissa. ``w`` > 0 (default ones). O(n), numpy.

    >>> pav([1.0, 0.0, 1.0, 0.5]).tolist()
    [0.5, 0.5, 0.75, 0.75]
    """
    y = np.asarray(y, np.float64).ravel()
    w = np.ones_like(y) if w is None else np.asarray(w, np.float64).ravel()
    if w.shape != y.shape or (w <= 0).any():
        raise DataError("pav needs weights > 0, one per value", field="weights")
    means, weights, sizes = [], [], []
    for yj, wj in zip(y, w):
        m, ww, s = yj, wj, 1
        while means and means[-1] > m:           # merge with the previous block while violated
            pm, pw, ps = means.pop(), weights.pop(), sizes.pop()
            m = (pm * pw + m * ww) / (pw + ww)
            ww, s = pw + ww, ps + s
        means.append(m)
        weights.append(ww)
        sizes.append(s)
    return np.repeat(np.asarray(means), np.asarray(sizes, int))


def isotonic_regression(x, y, w=None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted isotonic (non-decreasing) regression of ``y`` on ``x``.

    Equal abscissae are pooled first (their weighted mean), then :func:`pav`. Returns the sorted
    unique abscissae and the fitted values there; evaluate elsewhere with
    ``np.interp(x_new, xs, fs)`` (linear between knots, constant beyond the ends).
    """
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    w = np.ones_like(y) if w is None else np.asarray(w, np.float64).ravel()
    keep = w > 0
    x, y, w = x[keep], y[keep], w[keep]
    if x.size == 0:
        raise DataError("isotonic regression needs at least one point of positive weight",
                        field="weights")
    xs, inv = np.unique(x, return_inverse=True)
    ws = np.bincount(inv, w)
    ys = np.bincount(inv, w * y) / ws
    return xs, pav(ys, ws)


def fit_posterior_temperature(log_proba, gold, mask, weights=None, *, bounds=(0.01, 100.0),
                    floor: float = 1e-6, iters: int = 100) -> float:
    """The temperature T minimizing the weighted NLL of softmax(log_proba / T) (Guo et al.).

    ``log_proba`` [T, K] (padding -inf), ``gold`` [T] (tasks with gold < 0 or weight 0 are left
    out), ``mask`` [T, K]. Valid log-probabilities are floored at log(``floor``) so a zero
    probability on the gold cannot make every T infinitely bad. The NLL is convex in 1/T, so a
    golden-section search on log T within ``bounds`` finds the minimum (float64, numpy).
    """
    lp = np.asarray(log_proba, np.float64)
    mask = np.asarray(mask, bool)
    gold = np.asarray(gold)
    w = np.ones(gold.shape, np.float64) if weights is None else np.asarray(weights, np.float64)
    use = (w > 0) & (gold >= 0)
    if not use.any():
        raise DataError("temperature scaling needs a task with a gold candidate", field="gold")
    lp, mask, gold, w = lp[use], mask[use], gold[use], w[use]
    lp = np.where(mask, np.maximum(lp, np.log(floor)), -np.inf)
    at_gold = lp[np.arange(gold.size), gold]

    def nll(log_t):
        z = lp / np.exp(log_t)
        m = z.max(-1)
        lse = m + np.log(np.sum(np.exp(z - m[:, None]), -1))
        return np.sum(w * (lse - at_gold / np.exp(log_t))) / w.sum()

    a, b = np.log(bounds[0]), np.log(bounds[1])
    r = (np.sqrt(5.0) - 1.0) / 2.0
    c, d = b - r * (b - a), a + r * (b - a)
    fc, fd = nll(c), nll(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - r * (b - a)
            fc = nll(c)
        else:
            a, c, fc = c, d, fd
            d = a + r * (b - a)
            fd = nll(d)
    return float(np.exp((a + b) / 2.0))


def _proba_with_confidence(weights, decision, confidence, mask, margin: float) -> np.ndarray:
    """The probability vector [T, K] of a decision with a given top-label confidence.

    ``weights`` [T, K] >= 0 (how the rest is shared), ``decision`` [T] (a slot of each task),
    ``confidence`` [T], ``mask`` [T, K], ``margin`` in (0, 1). The decided slot gets
    v = clip(confidence, 1/K_t + margin (K_t - 1)/K_t, 1); the other candidates share 1 - v in
    proportion to ``weights`` (uniformly where those are all 0), flattened toward uniform just
    enough that none exceeds v - margin. So the decided slot is the strict argmax, the vector is
    the proportional spread whenever that already leaves the margin, and a one-candidate task
    gets 1. float64, numpy; 0 on padding.
    """
    mask = np.asarray(mask, bool)
    w = np.where(mask, np.asarray(weights, np.float64), 0.0)
    decision = np.asarray(decision)
    n = mask.sum(-1)
    is_d = np.arange(mask.shape[1])[None, :] == decision[:, None]
    others = mask & ~is_d
    n_o = np.maximum(others.sum(-1), 1)
    u = others / n_o[:, None]                                   # uniform over the others
    wo = np.where(others, w, 0.0)
    total = wo.sum(-1)
    r = np.where((total > 0)[:, None], wo / np.where(total > 0, total, 1.0)[:, None], u)
    floor = (1.0 + margin * (n - 1)) / np.maximum(n, 1)          # 1 for a single candidate
    v = np.clip(np.asarray(confidence, np.float64), floor, 1.0)
    rest = 1.0 - v
    # the largest mu in [0, 1] with rest * (mu max(r) + (1 - mu) / n_o) <= v - margin
    excess = rest * r.max(-1) - (v - margin)
    spread = rest * (r.max(-1) - 1.0 / n_o)
    mu = np.clip(np.where(excess > 0, 1.0 - excess / np.where(spread > 0, spread, 1.0), 1.0),
                 0.0, 1.0)
    share = mu[:, None] * r + (1.0 - mu[:, None]) * u
    return np.where(is_d & mask, v[:, None], np.where(others, rest[:, None] * share, 0.0))


class _Recalibrated(Aggregator, ABC):
    """Recalibrate the confidence of ``base``'s decision, never the decision ([BDA] Appendix
    E.1, F.9: recalibration "cannot recalibrate accuracy").

    Fit: ``base`` on the training tasks, and a recalibration map on its cross-fitted
    (out-of-fold) predictions: for each of ``n_folds`` folds of the training tasks (grouped by
    cluster, :func:`make_folds` on the training tasks alone), a copy of the unfitted base is fit
    with weights zeroed on that fold and predicts it (its decision, ``predict``, and its
    log-probabilities). No training task is scored by a base that saw its label, and no other
    task's label is read (docs/evaluation.md).

    Predict: the decision is the base's own (``base_.predict``: its argmax with its seeded
    random tie-break, [BDA] Appendix D.6; ``key`` overrides the base's seed as for any
    aggregator). The confidence of that decision is recalibrated (:meth:`decide`,
    :meth:`predict_confidence`). A calibrated top-label confidence can fall below 1/K_t (a
    confident vote that is usually wrong, e.g. a coalition majority), which no probability
    vector with the same argmax holds: :meth:`predict_proba` therefore puts the calibrated
    confidence on the decided candidate clipped to [1/K_t + m (K_t - 1)/K_t, 1] and shares the
    rest over the other candidates (in proportion to the recalibrated base, flattened toward
    uniform where needed) so that each stays at least m = ``decision_margin`` below it. Its
    argmax is then the decision with no tie to break, so any scorer that takes the argmax of
    ``predict_proba`` scores the base's decisions; the unclipped confidence is
    :meth:`predict_confidence`, the one the paper's ECE and top-label Brier read.

    ``base`` is a constructor parameter like any other: ``get_params()`` lists its settings as
    ``base__<name>`` and ``set_params(base__seed=1)`` sets them (scikit-learn's nested
    parameters). ``fit`` fits copies of it; ``base`` itself is never fitted.
    """

    #: the least lead of the decided candidate over every other in :meth:`predict_proba`
    decision_margin = 1e-3

    def __init__(self, base, n_folds: int = 5, seed: int = 0):
        self.base, self.n_folds, self.seed = base, n_folds, seed
        self._check_params()

    def _check_params(self) -> None:
        if not isinstance(self.base, Aggregator):
            raise DataError(f"base must be an aggregator, got {type(self.base).__name__}",
                            field="base")

    def fit(self, data, weights=None):
        counts = self._counts(data)
        w = training_weights(counts, weights)
        folds = training_folds(counts, w, self.n_folds, self.seed)
        T, _, K = counts.e.shape
        oof = np.full((T, K), -np.inf, np.float32)
        oof_decision = np.full(T, -1, np.int32)
        for f in range(int(folds.max()) + 1):
            model = _fit_with_weights(copy.deepcopy(self.base), data,
                                      np.where(folds == f, 0.0, w).astype(np.float32))
            held = folds == f
            oof[held] = np.asarray(model._log_proba(counts))[held]
            oof_decision[held] = np.asarray(model.predict(counts))[held]
        self.base_ = _fit_with_weights(copy.deepcopy(self.base), data, w)
        self.agents_ = getattr(self.base_, "agents_", counts.agents)
        self.oof_log_proba_ = oof
        self._fit_map(oof, oof_decision, counts, np.where(folds >= 0, w, 0.0))
        return self

    @abstractmethod
    def _fit_map(self, oof, oof_decision, counts, w):
        """Fit the map on out-of-fold log-probabilities ``oof`` [T, K] and decisions [T]."""

    @abstractmethod
    def _calibrate(self, log_proba, decision, mask):
        """(calibrated confidence [T] of ``decision``, weights [T, K] for the other
        candidates) from the base's log-probabilities [T, K] (float64)."""

    def decide(self, data, key=None) -> Decision:
        """The base's decision and its recalibrated confidence, as a
        :class:`~bda_jax.Decision` of numpy arrays: ``index`` [T] int32 (= ``predict``),
        ``confidence`` [T] the calibrated top-label confidence (unclipped: it may be below
        1/K_t), ``proba`` [T, K] (= ``predict_proba``: the clipped vector whose strict argmax is
        ``index``)."""
        counts = self._counts(data)
        _check_fitted(self, "base_")
        mask = np.asarray(counts.mask, bool)
        index = np.asarray(self.base_.predict(counts, key)).astype(np.int32)
        log_proba = np.asarray(self.base_._log_proba(counts), np.float64)
        confidence, weights = self._calibrate(log_proba, index, mask)
        proba = _proba_with_confidence(weights, index, confidence, mask, self.decision_margin)
        return Decision(index, np.asarray(confidence, np.float64), proba)

    def predict(self, data, key=None) -> np.ndarray:
        """The base's decision [T] (``base_.predict(data, key)``): recalibration never changes
        it."""
        _check_fitted(self, "base_")
        return np.asarray(self.base_.predict(self._counts(data), key)).astype(np.int32)

    def predict_confidence(self, data) -> np.ndarray:
        """Calibrated top-label confidence [T] of :meth:`predict`'s decision (unclipped)."""
        return self.decide(data).confidence

    def predict_proba(self, data) -> np.ndarray:
        """[T, K] float64: the calibrated confidence on the decided candidate, clipped so that
        it stays the strict argmax (see the class docstring); 0 on padding."""
        return self.decide(data).proba

    def _log_proba(self, counts):
        proba = self.predict_proba(counts)
        with np.errstate(divide="ignore"):
            return jnp.asarray(np.where(counts.mask, np.log(proba), -np.inf), jnp.float32)


class IsotonicRecalibrated(_Recalibrated):
    """Leak-free isotonic recalibration of any aggregator's top-label confidence ([BDA]
    Appendix E.1 / F.9, Zadrozny and Elkan 2002; docs/evaluation.md).

    Map: pool-adjacent-violators (:func:`isotonic_regression`) of correctness (the fold model's
    decision == gold; a gold that is not a candidate is incorrect) on that decision's
    probability, over the base's out-of-fold predictions of the training tasks, weighted by
    ``weights``; linear between knots, constant beyond them. Applied to the probability c of the
    base's decision: confidence c' = map(c) (``predict_confidence``, ``decide``), every task
    included (a one-candidate task's ``predict_proba`` is still 1). The decision is the base's
    (``predict`` = ``base_.predict``); ``predict_proba`` puts c' on it, clipped to
    [1/K_t + m (K_t - 1)/K_t, 1] with m = ``decision_margin`` so that it stays the strict argmax
    even where c' < 1/K_t, and shares the rest in proportion to the base's probabilities of the
    other candidates, flattened toward uniform where one would come within m of the decision
    (docs/evaluation.md, "Recalibration keeps the decision").

    Fitted: ``base_`` (the base refit on all training tasks), ``iso_x_``/``iso_y_`` (knots),
    ``oof_log_proba_`` [T, K], ``agents_``.
    """

    def _fit_map(self, oof, oof_decision, counts, w):
        gold = np.asarray(counts.gold)
        p = np.where(np.asarray(counts.mask), np.exp(oof.astype(np.float64)), 0.0)
        conf = p[np.arange(gold.size), np.maximum(oof_decision, 0)]
        correct = ((oof_decision == gold) & (gold >= 0)).astype(np.float64)
        use = (w > 0) & (oof_decision >= 0)
        self.iso_x_, self.iso_y_ = isotonic_regression(conf[use], correct[use], w[use])

    def _calibrate(self, log_proba, decision, mask):
        _check_fitted(self, "iso_x_")
        p = np.where(mask, np.exp(log_proba), 0.0)
        c = p[np.arange(decision.size), decision]
        return np.interp(c, self.iso_x_, self.iso_y_), p


class TemperatureScaled(_Recalibrated):
    """Leak-free temperature scaling of any aggregator ([BDA] Appendix E.1; Guo et al.
    2017): q(g) = softmax_g(log p_base(g) / T) over the task's candidates, with the one scalar T
    of :func:`fit_posterior_temperature` on the base's out-of-fold log-probabilities of the
    training tasks (valid log-probabilities floored at log 1e-6 both when fitting and when
    applying; tasks whose gold is not a candidate have no NLL term and are left out).

    The decision is the base's; its confidence is q(decision). ``predict_proba`` is q itself
    whenever the decision leads q by ``decision_margin`` (for a base that decides by its argmax:
    everywhere but within the margin of a tie); otherwise the decision keeps q(decision), clipped
    as for :class:`IsotonicRecalibrated`, and the rest is shared in proportion to q.

    Fitted: ``base_``, ``temperature_``, ``oof_log_proba_`` [T, K], ``agents_``.
    """

    floor = 1e-6

    def _fit_map(self, oof, oof_decision, counts, w):
        self.temperature_ = fit_posterior_temperature(oof, np.asarray(counts.gold),
                                                      np.asarray(counts.mask), w,
                                                      floor=self.floor)

    def _calibrate(self, log_proba, decision, mask):
        _check_fitted(self, "temperature_")
        z = np.where(mask, np.maximum(log_proba, np.log(self.floor)) / self.temperature_,
                     -np.inf)
        z = z - z.max(-1, keepdims=True)
        q = np.where(mask, np.exp(z), 0.0)
        q = q / q.sum(-1, keepdims=True)
        return q[np.arange(decision.size), decision], q
