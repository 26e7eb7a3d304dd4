"""Checks of the EM loop settings shared by the crowd EMs (GLAD, MACE): each raises a
:class:`~bda_jax.DataError` naming the argument before any compilation."""
from __future__ import annotations

import numpy as np

from .._core.checks import positive_int
from .._core.errors import DataError

__all__ = ["check_loop"]


def check_loop(n_iter, tol, name_iter: str = "n_iter", name_tol: str = "tol",
               least: float = -np.inf) -> None:
    """An iteration cap (an integer >= 1) and a tolerance (a number >= ``least``, not NaN)."""
    positive_int(n_iter, name_iter, 1)
    if isinstance(tol, bool) or not np.isscalar(tol) or np.isnan(tol) or tol < least:
        raise DataError(f"{name_tol} must be a number >= {least}, got {tol!r}", field=name_tol)
