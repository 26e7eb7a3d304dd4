"""Checks of the EM settings shared by the crowd EMs (GLAD, MACE): each raises a
:class:`~bda_jax.DataError` naming the argument before any compilation."""
from __future__ import annotations

import numpy as np

from .._core.errors import DataError

__all__ = ["check_loop", "positive_int"]


def positive_int(x, name: str, least: int) -> int:
    """``x`` as an int, refused unless it is an integer (not a bool) >= ``least``."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < least:
        raise DataError(f"{name} must be an integer >= {least}, got {x!r}", field=name)
    return int(x)


def check_loop(n_iter, tol, name_iter: str = "n_iter", name_tol: str = "tol",
               least: float = -np.inf) -> None:
    """An iteration cap (an integer >= 1) and a tolerance (a number >= ``least``, not NaN)."""
    positive_int(n_iter, name_iter, 1)
    if isinstance(tol, bool) or not np.isscalar(tol) or np.isnan(tol) or tol < least:
        raise DataError(f"{name_tol} must be a number >= {least}, got {tol!r}", field=name_tol)
