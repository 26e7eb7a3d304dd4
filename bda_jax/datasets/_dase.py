"""Offline importers: real LLM ensemble and debate logs -> validated :class:`Trace` lists.

Three public log families are read (see ``shared/data/INDEX.md``):

* **DASE histories** (:func:`load_dase_history`): 5 worker slots re-answer an AIME or GPQA problem
  for up to 15 rounds; each round's normalized answers (``norms``) become moves. The released logs
  carry no gold, but every method's answer has a 0/1 correctness flag and problems are aligned by
  ``idx`` across files, so :func:`recover_dase_gold` rebuilds it (docs/stopping.md).
* **Du et al. debates** (:func:`load_du_debate`): 3 agents x 2 rounds on GSM8K or the arithmetic
  task, full chat transcripts; each agent's answer per round is extracted from free text.
* **Small-model debates** (:func:`load_slm_debate`): the same transcript format, 5 persona agents x
  3 rounds, GSM8K (numbers) or MMLU (letters).

Free-text answers go through candidate-restricted parsers (:func:`parse_number`,
:func:`parse_letter`) and every load returns a :class:`ParseReport` with the parse rates and the
below-chance tripwire of [BDA] Appendix D.3 (an agent scoring below chance usually means the
parser reads the wrong token, not that the agent is worse than guessing).

Answer revisions become typed moves by :func:`revisions_to_moves` (``moves="proposals"`` or
``moves="typed"``); see its docstring for the exact mapping. Every trace produced here passes
:func:`bda_jax.resolve_trace` strictly and tallies with :func:`bda_jax.tally`.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from .._core.errors import DataError
from .._core.io import read_json_lines
from .._core.normalize import default_normalizer
from .._core.traces import Move, Trace

__all__ = [
    "DaseGold", "DaseTraces", "DebateLoad", "MOVE_MAPPINGS", "ParseReport", "ParseWarning",
    "Parsed", "canonical_number", "dase_slot_models", "load_dase_history", "load_du_debate",
    "load_slm_debate", "normalize_dase_answer", "parse_letter", "parse_number",
    "recover_dase_gold", "revisions_to_moves",
]

MOVE_MAPPINGS = ("proposals", "typed")


class ParseWarning(UserWarning):
    """An answer-extraction tripwire fired (below-chance agent or low parse rate)."""


# ============================================================================ revisions -> moves
def _move_id(rnd: int, agent: str, suffix: str = "") -> str:
    return f"r{rnd}.{agent}{suffix}"


def revisions_to_moves(rounds: Sequence[Mapping[str, str | None]], agents: Sequence[str] | None
                       = None, *, moves: str = "proposals", one_vote_per_round: bool = False,
                       extras: Mapping[tuple[str, int], Mapping[str, Any]] | None = None
                       ) -> list[Move]:
    """Turn each agent's answer per round into typed moves (file order = time).

    ``rounds[r][agent]`` is the agent's (already normalized) answer in round ``r``; ``None`` or a
    missing key means no usable answer that round (it makes no move, and the agent's standing
    answer stays what it last said). Agents move in the order of ``agents`` (default: first seen).

    ``moves="proposals"``: every answer is a ``propose`` of it, in every round (a plain re-vote).

    ``moves="typed"``: round-0 answers are proposals; in a later round, with ``p`` the agent's own
    standing answer (its last answer in an earlier round) and ``a`` its answer now:

    * ``a == p``: keeping one's answer is a re-``propose`` of it;
    * else, if some peer answered ``a`` in the previous round: a ``concede`` whose target is that
      peer's latest move holding ``a`` from an earlier round (the first such peer in agent
      order; never a move of the same round, which the agent had not seen);
    * else (``a`` is new: no peer said it in the previous round): a ``retract`` of one's own move
      that holds ``p`` followed by a ``propose`` of ``a`` (only the propose if the agent had no
      answer yet).

    ``one_vote_per_round=True`` drops re-proposals in either mapping, so only new information
    counts: an unchanged answer makes no move (an agent's endorsement of an answer enters once,
    not once per round it repeats it -- the "vocal agent" effect of [BDA] Appendix D.5). This
    is not the same as ``bda_jax.tally(..., one_move_per_round=True)``, which keeps an agent's last
    informative move in each round (e.g. only the propose of a retract + propose pair); the two
    compose and the latter is not duplicated here.

    Move ids are ``r{round}.{agent}`` (``r{round}.{agent}.retract`` for the retract). ``extras``
    maps ``(agent, round)`` to extra keys stored on that round's answer move.

    >>> ms = revisions_to_moves([{"a": "1", "b": "2"}, {"a": "2", "b": "3"}], moves="typed")
    >>> [(m.id, m.force, m.target or m.answer) for m in ms]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('r0.a', 'propose', '1'), ('r0.b', 'propose', '2'), ('r1.a', 'concede', 'r0.b'),
     ('r1.b.retract', 'retract', 'r0.b'), ('r1.b', 'propose', '3')]
    """
    if moves not in MOVE_MAPPINGS:
        raise DataError(f"moves must be one of {MOVE_MAPPINGS}, got {moves!r}", field="moves")
    if agents is None:
        agents = list(dict.fromkeys(a for rnd in rounds for a in rnd))
    extras = extras or {}
    out: list[Move] = []
    standing: dict[str, str] = {}           # agent -> its current answer
    holder: dict[tuple[str, str], str] = {}  # (agent, answer) -> id of its latest move holding it
    previous: dict[str, str | None] = {}    # answers said in the previous round
    for rnd, said in enumerate(rounds):
        seen_before = dict(holder)          # moves of earlier rounds only: what agents saw
        for agent in agents:
            answer = said.get(agent)
            if answer is None:
                continue
            extra = dict(extras.get((agent, rnd), {}))
            own = standing.get(agent)
            mid = _move_id(rnd, agent)
            if own == answer:
                if not one_vote_per_round:
                    out.append(Move(mid, agent, rnd, "propose", answer, extra=extra))
                    holder[(agent, answer)] = mid
                continue
            if moves == "typed" and rnd > 0:
                peer = next((p for p in agents if p != agent and previous.get(p) == answer), None)
                if peer is not None:
                    target = seen_before[(peer, answer)]
                    out.append(Move(mid, agent, rnd, "concede", answer=answer, target=target,
                                    extra=extra))
                    holder[(agent, answer)] = mid
                    standing[agent] = answer
                    continue
                if own is not None:
                    out.append(Move(mid + ".retract", agent, rnd, "retract",
                                    target=holder[(agent, own)]))
            out.append(Move(mid, agent, rnd, "propose", answer, extra=extra))
            holder[(agent, answer)] = mid
            standing[agent] = answer
        previous = {a: said.get(a) for a in agents}
    return out


# ============================================================================ answer parsers
class Parsed(NamedTuple):
    """An extracted answer (``None`` when nothing committed was found) and the rule that fired."""

    answer: str | None
    rule: str | None


_NUM = (r"(?<![\w.])[-\u2212]?\$?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+(?![\d.]))?"
        r"|(?<![\w.])[-\u2212]?\.\d+")
_NUM_RE = re.compile(_NUM)
_FRAC_RE = re.compile(r"^\s*([-\u2212]?)\s*\\[dt]?frac\s*\{\s*([-\u2212]?[\d.,]+)\s*\}\s*"
                      r"\{\s*([\d.,]+)\s*\}")
_ANSWER_IS_NUM = re.compile(r"(?i:answer|result|total)[ \t]*(?:is|=|:|would be|will be)[ \t]*:?"
                            r"[ \t]*(?:\*\*)?[ \t]*(?:approximately[ \t]+)?(" + _NUM + r")"
                            r"(?![\d.,]*\d)(?!\s*[-+*/\u00d7=^]\s*[\d(])")  # a whole number, not
                                                                        # an expression's first


def canonical_number(text: str) -> str | None:
    """Canonical string of a number literal: commas and ``$`` dropped, exact value kept.

    Integers print as integers, terminating decimals in plain decimal notation without trailing
    zeros, other fractions as ``p/q`` in lowest terms, so ``0.5 == 1/2`` and ``18.00 == 18``.

    >>> canonical_number("1,234"), canonical_number("-18.50"), canonical_number("6/4")
    ('1234', '-18.5', '1.5')
    >>> canonical_number("2/3"), canonical_number("abc")
    ('2/3', None)
    """
    s = text.replace("\u2212", "-").replace("$", "").replace(",", "").replace(" ", "")
    try:
        value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        out = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
        return out.rstrip("0").rstrip(".") if "." in out else out
    return f"{value.numerator}/{value.denominator}"


def _boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` (balanced braces), ordered by where they start."""
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, start = 0, m.end() - 1
        for pos in range(start, len(text)):
            ch = text[pos]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    out.append(text[start + 1:pos])
                    break
    return out


def _number_in(fragment: str) -> str | None:
    frac = _FRAC_RE.match(fragment.replace("\\left", "").replace("\\right", ""))
    if frac:
        num, den = canonical_number(frac.group(2)), canonical_number(frac.group(3))
        if num is not None and den is not None and Fraction(den) != 0:
            value = Fraction(num) / Fraction(den) * (-1 if frac.group(1) else 1)
            return canonical_number(str(value))
    nums = _NUM_RE.findall(fragment.replace("{,}", ","))
    for raw in reversed(nums):
        value = canonical_number(raw)
        if value is not None:
            return value
    return None


def parse_number(text: str) -> Parsed:
    """Extract a numeric answer from free text (GSM8K, arithmetic).

    Rules, first that yields a number wins: the last ``\\boxed{...}`` (the last number inside it,
    or a ``\\frac{p}{q}`` filling it); a ``#### n`` line; "answer/result/total is n" (last
    occurrence); the last number in the text. Commas, ``$`` and trailing zeros are dropped, a
    leading minus is kept (a minus right after a digit is subtraction, not a sign), fractions
    are exact (:func:`canonical_number`).

    >>> parse_number("so she earns $\\\\boxed{1,234}$ dollars.")
    Parsed(answer='1234', rule='boxed')
    >>> parse_number("6 + 3 - 10 = -1. The result is -1.")
    Parsed(answer='-1', rule='answer_is')
    >>> parse_number("The final value: 552-70 = 482").answer
    '482'
    >>> parse_number("no digits here")
    Parsed(answer=None, rule=None)
    """
    if not isinstance(text, str):
        return Parsed(None, None)
    for content in reversed(_boxed(text)):
        value = _number_in(content)
        if value is not None:
            return Parsed(value, "boxed")
    hashes = re.findall(r"####\s*(" + _NUM + ")", text)
    if hashes and canonical_number(hashes[-1]) is not None:
        return Parsed(canonical_number(hashes[-1]), "hashes")
    said = _ANSWER_IS_NUM.findall(text)
    if said and canonical_number(said[-1]) is not None:
        return Parsed(canonical_number(said[-1]), "answer_is")
    value = _number_in(text)
    if value is not None:
        return Parsed(value, "last_number")
    return Parsed(None, None)


def _letter_rules(letters: str):
    L = f"[{letters}]"
    return [
        # the requested format: the response ends with the option letter, e.g. "(B)" or "**B**"
        ("final", re.compile(rf"[(\[]\s*({L})\s*[)\]][ \t*_.!]*$|(?:^|\n)[ \t>#]*"
                             rf"(?:(?i:answer)\s*:?\s*)?[*_]*\s*({L})\s*[*_]*[ \t.!]*$")),
        ("answer_is", re.compile(rf"(?i:answer|option|choice)(?:\s+\w+){{0,2}}?\s*"
                                 rf"(?:is|:|would be|=)\s*:?\s*(?:\*\*|__)?\s*"
                                 rf"(?i:option\s+|choice\s+)?[(\[]?({L})\b(?![-'])")),
        ("bold", re.compile(rf"\*\*\s*(?i:option\s+|choice\s+)?[(\[]?\s*({L})\s*[)\]]?"
                            rf"(?:[\s.:)][^*\n]*)?\*\*")),
        ("line_start", re.compile(rf"(?m)^[ \t>*_#]*\(\s*({L})\s*\)")),
    ]


def parse_letter(text: str, letters: Sequence[str] = "ABCD",
                 options: Mapping[str, str] | None = None) -> Parsed:
    """Extract a committed option letter, restricted to ``letters`` (MMLU, GPQA).

    Rules, first that fires wins: the response *ends* with the option ("(B)", "**B**",
    "Answer: B"); "answer/option/choice is (B)" (last occurrence); a bolded option ("**(B) ...**",
    "**Option B**", last occurrence); the last line that starts with "(B)"; a quoted option text
    ("B) <text of option B>", or the literal placeholder "(X) <text of option B>" that some models
    copy from the prompt) when ``options`` maps letters to their texts; finally a parenthesized
    letter, but only if exactly one distinct letter is parenthesized in the whole response. A bare
    capital letter in prose is never read (that is the sub-chance artifact of Appendix D.3).

    >>> parse_letter("Long reasoning about (A) and (C)... so the answer is **(B)**.").answer
    'B'
    >>> parse_letter("Therefore the answer is B, not A.")
    Parsed(answer='B', rule='answer_is')
    >>> parse_letter("(X) I cannot decide between (A) and (C) here.")
    Parsed(answer=None, rule=None)
    """
    if not isinstance(text, str):
        return Parsed(None, None)
    letters = "".join(letters).upper()
    body = text.strip()
    for name, pattern in _letter_rules(letters):
        found = [g if isinstance(g, str) else "".join(g) for g in pattern.findall(body)]
        if found:
            return Parsed(found[-1].upper(), name)
    if options:
        hits = set()
        for letter, option in options.items():
            option = option.strip().rstrip(".,").strip()
            if letter in letters and len(option) >= 3 and re.search(
                    rf"(?:(?<![A-Za-z]){re.escape(letter)}\)|\(X\))\s*{re.escape(option)}",
                    body, re.I):
                hits.add(letter)
        if len(hits) == 1:
            return Parsed(hits.pop(), "option_text")
    paren = set(re.findall(rf"\(\s*([{letters}])\s*\)", body))
    if len(paren) == 1:
        return Parsed(paren.pop(), "only_paren")
    return Parsed(None, None)


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


# ============================================================================ parse report
@dataclass(frozen=True)
class ParseReport:
    """How well answers were extracted from one transcript file, with the D.3 tripwire.

    ``parse_rate*``: fraction of answers that yielded a candidate (overall, per agent, per round,
    per ``(agent, round)``). ``accuracy_by_agent`` / ``accuracy_by_round``: fraction correct over
    all answers of labeled tasks (unparsed counts as wrong); ``parsed_accuracy_by_agent``: over
    parsed answers only (what the tripwire reads). ``majority_accuracy_by_round``: accuracy of the
    plurality of each round's parsed answers (a tie counts as the chance of drawing gold among
    the tied answers). ``chance``: 1/K for letter tasks, 0 for open numeric answers (where only
    the parse-rate floor can fire). ``below_chance``: agents whose parsed accuracy is below
    ``chance``; ``low_parse``: agents whose parse rate is below ``min_parse_rate``.
    ``tasks_without_answer``: tasks where no answer parsed at all (left out of the traces).
    """

    source: str
    task: str
    n_tasks: int
    n_labeled: int
    n_answers: int
    n_parsed: int
    parse_rate: float
    parse_rate_by_agent: dict[str, float]
    parse_rate_by_round: dict[int, float]
    parse_rate_by_agent_round: dict[tuple[str, int], float]
    rules: dict[str, int]
    unparsed: tuple[dict, ...]
    accuracy_by_agent: dict[str, float]
    accuracy_by_round: dict[int, float]
    parsed_accuracy_by_agent: dict[str, float]
    majority_accuracy_by_round: dict[int, float]
    chance: float
    min_parse_rate: float
    below_chance: tuple[str, ...] = ()
    low_parse: tuple[str, ...] = ()
    tasks_without_answer: tuple[str, ...] = ()

    @property
    def flagged(self) -> bool:
        """True when the tripwire fired (some agent below chance or below the parse floor)."""
        return bool(self.below_chance or self.low_parse)

    def summary(self) -> str:
        lines = [f"{self.source}: {self.task}, {self.n_tasks} tasks, {self.n_answers} answers, "
                 f"parse rate {self.parse_rate:.3f}"]
        for agent, rate in self.parse_rate_by_agent.items():
            acc = self.accuracy_by_agent.get(agent, float("nan"))
            lines.append(f"  {agent}: parsed {rate:.3f}, accuracy {acc:.3f}")
        if self.majority_accuracy_by_round:
            mv = ", ".join(f"r{r} {a:.3f}" for r, a in self.majority_accuracy_by_round.items())
            lines.append(f"  majority accuracy by round: {mv}")
        if self.below_chance:
            lines.append(f"  TRIPWIRE below chance ({self.chance:.3f}): {list(self.below_chance)}"
                         " -- check the answer parser before trusting these agents")
        if self.low_parse:
            lines.append(f"  TRIPWIRE parse rate below {self.min_parse_rate}: "
                         f"{list(self.low_parse)}")
        if self.tasks_without_answer:
            lines.append(f"  {len(self.tasks_without_answer)} task(s) without any parsed answer "
                         f"left out: {list(self.tasks_without_answer)[:5]}")
        return "\n".join(lines)


class DebateLoad(NamedTuple):
    """What :func:`load_du_debate` / :func:`load_slm_debate` return: traces and parse report."""

    traces: list[Trace]
    report: ParseReport


def _plurality_accuracy(answers: list[str], gold: str) -> float:
    if not answers:
        return 0.0
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    return (gold in tied) / len(tied)


def _build_report(source, task, records, chance, min_parse_rate, max_examples,
                  dropped=()) -> ParseReport:
    """``records``: dicts with task_id, agent, round, parsed (str|None), gold (str|None), text."""
    tasks = {r["task_id"] for r in records}
    labeled = {r["task_id"] for r in records if r["gold"] is not None}
    n_by = defaultdict(lambda: [0, 0, 0, 0])   # key -> [answers, parsed, labeled, correct]
    parsed_correct = defaultdict(lambda: [0, 0])
    rules = Counter()
    unparsed = []
    per_round = defaultdict(list)
    for r in records:
        ok = r["parsed"] is not None
        rules[r["rule"] or "unparsed"] += 1
        for key in ("all", ("agent", r["agent"]), ("round", r["round"]),
                    ("ar", r["agent"], r["round"])):
            cell = n_by[key]
            cell[0] += 1
            cell[1] += ok
            if r["gold"] is not None:
                cell[2] += 1
                cell[3] += ok and r["parsed"] == r["gold"]
        if ok and r["gold"] is not None:
            cell = parsed_correct[r["agent"]]
            cell[0] += 1
            cell[1] += r["parsed"] == r["gold"]
        if ok:
            per_round[(r["task_id"], r["round"])].append(r["parsed"])
        elif len(unparsed) < max_examples:
            text = r["text"] if isinstance(r["text"], str) else repr(r["text"])
            unparsed.append({"task_id": r["task_id"], "agent": r["agent"], "round": r["round"],
                             "tail": text[-300:]})
    gold_of = {r["task_id"]: r["gold"] for r in records}
    agents = list(dict.fromkeys(r["agent"] for r in records))
    rounds = sorted({r["round"] for r in records})
    rate = lambda c: c[1] / c[0] if c[0] else float("nan")
    acc = lambda c: c[3] / c[2] if c[2] else float("nan")
    majority = {}
    for rnd in rounds:
        scores = [_plurality_accuracy(per_round.get((t, rnd), []), gold_of[t])
                  for t in sorted(labeled)]
        if scores:
            majority[rnd] = sum(scores) / len(scores)
    parsed_acc = {a: c[1] / c[0] for a, c in parsed_correct.items() if c[0]}
    below = tuple(a for a in agents if a in parsed_acc and parsed_acc[a] < chance)
    low = tuple(a for a in agents if rate(n_by[("agent", a)]) < min_parse_rate)
    total = n_by["all"]
    return ParseReport(
        source=str(source), task=task, n_tasks=len(tasks), n_labeled=len(labeled),
        n_answers=total[0], n_parsed=total[1], parse_rate=rate(total),
        parse_rate_by_agent={a: rate(n_by[("agent", a)]) for a in agents},
        parse_rate_by_round={r: rate(n_by[("round", r)]) for r in rounds},
        parse_rate_by_agent_round={(a, r): rate(n_by[("ar", a, r)]) for a in agents
                                   for r in rounds if n_by[("ar", a, r)][0]},
        rules=dict(rules), unparsed=tuple(unparsed),
        accuracy_by_agent={a: acc(n_by[("agent", a)]) for a in agents if labeled},
        accuracy_by_round={r: acc(n_by[("round", r)]) for r in rounds if labeled},
        parsed_accuracy_by_agent=parsed_acc, majority_accuracy_by_round=majority,
        chance=chance, min_parse_rate=min_parse_rate, below_chance=below, low_parse=low,
        tasks_without_answer=tuple(dropped))


def _tripwire(report: ParseReport, tripwire: str) -> None:
    if tripwire != "ignore" and report.tasks_without_answer and not report.flagged:
        warnings.warn(f"{report.source}: {len(report.tasks_without_answer)} task(s) without any "
                      "parsed answer were left out", ParseWarning, stacklevel=3)
    if not report.flagged or tripwire == "ignore":
        return
    message = ("answer-extraction tripwire ([BDA] Appendix D.3):\n" + report.summary())
    if tripwire == "raise":
        raise DataError(message, file=report.source, field="answers")
    warnings.warn(message, ParseWarning, stacklevel=3)


# ============================================================================ Du-format debates
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


def _read_json_object(path: Path):
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataError(f"cannot read the file: {err.strerror}", file=path) from None
    except UnicodeDecodeError as err:
        raise DataError(f"not valid UTF-8 (byte {err.start + 1})", file=path) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON: {err.msg} (column {err.colno})", file=path,
                        line=err.lineno) from None
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
        candidates = tuple(letters) if this_task == "mmlu" else _said(move_list)
        traces.append(Trace(task_id, tuple(move_list), candidates, gold, cluster=task_id,
                            extra=extra))
    report = _build_report(path, task or "auto", records, chance, min_parse_rate, max_examples,
                           dropped)
    _tripwire(report, tripwire)
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


# ============================================================================ DASE
_EMPTY = ("empty", "")
_LETTERS = "ABCD"
_MODELS = {"qwen": "qwen3-next-80b-a3b-instruct", "llama70": "llama-3.3-70b-instruct",
           "llama8": "llama-3.1-8b-instruct"}


def dase_slot_models(name) -> tuple[str, ...]:
    """Model family of each of the 5 worker slots of a DASE log, inferred from its file name.

    Mixed councils (Bellman arena runs without ``qwen``/``8B`` in the name, and every ``qwll``
    run) are 3 x Qwen3-Next-80B in slots 0-2 and 2 x Llama-3.3-70B in slots 3-4; ``qwen``/``qw``
    runs and the DDM runs without ``qwll`` are 5 x Qwen3-Next-80B; ``8Bllama`` runs are
    5 x Llama-3.1-8B. The logs do not record this: it follows the paper's Table 1 and the logs'
    own agreement structure (in the mixed runs slots 0-2 agree with each other far more than
    with slots 3-4; in the ``qwll`` DDM runs ``qwen_guess``/``llama_guess`` are slots 2/4).

    >>> dase_slot_models("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl")[2:4]
    ('qwen3-next-80b-a3b-instruct', 'llama-3.3-70b-instruct')
    """
    stem = Path(str(name)).name
    if "8Bllama" in stem or "8B" in stem.split("_"):
        return (_MODELS["llama8"],) * 5
    if "qwll" in stem:
        return (_MODELS["qwen"],) * 3 + (_MODELS["llama70"],) * 2
    if "qwen" in stem or "_qw_" in stem or "DDM" in stem:
        return (_MODELS["qwen"],) * 5
    return (_MODELS["qwen"],) * 3 + (_MODELS["llama70"],) * 2


def normalize_dase_answer(answer: str, benchmark: str = "aime") -> str | None:
    """Canonical form of one DASE answer (``None`` for an empty one).

    The default normalizer (``$``, ``\\boxed{}``, case, ``(A)``), then: trailing backslashes
    dropped, integers without leading zeros or thousands commas; GPQA option letters in upper
    case. Applied until it no longer changes the string, so ``default_normalizer`` maps distinct
    canonical answers to distinct keys.

    >>> normalize_dase_answer("$\\\\boxed{625}$"), normalize_dase_answer("(b)", "gpqa")
    ('625', 'B')
    >>> normalize_dase_answer("empty") is None, normalize_dase_answer("1,000")
    (True, '1000')
    """
    if not isinstance(answer, str) or answer.strip() in _EMPTY:
        return None
    s = answer
    for _ in range(8):
        before = s
        s = default_normalizer(s).rstrip("\\").strip()
        if re.fullmatch(r"[+-]?\d+", s) or re.fullmatch(r"\d{1,3}(?:,\d{3})+", s):
            s = str(int(s.replace(",", "")))
        if s == before:
            break
    if not s:
        return None
    if benchmark == "gpqa" and re.fullmatch(r"[a-d]", s):
        return s.upper()
    return s


def _benchmark_of(path: Path, category=None) -> str:
    if isinstance(category, str) and category:
        return "gpqa" if category.upper().startswith("GPQA") else "aime"
    return "gpqa" if "GPQA" in path.name else "aime"


class DaseGold(dict):
    """Recovered gold answers, ``{idx: answer}``, with what the recovery saw.

    Attributes: ``benchmark``; ``n_problems`` (distinct idx seen); ``wrong`` ({idx: answers
    flagged incorrect}); ``ambiguous`` ({idx: several distinct answers flagged correct});
    ``conflicts`` ({idx: answers flagged both correct and incorrect}); ``unmapped`` (GPQA: {idx:
    answers flagged correct that are not an option letter, so the gold letter stays unknown});
    ``files`` (files read);
    ``skipped_files`` (files of another benchmark or without correctness flags).
    """

    def __init__(self, gold=(), **info):
        super().__init__(gold)
        self.benchmark = info.get("benchmark")
        self.n_problems = info.get("n_problems", 0)
        self.wrong = info.get("wrong", {})
        self.ambiguous = info.get("ambiguous", {})
        self.conflicts = info.get("conflicts", {})
        self.unmapped = info.get("unmapped", {})
        self.files = info.get("files", ())
        self.skipped_files = info.get("skipped_files", ())

    @property
    def n_recovered(self) -> int:
        return len(self)

    def summary(self) -> str:
        return (f"{self.benchmark}: gold recovered for {len(self)} of {self.n_problems} problems "
                f"from {len(self.files)} files ({len(self.ambiguous)} ambiguous, "
                f"{len(self.conflicts)} conflicting, {len(self.unmapped)} not an option letter)")


_CSV_PAIRS = (("DASE_Final", "DASE_Acc"), ("Consensus_S1", "S1_Acc"),
              ("Consensus_S1", "Consensus_Acc"), ("Qwen_Guess", "Qwen_Acc"),
              ("Llama_Guess", "Llama_Acc"), ("SC_Winner", "SC_Acc"))
_CERT_PAIRS = (("consensus", "final_acc"), ("consensus_s1", "s1_acc"),
               ("qwen_guess", "qwen_acc"), ("llama_guess", "llama_acc"))


def _flag(value, where, fld) -> int:
    if isinstance(value, bool) or value not in (0, 1, "0", "1", 0.0, 1.0):
        raise DataError(f"a correctness flag must be 0 or 1, got {value!r}", field=fld, **where)
    return int(float(value))


def _idx(value, where) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DataError(f"idx must be an integer, got {value!r}", field="idx", **where)
    try:
        out = int(value)
    except ValueError:
        raise DataError(f"idx must be an integer, got {value!r}", field="idx", **where) from None
    if out < 0:
        raise DataError(f"idx must be non-negative, got {out}", field="idx", **where)
    return out


def _said(moves) -> tuple[str, ...]:
    """Open answer space: the distinct answers the moves state, first said first."""
    return tuple(dict.fromkeys(m.answer for m in moves if m.answer is not None))


def _jsonl_records(path: Path):
    """(line number, object) for each non-blank line; DataError on bad JSON or a non-object."""
    for lineno, obj in read_json_lines(path, DataError):
        if not isinstance(obj, dict):
            raise DataError(f"a record must be a JSON object, got {type(obj).__name__}",
                            file=path, line=lineno)
        yield lineno, obj


def _flag_observations(path: Path):
    """Yield (benchmark, idx, answer, flag) from one DASE results/log file; None if no flags."""
    if path.suffix == ".csv":
        try:
            handle = path.open(newline="", encoding="utf-8")
        except OSError as err:
            raise DataError(f"cannot open the file: {err.strerror}", file=path) from None
        with handle:
            reader = csv.DictReader(handle)
            pairs = [(a, f) for a, f in _CSV_PAIRS if a in (reader.fieldnames or ())
                     and f in (reader.fieldnames or ())]
            if not pairs:
                return
            for row_number, row in enumerate(reader, 1):
                where = dict(file=path, line=row_number + 1)
                idx = _idx(row["Idx"], where) if "Idx" in row else row_number
                where["task_id"] = idx
                bench = _benchmark_of(path, row.get("Category"))
                for a, f in pairs:
                    if row.get(a) is None or row.get(f) is None:
                        raise DataError("the row has fewer columns than the header",
                                        field=f, **where)
                    yield bench, idx, row[a], _flag(row[f], where, f)
        return
    for lineno, rec in _jsonl_records(path):
        where = dict(file=path, line=lineno, task_id=rec.get("idx"))
        if "idx" not in rec:
            raise DataError("the record has no 'idx'", field="idx", **where)
        idx = _idx(rec["idx"], where)
        bench = _benchmark_of(path, rec.get("category"))
        if isinstance(rec.get("cert"), dict):
            cert = rec["cert"]
            for a, f in _CERT_PAIRS:
                if a in cert and f in cert:
                    yield bench, idx, cert[a], _flag(cert[f], where, f"cert.{f}")
        elif "winner" in rec and "acc" in rec:
            yield bench, idx, rec["winner"], _flag(rec["acc"], where, "acc")


def _dase_files(paths) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(sorted(q for q in p.iterdir() if q.suffix in (".jsonl", ".csv")))
        elif p.exists():
            out.append(p)
        else:
            raise DataError("no such file or directory", file=p)
    if not out:
        raise DataError("no DASE .jsonl/.csv file found", file=", ".join(map(str, paths)))
    return out


def recover_dase_gold(paths, benchmark: str | None = None) -> DaseGold:
    """Rebuild DASE gold answers from the 0/1 correctness flags of every released file.

    ``paths``: a DASE log directory, a file, or a list of them (``.jsonl`` histories and logs,
    ``.csv`` results). Every (answer, flag) pair is collected by problem ``idx`` -- the history
    ``cert`` (``consensus``/``final_acc``, ``consensus_s1``/``s1_acc``, ``qwen_guess``/
    ``qwen_acc``, ``llama_guess``/``llama_acc``), the SC/IMSC logs (``winner``/``acc``) and the
    results CSVs (row order is idx order where there is no ``Idx`` column) -- and answers are
    compared after :func:`normalize_dase_answer`. A problem's gold is its answer flagged correct;
    when the original grader accepted several surface forms, the single integer among them for
    AIME (``184`` over a garbled interval that merely contains it); for GPQA only an option
    letter can be gold (an answer text graded correct leaves the letter unknown: ``unmapped``).
    Answers flagged both correct and incorrect are conflicts and recover nothing; so are several
    distinct correct integers.

    ``benchmark``: ``"aime"`` or ``"gpqa"``; files of the other benchmark are skipped (listed in
    ``skipped_files``). Default: the benchmark of the files, which must all agree. Returns a
    :class:`DaseGold` ``{idx: answer}``; ``.summary()`` says how many were recovered.
    """
    if benchmark not in (None, "aime", "gpqa"):
        raise DataError(f"benchmark must be 'aime' or 'gpqa', got {benchmark!r}",
                        field="benchmark")
    correct: dict[int, set[str]] = defaultdict(set)
    wrong: dict[int, set[str]] = defaultdict(set)
    seen: set[int] = set()
    used, skipped = [], []
    for path in _dase_files(paths):
        observations = list(_flag_observations(path))
        benches = {b for b, *_ in observations}
        if not observations:
            skipped.append(path.name)
            continue
        if len(benches) > 1:
            raise DataError(f"the file mixes benchmarks {sorted(benches)}", file=path)
        bench = benches.pop()
        if benchmark is None:
            benchmark = bench
        if bench != benchmark:
            skipped.append(path.name)
            continue
        used.append(path.name)
        for _, idx, answer, flag in observations:
            seen.add(idx)
            key = normalize_dase_answer(answer if isinstance(answer, str) else str(answer),
                                        benchmark)
            if key is None:
                continue
            (correct if flag else wrong)[idx].add(key)
    gold, ambiguous, conflicts, unmapped = {}, {}, {}, {}
    for idx in sorted(seen):
        good = correct.get(idx, set())
        clash = good & wrong.get(idx, set())
        if clash:
            conflicts[idx] = sorted(clash)
            good = good - clash
        if benchmark == "gpqa":
            letters = {g for g in good if g in _LETTERS}
            if good and not letters:      # graded correct, but not an option letter
                unmapped[idx] = sorted(good)
            good = letters
        elif len(good) > 1:
            good = {g for g in good if re.fullmatch(r"-?\d+", g)} or good
        if len(good) == 1:
            gold[idx] = next(iter(good))
        elif len(good) > 1:
            ambiguous[idx] = sorted(good)
    return DaseGold(gold, benchmark=benchmark, n_problems=len(seen),
                    wrong={i: sorted(w) for i, w in wrong.items()}, ambiguous=ambiguous,
                    conflicts=conflicts, unmapped=unmapped, files=tuple(used),
                    skipped_files=tuple(skipped))


class DaseTraces(list):
    """A ``list[Trace]`` from :func:`load_dase_history` with a ``report`` dict alongside."""

    report: dict


def load_dase_history(path, gold=None, *, benchmark: str | None = None, moves: str = "proposals",
                      one_vote_per_round: bool = False, slot_models: Sequence[str] | None = None,
                      agent_names: str = "slot", task_prefix: str | None = None,
                      all_empty: str = "skip") -> DaseTraces:
    """Read a DASE history file (``safe_DASE_*_History_*.jsonl`` or ``*_Forensics_*``).

    One trace per problem (line); round ``t`` (the log's ``step`` t+1) holds the five slots'
    ``norms``, normalized by :func:`normalize_dase_answer`. Empty answers (``"empty"`` or ``""``)
    make no move and are listed in ``extra["empty"]`` as ``[slot, round]``; for GPQA, answers that
    are not one of the letters A-D make no move either (``extra["off_candidate"]``).

    Candidates: ``A``-``D`` for GPQA; for AIME the distinct normalized answers said on that
    problem, first seen first. Gold is never added to the candidates (docs/trace-format.md: that would leak
    the label); a problem whose recovered gold nobody said is ``gold_missing``.

    ``gold``: ``None`` (unlabeled), ``"recover"`` (run :func:`recover_dase_gold` on the file's
    directory for its benchmark), or a mapping ``{idx: answer}`` (e.g. a :class:`DaseGold`).
    ``moves`` / ``one_vote_per_round``: see :func:`revisions_to_moves`. Agents are the slot ids
    ``slot0``..``slot4`` (``agent_names="slot+model"`` appends the model family, for pooling
    files); each slot's model family is in ``extra["slot_models"]`` (inferred by
    :func:`dase_slot_models` unless ``slot_models`` is given). Task ids are
    ``{task_prefix or benchmark}-{idx}``; the cluster is ``{benchmark}-{idx}`` in every file, so
    the same problem from several runs stays in one CV fold. ``all_empty="skip"`` leaves out a
    problem where no slot ever gave a usable answer (listed in ``report["skipped"]``);
    ``"error"`` raises instead. ``benchmark`` (``"aime"``/``"gpqa"``) overrides the detection
    from the records' ``category`` or the file name. Malformed records raise
    :class:`bda_jax.DataError` naming file, line, idx (as task id) and field.

    Returns a :class:`DaseTraces` (a ``list[Trace]``) whose ``report`` dict holds ``n_problems``,
    ``n_traces``, ``n_rounds``, ``answers`` / ``empty`` / ``off_candidate`` (slot-round
    counts), ``n_gold``, ``skipped`` and the slot models.
    """
    if moves not in MOVE_MAPPINGS:
        raise DataError(f"moves must be one of {MOVE_MAPPINGS}, got {moves!r}", field="moves")
    if agent_names not in ("slot", "slot+model"):
        raise DataError(f"agent_names must be 'slot' or 'slot+model', got {agent_names!r}",
                        field="agent_names")
    if all_empty not in ("skip", "error"):
        raise DataError(f"all_empty must be 'skip' or 'error', got {all_empty!r}",
                        field="all_empty")
    path = Path(path)
    models = tuple(slot_models) if slot_models is not None else dase_slot_models(path.name)
    inferred = slot_models is None
    gold_map: Mapping | None = None
    if isinstance(gold, str):
        if gold != "recover":
            raise DataError(f"gold must be None, 'recover' or a mapping, got {gold!r}",
                            field="gold")
    elif gold is not None and not isinstance(gold, Mapping):
        raise DataError(f"gold must be None, 'recover' or a mapping, got {type(gold).__name__}",
                        field="gold")
    else:
        gold_map = gold
    traces = DaseTraces()
    skipped: dict[int, str] = {}
    seen_idx: dict[int, int] = {}
    counts = Counter()
    n_rounds = 0
    n_slots = len(models)
    for lineno, rec in _jsonl_records(path):
        where = dict(file=path, line=lineno, task_id=rec.get("idx"))
        if "idx" not in rec:
            raise DataError("the record has no 'idx'", field="idx", **where)
        idx = _idx(rec["idx"], where)
        if idx in seen_idx:
            raise DataError(f"idx {idx} repeats line {seen_idx[idx]}", field="idx", **where)
        seen_idx[idx] = lineno
        bench = benchmark or _benchmark_of(path, rec.get("category"))
        if benchmark is None:
            benchmark = bench
        if gold == "recover" and gold_map is None:
            gold_map = recover_dase_gold(path.parent, benchmark)
        history = rec.get("history")
        if not isinstance(history, list) or not history:
            raise DataError("'history' must be a non-empty list of rounds", field="history",
                            **where)
        names = [f"slot{s}" if agent_names == "slot" else f"slot{s}:{models[s]}"
                 for s in range(n_slots)]
        rounds, extras = [], {}
        empty, off = [], []
        for t, step in enumerate(history):
            fld = f"history[{t}]"
            if not isinstance(step, dict):
                raise DataError("a round must be a JSON object", field=fld, **where)
            if "step" in step and step["step"] != t + 1:
                raise DataError(f"step {step['step']!r} where {t + 1} was expected (steps "
                                "must count 1, 2, ...)", field=fld + ".step", **where)
            norms = step.get("norms")
            if not isinstance(norms, list) or len(norms) != n_slots:
                raise DataError(f"'norms' must be a list of {n_slots} answers",
                                field=fld + ".norms", **where)
            said: dict[str, str | None] = {}
            for s, raw in enumerate(norms):
                if not isinstance(raw, str):
                    raise DataError(f"an answer must be a string, got {type(raw).__name__}",
                                    field=f"{fld}.norms[{s}]", **where)
                key = normalize_dase_answer(raw, bench)
                if key is None:
                    empty.append([names[s], t])
                    counts["empty"] += 1
                    key = None
                elif bench == "gpqa" and key not in _LETTERS:
                    off.append([names[s], t, raw])
                    counts["off_candidate"] += 1
                    key = None
                else:
                    counts["answers"] += 1
                    if raw != key:
                        extras[(names[s], t)] = {"raw": raw}
                said[names[s]] = key
            rounds.append(said)
        n_rounds += len(rounds)
        move_list = revisions_to_moves(rounds, names, moves=moves,
                                       one_vote_per_round=one_vote_per_round, extras=extras)
        if not move_list:
            if all_empty == "error":
                raise DataError("no slot gave a usable answer in any round", field="history",
                                **where)
            skipped[idx] = "no usable answer in any round"
            continue
        candidates = tuple(_LETTERS) if bench == "gpqa" else _said(move_list)
        g = None
        if gold_map is not None and idx in gold_map:
            g = gold_map[idx]
            g = None if g is None else normalize_dase_answer(str(g), bench)
        cert = rec.get("cert") if isinstance(rec.get("cert"), dict) else {}
        extra = {"dase": {"file": path.name, "idx": idx, "category": rec.get("category"),
                          "cert": cert},
                 "slot_models": dict(zip(names, models)), "slot_models_inferred": inferred,
                 "empty": empty, "moves_mapping": moves}
        if off:
            extra["off_candidate"] = off
        task_id = f"{task_prefix or bench}-{idx}"
        traces.append(Trace(task_id, tuple(move_list), candidates, g, cluster=f"{bench}-{idx}",
                            extra=extra))
    if not seen_idx:
        raise DataError("the file holds no record", file=path)
    n_gold = sum(t.gold is not None for t in traces)
    traces.report = {"file": str(path), "benchmark": benchmark, "n_problems": len(seen_idx),
                     "n_traces": len(traces), "skipped": skipped,
                     "n_rounds": n_rounds,
                     "answers": counts["answers"], "empty": counts["empty"],
                     "off_candidate": counts["off_candidate"], "n_gold": n_gold,
                     "slot_models": models, "slot_models_inferred": inferred}
    if skipped:
        warnings.warn(f"{path}: {len(skipped)} problem(s) without any usable answer were left "
                      f"out (idx {sorted(skipped)[:10]})", ParseWarning, stacklevel=2)
    return traces
