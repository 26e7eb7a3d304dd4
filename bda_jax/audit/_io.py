"""Broadcast logs as files and records: the JSON Lines format, its validation, reading (from a
file, in-memory records or pandas frames) and writing.

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
agent           non-empty string          the polled agent; required, unique within a block.
                                          Read as an agent id: NFKC, stripped (``normalize_id``)
score           number or null            stated confidence; null = not stated (stored NaN).
                                          Must lie in ``score_range`` (default [0, 1]).
candidate       string or null            the extracted answer; null = no parsable answer.
                                          Normalized on reading (``normalizer``); an empty
                                          or whitespace-only answer, or one that normalizes
                                          to "", counts as null (as in every reader)
correct         boolean or null           the candidate's correctness label; null = unlabeled.
                                          ``true`` with a null candidate is an error.
selected        boolean (default false)   whether the router gave this agent the floor; at
                                          most one selected poll per block. A log in which no
                                          poll is selected is audited on a replayed selection
                                          (``effective_selection``)
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
speaker             non-empty string        required; an agent id like ``agent``
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
file, line, task (problem id) and field of the first bad record; a key repeated within one
object is such an error too (it names the key). :func:`write_broadcast_log`
writes a log back (polls of a block, then its speak record), so that reading it returns an equal
log.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Iterable, Mapping

import numpy as np

from ._assemble import PollRecord, SpeakRecord, assemble_log
from ._common import is_int, short_repr
from ._log import EQUIVALENCE_LABELS, BroadcastLog
from .._core.errors import DataError, TraceError
from .._core.io import atomic_write, read_json_lines
from .._core.normalize import Normalizer, default_normalizer, normalize_id

__all__ = ["from_frame", "from_records", "read_broadcast_log", "write_broadcast_log"]

_MAX_INT = 2**31 - 1        # largest outer_round / turn


class _Bad(Exception):
    def __init__(self, reason: str, field: str | None = None):
        super().__init__(reason)
        self.reason, self.field = reason, field


def _id(raw: Mapping, key: str, *, required: bool) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise _Bad(f"record has no {key!r}", key)
        return None
    if isinstance(value, str) and value.strip():
        return value
    if is_int(value) and abs(int(value)) < 2**63:
        return str(int(value))
    raise _Bad(f"{key} must be a non-empty string or an integer, got {type(value).__name__} "
               f"{short_repr(value)}", key)


def _count(raw: Mapping, key: str) -> int:
    if key not in raw or raw[key] is None:
        raise _Bad(f"record has no {key!r}", key)
    value = raw[key]
    if not is_int(value) or not 0 <= value <= _MAX_INT:
        raise _Bad(f"{key} must be a non-negative integer, got {short_repr(value)}", key)
    return int(value)


def _flag(raw: Mapping, key: str, *, default) -> bool | None:
    value = raw.get(key, default)
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    raise _Bad(f"{key} must be true, false or null, got {type(value).__name__} {short_repr(value)}",
               key)


def _answer(raw: Mapping, key: str, normalizer: Normalizer | None) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"{key} must be a string or null, got {type(value).__name__} "
                   f"{short_repr(value)}", key)
    if not value.strip():              # an empty answer is no answer, whatever the normalizer
        return None
    value = normalizer(value) if normalizer is not None else value
    return value if value != "" else None


def _agent_id(raw: Mapping, key: str) -> str:
    """An agent id (``agent``, ``speaker``): a non-empty string, read through
    :func:`~bda_jax._core.normalize.normalize_id` (NFKC, stripped) so that two spellings of one
    agent are one agent."""
    value = raw.get(key)
    if not isinstance(value, str) or not normalize_id(value):
        raise _Bad(f"{key} must be a non-empty string, got {short_repr(value)}", key)
    return normalize_id(value)


def _text(raw: Mapping, key: str) -> str | None:
    value = raw.get(key)
    if value is None or (isinstance(value, str) and value):
        return value
    raise _Bad(f"{key} must be a non-empty string or null, got {short_repr(value)}", key)


def _parse_record(raw, where, normalizer, score_range):
    if not isinstance(raw, dict):
        raise _Bad(f"a record must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in ("poll", "speak"):
        err = _Bad(f"unknown kind {short_repr(kind)}; expected 'poll' or 'speak'", "kind")
        try:
            err.problem = _id(raw, "problem", required=False)
        except _Bad:
            pass
        raise err
    problem = _id(raw, "problem", required=True)
    try:
        outer_round, turn = _count(raw, "outer_round"), _count(raw, "turn")
        if kind == "poll":
            agent = _agent_id(raw, "agent")
            score = raw.get("score")
            if score is None:
                score = math.nan
            else:
                if not isinstance(score, (int, float, np.integer, np.floating)) \
                        or isinstance(score, (bool, np.bool_)):
                    raise _Bad(f"score must be a number or null, got {type(score).__name__} "
                               f"{short_repr(score)}", "score")
                try:
                    score = float(score)
                except OverflowError:       # a JSON integer too large for a float
                    raise _Bad(f"score {short_repr(score)} overflows a float (too large to be "
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
            return PollRecord(where, problem, _id(raw, "tier", required=False),
                         _id(raw, "cluster", required=False), outer_round, turn, agent, score,
                         candidate, correct, selected)
        speaker = _agent_id(raw, "speaker")
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
                                                           and normalize_id(item["agent"]))):
                    answer = _answer(item, "answer", normalizer)
                    author = None if item.get("agent") is None else normalize_id(item["agent"])
                else:
                    raise _Bad(f"earlier_public[{k}] must be an answer string or an object "
                               f"{{'agent': non-empty str or null, 'answer': str}}, got "
                               f"{short_repr(item)}",
                               "earlier_public")
                if answer is not None:
                    items.append((author, answer))
            earlier = tuple(items)
        equivalence = raw.get("equivalence")
        if equivalence is not None and equivalence not in EQUIVALENCE_LABELS:
            raise _Bad(f"equivalence must be 'equivalent', 'divergent' or null, got "
                       f"{short_repr(equivalence)}", "equivalence")
        return SpeakRecord(where, problem, outer_round, turn, speaker, spoken, spoken_correct,
                      _answer(raw, "incumbent", normalizer), earlier, equivalence,
                      _text(raw, "equivalence_source"))
    except _Bad as err:
        err.problem = problem
        raise


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
        (polls if isinstance(rec, PollRecord) else speaks).append(rec)
    return assemble_log(polls, speaks, error=TraceError, file=file, cluster_size=cluster_size,
                        cluster_order=cluster_order)


def read_broadcast_log(path, *, normalizer: Normalizer | None = default_normalizer,
                       score_range: tuple[float, float] | None = (0.0, 1.0),
                       cluster_size: int = 10,
                       cluster_order: str = "appearance") -> BroadcastLog:
    """Read and validate a broadcast log in the JSON Lines format of this module's docstring
    (docs/audit.md).

    ``normalizer`` is applied to every answer (``None``: take answers as written);
    ``score_range`` bounds the stated scores (``None``: no check, e.g. for raw 0-100 scores);
    ``cluster_size`` is the chunk length of the default clusters and ``cluster_order`` what
    "consecutive" means for them: ``"appearance"`` (order of first appearance in the file) or
    ``"sorted"`` (sorted problem ids, digit runs compared as numbers: "p2" before "p10").
    The first bad record raises :class:`~bda_jax.TraceError` naming file, line, task (problem
    id) and field.
    """
    path = os.fspath(path)
    items = ((line, "", raw) for line, raw in read_json_lines(path, TraceError, "broadcast log",
                                                              ids={"task_id": "problem"}))
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

