"""Strict JSON values for results files and ``--json`` output."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["strict_json"]


def strict_json(x: Any) -> Any:
    """A strict-JSON copy of ``x``: dicts (keys as strings), lists and tuples (as lists), numpy
    and JAX scalars and arrays as Python values, NaN and infinities as ``None``, a named record
    with ``_asdict`` as its dict, anything else by ``str`` (e.g. a path).

    >>> strict_json({"a": np.float32(0.5), 1: (np.int64(2), float("nan"))})
    {'a': 0.5, '1': [2, None]}
    """
    if isinstance(x, dict):
        return {str(k): strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    if isinstance(x, np.ndarray):
        return strict_json(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = float(x)
        return v if math.isfinite(v) else None
    if x is None or isinstance(x, str):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):        # a jax array
        return strict_json(np.asarray(x))
    if hasattr(x, "_asdict"):
        return strict_json(x._asdict())
    return str(x)
