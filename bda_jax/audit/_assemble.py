"""From validated poll and speak records to a :class:`~bda_jax.audit.BroadcastLog`: the
record types every constructor produces (:class:`PollRecord`, :class:`SpeakRecord`), the default
bootstrap clusters, and :func:`assemble_log`, the cross-record checks and columnar layout.

Default clusters (docs/audit.md; [Audit] Table 6 resamples problem clusters): chunks of at most
``cluster_size`` consecutive problems within a tier, named ``"tier/k"`` (``"k"`` without a tier),
"consecutive" in order of first appearance or of the sorted problem ids (digit runs compared as
numbers: "p2" before "p10").
"""
from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from ._log import BroadcastLog
from .._core.errors import DataError

__all__ = ["CLUSTER_ORDERS", "PollRecord", "SpeakRecord", "assemble_log"]


class PollRecord(NamedTuple):
    """One validated poll, before the columnar layout (the fields of a poll line; ``tier`` and
    ``cluster`` None when not given, ``score`` NaN when not stated, ``candidate`` and
    ``correct`` None when null). ``where`` = ``(line or None, label)`` names the record in
    errors: a file line, or a label such as "record #3" or "element 5, debate_history[2]"."""

    where: tuple
    problem: str
    tier: str | None
    cluster: str | None
    outer_round: int
    turn: int
    agent: str
    score: float
    candidate: str | None
    correct: bool | None
    selected: bool


class SpeakRecord(NamedTuple):
    """One validated speak record, before the columnar layout (the fields of a speak line;
    ``earlier_public`` a tuple of ``(agent or None, answer)`` pairs, or None when absent: then
    :func:`assemble_log` derives it). ``where`` as for :class:`PollRecord`."""

    where: tuple
    problem: str
    outer_round: int
    turn: int
    speaker: str
    spoken: str | None
    spoken_correct: bool | None
    incumbent: str | None
    earlier_public: tuple | None
    equivalence: str | None
    equivalence_source: str | None


CLUSTER_ORDERS = ("appearance", "sorted")
"""Values of ``cluster_order``: what "consecutive problems" means for the default clusters."""


def _natural_key(problem: str) -> tuple:
    """Sort key reading digit runs as numbers: "p2" < "p10" < "q1"."""
    parts = re.split(r"(\d+)", problem)
    return tuple(int(x) if k % 2 else x for k, x in enumerate(parts))


def _derive_clusters(problems: Sequence[str], tiers: Mapping[str, str],
                     cluster_size: int, order: str = "appearance") -> dict[str, str]:
    """Chunks of at most ``cluster_size`` consecutive problems per tier; "consecutive" in order
    of first appearance (``order="appearance"``) or of the sorted problem ids (``"sorted"``,
    digit runs compared as numbers)."""
    if order not in CLUSTER_ORDERS:
        raise DataError(f"cluster_order must be 'appearance' or 'sorted', got {order!r}",
                        field="cluster_order")
    if order == "sorted":
        problems = sorted(problems, key=_natural_key)
    seen_in_tier: dict[str, int] = {}
    out = {}
    for p in problems:
        t = tiers[p]
        k = seen_in_tier.get(t, 0)
        seen_in_tier[t] = k + 1
        out[p] = f"{t}/{k // cluster_size}" if t else f"{k // cluster_size}"
    return out


def assemble_log(polls: list[PollRecord], speaks: list[SpeakRecord], *, error: type, file=None,
                 cluster_size: int = 10, cluster_order: str = "appearance") -> BroadcastLog:
    """The :class:`~bda_jax.audit.BroadcastLog` of validated records: the cross-record checks
    and the columnar layout shared by every constructor (readers, simulator, ConfMAD loader).

    Checks (each failure raises ``error``, e.g. :class:`~bda_jax.TraceError` for a file or
    :class:`~bda_jax.DataError` for the simulator, naming ``file``, the record's line, the
    problem and the field): at least one poll; an agent polled at most once per block; at most
    one selected poll per block; one ``tier`` and one ``cluster`` per problem; at most one speak
    record per block, for a block with polls, by one of its polled agents and, where the block
    has a selected poll, by the selected agent. Blocks are ordered by first appearance, polls
    within a block in listing order; problems without a ``cluster`` get the default chunks of at
    most ``cluster_size`` consecutive problems per tier (``cluster_order``: see
    :data:`CLUSTER_ORDERS`); an absent ``earlier_public`` becomes the problem's earlier spoken
    answers (by outer round, turn).
    """
    def fail(reason, where, problem, fld):
        line, label = where
        raise error(f"{label}: {reason}" if label else reason, file=file, line=line,
                    task_id=problem, field=fld)

    if not polls:
        raise error("the log holds no poll record", file=file)
    if not isinstance(cluster_size, (int, np.integer)) or cluster_size < 1:
        raise DataError(f"cluster_size must be a positive integer, got {cluster_size!r}",
                        field="cluster_size")
    block_of: dict[tuple, int] = {}
    members: list[list[int]] = []
    first_agent: dict[tuple, tuple] = {}
    selected_at: dict[int, tuple] = {}
    tier_of: dict[str, tuple] = {}
    cluster_of: dict[str, tuple] = {}
    for i, p in enumerate(polls):
        key = (p.problem, p.outer_round, p.turn)
        b = block_of.setdefault(key, len(block_of))
        if b == len(members):
            members.append([])
        members[b].append(i)
        akey = key + (p.agent,)
        if akey in first_agent:
            fail(f"agent {p.agent!r} is polled twice in block (outer_round {p.outer_round}, "
                 f"turn {p.turn}) (first at {_where_text(first_agent[akey])})", p.where,
                 p.problem, "agent")
        first_agent[akey] = p.where
        if p.selected:
            if b in selected_at:
                fail(f"a second selected poll in block (outer_round {p.outer_round}, turn "
                     f"{p.turn}) (first at {_where_text(selected_at[b][0])})", p.where,
                     p.problem, "selected")
            selected_at[b] = (p.where, p.agent)
        for name, table, value in (("tier", tier_of, p.tier), ("cluster", cluster_of, p.cluster)):
            if value is None:
                continue
            if p.problem in table and table[p.problem][0] != value:
                fail(f"{name} {value!r} differs from {table[p.problem][0]!r} given for this "
                     f"problem at {_where_text(table[p.problem][1])}", p.where, p.problem, name)
            table.setdefault(p.problem, (value, p.where))
    problems = list(dict.fromkeys(p.problem for p in polls))
    tiers = {q: tier_of[q][0] if q in tier_of else "" for q in problems}
    auto = _derive_clusters(problems, tiers, int(cluster_size), cluster_order)
    clusters = {q: cluster_of[q][0] if q in cluster_of else auto[q] for q in problems}

    order = np.fromiter((i for rows in members for i in rows), np.int64, len(polls))
    sizes = np.array([len(rows) for rows in members], np.int64)
    block_start = np.concatenate([[0], np.cumsum(sizes)])
    block = np.repeat(np.arange(len(members), dtype=np.int64), sizes)
    position = np.arange(len(polls), dtype=np.int64) - block_start[block]
    rows = [polls[i] for i in order]

    def obj(values):
        out = np.empty(len(values), object)
        out[:] = values
        return out

    candidate = obj([p.candidate for p in rows])
    valid = np.array([p.candidate is not None and p.correct is not None for p in rows], bool)
    correct = np.array([bool(p.correct) for p in rows], bool) & valid
    agent_row = {(polls[i].problem, polls[i].outer_round, polls[i].turn, polls[i].agent): r
                 for r, i in enumerate(order)}

    # speak records
    speak_rows: list[tuple[int, SpeakRecord]] = []
    speak_seen: dict[int, tuple] = {}
    for s in speaks:
        key = (s.problem, s.outer_round, s.turn)
        if key not in block_of:
            fail(f"speak record for a block with no poll (outer_round {s.outer_round}, turn "
                 f"{s.turn})", s.where, s.problem, "turn")
        b = block_of[key]
        if b in speak_seen:
            fail(f"a second speak record for block (outer_round {s.outer_round}, turn {s.turn}) "
                 f"(first at {_where_text(speak_seen[b])})", s.where, s.problem, "turn")
        speak_seen[b] = s.where
        if key + (s.speaker,) not in agent_row:
            fail(f"speaker {s.speaker!r} was not polled in this block", s.where, s.problem,
                 "speaker")
        if b in selected_at and selected_at[b][1] != s.speaker:
            fail(f"speaker {s.speaker!r} is not the selected agent {selected_at[b][1]!r}",
                 s.where, s.problem, "speaker")
        speak_rows.append((b, s))
    speak_rows.sort(key=lambda item: item[0])
    # earlier public answers: derive where absent, from earlier speak records of the problem
    by_problem: dict[str, list[tuple[int, int, str, str]]] = {}
    for b, s in speak_rows:
        if s.spoken is not None:
            by_problem.setdefault(s.problem, []).append((s.outer_round, s.turn, s.speaker,
                                                         s.spoken))
    for events in by_problem.values():
        events.sort(key=lambda e: (e[0], e[1]))
    earlier = []
    for b, s in speak_rows:
        if s.earlier_public is not None:
            earlier.append(s.earlier_public)
        else:
            earlier.append(tuple((agent, ans) for o, t, agent, ans in by_problem.get(s.problem, [])
                                 if (o, t) < (s.outer_round, s.turn)))
    sp = [s for _, s in speak_rows]
    spoken_valid = np.array([s.spoken is not None and s.spoken_correct is not None for s in sp],
                            bool)
    return BroadcastLog(
        problem=obj([p.problem for p in rows]),
        tier=obj([tiers[p.problem] for p in rows]),
        cluster=obj([clusters[p.problem] for p in rows]),
        outer_round=np.array([p.outer_round for p in rows], np.int64),
        turn=np.array([p.turn for p in rows], np.int64),
        agent=obj([p.agent for p in rows]),
        position=position,
        score=np.array([p.score for p in rows], np.float64),
        candidate=candidate, valid=valid, correct=correct,
        selected=np.array([p.selected for p in rows], bool),
        block=block, block_start=block_start.astype(np.int64),
        speak_block=np.array([b for b, _ in speak_rows], np.int64),
        speaker=obj([s.speaker for s in sp]),
        spoken=obj([s.spoken for s in sp]),
        spoken_valid=spoken_valid,
        spoken_correct=np.array([bool(s.spoken_correct) for s in sp], bool) & spoken_valid,
        incumbent=obj([s.incumbent for s in sp]),
        earlier_public=obj(earlier),
        equivalence=obj([s.equivalence for s in sp]),
        equivalence_source=obj([s.equivalence_source for s in sp]),
        speak_poll_row=np.array([agent_row[(s.problem, s.outer_round, s.turn, s.speaker)]
                                 for s in sp], np.int64))


def _where_text(where) -> str:
    line, label = where
    return f"line {line}" if line is not None else label

