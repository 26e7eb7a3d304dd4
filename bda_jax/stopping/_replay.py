"""Replay of the released DASE history logs ([DASE] §3-§5; docs/stopping.md) under the
stopping rules, round for round, and offline re-simulation of other arena sizes W / streaks k.

A file loads as one :class:`HistoryBatch` (:func:`load_history_batch`) and runs as one batched,
compiled call of :func:`bda_jax.stopping.spatial_rule` / :func:`~bda_jax.stopping.heuristic_rule`;
each problem's outcome is a :class:`ReplayRecord`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import jax
import numpy as np

from .._core.errors import DataError
from ..datasets import dase_file_settings, read_dase_history
from ._encoding import EncodedBatch, encode_answers
from ._rules import COMMITS, DISPATCHED, RULES, StopResult, heuristic_rule, spatial_rule

__all__ = ["HistoryBatch", "ReplayRecord", "load_history_batch", "replay_history", "resimulate"]


class HistoryBatch(NamedTuple):
    """A DASE history file as arrays: ``batch`` (:class:`EncodedBatch`), ``idx`` [B] problem
    ids, ``benchmark``, ``settings`` (:func:`bda_jax.datasets.dase_file_settings`), ``logged``
    the records' JSON objects."""

    batch: EncodedBatch
    idx: tuple
    benchmark: str
    settings: dict
    logged: tuple


def load_history_batch(path, *, normalize: bool = False, n: int | None = None) -> HistoryBatch:
    """Read a ``safe_DASE_*_History_*.jsonl`` / ``*_Forensics_*`` file into one batch.

    Each line's ``history[t]["norms"]`` (n answers; ``n=None``: the first round's count, five
    in the released logs) is round t+1; answers are encoded by
    :func:`encode_answers`. The file is read by :func:`bda_jax.datasets.read_dase_history`, so
    replay is exactly as strict as the importer: a repeated ``idx``, ``step`` fields that do
    not count 1, 2, ... (a restarted history), rounds of the wrong width, non-string answers and
    a file without records all raise :class:`DataError` naming file, line, idx and field.
    """
    path = Path(path)
    records = list(read_dase_history(path, n=n))
    bench = records[0].benchmark
    batch = encode_answers([r.rounds for r in records], n=len(records[0].rounds[0]),
                           normalize=normalize, benchmark=bench)
    return HistoryBatch(batch, tuple(r.idx for r in records), bench, dase_file_settings(path),
                        tuple(r.record for r in records))


@dataclass(frozen=True)
class ReplayRecord:
    """One problem's replay: ``commit`` kind, ``answer`` (None: nobody answered), ``steps``,
    ``final_x`` (None for the heuristic), per-round ``g``, ``x`` (spatial position) or
    ``streak`` (heuristic) and ``winner`` (round plurality); ``flagged`` = not dispatched
    (anything but right_wall / consensus); ``truncated`` = the record ran out of recorded rounds
    before a commit or L (a re-simulation that would need rounds nobody ran)."""

    idx: int
    commit: str
    answer: str | None
    steps: int
    final_x: int | None
    g: tuple
    x: tuple | None
    streak: tuple | None
    winner: tuple
    flagged: bool
    truncated: bool


def _check_empty_g(empty_g) -> None:
    """``empty_g`` must be a real number in [0, 1] (NaN is not)."""
    if isinstance(empty_g, bool) or not isinstance(empty_g, (int, float, np.integer,
                                                             np.floating)) \
            or not 0.0 <= float(empty_g) <= 1.0:
        raise DataError(f"empty_g must be a number in [0, 1], got {empty_g!r}", field="empty_g")


def _records(hb: HistoryBatch, res: StopResult, rule: str, L: int) -> list[ReplayRecord]:
    res = jax.tree.map(np.asarray, res)
    lengths = np.asarray(hb.batch.mask).sum(1)
    out = []
    for b, idx in enumerate(hb.idx):
        vocab = hb.batch.vocab[b]
        s = int(res.steps[b])
        kind = COMMITS[int(res.commit[b])]
        a = int(res.answer[b])
        traj = tuple(int(v) for v in res.x[b, :s])
        out.append(ReplayRecord(
            idx=idx, commit=kind, answer=vocab[a] if a >= 0 else None, steps=s,
            final_x=int(res.final_x[b]) if rule == "spatial" else None,
            g=tuple(float(v) for v in res.g[b, :s]),
            x=traj if rule == "spatial" else None, streak=traj if rule == "heuristic" else None,
            winner=tuple(vocab[w] if w >= 0 else None for w in res.winner[b, :s]),
            flagged=kind not in DISPATCHED,
            truncated=kind == "fallback" and s < L and s == int(lengths[b])))
    return out


def _run_history(hb: HistoryBatch, rule, grid, L, empty_g) -> StopResult:
    """A file's batch under ``rule`` for every value of ``grid``: [G, B, ...] fields."""
    ids, mask = hb.batch.ids, hb.batch.mask
    if rule == "spatial":
        return spatial_rule(ids, mask, list(grid), L=L, empty_g=empty_g)
    return heuristic_rule(ids, mask, list(grid), L=L)


def _resolve(hb: HistoryBatch, rule, W, k, L):
    rule = rule or hb.settings["rule"]
    if rule not in RULES:
        raise DataError(f"rule must be one of {RULES}, got {rule!r}", field="rule")
    param = W if rule == "spatial" else k
    param = param if param is not None else hb.settings["W" if rule == "spatial" else "k"]
    if param is None:
        raise DataError(f"the file name does not state {'W' if rule == 'spatial' else 'k'}; "
                        "pass it", field="W" if rule == "spatial" else "k")
    if L is None:
        L = hb.settings["L"] or int(np.asarray(hb.batch.mask).sum(1).max())
    return rule, param, int(L)


def replay_history(path, rule: str | None = None, W=None, k=None, empty_g: float = 0.0,
                   L: int | None = None, *, normalize: bool = False) -> list[ReplayRecord]:
    """Replay a DASE history file under a stopping rule: one :class:`ReplayRecord` per problem.

    ``rule``, ``W`` / ``k`` and ``L`` default to what the file name says (``Bellman`` ->
    spatial, ``DDM`` -> heuristic; ``_4_``, ``_8_``, ``k4``, ``8k``; ``L15`` / ``15L``; without
    an L in the name, the longest recorded history). ``empty_g=0.5`` and ``normalize=False``
    reproduce the released logs (docs/stopping.md); ``empty_g=0.0`` is the paper's correction. The
    whole file runs as one batched, compiled call. ``empty_g`` outside [0, 1] (or NaN) raises
    :class:`~bda_jax.DataError` before the file is read; the file is read as
    :func:`load_history_batch` reads it.
    """
    _check_empty_g(empty_g)
    hb = load_history_batch(path, normalize=normalize)
    rule, param, L = _resolve(hb, rule, W, k, L)
    res = _run_history(hb, rule, [int(param)], L, empty_g)
    return _records(hb, jax.tree.map(lambda a: a[0], res), rule, L)


def resimulate(path, grid: Sequence[int], rule: str | None = None, empty_g: float = 0.0,
               L: int | None = None, *, normalize: bool = False) -> dict[int, list[ReplayRecord]]:
    """Offline re-simulation of other arena sizes W (or streaks k) on a recorded history.

    Valid only for variants that stop no later than the recorded run (docs/stopping.md): the x path
    does not depend on W (V_R - V_L = 2g - 1 + 2 cx x) and a smaller k only relaxes the stop,
    so W or k at most the recorded one is accepted and anything larger raises. All grid values
    run in one compiled call; returns ``{value: records}``. Records whose variant would need
    rounds that were never run are marked ``truncated`` (none for a valid grid on a log run
    with the same empty_g; empty_g = 0.0 on a 0.5 log changes the path and can truncate).
    ``empty_g`` must be in [0, 1] (:func:`replay_history`).
    """
    _check_empty_g(empty_g)
    hb = load_history_batch(path, normalize=normalize)
    rule, recorded, L = _resolve(hb, rule, None, None, L)
    grid = [int(v) for v in grid]
    name = "W" if rule == "spatial" else "k"
    if any(v > recorded for v in grid):
        raise DataError(f"{name} = {max(grid)} exceeds the recorded {name} = {recorded}: the "
                        "variant could need rounds that were never run", field=name)
    res = _run_history(hb, rule, grid, L, empty_g)
    return {v: _records(hb, jax.tree.map(lambda a, i=i: a[i], res), rule, L)
            for i, v in enumerate(grid)}
