"""File helpers: atomic writes (a failure leaves neither a half-written target nor a temporary
file) and the JSON readers of the package, whose errors name the file and line.

Every JSON document read here refuses a key repeated within one object (Python's decoder would
silently keep the last value): :func:`unique_keys` is the ``object_pairs_hook`` that does it, and
:func:`read_json_lines` / :func:`read_json_file` turn it into the caller's error class naming the
key (``field``) and, where asked, the record (``ids``)."""
from __future__ import annotations

import contextlib
import gc
import json
import os
from typing import Any, Callable, Iterator, Mapping, TextIO

__all__ = ["DuplicateKeyError", "TRACE_RECORD_IDS", "UTF8_BOM", "atomic_write", "canonical_json", "decode_json_line",
           "gc_paused", "loads_unique", "numbered_lines", "read_json_file", "read_json_lines", "unique_keys"]


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while a reader or the tally builds many small, acyclic
    containers (decoded records, per-row lists, lazy traces): with the collector on, its repeated
    full passes over the growing heap cost more than the work itself (about 2.5x when reading
    crowdscale_fact's 200k rows). The previous state is restored, also on error. As a decorator
    (``@gc_paused()``) it pauses the collector for each call."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class DuplicateKeyError(ValueError):
    """A JSON object repeats a key. ``key``: the first repeated key; ``obj``: the object as a
    dict (the last value of each key, as Python's decoder would have kept it)."""

    def __init__(self, key: str, obj: dict):
        super().__init__(f"duplicate key {key!r} in a JSON object")
        self.key, self.obj = key, obj


def unique_keys(pairs: list) -> dict:
    """``object_pairs_hook`` for :func:`json.loads` that raises :class:`DuplicateKeyError` on a
    key repeated within one object (at any depth).

    >>> json.loads('{"a": 1, "b": {"c": 2}}', object_pairs_hook=unique_keys)
    {'a': 1, 'b': {'c': 2}}
    >>> json.loads('{"a": 1, "a": 2}', object_pairs_hook=unique_keys)
    Traceback (most recent call last):
    ...
    bda_jax._core.io.DuplicateKeyError: duplicate key 'a' in a JSON object
    """
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key, out)
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=unique_keys)
#: The record keys that name the task and the move in a duplicate-key error of a trace file.
TRACE_RECORD_IDS = {"task_id": "task_id", "move_id": "id"}


def loads_unique(text: str):
    """:func:`json.loads` that refuses a repeated key (:class:`DuplicateKeyError`, a
    ``ValueError``); otherwise exactly ``json.loads(text)``."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("a UTF-8 byte-order mark (BOM) here: only the start of a "
                                   "file may carry one", text, 0)
    return _DECODER.decode(text)


def _duplicate_location(text: str, err: DuplicateKeyError, ids) -> dict:
    """Location keywords of a duplicate-key error: ``ids`` maps an error attribute
    (``task_id``, ``move_id``) to the record key holding it. ``task_id`` is read from the
    top-level object, ``move_id`` from the object that repeats the key when that is a nested
    one; values that are not strings or integers are left out."""
    if not ids:
        return {}
    found = []

    def record(pairs):
        out = dict(pairs)
        if len(out) != len(pairs) and not found:
            found.append(out)
        return out

    try:
        doc = json.loads(text, object_pairs_hook=record)
    except (ValueError, RecursionError):
        return {}
    where = {}
    for attr, key in ids.items():
        holder = doc if attr == "task_id" else (found[0] if found and found[0] is not doc
                                                else None)
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            where[attr] = value
    return where


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
    import tempfile     # here: the parse workers import this module and never write

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


def numbered_lines(handle) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) over a binary file; \\n, \\r\\n and a bare \\r all end a line."""
    lineno = 0
    for raw in handle:
        body = raw[:-2] if raw.endswith(b"\r\n") else raw.rstrip(b"\n")
        if b"\r" not in body:
            lineno += 1
            yield lineno, body
            continue
        for piece in body.split(b"\r"):
            lineno += 1
            yield lineno, piece


#: The UTF-8 byte-order mark: accepted at the start of a file (line 1), refused anywhere else.
UTF8_BOM = b"\xef\xbb\xbf"


def decode_json_line(data: bytes, path: str, lineno: int, error: type,
                     ids: Mapping[str, str] | None = TRACE_RECORD_IDS) -> tuple[bool, Any]:
    """Decode one line of a JSON Lines file as :func:`read_json_lines` does: ``(False, None)``
    for a blank line, else ``(True, value)``; bytes that are not UTF-8, text that is not JSON
    and an object that repeats a key raise ``error`` naming ``path`` and ``lineno``.

    A UTF-8 byte-order mark at the start of line 1 (what some Windows editors write) is
    skipped: JSON Lines asks for none, but the mark carries no content, so refusing it would
    only make the user re-save the file. A mark at the start of any later line is refused."""
    if lineno == 1 and data.startswith(UTF8_BOM):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"not valid UTF-8 (byte {err.start + 1})", file=path, line=lineno) from None
    if not text.strip():
        return False, None
    try:
        return True, loads_unique(text)
    except DuplicateKeyError as err:
        raise error(f"duplicate key {err.key!r} in one JSON object (a repeated key is "
                    "refused, not overwritten)", file=path, line=lineno, field=err.key,
                    **_duplicate_location(text, err, ids)) from None
    except json.JSONDecodeError as err:
        raise error(f"invalid JSON: {err.msg} (column {err.colno})", file=path,
                    line=lineno) from None
    except RecursionError:
        raise error("invalid JSON: nested too deeply", file=path, line=lineno) from None
    except ValueError as err:        # e.g. integers beyond Python's digit limit
        raise error(f"invalid JSON: {err}", file=path, line=lineno) from None


def read_json_lines(path, error: type, what: str = "file",
                    keep_line: Callable[[int], bool] | None = None,
                    ids: Mapping[str, str] | None = TRACE_RECORD_IDS
                    ) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each non-blank line of a JSON Lines file.

    Lines end at ``\\n``, ``\\r\\n`` or a bare ``\\r``. A file that cannot be opened, bytes that
    are not UTF-8, text that is not JSON and an object that repeats a key raise ``error`` (a
    :class:`~bda_jax.BdaError` subclass) naming the file and the 1-based line (and, for a
    repeated key, the key as ``field``). ``keep_line(lineno)`` False skips a line undecoded
    (e.g. the lines of other processes' shards). ``ids`` says which record keys name the task
    and the nested record in a duplicate-key error (default :data:`TRACE_RECORD_IDS`, the trace
    format's ``task_id`` and move ``id``; ``None``: name neither).
    """
    path = os.fspath(path)
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise error(f"cannot open {what}: {err.strerror}", file=path) from None
    with handle:
        for lineno, data in numbered_lines(handle):
            if keep_line is not None and not keep_line(lineno):
                continue
            found, value = decode_json_line(data, path, lineno, error, ids)
            if found:
                yield lineno, value


def read_json_file(path, error: type, what: str = "file") -> Any:
    """Decode one whole JSON document (a leading UTF-8 byte-order mark is skipped). A file that
    cannot be opened, bytes that are not UTF-8, text that is not JSON and an object that repeats
    a key raise ``error`` naming the file (and the line of a JSON error, the key of a repeated
    one as ``field``); a document cut short says "truncated"."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise error(f"cannot open {what}: {err.strerror}", file=path) from None
    if raw.startswith(UTF8_BOM):         # a leading byte-order mark is skipped (decode_json_line)
        raw = raw[3:]
    try:
        return loads_unique(raw.decode("utf-8"))
    except DuplicateKeyError as err:
        raise error(f"duplicate key {err.key!r} in one JSON object (a repeated key is refused, "
                    "not overwritten)", file=path, field=err.key) from None
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
