"""Partial gold files and the labels of a count collection (docs/active.md, "Gold file").

A gold file is UTF-8 CSV with the header ``task_id,answer`` and one row per labeled task::

    task_id,answer
    q0-s0,True
    q7-s0,False

Cells are stripped of surrounding whitespace; blank lines are skipped; a cell may be quoted
(RFC 4180). A task id must name a task of the traces; the answer must be one of that task's
candidates (compared after the answer normalizer, as the trace reader compares answers); a task
appears at most once; and where the traces already carry a gold answer the file must agree
with it. Every violation is a :class:`~bda_jax.DataError` naming the file, the line and the
field.
"""
from __future__ import annotations

import csv
import io
import os
from typing import Mapping, NamedTuple

import numpy as np

from .._core.counts import Counts
from .._core.errors import DataError
from .._core.normalize import Normalizer, default_normalizer

__all__ = ["GoldLabels", "GOLD_HEADER", "read_gold", "apply_gold", "keep_labels"]

GOLD_HEADER = ("task_id", "answer")


class GoldLabels(NamedTuple):
    """The rows of a gold file: ``task_ids``, ``answers`` and their ``lines`` (1-based), in
    file order, and the ``file`` they came from (``None`` when built in memory)."""

    task_ids: tuple[str, ...]
    answers: tuple[str, ...]
    lines: tuple[int, ...]
    file: str | None = None

    @classmethod
    def from_mapping(cls, labels: Mapping[str, str]) -> "GoldLabels":
        """Labels ``{task_id: answer}`` held in memory (no file, no lines)."""
        items = list(labels.items())
        for task, answer in items:
            if not isinstance(task, str) or not isinstance(answer, str):
                raise DataError("gold labels must map task id strings to answer strings",
                                field="gold")
        return cls(tuple(t for t, _ in items), tuple(a for _, a in items),
                   tuple(0 for _ in items), None)


def _bad_utf8_line(data: bytes) -> int:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return data[:err.start].count(b"\n") + 1
    return 0


def read_gold(path) -> GoldLabels:
    """Read and check the syntax of a gold file (module docstring). Which task ids and answers
    are valid depends on the traces: :func:`apply_gold` checks them.

    Raises :class:`~bda_jax.DataError` (file, line, field) on a file that is not UTF-8, has no
    ``task_id,answer`` header, a row of another width, an empty cell, or a task id twice;
    :class:`OSError` when it cannot be read.
    """
    name = os.fspath(path)
    with open(name, "rb") as handle:
        data = handle.read()
    bad = _bad_utf8_line(data)
    if bad:
        raise DataError("not valid UTF-8", file=name, line=bad)
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    task_ids, answers, lines = [], [], []
    first: dict[str, int] = {}
    header_seen = False
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            cells = [cell.strip() for cell in row]
            if not header_seen:
                if tuple(c.casefold() for c in cells) != GOLD_HEADER:
                    raise DataError(f"the first row must be the header "
                                    f"{','.join(GOLD_HEADER)}, got {','.join(cells)!r}",
                                    file=name, line=line, field="header")
                header_seen = True
                continue
            if len(cells) != 2:
                raise DataError(f"expected 2 cells (task_id,answer), got {len(cells)}",
                                file=name, line=line, field="row")
            task, answer = cells
            if not task:
                raise DataError("empty task_id", file=name, line=line, field="task_id")
            if not answer:
                raise DataError("empty answer", file=name, line=line, task_id=task,
                                field="answer")
            if task in first:
                raise DataError(f"task listed twice (first on line {first[task]})", file=name,
                                line=line, task_id=task, field="task_id")
            first[task] = line
            task_ids.append(task)
            answers.append(answer)
            lines.append(line)
    except csv.Error as err:
        raise DataError(f"malformed CSV ({err})", file=name, line=reader.line_num) from None
    if not header_seen:
        raise DataError(f"empty gold file: expected the header {','.join(GOLD_HEADER)}",
                        file=name, line=1, field="header")
    return GoldLabels(tuple(task_ids), tuple(answers), tuple(lines), name)


def _rebuilt(counts: Counts, gold: np.ndarray, gold_missing: np.ndarray) -> Counts:
    gold, gold_missing = gold.astype(np.int32), gold_missing.astype(bool)
    for a in (gold, gold_missing):
        a.flags.writeable = False
    return Counts(counts.N, counts.e, counts.c, counts.mask, counts.K, gold, gold_missing,
                  counts.cluster, counts.e0, counts.conf0, counts.info)


def apply_gold(counts: Counts, gold, *, normalizer: Normalizer = default_normalizer) -> Counts:
    """``counts`` with the labels of ``gold`` added (a :class:`GoldLabels`, a path to a gold file
    or a mapping ``{task_id: answer}``); the tasks the traces already labeled keep their gold.

    Needs the task ids and candidate strings of a tally (``counts.task_ids``,
    ``counts.candidates``). Raises :class:`~bda_jax.DataError` naming the gold file's line for an
    unknown task id, an answer that is not one of the task's candidates, or an answer that
    contradicts the traces' own gold.
    """
    if isinstance(gold, (str, os.PathLike)):
        gold = read_gold(gold)
    elif isinstance(gold, Mapping):
        gold = GoldLabels.from_mapping(gold)
    elif not isinstance(gold, GoldLabels):
        raise DataError(f"gold must be a GoldLabels, a path or a mapping, got "
                        f"{type(gold).__name__}", field="gold")
    if counts.task_ids is None or counts.candidates is None:
        raise DataError("the counts carry no task ids or candidates (tally traces to use a "
                        "gold file)", field="counts")
    index = {t: i for i, t in enumerate(counts.task_ids)}
    g = np.array(counts.gold, np.int32)
    gm = np.array(counts.gold_missing, bool)
    for task, answer, line in zip(gold.task_ids, gold.answers, gold.lines):
        where = dict(file=gold.file, line=line or None, task_id=task)
        t = index.get(task)
        if t is None:
            raise DataError("no task with this id in the traces", field="task_id", **where)
        cands = counts.candidates[t]
        keys = [normalizer(c) for c in cands]
        key = normalizer(answer)
        if key not in keys:
            raise DataError(f"answer {answer!r} is not a candidate of the task (candidates: "
                            f"{', '.join(cands)})", field="answer", **where)
        k = keys.index(key)
        if gm[t] or (g[t] >= 0 and g[t] != k):
            said = "a gold that is not a candidate" if gm[t] else repr(cands[g[t]])
            raise DataError(f"the traces already give gold {said}; the gold file says "
                            f"{answer!r}", field="answer", **where)
        g[t] = k
    return _rebuilt(counts, g, gm)


def keep_labels(counts: Counts, keep) -> Counts:
    """``counts`` with the labels of the tasks ``keep`` ([T] bool or indices) only: every other
    task's gold becomes -1 (unlabeled). What a selection may see of a fully labeled pool."""
    T = counts.N.shape[0]
    k = np.asarray(keep)
    if k.dtype != bool:
        mask = np.zeros(T, bool)
        mask[k.astype(np.int64)] = True
        k = mask
    if k.shape != (T,):
        raise DataError(f"keep must be [T] = [{T}] bool or task indices", field="keep")
    g = np.where(k, np.asarray(counts.gold), -1)
    gm = np.asarray(counts.gold_missing) & k
    return _rebuilt(counts, g, gm)
