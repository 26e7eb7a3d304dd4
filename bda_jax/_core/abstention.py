"""Selective prediction: answer "unknown" below a posterior threshold, and risk-coverage curves.

The BDA paper lists abstention as future work; this is the standard selective-classification
reading (El-Yaniv and Wiener 2010): rank tasks by confidence, answer the most confident fraction
(the coverage), and measure the error rate among the answered ones (the selective risk).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import DataError

__all__ = ["selective_decision", "RiskCoverage", "risk_coverage"]

UNKNOWN = -1


def selective_decision(proba, threshold: float, index=None) -> np.ndarray:
    """[T] chosen slot, or -1 ("unknown") where the top probability is below ``threshold``.

    ``proba`` [T, K]; ``index`` the decisions to keep (default: argmax, first of ties — pass
    ``decide(...).index`` for seeded random ties).
    """
    if not 0.0 <= threshold <= 1.0:
        raise DataError(f"threshold must be in [0, 1], got {threshold!r}", field="threshold")
    proba = np.asarray(proba)
    index = np.argmax(proba, axis=1) if index is None else np.asarray(index)
    confident = np.take_along_axis(proba, index[:, None], axis=1)[:, 0] >= threshold
    return np.where(confident, index, UNKNOWN)


class RiskCoverage(NamedTuple):
    """``coverage`` [n] = k / n for k = 1..n; ``risk`` [n] error rate among the k most confident
    tasks; ``threshold`` [n] the confidence of the k-th task; ``aurc`` the area under the
    risk-coverage curve (mean risk over the n coverage points; lower is better)."""

    coverage: np.ndarray
    risk: np.ndarray
    threshold: np.ndarray
    aurc: float


def risk_coverage(confidence, correct) -> RiskCoverage:
    """Risk-coverage curve of a confidence ranking over labeled tasks.

    ``confidence`` [n], ``correct`` [n] (0/1). Ties in confidence are answered together: every
    point inside a tie block gets the block's risk, so the curve does not depend on the order of
    tied tasks.
    """
    confidence = np.asarray(confidence, np.float64)
    correct = np.asarray(correct, np.float64)
    if confidence.shape != correct.shape or confidence.ndim != 1 or confidence.size == 0:
        raise DataError("confidence and correct must be non-empty [n] arrays", field="confidence")
    order = np.argsort(-confidence, kind="stable")
    conf, err = confidence[order], 1.0 - correct[order]
    n = conf.size
    cum_err = np.cumsum(err)
    k = np.arange(1, n + 1)
    # end of each tie block: the last index holding the same confidence
    last = np.searchsorted(-conf, -conf, side="right") - 1
    risk = cum_err[last] / (last + 1)
    return RiskCoverage(k / n, risk, conf, float(risk.mean()))
