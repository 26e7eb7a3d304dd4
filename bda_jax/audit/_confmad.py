"""ConfMAD debate results read as an offline-replay broadcast log: :func:`load_confmad`
(:class:`ConfmadReport` says what was read). No routing happened in ConfMAD (a fixed speaking
order); each debate round becomes one block and the runtime argmax is replayed on it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import NamedTuple

from ._assemble import PollRecord, assemble_log
from ._common import is_int, short_repr
from ._log import BroadcastLog
from ._router import runtime_argmax
from .._core.io import DuplicateKeyError, unique_keys
from .._core.errors import DataError, TraceError

__all__ = ["CONFMAD_FALLBACK_SCORE", "ConfmadReport", "load_confmad"]


_CONFMAD_PARSERS = {
    "strict": re.compile(r"Answer:\s*\((\d)\)"),
    "lenient": re.compile(r"Answer:\s*(?:\\boxed\{)?\s*\(?(\d)\b"),
}
_GOLD = re.compile(r"^\s*\((\d)\)")
CONFMAD_FALLBACK_SCORE = 50
"""The confidence ConfMAD records when it cannot locate the answer tokens."""


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
            data = json.load(handle, object_pairs_hook=unique_keys)
    except OSError as err:
        raise TraceError(f"cannot open ConfMAD file: {err.strerror}", file=file) from None
    except DuplicateKeyError as err:
        raise TraceError(f"a JSON object repeats the key {err.key!r}", file=file,
                         field=err.key) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceError(f"not a JSON document: {err}", file=file) from None
    if not isinstance(data, list) or len(data) < 2 or not isinstance(data[0], dict):
        raise TraceError("expected a JSON list: the run config, then one object per problem",
                         file=file)
    config = data[0]
    agents_cfg = config.get("debate_agents")
    n_per_block = len(agents_cfg) if isinstance(agents_cfg, dict) and agents_cfg else 2
    task = config.get("task") if isinstance(config.get("task"), str) else "confmad"
    polls: list[PollRecord] = []
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
            raise bad(f"ground_truth must read '(k) option text', got {short_repr(gold_text)}",
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
                raise bad(f"agent_name must be a non-empty string, got {short_repr(agent)}",
                          fld + ".agent_name")
            if not isinstance(response, str):
                raise bad(f"response must be a string, got {type(response).__name__}",
                          fld + ".response")
            if not is_int(conf) or not 0 <= conf <= 100:
                raise bad("Confidence score must be an integer in [0, 100], got "
                          f"{short_repr(conf)}", fld + ".Confidence score")
            n_fallback += conf == CONFMAD_FALLBACK_SCORE
            score = (math.nan if fallback_as_missing and conf == CONFMAD_FALLBACK_SCORE
                     else conf / 100.0)
            m = regex.search(response)
            candidate = None if m is None else m.group(1)
            correct = None if candidate is None else candidate == gold
            n_correct += bool(correct)
            polls.append(PollRecord((None, f"element {k}, {fld}"), problem, None, None, 0,
                                    j // n_per_block, agent, score, candidate, correct, False))
    log = assemble_log(polls, [], error=TraceError, file=str(file), cluster_size=cluster_size)
    log = dataclasses.replace(log, selected=runtime_argmax(log))
    n_parsed = sum(p.candidate is not None for p in polls)
    report = ConfmadReport(str(file), parser, len(data) - 1, len(polls), n_parsed, n_fallback,
                           n_correct)
    return log, report

