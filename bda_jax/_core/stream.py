"""Streaming tally: a JSON Lines trace file -> :class:`Counts` in bounded memory (docs/trace-format.md, docs/scale.md).

:func:`tally_stream` reads a trace file in chunks of tasks, checks every trace exactly as
:func:`bda_jax.read_traces` does (same :class:`TraceError` naming file, line, task, move and
field), and packs each chunk with the packing :func:`bda_jax.tally` runs (the same private
``tally_part``; there is no second tally). Only the compact int32 count arrays of each chunk and
a few per-task names (task id, candidate list, cluster) are kept; the traces and per-move Python
objects of a chunk are dropped once it is packed.

Agents: give ``agents=`` to fix the order up front (needed when several processes each tally a
shard and their counts must line up); otherwise agents are indexed first seen over the whole
file in one pass. First-seen order only ever appends, so a chunk's agent indices stay valid;
chunks that ran before an agent's first move get zero counts in its column when the chunks are
joined. The result equals ``tally(read_traces(path, ...), ...)`` array for array, info included.
"""
from __future__ import annotations

import contextlib
import os
import warnings
from collections import Counter
from typing import Literal, Sequence, overload

from .counts import Counts, PairCounts, finish_tally, TallyState, tally_options, tally_part
from .errors import DataError, TraceError
from .fastparse import check_workers, stream_blocks
from .io import gc_paused
from .normalize import Normalizer, default_normalizer

__all__ = ["tally_stream", "DEFAULT_CHUNK_TASKS"]

DEFAULT_CHUNK_TASKS = 2048


def _check_shard(shard):
    if shard is None:
        return None
    try:
        index, count = (int(x) for x in shard)
        ok = count >= 1 and 0 <= index < count and tuple(shard) == (index, count)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise DataError(f"shard must be (index, count) with 0 <= index < count, got {shard!r}",
                        field="shard")
    return index, count


# the return type follows `layout` (for type checkers; the one implementation is below)
@overload
def tally_stream(path, agents: Sequence[str] | None = None, *,
                 chunk_tasks: int = DEFAULT_CHUNK_TASKS, shard: tuple[int, int] | None = None,
                 max_round: int | None = None, forces: Sequence[str] | None = None,
                 one_move_per_round: bool = False, permute_candidates: int | None = None,
                 unknown_agents: str = "error", normalizer: Normalizer = default_normalizer,
                 lenient: bool = False, abstain_candidate: str | None = None,
                 seat_key: str = "agent", layout: Literal["dense"] = "dense",
                 workers: int | None = None) -> Counts: ...
@overload
def tally_stream(path, agents: Sequence[str] | None = None, *,
                 chunk_tasks: int = DEFAULT_CHUNK_TASKS, shard: tuple[int, int] | None = None,
                 max_round: int | None = None, forces: Sequence[str] | None = None,
                 one_move_per_round: bool = False, permute_candidates: int | None = None,
                 unknown_agents: str = "error", normalizer: Normalizer = default_normalizer,
                 lenient: bool = False, abstain_candidate: str | None = None,
                 seat_key: str = "agent", layout: Literal["pairs"],
                 workers: int | None = None) -> PairCounts: ...
@overload
def tally_stream(path, agents: Sequence[str] | None = None, *,
                 chunk_tasks: int = DEFAULT_CHUNK_TASKS, shard: tuple[int, int] | None = None,
                 max_round: int | None = None, forces: Sequence[str] | None = None,
                 one_move_per_round: bool = False, permute_candidates: int | None = None,
                 unknown_agents: str = "error", normalizer: Normalizer = default_normalizer,
                 lenient: bool = False, abstain_candidate: str | None = None,
                 seat_key: str = "agent", layout: str = "dense",
                 workers: int | None = None) -> Counts | PairCounts: ...


def tally_stream(path, agents: Sequence[str] | None = None, *,
                 chunk_tasks: int = DEFAULT_CHUNK_TASKS, shard: tuple[int, int] | None = None,
                 max_round: int | None = None, forces: Sequence[str] | None = None,
                 one_move_per_round: bool = False, permute_candidates: int | None = None,
                 unknown_agents: str = "error", normalizer: Normalizer = default_normalizer,
                 lenient: bool = False, abstain_candidate: str | None = None,
                 seat_key: str = "agent", layout: str = "dense",
                 workers: int | None = None) -> "Counts | PairCounts":
    """Tally a JSON Lines trace file chunk by chunk, in memory that grows with the count arrays
    only (docs/trace-format.md's tally over §3's format; no list of traces is ever held).

    ``tally_stream(path, **options)`` equals ``tally(read_traces(path, lenient=lenient,
    normalizer=normalizer), **options)`` exactly (every array and ``info``), and raises the
    same :class:`TraceError` for a bad line (file, line, task, move, field). Errors surface at
    the chunk that holds them, so a file with several problems may report a different first one
    than the two-step call (which checks every trace before tallying any).

    Args:
      path: the JSON Lines trace file.
      agents: fixed agent (seat) order; default: first seen over the file, in one pass.
      chunk_tasks: tasks parsed and packed at a time (memory of one chunk's Python objects).
      shard: ``(index, count)``: tally only the lines whose 1-based number is ``index`` modulo
        ``count`` (other lines are not decoded), e.g. ``(jax.process_index(),
        jax.process_count())`` so that each host of a multi-host run reads its share. Duplicate
        task ids are then only detected within a shard; pass ``agents`` so that all shards
        index agents alike. Default: the whole file.
      max_round, forces, one_move_per_round, permute_candidates, unknown_agents: as for
        :func:`bda_jax.tally`.
      normalizer, lenient, abstain_candidate, seat_key, layout: as for :func:`bda_jax.tally`
        (``normalizer`` and ``lenient`` also as for :func:`bda_jax.read_traces`; in lenient
        mode the summary of skipped moves is warned as there).
      workers: processes that parse the file: this one and ``workers - 1`` worker processes
        that decode and check segments of it while this one finishes and tallies every line in
        file order (same counts, same first error, same warnings as ``workers=1``). ``None``
        (default): automatic, one per 16 MiB of file, at most one worker per CPU this process
        may run on (``os.sched_getaffinity``) and 8 in all, so a file under 32 MiB (or any
        file on one CPU) is read here alone; the environment variable
        ``BDA_JAX_PARSE_WORKERS`` replaces that cap (``1``: never start a worker, e.g. on a
        machine whose cores are busy). ``1``: no worker. A worker is a Python process with
        NumPy and msgspec (about 0.25 s of CPU to start, no JAX) that reads byte ranges of
        the file and sends back arrays and strings (no pickle). With a normalizer
        other than :func:`bda_jax.default_normalizer` and :func:`bda_jax.identity_normalizer`
        the answers are normalized in this process. A ``shard``, or a file that is not a
        regular file (a pipe), is read in this process; a worker that stops (killed, cannot
        start) leaves the rest of the file to this process, with a :class:`RuntimeWarning`.

    Returns: :class:`Counts` (``layout="dense"``) or :class:`PairCounts` (``"pairs"``), int32
    counts.

    Speed (docs/scale.md): the fast reader of :func:`bda_jax.read_traces` (compiled JSON
    decoding into typed records, the automaton over each chunk's moves as arrays, any other
    line through :func:`bda_jax.parse_trace` and :func:`bda_jax.resolve_trace`, in file
    order), in parse workers for a large file (``workers``). During the call Python's cyclic
    garbage collector is paused (restored afterwards, also on error) and ``normalizer`` is
    memoized (bounded cache; a normalizer must be a pure function of its string).

    >>> import os, tempfile, bda_jax as bda
    >>> path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write('{"task_id": "q1", "candidates": ["A", "B"], "moves": '
    ...                 '[{"id": "m1", "agent": "x", "round": 0, "force": "propose", '
    ...                 '"answer": "B"}]}\\n')
    >>> c = bda.tally_stream(path, chunk_tasks=1)
    >>> c.e.tolist(), c.agents
    ([[[0, 1]]], ('x',))
    """
    options = tally_options(max_round=max_round, forces=forces,
                             one_move_per_round=one_move_per_round,
                             permute_candidates=permute_candidates, unknown_agents=unknown_agents,
                             seat_key=seat_key, layout=layout)
    if isinstance(chunk_tasks, bool) or not isinstance(chunk_tasks, int) or chunk_tasks < 1:
        raise DataError(f"chunk_tasks must be a positive integer, got {chunk_tasks!r}",
                        field="chunk_tasks")
    shard = _check_shard(shard)
    workers = check_workers(workers)
    if shard is not None and workers is not None and workers > 1:
        raise DataError("a shard is read in one process: pass workers=1 (or None) with shard",
                        field="workers")
    path = os.fspath(path)
    state = TallyState(agents, options, file=path)
    keep_line = None if shard is None else (lambda lineno: lineno % shard[1] == shard[0])
    # The loop allocates millions of short-lived, acyclic objects (decoded records, column
    # lists): the cyclic collector would rescan the growing per-task state over and over. It is
    # paused for the call and restored, whatever happens.
    skipped: Counter = Counter()
    with gc_paused():
        blocks = stream_blocks(path, chunk_tasks, normalizer, lenient, abstain_candidate,
                               keep_line, skipped, 1 if shard is not None else workers)
        with contextlib.closing(blocks):      # stops the parse workers, also on error
            parts = [tally_part(block, state) for block in blocks]
    if not parts:
        where = "" if shard is None or shard[1] == 1 else f" in shard {shard[0]} of {shard[1]}"
        raise TraceError(f"the file holds no task{where}", file=path)
    if skipped:
        total = sum(skipped.values())
        detail = ", ".join(f"{code}: {n}" for code, n in sorted(skipped.items()))
        warnings.warn(f"{path}: lenient mode skipped {total} inadmissible move(s) ({detail})",
                      stacklevel=2)
    return finish_tally(parts, state)
