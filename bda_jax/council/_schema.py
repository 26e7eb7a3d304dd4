"""Structured move replies ([BDA] §5, Appendix D.7): the JSON Schema sent as ``response_format``
and the check of what comes back.

A reply is one JSON object with exactly four keys, all required (OpenAI strict structured
outputs): ``force`` (an enum of the legal forces), ``answer`` (a legal candidate or ``null``;
any string for an open question), ``target`` (a legal move id or ``null``) and ``argument`` (a
short text, at most :data:`ARGUMENT_MAX` characters, shown to the other seats in later rounds).
A reply that is one JSON value and nothing else is read by the duplicate-refusing decoder's
scanner directly; anything else goes through :func:`~bda_jax._core.io.loads_unique` (same
verdicts, same reasons); a candidate is matched through one table per candidate set.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.scanner import make_scanner

from .._core.errors import BdaError
from .._core.io import DuplicateKeyError, loads_unique, unique_keys
from .._core.normalize import default_normalizer
from ._protocol import ANSWER_FORCES, TARGET_FORCES, IllegalMove, LegalMoves, candidate_of

__all__ = ["MoveReply", "ReplyError", "move_schema", "parse_reply", "ARGUMENT_MAX"]

ARGUMENT_MAX = 400
_KEYS = ("force", "answer", "target", "argument")
_KEY_SET = frozenset(_KEYS)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)\r?\n?```$", re.DOTALL)


class ReplyError(BdaError):
    """A model's reply cannot be used as a move; ``reason`` is short enough to send back in a
    re-ask ("not JSON", "force 'x' not legal", "missing answer", ...)."""


@dataclass(frozen=True)
class MoveReply:
    """One seat's move as the model chose it: the force, its answer (propose, vote) or target
    (concede, challenge, retract), ``None`` for the field the force does not take, and the
    argument text."""

    force: str
    answer: str | None
    target: str | None
    argument: str


_NEW = object.__new__


def _reply(force: str, answer: str | None, target: str | None, argument: str) -> MoveReply:
    """``MoveReply(force, answer, target, argument)`` without the frozen ``__init__``'s
    per-field ``object.__setattr__``."""
    reply = _NEW(MoveReply)
    reply.__dict__.update(force=force, answer=answer, target=target, argument=argument)
    return reply


def move_schema(legal: LegalMoves) -> dict:
    """The JSON Schema of a legal reply, valid as OpenAI ``response_format``
    ``{"type": "json_schema", "json_schema": {"name": "move", "schema": ..., "strict": true}}``:
    ``type: object``, ``additionalProperties: false``, every property required; ``force`` an
    enum of ``legal.forces``; ``answer`` ``["string", "null"]`` with an enum of the candidates
    and ``null`` (no enum for an open question; ``null`` only when no answer force is legal);
    ``target`` likewise over ``legal.targets``; ``argument`` a string of at most 400 characters.
    Raises :class:`~bda_jax.council.IllegalMove` when no force is legal."""
    if not legal.forces:
        raise IllegalMove("no move is legal now: the seat has already moved this round")
    if any(f in ANSWER_FORCES for f in legal.forces):
        answer = {"type": ["string", "null"],
                  "description": "the answer, for propose or vote; null otherwise"}
        if not legal.open_answers:
            answer["enum"] = [*legal.answers, None]
    else:
        answer = {"type": "null", "description": "always null now"}
    if legal.targets and any(f in TARGET_FORCES for f in legal.forces):
        target = {"type": ["string", "null"], "enum": [*legal.targets, None],
                  "description": "the id of the move conceded to, challenged or retracted; "
                                 "null otherwise"}
    else:
        target = {"type": "null", "description": "always null now"}
    return {
        "type": "object",
        "properties": {
            "force": {"type": "string", "enum": list(legal.forces),
                      "description": "the kind of move"},
            "answer": answer,
            "target": target,
            "argument": {"type": "string", "maxLength": ARGUMENT_MAX,
                         "description": "a short reason, shown to the other agents"},
        },
        "required": list(_KEYS),
        "additionalProperties": False,
    }


_SCAN = make_scanner(json.JSONDecoder(object_pairs_hook=unique_keys))


def _loads(body: str):
    """``loads_unique(body)``: a body that is one JSON value and nothing else (it is stripped
    already) is read by the same decoder's scanner without ``loads``' set-up; anything else
    (leading whitespace, a byte-order mark, trailing text, not JSON) goes to ``loads_unique``,
    which gives its value or its error."""
    try:
        value, end = _SCAN(body, 0)
    except StopIteration:
        return loads_unique(body)
    return value if end == len(body) else loads_unique(body)


def _unfence(text: str) -> str:
    text = text.strip()
    m = _FENCE.match(text) if text.startswith("```") else None
    return m.group(1).strip() if m else text


def parse_reply(text: str, legal: LegalMoves) -> MoveReply:
    """Decode a reply (one JSON object; surrounding whitespace and a Markdown code fence around
    it, three backticks with an optional ``json`` tag, are stripped) and check it against ``legal``.

    The field a force does not take is dropped (``answer`` of a concede, ``target`` of a
    propose, both of an abstain), whatever it holds; a propose or vote answer is matched to a
    candidate through the default normalizer and returned as that candidate. Raises
    :class:`ReplyError` with a short reason."""
    if not isinstance(text, str):
        raise ReplyError(f"reply is not text ({type(text).__name__})")
    body = _unfence(text)
    try:
        value = _loads(body)
    except DuplicateKeyError as err:
        raise ReplyError(f"repeated key {err.key!r}") from None
    except (json.JSONDecodeError, RecursionError, ValueError):
        raise ReplyError("not JSON" if body else "empty reply") from None
    if not isinstance(value, dict):
        raise ReplyError(f"not a JSON object (got {type(value).__name__})")
    if value.keys() != _KEY_SET:
        for key in value:
            if key not in _KEYS:
                raise ReplyError(f"unexpected key {key!r}")
        for key in _KEYS:
            if key not in value:
                raise ReplyError(f"missing {key}")
    force, answer, target, argument = (value["force"], value["answer"], value["target"],
                                       value["argument"])
    if not isinstance(force, str):
        raise ReplyError("force must be a string")
    if force not in legal.forces:
        raise ReplyError(f"force {force!r} not legal (legal: {', '.join(legal.forces) or 'none'})")
    if not isinstance(argument, str):
        raise ReplyError("argument must be a string")
    if len(argument) > ARGUMENT_MAX:
        raise ReplyError(f"argument longer than {ARGUMENT_MAX} characters")
    if force in ANSWER_FORCES:
        if answer is None:
            raise ReplyError(f"missing answer (a {force} needs one)")
        if not isinstance(answer, str):
            raise ReplyError("answer must be a string")
        cand = None if legal.open_answers else candidate_of(legal.answers, answer)
        if cand is not None:                # the first candidate with the answer's key
            return _reply(force, cand, None, argument)
        if not default_normalizer(answer):
            raise ReplyError("answer is empty")
        if legal.open_answers:
            return _reply(force, answer.strip(), None, argument)
        raise ReplyError(f"answer {answer!r} not a candidate")
    if force in TARGET_FORCES:
        if target is None:
            raise ReplyError(f"missing target (a {force} needs one)")
        if not isinstance(target, str):
            raise ReplyError("target must be a string")
        if target not in legal.targets:
            raise ReplyError(f"target {target!r} not legal")
        own = target in legal.own_targets
        if force == "retract" and not own:
            raise ReplyError(f"target {target!r} is not your own move (retract)")
        if force != "retract" and own:
            raise ReplyError(f"target {target!r} is your own move ({force})")
        return _reply(force, None, target, argument)
    return _reply(force, None, None, argument)
