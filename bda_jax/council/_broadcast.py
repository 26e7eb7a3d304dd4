"""The confidence-routed broadcast protocol run live ([Audit] Fig. 1, Appendix Tables 7 and 8)
against OpenAI-compatible endpoints, writing the broadcast log that
:func:`bda_jax.audit.read_broadcast_log` and ``bda audit`` read unchanged (docs/broadcast.md).

One **problem** is one question and one sample (ids as the council runner names them). Its
deliberation runs in **outer rounds** ``o = 0 .. max_outer_rounds - 1``, each of ``turns``
discussion **turns**; a turn is one **block** of the log ([Audit] Fig. 1):

1. **Poll** (Table 7, Poll row): every agent (a config seat) privately returns a structured JSON
   report — ``reason``, ``has_candidate_answer``, ``candidate_answer``, ``score`` on the
   configured :class:`~bda_jax.council.ConfidenceScale`, ``intent``. A reply that does not
   validate is re-asked with the reason (``config.max_reasks``); after that the poll is logged
   with a null score and candidate and its ``error``.
2. **Route** (Table 7, Router row): :func:`route_floor` gives the floor to one agent — by default
   ``runtime_argmax``, the largest stated score with the first-listed agent winning ties (the
   rule :func:`bda_jax.audit.runtime_argmax` replays); any router of [Audit] Table 1 that needs
   no correctness label can run instead (:data:`BROADCAST_ROUTERS`).
3. **Speak** (Table 7, Speak row): the selected agent writes a free-text public message, which
   every later call sees; its spoken answer is read by
   :func:`~bda_jax.council.commitment` (candidate-restricted extractor
   :func:`bda_jax.datasets.extract_answer`, then the optional frozen judge) for questions with
   candidates, and from the last ``\\boxed{...}`` or ``Answer:`` line for open ones.
   Non-selected agents whose stated score is at least ``note_threshold`` keep their poll reason
   as a deferred private note, shown in their own later polls (Table 8).
4. After the last turn of an outer round, the **incumbent** (the group's submitted answer)
   becomes the plurality of that round's spoken answers, the latest winning ties, and persists
   while a round speaks no answer (the rule of :func:`bda_jax.audit.simulate_broadcast`; Table
   8's "system incumbent persists until overridden"). The **evaluator** (Table 7, Evaluator
   row) then sees the submitted answer and the reference (the question's gold, which no agent
   sees) and returns PASS or FAIL with a repair hint; PASS ends the deliberation, FAIL starts
   the next outer round with the hint in every poll's evaluator feedback. A hint that names the
   reference is dropped (``hint_redacted``). ``evaluator="exact"`` compares the submitted answer
   with the gold instead, with no call.

The log (docs/broadcast.md): per block the agents' poll lines in seat order (``selected`` on the
router's pick), then the speaker's speak line (``incumbent`` at speak time, ``earlier_public``
the problem's earlier spoken answers with their authors, ``equivalence`` by exact match of the
normalized answers); scores divided onto [0, 1] (the stated value in ``stated_score``); the
evaluator's verdict on the last speak line of each outer round (``evaluation``). Extra keys are
ignored by the log reader. Roles are in the manifest only, never in the log.

Resuming: every reply is in the cache before it is used and every request is a pure function
of earlier replies and the seeded router, so a rerun of a killed run replays what it has and
asks only for the rest; the log is written atomically at the end in question order, and each
finished problem is appended to ``<out>.partial`` as it ends.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .._core.errors import DataError
from .._core.io import atomic_write
from .._core.normalize import default_normalizer
from .._core.version import __version__
from ..datasets import canonical_number
from ._broadcast_prompts import (BROADCAST_PROMPT_VERSION, ConfidenceScale, PublicMessage,
                                 broadcast_reask, evaluator_messages, evaluator_schema,
                                 poll_messages, poll_schema, speak_messages, turn_line)
from ._cache import ReplyCache
from ._client import CouncilClient, UpstreamError
from ._config import CouncilConfig, Seat
from ._judge import Judge, commitment, json_object, match_candidate
from ._ledger import Ledger
from ._methods import Caller, MethodTask
from ._protocol import label_seed, trace_task_id
from ._questions import Question
from ._runner import refuse_input_as_output

__all__ = ["BROADCAST_MANIFEST_KIND", "BROADCAST_ROUTERS", "BroadcastSummary", "route_floor",
           "run_broadcast", "run_broadcast_files"]

BROADCAST_MANIFEST_KIND = "bda_jax.broadcast_manifest"
BROADCAST_MANIFEST_SCHEMA_VERSION = 1
#: the routers of [Audit] Table 1 that can run online (they read no correctness label)
BROADCAST_ROUTERS = ("runtime_argmax", "top_confidence_tie_random", "random_valid",
                     "majority_vote", "confidence_weighted_vote")
#: Table 1 routers that cannot run online, and why
_OFFLINE_ROUTERS = {"learned": "is cross-fitted on correctness labels",
                    "oracle": "reads the correctness labels"}
#: problems deliberated at once (each endpoint also bounds its own requests in flight)
TASK_CONCURRENCY = 8
_POLL_KEYS = ("reason", "has_candidate_answer", "candidate_answer", "score", "intent")
_EVAL_KEYS = ("verdict", "hint")
_VOTE_DECIMALS = 9
_ANSWER_LINE = re.compile(r"(?im)^[ \t>*_#]*(?:final[ \t]+)?answer[ \t*_]*[:=][ \t]*(.+?)[ \t]*$")
_NO_ANSWER_HINT = ("The group has not given a clear answer yet: end every public message with "
                   "the answer line.")
_EXACT_FAIL_HINT = "The submitted answer is not correct."


class _Unusable(Exception):
    """A structured reply that cannot be used; ``args[0]`` is the reason sent back."""


# ================================================================================== routing
def route_floor(router: str, scores: Sequence[float | None], answers: Sequence[str | None],
                rng: random.Random) -> int:
    """The agent (index into the block's listing order) that gets the floor in one block, under
    an [Audit] Table 1 router run online. ``scores`` [A]: stated scores (None: not stated);
    ``answers`` [A]: the polled answers as comparison keys (None: no parsed answer); ``rng``:
    the block's seeded generator (only the tie-random and the vote routers draw from it).

    * ``runtime_argmax`` — the largest stated score over all agents, strict ``>`` so the first
      listed wins ties; a missing score ranks below every stated one (all missing: the first);
      the rule :func:`bda_jax.audit.runtime_argmax` replays on a log;
    * ``top_confidence_tie_random`` — uniform among the agents tied at the largest score;
    * ``random_valid`` — uniform among the agents with a parsed answer;
    * ``majority_vote`` — the answer with the most agents (tied answers uniform, each once),
      then one of its agents uniformly;
    * ``confidence_weighted_vote`` — the answer with the largest sum of stated scores (missing
      add 0; sums compared after rounding to 1e-9), ties as above, then one of its agents.

    Online "valid" means parsed: the router never sees a correctness label (which is why the
    ``learned`` and ``oracle`` routers of Table 1 cannot run here). The audit scores the same
    routers as expected success over the tie draws (:func:`bda_jax.audit.router_block_success`);
    here each draw is made once. A block where no agent parsed an answer falls back to
    ``runtime_argmax`` under the three valid-candidate routers.
    """
    _check_router(router)
    if len(scores) != len(answers) or not scores:
        raise DataError(f"scores and answers must be two non-empty lists of one length, got "
                        f"{len(scores)} and {len(answers)}", field="scores")
    value = [float("-inf") if s is None else float(s) for s in scores]
    if router in ("runtime_argmax", "top_confidence_tie_random"):
        top = max(value)
        if router == "runtime_argmax":
            return value.index(top)
        return rng.choice([i for i, v in enumerate(value) if v == top])
    parsed = [i for i, a in enumerate(answers) if a is not None]
    if not parsed:
        return value.index(max(value))
    if router == "random_valid":
        return rng.choice(parsed)
    groups: dict[str, list[int]] = {}
    for i in parsed:
        groups.setdefault(answers[i], []).append(i)
    if router == "majority_vote":
        support = {a: float(len(m)) for a, m in groups.items()}
    else:
        support = {a: round(sum(0.0 if scores[i] is None else float(scores[i]) for i in m),
                            _VOTE_DECIMALS) for a, m in groups.items()}
    best = max(support.values())
    winner = rng.choice([a for a in groups if support[a] == best])
    return rng.choice(groups[winner])


def _check_router(router) -> str:
    if router not in BROADCAST_ROUTERS:
        if router in _OFFLINE_ROUTERS:
            raise DataError(f"router {router!r} {_OFFLINE_ROUTERS[router]}: it cannot route a "
                            f"live deliberation; use one of {', '.join(BROADCAST_ROUTERS)}",
                            field="router")
        raise DataError(f"unknown router {router!r}; expected one of "
                        f"{', '.join(BROADCAST_ROUTERS)}", field="router")
    return router


def _block_rng(seed: int, problem: str, outer_round: int, turn: int) -> random.Random:
    text = json.dumps([int(seed), str(problem), int(outer_round), int(turn)], separators=(",", ":"))
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


# ================================================================================== answers
def _canon(answer, question: Question) -> str | None:
    """An answer as the log writes it: the candidate as spelled (questions with candidates; None
    when it names none), else the normalized open answer with numbers in canonical form."""
    if not isinstance(answer, str):
        return None
    if question.candidates is not None:
        return match_candidate(answer, question.candidates)
    key = default_normalizer(answer)
    number = canonical_number(key)
    key = number if number is not None else key
    return key or None


def _correct(answer: str | None, question: Question) -> bool | None:
    """The correctness label of a logged answer against the gold (None without either)."""
    if answer is None or question.gold is None:
        return None
    gold = _canon(question.gold, question)
    return default_normalizer(answer) == default_normalizer(gold if gold is not None
                                                            else question.gold)


def _boxed_last(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` with balanced braces, or None."""
    found = None
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth = 0
        for pos in range(m.end() - 1, len(text)):
            if text[pos] == "{":
                depth += 1
            elif text[pos] == "}":
                depth -= 1
                if depth == 0:
                    found = text[m.end():pos]
                    break
    return found


def _open_spoken(text: str, question: Question) -> tuple[str | None, str | None]:
    """``(answer, rule)`` of a public message on an open question: the last ``\\boxed{...}``,
    else the last ``Answer: ...`` line; nothing else is read (nothing is guessed)."""
    boxed = _boxed_last(text)
    if boxed is not None and _canon(boxed, question) is not None:
        return _canon(boxed, question), "boxed"
    lines = _ANSWER_LINE.findall(text)
    if lines and _canon(lines[-1].strip(" .*_"), question) is not None:
        return _canon(lines[-1].strip(" .*_"), question), "answer_line"
    return None, None


def _leaks(hint: str, gold: str | None) -> bool:
    """Whether an evaluator hint names the reference answer (a best-effort guard): the gold as a
    whole word, case-insensitive; a one-letter gold only in "option B", "answer is B", "(B)"."""
    if gold is None or not hint:
        return False
    g = re.escape(gold.strip())
    if len(gold.strip()) == 1 and gold.strip().isalpha():
        pattern = (rf"(?i:\b(?:option|answer|choice|letter)\b(?:\s+(?:is|was|should\s+be))?"
                   rf"[\s:]*[\"'(]?){g}(?![\w])|\(\s*{g}\s*\)")
        return re.search(pattern, hint) is not None
    return re.search(rf"(?<![\w.]){g}(?![\w])", hint, re.I) is not None


# ================================================================================== settings
@dataclass(frozen=True)
class _Settings:
    router: str
    scale: ConfidenceScale
    max_outer_rounds: int
    turns: int
    note_threshold: float
    recent_window: int
    evaluator: Seat | str
    judge: Seat | None
    speak_sees_poll: bool

    def evaluator_name(self) -> str:
        return "exact" if self.evaluator == "exact" else f"seat {self.evaluator.name}"

    def to_json(self) -> dict:
        return {"router": self.router,
                "confidence_scale": {"low": self.scale.low, "high": self.scale.high,
                                     "integer": self.scale.integer},
                "max_outer_rounds": self.max_outer_rounds, "turns": self.turns,
                "note_threshold": self.note_threshold, "recent_window": self.recent_window,
                "evaluator": "exact" if self.evaluator == "exact" else vars(self.evaluator),
                "judge": None if self.judge is None else vars(self.judge),
                "speak_sees_poll": self.speak_sees_poll}


def _positive(value, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise DataError(f"{name} must be an integer >= {low}, got {value!r}", field=name)
    return value


def _seat_as(value, config: CouncilConfig, what: str) -> Seat:
    """A seat for the evaluator or the judge: a :class:`Seat` (its endpoint must be configured)
    or the name of a config seat, taken at temperature 0 and honest."""
    if isinstance(value, Seat):
        if value.endpoint not in config.endpoints:
            raise DataError(f"the {what} seat names endpoint {value.endpoint!r}, which is not "
                            f"defined (endpoints: {', '.join(sorted(config.endpoints))})",
                            field=what)
        return value
    if isinstance(value, str):
        for seat in config.seats:
            if seat.name == value:
                return replace(seat, temperature=0.0, role="honest")
        raise DataError(f"{what} {value!r} is not a seat of the config (seats: "
                        f"{', '.join(s.name for s in config.seats)})", field=what)
    raise DataError(f"{what} must be a Seat or a seat name, got {type(value).__name__}",
                    field=what)


def _settings(config: CouncilConfig, *, router, confidence_scale, max_outer_rounds, turns,
              note_threshold, recent_window, evaluator, judge, speak_sees_poll) -> _Settings:
    _check_router(router)
    scale = ConfidenceScale.parse(confidence_scale)
    _positive(max_outer_rounds, "max_outer_rounds")
    _positive(turns, "turns")
    _positive(recent_window, "recent_window", 0)
    if note_threshold is None:
        note_threshold = scale.low + 0.65 * (scale.high - scale.low)
    if isinstance(note_threshold, bool) or not isinstance(note_threshold, (int, float)) \
            or not scale.low <= note_threshold <= scale.high:
        raise DataError(f"note_threshold must lie on the confidence scale {scale.describe()}, "
                        f"got {note_threshold!r}", field="note_threshold")
    if evaluator is None:
        ev: Seat | str = replace(config.seats[0], name="evaluator", temperature=0.0,
                                 role="honest")
    elif evaluator == "exact":
        ev = "exact"
    else:
        ev = _seat_as(evaluator, config, "evaluator")
    if isinstance(judge, str) and judge == "config":
        judge = config.methods.judge
    return _Settings(router, scale, max_outer_rounds, turns, float(note_threshold),
                     recent_window, ev, None if judge is None else _seat_as(judge, config, "judge"),
                     bool(speak_sees_poll))


# ================================================================================== the run
@dataclass
class BroadcastSummary:
    """What a broadcast run did: ``n_problems`` problems and ``n_blocks`` poll blocks written to
    ``out`` (manifest beside it), the ledger's totals, ``parse_failures`` (polls and evaluator
    replies still unusable after the re-asks), ``reasks``, ``outcomes`` (per problem: the final
    answer, its correctness against the gold, the last verdict, the outer rounds used) and
    ``card_fields`` (the Trace-Audit Card fields of this protocol, for
    :func:`bda_jax.audit.audit_broadcast` / ``audit_file``)."""

    out: str
    manifest: str
    n_problems: int
    n_blocks: int
    ledger: dict
    parse_failures: list[dict] = field(default_factory=list)
    reasks: int = 0
    outcomes: list[dict] = field(default_factory=list)
    card_fields: dict = field(default_factory=dict)

    @property
    def passed(self) -> int:
        """Problems whose last evaluator verdict is PASS."""
        return sum(o["verdict"] == "PASS" for o in self.outcomes)

    def to_json(self) -> dict:
        return {"out": self.out, "manifest": self.manifest, "n_problems": self.n_problems,
                "n_blocks": self.n_blocks, "passed": self.passed, "ledger": self.ledger,
                "parse_failures": self.parse_failures, "reasks": self.reasks,
                "outcomes": self.outcomes, "card_fields": self.card_fields}


@dataclass
class _Tally:
    parse_failures: list = field(default_factory=list)
    reasks: int = 0


def _extras(reply, seat: Seat) -> dict:
    return {"model": reply.model or seat.model, "latency_s": round(reply.latency_s, 4),
            "cache_hit": reply.cached}


async def _structured(caller: Caller, seat: Seat, messages: list[dict], task: MethodTask,
                      channel: str, schema: dict, parse, keys, max_reasks: int, tally: _Tally):
    """One structured call with bounded re-asks: ``(parsed or None, reason, last reply)``."""
    reason = ""
    for attempt in range(max_reasks + 1):
        reply = await caller.chat(seat, messages, task=task, channel=channel, schema=schema)
        try:
            return parse(reply.text), "", reply
        except _Unusable as err:
            reason = str(err.args[0])
            if attempt < max_reasks:
                tally.reasks += 1
                messages = [*messages, {"role": "assistant", "content": reply.text},
                            broadcast_reask(reason, keys)]
    return None, reason, reply


def _object(text: str, keys) -> dict:
    obj = json_object(text)
    if obj is None:
        raise _Unusable("not a JSON object")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise _Unusable(f"missing key(s) {', '.join(missing)}")
    extra = [k for k in obj if k not in keys]
    if extra:
        raise _Unusable(f"unexpected key(s) {', '.join(map(str, extra))}")
    return obj


def _poll_parser(question: Question, scale: ConfidenceScale):
    def parse(text: str) -> dict:
        obj = _object(text, _POLL_KEYS)
        for k in ("reason", "intent", "candidate_answer"):
            if not isinstance(obj[k], str):
                raise _Unusable(f"{k} must be a string")
        if not isinstance(obj["has_candidate_answer"], bool):
            raise _Unusable("has_candidate_answer must be true or false")
        try:
            score = scale.check(obj["score"])
        except ValueError as err:
            raise _Unusable(str(err)) from None
        score = int(score) if scale.integer else score
        answer = None
        if obj["has_candidate_answer"]:
            answer = _canon(obj["candidate_answer"], question)
            if answer is None:
                raise _Unusable("candidate_answer is not one of the candidate answers"
                                if question.candidates is not None else
                                "candidate_answer is empty")
        return {"score": score, "answer": answer, "reason": obj["reason"],
                "intent": obj["intent"]}
    return parse


def _eval_parser(text: str) -> dict:
    obj = _object(text, _EVAL_KEYS)
    verdict = obj["verdict"].strip().upper() if isinstance(obj["verdict"], str) else None
    if verdict not in ("PASS", "FAIL"):
        raise _Unusable("verdict must be PASS or FAIL")
    if not isinstance(obj["hint"], str):
        raise _Unusable("hint must be a string")
    return {"verdict": verdict, "hint": " ".join(obj["hint"].split())}


def _where(question: Question, samples: int, question_file: str | None) -> dict:
    """The ``tier`` and ``cluster`` keys of a problem's poll lines: the question's ``tier``
    (an extra key of the question set: a non-empty string or an integer) and ``cluster`` (with
    several samples and no cluster, the question's id, so its samples resample together)."""
    out: dict = {}
    tier = question.extra.get("tier")
    if tier is not None:
        if isinstance(tier, bool) or not isinstance(tier, (str, int)) or not str(tier).strip():
            raise DataError(f"tier must be a non-empty string or an integer, got {tier!r}",
                            file=question_file, task_id=question.task_id, field="tier")
        out["tier"] = tier
    if question.cluster is not None:
        out["cluster"] = question.cluster
    elif samples > 1:
        out["cluster"] = question.task_id
    return out


class _Problem:
    """The deliberation of one problem (module docstring), accumulating its log lines."""

    def __init__(self, caller: Caller, config: CouncilConfig, st: _Settings, question: Question,
                 sample: int, tally: _Tally, question_file: str | None):
        self.caller, self.config, self.st, self.q, self.tally = caller, config, st, question, tally
        self.pid = trace_task_id(question, sample)
        self.task = MethodTask(self.pid, question, tuple(question.candidates or ()), sample, None)
        perm = np.random.default_rng(label_seed(config.seed, question.task_id, sample)) \
            .permutation(len(config.seats))
        self.labels = {s.name: f"Agent {int(p) + 1}" for s, p in zip(config.seats, perm)}
        self.where = _where(question, config.samples, question_file)
        self.public: list[PublicMessage] = []
        self.notes: dict[str, list[str]] = {s.name: [] for s in config.seats}
        self.feedback: list[str] = []
        self.incumbent: str | None = None
        self.lines: list[dict] = []

    def _held(self, seat: Seat) -> str | None:
        """The wrong answer an adversary seat has argued last in public (None if none)."""
        gold = None if self.q.gold is None else default_normalizer(self.q.gold)
        for m in reversed(self.public):
            if m.agent == seat.name and m.answer is not None \
                    and default_normalizer(m.answer) != gold:
                return m.answer
        return None

    async def _poll(self, seat: Seat, o: int, t: int) -> dict:
        st, q = self.st, self.q
        when = turn_line(o, st.max_outer_rounds, t, st.turns)
        messages = poll_messages(
            q.question, q.candidates, label=self.labels[seat.name], seat=seat.name,
            scale=st.scale, when=when, incumbent=self.incumbent, feedback=self.feedback,
            notes=self.notes[seat.name], public=self.public, recent_window=st.recent_window,
            role=seat.role, gold=q.gold, held=self._held(seat) if seat.role == "adversary" else None)
        parsed, reason, reply = await _structured(
            self.caller, seat, messages, self.task, f"poll:{seat.name}",
            poll_schema(q.candidates, st.scale), _poll_parser(q, st.scale), _POLL_KEYS,
            self.config.max_reasks, self.tally)
        if parsed is None:
            self.tally.parse_failures.append({"problem": self.pid, "outer_round": o, "turn": t,
                                              "agent": seat.name, "call": "poll",
                                              "reason": reason})
            parsed = {"score": None, "answer": None, "reason": None, "intent": None}
        line = {"kind": "poll", "problem": self.pid, **self.where, "outer_round": o, "turn": t,
                "agent": seat.name,
                "score": None if parsed["score"] is None else st.scale.unit(parsed["score"]),
                "candidate": parsed["answer"], "correct": _correct(parsed["answer"], q),
                "selected": False, "stated_score": parsed["score"], "reason": parsed["reason"],
                "intent": parsed["intent"], "label": self.labels[seat.name],
                **_extras(reply, seat)}
        if reason:
            line["error"] = reason
        return line

    async def _speak(self, seat: Seat, poll: dict, o: int, t: int) -> dict:
        st, q = self.st, self.q
        own = None
        if st.speak_sees_poll:
            answer = f'answer "{poll["candidate"]}"' if poll["candidate"] is not None \
                else "no answer"
            conf = "confidence not stated" if poll["stated_score"] is None else \
                f"confidence {poll['stated_score']:g} on {st.scale.describe()}"
            own = f"{answer}, {conf}." + (f" Your reasoning then: {poll['reason']}"
                                          if poll["reason"] else "")
        messages = speak_messages(
            q.question, q.candidates, label=self.labels[seat.name], seat=seat.name,
            when=turn_line(o, st.max_outer_rounds, t, st.turns), incumbent=self.incumbent,
            public=self.public, recent_window=st.recent_window, own_poll=own, role=seat.role,
            gold=q.gold, held=self._held(seat) if seat.role == "adversary" else None)
        reply = await self.caller.chat(seat, messages, task=self.task, channel=f"speak:{seat.name}")
        detail: dict = {}
        if q.candidates is not None:
            judge = None if st.judge is None else Judge(st.judge)
            spoken, rule, detail = await commitment(self.caller, self.task, reply.text, None, judge)
        else:
            spoken, rule = _open_spoken(reply.text, q)
        cand = poll["candidate"]
        equivalence = None if spoken is None or cand is None else \
            "equivalent" if default_normalizer(spoken) == default_normalizer(cand) else "divergent"
        line = {"kind": "speak", "problem": self.pid, "outer_round": o, "turn": t,
                "speaker": seat.name, "spoken": spoken, "spoken_correct": _correct(spoken, q),
                "incumbent": self.incumbent,
                "earlier_public": [{"agent": m.agent, "answer": m.answer} for m in self.public
                                   if m.answer is not None],
                "equivalence": equivalence,
                "equivalence_source": None if equivalence is None else "exact",
                "message": reply.text, "spoken_rule": rule, "label": self.labels[seat.name],
                **_extras(reply, seat)}
        if "judge" in detail:
            line["judge"] = detail["judge"]
        self.public.append(PublicMessage(seat.name, self.labels[seat.name], o, t, reply.text,
                                         spoken))
        return line

    async def _evaluate(self, o: int) -> dict:
        st, q = self.st, self.q
        out = {"outer_round": o, "submitted": self.incumbent, "evaluator": st.evaluator_name()}
        if self.incumbent is None:
            return {**out, "verdict": "FAIL", "correct": False, "hint": _NO_ANSWER_HINT}
        if st.evaluator == "exact":
            ok = _correct(self.incumbent, q)
            if ok is None:
                return {**out, "verdict": None, "correct": None, "hint": "",
                        "error": "the question has no gold answer to compare with"}
            return {**out, "verdict": "PASS" if ok else "FAIL", "correct": ok,
                    "hint": "" if ok else _EXACT_FAIL_HINT}
        seat = st.evaluator
        messages = evaluator_messages(q.question, q.candidates, submitted=self.incumbent,
                                      reference=q.gold, outer_round=o)
        parsed, reason, reply = await _structured(
            self.caller, seat, messages, self.task, "evaluator", evaluator_schema(), _eval_parser,
            _EVAL_KEYS, self.config.max_reasks, self.tally)
        extras = _extras(reply, seat)
        if parsed is None:
            self.tally.parse_failures.append({"problem": self.pid, "outer_round": o,
                                              "turn": None, "agent": "evaluator",
                                              "call": "evaluator", "reason": reason})
            return {**out, "verdict": None, "correct": None, "hint": "", "error": reason,
                    **extras}
        hint = parsed["hint"] if parsed["verdict"] == "FAIL" else ""
        out.update(verdict=parsed["verdict"], correct=parsed["verdict"] == "PASS", hint=hint)
        if _leaks(hint, q.gold):
            out.update(hint="", hint_redacted=True)
        return {**out, **extras}

    async def run(self) -> dict:
        st, seats = self.st, self.config.seats
        evaluation: dict = {}
        o = 0
        for o in range(st.max_outer_rounds):
            spoken: list[str] = []
            for t in range(st.turns):
                polls = list(await asyncio.gather(*(self._poll(s, o, t) for s in seats)))
                chosen = route_floor(st.router, [p["score"] for p in polls],
                                     [None if p["candidate"] is None
                                      else default_normalizer(p["candidate"]) for p in polls],
                                     _block_rng(self.config.seed, self.pid, o, t))
                polls[chosen]["selected"] = True
                speak = await self._speak(seats[chosen], polls[chosen], o, t)
                for i, (seat, p) in enumerate(zip(seats, polls)):
                    if i != chosen and p["stated_score"] is not None and p["reason"] \
                            and p["stated_score"] >= st.note_threshold:
                        self.notes[seat.name].append(
                            f"(outer round {o + 1}, turn {t + 1}) {p['reason']}")
                self.lines += [*polls, speak]
                if speak["spoken"] is not None:
                    spoken.append(speak["spoken"])
            if spoken:                       # plurality of the round, the latest wins ties
                counts: dict[str, int] = {}
                for a in spoken:
                    counts[default_normalizer(a)] = counts.get(default_normalizer(a), 0) + 1
                top = max(counts.values())
                self.incumbent = [a for a in spoken if counts[default_normalizer(a)] == top][-1]
            evaluation = await self._evaluate(o)
            self.lines[-1]["evaluation"] = evaluation
            if evaluation["verdict"] == "PASS":
                break
            if evaluation["verdict"] == "FAIL":
                said = "no answer" if self.incumbent is None else f'"{self.incumbent}"'
                self.feedback.append(f"After outer round {o + 1}, the group's answer {said} was "
                                     "judged FAIL." + (f" Hint: {evaluation['hint']}"
                                                       if evaluation["hint"] else ""))
        return {"problem": self.pid, "final_answer": self.incumbent,
                "final_correct": _correct(self.incumbent, self.q),
                "verdict": evaluation.get("verdict"), "outer_rounds": o + 1,
                "blocks": (o + 1) * st.turns}


def _line(rec: dict) -> str:
    return json.dumps(rec, ensure_ascii=False, allow_nan=False)


async def _served_models(client: CouncilClient, names) -> dict:
    served: dict = {}
    for name in names:
        try:
            served[name] = await client.list_models(name)
        except UpstreamError as err:          # a server without GET /models still runs
            if err.status not in (404, 405, 501):
                raise
            served[name] = {"error": err.reason}
    return served


async def _run(questions, config, st, out, cache, ledger, progress, question_file):
    client = CouncilClient(config.endpoints, cache, ledger)
    caller = Caller(client)
    tally = _Tally()
    jobs = [_Problem(caller, config, st, q, s, tally, question_file)
            for q in questions for s in range(config.samples)]
    results: list = [None] * len(jobs)
    gate = asyncio.Semaphore(TASK_CONCURRENCY)
    done = 0
    partial = Path(f"{out}.partial")
    try:
        served: dict = {}
        if cache.mode != "replay":            # replay-only runs never touch the network
            used = {s.endpoint for s in config.seats}
            for extra in (st.evaluator, st.judge):
                if isinstance(extra, Seat):
                    used.add(extra.endpoint)
            served = await _served_models(client, [n for n in config.endpoints if n in used])
        if progress is not None:
            progress(0, len(jobs), ledger.running())
        with open(partial, "w", encoding="utf-8") as fh:
            async def one(i, job):
                nonlocal done
                async with gate:
                    outcome = await job.run()
                results[i] = outcome
                fh.write("".join(_line(r) + "\n" for r in job.lines))
                fh.flush()
                done += 1
                if progress is not None:
                    progress(done, len(jobs), ledger.running())
            await asyncio.gather(*(one(i, j) for i, j in enumerate(jobs)))
    finally:
        await client.aclose()
    atomic_write(out, lambda h: h.write("".join(_line(r) + "\n" for j in jobs for r in j.lines)),
                 suffix=".jsonl")
    partial.unlink(missing_ok=True)
    return results, tally, served


def _sha256_file(path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _card_fields(config: CouncilConfig, st: _Settings) -> dict:
    """The Trace-Audit Card fields ([Audit] Table 21, Table 8 knobs) this run determines."""
    temps = {s.temperature for s in config.seats}
    sc = st.scale
    rules = {"runtime_argmax": "confidence argmax",
             "top_confidence_tie_random": "confidence argmax, ties uniform at random",
             "random_valid": "uniform among agents with a parsed answer",
             "majority_vote": "exact-answer majority vote, then a uniform member",
             "confidence_weighted_vote": "confidence-weighted cluster vote, then a uniform member"}
    ev = "exact match of the submitted answer with the gold answer" if st.evaluator == "exact" \
        else f"LLM evaluator {st.evaluator.model} (temperature {st.evaluator.temperature:g}) " \
             "with the gold answer as reference"
    return {
        "protocol_name": "confidence-routed broadcast (bda_jax live)",
        "protocol_version": f"bda_jax {__version__}, prompts {BROADCAST_PROMPT_VERSION}",
        "agent_model": sorted({s.model for s in config.seats}),
        "routing_rule": rules[st.router],
        "tie_rule": "first listed agent wins (strict >)" if st.router == "runtime_argmax"
        else "uniform at random, seeded per block",
        "confidence_scale": f"{sc.describe()}, logged as (stated - {sc.low:g}) / "
                            f"({sc.high:g} - {sc.low:g}) on [0, 1]",
        "decoding_temperature": temps.pop() if len(temps) == 1 else None,
        "speak_threshold": sc.unit(st.note_threshold),
        "memory_regime": f"summary_plus_recent (recent window {st.recent_window})",
        "approval_policy": "incumbent = plurality of the outer round's spoken answers (latest "
                           "wins ties), persists until overridden; no approval rounds",
        "evaluator": ev,
        "judge": None if st.judge is None else f"{st.judge.model} (temperature "
                                               f"{st.judge.temperature:g})",
        "extraction_method": "poll: structured JSON field; speak: " + (
            "candidate-restricted extractor" + ("" if st.judge is None else ", then the judge")
            + " (questions with candidates); last \\boxed{} or Answer: line (open questions)"),
    }


def run_broadcast(questions: Sequence[Question], config: CouncilConfig, out, *,
                  router: str = "runtime_argmax", confidence_scale="0-100",
                  max_outer_rounds: int = 2, turns: int = 4, note_threshold: float | None = None,
                  recent_window: int = 5, evaluator: Seat | str | None = None,
                  judge: Seat | str | None = "config", speak_sees_poll: bool = True,
                  cache_path=None, cache_mode: str = "record",
                  progress: Callable[[int, int, dict], None] | None = None,
                  question_file: str | None = None,
                  config_file: str | None = None) -> BroadcastSummary:
    """Run the confidence-routed broadcast protocol ([Audit] Fig. 1, Tables 7-8; the module
    docstring) on every question ``config.samples`` times with the config's seats as agents, and
    write the broadcast log to ``out``.

    Protocol: ``router`` (one of :data:`BROADCAST_ROUTERS`; :func:`route_floor`),
    ``confidence_scale`` (a :class:`ConfidenceScale` or ``"0-100"``, ``"0-1"``, ...),
    ``max_outer_rounds`` and ``turns`` (discussion turns per outer round; the paper's four),
    ``note_threshold`` (on the stated scale; default 65 % of it, the paper's 65 of 100),
    ``recent_window`` (public messages shown in full; the paper's 5), ``evaluator`` (None: the
    first seat at temperature 0; a seat name or :class:`Seat`; ``"exact"``: gold comparison
    without a call), ``judge`` (the frozen judge for spoken answers the extractor cannot read:
    ``"config"`` = the config's ``[methods.judge]``, None, a seat name or a :class:`Seat`),
    ``speak_sees_poll`` (the speaker is shown its own poll of the turn). ``config.rounds`` and
    ``extra_forces`` belong to the council protocol and are not used.

    ``cache_path`` (default ``<out>.cache.sqlite``), ``cache_mode`` and ``progress`` as in
    :func:`~bda_jax.council.run_council`. Writes ``out`` atomically (question order) and
    ``<out>.manifest.json`` (config fingerprint, package and prompt versions, protocol settings,
    seats with roles, endpoint models, input SHA-256, parse failures, outcomes, card fields,
    ledger). An ``out`` that is one of the inputs is refused with
    :class:`~bda_jax.DataError`. Returns a :class:`BroadcastSummary`.
    """
    out = os.fspath(out)
    refuse_input_as_output(out, questions=question_file, config=config_file)
    if not questions:
        raise DataError("the question set is empty", file=question_file, field="questions")
    if not isinstance(config, CouncilConfig):
        raise DataError(f"config must be a CouncilConfig, got {type(config).__name__}",
                        field="config")
    st = _settings(config, router=router, confidence_scale=confidence_scale,
                   max_outer_rounds=max_outer_rounds, turns=turns, note_threshold=note_threshold,
                   recent_window=recent_window, evaluator=evaluator, judge=judge,
                   speak_sees_poll=speak_sees_poll)
    for q in questions:
        _where(q, config.samples, question_file)          # every question checked before a call
    cache_path = f"{out}.cache.sqlite" if cache_path is None and cache_mode != "off" \
        else cache_path
    ledger = Ledger(config.prices)
    t0 = time.time()
    with ReplyCache(cache_path, mode=cache_mode) as cache:
        outcomes, tally, served = asyncio.run(_run(questions, config, st, out, cache, ledger,
                                                   progress, question_file))
    summary = ledger.summary()
    cards = _card_fields(config, st)
    n_blocks = sum(o["blocks"] for o in outcomes)
    manifest_path = f"{out}.manifest.json"
    manifest = {
        "schema_version": BROADCAST_MANIFEST_SCHEMA_VERSION, "kind": BROADCAST_MANIFEST_KIND,
        "package_version": __version__, "prompt_version": BROADCAST_PROMPT_VERSION,
        "config_fingerprint": config.fingerprint(), "config_file": config_file,
        "questions_file": question_file,
        "questions_sha256": None if question_file is None else _sha256_file(question_file),
        "samples": config.samples, "seed": config.seed, "max_reasks": config.max_reasks,
        "protocol": st.to_json(),
        "seats": [{"name": s.name, "endpoint": s.endpoint, "model": s.model, "role": s.role,
                   "temperature": s.temperature, "seed": s.seed} for s in config.seats],
        "endpoint_models": served, "n_problems": len(outcomes), "n_blocks": n_blocks,
        "parse_failures": len(tally.parse_failures), "reasks": tally.reasks,
        "outcomes": outcomes, "card_fields": cards, "ledger": summary,
        "cache": {"path": None if cache_path is None else os.fspath(cache_path),
                  "mode": cache_mode},
        "run": {"started": t0, "seconds": time.time() - t0},
    }
    atomic_write(manifest_path, lambda fh: fh.write(json.dumps(manifest, indent=1) + "\n"))
    return BroadcastSummary(out=out, manifest=manifest_path, n_problems=len(outcomes),
                            n_blocks=n_blocks, ledger=summary,
                            parse_failures=tally.parse_failures, reasks=tally.reasks,
                            outcomes=outcomes, card_fields=cards)


def run_broadcast_files(questions_path, config_path, out, *, local: bool = False,
                        cache_path=None, cache_mode: str = "record", progress=None,
                        **protocol) -> BroadcastSummary:
    """``bda council broadcast``: read the question set (:func:`read_questions`) and the config
    (:func:`read_config`; with ``local`` and no config, three honest seats of the local model,
    :func:`local_config`), start the local model when ``local`` (:func:`local_server`; every
    endpoint then points at it), and :func:`run_broadcast` with the ``protocol`` keywords."""
    from ._config import read_config
    from ._questions import read_questions
    from ._runner import on_model
    qs = read_questions(questions_path)
    cfg = None if config_path is None else read_config(config_path)
    if cfg is None and not local:
        raise DataError("give a council config (or local=True for the bundled local model)",
                        field="config")
    kwargs = dict(cache_path=cache_path, cache_mode=cache_mode, progress=progress,
                  question_file=os.fspath(questions_path),
                  config_file=None if config_path is None else os.fspath(config_path), **protocol)
    return on_model(cfg, local, lambda c: run_broadcast(qs, c, out, **kwargs))
