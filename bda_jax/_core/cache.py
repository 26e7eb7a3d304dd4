"""Append-only cell cache that lets a long study resume after being killed.

A study is a grid of independent *cells* (a condition, a seed, an arm ...). :class:`CellCache`
keeps the finished ones in a JSON Lines file::

    {"schema_version": 2, "kind": "bda_jax.cell_cache", "fingerprint": "<hex>"}   # header
    {"key": "<cell key>", "value": <any JSON value>, "sha256": "<hex>"}          # one per cell

Guarantees:

* **Resumable.** Each cell is appended with one ``write`` and flushed to disk (``fsync``) before
  the next cell starts, so a process killed at any instant — SIGKILL included — leaves every
  earlier line intact and at most a partial last line without its newline. Reopening drops that
  tail (it is truncated away) and recomputes only that cell.
* **One writer.** Opening takes an exclusive lock on ``<path>.lock`` (``fcntl.flock``; ``msvcrt``
  on Windows) and holds it until :meth:`CellCache.close`, the end of a ``with`` block, garbage
  collection of the cache, or the death of the process (the kernel drops the lock, so a
  ``kill -9`` leaves no stale lock; the empty ``.lock`` file itself stays). While another
  process holds it, opening raises :class:`~bda_jax.DataError` (field ``"lock"``) and touches
  nothing. Within one process the most recently opened :class:`CellCache` of a file is its
  writer: an older one is closed (its :meth:`~CellCache.put` raises), so a cache left behind by
  an interrupted notebook cell never blocks a rerun.
* **Never mixed.** The header's ``fingerprint`` names the study's inputs; a cache written for
  other inputs is refused rather than silently mixed in. Every cell line carries the SHA-256 of
  ``[fingerprint, key, value]`` (canonical JSON): a cell whose value or key was edited, or that
  was copied in from a cache of other inputs, fails its checksum and is **refused**
  (:class:`~bda_jax.ArtifactError` naming the line, field ``"sha256"``), never trusted; so is a
  key that appears twice (field ``"key"``). A caller that owns its file (the demo) passes
  ``on_mismatch="reset"`` instead: any such file is started afresh and every cell recomputed.
  The checksum guards against accidents (edits, splices, disk damage), not against someone who
  recomputes it. Schema-1 caches (no checksums) are refused likewise.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import weakref
from typing import Any, Callable, Union

import numpy as np

from .errors import ArtifactError, DataError
from .io import atomic_write

__all__ = ["CellCache", "fingerprint"]

SCHEMA_VERSION = 2
_KIND = "bda_jax.cell_cache"


def _plain(value: Any) -> Any:
    """A JSON stand-in for a value :mod:`json` cannot encode: an array by dtype, shape and the
    SHA-256 of its bytes (``repr`` would elide the middle of a large one), a NumPy scalar by its
    value, a path by its text, a set by its sorted members, anything else by ``repr``."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(json.dumps(v, sort_keys=True, default=_plain) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        a = np.ascontiguousarray(np.asarray(value))
        if a.dtype.hasobject:
            return {"ndarray": a.dtype.str, "shape": list(a.shape),
                    "items": json.loads(json.dumps(a.tolist(), default=_plain))}
        return {"ndarray": a.dtype.str, "shape": list(a.shape),
                "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
    return repr(value)


def fingerprint(*parts: Any) -> str:
    """SHA-256 of the JSON encoding of ``parts`` (keys sorted).

    Values JSON cannot encode are stood in for faithfully where possible: arrays (NumPy, JAX)
    by dtype, shape and a hash of every byte, NumPy scalars by value, paths by text, sets
    sorted; other objects by ``repr`` (an object whose ``repr`` varies between runs then only
    ever misses the cache, never reuses a wrong cell). Equal inputs give equal fingerprints; any
    changed element of an array changes it.
    """
    text = json.dumps(parts, sort_keys=True, default=_plain, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checksum(fp: str, key: str, value: Any) -> str:
    """SHA-256 of the canonical JSON of ``[fingerprint, key, value]`` (the cell line's
    ``sha256``): keys sorted, separators ``","`` and ``":"``, ASCII escapes."""
    text = json.dumps([fp, key, value], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the lock

try:                                            # POSIX
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
except ImportError:                             # pragma: no cover - Windows
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True


class _FileLock:
    """An exclusive advisory lock on one file, held while this object lives (closing the file
    descriptor releases it; so does the death of the process)."""

    def __init__(self, fd: int):
        self.fd: int | None = fd

    @classmethod
    def acquire(cls, path: str, owner: str) -> "_FileLock":
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            raise DataError(f"cannot create the lock file {path} ({err.strerror or err})",
                            file=owner, field="path") from None
        try:
            free = _try_lock(fd)
        except OSError as err:                  # e.g. a file system without locks
            os.close(fd)
            raise DataError(f"cannot lock {path} ({err.strerror or err}); put the cache on a "
                            "local file system", file=owner, field="path") from None
        if not free:
            pid = None
            try:
                text = os.read(fd, 32).decode("ascii", "replace").strip()
                pid = int(text) if text.isdigit() else None
            except OSError:
                pass
            os.close(fd)
            who = "another process" if pid is None else f"another process ({pid})"
            err = DataError(f"{who} is writing this cell cache (it holds {path}); wait for it "
                            "to finish or use another path", file=owner, field="lock")
            err.holder, err.lock_file = pid, path      # for callers that word it their way
            raise err
        try:                                    # who holds it, for the message above
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        except OSError:
            pass
        return cls(fd)

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)

    def __del__(self):
        try:
            self.release()
        except Exception:                       # interpreter shutdown
            pass


# lock file (real path) -> the CellCache of this process that holds it
_OWNERS: dict[str, "weakref.ref[CellCache]"] = {}
_OWNERS_LOCK = threading.Lock()


class CellCache:
    """Finished cells of one study, persisted as append-only JSON Lines at ``path``.

    Args:
      path: the cache file; created (with its header) if absent.
      fingerprint: a string identifying the study's inputs (see :func:`fingerprint`), or a
        callable returning it, called once the lock is held (so a refused second writer costs
        nothing). Opening an existing file with another fingerprint raises
        :class:`ArtifactError`.
      fresh: discard the cells of an existing file and start it afresh (under the lock).
      on_mismatch: ``"raise"`` (default): a file of other inputs, of another schema, damaged,
        with a cell that fails its checksum or a duplicate key raises :class:`ArtifactError`
        naming the line and field; ``"reset"``: such a file is started afresh instead, and
        :attr:`reset` says why.

    Raises :class:`~bda_jax.DataError` (field ``"lock"``) while another process holds the file
    (see the module docstring: one writer per file, released at :meth:`close` or process death),
    and (field ``"path"``) when the lock file cannot be created or locked.

    ``key in cache``, ``cache[key]``, ``len(cache)``; :meth:`put` appends a cell;
    :meth:`get_or_compute` returns the cached value or computes, stores and returns it. Values
    must be JSON-serializable without NaN or infinity (write ``None`` instead). A key written
    twice keeps its first value (the second :meth:`put` is refused). Attribute :attr:`reset`:
    ``None`` (created or resumed), ``"fresh"`` (``fresh=True`` discarded cells) or
    ``"replaced (<reason>)"`` (``on_mismatch="reset"`` replaced an unusable file).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "study.cache.jsonl")
    >>> cache = CellCache(path, fingerprint("my study", 0))
    >>> cache.get_or_compute("seed=0", lambda: {"accuracy": 0.75})
    {'accuracy': 0.75}
    >>> CellCache(path, fingerprint("my study", 0))["seed=0"]   # a later run reads it back
    {'accuracy': 0.75}
    """

    def __init__(self, path, fingerprint: Union[str, Callable[[], str]], *, fresh: bool = False,
                 on_mismatch: str = "raise"):
        if on_mismatch not in ("raise", "reset"):
            raise DataError(f"on_mismatch must be 'raise' or 'reset', got {on_mismatch!r}",
                            field="on_mismatch")
        self.path = os.fspath(path)
        self.lock_path = self.path + ".lock"
        self.reset: str | None = None
        self._cells: dict[str, Any] = {}
        self._lock: _FileLock | None = None
        self._lock_key = os.path.realpath(self.lock_path)
        previous = self._take_lock()
        try:
            self.fingerprint = str(fingerprint() if callable(fingerprint) else fingerprint)
            self._open(bool(fresh), on_mismatch)
        except BaseException:
            self._give_back(previous)
            raise

    # ----------------------------------------------------------------------- locking

    def _take_lock(self):
        """Hold the file's lock: taken over from this process' live holder, else acquired."""
        with _OWNERS_LOCK:
            ref = _OWNERS.get(self._lock_key)
            prev = ref() if ref is not None else None
            if prev is not None and prev._lock is not None:
                self._lock, prev._lock = prev._lock, None
            else:
                prev = None
                self._lock = _FileLock.acquire(self.lock_path, self.path)
            _OWNERS[self._lock_key] = weakref.ref(self)
        return prev

    def _give_back(self, previous) -> None:
        """After a failed open: the lock returns to the cache it was taken from, or is freed."""
        with _OWNERS_LOCK:
            lock, self._lock = self._lock, None
            if previous is not None and lock is not None:
                previous._lock = lock
                _OWNERS[self._lock_key] = weakref.ref(previous)
                return
            ref = _OWNERS.get(self._lock_key)
            if ref is not None and ref() is self:
                del _OWNERS[self._lock_key]
        if lock is not None:
            lock.release()

    def close(self) -> None:
        """Release the lock; the cells read so far stay readable, :meth:`put` is refused."""
        self._give_back(None)

    @property
    def closed(self) -> bool:
        """Whether this cache no longer holds its file (closed, or superseded by a later
        :class:`CellCache` of the same file in this process)."""
        return self._lock is None

    def __enter__(self) -> "CellCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------------- reading

    def _error(self, reason, line=None, field=None):
        return ArtifactError(reason, file=self.path, line=line, field=field)

    def _open(self, fresh: bool, on_mismatch: str) -> None:
        if os.path.exists(self.path):
            if fresh:
                self.reset = "fresh"
            else:
                try:
                    self._load()
                    return
                except ArtifactError as err:
                    if on_mismatch != "reset":
                        raise
                    self.reset = f"replaced ({err.reason})"
                    self._cells = {}
        header = {"schema_version": SCHEMA_VERSION, "kind": _KIND,
                  "fingerprint": self.fingerprint}
        atomic_write(self.path, lambda h: h.write(json.dumps(header) + "\n"), suffix=".jsonl")

    def _load(self) -> None:
        with open(self.path, "rb") as handle:
            data = handle.read()
        good = data.rfind(b"\n") + 1            # bytes up to the last complete line
        lines = data[:good].split(b"\n")[:-1]
        if not lines:
            raise self._error("not a cell cache: no complete header line", line=1)
        first_line: dict[str, int] = {}
        for number, raw in enumerate(lines, start=1):
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise self._error(f"not valid JSON ({err})", line=number) from None
            if not isinstance(record, dict):
                raise self._error("a cache line must be a JSON object", line=number)
            if number == 1:
                self._check_header(record)
                continue
            if set(record) != {"key", "value", "sha256"} or not isinstance(record["key"], str):
                raise self._error('a cell line must be {"key": <string>, "value": ..., '
                                  '"sha256": <hex>}', line=number, field="key")
            key = record["key"]
            if key in first_line:
                raise self._error(f"cell {key!r} appears twice (lines {first_line[key]} and "
                                  f"{number}): written by two processes or edited; delete the "
                                  "file to recompute", line=number, field="key")
            try:
                expected = _checksum(self.fingerprint, key, record["value"])
            except ValueError:                  # NaN / infinity: never written by put
                expected = None
            if record["sha256"] != expected:
                raise self._error(f"cell {key!r} fails its checksum: the line was edited, "
                                  "damaged or copied from a cache of other inputs; delete the "
                                  "file to recompute", line=number, field="sha256")
            first_line[key] = number
            self._cells[key] = record["value"]
        if good < len(data):                    # a write cut short by a kill: drop it
            with open(self.path, "r+b") as handle:
                handle.truncate(good)
                handle.flush()
                os.fsync(handle.fileno())

    def _check_header(self, header: dict) -> None:
        if header.get("kind") != _KIND:
            raise self._error(f"not a cell cache (kind {header.get('kind')!r})", line=1,
                              field="kind")
        version = header.get("schema_version")
        if version == 1:
            raise self._error("schema_version 1 (cells without checksums) is not trusted by "
                              "this bda_jax; delete the file to recompute", line=1,
                              field="schema_version")
        if not isinstance(version, int) or version != SCHEMA_VERSION:
            raise self._error(f"schema_version {version!r} is not readable by this bda_jax "
                              f"(reads {SCHEMA_VERSION})", line=1, field="schema_version")
        if header.get("fingerprint") != self.fingerprint:
            raise self._error("the cache belongs to another study (its inputs differ); delete "
                              "it or pass another path", line=1, field="fingerprint")

    def __contains__(self, key: str) -> bool:
        return key in self._cells

    def __getitem__(self, key: str) -> Any:
        return self._cells[key]

    def __len__(self) -> int:
        return len(self._cells)

    def keys(self):
        return self._cells.keys()

    # ----------------------------------------------------------------------- writing

    def put(self, key: str, value: Any) -> None:
        """Append one finished cell (with its checksum) and flush it to disk."""
        if not isinstance(key, str):
            raise TypeError(f"cache keys are strings, got {type(key).__name__}")
        if key in self._cells:
            raise KeyError(f"cell {key!r} is already cached")
        if self._lock is None:
            raise ArtifactError("this CellCache is closed (or a later CellCache of the same "
                                "file in this process took it over); open the file again",
                                file=self.path)
        value = json.loads(json.dumps(value, allow_nan=False))   # what a reload will read
        line = json.dumps({"key": key, "value": value,
                           "sha256": _checksum(self.fingerprint, key, value)},
                          allow_nan=False) + "\n"
        with open(self.path, "ab") as handle:
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        self._cells[key] = value

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        """The cached value of ``key``, or ``compute()`` stored under ``key`` and returned."""
        if key not in self._cells:
            self.put(key, compute())
        return self._cells[key]
