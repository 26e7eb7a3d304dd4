"""Atomic file writes: a failure leaves neither a half-written target nor a temporary file."""
from __future__ import annotations

import os
import tempfile
from typing import Callable, TextIO

__all__ = ["atomic_write"]


def atomic_write(path, write: Callable[[TextIO], None], suffix: str = ".tmp") -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then rename it into place."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".bda_tmp_", suffix=suffix,
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
