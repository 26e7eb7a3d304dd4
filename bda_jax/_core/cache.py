"""Append-only cell cache that lets a long study resume after being killed.

A study is a grid of independent *cells* (a condition, a seed, an arm ...). :class:`CellCache`
keeps the finished ones in a JSON Lines file::

    {"schema_version": 1, "kind": "bda_jax.cell_cache", "fingerprint": "<hex>"}   # header
    {"key": "<cell key>", "value": <any JSON value>}                             # one per cell

Each cell is appended with one ``write`` and flushed to disk (``fsync``) before the next cell
starts, so a process killed at any instant — SIGKILL included — leaves every earlier line intact
and at most a partial last line without its newline. Reopening drops that tail (it is truncated
away) and recomputes only that cell. The header's ``fingerprint`` names the study's inputs; a
cache written for other inputs is refused rather than silently mixed in.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable

from .errors import ArtifactError
from .io import atomic_write

__all__ = ["CellCache", "fingerprint"]

SCHEMA_VERSION = 1
_KIND = "bda_jax.cell_cache"


def fingerprint(*parts: Any) -> str:
    """SHA-256 of the JSON encoding of ``parts`` (keys sorted; non-JSON values by ``repr``)."""
    text = json.dumps(parts, sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CellCache:
    """Finished cells of one study, persisted as append-only JSON Lines at ``path``.

    Args:
      path: the cache file; created (with its header) if absent.
      fingerprint: a string identifying the study's inputs (see :func:`fingerprint`); opening
        an existing file with another fingerprint raises :class:`ArtifactError`.

    ``key in cache``, ``cache[key]``, ``len(cache)``; :meth:`put` appends a cell;
    :meth:`get_or_compute` returns the cached value or computes, stores and returns it. Values
    must be JSON-serializable without NaN or infinity (write ``None`` instead). A key written
    twice keeps its first value (the second :meth:`put` is refused).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "study.cache.jsonl")
    >>> cache = CellCache(path, fingerprint("my study", 0))
    >>> cache.get_or_compute("seed=0", lambda: {"accuracy": 0.75})
    {'accuracy': 0.75}
    >>> CellCache(path, fingerprint("my study", 0))["seed=0"]   # a later run reads it back
    {'accuracy': 0.75}
    """

    def __init__(self, path, fingerprint: str):
        self.path = os.fspath(path)
        self.fingerprint = str(fingerprint)
        self._cells: dict[str, Any] = {}
        if not os.path.exists(self.path):
            header = {"schema_version": SCHEMA_VERSION, "kind": _KIND,
                      "fingerprint": self.fingerprint}
            atomic_write(self.path, lambda h: h.write(json.dumps(header) + "\n"),
                         suffix=".jsonl")
        else:
            self._load()

    def _error(self, reason, line=None, field=None):
        return ArtifactError(reason, file=self.path, line=line, field=field)

    def _load(self) -> None:
        with open(self.path, "rb") as handle:
            data = handle.read()
        good = data.rfind(b"\n") + 1            # bytes up to the last complete line
        lines = data[:good].split(b"\n")[:-1]
        if not lines:
            raise self._error("not a cell cache: no complete header line", line=1)
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
            if set(record) != {"key", "value"} or not isinstance(record["key"], str):
                raise self._error('a cell line must be {"key": <string>, "value": ...}',
                                  line=number, field="key")
            self._cells.setdefault(record["key"], record["value"])
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
        if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
            raise self._error(f"schema_version {version!r} is not readable by this bda_jax "
                              f"(reads 1..{SCHEMA_VERSION})", line=1, field="schema_version")
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

    def put(self, key: str, value: Any) -> None:
        """Append one finished cell and flush it to disk."""
        if not isinstance(key, str):
            raise TypeError(f"cache keys are strings, got {type(key).__name__}")
        if key in self._cells:
            raise KeyError(f"cell {key!r} is already cached")
        line = json.dumps({"key": key, "value": value}, allow_nan=False) + "\n"
        with open(self.path, "ab") as handle:
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        self._cells[key] = json.loads(line)["value"]     # what a reload would return

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        """The cached value of ``key``, or ``compute()`` stored under ``key`` and returned."""
        if key not in self._cells:
            self.put(key, compute())
        return self._cells[key]
