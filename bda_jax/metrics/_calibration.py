"""Calibration error and its decompositions: the calibration toolkit of scikit-learn and netcal
(binned L1 / L2 / max calibration error, top-label and class-wise, the debiased L2 estimator of
Kumar, Liang & Ma 2019, Murphy's Brier decomposition), over the bins of
:func:`bda_jax.metrics.ece` ([BDA] Appendix B Eq. 5). Conventions and the mapping to the
scikit-learn / netcal names: ``docs/metrics.md``, "Calibration toolkit".

Inputs are those of :mod:`bda_jax.metrics` (see ``_scores``):

* **score level** (top-label) ``(confidence, correct, weights)``, each [T]: the predicted slot's
  probability and whether it was right (0/1); ``weights`` [T] non-negative multiplicities (default
  ones; 0 removes a task, integer weights act as repeated rows, so the bootstrap's
  ``paired_bootstrap_stat`` can resample them).
* **probability level** ``(proba, gold, gold_missing, mask, weights)``: ``proba`` [T, K],
  ``gold`` [T] int (-1: none), ``gold_missing`` [T] bool, ``mask`` [T, K] valid slots, ``weights``
  [T]. Unlabeled tasks get weight 0; a gold_missing task's one-hot is all zeros. Class k is slot k:
  the binary problem p_tk vs 1{gold_t = k} over the tasks where slot k is valid.

Bins: ``binning="width"`` (default 10 bins, [m/M, (m+1)/M)) or ``"mass"`` (default 15 bins,
equal weight, exact ties never split), exactly those of :func:`bda_jax.metrics.ece`. Every value
of an empty (all-zero-weight) input is NaN. All functions are pure JAX: jit-, vmap- and
grad-traceable (the string and bin-count options are static; bad ones raise ``DataError``).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import DataError
from ._scores import as_float, bin_sums, resolve_bins, score_inputs

__all__ = ["BrierDecomposition", "brier_decomposition", "brier_decomposition_mc",
           "calibration_error", "classwise_calibration_error"]

_NORMS = ("l1", "l2", "max")
_AVERAGES = ("mean", "power")


# --------------------------------------------------------------------------- checks

def _variant(norm, debias) -> str:
    if norm not in _NORMS:
        raise DataError(f"norm must be one of {_NORMS}, got {norm!r}", field="norm")
    if not isinstance(debias, bool):
        raise DataError(f"debias must be True or False, got {debias!r}", field="debias")
    if debias and norm != "l2":
        raise DataError(f"debias=True is defined for norm='l2' only, got norm={norm!r}",
                        field="debias")
    return "l2_debiased" if debias else norm


def _check_1d(name, x, n):
    if x is not None and np.shape(x) != (n,):
        raise DataError(f"{name} must have shape ({n},), got {np.shape(x)}", field=name)


def _check_scores(confidence, correct, weights):
    shape = np.shape(confidence)
    if len(shape) != 1:
        raise DataError(f"confidence must be 1-D [T], got shape {shape}", field="confidence")
    _check_1d("correct", correct, shape[0])
    _check_1d("weights", weights, shape[0])


def _check_proba(proba, gold, gold_missing, mask, weights):
    shape = np.shape(proba)
    if len(shape) != 2:
        raise DataError(f"proba must be 2-D [T, K], got shape {shape}", field="proba")
    for name, x in (("gold", gold), ("gold_missing", gold_missing), ("weights", weights)):
        _check_1d(name, x, shape[0])
    if mask is not None and np.shape(mask) != shape:
        raise DataError(f"mask must have the shape of proba {shape}, got {np.shape(mask)}",
                        field="mask")


# --------------------------------------------------------------------------- per-bin math

def _errors(s_w, s_f, s_o, total):
    """Every calibration error of one binary problem from its bin sums [M] (weight, sum of
    confidence, sum of outcome) and its total weight: a dict of scalars."""
    nonempty = s_w > 0
    safe = jnp.where(nonempty, s_w, 1.0)
    gap = jnp.where(nonempty, (s_o - s_f) / safe, 0.0)           # acc(B_m) - conf(B_m)
    acc = jnp.where(nonempty, s_o / safe, 0.0)
    l1 = jnp.sum(jnp.abs(s_o - s_f)) / total                       # as ece computes it
    l2_sq = jnp.sum(s_w * gap ** 2) / total
    mx = jnp.where(total > 0, jnp.max(jnp.abs(gap)), jnp.nan)     # empty bins hold gap 0
    # Kumar et al. (2019): per bin, subtract the estimated variance of acc(B_m); bins of weight
    # <= 1 add 0 (their variance estimate is undefined)
    big = s_w > 1
    per_bin = jnp.where(big, gap ** 2 - acc * (1.0 - acc) / jnp.where(big, s_w - 1.0, 1.0), 0.0)
    d_sq = jnp.sum(s_w * per_bin) / total
    return {"l1": l1, "l2": jnp.sqrt(l2_sq), "max": mx,
            "l2_debiased": jnp.sqrt(jnp.maximum(d_sq, 0.0)),
            "_l2_sq": l2_sq, "_d_sq": d_sq, "_total": total}


def _binary_errors(conf, corr, w, n_bins, binning):
    conf, corr, w = score_inputs(conf, corr, w)
    _, s_w, s_f, s_o = bin_sums(conf, corr, w, n_bins, binning)
    return _errors(s_w, s_f, s_o, jnp.sum(w))


def _class_inputs(proba, gold, gold_missing, mask, weights):
    """proba [T, K] float, one-hot outcome y [T, K], per-slot weights [T, K], task weights [T]."""
    proba = as_float(proba)
    gold = jnp.asarray(gold, jnp.int32)
    mask = jnp.ones(proba.shape, bool) if mask is None else jnp.asarray(mask, bool)
    gm = jnp.zeros(gold.shape, bool) if gold_missing is None else jnp.asarray(gold_missing, bool)
    labeled = (gold >= 0) | gm
    w = jnp.ones(gold.shape, proba.dtype) if weights is None else jnp.asarray(weights, proba.dtype)
    w = jnp.where(labeled & (w > 0), w, 0.0)
    y = (gold[:, None] == jnp.arange(proba.shape[1])[None, :]) & ~gm[:, None]
    return proba, y.astype(proba.dtype), jnp.where(mask, w[:, None], 0.0), w


# --------------------------------------------------------------------------- calibration error

def calibration_error(confidence, correct, n_bins=None, binning="width", norm="l1", weights=None,
                      *, debias=False) -> jax.Array:
    """Top-label binned calibration error in the L1, L2 or max norm. Scalar.

    ``confidence``, ``correct``, ``weights`` [T] (score level). With W_m the weight of bin B_m, W
    the total, acc_m and conf_m the bin's mean correctness and confidence (empty bins skipped):

    * ``norm="l1"``: ECE = sum_m W_m/W |acc_m - conf_m| ([BDA] Appendix B Eq. 5; equals
      :func:`bda_jax.metrics.ece`);
    * ``norm="l2"``: RMS calibration error = sqrt(sum_m W_m/W (acc_m - conf_m)^2);
    * ``norm="max"``: MCE = max over non-empty bins of |acc_m - conf_m|;
    * ``norm="l2", debias=True``: the debiased plugin estimator of Kumar, Liang & Ma (2019,
      "Verified uncertainty calibration", §5), sqrt(max(0, sum_m W_m/W [(acc_m - conf_m)^2 -
      acc_m (1 - acc_m) / (W_m - 1)])): each bin's squared gap less the estimated variance of its
      accuracy; a bin of weight W_m <= 1 adds 0 (their code: a bin of fewer than two samples).
      Integer weights count as samples. Other norms with ``debias`` raise ``DataError``.

    ``binning`` / ``n_bins``: the bins of :func:`bda_jax.metrics.ece` (10 equal-width, 15
    equal-mass by default).

    >>> conf, corr = [0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1]
    >>> [round(float(calibration_error(conf, corr, norm=n)), 4) for n in ("l1", "l2", "max")]
    [0.2, 0.25, 0.35]
    """
    _check_scores(confidence, correct, weights)
    key = _variant(norm, debias)
    return _top_label(confidence, correct, weights, resolve_bins(n_bins, binning), binning)[key]


@partial(jax.jit, static_argnums=(3, 4))
def _top_label(confidence, correct, weights, n_bins, binning):
    return _binary_errors(confidence, correct, weights, n_bins, binning)


def classwise_calibration_error(proba, gold, gold_missing=None, mask=None, n_bins=None,
                                binning="width", norm="l1", weights=None, *, debias=False,
                                average="mean") -> jax.Array:
    """Class-wise (marginal) calibration error over a probability table. Scalar.

    ``proba`` [T, K], ``gold`` [T], ``gold_missing`` [T], ``mask`` [T, K], ``weights`` [T]. For
    each slot k, CE_k is :func:`calibration_error` (same ``norm``, ``debias``, bins) of the binary
    problem p_tk vs 1{gold_t = k} over the labeled tasks where slot k is valid (weight w_t), the
    bins (equal-mass ones too) formed from that slot's own probabilities. Slots valid on no
    weighted task are left out. Then

    * ``average="mean"`` (default): the plain mean (1/K') sum_k CE_k over the K' slots kept; with
      ``norm="l1"`` this is the class-wise ECE of Kull et al. (2019, "Beyond temperature
      scaling");
    * ``average="power"``: the power mean (1/K' sum_k CE_k^p)^(1/p), p = 1, 2, inf for l1, l2,
      max (max: the worst class), Kumar et al.'s (2019) "marginal" calibration error; with
      ``debias`` each class contributes max(0, D_k), D_k its debiased squared error.

    The two readings of "the average over classes" differ for l2 and max (for l1 they agree):
    ``"mean"`` averages the per-class errors themselves, ``"power"`` averages in the norm's power.

    >>> proba = [[0.8, 0.2], [0.6, 0.4], [0.3, 0.7]]
    >>> round(float(classwise_calibration_error(proba, [0, 1, 1], n_bins=2)), 4)     # 0.7 / 3
    0.2333
    """
    _check_proba(proba, gold, gold_missing, mask, weights)
    key = _variant(norm, debias)
    if average not in _AVERAGES:
        raise DataError(f"average must be one of {_AVERAGES}, got {average!r}", field="average")
    out = _classwise(proba, gold, gold_missing, mask, weights, resolve_bins(n_bins, binning),
                     binning)
    return out[(key, average)]


@partial(jax.jit, static_argnums=(5, 6))
def _classwise(proba, gold, gold_missing, mask, weights, n_bins, binning):
    proba, y, wk, _ = _class_inputs(proba, gold, gold_missing, mask, weights)
    per = jax.vmap(partial(_binary_errors, n_bins=n_bins, binning=binning),
                   in_axes=(1, 1, 1))(proba, y, wk)
    keep = per["_total"] > 0
    n_keep = jnp.sum(keep)

    def mean(x):
        return jnp.sum(jnp.where(keep, x, 0.0)) / n_keep            # 0/0 = NaN: nothing kept

    worst = jnp.where(n_keep > 0, jnp.max(jnp.where(keep, per["max"], -jnp.inf)), jnp.nan)
    out = {(k, "mean"): mean(per[k]) for k in ("l1", "l2", "max", "l2_debiased")}
    out[("l1", "power")] = out[("l1", "mean")]
    out[("l2", "power")] = jnp.sqrt(mean(per["_l2_sq"]))
    out[("max", "power")] = worst
    out[("l2_debiased", "power")] = jnp.sqrt(mean(jnp.maximum(per["_d_sq"], 0.0)))
    return out


# --------------------------------------------------------------------------- Brier decomposition

class BrierDecomposition(NamedTuple):
    """Murphy's (1973) binned decomposition of a Brier score, extended by the two within-bin terms
    of Stephenson, Coelho & Jolliffe (2008) so that it is an identity for any data. Scalars.

    ``brier = reliability - resolution + uncertainty + within_variance - 2 * within_covariance``

    exactly (up to rounding). ``within_variance`` and ``within_covariance`` are 0 when every bin's
    forecasts are equal; only then is Murphy's three-term identity
    ``brier = reliability - resolution + uncertainty`` exact.
    """

    brier: jax.Array
    reliability: jax.Array
    resolution: jax.Array
    uncertainty: jax.Array
    within_variance: jax.Array
    within_covariance: jax.Array


def _decompose(conf, corr, w, n_bins, binning, norm):
    """The six terms of one binary problem (forecast ``conf`` [T], outcome ``corr`` [T] in {0, 1},
    weight ``w`` [T]), each a weighted sum divided by ``norm`` (an empty problem adds 0)."""
    conf, corr, w = score_inputs(conf, corr, w)
    b, s_w, s_f, s_o = bin_sums(conf, corr, w, n_bins, binning)
    live = w > 0
    total = jnp.sum(w)
    nonempty = s_w > 0
    safe = jnp.where(nonempty, s_w, 1.0)
    f_bar, o_bar = s_f / safe, s_o / safe                        # 0 in empty bins
    base = jnp.sum(s_o) / jnp.where(total > 0, total, 1.0)       # the problem's base rate
    df = jnp.where(live, conf - f_bar[b], 0.0)
    do = jnp.where(live, corr - o_bar[b], 0.0)
    terms = (jnp.sum(jnp.where(live, w * (conf - corr) ** 2, 0.0)),
             jnp.sum(s_w * (f_bar - o_bar) ** 2),
             jnp.sum(jnp.where(nonempty, s_w * (o_bar - base) ** 2, 0.0)),
             total * base * (1.0 - base),
             jnp.sum(w * df ** 2),
             jnp.sum(w * df * do))
    return BrierDecomposition(*(t / norm for t in terms))


def brier_decomposition(confidence, correct, n_bins=None, binning="width",
                        weights=None) -> BrierDecomposition:
    """Binned Brier decomposition of the **top-label** Brier score :func:`bda_jax.metrics.brier_top`
    (mean (confidence - correct)^2, scikit-learn's ``brier_score_loss(correct, confidence)``).

    ``confidence``, ``correct`` (0/1), ``weights`` [T]. With the bins of
    :func:`bda_jax.metrics.ece`, bin weights W_m, bin means f_m (confidence) and o_m (correctness),
    base rate o = accuracy, and W the total weight (Murphy 1973):

    * ``reliability`` = sum_m W_m/W (f_m - o_m)^2 (the squared-L2 calibration error);
    * ``resolution`` = sum_m W_m/W (o_m - o)^2;
    * ``uncertainty`` = o (1 - o);
    * ``within_variance`` = 1/W sum_i w_i (f_i - f_m(i))^2 and ``within_covariance`` = 1/W sum_i
      w_i (f_i - f_m(i)) (o_i - o_m(i)) (Stephenson et al. 2008).

    ``brier = reliability - resolution + uncertainty + within_variance - 2 within_covariance``;
    the last two vanish, and Murphy's identity holds exactly, only when every bin's confidence is
    constant (e.g. vote shares binned so that each value has its own bin); otherwise they are the
    binning's error.

    >>> d = brier_decomposition([0.25, 0.25, 0.75, 0.75], [0, 1, 1, 1], n_bins=2)
    >>> [round(float(x), 4) for x in d]
    [0.1875, 0.0625, 0.0625, 0.1875, 0.0, 0.0]
    """
    _check_scores(confidence, correct, weights)
    return _brier_top(confidence, correct, weights, resolve_bins(n_bins, binning), binning)


@partial(jax.jit, static_argnums=(3, 4))
def _brier_top(confidence, correct, weights, n_bins, binning):
    _, _, w = score_inputs(confidence, correct, weights)
    return _decompose(confidence, correct, w, n_bins, binning, jnp.sum(w))


def brier_decomposition_mc(proba, gold, gold_missing=None, mask=None, n_bins=None,
                           binning="width", weights=None) -> BrierDecomposition:
    """Binned decomposition of the **multiclass** Brier score :func:`bda_jax.metrics.brier_mc`
    (mean over labeled tasks of sum over valid slots of (p_k - 1{k = gold})^2; scikit-learn's
    ``brier_score_loss(gold, proba, labels=..., scale_by_half=False)`` on full rows).

    ``proba`` [T, K], ``gold`` [T], ``gold_missing`` [T], ``mask`` [T, K], ``weights`` [T]. The
    multiclass Brier is the sum over slots k of the binary Brier of p_tk vs 1{gold_t = k} (over
    the tasks where slot k is valid, divided by the total task weight W, not the slot's); each
    slot is decomposed as in :func:`brier_decomposition`, with bins formed from its own
    probabilities and its own base rate o_k, and every term is the sum over slots:
    ``uncertainty`` = sum_k W_k/W o_k (1 - o_k), and so on. The same identity holds, with the same
    caveat: exact without the within-bin terms only when each slot's bins hold equal forecasts.

    >>> d = brier_decomposition_mc([[0.75, 0.25], [0.25, 0.75]], [0, 1], n_bins=2)
    >>> [round(float(x), 4) for x in d]
    [0.125, 0.125, 0.5, 0.5, 0.0, 0.0]
    """
    _check_proba(proba, gold, gold_missing, mask, weights)
    return _brier_mc(proba, gold, gold_missing, mask, weights, resolve_bins(n_bins, binning),
                     binning)


@partial(jax.jit, static_argnums=(5, 6))
def _brier_mc(proba, gold, gold_missing, mask, weights, n_bins, binning):
    proba, y, wk, w = _class_inputs(proba, gold, gold_missing, mask, weights)
    per = jax.vmap(partial(_decompose, n_bins=n_bins, binning=binning, norm=jnp.sum(w)),
                   in_axes=(1, 1, 1))(proba, y, wk)
    return BrierDecomposition(*(jnp.sum(t) for t in per))
