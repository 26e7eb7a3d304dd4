"""File helpers: atomic writes (a failure leaves neither a half-written target nor a temporary
file) and one JSON Lines reader whose errors name the file and line."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Iterator, TextIO

__all__ = ["atomic_write", "canonical_json", "read_json_lines"]


def canonical_json(obj) -> str:
    """The one canonical JSON text that hashes and keys are taken of: sorted keys, no spaces,
    ASCII only (non-ASCII escaped), NaN and infinities refused. Equal values, equal text.

    >>> print(canonical_json({"b": [1, 2.5], "a": "é"}))
    {"a":"\\u00e9","b":[1,2.5]}
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False,
                      ensure_ascii=True)


def atomic_write(path, write: Callable[[TextIO], None], suffix: str = ".tmp",
                 binary: bool = False) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then rename it into place
    (a text handle in UTF-8, or a binary one with ``binary=True``).

    The file gets the usual ``0666 & ~umask`` permissions (``mkstemp`` alone would leave 0600)."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".bda_tmp_", suffix=suffix,
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as handle:
            write(handle)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _numbered_lines(handle):
    """(line number, bytes) over a binary file; \\n, \\r\\n and a bare \\r all end a line."""
    lineno = 0
    for raw in handle:
        body = raw[:-2] if raw.endswith(b"\r\n") else raw.rstrip(b"\n")
        for piece in body.split(b"\r"):
            lineno += 1
            yield lineno, piece


def read_json_lines(path, error: type, what: str = "file",
                    keep_line: Callable[[int], bool] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each non-blank line of a JSON Lines file.

    Lines end at ``\\n``, ``\\r\\n`` or a bare ``\\r``. A file that cannot be opened, bytes that
    are not UTF-8 and text that is not JSON raise ``error`` (a :class:`~bda_jax.BdaError`
    subclass) naming the file and the 1-based line. ``keep_line(lineno)`` False skips a line
    undecoded (e.g. the lines of other processes' shards).
    """
    path = os.fspath(path)
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise error(f"cannot open {what}: {err.strerror}", file=path) from None
    with handle:
        for lineno, data in _numbered_lines(handle):
            if keep_line is not None and not keep_line(lineno):
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as err:
                raise error(f"not valid UTF-8 (byte {err.start + 1})", file=path,
                            line=lineno) from None
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as err:
                raise error(f"invalid JSON: {err.msg} (column {err.colno})", file=path,
                            line=lineno) from None
            except RecursionError:
                raise error("invalid JSON: nested too deeply", file=path, line=lineno) from None
            except ValueError as err:        # e.g. integers beyond Python's digit limit
                raise error(f"invalid JSON: {err}", file=path, line=lineno) from None
            yield lineno, value


def read_json_file(path, error: type, what: str = "file") -> Any:
    """Decode one whole JSON document. A file that cannot be opened, bytes that are not UTF-8 and
    text that is not JSON raise ``error`` naming the file (and the line of a JSON error); a
    document cut short says "truncated"."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise error(f"cannot open {what}: {err.strerror}", file=path) from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise error(f"not valid UTF-8 (byte {err.start + 1})", file=path) from None
    except json.JSONDecodeError as err:
        kind = "invalid JSON" if raw.rstrip().endswith((b"}", b"]")) else "truncated or not JSON"
        raise error(f"{kind}: {err.msg} (column {err.colno})", file=path,
                    line=err.lineno) from None
    except RecursionError:
        raise error("invalid JSON: nested too deeply", file=path) from None
    except ValueError as err:        # e.g. integers beyond Python's digit limit
        raise error(f"invalid JSON: {err}", file=path) from None
