"""Deliberation traces: the ``Move``/``Trace`` types, JSON Lines I/O and the protocol automaton.

Trace format (docs/trace-format.md): one JSON object per line, one task per object::

    {"task_id": "q17", "candidates": ["A", "B"], "gold": "B", "cluster": "q17",
     "moves": [{"id": "m1", "agent": "gemma", "round": 0, "force": "propose", "answer": "B"}, ...]}

The automaton (:func:`resolve_trace`) walks the moves in file order (file order is time) and turns
each admissible move into at most one *signed endorsement* of a candidate ([BDA] §3 and the
force table of Appendix D.7):

========================  ====  ==========================================
force                     sign  endorsed candidate
========================  ====  ==========================================
propose, vote             +1    its own ``answer``
concede (another agent)   +1    the target's answer (chains are followed)
challenge (another's)     -1    the target's answer
challenge (own move)      -1    treated as a retract of that answer
retract                   -1    one's own earlier answer (``target`` or ``answer``)
self-concede, abstain     none  (no information)
========================  ====  ==========================================

Stated confidences are carried for the baselines only; BDA never reads them (Property 3).

Identities (docs/trace-format.md, "Identities"): an ``answer`` (or ``gold``) that is empty or
whitespace only is no answer -- read as if absent, like an ``"empty"`` DASE answer or a null
broadcast-log candidate -- so a propose or vote with one is inadmissible (``missing_answer``,
field ``answer``: a :class:`TraceError` in strict mode, skipped in lenient mode); so is an answer
the normalizer maps to ``""`` (``$$``, ``\\boxed{}``). A candidate that is empty after
normalization is a task-level error. Agent ids are read through
:func:`~bda_jax._core.normalize.normalize_id` (NFKC, then stripped), so two spellings of one
agent (``"gemma"``, ``" gemma"``, fullwidth ``"ｇｅｍｍａ"``) are one agent, stored in that
canonical form; task ids, move ids and targets are compared exactly as written. A JSON object
that repeats a key is an error naming the key.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .errors import DataError, TraceError
from .io import atomic_write, read_json_lines
from .normalize import Normalizer, default_normalizer, normalize_id

__all__ = [
    "FORCES", "Move", "Trace", "ResolvedTrace", "SkippedMove", "read_traces", "trace_line",
    "write_traces",
    "parse_trace", "resolve_trace", "skipped_summary",
]

#: Move fields in :class:`Move` order (``extra`` aside).
MOVE_FIELDS = ("id", "agent", "round", "force", "answer", "target", "confidence")

FORCES = ("propose", "vote", "concede", "challenge", "retract", "abstain")
_MOVE_KEYS = ("id", "agent", "round", "force", "answer", "target", "confidence")
_TASK_KEYS = ("task_id", "candidates", "gold", "cluster", "moves")


def _blank(value) -> bool:
    """An empty or whitespace-only string: no answer."""
    return isinstance(value, str) and not value.strip()


@dataclass(frozen=True)
class Move:
    """One typed move of a deliberation. ``extra`` keeps unknown keys (e.g. free text) verbatim."""

    id: str
    agent: str
    round: int
    force: str
    answer: str | None = None
    target: str | None = None
    confidence: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "agent": self.agent, "round": self.round,
                               "force": self.force}
        for key in ("answer", "target", "confidence"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class SkippedMove:
    """A move that lenient mode left out, and why (``code`` is a stable machine-readable reason)."""

    move_id: str | None
    code: str
    reason: str
    field: str | None = None


@dataclass(frozen=True)
class Trace:
    """One task's deliberation.

    ``candidates`` is the candidate list as given (``None``: the answers that appear in the moves,
    first seen first). ``gold`` is never added to the candidates: a gold that is not a candidate
    is scored wrong. ``skipped`` lists moves dropped by lenient reading.
    """

    task_id: str
    moves: tuple[Move, ...]
    candidates: tuple[str, ...] | None = None
    gold: str | None = None
    cluster: str | None = None
    skipped: tuple[SkippedMove, ...] = field(default=(), compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    source: tuple[str | None, int | None] = field(default=(None, None), compare=False, repr=False)

    def __getattr__(self, name):
        # A trace read by the fast reader (docs/scale.md) builds its Move objects on first
        # access: ``_chunk.moves_of(_row)`` (:func:`lazy_trace`).
        if name == "moves":
            d = self.__dict__
            chunk = d.get("_chunk")
            if chunk is not None:
                moves = d["moves"] = chunk.moves_of(d["_row"])
                return moves
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_json(self) -> dict:
        out: dict[str, Any] = {"task_id": self.task_id}
        if self.candidates is not None:
            out["candidates"] = list(self.candidates)
        if self.gold is not None:
            out["gold"] = self.gold
        if self.cluster is not None:
            out["cluster"] = self.cluster
        out["moves"] = [m.to_json() for m in self.moves]
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class ResolvedTrace:
    """What the automaton extracts from one trace; the only input :func:`bda_jax.tally` reads.

    ``candidates`` are display strings, ``keys`` their normalized forms (same order). Each
    informative move contributes one entry to the parallel tuples ``agent``, ``cand``, ``sign``,
    ``round`` and ``confidence`` (NaN where none was stated).
    """

    task_id: str
    candidates: tuple[str, ...]
    keys: tuple[str, ...]
    gold: int            # -1: unlabeled or gold not a candidate
    gold_missing: bool   # gold given but not a candidate
    cluster: str
    agent: tuple[str, ...]
    cand: tuple[int, ...]
    sign: tuple[int, ...]
    round: tuple[int, ...]
    confidence: tuple[float, ...]
    moves: tuple[str, ...]   # ids of the informative moves, parallel to the tuples above
    force: tuple[str, ...]   # their forces, parallel to the tuples above
    skipped: tuple[SkippedMove, ...]
    admissible: tuple[Move, ...] = ()   # the moves the automaton kept, in file order


class _Inadmissible(Exception):
    def __init__(self, code: str, reason: str, field: str | None = None):
        super().__init__(reason)
        self.code, self.reason, self.field = code, reason, field


# ----------------------------------------------------------------------------------- parsing
MAX_ROUND = 2**31 - 1   # the largest round a move may state


def _short(value, limit: int = 60) -> str:
    """repr of a user value, cut to ``limit`` characters for error messages."""
    text = repr(value) if not (_is_int(value) and abs(value) > 10**limit) else "a huge integer"
    return text if len(text) <= limit else text[:limit] + "..."


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _id_str(x, what: str, fld: str) -> str:
    if isinstance(x, str) and x.strip():
        return x
    if _is_int(x) and abs(x) < 2**63:
        return str(x)
    raise _Inadmissible("bad_type", f"{what} must be a non-empty string (or an integer below "
                        f"2**63), got {type(x).__name__} {_short(x)}", fld)


def _parse_move(raw, position: int) -> Move:
    """Structural checks of one move (types, ranges); raises ``_Inadmissible``."""
    if not isinstance(raw, dict):
        raise _Inadmissible("bad_type", f"move #{position} must be a JSON object, "
                            f"got {type(raw).__name__}")
    if "id" not in raw:
        raise _Inadmissible("missing_id", "move has no 'id'", "id")
    move_id = _id_str(raw["id"], "move id", "id")
    try:
        if "force" not in raw:
            raise _Inadmissible("missing_force", "move has no 'force'", "force")
        force = raw["force"]
        if not isinstance(force, str):
            raise _Inadmissible("bad_type", f"force must be a string, got {type(force).__name__}",
                                "force")
        force = force.strip().lower()
        if force not in FORCES:
            raise _Inadmissible("unknown_force", f"unknown force {raw['force']!r}; expected one "
                                f"of {', '.join(FORCES)}", "force")
        if "agent" not in raw or raw["agent"] is None:
            raise _Inadmissible("missing_agent", "move has no 'agent'", "agent")
        agent = raw["agent"]
        if isinstance(agent, str):            # one agent, one id: NFKC, stripped
            agent = agent.strip() if agent.isascii() else normalize_id(agent)
        if not isinstance(agent, str) or not agent:
            raise _Inadmissible("bad_type", f"agent must be a non-empty string, got "
                                f"{_short(raw['agent'])}", "agent")
        if "round" not in raw:
            raise _Inadmissible("bad_round", "move has no 'round'", "round")
        rnd = raw["round"]
        if not _is_int(rnd) or not 0 <= rnd <= MAX_ROUND:
            raise _Inadmissible("bad_round", "round must be a non-negative integer (at most "
                                f"{MAX_ROUND}), got {_short(rnd)}", "round")
        answer = raw.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise _Inadmissible("bad_type", f"answer must be a string, got "
                                f"{type(answer).__name__} {_short(answer)}", "answer")
        blank_answer = answer is not None and not answer.strip()
        if blank_answer:
            answer = None                      # an empty answer is no answer
        target = raw.get("target")
        if target is not None:
            target = _id_str(target, "target", "target")
        conf = raw.get("confidence")
        if conf is not None:
            if not isinstance(conf, (int, float)) or isinstance(conf, bool):
                raise _Inadmissible("bad_confidence", f"confidence must be a number in [0, 1], "
                                    f"got {type(conf).__name__} {conf!r}", "confidence")
            if not (math.isfinite(conf) if isinstance(conf, float) else True) \
                    or not 0 <= conf <= 1:
                raise _Inadmissible("bad_confidence", f"confidence must be in [0, 1], got "
                                    f"{_short(conf)}", "confidence")
            conf = float(conf)
        if force in ("propose", "vote"):
            if answer is None:
                raise _Inadmissible("missing_answer", f"a {force} needs an 'answer'"
                                    + (f"; got {_short(raw['answer'])}, and an empty answer is "
                                       "no answer" if blank_answer else ""), "answer")
            if target is not None:
                raise _Inadmissible("unexpected_field", f"a {force} takes no 'target'", "target")
        elif force in ("concede", "challenge"):
            if target is None:
                raise _Inadmissible("missing_target", f"a {force} needs a 'target'", "target")
            if force == "challenge" and answer is not None:
                raise _Inadmissible("unexpected_field", "a challenge takes no 'answer' (it rejects "
                                    "its target's answer)", "answer")
        elif force == "retract":
            if target is None and answer is None:
                raise _Inadmissible("missing_target", "a retract needs a 'target' or an 'answer'",
                                    "target")
        else:  # abstain
            for key, value in (("answer", answer), ("target", target)):
                if value is not None:
                    raise _Inadmissible("unexpected_field", f"an abstain takes no {key!r}", key)
    except _Inadmissible as err:
        err.move_id = move_id
        raise
    extra = {k: v for k, v in raw.items() if k not in _MOVE_KEYS}
    return Move(move_id, agent, rnd, force, answer, target, conf, extra)


def parse_trace(raw, *, lenient: bool = False, file=None, line=None) -> Trace:
    """Build a :class:`Trace` from a decoded JSON object, checking every field's type.

    Task-level problems always raise :class:`TraceError`; move-level problems raise too unless
    ``lenient``, in which case the move is skipped and recorded in ``Trace.skipped``. Protocol
    admissibility (targets, candidates, rounds) is checked by :func:`resolve_trace`.

    Identities (module docstring): agent ids come back NFKC-normalized and stripped; an empty
    or whitespace-only ``answer`` reads as absent (a propose or vote without one is
    ``missing_answer``, field ``answer``), an empty ``gold`` as unlabeled, and an empty candidate
    is a task-level error.
    """
    where = dict(file=file, line=line)
    if not isinstance(raw, dict):
        raise TraceError(f"a task must be a JSON object, got {type(raw).__name__}", **where)
    if "task_id" not in raw or raw["task_id"] is None:
        raise TraceError("task has no 'task_id'", field="task_id", **where)
    try:
        task_id = _id_str(raw["task_id"], "task_id", "task_id")
    except _Inadmissible as err:
        raise TraceError(err.reason, field="task_id", **where) from None
    where["task_id"] = task_id
    cands = raw.get("candidates")
    if cands is not None:
        if not isinstance(cands, list) or not all(isinstance(c, str) for c in cands):
            raise TraceError("candidates must be a list of strings", field="candidates", **where)
        if not cands:
            raise TraceError("candidates is empty", field="candidates", **where)
        for k, cand in enumerate(cands):
            if _blank(cand):
                raise TraceError(f"candidate #{k} is {cand!r}: an empty answer is no answer, so "
                                 "it cannot be a candidate", field="candidates", **where)
        cands = tuple(cands)
    gold = raw.get("gold")
    if gold is not None and not isinstance(gold, str):
        raise TraceError(f"gold must be a string or null, got {type(gold).__name__} "
                         f"{_short(gold)}", field="gold", **where)
    if _blank(gold):
        gold = None                      # an empty gold is no gold: the task is unlabeled
    cluster = raw.get("cluster")
    if cluster is not None:
        try:
            cluster = _id_str(cluster, "cluster", "cluster")
        except _Inadmissible as err:
            raise TraceError(err.reason, field="cluster", **where) from None
    if "moves" not in raw:
        raise TraceError("task has no 'moves'", field="moves", **where)
    raw_moves = raw["moves"]
    if not isinstance(raw_moves, list):
        raise TraceError(f"moves must be a list, got {type(raw_moves).__name__}", field="moves",
                         **where)
    if not raw_moves:
        raise TraceError("moves is empty", field="moves", **where)
    moves, skipped = [], []
    for position, raw_move in enumerate(raw_moves):
        try:
            moves.append(_parse_move(raw_move, position))
        except _Inadmissible as err:
            move_id = getattr(err, "move_id", None)
            if not lenient:
                raise TraceError(err.reason, move_id=move_id, field=err.field, **where) from None
            skipped.append(SkippedMove(move_id, err.code, err.reason, err.field))
    extra = {k: v for k, v in raw.items() if k not in _TASK_KEYS}
    trace = Trace(task_id, tuple(moves), cands, gold, cluster, tuple(skipped), extra, (file, line))
    return mark_field_checked(trace)


def moves_from_columns(ids, agents, rounds, forces, answers, targets, confidences
                       ) -> tuple[Move, ...]:
    """:class:`Move` objects from parallel columns of checked values (``extra`` empty), as
    ``tuple(map(Move, ids, agents, ...))`` builds them but without the frozen ``__init__``'s
    per-field ``object.__setattr__`` (the fast reader's lazy moves)."""
    new = object.__new__
    out = []
    for values in zip(ids, agents, rounds, forces, answers, targets, confidences):
        move = new(Move)
        d = move.__dict__
        d.update(zip(MOVE_FIELDS, values))
        d["extra"] = {}
        out.append(move)
    return tuple(out)


_LAZY_TRACE = {"task_id": None, "candidates": None, "gold": None, "cluster": None,
               "skipped": (), "_parsed": True, "extra": None, "source": None,
               "_chunk": None, "_row": None}


def lazy_trace(task_id: str, candidates, gold, cluster, source, fast) -> Trace:
    """A field-checked :class:`Trace` whose ``moves`` are built on first access by
    ``fast[0].moves_of(fast[1])`` (the fast reader's traces; ``skipped`` and ``extra`` empty).
    ``fast`` is kept as ``_chunk`` and ``_row`` for :func:`bda_jax.tally`:
    ``_chunk.resolution(...)`` gives resolved columns that stand for :func:`resolve_trace`'s
    result (docs/scale.md)."""
    return lazy_traces([task_id], [candidates], [gold], [cluster], [source], fast[0],
                       [fast[1]])[0]


def lazy_traces(task_ids, candidates, golds, clusters, sources, chunk, index) -> list[Trace]:
    """``[lazy_trace(task_ids[k], candidates[k], golds[k], clusters[k], sources[k], (chunk,
    index[k])) for k ...]`` over parallel columns (iterables of one length), without a call
    per trace: each trace's attributes are a copy of one template dict (and no tuple per
    trace: the cyclic collector has two objects per trace to look at, not three)."""
    new, set_dict, copy = object.__new__, object.__setattr__, _LAZY_TRACE.copy
    out = []
    append = out.append
    for task_id, cands, gold, cluster, source, j in zip(task_ids, candidates, golds, clusters,
                                                         sources, index):
        d = copy()
        d["task_id"], d["candidates"], d["gold"], d["cluster"] = task_id, cands, gold, cluster
        d["extra"], d["source"] = {}, source
        d["_chunk"], d["_row"] = chunk, j
        trace = new(Trace)
        set_dict(trace, "__dict__", d)
        append(trace)
    return out


def field_checked(trace: Trace) -> bool:
    """Whether ``trace``'s field types were checked (:func:`mark_field_checked`): its fields are
    in their parsed, canonical form."""
    return bool(trace.__dict__.get("_parsed"))


def mark_field_checked(trace: Trace) -> Trace:
    """Record that ``trace``'s field types were checked (by :func:`parse_trace`, or by an
    importer that built it from typed columns), so :func:`resolve_trace` runs the protocol
    automaton without re-parsing it. Returns the trace."""
    trace.__dict__["_parsed"] = True
    return trace


# ----------------------------------------------------------------------------------- automaton
def resolve_trace(trace: Trace, *, normalizer: Normalizer = default_normalizer,
                  lenient: bool = False, abstain_candidate: str | None = None) -> ResolvedTrace:
    """Memoized front of :func:`_resolve_trace` (the result is cached on the trace object)."""
    cache = trace.__dict__.setdefault("_resolved_cache", {})
    key = (normalizer, lenient) if abstain_candidate is None else (normalizer, lenient,
                                                                     abstain_candidate)
    if key not in cache:
        cache.clear()
        cache[key] = _resolve_trace(trace, normalizer=normalizer, lenient=lenient,
                                    abstain_candidate=abstain_candidate)
    return cache[key]


def _resolve_trace(trace: Trace, *, normalizer: Normalizer = default_normalizer,
                   lenient: bool = False, abstain_candidate: str | None = None) -> ResolvedTrace:
    """Run the protocol automaton over one trace (docs/trace-format.md; [BDA] §3, Appendix D.7).

    Checks admissibility in file order (time): unique move ids; rounds never decrease per agent;
    a target exists, comes earlier and resolves to an answer (a concede of a concede follows the
    chain); answers lie in the candidate set; a retract names the agent's own earlier answer.
    Returns the informative moves as signed endorsements. With ``lenient`` an inadmissible move is
    skipped (and so are moves that target it) and recorded with its reason.

    ``abstain_candidate`` (opt-in, e.g. ``"unknown"``) makes "I don't know" an explicit
    candidate: it is appended to every task's candidate set and each abstain endorses it (+1).
    By default an abstain carries no information.

    An answer that ``normalizer`` maps to ``""`` is no answer: a propose or vote (or a retract
    without a target) with one is inadmissible (``missing_answer``, field ``answer``); on a
    concede or a targeted retract it is ignored, as if absent. A candidate that normalizes to
    ``""`` raises; a gold that does leaves the task unlabeled.
    """
    if not field_checked(trace):
        # built in memory: check every field's type exactly as a file would be checked
        parsed = parse_trace(trace.to_json(), lenient=lenient)
        trace = dataclasses.replace(parsed, skipped=trace.skipped + parsed.skipped)
    file, line = trace.source
    where = dict(file=file, line=line, task_id=trace.task_id)

    # Candidate set: given (normalized keys must be unique) or first-seen answers.
    if trace.candidates is not None:
        keys = [normalizer(c) for c in trace.candidates]
        seen: dict[str, int] = {}
        for idx, key in enumerate(keys):
            if key == "":
                raise TraceError(f"candidate {trace.candidates[idx]!r} is empty after "
                                 "normalization: an empty answer is no answer, so it cannot be a "
                                 "candidate", field="candidates", **where)
            if key in seen:
                raise TraceError(f"candidates {trace.candidates[seen[key]]!r} and "
                                 f"{trace.candidates[idx]!r} collide after normalization "
                                 f"(both {key!r})", field="candidates", **where)
            seen[key] = idx
        display = list(trace.candidates)
        fixed = True
    else:
        keys, display, seen, fixed = [], [], {}, False

    def candidate_index(answer: str, key: str | None = None) -> int:
        key = normalizer(answer) if key is None else key
        if key in seen:
            return seen[key]
        if fixed:
            raise _Inadmissible("answer_not_candidate", f"answer {answer!r} is not one of the "
                                f"candidates {list(trace.candidates)}", "answer")
        seen[key] = len(keys)          # tentative until the move is found admissible
        keys.append(key)
        display.append(answer)
        return seen[key]

    def rollback(n_keys: int) -> None:   # forget answers first seen in a skipped move
        for key in keys[n_keys:]:
            del seen[key]
        del keys[n_keys:], display[n_keys:]

    unknown_index = None
    if abstain_candidate is not None:
        key = normalizer(abstain_candidate) if isinstance(abstain_candidate, str) else ""
        if key == "":
            raise DataError(f"abstain_candidate must be a non-empty answer, got "
                            f"{abstain_candidate!r}", field="abstain_candidate")
        if key not in seen:
            seen[key] = len(keys)
            keys.append(key)
            display.append(abstain_candidate)
        unknown_index = seen[key]

    skipped = list(trace.skipped)
    all_ids = {m.id for m in trace.moves}
    skipped_ids = {s.move_id for s in skipped if s.move_id is not None}
    moves_by_id: dict[str, Move] = {}
    answer_of: dict[str, int | None] = {}     # admissible move id -> answer it stands for
    last_round: dict[str, int] = {}
    endorsed: dict[str, set[int]] = {}        # agent -> candidates it has endorsed positively
    admissible: list[Move] = []
    out_agent, out_cand, out_sign, out_round, out_conf, out_ids, out_force = ([] for _ in range(7))

    seen_ids: set[str] = set()
    for move in trace.moves:
        duplicate = move.id in seen_ids
        seen_ids.add(move.id)
        n_keys = len(keys)
        try:
            if duplicate:
                raise _Inadmissible("duplicate_move_id", f"move id {move.id!r} is used twice",
                                    "id")
            if move.agent in last_round and move.round < last_round[move.agent]:
                raise _Inadmissible("round_decreasing", f"round {move.round} comes after round "
                                    f"{last_round[move.agent]} for agent {move.agent!r}", "round")
            target = None
            if move.target is not None:
                if move.target in moves_by_id:
                    target = moves_by_id[move.target]
                elif move.target in skipped_ids:
                    raise _Inadmissible("target_skipped", f"target {move.target!r} was skipped "
                                        "as inadmissible", "target")
                elif move.target in all_ids:
                    raise _Inadmissible("target_not_earlier", f"target {move.target!r} does not "
                                        "come earlier in the trace", "target")
                else:
                    raise _Inadmissible("unknown_target", f"target {move.target!r} is not a move "
                                        "of this task", "target")
            sign, cand = 0, None
            force = move.force
            akey = None if move.answer is None else (normalizer(move.answer) or None)
            answer = move.answer if akey is not None else None   # "" after normalizing: none
            if force in ("propose", "vote"):
                if answer is None:
                    raise _Inadmissible("missing_answer", f"a {force} needs an 'answer'; got "
                                        f"{_short(move.answer)}, which is empty after "
                                        "normalization (an empty answer is no answer)", "answer")
                cand, sign = candidate_index(answer, akey), +1
            elif force == "concede":
                cand = answer_of[target.id]
                if cand is None:
                    raise _Inadmissible("target_without_answer", f"concede target {target.id!r} "
                                        f"({target.force}) carries no answer", "target")
                if answer is not None and candidate_index(answer, akey) != cand:
                    raise _Inadmissible("answer_mismatch", f"concede answer {answer!r} "
                                        f"differs from its target's answer {display[cand]!r}",
                                        "answer")
                sign = 0 if target.agent == move.agent else +1   # self-concede: no information
            elif force == "challenge":
                cand = answer_of[target.id]
                if cand is None:
                    raise _Inadmissible("target_without_answer", f"challenge target "
                                        f"{target.id!r} ({target.force}) carries no answer",
                                        "target")
                sign = -1     # a self-challenge is a retract of the same answer: also -1
            elif force == "retract":
                if target is not None:
                    if target.agent != move.agent:
                        raise _Inadmissible("retract_not_own", f"retract target {target.id!r} "
                                            f"belongs to agent {target.agent!r}", "target")
                    cand = answer_of[target.id]
                    if cand is None:
                        raise _Inadmissible("target_without_answer", f"retract target "
                                            f"{target.id!r} carries no answer", "target")
                    if answer is not None and candidate_index(answer, akey) != cand:
                        raise _Inadmissible("answer_mismatch", f"retract answer {answer!r} "
                                            f"differs from its target's answer", "answer")
                else:
                    if answer is None:
                        raise _Inadmissible("missing_answer", "a retract without a 'target' "
                                            f"needs an 'answer'; got {_short(move.answer)}, "
                                            "which is empty after normalization", "answer")
                    cand = candidate_index(answer, akey)
                    if cand not in endorsed.get(move.agent, ()):
                        raise _Inadmissible("retract_unendorsed", f"agent {move.agent!r} never "
                                            f"endorsed {answer!r}, so cannot retract it",
                                            "answer")
                sign = -1
            elif force == "abstain" and abstain_candidate is not None:
                cand, sign = unknown_index, +1
        except _Inadmissible as err:
            if not lenient:
                raise TraceError(err.reason, move_id=move.id, field=err.field, **where) from None
            skipped.append(SkippedMove(move.id, err.code, err.reason, err.field))
            rollback(n_keys)
            if not duplicate:
                skipped_ids.add(move.id)
            continue
        moves_by_id[move.id] = move
        admissible.append(move)
        answer_of[move.id] = cand if force in ("propose", "vote", "concede") else None
        last_round[move.agent] = move.round
        if sign > 0:
            endorsed.setdefault(move.agent, set()).add(cand)
        if sign != 0:
            out_agent.append(move.agent)
            out_cand.append(cand)
            out_sign.append(sign)
            out_round.append(move.round)
            out_conf.append(math.nan if move.confidence is None or sign < 0 else move.confidence)
            out_ids.append(move.id)
            out_force.append(force)

    if not keys:
        raise TraceError("the task has no candidates: give 'candidates' or at least one move "
                         "with an answer", field="candidates", **where)
    gold, gold_missing = -1, False
    gkey = None if trace.gold is None else normalizer(trace.gold)
    if gkey:                                # None or "": unlabeled (an empty gold is no gold)
        if gkey in seen:
            gold = seen[gkey]
        else:
            gold_missing = True
    cluster = trace.cluster if trace.cluster is not None else trace.task_id
    return ResolvedTrace(trace.task_id, tuple(display), tuple(keys), gold, gold_missing, cluster,
                         tuple(out_agent), tuple(out_cand), tuple(out_sign), tuple(out_round),
                         tuple(out_conf), tuple(out_ids), tuple(out_force), tuple(skipped),
                         tuple(admissible))


# ----------------------------------------------------------------------------------- file I/O
def checked_traces(path, lines, normalizer: Normalizer = default_normalizer,
                   lenient: bool = False) -> Iterator[tuple["Trace", "ResolvedTrace"]]:
    """The per-line checks of :func:`read_traces`, one trace at a time: parse each decoded line
    (``lines``: ``(line number, value)`` pairs), refuse a duplicate task id, run the protocol
    automaton; yields ``(trace, resolved)`` with lenient skips recorded on the trace."""
    first_line: dict[str, int] = {}
    for lineno, raw in lines:
        yield check_trace(path, lineno, raw, first_line, normalizer, lenient)


def check_trace(path, lineno: int, raw, first_line: dict, normalizer: Normalizer = default_normalizer,
                lenient: bool = False) -> tuple["Trace", "ResolvedTrace"]:
    """One step of :func:`checked_traces`: parse the decoded line ``raw``, refuse a task id
    already in ``first_line`` (task id -> line, updated), run the protocol automaton."""
    trace = parse_trace(raw, lenient=lenient, file=path, line=lineno)
    if trace.task_id in first_line:
        raise TraceError(f"duplicate task_id (first on line {first_line[trace.task_id]})",
                         file=path, line=lineno, task_id=trace.task_id, field="task_id")
    first_line[trace.task_id] = lineno
    resolved = resolve_trace(trace, normalizer=normalizer, lenient=lenient)
    if len(resolved.skipped) != len(trace.skipped):
        trace = dataclasses.replace(trace, moves=resolved.admissible, skipped=resolved.skipped)
        mark_field_checked(trace).__dict__["_resolved_cache"] = {(normalizer, lenient): resolved}
    return trace, resolved


def read_traces(path, *, lenient: bool = False,
                normalizer: Normalizer = default_normalizer,
                workers: int | None = None) -> list[Trace]:
    """Read and validate a JSON Lines trace file (blank lines are ignored).

    Every task is parsed and run through the protocol automaton, so a returned list is known to be
    admissible. Strict mode (default) raises :class:`TraceError` at the first problem, naming
    file, line, task, move and field. ``lenient=True`` skips inadmissible moves, records them in
    each ``Trace.skipped`` and warns with a per-reason summary (:func:`skipped_summary`);
    task-level problems (bad JSON, a key repeated within one object, duplicate task ids, ...)
    still raise.

    Identities: agent ids are NFKC-normalized and stripped (two spellings, one agent), an empty
    answer is no answer, and answers are compared after ``normalizer`` (:func:`parse_trace`,
    :func:`resolve_trace`; docs/trace-format.md).

    Speed (docs/scale.md): lines are decoded by a compiled JSON decoder into typed records and
    the automaton runs over a chunk's moves as arrays; a task that does not pass every fast
    check (a move the automaton would refuse or skip, an unknown key, an integer id, a repeated
    key, ...) is read by :func:`parse_trace` and :func:`resolve_trace` as it stands, so results,
    errors and lenient skips are those of the line-by-line reader. The ``moves`` of a trace are
    built on first access; :func:`bda_jax.tally` reads the resolved columns directly. The
    cyclic garbage collector is paused during the read (restored afterwards).

    ``workers``: processes that parse the file, this one and ``workers - 1`` parse worker
    processes, as in :func:`bda_jax.tally_stream` (``None``: automatic, by file size and the
    CPUs this process may use, capped by ``$BDA_JAX_PARSE_WORKERS``; ``1``: this process
    alone). Any number of workers gives the same traces, errors and warnings.
    """
    path = os.fspath(path)
    from .fastparse import check_workers, read_checked_traces   # builds on this module
    traces = read_checked_traces(path, normalizer, lenient, workers=check_workers(workers))
    return _finish_read(path, traces, lenient)


def _read_traces_reference(path, *, lenient: bool = False,
                           normalizer: Normalizer = default_normalizer) -> list[Trace]:
    """:func:`read_traces` line by line (``json`` with a repeated-key hook, :func:`parse_trace`,
    :func:`resolve_trace` per task): the reference the fast reader is tested against."""
    path = os.fspath(path)
    traces = [trace for trace, _ in checked_traces(
        path, read_json_lines(path, TraceError, "trace file"), normalizer, lenient)]
    return _finish_read(path, traces, lenient, stacklevel=3)


def _finish_read(path, traces: list, lenient: bool, stacklevel: int = 3) -> list[Trace]:
    if not traces:
        raise TraceError("the file holds no task", file=path)
    if lenient:
        summary = skipped_summary(traces)
        if summary:
            total = sum(summary.values())
            detail = ", ".join(f"{code}: {n}" for code, n in sorted(summary.items()))
            warnings.warn(f"{path}: lenient mode skipped {total} inadmissible move(s) ({detail})",
                          stacklevel=stacklevel)
    return traces


def skipped_summary(traces: Iterable[Trace]) -> dict[str, int]:
    """Count the moves lenient reading skipped, by reason code."""
    return dict(Counter(s.code for t in traces for s in t.skipped))


def trace_line(trace: Trace, path=None) -> str:
    """One trace as its JSON Lines line (no newline): UTF-8 text, lone surrogates kept as JSON
    escapes; a value JSON cannot hold is a :class:`TraceError` naming ``path`` and the task."""
    try:
        line = json.dumps(trace.to_json(), ensure_ascii=False, allow_nan=False)
        line.encode("utf-8")
    except UnicodeEncodeError:   # lone surrogates: keep them as JSON escapes
        line = json.dumps(trace.to_json(), ensure_ascii=True, allow_nan=False)
    except (ValueError, TypeError) as err:
        raise TraceError(f"cannot write the trace as JSON: {err}", file=path,
                         task_id=getattr(trace, "task_id", None)) from None
    return line


def write_traces(traces: Sequence[Trace], path) -> None:
    """Write traces as JSON Lines, atomically: a failure leaves no half-written file behind."""
    path = os.fspath(path)

    def write(handle):
        for trace in traces:
            handle.write(trace_line(trace, path))
            handle.write("\n")

    atomic_write(path, write, suffix=".jsonl")
