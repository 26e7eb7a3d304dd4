"""Small pieces shared by the modules of the routing audit ([Audit]; docs/audit.md): argument
checks (:func:`positive_int`, :func:`is_int`), error-message quoting (:func:`short_repr`) and
grouping by label (:func:`group_rows`).
"""
from __future__ import annotations

import numpy as np

from .._core.errors import DataError

__all__ = ["group_rows", "is_int", "positive_int", "short_repr"]


def is_int(x) -> bool:
    """Whether ``x`` is an integer (Python or NumPy), a bool not counting as one."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def short_repr(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters plus "..." (for error messages).

    >>> short_repr("x" * 100, limit=5)
    "'xxxx..."
    """
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def positive_int(value, field: str, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (not a bool) >= ``minimum``, else DataError."""
    if not is_int(value) or value < minimum:
        raise DataError(f"{field} must be an integer >= {minimum}, got {value!r}", field=field)
    return int(value)


def group_rows(labels) -> list[tuple[object, np.ndarray]]:
    """``(label, row indices)`` per distinct label, labels in sorted order (``repr`` order when
    they do not sort), each label a plain Python value.

    >>> [(k, v.tolist()) for k, v in group_rows(["b", "a", "b"])]
    [('a', [1]), ('b', [0, 2])]
    """
    lab = np.asarray(labels, object).reshape(-1)
    rows: dict = {}
    for i, x in enumerate(lab.tolist()):
        rows.setdefault(x, []).append(i)
    try:
        keys = sorted(rows)
    except TypeError:
        keys = sorted(rows, key=repr)
    return [(k.item() if hasattr(k, "item") else k, np.asarray(rows[k], np.int64))
            for k in keys]
