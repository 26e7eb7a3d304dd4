"""Number formatting shared by the report's HTML and its figures (no JAX, no matplotlib: the
figure workers of :mod:`bda_jax.report._figures` import it)."""
from __future__ import annotations

import math

__all__ = ["is_number", "num", "as_float", "constant_confidence"]


def is_number(x) -> bool:
    """An int or float (never a bool) that converts to a float (a huge int does not)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        float(x)
    except OverflowError:
        return False
    return True


def num(x, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or an em dash for anything that is not a finite number."""
    if not is_number(x) or not math.isfinite(float(x)):
        return "—"
    return f"{float(x):.{digits}f}"


def as_float(x) -> float:
    """``x`` as a float, NaN for anything that is not a number."""
    return float(x) if is_number(x) else float("nan")


def constant_confidence(arm: dict) -> bool:
    """Whether an arm is flagged as stating (nearly) one confidence for every task."""
    return (arm.get("calibration") or {}).get("constant_confidence") is True
