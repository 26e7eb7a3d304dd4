"""Endorsement counts: the one tally every model, baseline and metric reads (docs/trace-format.md).

For task t, agent i and candidate g (K_t candidates, padded to K_max and masked):

* ``N[t, i]``     informative moves of i (moves with a signed endorsement);
* ``e[t, i, g]``  positive endorsements of g;
* ``c[t, i, g]``  moves consistent with "the truth is g": endorsements of g plus rejections of
  some a != g ([BDA] §3). These are also the pseudo-observations of Definition 1 that Eq. (4)
  reads: a challenge of a adds one to every g != a, so sum_g c[t, i, g] >= N[t, i]. ``d = N - c``.
* ``e0``, ``conf0`` round-0 positive endorsements and their stated confidences (NaN: none stated),
  for the baselines only; BDA kernels never read ``conf0`` (Property 3).
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Sequence, overload

import jax
import numpy as np

from .checks import positive_int
from .errors import DataError, TraceError
from .fastparse import lookup_codes
from .io import gc_paused
from .normalize import Normalizer, default_normalizer
from .traces import FORCES, ResolvedTrace, Trace, resolve_trace

__all__ = ["Counts", "CountsInfo", "PairCounts", "tally"]

_ARRAY_FIELDS = ("N", "e", "c", "mask", "K", "gold", "gold_missing", "cluster", "e0", "conf0")
_PAIR_FIELDS = ("task", "agent", "N", "e", "c", "e0", "conf0", "mask", "K", "gold",
                "gold_missing", "cluster")
_TASK_FIELDS = ("mask", "K", "gold", "gold_missing", "cluster")
LAYOUTS = ("dense", "pairs")


@dataclass(frozen=True)
class CountsInfo:
    """Names behind the integer axes of a :class:`Counts` (kept outside the pytree)."""

    agents: tuple[str, ...]
    task_ids: tuple[str, ...] | None = None
    candidates: tuple[tuple[str, ...], ...] | None = None
    vocab: tuple[str, ...] | None = None
    clusters: tuple[str, ...] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def _take_info(info: CountsInfo | None, index) -> CountsInfo | None:
    """The names of the tasks ``index`` (agents, vocab and notes kept)."""
    if info is None:
        return None
    pick = lambda seq: None if seq is None else tuple(seq[j] for j in index)
    return CountsInfo(info.agents, pick(info.task_ids), pick(info.candidates), info.vocab,
                      info.clusters, dict(info.notes))


class _DeviceCache:
    """One device copy of a count collection's arrays and facts read off them once.

    Kept outside the pytree: keyed by the identity of the array fields (held), so reassigning a field
    (``counts.e = ...``) recomputes it, and a JAX transformation (which rebuilds the object from
    its leaves) starts with an empty cache. Arrays built by :meth:`Counts.from_arrays` and the
    tally are owned by the collection and read-only, so they cannot change under the cache."""

    __slots__ = ("key", "device", "max_count", "kernel")

    def __init__(self, key):
        self.key, self.device, self.max_count, self.kernel = key, None, None, {}


def _leaves_key(obj, fields) -> tuple:
    """The field arrays themselves (compared by identity; holding them keeps an id from being
    reused by a new array while the cache lives)."""
    return tuple(getattr(obj, f) for f in fields)


def _cache_of(obj, fields) -> "_DeviceCache":
    key = _leaves_key(obj, fields)
    cache = obj._cache
    if cache is None or len(cache.key) != len(key) or any(a is not b for a, b in zip(cache.key, key)):
        cache = _DeviceCache(key)
        obj._cache = cache
    return cache


def _is_traced(obj, fields) -> bool:
    return any(isinstance(getattr(obj, f), jax.core.Tracer) for f in fields)


def _on_device(obj, fields):
    """``obj`` with every array field a :class:`jax.Array` on the default device, copied there
    once and cached (:class:`_DeviceCache`); ``obj`` itself when its fields already are JAX
    arrays (or tracers, inside a transformation)."""
    if all(isinstance(getattr(obj, f), jax.Array) for f in fields):
        return obj
    cache = _cache_of(obj, fields)
    if cache.device is None:
        dev = jax.device_put(obj)                 # one transfer of the whole pytree
        dev.info = obj.info
        cache.device = dev
    return cache.device


def _max_count_of(obj, fields) -> int | None:
    """max N over all rows (0 when empty), or ``None`` inside a transformation; computed once
    per collection (where the arrays live: on an accelerator only the scalar returns)."""
    if _is_traced(obj, fields):
        return None
    cache = _cache_of(obj, fields)
    if cache.max_count is None:
        N = obj.N
        if N.size == 0:
            cache.max_count = 0
        elif isinstance(N, jax.Array):
            cache.max_count = int(jax.numpy.max(N))
        else:
            cache.max_count = int(np.max(N))
    return cache.max_count


_COUNT_FIELDS = frozenset({"N", "e", "c", "e0"})


def _narrow_dtype(top: int):
    """The narrowest integer type holding every count up to ``top`` (int8 reads 4x less)."""
    for dt in (np.int8, np.int16):
        if top <= np.iinfo(dt).max:
            return dt
    return np.int32


def _kernel_arrays(obj, fields, names):
    """The arrays ``names`` as a kernel reads them: JAX arrays on the default device, the
    count fields (N, e, c, e0: all <= max N) in :func:`_narrow_dtype` of ``max N``; copied
    once per collection and field, then cached. Fields that already are JAX arrays (or
    tracers) are returned as they are."""
    if all(isinstance(getattr(obj, f), jax.Array) for f in names):
        return tuple(getattr(obj, f) for f in names)
    cache = _cache_of(obj, fields)
    todo = [f for f in names if f not in cache.kernel]
    if todo:
        narrow = _narrow_dtype(_max_count_of(obj, fields))
        host = [getattr(obj, f) for f in todo]
        host = [np.asarray(x).astype(narrow) if f in _COUNT_FIELDS and not isinstance(x, jax.Array)
                else x for f, x in zip(todo, host)]
        cache.kernel.update(zip(todo, jax.device_put(host)))
    return tuple(cache.kernel[f] for f in names)


def _owned(*arrays):
    """Mark freshly built host arrays read-only: the collection owns them, and its device copy
    and cached facts stay true (an in-place write raises instead of going unseen)."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False


@jax.tree_util.register_pytree_node_class
class Counts:
    """Count tensors of T tasks, I agents, K (=K_max) candidate slots. A JAX pytree.

    Array fields (leaves): ``N`` [T,I] int32, ``e`` [T,I,K] int32, ``c`` [T,I,K] int32,
    ``mask`` [T,K] bool, ``K`` [T] int32, ``gold`` [T] int32 (-1: unlabeled or not a candidate),
    ``gold_missing`` [T] bool, ``cluster`` [T] int32, ``e0`` [T,I,K] int32, ``conf0`` [T,I,K]
    float32. ``info`` (agent names, task ids, candidate strings, ``vocab``) is metadata outside the
    pytree: it does not survive a trip through a JAX transformation.

    Where the arrays live: :meth:`from_arrays` and :func:`tally` hold read-only NumPy arrays (the
    host-side code -- metrics, folds, reports -- reads them without a transfer) and the kernels
    read :meth:`on_device`, one copy on JAX's default device made at the first kernel call and
    kept; ``max N``, which picks a kernel's path, is likewise read once (:attr:`max_count`).
    Repeated kernel calls on one collection therefore copy nothing.
    """

    __slots__ = _ARRAY_FIELDS + ("info", "_cache")

    def __init__(self, N, e, c, mask, K, gold, gold_missing, cluster, e0, conf0, info=None):
        self.N, self.e, self.c, self.mask, self.K = N, e, c, mask, K
        self.gold, self.gold_missing, self.cluster, self.e0, self.conf0 = (
            gold, gold_missing, cluster, e0, conf0)
        self.info = info
        self._cache = None

    def on_device(self) -> "Counts":
        """These counts with every array a :class:`jax.Array` on the default device (names
        kept): copied once, then the same object on every call (``self`` when the arrays are
        already JAX arrays). The kernels call it; so can a user handing counts to a jitted
        function of their own."""
        return _on_device(self, _ARRAY_FIELDS)

    @property
    def max_count(self) -> int | None:
        """The largest ``N`` (0 when empty; ``None`` inside a JAX transformation), computed
        once per collection."""
        return _max_count_of(self, _ARRAY_FIELDS)

    def kernel_arrays(self, *names: str) -> tuple:
        """The fields ``names`` as the posterior kernels read them: on JAX's default device,
        counts (``N``, ``e``, ``c``, ``e0``) in the narrowest integer type that holds ``max N``
        (int8 up to 127), copied once and cached; fields that are JAX arrays already come back
        unchanged. Exact: every count fits the narrower type."""
        return _kernel_arrays(self, _ARRAY_FIELDS, names)

    # pytree protocol: arrays are children, names are not carried through transformations
    def tree_flatten(self):
        return tuple(getattr(self, f) for f in _ARRAY_FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def __repr__(self):
        T, I, K = self.e.shape
        return f"Counts(T={T}, I={I}, K_max={K}, vocab={self.vocab})"

    @property
    def d(self):
        """Inconsistent counts ``d[t, i, g] = N[t, i] - c[t, i, g]`` (masked slots: 0)."""
        return (self.N[..., None] - self.c) * self.mask[:, None, :]

    @property
    def agents(self):
        return None if self.info is None else self.info.agents

    @property
    def task_ids(self):
        return None if self.info is None else self.info.task_ids

    @property
    def candidates(self):
        return None if self.info is None else self.info.candidates

    @property
    def vocab(self):
        """The candidate list every task shares (semantic labels), or ``None``."""
        return None if self.info is None else self.info.vocab

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.e.shape)

    def take(self, index) -> "Counts":
        """The sub-collection of tasks ``index`` (integer array or boolean mask), names kept."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        sub = [np.asarray(getattr(self, f))[index] for f in _ARRAY_FIELDS]
        _owned(*sub)
        return Counts(*sub, info=_take_info(self.info, index))

    def to_pairs(self) -> "PairCounts":
        """The same counts in the sparse pair layout (:class:`PairCounts`): one row per
        (task, agent) with any informative move (``N > 0``) or any round-0 record, in
        (task, agent) order. A relayout of the arrays, not a second tally."""
        N, e, c, e0, conf0 = (np.asarray(getattr(self, f)) for f in ("N", "e", "c", "e0", "conf0"))
        keep = (N > 0) | (e != 0).any(-1) | (c != 0).any(-1) | (e0 != 0).any(-1)
        keep |= np.isfinite(conf0).any(-1)
        t, i = np.nonzero(keep)                          # row-major: sorted by (task, agent)
        task_level = [np.asarray(getattr(self, f)) for f in _TASK_FIELDS]
        T, I = N.shape
        return PairCounts(t.astype(np.int32), i.astype(np.int32), N[t, i], e[t, i], c[t, i],
                          e0[t, i], conf0[t, i], *task_level, n_tasks=T, n_agents=I,
                          info=self.info)

    @classmethod
    def from_arrays(cls, N, e, c, K=None, gold=None, *, e0=None, conf0=None, cluster=None,
                    gold_missing=None, agents=None, vocab=None) -> "Counts":
        """Build validated counts from tensors a user already holds.

        ``N`` [T,I], ``e`` and ``c`` [T,I,K] non-negative integers with e <= c <= N and
        sum_g e <= N; ``K`` [T] candidates per task (default: all K slots), slots >= K_t must
        hold zeros. ``gold`` [T] in [-1, K_t). ``e0`` defaults to ``e`` (every endorsement taken
        as round 0), ``conf0`` to NaN, ``cluster`` to one cluster per task. Raises
        :class:`DataError` naming the field.
        """
        N, e, c = (_int_array(x, name) for x, name in ((N, "N"), (e, "e"), (c, "c")))
        if N.ndim != 2:
            raise DataError(f"N must be [T, I], got shape {N.shape}", field="N")
        T, I = N.shape
        for x, name in ((e, "e"), (c, "c")):
            if x.ndim != 3 or x.shape[:2] != (T, I):
                raise DataError(f"{name} must be [T, I, K] = [{T}, {I}, K], got {x.shape}",
                                field=name)
        if e.shape != c.shape:
            raise DataError(f"e {e.shape} and c {c.shape} differ in shape", field="c")
        Kmax = e.shape[2]
        if Kmax < 1:
            raise DataError("there must be at least one candidate slot", field="e")
        Kt = np.full(T, Kmax, np.int32) if K is None else _int_array(K, "K")
        if Kt.shape != (T,) or (Kt < 1).any() or (Kt > Kmax).any():
            raise DataError(f"K must be [T] with 1 <= K_t <= {Kmax}", field="K")
        mask = np.arange(Kmax)[None, :] < Kt[:, None]
        for x, name in ((e, "e"), (c, "c")):
            if (x * ~mask[:, None, :]).any():
                raise DataError(f"{name} is nonzero in a slot beyond the task's K", field=name)
        if (e > c).any():
            raise DataError("e must not exceed c (an endorsement of g is consistent with g)",
                            field="e")
        if (c > N[..., None]).any():
            raise DataError("c must not exceed N", field="c")
        if (e.sum(-1) > N).any():
            raise DataError("sum over candidates of e must not exceed N", field="e")
        g = np.full(T, -1, np.int32) if gold is None else _int_array(gold, "gold", allow_neg=True)
        if g.shape != (T,) or (g < -1).any() or (g >= Kt).any():
            raise DataError("gold must be [T] with -1 (unlabeled) or an index below K_t",
                            field="gold")
        gm = np.zeros(T, bool) if gold_missing is None else np.array(gold_missing, bool)
        if gm.shape != (T,) or (gm & (g >= 0)).any():
            raise DataError("gold_missing must be [T] and true only where gold is -1",
                            field="gold_missing")
        e0 = e if e0 is None else _int_array(e0, "e0")   # shared: both are read-only
        if e0.shape != e.shape:
            raise DataError(f"e0 must have the shape of e {e.shape}", field="e0")
        conf0 = (np.full(e.shape, np.nan, np.float32) if conf0 is None
                 else np.array(conf0, np.float32))
        if conf0.shape != e.shape:
            raise DataError(f"conf0 must have the shape of e {e.shape}", field="conf0")
        cl = np.arange(T, dtype=np.int32) if cluster is None else _int_array(cluster, "cluster")
        if cl.shape != (T,):
            raise DataError("cluster must be [T]", field="cluster")
        agents = tuple(agents) if agents is not None else tuple(f"agent{i}" for i in range(I))
        if len(agents) != I:
            raise DataError(f"{len(agents)} agent names for I = {I}", field="agents")
        if vocab is not None and (len(vocab) != Kmax or (Kt != Kmax).any()):
            raise DataError(f"vocab must list the {Kmax} candidates every task shares",
                            field="vocab")
        info = CountsInfo(agents, vocab=None if vocab is None else tuple(vocab))
        _owned(N, e, c, mask, Kt, g, gm, cl, e0, conf0)
        out = cls(N, e, c, mask, Kt, g, gm, cl, e0, conf0, info)
        out._cache = _DeviceCache(_leaves_key(out, _ARRAY_FIELDS))
        out._cache.max_count = int(N.max()) if N.size else 0   # read once, here
        return out


@jax.tree_util.register_pytree_node_class
class PairCounts:
    """Sparse pair layout of :class:`Counts` for crowds (docs/trace-format.md): one row per (task, agent)
    pair with an informative move, so memory grows with the number of votes, not with T x I.

    Array fields (leaves): per pair ``task`` [P] int32 and ``agent`` [P] int32 (rows sorted by
    (task, agent)), ``N`` [P] int32, ``e``, ``c``, ``e0`` [P, K] int32 and ``conf0`` [P, K]
    float32 — row p holds exactly ``Counts.<field>[task[p], agent[p]]``; per task ``mask``
    [T, K] bool, ``K`` [T], ``gold`` [T], ``gold_missing`` [T], ``cluster`` [T]. Static (pytree
    aux data): ``n_tasks``, ``n_agents``. ``info`` (names) lives outside the pytree as in
    :class:`Counts`. Kernels sum per-pair terms into tasks with
    ``jax.ops.segment_sum(x, pairs.task, pairs.n_tasks)`` and into agents with ``pairs.agent``.

    >>> c = Counts.from_arrays([[1, 0], [1, 1]], [[[1, 0], [0, 0]], [[0, 1], [1, 0]]],
    ...                        [[[1, 0], [0, 0]], [[0, 1], [1, 0]]])
    >>> p = c.to_pairs()
    >>> p.task.tolist(), p.agent.tolist(), p.e0.tolist()
    ([0, 1, 1], [0, 0, 1], [[1, 0], [0, 1], [1, 0]])
    >>> bool((p.to_dense().e == c.e).all())
    True
    """

    __slots__ = _PAIR_FIELDS + ("n_tasks", "n_agents", "info", "_cache")

    def __init__(self, task, agent, N, e, c, e0, conf0, mask, K, gold, gold_missing, cluster, *,
                 n_tasks, n_agents, info=None):
        self.task, self.agent, self.N, self.e, self.c = task, agent, N, e, c
        self.e0, self.conf0, self.mask, self.K, self.gold = e0, conf0, mask, K, gold
        self.gold_missing, self.cluster = gold_missing, cluster
        self.n_tasks, self.n_agents = int(n_tasks), int(n_agents)
        self.info = info
        self._cache = None

    def on_device(self) -> "PairCounts":
        """As :meth:`Counts.on_device`: the arrays on JAX's default device, copied once."""
        return _on_device(self, _PAIR_FIELDS)

    @property
    def max_count(self) -> int | None:
        """As :attr:`Counts.max_count`: the largest ``N`` of any pair, computed once."""
        return _max_count_of(self, _PAIR_FIELDS)

    def tree_flatten(self):
        return tuple(getattr(self, f) for f in _PAIR_FIELDS), (self.n_tasks, self.n_agents)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, n_tasks=aux[0], n_agents=aux[1])

    def __repr__(self):
        return (f"PairCounts(T={self.n_tasks}, I={self.n_agents}, P={self.n_pairs}, "
                f"K_max={self.mask.shape[1]}, vocab={self.vocab})")

    @property
    def n_pairs(self) -> int:
        return int(self.task.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """The dense shape (T, I, K_max) these pairs stand for."""
        return (self.n_tasks, self.n_agents, int(self.mask.shape[1]))

    @property
    def d(self):
        """Inconsistent counts ``N - c`` per pair [P, K] (masked slots: 0)."""
        return (self.N[..., None] - self.c) * self.mask[self.task]

    agents = Counts.agents
    task_ids = Counts.task_ids
    candidates = Counts.candidates
    vocab = Counts.vocab

    def to_dense(self) -> Counts:
        """Scatter the pairs back into :class:`Counts` ([T, I, K] tensors; small data only)."""
        T, I, K = self.shape
        t, i = np.asarray(self.task), np.asarray(self.agent)
        dense = {"N": np.zeros((T, I), np.int32), "conf0": np.full((T, I, K), np.nan, np.float32)}
        for f in ("e", "c", "e0"):
            dense[f] = np.zeros((T, I, K), np.int32)
        for f in dense:
            dense[f][t, i] = np.asarray(getattr(self, f))
        task_level = {f: np.asarray(getattr(self, f)) for f in _TASK_FIELDS}
        return Counts(info=self.info, **dense, **task_level)

    def take(self, index) -> "PairCounts":
        """The sub-collection of tasks ``index`` (integer array or boolean mask; repeats allowed),
        renumbered 0..len(index)-1 in that order, with their pairs; names kept."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        index = index.astype(np.int64).reshape(-1)
        task = np.asarray(self.task)
        n_per_task = np.bincount(task, minlength=self.n_tasks)
        start = np.concatenate([[0], np.cumsum(n_per_task)[:-1]])
        length = n_per_task[index]
        new_task = np.repeat(np.arange(index.size), length)
        offset = np.arange(new_task.size) - np.repeat(np.cumsum(length) - length, length)
        rows = np.repeat(start[index], length) + offset
        per_pair = [np.asarray(getattr(self, f))[rows] for f in ("agent", "N", "e", "c", "e0",
                                                                 "conf0")]
        task_level = [np.asarray(getattr(self, f))[index] for f in _TASK_FIELDS]
        return PairCounts(new_task.astype(np.int32), *per_pair, *task_level, n_tasks=index.size,
                          n_agents=self.n_agents, info=_take_info(self.info, index))

    @classmethod
    def from_votes(cls, task, agent, label, n_tasks: int, n_agents: int, n_labels: int, *,
                   info: CountsInfo | None = None) -> "PairCounts":
        """Crowd votes as pairs: row v, ``(task[v], agent[v], label[v])`` ([V] integer codes),
        is one round-0 ``propose`` of candidate slot ``label[v]`` by ``agent[v]`` on
        ``task[v]``; every task has the same ``n_labels`` candidates and no gold. Repeated
        rows count as repeated votes. Packed by the tally's own array step (one row per
        (task, agent) pair with a vote; ``e = c = e0``, ``N`` their sum, ``conf0`` NaN).

        >>> p = PairCounts.from_votes([0, 0, 1, 0], [1, 0, 0, 1], [1, 0, 1, 1], 2, 2, 2)
        >>> p.task.tolist(), p.agent.tolist(), p.e0.tolist(), p.N.tolist()
        ([0, 0, 1], [0, 1, 0], [[1, 0], [0, 2], [0, 1]], [1, 2, 1])
        """
        for name, n in (("n_tasks", n_tasks), ("n_agents", n_agents), ("n_labels", n_labels)):
            positive_int(n, name)
        rows = {}
        for name, x, n in (("task", task, n_tasks), ("agent", agent, n_agents),
                           ("label", label, n_labels)):
            a = np.asarray(x)
            if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
                raise DataError(f"{name} must be a 1-D integer array, got {a.dtype} "
                                f"{a.shape}", field=name)
            if a.size and (a.min() < 0 or a.max() >= n):
                raise DataError(f"{name} codes must lie in [0, {n})", field=name)
            rows[name] = a.astype(np.int64)
        if not rows["task"].shape == rows["agent"].shape == rows["label"].shape:
            raise DataError("task, agent and label must have one entry per vote", field="agent")
        n = rows["task"].size
        moves = _Moves(rows["task"], rows["agent"], rows["label"], np.ones(n, np.int64),
                       np.zeros(n, np.int64), np.full(n, np.nan))
        T = int(n_tasks)
        return _assemble(moves, int(n_agents), np.ones((T, int(n_labels)), bool),
                         np.full(T, n_labels, np.int32), np.full(T, -1, np.int32),
                         np.zeros(T, bool), np.arange(T), info, layout="pairs")


def _int_array(x, name, allow_neg=False) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer)
                               or np.issubdtype(a.dtype, np.floating)):
        raise DataError(f"{name} must hold integers, got dtype {a.dtype}", field=name)
    if np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all() or (a != np.round(a)).any():
            raise DataError(f"{name} must hold whole numbers", field=name)
    if not allow_neg and (a < 0).any():
        raise DataError(f"{name} must be non-negative", field=name)
    if a.size and np.abs(a).max() > np.iinfo(np.int32).max:
        raise DataError(f"{name} exceeds the int32 range", field=name)
    return a.astype(np.int32)


# the return type follows `layout` (for type checkers; the one implementation is below)
@overload
def tally(traces: Sequence[Trace], agents: Sequence[str] | None = None, *,
          max_round: int | None = None, forces: Sequence[str] | None = None,
          one_move_per_round: bool = False,
          permute_candidates: int | None = None, unknown_agents: str = "error",
          normalizer: Normalizer = default_normalizer, lenient: bool = False,
          abstain_candidate: str | None = None, seat_key: str = "agent",
          layout: Literal["dense"] = "dense") -> Counts: ...
@overload
def tally(traces: Sequence[Trace], agents: Sequence[str] | None = None, *,
          max_round: int | None = None, forces: Sequence[str] | None = None,
          one_move_per_round: bool = False,
          permute_candidates: int | None = None, unknown_agents: str = "error",
          normalizer: Normalizer = default_normalizer, lenient: bool = False,
          abstain_candidate: str | None = None, seat_key: str = "agent",
          layout: Literal["pairs"]) -> PairCounts: ...
@overload
def tally(traces: Sequence[Trace], agents: Sequence[str] | None = None, *,
          max_round: int | None = None, forces: Sequence[str] | None = None,
          one_move_per_round: bool = False,
          permute_candidates: int | None = None, unknown_agents: str = "error",
          normalizer: Normalizer = default_normalizer, lenient: bool = False,
          abstain_candidate: str | None = None, seat_key: str = "agent",
          layout: str = "dense") -> Counts | PairCounts: ...


@gc_paused()
def tally(traces: Sequence[Trace], agents: Sequence[str] | None = None, *,
          max_round: int | None = None, forces: Sequence[str] | None = None,
          one_move_per_round: bool = False,
          permute_candidates: int | None = None, unknown_agents: str = "error",
          normalizer: Normalizer = default_normalizer, lenient: bool = False,
          abstain_candidate: str | None = None, seat_key: str = "agent",
          layout: str = "dense") -> "Counts | PairCounts":
    """Turn traces into :class:`Counts` (docs/trace-format.md; [BDA] §3, Definition 1, Appendix D.7).

    Args:
      traces: validated traces (:func:`bda_jax.read_traces`) or in-memory :class:`Trace` objects.
      agents: fixed agent order shared by train and test (default: first seen across traces).
      max_round: keep only moves of rounds <= max_round (``0``: the round-0 basis).
      forces: keep only informative moves of these forces (e.g. ``("propose",)``: the
        propose-only reliability basis of Table 7).
      one_move_per_round: keep one informative move per agent per round, its last in file order.
      permute_candidates: seed of a per-task random permutation of the candidate order
        (the label-permutation control); ``vocab`` is then ``None``.
      unknown_agents: with a given ``agents`` list, ``"error"`` raises on any other agent;
        ``"drop"`` ignores their moves and records how many in ``counts.info.notes``.
      seat_key: whose reliability a move informs (Table 7's reliability key): ``"agent"``
        (default), ``"force"`` (one seat per force, pooled over agents) or ``"agent-force"``
        (``"agent:force"`` seats).
      normalizer, lenient, abstain_candidate: passed to the protocol automaton
        (``abstain_candidate="unknown"`` makes abstaining an endorsement of an explicit
        "unknown" candidate appended to every task).
      layout: ``"dense"`` (default) returns :class:`Counts` ([T, I, K] tensors);
        ``"pairs"`` returns :class:`PairCounts` (one row per (task, agent) pair with an
        informative move) from the same per-move arrays, never materializing [T, I, K].

    Packing is vectorized over all informative moves: no per-task Python loop after parsing.
    :func:`bda_jax.tally_stream` runs the same packing chunk by chunk over a file.
    """
    options = tally_options(max_round=max_round, forces=forces,
                             one_move_per_round=one_move_per_round,
                             permute_candidates=permute_candidates, unknown_agents=unknown_agents,
                             seat_key=seat_key, layout=layout)
    traces = list(traces)
    if not traces:
        raise DataError("no traces to tally", field="traces")
    blocks = _resolved_blocks(traces, normalizer, lenient, abstain_candidate)
    task_ids = list(itertools.chain.from_iterable(b.task_id for b in blocks))
    if len(set(task_ids)) != len(task_ids):
        seen_tasks: set[str] = set()
        for task_id in task_ids:
            if task_id in seen_tasks:
                raise TraceError("duplicate task_id", task_id=task_id, field="task_id")
            seen_tasks.add(task_id)
    state = TallyState(agents, options, file=getattr(traces[0], "source", (None,))[0])
    parts, pending, n_pending = [], [], 0
    for block in blocks:
        pending.append(block)
        n_pending += block.n_tasks
        if n_pending >= _TALLY_PART_TASKS:
            parts.append(tally_part(ResolvedBlock.concat(pending), state))
            pending, n_pending = [], 0
    if pending:
        parts.append(tally_part(ResolvedBlock.concat(pending), state))
    return finish_tally(parts, state)


_NO_DICT: dict = {}
#: Tasks gathered into one part before it is packed: a fast reader's chunk (2,048 tasks) is
#: packed alone, shorter runs are joined first (parts join exactly: :func:`finish_tally`).
_TALLY_PART_TASKS = 2048
_GET_CHUNK, _GET_ROW = operator.itemgetter("_chunk"), operator.itemgetter("_row")


def _resolved_blocks(traces: list, normalizer, lenient, abstain_candidate) -> list:
    """The traces as :class:`ResolvedBlock` runs, in order: a run of traces of one fast-read
    chunk (their ``_chunk`` and ``_row``, see :func:`~bda_jax._core.traces.lazy_trace`) that
    the chunk's resolution covers is taken from its block (computed once per chunk for these
    options); every other trace goes through :func:`resolve_trace`. Runs are found with
    array operations: no per-trace Python work beyond reading ``_chunk`` and ``_row``."""
    T = len(traces)
    try:
        dicts = list(map(vars, traces))
        chunk_of = list(map(_GET_CHUNK, dicts))
        index = np.fromiter(map(_GET_ROW, dicts), np.int64, T)
    except (TypeError, KeyError):   # not all read by the fast reader (or not a Trace at all)
        dicts = [getattr(t, "__dict__", _NO_DICT) for t in traces]
        chunk_of = [d.get("_chunk") for d in dicts]
        index = np.fromiter((-1 if c is None else d["_row"] for c, d in zip(chunk_of, dicts)),
                            np.int64, T)
    del dicts
    ident = np.fromiter(map(id, chunk_of), np.int64, T)
    bounds = [0, *(np.flatnonzero(ident[1:] != ident[:-1]) + 1).tolist(), T]
    blocks: list = []
    slow: list = []                     # traces waiting for resolve_trace, in order

    def flush_slow():
        if slow:
            resolved = [resolve_trace(t, normalizer=normalizer, lenient=lenient,
                                      abstain_candidate=abstain_candidate) for t in slow]
            blocks.append(ResolvedBlock.from_resolved(
                resolved, [getattr(t, "source", (None, None)) for t in slow]))
            slow.clear()

    for a, b in zip(bounds[:-1], bounds[1:]):
        chunk = chunk_of[a]
        resolution = None if chunk is None else chunk.resolution(normalizer, abstain_candidate)
        if resolution is None:
            slow.extend(traces[a:b])
            continue
        block, where = resolution
        pos = where[index[a:b]]
        fast = pos >= 0
        cuts = [0, *(np.flatnonzero(fast[1:] != fast[:-1]) + 1).tolist(), b - a]
        for s, e in zip(cuts[:-1], cuts[1:]):
            if fast[s]:
                flush_slow()
                blocks.append(block.take(pos[s:e]))
            else:
                slow.extend(traces[a + s:a + e])
    flush_slow()
    return blocks


# ------------------------------------------------------------------ the tally, in parts
class TallyOptions(NamedTuple):
    """Validated options of :func:`tally` (shared by :func:`bda_jax.tally_stream`)."""

    max_round: int | None
    forces: frozenset | None
    one_move_per_round: bool
    permute_candidates: int | None
    unknown_agents: str
    seat_key: str
    layout: str


def tally_options(*, max_round=None, forces=None, one_move_per_round=False,
                   permute_candidates=None, unknown_agents="error", seat_key="agent",
                   layout="dense") -> TallyOptions:
    """Check the options of :func:`tally`; raises :class:`DataError` naming the option."""
    if layout not in LAYOUTS:
        raise DataError(f"layout must be one of {LAYOUTS}, got {layout!r}", field="layout")
    if seat_key not in ("agent", "force", "agent-force"):
        raise DataError(f"seat_key must be 'agent', 'force' or 'agent-force', got {seat_key!r}",
                        field="seat_key")
    if unknown_agents not in ("error", "drop"):
        raise DataError(f"unknown_agents must be 'error' or 'drop', got {unknown_agents!r}",
                        field="unknown_agents")
    if forces is not None:
        forces = frozenset(forces)
        unknown = forces - set(FORCES)
        if unknown:
            raise DataError(f"unknown forces {sorted(unknown)}", field="forces")
    if max_round is not None and (not isinstance(max_round, int) or max_round < 0):
        raise DataError(f"max_round must be a non-negative integer, got {max_round!r}",
                        field="max_round")
    return TallyOptions(max_round, forces, bool(one_move_per_round), permute_candidates,
                         unknown_agents, seat_key, layout)


class TallyState:
    """What the parts of one tally share: the options, the agent (seat) index — fixed up front
    or grown in first-seen order, which appending never reorders — cluster codes (first seen;
    sorted at the end), the per-task names, the vocabulary check and the dropped-move count.
    Per-task entries only: no Python object per move outlives its part."""

    def __init__(self, agents, options: TallyOptions, file=None):
        self.options = options
        self.fixed = agents is not None
        if self.fixed:
            agents = tuple(agents)
            if len(set(agents)) != len(agents):
                raise DataError("the agent list has duplicates", field="agents")
        self.agent_index: dict[str, int] = {a: i for i, a in enumerate(agents or ())}
        self.cluster_code: dict[str, int] = {}
        self.task_ids: list[str] = []
        self.candidates: list[tuple[str, ...]] = []
        self._interned: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.first_keys = None
        self.first_candidates = None
        self.same_keys = True
        self.dropped = 0
        self.file = file

    def intern(self, candidates: list) -> list:
        """Each task's candidate list as one shared tuple per distinct list (most tasks repeat
        a few lists); lists repeated as one object (a chunk's tasks share them) are looked up
        once."""
        table = self._interned
        keys = list(map(id, candidates))
        distinct = dict(zip(keys, candidates))      # holds the lists: their ids stay theirs
        if len(distinct) == len(keys):
            cands = list(map(tuple, candidates))
            return list(map(table.setdefault, cands, cands))
        shared = {k: table.setdefault(tuple(c), tuple(c)) for k, c in distinct.items()}
        return list(map(shared.__getitem__, keys))


_FORCE_INDEX = {f: k for k, f in enumerate(FORCES)}


def _ranges(off: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``off[i]:off[i+1]`` for each ``i`` in ``idx``, concatenated, and the new
    offsets (``off`` [T+1] offsets of per-task runs in a flat array)."""
    lengths = off[idx + 1] - off[idx]
    new_off = np.zeros(idx.size + 1, np.int64)
    np.cumsum(lengths, out=new_off[1:])
    pos = np.repeat(off[idx] - new_off[:-1], lengths) + np.arange(int(new_off[-1]), dtype=np.int64)
    return pos, new_off


class ResolvedBlock:
    """Resolved traces as columns: the one input of :func:`tally_part` (the automaton's
    result, :class:`~bda_jax.ResolvedTrace`, for a run of tasks, flattened).

    Per task (T): ``task_id``, ``candidates`` (display strings), ``keys`` (normalized),
    ``cluster`` and ``sources`` ((file, line)) lists, ``gold`` [T] int32 (-1: none),
    ``gold_missing`` [T] bool. Admissible moves in file order: ``m_off`` [T+1] offsets and
    ``m_agent`` codes into ``agent_names``. Informative moves (one signed endorsement each) in
    file order: ``e_off`` [T+1], ``e_agent`` (code into ``agent_names``), ``e_cand`` (candidate
    slot), ``e_sign`` (+1 / -1), ``e_round``, ``e_conf`` (NaN: none), ``e_force`` (index into
    :data:`~bda_jax.FORCES`) and ``e_id`` (code into ``id_names``: the move id). Built by
    :meth:`from_resolved` or by the fast reader (``bda_jax._core.fastparse``)."""

    __slots__ = ("task_id", "candidates", "keys", "cluster", "sources", "gold", "gold_missing",
                 "agent_names", "m_off", "m_agent", "e_off", "e_agent", "e_cand", "e_sign",
                 "e_round", "e_conf", "e_force", "id_names", "e_id")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.pop(name))
        if fields:
            raise TypeError(f"unknown fields {sorted(fields)}")

    @property
    def n_tasks(self) -> int:
        return len(self.task_id)

    @classmethod
    def from_resolved(cls, resolved: Sequence[ResolvedTrace], sources) -> "ResolvedBlock":
        """The columns of :func:`resolve_trace` results (``sources``: (file, line) each)."""
        chain = itertools.chain.from_iterable
        T = len(resolved)
        names: dict[str, int] = {}
        ids: dict[str, int] = {}
        m_n = np.fromiter((len(r.admissible) for r in resolved), np.int64, T)
        e_n = np.fromiter((len(r.sign) for r in resolved), np.int64, T)
        m_off, e_off = (np.concatenate([[0], np.cumsum(n)]).astype(np.int64) for n in (m_n, e_n))
        E = int(e_off[-1])
        m_agent = np.fromiter((names.setdefault(m.agent, len(names)) for r in resolved
                               for m in r.admissible), np.int32, int(m_off[-1]))
        e_agent = np.fromiter((names.setdefault(a, len(names)) for a in chain(
            r.agent for r in resolved)), np.int32, E)
        return cls(
            task_id=[r.task_id for r in resolved], candidates=[r.candidates for r in resolved],
            keys=[r.keys for r in resolved], cluster=[r.cluster for r in resolved],
            sources=list(sources),
            gold=np.fromiter((r.gold for r in resolved), np.int32, T),
            gold_missing=np.fromiter((r.gold_missing for r in resolved), bool, T),
            agent_names=list(names), m_off=m_off, m_agent=m_agent, e_off=e_off, e_agent=e_agent,
            e_cand=np.fromiter(chain(r.cand for r in resolved), np.int32, E),
            e_sign=np.fromiter(chain(r.sign for r in resolved), np.int8, E),
            e_round=np.fromiter(chain(r.round for r in resolved), np.int64, E),
            e_conf=np.fromiter(chain(r.confidence for r in resolved), np.float64, E),
            e_force=np.fromiter((_FORCE_INDEX[f] for f in chain(r.force for r in resolved)),
                                np.int8, E),
            e_id=np.fromiter((ids.setdefault(i, len(ids)) for i in chain(
                r.moves for r in resolved)), np.int32, E),
            id_names=list(ids))

    def take(self, idx) -> "ResolvedBlock":
        """The tasks ``idx`` (positions, in the order given)."""
        idx = np.asarray(idx, np.int64)
        T = self.n_tasks
        if idx.size == T and (idx == np.arange(T)).all():
            return self
        m_pos, m_off = _ranges(self.m_off, idx)
        e_pos, e_off = _ranges(self.e_off, idx)
        at = idx.tolist()
        pick = lambda seq: [seq[i] for i in at]
        return ResolvedBlock(
            task_id=pick(self.task_id), candidates=pick(self.candidates), keys=pick(self.keys),
            cluster=pick(self.cluster), sources=pick(self.sources), gold=self.gold[idx],
            gold_missing=self.gold_missing[idx], agent_names=self.agent_names, m_off=m_off,
            m_agent=self.m_agent[m_pos], e_off=e_off, e_agent=self.e_agent[e_pos],
            e_cand=self.e_cand[e_pos], e_sign=self.e_sign[e_pos], e_round=self.e_round[e_pos],
            e_conf=self.e_conf[e_pos], e_force=self.e_force[e_pos], id_names=self.id_names,
            e_id=self.e_id[e_pos])

    @staticmethod
    def concat(blocks: Sequence["ResolvedBlock"]) -> "ResolvedBlock":
        """The tasks of ``blocks`` one after the other (agent and id codes merged)."""
        if len(blocks) == 1:
            return blocks[0]
        names: dict[str, int] = {}
        ids: dict[str, int] = {}
        m_agent, e_agent, e_id, m_n, e_n = [], [], [], [], []
        for b in blocks:
            lut = np.fromiter((names.setdefault(n, len(names)) for n in b.agent_names), np.int32,
                              len(b.agent_names))
            id_lut = np.fromiter((ids.setdefault(n, len(ids)) for n in b.id_names), np.int32,
                                 len(b.id_names))
            m_agent.append(lut[b.m_agent] if b.m_agent.size else b.m_agent)
            e_agent.append(lut[b.e_agent] if b.e_agent.size else b.e_agent)
            e_id.append(id_lut[b.e_id] if b.e_id.size else b.e_id)
            m_n.append(np.diff(b.m_off))
            e_n.append(np.diff(b.e_off))
        cat = np.concatenate
        joined = lambda name: [x for b in blocks for x in getattr(b, name)]
        return ResolvedBlock(
            task_id=joined("task_id"), candidates=joined("candidates"), keys=joined("keys"),
            cluster=joined("cluster"), sources=joined("sources"),
            gold=cat([b.gold for b in blocks]), gold_missing=cat([b.gold_missing for b in blocks]),
            agent_names=list(names), m_off=cat([[0], np.cumsum(cat(m_n))]).astype(np.int64),
            m_agent=cat(m_agent).astype(np.int32),
            e_off=cat([[0], np.cumsum(cat(e_n))]).astype(np.int64),
            e_agent=cat(e_agent).astype(np.int32),
            e_cand=cat([b.e_cand for b in blocks]), e_sign=cat([b.e_sign for b in blocks]),
            e_round=cat([b.e_round for b in blocks]), e_conf=cat([b.e_conf for b in blocks]),
            e_force=cat([b.e_force for b in blocks]), id_names=list(ids),
            e_id=cat(e_id).astype(np.int32))


def _first_seen(codes: np.ndarray, names: Sequence, known) -> list:
    """``names[c]`` for the distinct values ``c`` of ``codes`` (non-negative integer codes) that
    are not in ``known``, in order of first appearance in ``codes`` (one pass: the first
    position of each value by ``np.minimum.at``, no sort of ``codes``)."""
    if not codes.size:
        return []
    present = np.flatnonzero(np.bincount(codes))
    if all(names[c] in known for c in present.tolist()):
        return []
    first = np.full(int(present[-1]) + 1, codes.size, np.int64)
    np.minimum.at(first, codes, np.arange(codes.size, dtype=np.int64))
    order = present[np.argsort(first[present], kind="stable")].tolist()
    return [names[c] for c in order if names[c] not in known]


def tally_part(block: ResolvedBlock, state: TallyState) -> dict:
    """Pack a run of resolved traces (the next tasks of the tally, as a
    :class:`ResolvedBlock`) into compact count arrays.

    Takes the informative moves as per-move arrays, filters them by the options, indexes
    agents through ``state`` and runs :func:`_assemble` (K_max and I of this part; cluster
    codes provisional). ``block.sources`` [(file, line)] per trace locate errors. Returns the
    fields of the assembled :class:`Counts` / :class:`PairCounts` as a dict, with ``"T"``."""
    opt = state.options
    T = block.n_tasks
    # ---- the informative moves of these tasks (one entry per signed endorsement)
    n_per_task = np.diff(block.e_off)
    task = np.repeat(np.arange(T, dtype=np.int64), n_per_task)
    cand = block.e_cand.astype(np.int64)
    sign = block.e_sign
    rnd = np.asarray(block.e_round, np.int64)
    conf = np.asarray(block.e_conf, np.float64)
    if opt.seat_key == "agent":
        seat, seat_names = block.e_agent.astype(np.int64), block.agent_names
    elif opt.seat_key == "force":
        seat, seat_names = block.e_force.astype(np.int64), FORCES
    else:                                   # "agent:force" seats
        pair = block.e_agent.astype(np.int64) * len(FORCES) + block.e_force
        pairs, seat = np.unique(pair, return_inverse=True)
        seat = seat.reshape(-1)
        seat_names = [f"{block.agent_names[p // len(FORCES)]}:{FORCES[p % len(FORCES)]}"
                      for p in pairs.tolist()]
    if opt.forces is not None:
        force_ok = np.isin(block.e_force, [_FORCE_INDEX[f] for f in opt.forces])

    index_of = state.agent_index
    if not state.fixed:      # first seen, across the parts in order
        if opt.seat_key == "agent":
            first = _first_seen(block.m_agent, block.agent_names, index_of)
        else:
            first = _first_seen(seat, seat_names, index_of)
        for a in first:
            index_of[a] = len(index_of)
    lut = np.fromiter((index_of.get(a, -1) for a in seat_names), np.int64, len(seat_names))
    agent = lut[seat] if seat.size else seat
    unknown = agent < 0
    if unknown.any():
        if opt.unknown_agents == "error":
            k = int(np.flatnonzero(unknown)[0])
            t = int(task[k])
            file, line = block.sources[t]
            raise TraceError(f"agent {seat_names[seat[k]]!r} is not in the agent list "
                             f"{list(index_of)} (pass unknown_agents='drop' to ignore such "
                             "moves)", file=file, line=line, task_id=block.task_id[t],
                             move_id=block.id_names[block.e_id[k]], field="agent")
        state.dropped += int(unknown.sum())
    I = len(index_of)

    keep = ~unknown
    if opt.forces is not None:
        keep &= force_ok
    if opt.max_round is not None:
        keep &= rnd <= opt.max_round
    if not keep.all():
        task, agent, cand, sign, rnd, conf = (x[keep] for x in (task, agent, cand, sign, rnd,
                                                                conf))
    if opt.one_move_per_round and task.size:
        # entries are in file order within a task; keep the last per (task, agent, round)
        order = np.lexsort((np.arange(task.size), rnd, agent, task))
        key = np.stack([task[order], agent[order], rnd[order]])
        last = np.ones(order.size, bool)
        last[:-1] = (key[:, 1:] != key[:, :-1]).any(0)
        sel = np.sort(order[last])
        task, agent, cand, sign, rnd, conf = (x[sel] for x in (task, agent, cand, sign, rnd, conf))

    # ---- candidate sets, gold, clusters (per task)
    Kt = np.fromiter(map(len, block.keys), np.int32, T)
    Kmax = int(Kt.max())
    mask = np.arange(Kmax)[None, :] < Kt[:, None]
    gold = np.ascontiguousarray(block.gold, np.int32)
    gold_missing = np.ascontiguousarray(block.gold_missing, bool)
    codes = state.cluster_code      # first seen (finish_tally ranks them by name)
    new = dict.fromkeys(block.cluster)
    if codes:
        for c in new.keys() & codes.keys():
            del new[c]
    base = len(codes)
    codes.update(zip(new, range(base, base + len(new))))
    cluster = (np.arange(base, base + T, dtype=np.int64) if len(new) == T  # all distinct, new
               else lookup_codes(codes, block.cluster))
    if state.first_keys is None:
        state.first_keys, state.first_candidates = block.keys[0], block.candidates[0]
    if state.same_keys:
        state.same_keys = block.keys.count(state.first_keys) == T
    state.task_ids.extend(block.task_id)
    state.candidates.extend(state.intern(block.candidates))

    moves = _Moves(task, agent, cand, sign, rnd, conf)
    out = _assemble(moves, I, mask, Kt, gold, gold_missing, cluster, None, opt.layout)
    fields = _ARRAY_FIELDS if opt.layout == "dense" else _PAIR_FIELDS
    return {"T": T, **{f: getattr(out, f) for f in fields}}


_PAD = {"conf0": np.nan, "mask": False}   # fill of slots a part did not have (others: 0)


def _concat_parts(parts: list[dict], name: str, shape_tail: tuple, offset_key=None):
    """Concatenate field ``name`` of the parts, padding agent and candidate axes to
    ``shape_tail``; frees each part's copy as it goes (peak: the result plus one field)."""
    first = parts[0][name]
    if len(parts) == 1 and first.shape[1:] == shape_tail:
        return parts[0].pop(name)
    rows = sum(p[name].shape[0] for p in parts)
    out = np.full((rows,) + shape_tail, _PAD.get(name, 0), dtype=first.dtype)
    at = 0
    for p in parts:
        x = p.pop(name)
        out[(slice(at, at + x.shape[0]),) + tuple(slice(0, s) for s in x.shape[1:])] = x
        at += x.shape[0]
    return out


def finish_tally(parts: list[dict], state: TallyState) -> "Counts | PairCounts":
    """Join the parts of one tally: pad agents (a part saw the first-seen prefix) and candidate
    slots, offset task indices, sort cluster codes by name, set ``vocab`` and ``info``, and
    apply the candidate permutation. A single part is returned without copies."""
    opt = state.options
    I = len(state.agent_index)
    if I == 0:
        raise TraceError("no agent made an admissible move in any task", field="agent",
                         file=state.file)
    T = sum(p["T"] for p in parts)
    Kmax = max(p["mask"].shape[1] for p in parts)
    if opt.layout == "pairs":
        at = 0
        for p in parts:                      # part-local task index -> global
            if at:
                p["task"] = (p["task"] + at).astype(np.int32)
            at += p["T"]
        per_row = {f: (Kmax,) if f in ("e", "c", "e0", "conf0") else () for f in _PAIR_FIELDS}
        per_row["mask"] = (Kmax,)
    else:
        per_row = {"N": (I,), "e": (I, Kmax), "c": (I, Kmax), "e0": (I, Kmax),
                   "conf0": (I, Kmax), "mask": (Kmax,)}
        per_row.update({f: () for f in ("K", "gold", "gold_missing", "cluster")})
    arrays = {f: _concat_parts(parts, f, tail) for f, tail in per_row.items()}
    first_seen = list(state.cluster_code)    # codes 0, 1, ... in this order
    by_name = sorted(range(len(first_seen)), key=first_seen.__getitem__)
    names = [first_seen[k] for k in by_name]  # as np.unique over the names would order them
    rank = np.empty(len(names), np.int32)
    rank[by_name] = np.arange(len(names), dtype=np.int32)
    arrays["cluster"] = rank[arrays["cluster"]]
    vocab = tuple(state.first_candidates) if state.same_keys else None
    notes: dict[str, Any] = {}
    if state.dropped:
        notes["dropped_unknown_agent_moves"] = state.dropped
    info = CountsInfo(tuple(state.agent_index), tuple(state.task_ids), tuple(state.candidates),
                      vocab, tuple(names), notes)
    if opt.layout == "pairs":
        out = PairCounts(**arrays, n_tasks=T, n_agents=I, info=info)
    else:
        out = Counts(**arrays, info=info)
    if opt.permute_candidates is not None:
        out = _permute_slots(out, opt.permute_candidates)
    _owned(*(getattr(out, f) for f in (_ARRAY_FIELDS if opt.layout == "dense" else _PAIR_FIELDS)))
    return out


def _permute_slots(counts: "Counts | PairCounts", seed) -> "Counts | PairCounts":
    """The label-permutation control: a seeded random order of each task's candidate slots
    (padding slots stay last), applied to every per-slot array, ``gold`` and the candidate
    names; ``vocab`` becomes ``None``. The tally is equivariant, so permuting the packed
    arrays equals packing permuted moves."""
    mask = counts.mask
    T, Kmax = mask.shape
    rng = np.random.default_rng(seed)
    noise = np.where(mask, rng.random((T, Kmax)), np.inf)
    perm = np.argsort(noise, axis=1, kind="stable")      # new slot -> old slot
    inv = np.argsort(perm, axis=1, kind="stable")        # old slot -> new slot
    gold = counts.gold
    gold = np.where(gold >= 0, inv[np.arange(T), np.maximum(gold, 0)], -1).astype(np.int32)
    row_perm = perm[:, None, :] if isinstance(counts, Counts) else perm[counts.task]
    for f in ("e", "c", "e0", "conf0"):
        x = getattr(counts, f)
        setattr(counts, f, np.take_along_axis(x, np.broadcast_to(row_perm, x.shape), axis=-1))
    counts.gold = gold
    info = counts.info
    candidates = tuple(tuple(cands[j] for j in perm[t, :len(cands)])
                       for t, cands in enumerate(info.candidates))
    counts.info = CountsInfo(info.agents, info.task_ids, candidates, None, info.clusters,
                             info.notes)
    return counts


class _Moves(NamedTuple):
    """Per-move arrays the tally builds (one entry per signed endorsement, after filtering):
    ``task``, ``agent``, ``cand`` (slot), ``sign`` (+1/-1), ``rnd`` (round), ``conf`` (stated
    confidence, NaN: none). The one input of :func:`_assemble`; crowd frames build it too."""

    task: np.ndarray
    agent: np.ndarray
    cand: np.ndarray
    sign: np.ndarray
    rnd: np.ndarray
    conf: np.ndarray


def _pack(cell, n_cells, cell_mask, m: _Moves):
    """Scatter-add the moves into ``n_cells`` rows of K_max slots (vectorized bincounts).
    ``cell`` [M] is each move's row, ``cell_mask`` [n_cells, K] the valid slots of each row.
    Returns ``N`` [n], ``e``, ``c``, ``e0`` [n, K] (int64) and ``conf0`` [n, K] float32. Where
    every move is a round-0 endorsement (crowd votes), ``c`` and ``e0`` equal ``e`` and are
    returned as that same array (read-only once packed, like ``Counts.from_arrays``' e0)."""
    Kmax = cell_mask.shape[1]
    N = np.bincount(cell, minlength=n_cells)
    flat = cell * Kmax + m.cand
    size = n_cells * Kmax
    pos = m.sign > 0
    every_pos = bool(pos.all())
    e_flat = np.bincount(flat if every_pos else flat[pos], minlength=size)
    e = e_flat.reshape(n_cells, Kmax)
    if every_pos:                              # no rejection: c = e
        c = e
    else:
        rejected = np.bincount(flat[~pos], minlength=size).reshape(n_cells, Kmax)
        c = e + (rejected.sum(-1, keepdims=True) - rejected) * cell_mask
    r0 = pos & (m.rnd == 0)
    e0 = e_flat if every_pos and bool(r0.all()) else np.bincount(flat[r0], minlength=size)
    conf0 = np.full(size, np.nan, np.float32)
    stated = r0 & np.isfinite(m.conf)
    idx = flat[stated]
    if idx.size and e0[idx].max() <= 1:     # one round-0 endorsement per (cell, candidate)
        conf0[idx] = m.conf[stated]
    elif idx.size:   # the last stated confidence per (cell, candidate) wins
        rev_unique, rev_first = np.unique(idx[::-1], return_index=True)
        conf0[rev_unique] = m.conf[stated][::-1][rev_first]
    e0 = e if e0 is e_flat else e0.reshape(n_cells, Kmax)
    return N, e, c, e0, conf0.reshape(n_cells, Kmax)


# The dense grid is packed directly (bincounts over all T * I * K cells) while it holds at most
# this many cells per move; a sparser grid (crowd data: many workers, few labels per task) packs
# its (task, agent) pairs and places them in a zeroed grid, the same numbers at a fraction of the
# work.
_DENSE_DIRECT = 4


def _scatter_rows(rows, values, n_rows, fill=0, dtype=np.int32):
    """``values`` [P, ...] placed at ``rows`` [P] of an [n_rows, ...] array whose other rows hold
    ``fill``."""
    shape = (n_rows,) + values.shape[1:]
    out = np.full(shape, fill, dtype) if fill != 0 else np.zeros(shape, dtype)
    out[rows] = values.astype(dtype, copy=False)
    return out


def _each_once(f):
    """``f`` memoized by the identity of its one argument: arrays shared between fields
    (``_pack``'s ``c is e``) are converted once and stay shared."""
    done: dict = {}

    def once(x):
        if id(x) not in done:
            done[id(x)] = (x, f(x))          # x held: its id stays its own
        return done[id(x)][1]

    return once


def _assemble(m: _Moves, n_agents, mask, K, gold, gold_missing, cluster, info, layout="dense"):
    """Pack per-move arrays into :class:`Counts` (``layout="dense"``: one row per (task, agent)
    cell of the [T, I] grid) or :class:`PairCounts` (``"pairs"``: one row per (task, agent)
    pair that has a move). Both layouts run the same :func:`_pack`; only the row index differs."""
    T, Kmax = mask.shape
    I = n_agents
    i32 = _each_once(lambda x: np.ascontiguousarray(x, dtype=np.int32))
    task_level = (mask, K, gold, gold_missing, i32(cluster))
    key = m.task.astype(np.int64) * I + m.agent
    if layout == "dense" and T * I * Kmax <= _DENSE_DIRECT * max(key.size, 1):
        N, e, c, e0, conf0 = _pack(key, T * I, np.repeat(mask, I, axis=0), m)
        N = N.reshape(T, I)
        e, c, e0, conf0 = map(_each_once(lambda x: x.reshape(T, I, Kmax)), (e, c, e0, conf0))
        return Counts(i32(N), i32(e), i32(c), mask, K, gold, gold_missing, i32(cluster), i32(e0),
                      conf0, info)
    pair_key, row = np.unique(key, return_inverse=True)          # sorted by (task, agent)
    pair_task, pair_agent = pair_key // I, pair_key % I
    N, e, c, e0, conf0 = _pack(row.reshape(-1), pair_key.size, mask[pair_task], m)
    if layout == "dense":       # a sparse grid: pack the pairs, then place them in [T, I]
        grid = _each_once(lambda x: _scatter_rows(pair_key, x, T * I).reshape(T, I, Kmax))
        conf0 = (np.full((T * I, Kmax), np.nan, np.float32) if np.isnan(conf0).all() else
                 _scatter_rows(pair_key, conf0, T * I, np.nan, np.float32)).reshape(T, I, Kmax)
        return Counts(_scatter_rows(pair_key, N, T * I).reshape(T, I), grid(e), grid(c), mask,
                      K, gold, gold_missing, i32(cluster), grid(e0), conf0, info)
    return PairCounts(i32(pair_task), i32(pair_agent), i32(N), i32(e), i32(c), i32(e0), conf0,
                      *task_level, n_tasks=T, n_agents=I, info=info)
