"""Small pieces shared by the modules of the routing audit ([Audit]; docs/audit.md): argument
checks (:func:`positive_int`, :func:`is_int`, from ``bda_jax._core.checks``), error-message quoting (:func:`short_repr`) and
grouping by label (:func:`group_rows`).
"""
from __future__ import annotations

import numpy as np

from .._core.checks import is_int, positive_int

__all__ = ["group_rows", "is_int", "positive_int", "short_repr"]


def short_repr(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters plus "..." (for error messages).

    >>> short_repr("x" * 100, limit=5)
    "'xxxx..."
    """
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


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
