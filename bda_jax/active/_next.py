"""The tasks to label next, from a trace file and a partial gold file: the library side of
``bda label next`` (docs/cli.md, docs/active.md)."""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from .._core.checks import positive_int
from .._core.counts import Counts, tally
from .._core.errors import DataError
from .._core.traces import read_traces
from ._gold import apply_gold
from ._select import Selection, labeled_mask, select_batch

__all__ = ["LabelPlan", "label_next"]


class LabelPlan(NamedTuple):
    """What to label next: ``task_ids`` in pick order with their ``scores``, the
    :class:`~bda_jax.active.Selection` behind them, and the pool: ``n_tasks``, ``n_labeled``
    (before this plan), ``budget`` (asked) and the traces' ``source``."""

    task_ids: tuple[str, ...]
    scores: tuple[float, ...]
    selection: Selection
    n_tasks: int
    n_labeled: int
    budget: int
    source: str | None

    def to_dict(self) -> dict:
        """Plain JSON values (a NaN score as ``None``)."""
        sel = self.selection.to_dict()
        return {"tasks": [{"rank": r + 1, "task_id": t, "score": s}
                          for r, (t, s) in enumerate(zip(self.task_ids, sel["score"]))],
                "strategy": sel["strategy"], "params": sel["params"],
                "params_source": sel["params_source"], "n_scored": sel["n_scored"],
                "n_tasks": self.n_tasks, "n_labeled": self.n_labeled,
                "n_unlabeled": self.n_tasks - self.n_labeled, "budget": self.budget,
                "source": self.source}


def label_next(traces, gold=None, *, budget: int, strategy: str = "expected-brier",
               seed: int = 0, arm: str = "bda-per-agent", **select_options) -> LabelPlan:
    """Choose ``budget`` tasks to label next.

    ``traces``: a trace file (JSON Lines, read with :func:`bda_jax.read_traces`), a list of
    traces or a tallied :class:`~bda_jax.Counts`. ``gold``: a gold file (``task_id,answer`` CSV,
    :func:`bda_jax.active.read_gold`), a mapping ``{task_id: answer}`` or ``None``; its labels
    join those the traces carry. The rest go to :func:`bda_jax.active.select_batch`
    (``strategy``, ``seed``, ``arm``, ``n_candidates``, ``batch`` ...).

    Raises :class:`~bda_jax.TraceError` / :class:`~bda_jax.DataError` naming file and line for a
    bad trace or gold file, and :class:`~bda_jax.DataError` when every task is labeled already.
    """
    budget = positive_int(budget, "budget")
    source = None
    if isinstance(traces, (str, os.PathLike)):
        source = os.fspath(traces)
        traces = read_traces(traces)
        if not traces:
            raise DataError("the trace file holds no task", file=source, field="traces")
    counts = traces if isinstance(traces, Counts) else tally(traces)
    if gold is not None:
        counts = apply_gold(counts, gold)
    n_labeled = int(labeled_mask(counts).sum())
    if n_labeled == counts.N.shape[0]:
        raise DataError(f"all {n_labeled} tasks are labeled already: nothing to choose",
                        file=source, field="gold")
    sel = select_batch(counts, budget, strategy, seed=seed, arm=arm, **select_options)
    ids = counts.task_ids
    names = tuple(ids[i] if ids is not None else str(i) for i in sel.index)
    return LabelPlan(names, tuple(float(s) for s in np.asarray(sel.score)), sel,
                     int(counts.N.shape[0]), n_labeled, int(budget), source)
