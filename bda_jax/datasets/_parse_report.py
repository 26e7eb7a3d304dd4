"""The parse report of an LLM transcript import and its below-chance tripwire ([BDA] Appendix
D.3): an agent scoring below chance usually means the parser reads the wrong token, not that the
agent is worse than guessing.
"""
from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

from .._core.errors import DataError

__all__ = ["ParseReport", "ParseWarning", "apply_tripwire", "build_parse_report"]


class ParseWarning(UserWarning):
    """An answer-extraction tripwire fired (below-chance agent or low parse rate)."""


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


def _plurality_accuracy(answers: list[str], gold: str) -> float:
    if not answers:
        return 0.0
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    return (gold in tied) / len(tied)


def build_parse_report(source, task: str, records: Sequence[Mapping], *, chance: float,
                       min_parse_rate: float, max_examples: int,
                       dropped: Sequence[str] = ()) -> ParseReport:
    """The :class:`ParseReport` of one file's extracted answers.

    ``records``: one dict per answer with ``task_id``, ``agent``, ``round``, ``parsed`` (the
    extracted answer, ``None`` if none), ``rule`` (the parser rule that fired, ``None`` if
    none), ``gold`` (``None`` if unlabeled) and ``text`` (the response). ``chance``: the accuracy
    of guessing (1/K for letters, 0 for open answers); agents with a parse rate below
    ``min_parse_rate`` are ``low_parse``; up to ``max_examples`` unparsed answers are kept;
    ``dropped``: the ids of tasks left out because no answer parsed.

    >>> rows = [{"task_id": "t", "agent": a, "round": 0, "parsed": p, "rule": "final",
    ...          "gold": "B", "text": "..."} for a, p in (("x", "B"), ("y", "A"))]
    >>> r = build_parse_report("f.json", "mmlu", rows, chance=0.25, min_parse_rate=0.9,
    ...                        max_examples=5)
    >>> r.parse_rate, r.parsed_accuracy_by_agent, r.below_chance
    (1.0, {'x': 1.0, 'y': 0.0}, ('y',))
    """
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


def apply_tripwire(report: ParseReport, tripwire: str) -> None:
    """Act on a flagged report: ``"warn"`` (a :class:`ParseWarning`), ``"raise"`` (a
    :class:`bda_jax.DataError` with the report's summary) or ``"ignore"``. Tasks left out
    without a parsed answer warn under ``"warn"`` and ``"raise"`` even when nothing is flagged.
    """
    if tripwire != "ignore" and report.tasks_without_answer and not report.flagged:
        warnings.warn(f"{report.source}: {len(report.tasks_without_answer)} task(s) without any "
                      "parsed answer were left out", ParseWarning, stacklevel=3)
    if not report.flagged or tripwire == "ignore":
        return
    message = ("answer-extraction tripwire ([BDA] Appendix D.3):\n" + report.summary())
    if tripwire == "raise":
        raise DataError(message, file=report.source, field="answers")
    warnings.warn(message, ParseWarning, stacklevel=3)
