"""Broadcast (confidence-routed) deliberation logs: data model, JSON Lines I/O, simulator, ConfMAD.

The audited protocol ([Audit] Fig. 1 and Appendix Table 7): in every discussion turn each agent
is *polled* privately for a candidate answer and a confidence score; the router hands the floor to
the most confident agent, which then *speaks* publicly, and its spoken answer may differ from the
answer it polled. docs/audit.md pins the reading used here: a **block** is one poll round,
identified by ``(problem, outer_round, turn)``; a **valid candidate** is a parsed, normalized and
labeled answer.

Broadcast log format (JSON Lines)
=================================

One JSON object per line, blank lines ignored, UTF-8. Every object has ``"kind"``: ``"poll"`` or
``"speak"``. Keys not listed below are allowed and ignored (e.g. a poll's free-text ``reason``).

**poll** — one agent's private poll in one block::

    {"kind": "poll", "problem": "p17", "tier": "05", "cluster": "05/1", "outer_round": 0,
     "turn": 2, "agent": "a1", "score": 0.85, "candidate": "42", "correct": true,
     "selected": true}

==============  ========================  ====================================================
key             type                      meaning
==============  ========================  ====================================================
problem         string or integer         problem (task) id; required
outer_round     integer >= 0              outer (evaluator) round; required
turn            integer >= 0              discussion turn within the outer round; required
agent           non-empty string          the polled agent; required, unique within a block
score           number or null            stated confidence; null = not stated (stored NaN).
                                          Must lie in ``score_range`` (default [0, 1]).
candidate       string or null            the extracted answer; null = no parsable answer.
                                          Normalized on reading (``normalizer``); an answer
                                          that normalizes to "" counts as null.
correct         boolean or null           the candidate's correctness label; null = unlabeled.
                                          ``true`` with a null candidate is an error.
selected        boolean (default false)   whether the router gave this agent the floor; at
                                          most one selected poll per block. A log in which no
                                          poll is selected is audited on a replayed selection
                                          (:func:`effective_selection`)
tier            string, integer or null   difficulty stratum (default: one stratum, "")
cluster         string, integer or null   resampling cluster for the bootstrap (default:
                                          chunks of at most ``cluster_size`` = 10 consecutive
                                          problems within a tier, in order of first appearance
                                          or, with ``cluster_order="sorted"``, of problem id)
==============  ========================  ====================================================

A poll is a *valid candidate* when ``candidate`` is not null and ``correct`` is not null.
``tier`` and ``cluster`` are properties of the problem: every poll of a problem must give the
same values (or leave them out). The *listing order* of the agents in a block — the order a
first-listed tie-break uses — is the order of their poll lines in the file.

**speak** — the public message of the agent that held the floor in a block (at most one per
block; its block must have polls, and the speaker must be one of them and, if the block has a
selected poll, the selected agent)::

    {"kind": "speak", "problem": "p17", "outer_round": 0, "turn": 2, "speaker": "a1",
     "spoken": "41", "spoken_correct": false, "incumbent": "42",
     "earlier_public": [{"agent": "a2", "answer": "41"}, "40"],
     "equivalence": "divergent", "equivalence_source": "judge:gpt-oss-120b"}

==================  ======================  ==================================================
key                 type                    meaning
==================  ======================  ==================================================
speaker             non-empty string        required
spoken              string or null          answer extracted from the public message
                                            (normalized like ``candidate``)
spoken_correct      boolean or null         its correctness label (``true`` needs ``spoken``)
incumbent           string or null          the system-level incumbent answer at speak time
earlier_public      list or absent          public answers visible before this speak event,
                                            oldest first: ``{"agent": ..., "answer": ...}``
                                            objects, or bare answer strings (author unknown).
                                            Absent: the spoken answers of this problem's
                                            earlier speak records (by outer round, turn).
equivalence         "equivalent",           whether the spoken answer matches the speaker's
                    "divergent" or null     poll candidate
equivalence_source  string or null          who decided it, e.g. "exact" or "judge:NAME"
==================  ======================  ==================================================

:func:`read_broadcast_log` checks every field and raises :class:`~bda_jax.TraceError` naming the
file, line, task (problem id) and field of the first bad record. :func:`write_broadcast_log`
writes a log back (polls of a block, then its speak record), so that reading it returns an equal
log.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from .._core.errors import DataError, TraceError
from .._core.io import atomic_write, read_json_lines
from .._core.normalize import Normalizer, default_normalizer

__all__ = [
    "BroadcastLog", "CLUSTER_ORDERS", "ConfmadReport", "EQUIVALENCE_LABELS", "SELECTION_SOURCES",
    "effective_selection", "from_frame", "from_records", "load_confmad", "read_broadcast_log",
    "runtime_argmax", "simulate_broadcast", "write_broadcast_log",
]

EQUIVALENCE_LABELS = ("equivalent", "divergent")
_POLL_KEYS = ("problem", "outer_round", "turn", "agent", "score", "candidate", "correct",
              "selected", "tier", "cluster")
_MAX_INT = 2**31 - 1


# ===================================================================================== data model
@dataclass(frozen=True, eq=False)
class BroadcastLog:
    """Columnar poll and speak tables of a broadcast deliberation log ([Audit] Fig. 1).

    **Poll table**, one row per (block, agent), ``R`` rows ordered by block and, within a block,
    by listing order; every array is [R]:

    ``problem``, ``tier``, ``cluster``, ``agent`` (object arrays of str); ``outer_round``,
    ``turn``, ``position`` (listing order within the block, 0-based) and ``block`` (block index
    in [0, B)) int64; ``score`` float64 (NaN: not stated); ``candidate`` object (normalized str or
    None); ``valid`` bool (candidate present and labeled); ``correct`` bool (False unless valid);
    ``selected`` bool (the runtime router's pick).

    **Blocks**: ``B`` poll rounds ``(problem, outer_round, turn)`` in order of first appearance;
    the rows of block ``b`` are ``block_start[b]:block_start[b+1]`` (``block_start`` [B+1]).

    **Speak table**, ``S`` rows ordered by block, every array [S]: ``speak_block`` int64;
    ``speaker``, ``spoken``, ``incumbent``, ``equivalence``, ``equivalence_source`` object (str or
    None); ``spoken_valid`` and ``spoken_correct`` bool (as for polls); ``earlier_public`` object,
    each a tuple of ``(agent or None, answer)`` pairs, oldest first; ``speak_poll_row`` int64, the
    poll row of the speaker in its block.
    """

    problem: np.ndarray
    tier: np.ndarray
    cluster: np.ndarray
    outer_round: np.ndarray
    turn: np.ndarray
    agent: np.ndarray
    position: np.ndarray
    score: np.ndarray
    candidate: np.ndarray
    valid: np.ndarray
    correct: np.ndarray
    selected: np.ndarray
    block: np.ndarray
    block_start: np.ndarray
    speak_block: np.ndarray
    speaker: np.ndarray
    spoken: np.ndarray
    spoken_valid: np.ndarray
    spoken_correct: np.ndarray
    incumbent: np.ndarray
    earlier_public: np.ndarray
    equivalence: np.ndarray
    equivalence_source: np.ndarray
    speak_poll_row: np.ndarray

    # ------------------------------------------------------------------ sizes and block views
    @property
    def n_polls(self) -> int:
        return int(self.block.size)

    @property
    def n_blocks(self) -> int:
        return int(self.block_start.size - 1)

    @property
    def n_speaks(self) -> int:
        return int(self.speak_block.size)

    @property
    def block_size(self) -> np.ndarray:
        """[B] number of polled agents per block."""
        return np.diff(self.block_start)

    def _per_block(self, column: np.ndarray) -> np.ndarray:
        return column[self.block_start[:-1]]

    @property
    def block_problem(self) -> np.ndarray:
        """[B] problem id of each block."""
        return self._per_block(self.problem)

    @property
    def block_tier(self) -> np.ndarray:
        return self._per_block(self.tier)

    @property
    def block_cluster(self) -> np.ndarray:
        """[B] bootstrap cluster of each block (pass it to ``cluster_bootstrap``)."""
        return self._per_block(self.cluster)

    @property
    def block_outer_round(self) -> np.ndarray:
        return self._per_block(self.outer_round)

    @property
    def block_turn(self) -> np.ndarray:
        return self._per_block(self.turn)

    @property
    def block_speak(self) -> np.ndarray:
        """[B] row of each block's speak record in the speak table, -1 where none."""
        out = np.full(self.n_blocks, -1, np.int64)
        out[self.speak_block] = np.arange(self.n_speaks)
        return out

    @property
    def problems(self) -> list[str]:
        """Problem ids in order of first appearance."""
        return list(dict.fromkeys(self.problem.tolist()))

    def padded(self, column, fill) -> np.ndarray:
        """[B, A] view of a poll column ([R]), A = the largest block; ``fill`` pads short blocks.

        >>> log = from_records([
        ...     {"kind": "poll", "problem": 1, "outer_round": 0, "turn": 0, "agent": "a",
        ...      "score": 0.9, "candidate": "x", "correct": True},
        ...     {"kind": "poll", "problem": 1, "outer_round": 0, "turn": 1, "agent": "a",
        ...      "score": 0.4, "candidate": "y", "correct": False},
        ...     {"kind": "poll", "problem": 1, "outer_round": 0, "turn": 1, "agent": "b",
        ...      "score": 0.7, "candidate": None, "correct": None}])
        >>> log.padded(log.score, np.nan).tolist()
        [[0.9, nan], [0.4, 0.7]]
        """
        column = np.asarray(column)
        if column.shape[:1] != (self.n_polls,):
            raise DataError(f"column must be [R] = [{self.n_polls}], got shape {column.shape}",
                            field="column")
        width = int(self.block_size.max()) if self.n_blocks else 0
        out = np.full((self.n_blocks, width) + column.shape[1:], fill,
                      dtype=np.result_type(column.dtype, np.asarray(fill).dtype)
                      if column.dtype != object else object)
        out[self.block, self.position] = column
        return out

    # ------------------------------------------------------------------ equality
    def __eq__(self, other) -> bool:
        if not isinstance(other, BroadcastLog):
            return NotImplemented
        for name in self.__dataclass_fields__:
            a, b = getattr(self, name), getattr(other, name)
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.dtype.kind == "f":
                if not np.array_equal(a, b, equal_nan=True):
                    return False
            elif not all(x == y for x, y in zip(a.tolist(), b.tolist())):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"BroadcastLog({len(self.problems)} problems, {self.n_blocks} blocks, "
                f"{self.n_polls} polls, {self.n_speaks} speak records)")

    # ------------------------------------------------------------------ records
    def to_records(self) -> list[dict]:
        """The log as JSON-ready records (the file format): per block, its polls then its speak."""
        out: list[dict] = []
        speak_of = self.block_speak
        for b in range(self.n_blocks):
            for r in range(self.block_start[b], self.block_start[b + 1]):
                rec: dict[str, Any] = {
                    "kind": "poll", "problem": self.problem[r],
                    "outer_round": int(self.outer_round[r]), "turn": int(self.turn[r]),
                    "agent": self.agent[r],
                    "score": None if math.isnan(self.score[r]) else float(self.score[r]),
                    "candidate": self.candidate[r],
                    "correct": bool(self.correct[r]) if self.valid[r] else None,
                    "selected": bool(self.selected[r]),
                    "tier": self.tier[r] if self.tier[r] != "" else None,
                    "cluster": self.cluster[r]}
                out.append(rec)
            s = speak_of[b]
            if s >= 0:
                out.append({
                    "kind": "speak", "problem": self.problem[self.block_start[b]],
                    "outer_round": int(self.outer_round[self.block_start[b]]),
                    "turn": int(self.turn[self.block_start[b]]), "speaker": self.speaker[s],
                    "spoken": self.spoken[s],
                    "spoken_correct": (bool(self.spoken_correct[s]) if self.spoken_valid[s]
                                       else None),
                    "incumbent": self.incumbent[s],
                    "earlier_public": [answer if agent is None
                                       else {"agent": agent, "answer": answer}
                                       for agent, answer in self.earlier_public[s]],
                    "equivalence": self.equivalence[s],
                    "equivalence_source": self.equivalence_source[s]})
        return out


# ============================================================================ record parsing
class _Bad(Exception):
    def __init__(self, reason: str, field: str | None = None):
        super().__init__(reason)
        self.reason, self.field = reason, field


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _id(raw: Mapping, key: str, *, required: bool) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise _Bad(f"record has no {key!r}", key)
        return None
    if isinstance(value, str) and value.strip():
        return value
    if _is_int(value) and abs(int(value)) < 2**63:
        return str(int(value))
    raise _Bad(f"{key} must be a non-empty string or an integer, got {type(value).__name__} "
               f"{_short(value)}", key)


def _count(raw: Mapping, key: str) -> int:
    if key not in raw or raw[key] is None:
        raise _Bad(f"record has no {key!r}", key)
    value = raw[key]
    if not _is_int(value) or not 0 <= value <= _MAX_INT:
        raise _Bad(f"{key} must be a non-negative integer, got {_short(value)}", key)
    return int(value)


def _flag(raw: Mapping, key: str, *, default) -> bool | None:
    value = raw.get(key, default)
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    raise _Bad(f"{key} must be true, false or null, got {type(value).__name__} {_short(value)}",
               key)


def _answer(raw: Mapping, key: str, normalizer: Normalizer | None) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"{key} must be a string or null, got {type(value).__name__} {_short(value)}",
                   key)
    value = normalizer(value) if normalizer is not None else value
    return value if value != "" else None


def _text(raw: Mapping, key: str) -> str | None:
    value = raw.get(key)
    if value is None or (isinstance(value, str) and value):
        return value
    raise _Bad(f"{key} must be a non-empty string or null, got {_short(value)}", key)


class _Poll(NamedTuple):
    where: tuple            # (line or None, label)
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


class _Speak(NamedTuple):
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


def _parse_record(raw, where, normalizer, score_range):
    if not isinstance(raw, dict):
        raise _Bad(f"a record must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in ("poll", "speak"):
        err = _Bad(f"unknown kind {_short(kind)}; expected 'poll' or 'speak'", "kind")
        try:
            err.problem = _id(raw, "problem", required=False)
        except _Bad:
            pass
        raise err
    problem = _id(raw, "problem", required=True)
    try:
        outer_round, turn = _count(raw, "outer_round"), _count(raw, "turn")
        if kind == "poll":
            agent = _text(raw, "agent")
            if agent is None or not agent.strip():
                raise _Bad(f"agent must be a non-empty string, got {_short(raw.get('agent'))}",
                           "agent")
            score = raw.get("score")
            if score is None:
                score = math.nan
            else:
                if not isinstance(score, (int, float, np.integer, np.floating)) \
                        or isinstance(score, (bool, np.bool_)):
                    raise _Bad(f"score must be a number or null, got {type(score).__name__} "
                               f"{_short(score)}", "score")
                try:
                    score = float(score)
                except OverflowError:       # a JSON integer too large for a float
                    raise _Bad(f"score {_short(score)} overflows a float (too large to be "
                               "a confidence)", "score") from None
                if not math.isfinite(score):
                    raise _Bad(f"score must be finite, got {score}", "score")
                if score_range is not None and not score_range[0] <= score <= score_range[1]:
                    raise _Bad(f"score {score:g} lies outside the score range "
                               f"[{score_range[0]:g}, {score_range[1]:g}]", "score")
            candidate = _answer(raw, "candidate", normalizer)
            correct = _flag(raw, "correct", default=None)
            if correct and candidate is None:
                raise _Bad("correct is true but the poll has no candidate", "correct")
            selected = _flag(raw, "selected", default=False)
            if selected is None:
                raise _Bad("selected must be true or false, got null", "selected")
            return _Poll(where, problem, _id(raw, "tier", required=False),
                         _id(raw, "cluster", required=False), outer_round, turn, agent, score,
                         candidate, correct, selected)
        speaker = _text(raw, "speaker")
        if speaker is None or not speaker.strip():
            raise _Bad(f"speaker must be a non-empty string, got {_short(raw.get('speaker'))}",
                       "speaker")
        spoken = _answer(raw, "spoken", normalizer)
        spoken_correct = _flag(raw, "spoken_correct", default=None)
        if spoken_correct and spoken is None:
            raise _Bad("spoken_correct is true but the speak record has no spoken answer",
                       "spoken_correct")
        earlier = raw.get("earlier_public")
        if earlier is not None:
            if not isinstance(earlier, list):
                raise _Bad(f"earlier_public must be a list, got {type(earlier).__name__}",
                           "earlier_public")
            items = []
            for k, item in enumerate(earlier):
                if isinstance(item, str):
                    answer = _answer({"a": item}, "a", normalizer)
                    author = None
                elif isinstance(item, dict) and set(item) <= {"agent", "answer"} \
                        and isinstance(item.get("answer"), str) \
                        and (item.get("agent") is None or (isinstance(item.get("agent"), str)
                                                           and item["agent"].strip())):
                    answer = _answer(item, "answer", normalizer)
                    author = item.get("agent")
                else:
                    raise _Bad(f"earlier_public[{k}] must be an answer string or an object "
                               f"{{'agent': non-empty str or null, 'answer': str}}, got "
                               f"{_short(item)}",
                               "earlier_public")
                if answer is not None:
                    items.append((author, answer))
            earlier = tuple(items)
        equivalence = raw.get("equivalence")
        if equivalence is not None and equivalence not in EQUIVALENCE_LABELS:
            raise _Bad(f"equivalence must be 'equivalent', 'divergent' or null, got "
                       f"{_short(equivalence)}", "equivalence")
        return _Speak(where, problem, outer_round, turn, speaker, spoken, spoken_correct,
                      _answer(raw, "incumbent", normalizer), earlier, equivalence,
                      _text(raw, "equivalence_source"))
    except _Bad as err:
        err.problem = problem
        raise


CLUSTER_ORDERS = ("appearance", "sorted")


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


def _assemble(polls: list[_Poll], speaks: list[_Speak], *, error: type, file=None,
              cluster_size: int = 10, cluster_order: str = "appearance") -> BroadcastLog:
    """Cross-record checks and the columnar layout shared by every constructor."""
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
    speak_rows: list[tuple[int, _Speak]] = []
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


def _check_range(score_range):
    if score_range is None:
        return None
    try:
        lo, hi = (float(x) for x in score_range)
    except (TypeError, ValueError):
        raise DataError(f"score_range must be (low, high) or None, got {score_range!r}",
                        field="score_range") from None
    if not lo <= hi:
        raise DataError(f"score_range must have low <= high, got {score_range!r}",
                        field="score_range")
    return lo, hi


def _parse_all(items: Iterable[tuple[int | None, str, Any]], *, file, normalizer, score_range,
               cluster_size, cluster_order) -> BroadcastLog:
    score_range = _check_range(score_range)
    polls, speaks = [], []
    for line, label, raw in items:
        try:
            rec = _parse_record(raw, (line, label), normalizer, score_range)
        except _Bad as err:
            reason = f"{label}: {err.reason}" if label else err.reason
            raise TraceError(reason, file=file, line=line, task_id=getattr(err, "problem", None),
                             field=err.field) from None
        (polls if isinstance(rec, _Poll) else speaks).append(rec)
    return _assemble(polls, speaks, error=TraceError, file=file, cluster_size=cluster_size,
                     cluster_order=cluster_order)


# ======================================================================================== I/O
def read_broadcast_log(path, *, normalizer: Normalizer | None = default_normalizer,
                       score_range: tuple[float, float] | None = (0.0, 1.0),
                       cluster_size: int = 10,
                       cluster_order: str = "appearance") -> BroadcastLog:
    """Read and validate a broadcast log in the JSON Lines format of this module's docstring.

    ``normalizer`` is applied to every answer (``None``: take answers as written);
    ``score_range`` bounds the stated scores (``None``: no check, e.g. for raw 0-100 scores);
    ``cluster_size`` is the chunk length of the default clusters and ``cluster_order`` what
    "consecutive" means for them: ``"appearance"`` (order of first appearance in the file) or
    ``"sorted"`` (sorted problem ids, digit runs compared as numbers: "p2" before "p10").
    The first bad record raises :class:`~bda_jax.TraceError` naming file, line, task (problem
    id) and field.
    """
    path = os.fspath(path)
    items = ((line, "", raw) for line, raw in read_json_lines(path, TraceError, "broadcast log"))
    return _parse_all(items, file=path, normalizer=normalizer, score_range=score_range,
                      cluster_size=cluster_size, cluster_order=cluster_order)


def from_records(records: Iterable[Mapping], *, normalizer: Normalizer | None = default_normalizer,
                 score_range: tuple[float, float] | None = (0.0, 1.0),
                 cluster_size: int = 10, cluster_order: str = "appearance") -> BroadcastLog:
    """Build a log from in-memory records (dicts in the file format); errors name the record
    (``record #k``, 1-based), task and field, as :class:`~bda_jax.TraceError`. Keyword
    arguments as for :func:`read_broadcast_log`."""
    items = ((None, f"record #{k}", raw) for k, raw in enumerate(records, 1))
    return _parse_all(items, file=None, normalizer=normalizer, score_range=score_range,
                      cluster_size=cluster_size, cluster_order=cluster_order)


def from_frame(polls, speaks=None, **kwargs) -> BroadcastLog:
    """Build a log from pandas data frames: ``polls`` one row per poll, ``speaks`` (optional) one
    row per speak event, columns named as the record keys (``kind`` not needed; NaN and None are
    null). Other keyword arguments as for :func:`from_records`."""
    def rows(frame, kind):
        if frame is None:
            return []
        out = []
        for rec in frame.to_dict(orient="records"):
            clean = {}
            for key, value in rec.items():
                if isinstance(value, float) and math.isnan(value):
                    value = None
                elif isinstance(value, np.generic):
                    value = value.item()
                clean[str(key)] = value
            clean["kind"] = kind
            out.append(clean)
        return out

    return from_records(rows(polls, "poll") + rows(speaks, "speak"), **kwargs)


def write_broadcast_log(log: BroadcastLog, path) -> None:
    """Write ``log`` as JSON Lines (atomically); :func:`read_broadcast_log` reads back an equal log
    when its ``normalizer`` leaves the stored (already normalized) answers unchanged."""
    path = os.fspath(path)

    def write(handle):
        for rec in log.to_records():
            try:
                line = json.dumps(rec, ensure_ascii=False, allow_nan=False)
                line.encode("utf-8")
            except UnicodeEncodeError:   # lone surrogates: keep them as JSON escapes
                line = json.dumps(rec, ensure_ascii=True, allow_nan=False)
            handle.write(line)
            handle.write("\n")

    atomic_write(path, write, suffix=".jsonl")


# ============================================================================ runtime routing
def runtime_argmax(log: BroadcastLog, score=None) -> np.ndarray:
    """[R] bool: the runtime router's pick per block (docs/audit.md): the largest ``score`` over all
    polled agents, valid or not, strict ``>`` so the first-listed agent wins ties; a missing (NaN)
    score ranks below every stated one (all missing: the first listed).

    >>> log = from_records([{"kind": "poll", "problem": 1, "outer_round": 0, "turn": 0,
    ...                      "agent": a, "score": s} for a, s in (("x", .5), ("y", .9), ("z", .9))])
    >>> runtime_argmax(log).tolist()
    [False, True, False]
    """
    score = log.score if score is None else np.asarray(score, np.float64)
    if score.shape != (log.n_polls,):
        raise DataError(f"score must be [R] = [{log.n_polls}], got shape {score.shape}",
                        field="score")
    padded = log.padded(np.where(np.isnan(score), -np.inf, score), -np.inf)
    pick = np.argmax(padded, axis=1)           # first maximum = first listed
    out = np.zeros(log.n_polls, bool)
    out[log.block_start[:-1] + pick] = True
    return out


SELECTION_SOURCES = ("logged", "replayed")


def effective_selection(log: BroadcastLog) -> tuple[np.ndarray, str]:
    """``([R] bool, source)``: the selection the audit uses when none is passed explicitly.

    * ``"logged"`` — some poll of the log is ``selected``: the flags as logged. Blocks without
      a selected poll stay unselected and drop out of every selection-based denominator (CRA,
      HRWP, runtime success, MCR, selected-invalid rate).
    * ``"replayed"`` — no poll of the log is selected (a log written without ``selected``
      flags; ``selected`` defaults to false): in a block with a speak record, the speaker's
      poll (the speaker held the floor); in the other blocks the runtime rule replayed
      (:func:`runtime_argmax`: largest score, first listed wins ties).

    >>> log = from_records([{"kind": "poll", "problem": 1, "outer_round": 0, "turn": t,
    ...                      "agent": a, "score": s} for t in (0, 1)
    ...                     for a, s in (("x", .5), ("y", .9))]
    ...                    + [{"kind": "speak", "problem": 1, "outer_round": 0, "turn": 1,
    ...                        "speaker": "x"}])
    >>> sel, source = effective_selection(log)
    >>> sel.tolist(), source
    ([False, True, True, False], 'replayed')
    """
    if log.selected.any():
        return log.selected, "logged"
    out = runtime_argmax(log)
    if log.n_speaks:
        out[np.isin(log.block, log.speak_block)] = False
        out[log.speak_poll_row] = True
    return out, "replayed"


# ================================================================================ simulator
def simulate_broadcast(seed: int, n_problems: int = 300, n_agents: int = 3, *, n_tiers: int = 6,
                       outer_rounds: int = 2, turns_per_round: int = 4, skill_sd: float = 0.5,
                       difficulty_spread: float = 3.0, link_strength: float = 0.15,
                       overconfidence: float = 1.5, score_noise: float = 0.8,
                       granularity: float | None = 0.1, invalid_rate: float = 0.1,
                       n_wrong_answers: int = 3, divergence_rate: float = 0.2,
                       divergence_mix: Sequence[float] = (0.2, 0.1, 0.1, 0.6),
                       cluster_size: int = 10) -> BroadcastLog:
    """Simulate a confidence-routed broadcast run ([Audit] Fig. 1) with known ground truth.

    Generative model (one numpy ``Generator(PCG64(seed))``, so the same arguments give the same
    log, bit for bit):

    * problems are split into ``n_tiers`` contiguous tiers "01", "02", ...; problem difficulty
      ``d ~ N(mu_tier, 1)`` with ``mu_tier`` spaced evenly over ``difficulty_spread``; agent skill
      ``a_i ~ N(0, skill_sd^2)``; each poll is correct with probability ``sigmoid(a_i - d)``.
    * a wrong poll answers one of ``n_wrong_answers`` problem-specific wrong answers (weights
      1, 1/2, 1/3, ...), so wrong answers coincide and plurality votes are non-trivial;
    * the stated score is ``sigmoid(overconfidence + link_strength * (2y - 1) + N(0,
      score_noise^2))`` rounded to a multiple of ``granularity`` (ties), with ``y`` the poll's
      latent correctness: over-confident (mean well above accuracy) and only weakly linked to
      correctness for small ``link_strength``;
    * with probability ``invalid_rate`` the candidate is unparsable (null) but the score stays;
    * the runtime router (:func:`runtime_argmax`) selects; the selected agent speaks. With
      probability ``divergence_rate`` its spoken answer differs from its poll candidate, by a
      source drawn with weights ``divergence_mix`` = (self-revert to one of the speaker's own
      earlier *spoken* answers — its public answers, the ones the audit's self-revert flag
      looks for, not its private polls; incumbent pull; peer echo of another agent's earlier
      spoken answer; novel answer), each differing from the poll candidate. An unavailable
      source (no such earlier answer, no incumbent) falls back to a novel answer: a fresh draw
      from the problem's answers other than the poll candidate (which may, by chance, repeat
      an earlier public answer). The incumbent after each outer round is the plurality of that
      round's spoken answers (latest wins ties) and persists; ``earlier_public`` lists all earlier
      spoken answers of the problem; equivalence is exact matching (source "exact").
    * clusters: chunks of at most ``cluster_size`` consecutive problems within a tier.

    Returns a :class:`BroadcastLog` with ``n_problems * outer_rounds * turns_per_round`` blocks of
    ``n_agents`` polls each and one speak record per block.
    """
    for name, value in (("n_problems", n_problems), ("n_agents", n_agents), ("n_tiers", n_tiers),
                        ("outer_rounds", outer_rounds), ("turns_per_round", turns_per_round),
                        ("n_wrong_answers", n_wrong_answers)):
        if not _is_int(value) or value < 1:
            raise DataError(f"{name} must be a positive integer, got {value!r}", field=name)
    for name, value in (("invalid_rate", invalid_rate), ("divergence_rate", divergence_rate)):
        if not 0.0 <= value <= 1.0:
            raise DataError(f"{name} must lie in [0, 1], got {value!r}", field=name)
    if granularity is not None and not 0.0 < granularity <= 1.0:
        raise DataError(f"granularity must lie in (0, 1] or be None, got {granularity!r}",
                        field="granularity")
    mix = np.asarray(divergence_mix, np.float64)
    if mix.shape != (4,) or (mix < 0).any() or mix.sum() <= 0:
        raise DataError("divergence_mix must be 4 non-negative weights (self-revert, incumbent "
                        "pull, peer echo, novel) with a positive sum", field="divergence_mix")
    mix = mix / mix.sum()
    rng = np.random.Generator(np.random.PCG64(seed))
    agents = [f"a{i}" for i in range(n_agents)]
    skill = rng.normal(0.0, skill_sd, n_agents)
    tier_idx = np.minimum((np.arange(n_problems) * n_tiers) // n_problems, n_tiers - 1)
    tier_mu = np.linspace(-difficulty_spread / 2, difficulty_spread / 2, n_tiers)
    difficulty = rng.normal(tier_mu[tier_idx], 1.0)
    wrong_weights = 1.0 / np.arange(1, n_wrong_answers + 1)
    wrong_weights /= wrong_weights.sum()
    polls: list[_Poll] = []
    speaks: list[_Speak] = []
    for q in range(n_problems):
        problem, tier = f"p{q:05d}", f"{tier_idx[q] + 1:02d}"
        answers = rng.choice(np.arange(10, 10_000), n_wrong_answers + 1, replace=False)
        gold, wrong = str(answers[0]), [str(a) for a in answers[1:]]
        p_correct = 1.0 / (1.0 + np.exp(-(skill - difficulty[q])))
        incumbent = None
        public: list[tuple[str, str]] = []

        def fresh(i, exclude=None):
            pool = [gold] + wrong
            weights = np.concatenate([[p_correct[i]], (1 - p_correct[i]) * wrong_weights])
            if exclude is not None:
                keep = [k for k, a in enumerate(pool) if a != exclude]
                pool, weights = [pool[k] for k in keep], weights[keep]
            return pool[rng.choice(len(pool), p=weights / weights.sum())]

        for o in range(outer_rounds):
            round_spoken: list[str] = []
            for t in range(turns_per_round):
                y = rng.random(n_agents) < p_correct
                latent = overconfidence + link_strength * (2 * y - 1) + rng.normal(
                    0.0, score_noise, n_agents)
                score = 1.0 / (1.0 + np.exp(-latent))
                if granularity is not None:
                    score = np.clip(np.round(score / granularity) * granularity, 0.0, 1.0)
                parsed = rng.random(n_agents) >= invalid_rate
                wrong_pick = rng.choice(n_wrong_answers, n_agents, p=wrong_weights)
                cands = [(gold if y[i] else wrong[wrong_pick[i]]) if parsed[i] else None
                         for i in range(n_agents)]
                chosen = int(np.argmax(score))           # first listed wins ties
                for i, agent in enumerate(agents):
                    polls.append(_Poll((None, ""), problem, tier, None, o, t, agent,
                                       float(score[i]), cands[i],
                                       None if cands[i] is None else bool(y[i]), i == chosen))
                speaker, poll_cand = agents[chosen], cands[chosen]
                if rng.random() < divergence_rate:
                    source = rng.choice(4, p=mix)
                    options: list[str] = []
                    if source == 0:         # the speaker's own earlier *spoken* answers
                        options = [a for who, a in public if who == speaker and a != poll_cand]
                    elif source == 1 and incumbent is not None and incumbent != poll_cand:
                        options = [incumbent]
                    elif source == 2:
                        options = [a for who, a in public if who != speaker and a != poll_cand]
                    spoken = (options[rng.integers(len(options))] if options
                              else fresh(chosen, exclude=poll_cand))
                elif poll_cand is not None:
                    spoken = poll_cand
                else:
                    spoken = None if rng.random() < invalid_rate else fresh(chosen)
                equivalence = (None if spoken is None or poll_cand is None else
                               "equivalent" if spoken == poll_cand else "divergent")
                speaks.append(_Speak((None, ""), problem, o, t, speaker, spoken,
                                     None if spoken is None else spoken == gold, incumbent,
                                     tuple(public), equivalence,
                                     None if equivalence is None else "exact"))
                if spoken is not None:
                    public.append((speaker, spoken))
                    round_spoken.append(spoken)
            if round_spoken:
                counts: dict[str, int] = {}
                for a in round_spoken:
                    counts[a] = counts.get(a, 0) + 1
                top = max(counts.values())
                incumbent = [a for a in round_spoken if counts[a] == top][-1]
    return _assemble(polls, speaks, error=DataError, cluster_size=cluster_size)


# ================================================================================== ConfMAD
_CONFMAD_PARSERS = {
    "strict": re.compile(r"Answer:\s*\((\d)\)"),
    "lenient": re.compile(r"Answer:\s*(?:\\boxed\{)?\s*\(?(\d)\b"),
}
_GOLD = re.compile(r"^\s*\((\d)\)")
CONFMAD_FALLBACK_SCORE = 50


class ConfmadReport(NamedTuple):
    """What :func:`load_confmad` read: counts over all agent turns (1 turn = 1 poll row)."""

    file: str
    parser: str
    n_problems: int
    n_turns: int
    n_parsed: int          # turns whose option index the parser found
    n_fallback: int        # turns whose confidence is exactly the fallback value 50
    n_correct: int         # parsed turns whose index equals the gold index

    @property
    def parse_rate(self) -> float:
        return self.n_parsed / self.n_turns if self.n_turns else math.nan

    @property
    def accuracy(self) -> float:
        """Per-turn accuracy over parsed turns."""
        return self.n_correct / self.n_parsed if self.n_parsed else math.nan


def _confmad_file(path) -> Path:
    path = Path(path)
    if path.is_dir():
        found = sorted(p for p in path.rglob("*.json") if p.is_file())
        if len(found) != 1:
            raise DataError(f"expected exactly one ConfMAD .json file under {path}, found "
                            f"{len(found)}" + (f": {', '.join(map(str, found[:5]))}" if found
                                               else ""), file=path)
        return found[0]
    return path


def load_confmad(path, *, parser: str = "strict", fallback_as_missing: bool = False,
                 cluster_size: int = 10) -> tuple[BroadcastLog, ConfmadReport]:
    """Read a ConfMAD debate result (JSON list: element 0 the run config, then one object per
    problem with ``ground_truth`` "(k) text" and a ``debate_history`` of agent turns carrying a
    ``response`` and an integer ``"Confidence score"`` 0-100) as an offline-replay broadcast log.

    Reading (no routing happened in ConfMAD; the speaking order is fixed):

    * problem ``k`` (1-based position in the list, after the config) gets the id
      ``f"{task.lower()}-{k:03d}"`` (``task`` from the config, default "confmad"; e.g.
      "mmlu-007"); there is one tier ""; clusters are the default chunks of 10 problems;
    * debate round ``r`` — the history items ``2r`` and ``2r+1``, one turn per agent — is one
      two-candidate block ``(outer_round 0, turn r)``, agents listed in speaking order (rounds of
      more agents are read the same way: ``len(debate_agents)`` items per block);
    * score = confidence / 100 (``fallback_as_missing``: the fallback value 50 becomes NaN);
    * candidate = the option index from ``response`` by the ``"strict"`` regex
      ``Answer:\\s*\\((\\d)\\)`` or the ``"lenient"`` one
      ``Answer:\\s*(?:\\\\boxed\\{)?\\s*\\(?(\\d)\\b`` (first match); correct = index equals
      the gold index; unparsed turns are invalid candidates;
    * ``selected`` replays the runtime argmax (first-listed agent wins ties); no speak records
      (the poll and the public message are the same message).

    ``path``: the .json file, or a folder holding exactly one. Returns ``(log, report)``.
    Malformed content raises :class:`~bda_jax.TraceError` naming the file, the problem (task) and
    the field.
    """
    if parser not in _CONFMAD_PARSERS:
        raise DataError(f"parser must be 'strict' or 'lenient', got {parser!r}", field="parser")
    regex = _CONFMAD_PARSERS[parser]
    file = _confmad_file(path)
    try:
        with open(file, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as err:
        raise TraceError(f"cannot open ConfMAD file: {err.strerror}", file=file) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceError(f"not a JSON document: {err}", file=file) from None
    if not isinstance(data, list) or len(data) < 2 or not isinstance(data[0], dict):
        raise TraceError("expected a JSON list: the run config, then one object per problem",
                         file=file)
    config = data[0]
    agents_cfg = config.get("debate_agents")
    n_per_block = len(agents_cfg) if isinstance(agents_cfg, dict) and agents_cfg else 2
    task = config.get("task") if isinstance(config.get("task"), str) else "confmad"
    polls: list[_Poll] = []
    n_fallback = n_correct = 0
    for k, item in enumerate(data[1:], 1):
        problem = f"{task.lower()}-{k:03d}"

        def bad(reason, fld):
            return TraceError(f"element {k}: {reason}", file=file, task_id=problem, field=fld)

        if not isinstance(item, dict):
            raise bad(f"a problem must be a JSON object, got {type(item).__name__}", None)
        gold_text = item.get("ground_truth")
        gold_match = _GOLD.match(gold_text) if isinstance(gold_text, str) else None
        if gold_match is None:
            raise bad(f"ground_truth must read '(k) option text', got {_short(gold_text)}",
                      "ground_truth")
        gold = gold_match.group(1)
        history = item.get("debate_history")
        if not isinstance(history, list) or not history or len(history) % n_per_block:
            raise bad(f"debate_history must be a non-empty list of a multiple of {n_per_block} "
                      "turns", "debate_history")
        for j, turn in enumerate(history):
            fld = f"debate_history[{j}]"
            if not isinstance(turn, dict):
                raise bad("a turn must be a JSON object", fld)
            agent, response = turn.get("agent_name"), turn.get("response")
            conf = turn.get("Confidence score")
            if not isinstance(agent, str) or not agent:
                raise bad(f"agent_name must be a non-empty string, got {_short(agent)}",
                          fld + ".agent_name")
            if not isinstance(response, str):
                raise bad(f"response must be a string, got {type(response).__name__}",
                          fld + ".response")
            if not _is_int(conf) or not 0 <= conf <= 100:
                raise bad(f"Confidence score must be an integer in [0, 100], got {_short(conf)}",
                          fld + ".Confidence score")
            n_fallback += conf == CONFMAD_FALLBACK_SCORE
            score = (math.nan if fallback_as_missing and conf == CONFMAD_FALLBACK_SCORE
                     else conf / 100.0)
            m = regex.search(response)
            candidate = None if m is None else m.group(1)
            correct = None if candidate is None else candidate == gold
            n_correct += bool(correct)
            polls.append(_Poll((None, f"element {k}, {fld}"), problem, None, None, 0,
                               j // n_per_block, agent, score, candidate, correct, False))
    log = _assemble(polls, [], error=TraceError, file=str(file), cluster_size=cluster_size)
    log = dataclasses.replace(log, selected=runtime_argmax(log))
    n_parsed = sum(p.candidate is not None for p in polls)
    report = ConfmadReport(str(file), parser, len(data) - 1, len(polls), n_parsed, n_fallback,
                           n_correct)
    return log, report
