"""Question sets for a live council ([BDA] §5): one JSON object per line.

Fields: ``task_id`` (non-empty string or integer, unique), ``question`` (non-empty string),
``candidates`` (optional: a non-empty list of strings, distinct after
:func:`~bda_jax._core.normalize.default_normalizer`; absent or null: an open answer, compared
through the normalizer), ``gold`` (optional string; with candidates it must be one of them),
``cluster`` (optional string or integer). Unknown keys are kept in ``Question.extra``.
Every problem raises :class:`~bda_jax.DataError` naming the file, line, task and field.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .._core.errors import DataError
from .._core.io import read_json_lines
from .._core.normalize import default_normalizer

__all__ = ["Question", "read_questions"]

_KEYS = ("task_id", "question", "candidates", "gold", "cluster")


@dataclass(frozen=True)
class Question:
    """One question of a question set. ``candidates`` ``None``: open answers (any non-empty
    string, compared after the normalizer). ``extra``: the line's unknown keys, verbatim."""

    task_id: str
    question: str
    candidates: tuple[str, ...] | None = None
    gold: str | None = None
    cluster: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _id(value, what: str, **where) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{what} must be a non-empty string or an integer, got "
                        f"{type(value).__name__} {value!r}", **where)
    text = str(value)
    if not text.strip():
        raise DataError(f"{what} is empty", **where)
    return text


def _question(raw, *, file, line) -> Question:
    where: dict[str, Any] = dict(file=file, line=line)
    if not isinstance(raw, dict):
        raise DataError(f"a question must be a JSON object, got {type(raw).__name__}", **where)
    if raw.get("task_id") is None:
        raise DataError("question has no 'task_id'", field="task_id", **where)
    task_id = _id(raw["task_id"], "task_id", field="task_id", **where)
    where["task_id"] = task_id
    text = raw.get("question")
    if text is None:
        raise DataError("question has no 'question' text", field="question", **where)
    if not isinstance(text, str):
        raise DataError(f"question must be a string, got {type(text).__name__}",
                        field="question", **where)
    if not text.strip():
        raise DataError("question text is empty", field="question", **where)
    cands = raw.get("candidates")
    if cands is not None:
        if not isinstance(cands, list) or not all(isinstance(c, str) for c in cands):
            raise DataError("candidates must be a list of strings (or null for open answers)",
                            field="candidates", **where)
        if not cands:
            raise DataError("candidates is empty (use null for open answers)",
                            field="candidates", **where)
        seen: dict[str, str] = {}
        for cand in cands:
            key = default_normalizer(cand)
            if not key:
                raise DataError(f"candidate {cand!r} is empty", field="candidates", **where)
            if key in seen:
                raise DataError(f"candidates {seen[key]!r} and {cand!r} collide after "
                                f"normalization (both {key!r})", field="candidates", **where)
            seen[key] = cand
        cands = tuple(cands)
    gold = raw.get("gold")
    if gold is not None:
        if not isinstance(gold, str):
            raise DataError(f"gold must be a string or null, got {type(gold).__name__} {gold!r}",
                            field="gold", **where)
        if not default_normalizer(gold):
            raise DataError("gold is empty", field="gold", **where)
        if cands is not None and default_normalizer(gold) not in {
                default_normalizer(c) for c in cands}:
            raise DataError(f"gold {gold!r} is not one of the candidates {list(cands)}",
                            field="gold", **where)
    cluster = raw.get("cluster")
    if cluster is not None:
        cluster = _id(cluster, "cluster", field="cluster", **where)
    extra = {k: v for k, v in raw.items() if k not in _KEYS}
    return Question(task_id, text, cands, gold, cluster, extra)


def read_questions(path) -> list[Question]:
    """Read and check a question set (JSON Lines, blank lines ignored) -> ``list[Question]`` in
    file order. Raises :class:`~bda_jax.DataError` naming file, line, task and field: bad JSON,
    a missing or duplicate ``task_id``, empty question text, bad candidates or gold, an empty
    file."""
    path = os.fspath(path)
    out: list[Question] = []
    first: dict[str, int] = {}
    for lineno, raw in read_json_lines(path, DataError, "question file"):
        q = _question(raw, file=path, line=lineno)
        if q.task_id in first:
            raise DataError(f"duplicate task_id (first on line {first[q.task_id]})", file=path,
                            line=lineno, task_id=q.task_id, field="task_id")
        first[q.task_id] = lineno
        out.append(q)
    if not out:
        raise DataError("the question file holds no question", file=path)
    return out
