"""Argument checks shared across the package: integers that must be integers (a bool never
counts as one) and at least some minimum, refused with a :class:`DataError` naming the field."""
from __future__ import annotations

import numpy as np

from .errors import DataError

__all__ = ["is_int", "positive_int"]


def is_int(x) -> bool:
    """Whether ``x`` is an integer (Python or NumPy), a bool not counting as one.

    >>> is_int(3), is_int(np.int64(3)), is_int(True), is_int(3.0)
    (True, True, False, False)
    """
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def positive_int(value, field: str, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (not a bool) >= ``minimum``, else a
    :class:`DataError` naming ``field``.

    >>> positive_int(np.int32(5), "n_boot")
    5
    """
    if not is_int(value) or value < minimum:
        raise DataError(f"{field} must be an integer >= {minimum}, got {value!r}", field=field)
    return int(value)
