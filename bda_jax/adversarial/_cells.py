"""Where the finished cells of a study are kept, so that an interrupted study resumes.

A *cell store* is any object with ``get_or_compute(key, compute)`` returning the stored value of
``key`` or else ``compute()`` stored under ``key`` — a :class:`~bda_jax.report.CellCache` (the
append-only JSON Lines file, flushed after each cell), or a view that a caller such as the demo
puts in front of its own cache. The studies of this package take ``cache``: ``None`` (nothing
kept), a path (a ``CellCache`` there, fingerprinted by the study's inputs and the bda_jax version)
or a cell store. A path is held by one process at a time: while another process writes it, opening
raises :class:`~bda_jax.DataError` (field ``"lock"``); a cell that was edited, duplicated or
copied from another study's cache is refused (:class:`~bda_jax.ArtifactError`), never reused.
A study that runs another study's cells in its own store gives each its own key space
(:func:`scoped`); :func:`fingerprint_traces` is the trace-set part of a study's fingerprint.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable

from .._core.cache import CellCache
from .._core.cache import fingerprint as _fingerprint
from .._core.version import __version__

__all__ = ["open_cells", "cell", "scoped", "fingerprint_traces"]


def open_cells(cache, fingerprint: Callable[[], str]):
    """``None`` -> ``None``; a path -> a :class:`~bda_jax.report.CellCache` there whose
    fingerprint combines ``fingerprint()`` with the bda_jax version (a cache of other inputs or
    of another version is refused with :class:`~bda_jax.ArtifactError`; one another process is
    writing with :class:`~bda_jax.DataError`); a cell store -> itself. ``fingerprint`` is called
    only for a path, once that path's lock is held."""
    if cache is None or hasattr(cache, "get_or_compute"):
        return cache
    return CellCache(os.fspath(cache),
                     lambda: _fingerprint("bda_jax.cells", __version__, fingerprint()))


def cell(store, key: str, compute: Callable[[], Any]) -> Any:
    """The value of cell ``key``: read from ``store``, or computed (and stored). Without a store
    the value is passed through JSON as a store would keep it (tuples become lists), so a study
    returns the same values whether it ran with a cache or not."""
    if store is None:
        return json.loads(json.dumps(compute(), allow_nan=False))
    return store.get_or_compute(key, compute)


def run_cells(store, steps, report, label: str) -> dict:
    """``{name: cell(store, name, compute)}`` for ``steps`` [(name, compute)] in order, with
    ``report(f"{label}: {name}", done, total)`` before each and ``report(label, total, total)``
    at the end (a study's progress)."""
    values = {}
    for done, (name, compute) in enumerate(steps):
        report(f"{label}: {name}", done, len(steps))
        values[name] = cell(store, name, compute)
    report(label, len(steps), len(steps))
    return values


def scoped(store, prefix: str):
    """A view of cell store ``store`` whose keys are ``f"{prefix}/{key}"`` (``None`` stays
    ``None``), so that one study can run another study's cells in the same store without two
    cells sharing a key."""
    if store is None:
        return None
    return _Scoped(store, str(prefix))


class _Scoped:
    def __init__(self, store, prefix: str):
        self.store, self.prefix = store, prefix

    def get_or_compute(self, key, compute):
        return self.store.get_or_compute(f"{self.prefix}/{key}", compute)


def fingerprint_traces(traces) -> str:
    """SHA-256 of a trace set as a study reads it: each trace's task id, candidates, gold,
    cluster and moves (``Move.to_json()``), in order. Equal trace sets give equal fingerprints;
    a changed move, gold or order changes it."""
    h = hashlib.sha256()
    for t in traces:
        h.update(json.dumps([t.task_id, t.gold, t.cluster,
                             None if t.candidates is None else list(t.candidates),
                             [m.to_json() for m in t.moves]], sort_keys=True,
                            default=str).encode())
        h.update(b"\n")
    return h.hexdigest()
