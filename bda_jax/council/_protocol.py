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
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .._core.errors import BdaError
from .._core.normalize import default_normalizer
from .._core.traces import FORCES, Move, Trace, parse_trace, resolve_trace
from ._config import EXTRA_FORCES
from ._questions import Question

if TYPE_CHECKING:
    from ._schema import MoveReply

__all__ = ["LegalMoves", "TaskState", "IllegalMove", "new_task_state", "legal_moves",
           "apply_move", "record_abstain", "next_round", "to_trace", "trace_task_id", "label_seed",
           "ANSWER_FORCES", "TARGET_FORCES"]

ANSWER_FORCES = ("propose", "vote")
TARGET_FORCES = ("concede", "challenge", "retract")
_RESOLVES = ("propose", "vote", "concede")     # forces whose move stands for an answer


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
    text = json.dumps([int(seed), str(task_id), int(sample)], separators=(",", ":"))
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
    perm = np.random.default_rng(label_seed(seed, question.task_id, sample)).permutation(
        len(seats))
    labels = {s: f"Agent {int(p) + 1}" for s, p in zip(seats, perm)}
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
    _check_seat(state, seat)
    extra = _check_extra(extra_forces, state)
    q = state.question
    answers = q.candidates if q.candidates is not None else ()
    is_open = q.candidates is None
    if _moved(state, seat):
        return LegalMoves((), answers, (), (), is_open)
    if state.round == 0:
        return LegalMoves(("propose",), answers, (), (), is_open)
    earlier = [m for m in state.moves if m.round < state.round and m.force in _RESOLVES]
    others = tuple(m.id for m in earlier if m.agent != seat)
    own = tuple(m.id for m in earlier if m.agent == seat)
    allowed = {"propose"} | set(extra)
    if others:
        allowed |= {"concede", "challenge"}
    if not own:
        allowed.discard("retract")
    forces = tuple(f for f in FORCES if f in allowed)
    own_targets = own if "retract" in allowed else ()
    targets = tuple(m.id for m in earlier if m.agent != seat or own_targets)
    return LegalMoves(forces, answers, targets, own_targets, is_open)


def _canonical_answer(state: TaskState, answer) -> str:
    if not isinstance(answer, str) or not default_normalizer(answer):
        raise IllegalMove(f"answer must be a non-empty string, got {answer!r}",
                          field="answer", **_where(state))
    cands = state.question.candidates
    if cands is None:
        return answer.strip()
    key = default_normalizer(answer)
    for c in cands:
        if default_normalizer(c) == key:
            return c
    raise IllegalMove(f"answer {answer!r} is not one of the candidates {list(cands)}",
                      field="answer", **_where(state))


def _append(state: TaskState, seat: str, force: str, answer, target, extra: dict) -> Move:
    move = Move(f"m{len(state.moves) + 1}", seat, state.round, force, answer, target, None,
                extra)
    state.moves.append(move)
    return move


def apply_move(state: TaskState, seat: str, reply: "MoveReply", *, extra_forces=None,
               extra=None) -> Move:
    """Check ``reply`` against :func:`legal_moves` and append it as a :class:`~bda_jax.Move`
    (id ``"m<k>"``, ``agent`` = seat name, ``round`` = the current round, the reply's force and
    answer or target, ``extra = {"argument": text, **extra}``: e.g. the runner's model, latency
    and cache hit). Returns the move. Raises
    :class:`IllegalMove`: an unknown seat, a second move in one round, a force not legal now, an
    answer not a candidate, an unknown or wrong target (a seat's own move for concede or
    challenge, another seat's move for retract), a field the force does not take."""
    legal = legal_moves(state, seat, extra_forces=extra_forces)
    where = _where(state)
    if not all(hasattr(reply, k) for k in ("force", "answer", "target", "argument")):
        raise IllegalMove(f"a reply must be a MoveReply, got {type(reply).__name__}", **where)
    if not legal.forces:
        raise IllegalMove(f"seat {seat!r} has already moved in round {state.round}", **where)
    force = reply.force
    if force not in legal.forces:
        raise IllegalMove(f"force {force!r} is not legal now (legal: {', '.join(legal.forces)})",
                          field="force", **where)
    if not isinstance(reply.argument, str):
        raise IllegalMove(f"argument must be a string, got {type(reply.argument).__name__}",
                          field="argument", **where)
    answer, target = reply.answer, reply.target
    if force in ANSWER_FORCES:
        if target is not None:
            raise IllegalMove(f"a {force} takes no target", field="target", **where)
        answer = _canonical_answer(state, answer)
    elif force in TARGET_FORCES:
        if answer is not None:
            raise IllegalMove(f"a {force} takes no answer (its target fixes it)", field="answer",
                              **where)
        if target is None:
            raise IllegalMove(f"a {force} needs a target", field="target", **where)
        if target not in legal.targets:
            raise IllegalMove(f"target {target!r} is not a legal target (legal: "
                              f"{', '.join(legal.targets) or 'none'})", field="target", **where)
        own = any(m.id == target and m.agent == seat for m in state.moves)
        if force == "retract" and not own:
            raise IllegalMove(f"a retract must target one's own move, not {target!r}",
                              field="target", **where)
        if force != "retract" and own:
            raise IllegalMove(f"a {force} must target another seat's move, not one's own "
                              f"{target!r}", field="target", **where)
    else:   # abstain
        if answer is not None or target is not None:
            raise IllegalMove("an abstain takes no answer and no target", **where)
    return _append(state, seat, force, answer, target,
                   {"argument": reply.argument, **(extra or {})})


def record_abstain(state: TaskState, seat: str, reason: str, *, extra=None) -> Move:
    """Record an ``abstain`` for a seat whose replies could not be used (after the bounded
    re-asks), in any round and whether or not abstain is enabled: ``extra = {"argument": "",
    "error": reason, **extra}``. Raises :class:`IllegalMove` for an unknown seat or one that has moved."""
    _check_seat(state, seat)
    if _moved(state, seat):
        raise IllegalMove(f"seat {seat!r} has already moved in round {state.round}",
                          **_where(state))
    return _append(state, seat, "abstain", None, None,
                   {"argument": "", "error": str(reason), **(extra or {})})


def next_round(state: TaskState) -> None:
    """Close the current round and open the next. Raises :class:`IllegalMove` if a seat has not
    moved this round (each seat makes exactly one move per round)."""
    missing = [s for s in state.seats if not _moved(state, s)]
    if missing:
        raise IllegalMove(f"round {state.round} is not complete: no move yet from "
                          f"{', '.join(missing)}", **_where(state))
    state.round += 1


def trace_task_id(question: Question, sample: int) -> str:
    """The trace task id of one (question, sample): the question's id for sample 0, else
    ``"<task_id>#s<sample>"`` (the samples of a question share its cluster)."""
    return question.task_id if sample == 0 else f"{question.task_id}#s{sample}"


def to_trace(state: TaskState) -> Trace:
    """The task as a :class:`~bda_jax.Trace`: candidates, gold and cluster from the question
    (cluster defaults to the question's task id, so the samples of one question share a
    cross-validation fold); task id from :func:`trace_task_id`; extra fields ``question``,
    ``sample`` and ``labels`` (seat -> anonymized label) after the question's own extra keys;
    each move keeps its ``argument`` (and ``error``) as extra fields. The result has been through
    :func:`~bda_jax._core.traces.parse_trace` and the strict automaton, so
    ``write_traces`` / strict ``read_traces`` accept it; a task with no moves, or an open
    question where no seat named an answer, raises :class:`~bda_jax.TraceError`."""
    q = state.question
    raw = {"task_id": trace_task_id(q, state.sample)}
    if q.candidates is not None:
        raw["candidates"] = list(q.candidates)
    if q.gold is not None:
        raw["gold"] = q.gold
    raw["cluster"] = q.cluster if q.cluster is not None else q.task_id
    raw["moves"] = [m.to_json() for m in state.moves]
    raw.update({k: v for k, v in q.extra.items() if k not in raw})
    raw.update({"question": q.question, "sample": state.sample, "labels": dict(state.labels)})
    trace = parse_trace(raw)
    resolve_trace(trace)        # strict: raises TraceError on anything read_traces would refuse
    return trace
