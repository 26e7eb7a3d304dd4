"""Calibration and accuracy metrics ([BDA] Appendix B Eq. 5, D.1): accuracy, ECE, Brier, NLL,
AUROC, reliability bins and the summary row. Their bootstrap (``paired_bootstrap``, [BDA]
Appendix D.2) is in :mod:`bda_jax.metrics` too; it resamples through the ``weights`` below.

Two levels of input:

* **score level** ``(confidence, correct, weights)``, each [T]: the top-label confidence of a
  prediction and whether it was right (0/1). :func:`accuracy`, :func:`ece`, :func:`brier_top`,
  :func:`auroc` and :func:`reliability_bins` read these. ``weights`` [T] (default all ones) are
  non-negative multiplicities; weight 0 removes a task (its values are never read, NaN allowed);
  integer weights act exactly like repeating rows (the bootstrap relies on it).
* **probability level** ``(proba, gold, gold_missing, mask)``: ``proba`` [T, K] rows over each
  task's candidate slots (taken as given, not renormalized), ``gold`` [T] int (-1: none),
  ``gold_missing`` [T] bool (gold given but not a candidate: scored wrong), ``mask`` [T, K] valid
  slots (default all), as held by :class:`bda_jax.Counts`. :func:`correctness` turns them into the
  score level; :func:`brier_mc` and :func:`nll` read them directly.

A task is *labeled* when ``gold >= 0`` or ``gold_missing``; unlabeled tasks get weight 0 in every
metric (shapes stay static under ``jit``). Every metric of an empty (all-zero-weight) input is NaN.
The conventions (bins, ties, edge values) are spelled out in ``docs/metrics.md``.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.decisions import argmax_random_ties
from .._core.errors import DataError
from .._core.exported import persistent_jit
from .._core.scoring import brier_mc_per_task

__all__ = [
    "NLL_EPS", "ReliabilityBins", "Scored", "accuracy", "as_float", "auroc", "bin_index",
    "bin_sums", "brier_mc", "brier_top", "correctness", "default_float", "ece", "nll",
    "reliability_bins", "resolve_bins", "score_inputs", "summary",
]

NLL_EPS = 1e-12
"""Lower clip of p(gold) in :func:`nll`: a task scores at most -log(1e-12) ~ 27.63 nats."""

_DEFAULT_BINS = {"width": 10, "mass": 15}          # the paper's ECE_ew and ECE_em (Appendix B)


# --------------------------------------------------------------------------- helpers
# ``default_float``, ``as_float``, ``score_inputs``, ``resolve_bins``, ``bin_index`` and
# ``bin_sums`` are public module helpers (not re-exported by ``bda_jax.metrics``): the bootstrap
# and the calibration toolkit (``_calibration``) bin and weight exactly as the metrics here do.

def default_float():
    """JAX's default float dtype, the dtype every metric and bootstrap computes in: float64 in
    x64 mode, else float32."""
    return jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32


def as_float(x):
    """``x`` as a JAX array; a non-float array is cast to :func:`default_float`."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(default_float())


def _weights(x, weights):
    """Weights as floats of x's dtype, negative/NaN treated as 0."""
    if weights is None:
        return jnp.ones(x.shape, x.dtype)
    w = jnp.asarray(weights, x.dtype)
    return jnp.where(w > 0, w, 0.0)


def score_inputs(confidence, correct, weights):
    """Float confidence, correctness and weights, each [T] (weights: ones when None, negative or
    NaN weights -> 0; correctness 0 where the weight is 0). ``conf`` is left as given (it may be
    NaN where the weight is 0: every product with it is guarded), so that sorting it does not
    depend on the weights: under the bootstrap's vmap over weights the sort then runs once, not
    per resample."""
    conf = as_float(confidence)
    w = _weights(conf, weights)
    corr = jnp.where(w > 0, jnp.asarray(correct).astype(conf.dtype), 0.0)
    return conf, corr, w


def _wmean(x, w):
    return jnp.sum(w * x) / jnp.sum(w)                  # 0/0 = NaN for an empty input


def resolve_bins(n_bins, binning):
    """The number of bins: ``n_bins``, or the paper's default for ``binning`` (10 equal-width, 15
    equal-mass). A bad ``binning`` or a non-positive / non-integer ``n_bins`` is a ``DataError``."""
    if binning not in _DEFAULT_BINS:
        raise DataError(f"binning must be 'width' or 'mass', got {binning!r}", field="binning")
    n_bins = _DEFAULT_BINS[binning] if n_bins is None else n_bins
    if not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise DataError(f"n_bins must be a positive integer, got {n_bins!r}", field="n_bins")
    return int(n_bins)


def bin_index(conf, w, n_bins, binning):
    """[T] int32 bin of each confidence ``conf`` [T] under weights ``w`` [T] (as from
    :func:`score_inputs`), ``n_bins`` and ``binning`` static: the bins of :func:`ece` (see
    ``docs/metrics.md``)."""
    if binning == "width":
        # bin m = [m/M, (m+1)/M) with the edges m/M rounded to conf's dtype; 1.0 -> last bin;
        # values outside [0, 1] clip into the first / last bin
        inner = jnp.asarray(np.arange(1, n_bins) / n_bins, conf.dtype)
        return jnp.searchsorted(inner, conf, side="right").astype(jnp.int32)
    # equal mass: bin = floor(M * W(conf' < conf) / W): ties share a bin, order never matters
    order = jnp.argsort(conf)
    sc, sw = conf[order], w[order]
    before = jnp.concatenate([jnp.zeros(1, w.dtype), jnp.cumsum(sw)[:-1]])
    wless = before[jnp.searchsorted(sc, conf, side="left")]
    total = jnp.sum(w)
    m = jnp.arange(1, n_bins, dtype=w.dtype)
    return jnp.sum(n_bins * wless[:, None] >= m * total, axis=1).astype(jnp.int32)


def bin_sums(conf, corr, w, n_bins, binning):
    """(bin [T], weight [M], weighted confidence sum [M], weighted correctness sum [M]) of the
    bins of :func:`bin_index`; inputs as from :func:`score_inputs`."""
    b = bin_index(conf, w, n_bins, binning)
    seg = partial(jax.ops.segment_sum, segment_ids=b, num_segments=n_bins)
    return b, seg(w), seg(jnp.where(w > 0, w * conf, 0.0)), seg(w * corr)


# --------------------------------------------------------------------------- correctness

class Scored(NamedTuple):
    """Top-label view of a probability table. All [T].

    ``pred`` int32 predicted slot; ``confidence`` its probability (or the ``confidence`` given to
    :func:`correctness`); ``correct`` 1.0 / 0.0 (0 for gold_missing and unlabeled tasks);
    ``labeled`` bool (gold given, as a candidate or not).
    """

    pred: jax.Array
    confidence: jax.Array
    correct: jax.Array
    labeled: jax.Array


@jax.jit
def _correctness(proba, gold, gold_missing, mask, key, pred, confidence=None):
    proba = as_float(proba)
    gold = jnp.asarray(gold, jnp.int32)
    mask = jnp.ones(proba.shape, bool) if mask is None else jnp.asarray(mask, bool)
    gm = jnp.zeros(gold.shape, bool) if gold_missing is None else jnp.asarray(gold_missing, bool)
    if pred is None:
        if key is None:
            pred = jnp.argmax(jnp.where(mask, proba, -jnp.inf), axis=-1).astype(jnp.int32)
        else:
            pred = argmax_random_ties(key, proba, mask)
    pred = jnp.asarray(pred, jnp.int32)
    conf = jnp.where(pred >= 0,
                     jnp.take_along_axis(proba, jnp.maximum(pred, 0)[:, None], axis=-1)[:, 0],
                     jnp.max(jnp.where(mask, proba, 0.0), axis=-1))
    if confidence is not None:
        conf = jnp.asarray(confidence).astype(proba.dtype)
    correct = ((pred == gold) & (gold >= 0) & ~gm).astype(proba.dtype)
    return Scored(pred, conf, correct, (gold >= 0) | gm)


def correctness(proba, gold, gold_missing=None, mask=None, *, key=None, pred=None,
                confidence=None) -> Scored:
    """Top-label prediction, confidence and correctness ([BDA] Appendix B, 'Calibration').

    ``proba`` [T, K], ``gold`` [T] int (-1: none), ``gold_missing`` [T] bool, ``mask`` [T, K].
    The prediction is the argmax over the task's valid slots: the first maximal slot, or, with a
    ``key``, uniformly at random among exactly tied slots (Appendix D.6; the draw of
    :func:`bda_jax.decide`). ``pred`` [T] overrides it (e.g. an aggregator's own decision);
    ``pred = -1`` is no decision (an LLM method that committed to no candidate, [BDA] Appendix
    D.3): scored wrong, with the task's largest probability as its confidence.
    ``confidence`` [T] overrides the top-label confidence (default: ``proba`` at the prediction),
    e.g. a recalibrated confidence that no probability vector with the same argmax can hold
    (below 1/K_t; :meth:`bda_jax.aggregators.IsotonicRecalibrated.decide`).
    A gold_missing task is labeled and wrong, whatever the prediction; an unlabeled task
    (gold -1, not gold_missing) has ``labeled`` False and ``correct`` 0.

    >>> s = correctness([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]], gold=[1, 1, -1])
    >>> s.pred.tolist(), s.correct.tolist(), s.labeled.tolist()
    ([1, 0, 0], [1.0, 0.0, 0.0], [True, True, False])
    """
    return _correctness(proba, gold, gold_missing, mask, key, pred,
                        _check_confidence(confidence, proba))


def _check_confidence(confidence, proba):
    """``confidence`` (None, or [T] matching ``proba`` [T, K]), else :class:`DataError`."""
    if confidence is None:
        return None
    c, T = np.shape(confidence), np.shape(proba)[0]
    if c != (T,):
        raise DataError(f"confidence must be [T] = [{T}], got shape {list(c)}",
                        field="confidence")
    return confidence


# --------------------------------------------------------------------------- score-level metrics

@jax.jit
def accuracy(correct, weights=None) -> jax.Array:
    """Weighted mean of ``correct`` [T] (0/1). Scalar; NaN when every weight is 0.

    >>> float(accuracy([1, 0, 1, 1]))
    0.75
    """
    corr = as_float(correct)
    w = _weights(corr, weights)
    return _wmean(jnp.where(w > 0, corr, 0.0), w)


@jax.jit
def brier_top(confidence, correct, weights=None) -> jax.Array:
    """Top-label Brier score (Brier 1950; [BDA] Appendix B): mean of (confidence - correct)^2.

    ``confidence``, ``correct``, ``weights`` [T] -> scalar. This is the ``brier`` of the paper's
    tables and of :func:`summary`; the proper multiclass score is :func:`brier_mc`.

    >>> float(brier_top([0.5, 0.5], [1, 0]))
    0.25
    """
    conf, corr, w = score_inputs(confidence, correct, weights)
    return _wmean(jnp.where(w > 0, (conf - corr) ** 2, 0.0), w)


def ece(confidence, correct, n_bins=None, binning="width", weights=None) -> jax.Array:
    """Expected calibration error, [BDA] Appendix B Eq. (5) (Guo et al. 2017).

    ECE = sum_m |B_m|/n |acc(B_m) - conf(B_m)|, computed as sum_m |sum_{B_m} (correct - conf)| / n
    (empty bins add 0). ``confidence``, ``correct``, ``weights`` [T] -> scalar.

    ``binning="width"`` (ECE_ew; default ``n_bins`` 10): bin m = [m/M, (m+1)/M), 1.0 in the last
    bin. ``binning="mass"`` (ECE_em; default ``n_bins`` 15): a task with confidence c goes to bin
    floor(M * W(c' < c) / W), W the total weight and W(c' < c) the weight of strictly smaller
    confidences: consecutive runs of the sorted confidences of (as near as possible) equal mass,
    exact ties never split, so the value does not depend on task order.

    >>> round(float(ece([0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1])), 6)
    0.2
    """
    return _ece(confidence, correct, weights, resolve_bins(n_bins, binning), binning)


@partial(jax.jit, static_argnums=(3, 4))
def _ece(confidence, correct, weights, n_bins, binning):
    conf, corr, w = score_inputs(confidence, correct, weights)
    _, _, s_conf, s_corr = bin_sums(conf, corr, w, n_bins, binning)
    return jnp.sum(jnp.abs(s_corr - s_conf)) / jnp.sum(w)


class ReliabilityBins(NamedTuple):
    """Per-bin reliability-diagram data, each [M]; empty bins hold NaN (count 0).

    ``count`` total weight; ``confidence`` mean confidence; ``accuracy`` mean correctness;
    ``lower`` / ``upper``: the bin's nominal edges (equal width) or its smallest / largest member
    confidence (equal mass).
    """

    count: jax.Array
    confidence: jax.Array
    accuracy: jax.Array
    lower: jax.Array
    upper: jax.Array


def reliability_bins(confidence, correct, n_bins=None, binning="width",
                     weights=None) -> ReliabilityBins:
    """Reliability-diagram bins with the binning of :func:`ece` ([BDA] Appendix B). [M] each.

    >>> rb = reliability_bins([0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1])
    >>> rb.count.astype(int).tolist()
    [1, 2, 0, 0, 0, 0, 0, 0, 0, 1]
    >>> float(rb.accuracy[1]), round(float(rb.confidence[1]), 6)
    (0.5, 0.15)
    """
    return _reliability_bins(confidence, correct, weights, resolve_bins(n_bins, binning), binning)


@partial(jax.jit, static_argnums=(3, 4))
def _reliability_bins(confidence, correct, weights, n_bins, binning):
    conf, corr, w = score_inputs(confidence, correct, weights)
    b, s_w, s_conf, s_corr = bin_sums(conf, corr, w, n_bins, binning)
    empty = s_w <= 0
    safe = jnp.where(empty, 1.0, s_w)
    mean_conf = jnp.where(empty, jnp.nan, s_conf / safe)
    acc = jnp.where(empty, jnp.nan, s_corr / safe)
    if binning == "width":
        edges = jnp.asarray(np.arange(n_bins + 1) / n_bins, conf.dtype)
        lower, upper = edges[:-1], edges[1:]
    else:
        live = w > 0
        lower = jax.ops.segment_min(jnp.where(live, conf, jnp.inf), b, num_segments=n_bins)
        upper = jax.ops.segment_max(jnp.where(live, conf, -jnp.inf), b, num_segments=n_bins)
        lower = jnp.where(empty, jnp.nan, lower)
        upper = jnp.where(empty, jnp.nan, upper)
    return ReliabilityBins(s_w, mean_conf, acc, lower, upper)


@jax.jit
def auroc(confidence, correct, weights=None) -> jax.Array:
    """Area under the ROC curve of confidence as a predictor of correctness (Mann-Whitney U).

    AUROC = P(conf_correct > conf_wrong) + 1/2 P(conf_correct = conf_wrong) over weighted pairs
    (one right, one wrong prediction); exact float ties count 1/2. NaN when the weighted tasks are
    all right or all wrong. O(T log T). ``confidence``, ``correct``, ``weights`` [T] -> scalar.

    >>> float(auroc([0.9, 0.8, 0.8, 0.3], [1, 1, 0, 0]))
    0.875
    """
    conf, corr, w = score_inputs(confidence, correct, weights)
    wp, wn = w * corr, w * (1.0 - corr)
    order = jnp.argsort(conf)
    sc = conf[order]
    cum_neg = jnp.concatenate([jnp.zeros(1, w.dtype), jnp.cumsum(wn[order])])
    lo = cum_neg[jnp.searchsorted(sc, conf, side="left")]
    hi = cum_neg[jnp.searchsorted(sc, conf, side="right")]
    n_pos, n_neg = jnp.sum(wp), jnp.sum(wn)
    ok = (n_pos > 0) & (n_neg > 0)
    per_pos = (lo + 0.5 * (hi - lo)) / jnp.where(ok, n_neg, 1.0)   # in [0, 1]
    return jnp.where(ok, jnp.sum(wp * per_pos) / jnp.where(ok, n_pos, 1.0), jnp.nan)


# --------------------------------------------------------------------------- probability-level

@partial(jax.jit, static_argnames=("reduce",))
def brier_mc(proba, gold, gold_missing=None, mask=None, *, reduce=True) -> jax.Array:
    """Multiclass Brier score (Brier 1950): sum over valid slots of (p_g - 1{g = gold})^2.

    ``proba`` [T, K], ``gold`` [T], ``gold_missing`` [T], ``mask`` [T, K]. A gold_missing task's
    one-hot is all zeros (its score is sum_g p_g^2). ``reduce=True``: the mean over labeled tasks
    (scalar, range [0, 2]); ``reduce=False``: the per-task scores [T], NaN on unlabeled tasks.
    Proper, and the score hyperparameters are selected on (docs/evaluation.md).

    >>> float(brier_mc([[0.5, 0.5], [0.25, 0.75]], [0, 1]))
    0.3125
    """
    proba = as_float(proba)
    gold = jnp.asarray(gold, jnp.int32)
    mask = jnp.ones(proba.shape, bool) if mask is None else jnp.asarray(mask, bool)
    gm = jnp.zeros(gold.shape, bool) if gold_missing is None else jnp.asarray(gold_missing, bool)
    per = brier_mc_per_task(proba, jnp.where(gm, -1, gold), mask)
    labeled = (gold >= 0) | gm
    if not reduce:
        return jnp.where(labeled, per, jnp.nan)
    return _wmean(jnp.where(labeled, per, 0.0), labeled.astype(proba.dtype))


@partial(jax.jit, static_argnames=("reduce",))
def nll(proba, gold, gold_missing=None, *, eps=NLL_EPS, reduce=True) -> jax.Array:
    """Negative log-likelihood of the gold answer: -log max(p_gold, eps), ``eps`` = 1e-12.

    ``proba`` [T, K], ``gold`` [T], ``gold_missing`` [T]. A gold_missing task scores -log(eps)
    (the model gave the true answer no mass). ``reduce=True``: mean over labeled tasks (scalar);
    ``reduce=False``: per-task [T], NaN on unlabeled tasks.

    >>> round(float(nll([[0.5, 0.5], [0.0, 1.0]], [0, 0])), 2)      # (log 2 - log 1e-12) / 2
    14.16
    """
    proba = as_float(proba)
    gold = jnp.asarray(gold, jnp.int32)
    gm = jnp.zeros(gold.shape, bool) if gold_missing is None else jnp.asarray(gold_missing, bool)
    p = jnp.take_along_axis(proba, jnp.maximum(gold, 0)[:, None], axis=-1)[:, 0]
    p = jnp.where(gm, 0.0, p)
    per = -jnp.log(jnp.maximum(p, jnp.asarray(eps, proba.dtype)))
    labeled = (gold >= 0) | gm
    if not reduce:
        return jnp.where(labeled, per, jnp.nan)
    return _wmean(jnp.where(labeled, per, 0.0), labeled.astype(proba.dtype))


@persistent_jit
def _summary_arrays(proba, gold, gold_missing, mask, key, pred, confidence):
    s = _correctness(proba, gold, gold_missing, mask, key, pred, confidence)
    w = s.labeled.astype(s.confidence.dtype)
    return dict(
        accuracy=accuracy(s.correct, w),
        ece_ew=_ece(s.confidence, s.correct, w, 10, "width"),
        ece_em=_ece(s.confidence, s.correct, w, 15, "mass"),
        brier=brier_top(s.confidence, s.correct, w),
        brier_mc=brier_mc(proba, gold, gold_missing, mask),
        nll=nll(proba, gold, gold_missing),
        auroc=auroc(s.confidence, s.correct, w),
        n=jnp.sum(s.labeled),
    )


def summary(proba, gold, gold_missing=None, mask=None, *, key=None, pred=None,
            confidence=None) -> dict:
    """The paper's metric row for one arm ([BDA] §6 and Appendix B), as plain Python numbers.

    ``proba`` [T, K], ``gold`` [T], ``gold_missing`` [T], ``mask`` [T, K]; ``key`` / ``pred`` /
    ``confidence`` as in :func:`correctness`: ``confidence`` [T], when given, is what ECE,
    top-label Brier and AUROC read, while ``brier_mc`` and ``nll`` keep reading ``proba``.
    Returns ``accuracy``, ``ece_ew`` (10 equal-width bins), ``ece_em`` (15 equal-mass bins), ``brier`` (top-label), ``brier_mc`` (multiclass), ``nll``, ``auroc``
    (floats; ``None`` where undefined, e.g. AUROC when every task is right, so the dict is strict
    JSON) and ``n`` (int, labeled tasks). Unlabeled tasks are ignored.

    >>> summary([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]], [0, 0, -1])["accuracy"]
    0.5
    """
    out = jax.device_get(_summary_arrays(proba, gold, gold_missing, mask, key, pred,
                                         _check_confidence(confidence, proba)))
    res: dict[str, Any] = {}
    for k, v in out.items():
        if k == "n":
            res[k] = int(v)
        else:
            v = float(v)
            res[k] = v if math.isfinite(v) else None
    return res
