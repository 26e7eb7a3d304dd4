"""The one sparse vote type of the crowd EMs: :class:`CrowdVotes`.

Every crowd EM of :mod:`bda_jax.crowd` (Dawid–Skene and its one-coin form, GLAD, MACE, the
semi-supervised BDA EM) and the data preparation of :mod:`bda_jax.models` read the votes as the
nonzero cells of the pair layout ([BDA] Appendix B.1, "DS-EM"): one entry per (task, worker,
label) that received a vote, with the number of votes as its weight. No dense tasks x workers
matrix is formed; per-task and per-worker sums are ``jax.ops.segment_sum`` over the entries.

Constructors, each building the cells and handing them to the same sort-and-pad step:

* :func:`crowd_votes` from :class:`~bda_jax.PairCounts` (the user-facing sparse layout: a
  crowd-kit frame through :func:`bda_jax.crowd.pairs_from_frame`, traces through
  ``tally(..., layout="pairs")``, :class:`~bda_jax.Counts` through ``Counts.to_pairs()``);
* :func:`votes_from_labels` from one row per vote (``task, worker, label`` codes; repeated rows
  add up), validated with a :class:`~bda_jax.DataError` naming the field and row;
* :func:`votes_from_dense` from dense vote counts [T, I, K] (the council arms).

Shapes: E entries, T tasks, I workers, K candidate slots (classes).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import positive_int
from .._core.counts import PairCounts
from .._core.errors import DataError
from .._core.numerics import float_dtype

__all__ = ["VOTE_SOURCES", "CrowdVotes", "cell_index", "check_dense_votes", "check_gold",
           "crowd_votes",
           "truth_support", "votes_from_dense", "votes_from_labels"]

VOTE_SOURCES = ("round0", "all")


class CrowdVotes(NamedTuple):
    """Nonzero vote cells of a crowd (a pytree; the sizes are static through the shapes).

    ``task``, ``agent``, ``label`` [E] int32: the cells, sorted by (task, agent, label);
    ``weight`` [E] float: votes in the cell (0 on padding entries, which sit on the last task
    after the real ones); ``mask`` [T, K] bool: each task's valid classes; ``agent_votes`` [I]
    float: votes per worker (it carries I as a shape)."""

    task: jax.Array
    agent: jax.Array
    label: jax.Array
    weight: jax.Array
    mask: jax.Array
    agent_votes: jax.Array

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(T, I, K)``."""
        return self.mask.shape[0], self.agent_votes.shape[0], self.mask.shape[1]


def cell_index(votes: CrowdVotes):
    """Each entry's row in a flattened [T, K] array: ``task * K + label`` [E]."""
    return votes.task * votes.mask.shape[1] + votes.label


def truth_support(mask, gold):
    """[T, K] classes a task's truth may take: its valid classes (``mask``), or only its gold
    class where ``gold`` [T] >= 0. Masking a score with it clamps the gold tasks: their
    log-normalizer is the joint ``log p(gold, votes_t)`` and their posterior one-hot."""
    onehot = jnp.arange(mask.shape[1])[None, :] == gold[:, None]
    return mask & ((gold < 0)[:, None] | onehot)


def _bucket(n: int) -> int:
    """Padded entry count: the next of 64, 80, 96, 112, 128, 160, ... (<= 25 % padding), so
    crowds of similar size share one compiled EM."""
    if n <= 64:
        return 64
    step = 1 << max(n.bit_length() - 3, 0)
    return -(-n // step) * step


def _cells(task, agent, label, weight, mask, n_agents, dtype, pad) -> CrowdVotes:
    """The sort-and-pad step every constructor ends in: cells sorted by task (stable: the
    constructors hand them over in (task, agent, label) order), optionally padded to
    :func:`_bucket` size with zero-weight entries on the last task (they add nothing to any
    sum), as NumPy leaves (jitted calls transfer them without a compile)."""
    mask = np.asarray(mask, bool)
    order = np.argsort(task, kind="stable")
    n = order.size
    n_pad = _bucket(n) - n if pad else 0
    last = mask.shape[0] - 1

    def col(x, fill, dt):
        return np.concatenate([np.asarray(x)[order], np.full(n_pad, fill)]).astype(dt)

    w = np.asarray(weight)
    per_agent = np.bincount(np.asarray(agent, np.int64), weights=w.astype(np.float64),
                            minlength=n_agents).astype(dtype)
    return CrowdVotes(col(task, last, np.int32), col(agent, 0, np.int32),
                      col(label, 0, np.int32), col(w, 0, dtype), mask, per_agent)


def crowd_votes(pairs: PairCounts, votes: str = "round0", *, dtype=None,
                pad: bool = True) -> CrowdVotes:
    """The vote cells of :class:`~bda_jax.PairCounts`: ``votes="round0"`` reads ``pairs.e0``
    (the crowd labels), ``"all"`` reads ``pairs.e`` (every positive endorsement); slots outside
    a task's candidates are dropped. ``pad`` (default) rounds the entry count up so that crowds
    of similar size share compiled programs; ``dtype`` is the float dtype of the weights.

    >>> import bda_jax as bda
    >>> p = bda.PairCounts.from_votes([0, 0, 1, 0], [1, 0, 0, 1], [1, 0, 1, 1], 2, 2, 2)
    >>> v = crowd_votes(p, pad=False)
    >>> v.task.tolist(), v.agent.tolist(), v.label.tolist(), v.weight.tolist(), v.shape
    ([0, 0, 1], [0, 1, 0], [0, 1, 1], [1.0, 2.0, 1.0], (2, 2, 2))
    """
    if not isinstance(pairs, PairCounts):
        raise DataError(f"expected PairCounts, got {type(pairs).__name__}", field="pairs")
    if votes not in VOTE_SOURCES:
        raise DataError(f"votes must be one of {VOTE_SOURCES}, got {votes!r}", field="votes")
    v = np.asarray(pairs.e0 if votes == "round0" else pairs.e)
    mask = np.asarray(pairs.mask, bool)
    task = np.asarray(pairs.task)
    p, k = np.nonzero(v * mask[task])
    return _cells(task[p], np.asarray(pairs.agent)[p], k, v[p, k], mask, pairs.n_agents,
                  float_dtype(dtype), pad)


def _codes(x, name) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise DataError(f"{name} must be a 1-D array, got shape {a.shape}", field=name)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise DataError(f"{name} must hold integers, got dtype {a.dtype}", field=name)
    return a.astype(np.int64)


def _size(n, codes, name, least) -> int:
    """A given size, or one more than the largest code (``None``); every code must lie below
    it."""
    if n is None:
        if codes.size == 0:
            raise DataError(f"{name} cannot be inferred from no rows; pass it", field=name)
        n = int(codes.max()) + 1
    return positive_int(n, name, least)


def _check_range(a, name, n):
    if a.size and (a.min() < 0 or a.max() >= n):
        row = int(np.flatnonzero((a < 0) | (a >= n))[0])
        raise DataError(f"{name} must lie in [0, {n}); row {row} holds {a[row]}", field=name)


def votes_from_labels(task, worker, label, n_tasks=None, n_workers=None, n_classes=None, *,
                      mask=None, dtype=None, pad: bool = False) -> CrowdVotes:
    """Crowd votes from one row per vote: ``task``, ``worker``, ``label`` [V] integer codes
    (repeated rows add up to a cell's weight). ``n_tasks``, ``n_workers``, ``n_classes`` (T, I,
    K >= 2) default to one more than the largest code. ``mask`` [T, K]: each task's valid
    classes (default all); every task needs one and every label must be valid for its task.
    Raises :class:`~bda_jax.DataError` naming the field and, for a bad row, its index.

    >>> v = votes_from_labels([1, 0, 1, 1], [0, 0, 1, 0], [2, 0, 2, 2], n_classes=3)
    >>> v.task.tolist(), v.agent.tolist(), v.label.tolist(), v.weight.tolist(), v.shape
    ([0, 1, 1], [0, 0, 1], [0, 2, 2], [1.0, 2.0, 1.0], (2, 2, 3))
    """
    task, worker, label = (_codes(x, name) for x, name in
                           ((task, "task"), (worker, "worker"), (label, "label")))
    T = _size(n_tasks, task, "n_tasks", 1)
    W = _size(n_workers, worker, "n_workers", 1)
    K = _size(n_classes, label, "n_classes", 2)
    for a, name, n in ((task, "task", T), (worker, "worker", W), (label, "label", K)):
        _check_range(a, name, n)
    for name, a in (("worker", worker), ("label", label)):
        if a.shape != task.shape:
            raise DataError(f"{name} has {a.shape[0]} rows but task has {task.shape[0]}",
                            field=name)
    if mask is None:
        mask = np.ones((T, K), bool)
    mask = np.asarray(mask)
    if mask.shape != (T, K):
        raise DataError(f"mask must be [n_tasks, n_classes] = {(T, K)}, got {mask.shape}",
                        field="mask")
    mask = mask.astype(bool)
    if not mask.any(-1).all():
        raise DataError(f"task {int(np.flatnonzero(~mask.any(-1))[0])} has no valid class",
                        field="mask")
    bad = ~mask[task, label]
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"row {row}: label {label[row]} is not a valid class of task "
                        f"{task[row]}", field="label")
    cell, count = np.unique((task * W + worker) * K + label, return_counts=True)
    return _cells(cell // (W * K), cell // K % W, cell % K, count, mask, W, float_dtype(dtype),
                  pad)


def check_dense_votes(votes, mask, dtype=None):
    """Validate dense votes [T, I, K] (finite, non-negative) and their mask [T, K] (every task
    needs a candidate) in NumPy, with no per-shape device compile; returns ``(votes, mask)`` as
    NumPy arrays, the votes masked and in the float dtype."""
    dt = float_dtype(dtype)
    votes, mask = np.asarray(votes), np.asarray(mask, bool)
    if votes.ndim != 3 or mask.shape != (votes.shape[0], votes.shape[2]):
        raise DataError(f"votes must be [T, I, K] and mask [T, K]; got {votes.shape} and "
                        f"{mask.shape}", field="votes")
    if not mask.any(-1).all():
        raise DataError("every task needs at least one candidate", field="mask")
    if not np.isfinite(votes).all() or (votes < 0).any():
        raise DataError("votes must be finite and non-negative", field="votes")
    return np.where(mask[:, None, :], votes, 0).astype(dt), mask


def votes_from_dense(votes, mask, *, dtype=None, pad: bool = True) -> CrowdVotes:
    """Crowd votes from dense vote counts ``votes`` [T, I, K] (e.g. ``Counts.e0``) and
    ``mask`` [T, K], checked by :func:`check_dense_votes`; slots outside the mask are
    dropped."""
    votes, mask = check_dense_votes(votes, mask, dtype)
    t, i, k = np.nonzero(votes)
    return _cells(t, i, k, votes[t, i, k], mask, votes.shape[1], votes.dtype, pad)


def check_gold(gold, mask) -> np.ndarray:
    """Gold classes [T] int32 (-1: unknown) checked against ``mask`` [T, K]: ``None`` gives all
    -1; a known gold must be a valid class of its task. Raises :class:`~bda_jax.DataError`
    (field ``gold``) naming the first bad task."""
    mask = np.asarray(mask, bool)
    T, K = mask.shape
    if gold is None:
        return np.full(T, -1, np.int32)
    gold = np.asarray(gold)
    if gold.shape != (T,) or (gold.size and not np.issubdtype(gold.dtype, np.integer)):
        raise DataError(f"gold must be [T] = ({T},) integer classes (-1: unknown), got "
                        f"{gold.shape} {gold.dtype}", field="gold")
    gold = gold.astype(np.int64)
    known = gold >= 0
    bad = (gold < -1) | (gold >= K)
    bad |= known & ~mask[np.arange(T), np.clip(gold, 0, K - 1)]
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise DataError(f"gold[{t}] = {gold[t]} is neither -1 nor a valid class of the task",
                        field="gold")
    return gold.astype(np.int32)
