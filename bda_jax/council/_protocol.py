"""The protocol automaton of a live council ([BDA] §5, Appendix D.7).

A task runs in rounds. Round 0 is the propose round: every seat makes exactly one move, a
``propose``. Each later round every seat again makes exactly one move: ``propose`` (a candidate),
``concede`` (to another seat's earlier move) or ``challenge`` (another seat's earlier move), plus
whichever of ``retract`` (one's own earlier move), ``vote`` and ``abstain`` the config enables.
The moves of one round are simultaneous: a seat sees, and may target, the moves of earlier
rounds only, so the order in which a runner asks the seats of a round changes nothing. Targets
are moves that resolve to an answer (propose, vote, concede), as the trace format requires.

Seats are shown to each other under anonymized labels ("Agent 1", ...), a permutation drawn per
(task, sample) from the config seed. :func:`to_trace` turns a finished task into a
:class:`~bda_jax.Trace` that strict :func:`~bda_jax.read_traces` accepts.

Speed (``benchmarks/bench_runner.py``): a caller that has a seat's :func:`legal_moves` already
passes them to :func:`apply_move` (``legal=``) instead of having them made twice; candidates are
matched through one table per candidate set (:func:`candidate_of`); :func:`to_trace` builds
the trace of moves the automaton appended itself without re-parsing them, and falls back to
:func:`~bda_jax._core.traces.parse_trace` for everything else.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _json_string
from types import MappingProxyType
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .._core.errors import BdaError
from .._core.normalize import default_normalizer, normalize_id
from .._core.traces import (FORCES, MAX_ROUND, MOVE_FIELDS, Move, Trace, mark_field_checked,
                            parse_trace, resolve_trace)
from ._config import EXTRA_FORCES
from ._questions import Question

if TYPE_CHECKING:
    from ._schema import MoveReply

__all__ = ["LegalMoves", "TaskState", "IllegalMove", "new_task_state", "legal_moves",
           "apply_move", "record_abstain", "next_round", "to_trace", "trace_task_id", "label_seed",
           "candidate_of", "ANSWER_FORCES", "TARGET_FORCES"]

ANSWER_FORCES = ("propose", "vote")
TARGET_FORCES = ("concede", "challenge", "retract")
_RESOLVES = ("propose", "vote", "concede")     # forces whose move stands for an answer
_NEW = object.__new__


class IllegalMove(BdaError):
    """A move the protocol does not allow now (wrong force, target, answer, seat or round)."""


@dataclass(frozen=True)
class LegalMoves:
    """What one seat may do now.

    ``forces``: the legal forces (trace-format order); ``answers``: the candidates a propose or
    vote may name (``()`` with ``open_answers``: any non-empty string); ``targets``: move ids a
    concede, challenge or retract may target; ``own_targets``: those of ``targets`` that are the
    seat's own moves (legal for retract only; never for concede or challenge). No forces: the
    seat has already moved this round."""

    forces: tuple[str, ...]
    answers: tuple[str, ...]
    targets: tuple[str, ...]
    own_targets: tuple[str, ...] = ()
    open_answers: bool = False


@dataclass
class TaskState:
    """One (task, sample) in progress: the question, the seat names in config order, each seat's
    anonymized label, the current round, the moves so far (time order), the sample index and the
    extra forces enabled by default (``legal_moves`` / ``apply_move`` with ``extra_forces=None``)."""

    question: Question
    seats: tuple[str, ...]
    labels: dict[str, str]
    round: int = 0
    moves: list[Move] = field(default_factory=list)
    sample: int = 0
    extra_forces: tuple[str, ...] = ()


def label_seed(seed: int, task_id: str, sample: int) -> int:
    """The integer seeding the label permutation of one (task, sample): the first 8 bytes
    (big-endian) of SHA-256 of the JSON text ``[seed, task_id, sample]``."""
    # json.dumps([int(seed), str(task_id), int(sample)], separators=(",", ":")), written out
    text = f"[{int(seed)},{_json_string(str(task_id))},{int(sample)}]"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def new_task_state(question: Question, seats: Sequence[str], *, seed: int,
                   sample: int = 0, extra_forces: Sequence[str] = ()) -> TaskState:
    """Start a task at round 0 with no moves. Labels: seat ``i`` gets ``"Agent {p[i] + 1}"``
    for ``p = default_rng(label_seed(seed, task_id, sample)).permutation(len(seats))``.
    ``extra_forces`` (any of retract, vote, abstain) become the state's default."""
    seats = tuple(seats)
    if not seats:
        raise IllegalMove("a council needs at least one seat", task_id=question.task_id)
    for s in seats:
        if not isinstance(s, str) or not s.strip():
            raise IllegalMove(f"seat names must be non-empty strings, got {s!r}",
                              task_id=question.task_id)
    if len(set(seats)) != len(seats):
        raise IllegalMove(f"seat names must be unique, got {list(seats)}",
                          task_id=question.task_id)
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise IllegalMove(f"sample must be an integer >= 0, got {sample!r}",
                          task_id=question.task_id)
    # permutation(n) is a shuffle of arange(n); a list shuffled takes the very same draws
    perm = list(range(len(seats)))
    np.random.default_rng(label_seed(seed, question.task_id, sample)).shuffle(perm)
    labels = {s: f"Agent {p + 1}" for s, p in zip(seats, perm)}
    return TaskState(question, seats, labels, 0, [], sample, _check_extra(extra_forces))


def _where(state: TaskState) -> dict:
    return dict(task_id=state.question.task_id)


def _moved(state: TaskState, seat: str) -> bool:
    return any(m.agent == seat and m.round == state.round for m in state.moves)


def _check_seat(state: TaskState, seat: str) -> None:
    if seat not in state.seats:
        raise IllegalMove(f"{seat!r} is not a seat of this council", **_where(state))


def _check_extra(extra_forces, state: TaskState | None = None) -> tuple[str, ...]:
    if extra_forces is None:
        return state.extra_forces if state is not None else ()
    extra = tuple(extra_forces)
    for f in extra:
        if f not in EXTRA_FORCES:
            raise IllegalMove(f"unknown extra force {f!r}; expected any of "
                              f"{', '.join(EXTRA_FORCES)}")
    return extra


def legal_moves(state: TaskState, seat: str, *, extra_forces=None) -> LegalMoves:
    """What ``seat`` may do now. Round 0: ``propose`` only. Later rounds: ``propose``,
    ``concede`` and ``challenge`` (the last two only when another seat has an earlier move that
    resolves to an answer), ``vote`` and ``abstain`` where enabled, ``retract`` where enabled and
    the seat has such a move of its own. A seat that has moved this round gets no forces.
    ``extra_forces`` ``None``: the state's own ``extra_forces``."""
    if seat not in state.seats:
        _check_seat(state, seat)
    extra = state.extra_forces if extra_forces is None else _check_extra(extra_forces)
    q = state.question
    answers = q.candidates if q.candidates is not None else ()
    is_open = q.candidates is None
    rnd = state.round
    earlier, others, own = [], [], []   # ids of the earlier rounds' moves that resolve
    for m in state.moves:
        if m.round == rnd and m.agent == seat:
            return _legal((), answers, (), (), is_open)
        if m.round < rnd and m.force in _RESOLVES:
            earlier.append(m.id)
            (own if m.agent == seat else others).append(m.id)
    if rnd == 0:
        legal = _legal(("propose",), answers, (), (), is_open)
    else:
        forces, retract = _forces(extra if type(extra) is tuple else tuple(extra),
                                  bool(others), bool(own))
        if retract:     # one's own earlier moves are targets too (for retract only)
            legal = _legal(forces, answers, tuple(earlier), tuple(own), is_open)
        else:
            legal = _legal(forces, answers, tuple(others), (), is_open)
    # remembered, so that apply_move(..., legal=legal) knows them for this seat's own, now
    made = state.__dict__.get("_legal_made")
    if made is None:
        made = state.__dict__["_legal_made"] = {}
    made[seat] = (rnd, legal)
    return legal


@lru_cache(maxsize=256)
def _forces(extra: tuple[str, ...], others: bool, own: bool) -> tuple[tuple[str, ...], bool]:
    """The legal forces of a later round (trace-format order) and whether retract is one:
    propose, the enabled extras, concede and challenge when another seat has an earlier
    answer, retract only when the seat has one of its own."""
    allowed = {"propose", *extra}
    if others:
        allowed |= {"concede", "challenge"}
    if not own:
        allowed.discard("retract")
    return tuple(f for f in FORCES if f in allowed), "retract" in allowed


def _legal(forces, answers, targets, own_targets, open_answers) -> LegalMoves:
    """``LegalMoves(...)`` without the frozen ``__init__``'s per-field ``object.__setattr__``."""
    legal = _NEW(LegalMoves)
    legal.__dict__.update(forces=forces, answers=answers, targets=targets,
                          own_targets=own_targets, open_answers=open_answers)
    return legal


@lru_cache(maxsize=4096)
def _keys_of(candidates: tuple) -> tuple[MappingProxyType, frozenset]:
    keys: dict[str, str] = {}
    for c in candidates:
        keys.setdefault(default_normalizer(c), c)
    keys.pop("", None)                   # an empty key names no candidate
    return MappingProxyType(keys), frozenset(keys.values())


def candidate_of(candidates: Sequence[str], answer: str) -> str | None:
    """The candidate ``answer`` names: the first of ``candidates`` whose
    :func:`~bda_jax._core.normalize.default_normalizer` key is the answer's (what a scan of the
    candidates in order finds); ``None`` when none is, or the answer's key is empty. An answer
    that is such a candidate already is returned without normalizing it."""
    keys, named = _keys_of(candidates if type(candidates) is tuple else tuple(candidates))
    if answer in named:
        return answer
    return keys.get(default_normalizer(answer))


def _canonical_answer(state: TaskState, answer) -> str:
    cands = state.question.candidates
    found = candidate_of(cands, answer) if cands is not None and isinstance(answer, str) \
        else None
    if found is not None:
        return found
    if not isinstance(answer, str) or not default_normalizer(answer):
        raise IllegalMove(f"answer must be a non-empty string, got {answer!r}",
                          field="answer", **_where(state))
    if cands is None:
        return answer.strip()
    raise IllegalMove(f"answer {answer!r} is not one of the candidates {list(cands)}",
                      field="answer", **_where(state))


def _append(state: TaskState, seat: str, force: str, answer, target, extra: dict,
            checked: bool) -> Move:
    # Move(id, seat, round, force, answer, target, None, extra), without the frozen __init__'s
    # per-field object.__setattr__. ``checked``: judged against the legal moves legal_moves made
    # for this seat now, so remembered as the automaton's own (to_trace's fast path)
    move = _NEW(Move)
    move.__dict__.update(id=f"m{len(state.moves) + 1}", agent=seat, round=state.round,
                         force=force, answer=answer, target=target, confidence=None, extra=extra)
    state.moves.append(move)
    if checked:
        state.__dict__.setdefault("_appended", []).append(move)
    return move


def apply_move(state: TaskState, seat: str, reply: "MoveReply", *, extra_forces=None,
               extra=None, legal: LegalMoves | None = None) -> Move:
    """Check ``reply`` against :func:`legal_moves` and append it as a :class:`~bda_jax.Move`
    (id ``"m<k>"``, ``agent`` = seat name, ``round`` = the current round, the reply's force and
    answer or target, ``extra = {"argument": text, **extra}``: e.g. the runner's model, latency
    and cache hit). Returns the move. ``legal``: ``legal_moves(state, seat, extra_forces=...)``
    when the caller has made it already for this round (the runner, for the prompt); it is not
    made again. Raises
    :class:`IllegalMove`: an unknown seat, a second move in one round, a force not legal now, an
    answer not a candidate, an unknown or wrong target (a seat's own move for concede or
    challenge, another seat's move for retract), a field the force does not take."""
    if legal is None:
        legal = legal_moves(state, seat, extra_forces=extra_forces)
    elif seat not in state.seats:
        _check_seat(state, seat)
    # the legal moves are legal_moves' own for this seat in this round (not ones made up, or
    # used already): only then is the move the automaton's own (to_trace); used up either way
    made = state.__dict__.get("_legal_made")
    made = None if made is None else made.pop(seat, None)
    checked = made is not None and made[1] is legal and made[0] == state.round
    try:
        force, answer, target, argument = reply.force, reply.answer, reply.target, reply.argument
    except AttributeError:
        raise IllegalMove(f"a reply must be a MoveReply, got {type(reply).__name__}",
                          **_where(state)) from None
    if not legal.forces:
        raise IllegalMove(f"seat {seat!r} has already moved in round {state.round}",
                          **_where(state))
    if force not in legal.forces:
        raise IllegalMove(f"force {force!r} is not legal now (legal: {', '.join(legal.forces)})",
                          field="force", **_where(state))
    if not isinstance(argument, str):
        raise IllegalMove(f"argument must be a string, got {type(argument).__name__}",
                          field="argument", **_where(state))
    if force in ANSWER_FORCES:
        if target is not None:
            raise IllegalMove(f"a {force} takes no target", field="target", **_where(state))
        answer = _canonical_answer(state, answer)
    elif force in TARGET_FORCES:
        if answer is not None:
            raise IllegalMove(f"a {force} takes no answer (its target fixes it)", field="answer",
                              **_where(state))
        if target is None:
            raise IllegalMove(f"a {force} needs a target", field="target", **_where(state))
        if target not in legal.targets:
            raise IllegalMove(f"target {target!r} is not a legal target (legal: "
                              f"{', '.join(legal.targets) or 'none'})", field="target",
                              **_where(state))
        own = target in legal.own_targets   # a legal target of one's own is a retract target
        if force == "retract" and not own:
            raise IllegalMove(f"a retract must target one's own move, not {target!r}",
                              field="target", **_where(state))
        if force != "retract" and own:
            raise IllegalMove(f"a {force} must target another seat's move, not one's own "
                              f"{target!r}", field="target", **_where(state))
    else:   # abstain
        if answer is not None or target is not None:
            raise IllegalMove("an abstain takes no answer and no target", **_where(state))
    return _append(state, seat, force, answer, target,
                   {"argument": argument, **extra} if extra else {"argument": argument}, checked)


def record_abstain(state: TaskState, seat: str, reason: str, *, extra=None) -> Move:
    """Record an ``abstain`` for a seat whose replies could not be used (after the bounded
    re-asks), in any round and whether or not abstain is enabled: ``extra = {"argument": "",
    "error": reason, **extra}``. Raises :class:`IllegalMove` for an unknown seat or one that has moved."""
    _check_seat(state, seat)
    if _moved(state, seat):
        raise IllegalMove(f"seat {seat!r} has already moved in round {state.round}",
                          **_where(state))
    state.__dict__.get("_legal_made", {}).pop(seat, None)     # it has moved: used up
    return _append(state, seat, "abstain", None, None,
                   {"argument": "", "error": str(reason), **(extra or {})}, True)


def next_round(state: TaskState) -> None:
    """Close the current round and open the next. Raises :class:`IllegalMove` if a seat has not
    moved this round (each seat makes exactly one move per round)."""
    moved = {m.agent for m in state.moves if m.round == state.round}
    missing = [s for s in state.seats if s not in moved]
    if missing:
        raise IllegalMove(f"round {state.round} is not complete: no move yet from "
                          f"{', '.join(missing)}", **_where(state))
    state.round += 1


def trace_task_id(question: Question, sample: int) -> str:
    """The trace task id of one (question, sample): the question's id for sample 0, else
    ``"<task_id>#s<sample>"`` (the samples of a question share its cluster)."""
    return question.task_id if sample == 0 else f"{question.task_id}#s{sample}"


#: a trace record's own keys (every other key of the record is its ``extra``), as
#: :func:`~bda_jax._core.traces.parse_trace` reads them
_TRACE_KEYS = ("task_id", "candidates", "gold", "cluster", "moves")
_MOVE_KEY_SET = frozenset(MOVE_FIELDS)


def _own_moves(state: TaskState) -> tuple[Move, ...] | None:
    """The moves as :func:`~bda_jax._core.traces.parse_trace` would give them back from their
    JSON, where that is plain without parsing (else ``None``): every move is one the automaton
    appended itself, judged against legal moves :func:`legal_moves` made for its seat and round
    (id ``m<k>``, a legal force with its answer or target, a candidate or a stripped open
    answer), in order, none changed or taken away since (a round that is an integer in range,
    extra keys that are not move fields, a non-blank answer), and every seat name is its own
    canonical agent id."""
    moves = state.moves
    appended = state.__dict__.get("_appended")
    if not moves or appended is None or len(appended) != len(moves):
        return None
    for seat in state.seats:
        if normalize_id(seat) != seat:
            return None
    for own, m in zip(appended, moves):
        if own is not m or type(m.round) is not int or not 0 <= m.round <= MAX_ROUND \
                or not (m.answer is None or _plain_id(m.answer)) \
                or not _MOVE_KEY_SET.isdisjoint(m.extra):
            return None
    return tuple(moves)


def _admissible(moves: tuple[Move, ...], candidates: tuple[str, ...]) -> bool:
    """Whether the strict automaton (:func:`~bda_jax._core.traces.resolve_trace`) is known to
    accept the automaton's own moves (:func:`_own_moves`) under these candidates without running
    it: the candidates are distinct and non-empty after the normalizer, the rounds never
    decrease, and every answer is a candidate as given. The rest it checks held when each move
    was judged: unique ids, targets that are earlier moves standing for an answer, a retract's
    target one's own, a concede's or challenge's another seat's, no field a force does not
    take."""
    named = _keys_of(candidates)[1]
    if len(named) != len(candidates):
        return False
    last = 0
    for m in moves:
        if m.round < last or (m.answer is not None and m.answer not in named):
            return False
        last = m.round
    return True


def _plain_id(value) -> bool:
    return type(value) is str and bool(value.strip())


def to_trace(state: TaskState) -> Trace:
    """The task as a :class:`~bda_jax.Trace`: candidates, gold and cluster from the question
    (cluster defaults to the question's task id, so the samples of one question share a
    cross-validation fold); task id from :func:`trace_task_id`; extra fields ``question``,
    ``sample`` and ``labels`` (seat -> anonymized label) after the question's own extra keys;
    each move keeps its ``argument`` (and ``error``) as extra fields. ``write_traces`` / strict
    ``read_traces`` accept the result; a task with no moves, or an open question where no seat
    named an answer, raises :class:`~bda_jax.TraceError`.

    A task whose every move the automaton appended itself (judged against :func:`legal_moves`'
    own legal moves), unchanged since, is taken as it stands: the trace holds those very
    :class:`~bda_jax.Move` objects (equal, field for field and extra for extra, to what
    :func:`~bda_jax._core.traces.parse_trace` of their JSON gives), and for a question with
    candidates it is admissible by construction, so the strict automaton
    (:func:`~bda_jax._core.traces.resolve_trace`) is not run again on it. Anything else (an
    open question, a move made or changed by hand, a field to convert) goes through
    ``parse_trace`` and ``resolve_trace``, which raise :class:`~bda_jax.TraceError` on anything
    strict ``read_traces`` would refuse."""
    q = state.question
    raw = {"task_id": trace_task_id(q, state.sample)}
    if q.candidates is not None:
        raw["candidates"] = list(q.candidates)
    if q.gold is not None:
        raw["gold"] = q.gold
    raw["cluster"] = q.cluster if q.cluster is not None else q.task_id
    raw["moves"] = None
    raw.update({k: v for k, v in q.extra.items() if k not in raw})
    raw.update({"question": q.question, "sample": state.sample, "labels": dict(state.labels)})
    moves = _own_moves(state)
    cands, gold = raw.get("candidates"), raw.get("gold")
    if moves is not None and _plain_id(raw["task_id"]) and _plain_id(raw["cluster"]) \
            and (gold is None or _plain_id(gold)) \
            and (cands is None or (cands and all(map(_plain_id, cands)))):
        # parse_trace's result for this record, its checks passed: no field to convert
        extra = {k: v for k, v in raw.items() if k not in _TRACE_KEYS}
        cands = None if cands is None else tuple(cands)
        trace = mark_field_checked(Trace(raw["task_id"], moves, cands, gold, raw["cluster"],
                                         (), extra))
        if cands is not None and _admissible(moves, cands):
            return trace
    else:
        raw["moves"] = [m.to_json() for m in state.moves]
        trace = parse_trace(raw)
    resolve_trace(trace)        # strict: raises TraceError on anything read_traces would refuse
    return trace
