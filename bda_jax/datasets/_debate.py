"""Debate transcripts in the Du et al. (2023) format -> validated :class:`Trace` lists.

* **Du et al. debates** (:func:`load_du_debate`): 3 agents x 2 rounds on GSM8K or the arithmetic
  task, full chat transcripts; each agent's answer per round is extracted from free text.
* **Small-model debates** (:func:`load_slm_debate`): the same transcript format, 5 persona agents x
  3 rounds, GSM8K (numbers) or MMLU (letters).

Free-text answers go through the candidate-restricted parsers (:func:`parse_number`,
:func:`parse_letter`), every load returns a :class:`ParseReport` with the below-chance tripwire
of [BDA] Appendix D.3, and answer revisions become moves by :func:`revisions_to_moves`.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from .._core.errors import DataError
from .._core.io import DuplicateKeyError, loads_unique
from .._core.normalize import normalize_id
from .._core.traces import Trace
from ._moves import MOVE_MAPPINGS, answers_said, revisions_to_moves
from ._parse_report import ParseReport, apply_tripwire, build_parse_report
from ._parsers import canonical_number, parse_letter, parse_number

__all__ = ["DebateLoad", "load_du_debate", "load_slm_debate"]

_OPTION_RE = re.compile(r"(?:^|[\s:,;])([A-J])\)\s+(.*?)(?=,?\s+[A-J]\)\s|\s+Answer in |"
                        r"\s+Explain your|$)", re.S)


def _options_from_question(question: str) -> dict[str, str]:
    """Option letters and texts listed as ``A) text, B) text, ...`` in a question."""
    found = {}
    for letter, body in _OPTION_RE.findall(question):
        if letter not in found:
            found[letter] = body.strip().rstrip(",")
    letters = "".join(found)
    return found if letters and "ABCDEFGHIJ".startswith(letters) and len(found) >= 2 else {}


class DebateLoad(NamedTuple):
    """What :func:`load_du_debate` / :func:`load_slm_debate` return: traces and parse report."""

    traces: list[Trace]
    report: ParseReport


def _task_hash(kind: str, question: str) -> str:
    return f"{kind}-{hashlib.sha1(question.encode('utf-8')).hexdigest()[:10]}"


def _key_lines(raw: str, keys: Iterable[str]) -> dict[str, int]:
    """1-based line of each top-level key in a JSON document (best effort, for error messages)."""
    out, pos = {}, 0
    for key in keys:
        needle = json.dumps(key, ensure_ascii=False) + ":"
        at = raw.find(needle, pos)
        if at < 0:
            needle = json.dumps(key) + ":"
            at = raw.find(needle, pos)
        if at >= 0:
            out[key] = raw.count("\n", 0, at) + 1
            pos = at + len(needle)
    return out


def _repeat_line(raw: str, key: str) -> int | None:
    """1-based line of the second occurrence of ``"key":`` (best effort), None if not found."""
    for needle in (json.dumps(key, ensure_ascii=False), json.dumps(key)):
        first = raw.find(needle)
        second = raw.find(needle, first + 1) if first >= 0 else -1
        if second >= 0:
            return raw.count("\n", 0, second) + 1
    return None


def _agent_names(agent_names) -> list[str] | None:
    """The given agent names, checked: non-empty strings that stay distinct as agent ids (after
    :func:`~bda_jax._core.normalize.normalize_id`, which every trace reader applies)."""
    if agent_names is None:
        return None
    if isinstance(agent_names, str):
        raise DataError("agent_names must be a list of names, not one string",
                        field="agent_names")
    names = list(agent_names)
    seen: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not normalize_id(name):
            raise DataError(f"agent names must be non-empty strings, got {name!r}",
                            field="agent_names")
        key = normalize_id(name)
        if key in seen:
            raise DataError(f"agent names {seen[key]!r} and {name!r} are one agent id "
                            f"({key!r}: NFKC, stripped)", field="agent_names")
        seen[key] = name
    return [normalize_id(n) for n in names]


def _read_json_object(path: Path):
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataError(f"cannot read the file: {err.strerror}", file=path) from None
    except UnicodeDecodeError as err:
        raise DataError(f"not valid UTF-8 (byte {err.start + 1})", file=path) from None
    try:
        data = loads_unique(raw)
    except DuplicateKeyError as err:      # a repeated question would silently drop a record
        raise DataError(f"duplicate key {err.key[:80]!r} in one JSON object (a repeated key is "
                        "refused, not overwritten)", file=path, line=_repeat_line(raw, err.key),
                        field=err.key[:80]) from None
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON: {err.msg} (column {err.colno})", file=path,
                        line=err.lineno) from None
    except RecursionError:
        raise DataError("invalid JSON: nested too deeply", file=path) from None
    except ValueError as err:        # e.g. integers beyond Python's digit limit
        raise DataError(f"invalid JSON: {err}", file=path) from None
    if not isinstance(data, dict) or not data:
        raise DataError("expected a non-empty JSON object {question: [agent_contexts, gold, "
                        "...]}", file=path, line=1)
    return raw, data


def _detect_task(record, gold_raw) -> str:
    if isinstance(gold_raw, str) and re.fullmatch(r"\s*\(?[A-Ja-j]\)?\s*", gold_raw):
        return "mmlu"
    if isinstance(gold_raw, str) and "####" in gold_raw:
        return "gsm"
    if len(record) >= 3:
        return "arithmetic"
    return "gsm"


def _du_gold(task: str, gold_raw, where) -> str | None:
    if gold_raw is None:
        return None
    if task == "mmlu":
        if not isinstance(gold_raw, str) or not re.fullmatch(r"\s*\(?[A-Ja-j]\)?\s*", gold_raw):
            raise DataError(f"the gold of an MMLU record must be a letter, got {gold_raw!r}",
                            field="gold", **where)
        return re.sub(r"[^A-Ja-j]", "", gold_raw).upper()
    if isinstance(gold_raw, (int, float)) and not isinstance(gold_raw, bool):
        gold_raw = str(gold_raw)
    if not isinstance(gold_raw, str):
        raise DataError(f"the gold must be a string, got {type(gold_raw).__name__}",
                        field="gold", **where)
    text = gold_raw.split("####")[-1] if "####" in gold_raw else gold_raw
    value = canonical_number(text.strip())
    if value is None:
        raise DataError(f"cannot read a number from the gold {gold_raw[-60:]!r}", field="gold",
                        **where)
    return value


def _load_du_format(path, *, task: str | None, agent_names, agent_meta,
                    moves: str, one_vote_per_round: bool, keep_text: bool,
                    min_parse_rate: float, tripwire: str, max_examples: int,
                    extra_meta: Mapping[str, Any]) -> DebateLoad:
    if tripwire not in ("warn", "raise", "ignore"):
        raise DataError(f"tripwire must be 'warn', 'raise' or 'ignore', got {tripwire!r}",
                        field="tripwire")
    if moves not in MOVE_MAPPINGS:
        raise DataError(f"moves must be one of {MOVE_MAPPINGS}, got {moves!r}", field="moves")
    if task not in (None, "gsm", "arithmetic", "mmlu"):
        raise DataError(f"task must be 'gsm', 'arithmetic', 'mmlu' or None, got {task!r}",
                        field="task")
    path = Path(path)
    agent_names = _agent_names(agent_names)
    agent_meta = {normalize_id(k): v for k, v in (agent_meta or {}).items()}
    raw, data = _read_json_object(path)
    lines = _key_lines(raw, data.keys())
    traces, records, dropped = [], [], []
    chance = 0.0
    n_agents = None
    seen_ids: dict[str, int] = {}
    for index, (question, record) in enumerate(data.items()):
        where = dict(file=path, line=lines.get(question), task_id=question[:80])
        if not isinstance(record, list) or len(record) < 2:
            raise DataError("a record must be a list [agent_contexts, gold, ...]",
                            field="record", **where)
        contexts, gold_raw = record[0], record[1]
        this_task = task or _detect_task(record, gold_raw)
        task_id = _task_hash(this_task, question)
        where["task_id"] = task_id
        if task_id in seen_ids:
            raise DataError(f"the question repeats record {seen_ids[task_id] + 1}",
                            field="question", **where)
        seen_ids[task_id] = index
        if not isinstance(contexts, list) or not contexts:
            raise DataError("agent_contexts must be a non-empty list (one chat per agent)",
                            field="agent_contexts", **where)
        if n_agents is None:
            n_agents = len(contexts)
        elif len(contexts) != n_agents:
            raise DataError(f"{len(contexts)} agents where earlier records have {n_agents}",
                            field="agent_contexts", **where)
        names = list(agent_names) if agent_names is not None else [
            f"agent{i}" for i in range(n_agents)]
        if len(names) != n_agents:
            raise DataError(f"{len(names)} agent names for {n_agents} agents",
                            field="agent_names", **where)
        gold = _du_gold(this_task, gold_raw, where)
        options = _options_from_question(question) if this_task == "mmlu" else {}
        letters = "".join(options) if options else "ABCD"
        if this_task == "mmlu":
            chance = 1.0 / len(letters)
        answers_by_round: list[dict[str, str | None]] = []
        extras: dict[tuple[str, int], dict] = {}
        unparsed = []
        for i, chat in enumerate(contexts):
            if not isinstance(chat, list):
                raise DataError("an agent's context must be a list of chat messages",
                                field=f"agent_contexts[{i}]", **where)
            turn = 0
            for j, message in enumerate(chat):
                fld = f"agent_contexts[{i}][{j}]"
                if not isinstance(message, dict) or "role" not in message \
                        or "content" not in message:
                    raise DataError("a chat message must be an object with 'role' and "
                                    "'content'", field=fld, **where)
                if message["role"] != "assistant":
                    continue
                content = message["content"]
                if content is not None and not isinstance(content, str):
                    raise DataError(f"content must be a string, got "
                                    f"{type(content).__name__}", field=fld + ".content",
                                    **where)
                got = (parse_letter(content, letters, options) if this_task == "mmlu"
                       else parse_number(content))
                while len(answers_by_round) <= turn:
                    answers_by_round.append({})
                answers_by_round[turn][names[i]] = got.answer
                records.append({"task_id": task_id, "agent": names[i], "round": turn,
                                "parsed": got.answer, "rule": got.rule, "gold": gold,
                                "text": content})
                if got.answer is None:
                    unparsed.append([names[i], turn])
                else:
                    extra = {"rule": got.rule}
                    if keep_text:
                        extra["text"] = content
                    extras[(names[i], turn)] = extra
                turn += 1
            if turn == 0:
                raise DataError("the agent never answers (no assistant message)",
                                field=f"agent_contexts[{i}]", **where)
        move_list = revisions_to_moves(answers_by_round, names, moves=moves,
                                       one_vote_per_round=one_vote_per_round, extras=extras)
        extra = {"question": question, "source": {"file": path.name, "index": index},
                 "task": this_task, "unparsed": unparsed, "moves_mapping": moves}
        if agent_meta:
            extra["agent_meta"] = {n: dict(agent_meta[n]) for n in names if n in agent_meta}
        extra.update(extra_meta)
        if this_task == "arithmetic" and len(record) >= 3:
            extra["reference_flag"] = record[2]
        if not move_list:      # nothing parsed at all: the task is left out (and reported)
            dropped.append(task_id)
            continue
        candidates = tuple(letters) if this_task == "mmlu" else answers_said(move_list)
        traces.append(Trace(task_id, tuple(move_list), candidates, gold, cluster=task_id,
                            extra=extra))
    report = build_parse_report(path, task or "auto", records, chance=chance,
                                min_parse_rate=min_parse_rate, max_examples=max_examples,
                                dropped=dropped)
    apply_tripwire(report, tripwire)
    return DebateLoad(traces, report)


def load_du_debate(path, *, task: str | None = None, moves: str = "proposals",
                   one_vote_per_round: bool = False, agent_names: Sequence[str] | None = None,
                   model: str | None = None, keep_text: bool = False,
                   min_parse_rate: float = 0.9, tripwire: str = "warn",
                   max_examples: int = 20) -> DebateLoad:
    """Read a Du et al. (2023) debate transcript file (GSM8K or the arithmetic task).

    The file is one JSON object ``{question: [agent_contexts, gold, (flag)]}``; each agent's
    k-th assistant message is its round-k answer. Numbers are extracted by :func:`parse_number`
    (last ``\\boxed{}``, else the last number; commas stripped). Gold is the number after
    ``####`` in a GSM8K reference solution, or the answer string of the arithmetic task (whose
    third element, the original run's own 0/1 mark, is kept as ``extra["reference_flag"]``).

    ``task``: ``"gsm"``, ``"arithmetic"`` or ``"mmlu"`` (default: detected per record).
    ``moves`` / ``one_vote_per_round``: see :func:`revisions_to_moves`. Agent names default to
    ``agent0, agent1, ...``; for the arithmetic files the per-agent sampling temperatures are read
    from the file name (``temperature_0.4_0.7_1``) into ``extra["agent_meta"]``.

    Candidates: the distinct parsed answers of the task (gold is never added: a task whose gold
    nobody said is ``gold_missing``). Unparsed answers make no move; they are listed in
    ``extra["unparsed"]`` and in the report. Task ids hash the question text
    (``gsm-<sha1[:10]>``), so the same question gets the same id in every file.

    Returns ``DebateLoad(traces, report)``; ``tripwire`` (``"warn"``, ``"raise"`` or
    ``"ignore"``) decides what a flagged :class:`ParseReport` does (an agent below chance, or
    parsing fewer than ``min_parse_rate`` of its answers); the report keeps up to
    ``max_examples`` unparsed answers. ``keep_text=True`` stores each full response on its move
    (``Move.extra["text"]``); every move records the parser rule that fired
    (``Move.extra["rule"]``). Malformed records raise :class:`bda_jax.DataError` naming file,
    line, task id (the question text before the id is known) and field.
    """
    path = Path(path)
    temps = re.search(r"temperature_((?:[\d.]+_?)+)_evaluation", path.name)
    temperatures = [float(t) for t in temps.group(1).strip("_").split("_") if t] if temps else []
    n = len(agent_names) if agent_names is not None else (len(temperatures) or 3)
    names = list(agent_names) if agent_names is not None else [f"agent{i}" for i in range(n)]
    meta: dict[str, dict] = {name: {} for name in names}
    for name, value in zip(names, temperatures):
        meta[name]["temperature"] = value
    if model is not None:
        for name in names:
            meta[name]["model"] = model
    meta = {name: m for name, m in meta.items() if m}
    return _load_du_format(path, task=task, agent_names=agent_names, agent_meta=meta,
                           moves=moves, one_vote_per_round=one_vote_per_round,
                           keep_text=keep_text, min_parse_rate=min_parse_rate,
                           tripwire=tripwire, max_examples=max_examples, extra_meta={})


_SLM_NAME = re.compile(r"^(?P<task>[a-z0-9]+)_(?P<model>.+?)_persona_(?P<personas>.+?)"
                       r"_agents(?P<agents>\d+)_rounds(?P<rounds>\d+)$")


def load_slm_debate(path, *, task: str | None = None, moves: str = "proposals",
                    one_vote_per_round: bool = False, agent_names: Sequence[str] | None = None,
                    keep_text: bool = False, min_parse_rate: float = 0.9,
                    tripwire: str = "warn", max_examples: int = 20) -> DebateLoad:
    """Read a small-model persona debate file (Du et al. format, GSM8K or MMLU).

    Same record format as :func:`load_du_debate`. The file name
    ``{task}_{model}_persona_{p1+p2+...}_agents{n}_rounds{r}.json`` gives the task, the model and
    one persona per agent (in agent order, inferred), so agents are named ``{model}/{persona}``
    and files of different models can be pooled by task id (the question hash). MMLU answers go
    through :func:`parse_letter` restricted to the options listed in the question (chance 1/K);
    GSM8K answers through :func:`parse_number`. Gold: the letter, or the number after ``####``.

    Returns ``DebateLoad(traces, report)`` (see :func:`load_du_debate` for the options).
    """
    path = Path(path)
    m = _SLM_NAME.match(path.stem)
    meta: dict[str, dict] = {}
    names = agent_names
    extra = {}
    if m:
        personas = m.group("personas").split("+")
        model = m.group("model")
        if names is None and len(personas) == int(m.group("agents")):
            names = [f"{model}/{p}" for p in personas]
        if names is not None:
            meta = {n: {"model": model, "persona": p, "persona_inferred": True}
                    for n, p in zip(names, personas)}
        task = task or {"gsm": "gsm", "mmlu": "mmlu"}.get(m.group("task"))
        extra = {"model": model}
    return _load_du_format(path, task=task, agent_names=names, agent_meta=meta,
                           moves=moves, one_vote_per_round=one_vote_per_round,
                           keep_text=keep_text, min_parse_rate=min_parse_rate,
                           tripwire=tripwire, max_examples=max_examples, extra_meta=extra)
