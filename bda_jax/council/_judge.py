"""Reading a committed answer out of a method's reply ([BDA] Appendix D.3): the structured field
when the reply is the JSON asked for, else the candidate-restricted extractor
(:func:`~bda_jax.datasets.extract_answer`: letters, numbers, word labels), else, where one is
configured, the frozen LLM judge on exactly that residual. Nothing is guessed: an answer none of
the three commits to stays ``None`` (scored wrong).

The judge is "frozen": one model at temperature 0, its prompt versioned, every verdict served
from the reply cache on a rerun (replay-only mode reproduces a scoring with no call), and every
verdict written with the run (:meth:`~bda_jax.council.MethodRun.judge_ledger`) for audit.
"""
from __future__ import annotations

import re
from typing import Sequence

from ..datasets import extract_answer
from .._core.io import loads_unique
from .._core.normalize import default_normalizer
from ._config import Seat
from ._method_prompts import judge_messages, judge_schema, option_letters

__all__ = ["Judge", "json_object", "match_candidate", "commitment"]

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)\r?\n?```$", re.DOTALL)


def json_object(text: str) -> dict | None:
    """The JSON object a reply holds (a Markdown code fence around it is stripped), or ``None``
    (also for an object that repeats a key)."""
    if not isinstance(text, str):
        return None
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        value = loads_unique(body)          # a repeated key is no usable reply either
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def match_candidate(value, candidates: Sequence[str]) -> str | None:
    """The candidate ``value`` names (compared through the default normalizer), or ``None``."""
    if not isinstance(value, str):
        return None
    key = default_normalizer(value)
    for cand in candidates:
        if key and default_normalizer(cand) == key:
            return cand
    return None


class Judge:
    """The frozen judge: ``seat`` (temperature 0 is the paper's setting and the default of a
    config's ``[methods.judge]``) maps a prose answer to the candidate it commits to, or
    ``None``."""

    channel = "judge"

    def __init__(self, seat: Seat):
        self.seat = seat

    async def __call__(self, caller, task, text: str) -> tuple[str | None, dict]:
        """``(candidate or None, ledger row)`` for ``text``, an answer to ``task``."""
        cands = list(task.candidates)
        letters = option_letters(len(cands))
        reply = await caller.chat(self.seat, judge_messages(task.question.question, cands, text),
                                  task=task, channel=self.channel, schema=judge_schema(len(cands)))
        obj = json_object(reply.text)
        raw = obj.get("verdict") if obj is not None else reply.text
        verdict = raw.strip().upper().strip(".") if isinstance(raw, str) else None
        answer = cands[letters.index(verdict)] if verdict in letters else None
        if verdict not in letters and verdict != "NONE":
            verdict = None                          # an unusable verdict: no commitment
        return answer, {"text": text, "verdict": verdict, "answer": answer,
                        "model": reply.model or self.seat.model, "cached": reply.cached}


async def commitment(caller, task, text: str, structured=None,
                     judge: Judge | None = None) -> tuple[str | None, str | None, dict]:
    """``(answer, rule, detail)`` of one reply (module docstring). ``structured``: the answer
    field of the parsed JSON reply, if any; ``rule`` is ``"schema"``, ``"extract:<rule>"``,
    ``"judge"`` or ``None``; ``detail`` holds the judge's ledger row when it was asked."""
    cand = match_candidate(structured, task.candidates)
    if cand is not None:
        return cand, "schema", {}
    found = extract_answer(text, task.candidates)
    if found.answer is not None:
        return found.answer, f"extract:{found.rule}", {}
    if judge is None or not text.strip():
        return None, None, {}
    answer, row = await judge(caller, task, text)
    return answer, ("judge" if answer is not None else None), {"judge": row}
