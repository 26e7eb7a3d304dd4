"""Calibration axis of the routing audit ([Audit] Table 2, Table 5 and Table 10; docs/audit.md).

The audited protocol polls every agent for a candidate answer and a stated confidence score; this
module asks whether those scores behave like probabilities of the candidate being correct. All
functions are pure functions of flat per-candidate arrays, each [N] (one entry per valid poll
candidate):

* ``scores`` stated confidence, on ``[0, scale]`` (``scale=100`` for 0-100 scores);
* ``correct`` 0/1 correctness of the candidate;
* ``problem`` any hashable labels: all candidates of one problem (cluster) share a fold;
* ``tier`` any labels: difficulty stratum of the problem (constant within a problem).

:func:`calibration_report` gives the rows of Table 2: the raw scores, temperature scaling and
isotonic regression, both recalibrators cross-fitted over problem folds (K = 2 by default) that
are stratified by tier, every row scored on held-out predictions only. The metrics are those of
:mod:`bda_jax.metrics` (ECE with 10 equal-width bins, top-label Brier, AUROC).

Readings chosen where the paper leaves room (each a parameter):

* Logits need scores strictly inside (0, 1): temperature scaling clips the rescaled score to
  ``[eps, 1 - eps]`` (``eps=1e-6``) before ``logit``; the raw row and isotonic regression see the
  unclipped scores.
* Temperature scaling has no bias term (one parameter T > 0, p' = sigmoid(logit(p) / T)), fit by
  minimum NLL on the training fold. T is searched in ``[t_min, t_max]`` = [0.01, 1000]; scores
  that rank worse than chance drive T to ``t_max`` (p' ~ 1/2), since T > 0 cannot flip the order.
* Isotonic regression (pool-adjacent-violators on the training fold, tied scores pooled first)
  predicts held-out scores by linear interpolation between the fitted knots, clipped to the
  end values outside the training range (``interpolation="linear"``, as scikit-learn's
  ``IsotonicRegression``); ``"step"`` uses the fitted value of the nearest knot at or below.
* Folds are dealt problem by problem
  (:func:`~bda_jax.audit.tier_stratified_folds`): problems are shuffled (seeded),
  sorted by tier (stable) and dealt round-robin, so each tier's problems, and the problems
  overall, are split as evenly as possible over the folds (balanced in problems, not in
  candidates).
"""
from __future__ import annotations

import math
from typing import Mapping, NamedTuple

import numpy as np
from scipy.optimize import isotonic_regression, minimize_scalar

from ._common import group_rows
from ._folds import tier_stratified_folds
from .._core.errors import DataError
from ..metrics import accuracy, auroc, brier_top, ece

__all__ = [
    "CalibrationReport", "CalibrationRow", "IsotonicFit", "apply_isotonic", "apply_temperature",
    "calibration_by_group", "calibration_report", "calibration_row", "fit_isotonic",
    "fit_temperature",
]

LOGIT_EPS = 1e-6
"""Default clip of a score before ``logit`` in temperature scaling: ``[1e-6, 1 - 1e-6]``."""


# --------------------------------------------------------------------------- inputs

def _scores(scores, scale, field="scores") -> np.ndarray:
    if not (isinstance(scale, (int, float, np.integer, np.floating)) and scale > 0):
        raise DataError(f"scale must be a positive number, got {scale!r}", field="scale")
    s = np.asarray(scores, np.float64)
    if s.ndim != 1:
        raise DataError(f"{field} must be one-dimensional [N], got shape {s.shape}", field=field)
    s = s / float(scale)
    if not np.isfinite(s).all():
        raise DataError(f"{field} must be finite (drop invalid candidates first)", field=field)
    if (s < 0).any() or (s > 1).any():
        bad = float(s[(s < 0) | (s > 1)][0] * scale)
        raise DataError(f"{field} must lie in [0, scale={scale}], found {bad}", field=field)
    return s


def _correct(correct, n, field="correct") -> np.ndarray:
    y = np.asarray(correct, np.float64)
    if y.shape != (n,):
        raise DataError(f"{field} must be [N] = [{n}], got shape {y.shape}", field=field)
    if not np.isin(y, (0.0, 1.0)).all():
        raise DataError(f"{field} must hold 0/1 (or booleans)", field=field)
    return y


def _fit_inputs(scores, correct, scale, what) -> tuple[np.ndarray, np.ndarray]:
    """Scores on [0, 1] and 0/1 correctness, both [N], refusing an empty input."""
    p = _scores(scores, scale)
    y = _correct(correct, p.size)
    if p.size == 0:
        raise DataError(f"no candidates to {what}", field="scores")
    return p, y


def _labels(x, n, field) -> np.ndarray:
    a = np.asarray(x)
    if a.shape != (n,):
        raise DataError(f"{field} must be [N] = [{n}], got shape {a.shape}", field=field)
    return a


# --------------------------------------------------------------------------- temperature

def _logit(p, eps):
    p = np.clip(p, eps, 1.0 - eps)
    return np.log(p) - np.log1p(-p)


def fit_temperature(scores, correct, *, scale: float = 1.0, eps: float = LOGIT_EPS,
                    t_min: float = 1e-2, t_max: float = 1e3) -> float:
    """Temperature T minimizing the NLL of sigmoid(logit(p) / T) ([Audit] Table 2).

    ``scores`` [N] on ``[0, scale]``, ``correct`` [N] 0/1. One scalar, no bias; p is clipped to
    ``[eps, 1 - eps]`` before the logit. The NLL is convex in 1/T, so a bounded scalar search
    over 1/T in ``[1/t_max, 1/t_min]`` finds the optimum; T > 1 softens over-confident scores.

    >>> fit_temperature([0.99, 0.99, 0.01, 0.01], [1, 0, 0, 1]) > 100    # no signal: p' -> 1/2
    True
    >>> round(fit_temperature([0.9, 0.9, 0.9, 0.9], [1, 1, 1, 0]), 3)    # 0.9 -> 0.75
    2.0
    """
    p, y = _fit_inputs(scores, correct, scale, "fit a temperature on")
    if not 0 < t_min < t_max:
        raise DataError(f"need 0 < t_min < t_max, got {t_min!r}, {t_max!r}", field="t_min")
    z = _logit(p, eps)

    def nll(beta):
        a = beta * z
        # -[y log s(a) + (1 - y) log(1 - s(a))] = log(1 + e^a) - y a
        return float(np.mean(np.logaddexp(0.0, a) - y * a))

    res = minimize_scalar(nll, bounds=(1.0 / t_max, 1.0 / t_min), method="bounded",
                          options={"xatol": 1e-10, "maxiter": 500})
    return float(1.0 / res.x)


def apply_temperature(scores, temperature: float, *, scale: float = 1.0,
                      eps: float = LOGIT_EPS) -> np.ndarray:
    """sigmoid(logit(clip(p, eps, 1 - eps)) / T), [N] -> [N] probabilities.

    >>> apply_temperature([50, 90], 2.0, scale=100).round(3).tolist()
    [0.5, 0.75]
    """
    p = _scores(scores, scale)
    return 1.0 / (1.0 + np.exp(-_logit(p, eps) / float(temperature)))


# --------------------------------------------------------------------------- isotonic

class IsotonicFit(NamedTuple):
    """A fitted isotonic map: ``x`` [M] increasing distinct training scores (on [0, 1]) and
    ``y`` [M] their non-decreasing fitted probabilities."""

    x: np.ndarray
    y: np.ndarray


def fit_isotonic(scores, correct, *, scale: float = 1.0) -> IsotonicFit:
    """Isotonic regression of correctness on score by pool-adjacent-violators ([Audit] Table 2).

    ``scores`` [N] on ``[0, scale]``, ``correct`` [N]. Tied scores are pooled first (their mean
    correctness, weighted by their count), then ``scipy.optimize.isotonic_regression`` fits a
    non-decreasing sequence by weighted least squares.

    >>> f = fit_isotonic([0.2, 0.4, 0.6, 0.8], [0, 1, 0, 1])
    >>> f.x.tolist(), f.y.tolist()
    ([0.2, 0.4, 0.6, 0.8], [0.0, 0.5, 0.5, 1.0])
    """
    p, y = _fit_inputs(scores, correct, scale, "fit an isotonic map on")
    ux, inv, cnt = np.unique(p, return_inverse=True, return_counts=True)
    mean = np.bincount(inv.reshape(-1), weights=y, minlength=ux.size) / cnt
    fit = isotonic_regression(mean, weights=cnt.astype(np.float64), increasing=True)
    return IsotonicFit(ux, np.asarray(fit.x, np.float64))


def apply_isotonic(fit: IsotonicFit, scores, *, scale: float = 1.0,
                   interpolation: str = "linear") -> np.ndarray:
    """Evaluate an :class:`IsotonicFit` at ``scores`` [N] -> [N].

    ``"linear"``: interpolate between knots, end values outside the training range; ``"step"``:
    the fitted value of the largest knot <= score (the first knot's value below the range).

    >>> f = IsotonicFit(np.array([0.2, 0.8]), np.array([0.1, 0.7]))
    >>> apply_isotonic(f, [0.0, 0.5, 1.0]).round(3).tolist()
    [0.1, 0.4, 0.7]
    >>> apply_isotonic(f, [0.0, 0.5, 1.0], interpolation="step").round(3).tolist()
    [0.1, 0.1, 0.7]
    """
    p = _scores(scores, scale)
    if interpolation == "linear":
        return np.interp(p, fit.x, fit.y)
    if interpolation == "step":
        i = np.searchsorted(fit.x, p, side="right") - 1
        return fit.y[np.clip(i, 0, fit.x.size - 1)]
    raise DataError(f"interpolation must be 'linear' or 'step', got {interpolation!r}",
                    field="interpolation")


# --------------------------------------------------------------------------- report

class CalibrationRow(NamedTuple):
    """One row of Table 2 (plain Python numbers; ``._asdict()`` is JSON).

    ``method`` ("raw", "temperature", "isotonic"); ``ece`` (10 equal-width bins unless told),
    ``brier`` (top-label), ``auroc`` (NaN -> None when one class is absent), ``mean_confidence``,
    ``accuracy``; ``n`` candidates scored (the denominator of every column) and ``n_correct``
    (the numerator of ``accuracy``).
    """

    method: str
    ece: float | None
    brier: float | None
    auroc: float | None
    mean_confidence: float | None
    accuracy: float | None
    n: int
    n_correct: int


class CalibrationReport(NamedTuple):
    """Output of :func:`calibration_report`.

    ``rows`` the three :class:`CalibrationRow` (raw, temperature, isotonic); ``folds`` [N] fold
    id of each candidate; ``temperatures`` the T fitted on each fold's training part (fold order);
    ``calibrated`` {"raw", "temperature", "isotonic"} -> [N] held-out probabilities.
    """

    rows: tuple
    folds: np.ndarray
    temperatures: tuple
    calibrated: Mapping[str, np.ndarray]

    def row(self, method: str) -> CalibrationRow:
        """The row of one method."""
        for r in self.rows:
            if r.method == method:
                return r
        raise DataError(f"no row {method!r}; have {[r.method for r in self.rows]}",
                        field="method")


def _num(x) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


def calibration_row(method: str, confidence, correct, *, n_bins: int = 10) -> CalibrationRow:
    """Score probabilities ``confidence`` [N] (on [0, 1]) against ``correct`` [N] with
    :mod:`bda_jax.metrics`: ECE (``n_bins`` equal-width bins), Brier, AUROC, means.

    >>> r = calibration_row("raw", [0.9, 0.9, 0.6, 0.6], [1, 0, 1, 0])
    >>> round(r.ece, 4), round(r.brier, 4), r.auroc, r.n, r.n_correct
    (0.25, 0.335, 0.5, 4, 2)
    """
    c = _scores(confidence, 1.0, field="confidence")
    y = _correct(correct, c.size)
    return CalibrationRow(
        method=method,
        ece=_num(ece(c, y, n_bins=n_bins)),
        brier=_num(brier_top(c, y)),
        auroc=_num(auroc(c, y)),
        mean_confidence=_num(c.mean()) if c.size else None,
        accuracy=_num(accuracy(y)) if c.size else None,
        n=int(c.size),
        n_correct=int(y.sum()),
    )


def calibration_report(scores, correct, problem, tier, *, n_folds: int = 2, seed: int = 0,
                       n_bins: int = 10, scale: float = 1.0, eps: float = LOGIT_EPS,
                       folds=None, interpolation: str = "linear") -> CalibrationReport:
    """Raw, temperature-scaled and isotonic calibration rows, cross-fitted ([Audit] Table 2).

    ``scores`` [N] stated confidences on ``[0, scale]``, ``correct`` [N] 0/1, ``problem`` [N] and
    ``tier`` [N] labels, one entry per valid poll candidate. Folds: ``folds`` [N] ints if given
    (their values are the fold ids), else
    :func:`~bda_jax.audit.tier_stratified_folds` (``n_folds``, ``seed``).
    For each fold k, a temperature and an isotonic map are fit on the candidates outside k and
    applied to the candidates in k; the rows score the pooled held-out predictions of all folds
    (so AUROC may move slightly even for the monotone maps, whose fits differ by fold). The raw
    row scores ``scores / scale`` unchanged.

    >>> s = [90, 80, 95, 70, 85, 90, 60, 99]; y = [1, 0, 1, 0, 1, 0, 0, 1]
    >>> rep = calibration_report(s, y, problem=[1, 1, 2, 2, 3, 3, 4, 4],
    ...                          tier=[1, 1, 1, 1, 2, 2, 2, 2], scale=100)
    >>> [r.method for r in rep.rows], rep.row("raw").n, round(rep.row("raw").mean_confidence, 4)
    (['raw', 'temperature', 'isotonic'], 8, 0.8362)
    """
    p, y = _fit_inputs(scores, correct, scale, "calibrate")
    if folds is None:
        fold = tier_stratified_folds(_labels(problem, p.size, "problem"),
                                     _labels(tier, p.size, "tier"), n_folds=n_folds, seed=seed)
    else:
        fold = np.asarray(folds)
        if fold.shape != (p.size,) or not np.issubdtype(fold.dtype, np.integer):
            raise DataError(f"folds must be [N] = [{p.size}] integers", field="folds")
    ids = np.unique(fold)
    if ids.size < 2:
        raise DataError("cross-fitting needs at least two folds", field="folds")
    temp = np.empty_like(p)
    iso = np.empty_like(p)
    temps = []
    for k in ids:
        test = fold == k
        train = ~test
        t = fit_temperature(p[train], y[train], eps=eps)
        temps.append(t)
        temp[test] = apply_temperature(p[test], t, eps=eps)
        iso[test] = apply_isotonic(fit_isotonic(p[train], y[train]), p[test],
                                   interpolation=interpolation)
    calibrated = {"raw": p, "temperature": temp, "isotonic": iso}
    rows = tuple(calibration_row(m, calibrated[m], y, n_bins=n_bins) for m in calibrated)
    return CalibrationReport(rows, fold, tuple(temps), calibrated)


def calibration_by_group(scores, correct, group, *, scale: float = 1.0,
                         n_bins: int = 10) -> dict:
    """Raw calibration row per group (e.g. per tier: the ECE column of [Audit] Table 10).

    ``scores`` [N] on ``[0, scale]``, ``correct`` [N], ``group`` [N] labels -> {label: row}, in
    sorted label order; each row's ``n`` is that group's denominator.

    >>> out = calibration_by_group([0.9, 0.9, 0.5, 0.5], [1, 0, 1, 0], ["a", "a", "b", "b"])
    >>> {k: round(v.ece, 4) for k, v in out.items()}
    {'a': 0.4, 'b': 0.0}
    """
    p = _scores(scores, scale)
    y = _correct(correct, p.size)
    g = _labels(group, p.size, "group")
    return {key: calibration_row("raw", p[m], y[m], n_bins=n_bins) for key, m in group_rows(g)}
