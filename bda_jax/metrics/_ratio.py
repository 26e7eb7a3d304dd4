"""A rate with its parts: :class:`Ratio` (``value = numerator / denominator``), the form every
audit rate and cluster-bootstrap estimate is reported in ([Audit] Table 6: each metric with its
numerator and denominator).

``value`` is NaN when the denominator is 0. Numerator and denominator are plain Python numbers
(:func:`plain_number`): ``int`` when whole (block, pair or candidate counts), ``float``
otherwise (PCCA's sum of per-block shares, bootstrap weights).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .._core.errors import DataError

__all__ = ["Ratio", "plain_number", "ratio"]


def plain_number(x) -> int | float:
    """``x`` as a Python ``int`` when it is whole (and exactly representable, below 2**53),
    else as a ``float``.

    >>> plain_number(3.0), plain_number(2.5)
    (3, 2.5)
    """
    v = float(x)
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


class Ratio(NamedTuple):
    """A rate with its parts: ``value = numerator / denominator`` (NaN when the denominator is
    0). ``numerator`` may be negative (a net shift) or fractional (PCCA's summed shares)."""

    value: float
    numerator: float
    denominator: float


def ratio(numerator, denominator) -> Ratio:
    """:class:`Ratio` of two numbers (counts, or sums of weighted terms).

    >>> ratio(1927, 9436).numerator, round(ratio(1927, 9436).value, 3), ratio(0, 0).value
    (1927, 0.204, nan)
    >>> ratio(2.5, 4.0)
    Ratio(value=0.625, numerator=2.5, denominator=4)
    """
    num, den = plain_number(numerator), plain_number(denominator)
    if den < 0:
        raise DataError(f"a denominator cannot be negative, got {den}", field="denominator")
    return Ratio(num / den if den > 0 else math.nan, num, den)
