"""The bootstrap, in one place: the paired bootstrap of two arms ([BDA] §5 and Appendix D.2) and
the problem-cluster bootstrap of audit statistics ([Audit] Table 6); docs/metrics.md and
docs/audit.md.

* :func:`paired_bootstrap`, :func:`paired_bootstrap_stat` -> :class:`BootstrapResult`: the
  difference of a per-task mean (or of any weighted statistic) between two arms on the same
  tasks, resampling tasks or whole clusters of tasks.
* :func:`cluster_bootstrap`, :func:`cluster_bootstrap_batched`, :func:`ratio_bootstrap` ->
  :class:`BootstrapCI`: one statistic (a :class:`~bda_jax.metrics.Ratio` or a number) of units
  grouped in clusters, resampling whole clusters.

Both resample units with replacement, as many as there are, and report the ``level``
percentile interval (``numpy.quantile``, linear interpolation) of the resampled statistics,
resamples with an undefined (non-finite) statistic dropped and counted out.

Random draws. Each family keeps the draws it has always made, so that the same seed gives the
same numbers bit for bit (tests and committed results pin them); the two conventions are:

* paired bootstrap — a JAX PRNG ``key`` (an integer is refused): resample ``r`` uses
  ``jax.random.split(key, n_resamples)[r]`` and draws its unit indices as 32 random bits
  modulo the number of units, jitted and vmapped in batches, so no value depends on the batch
  size. Cluster labels are coded by ``numpy.unique`` of the labels themselves.
* cluster bootstrap — an integer ``seed`` for ``numpy.random.Generator(PCG64(seed))``: one
  ``multinomial`` draw of the cluster counts per resample, on the host, every unit inheriting
  its cluster's count (a weight), so the three functions share their resamples for the same
  ``seed`` and clusters (the metrics of one audit are resampled together). Cluster labels are
  coded by ``numpy.unique`` of the labels as text. The paper gives no resample count; 2,000 is
  the default.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Iterator, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._ratio import Ratio, plain_number, ratio
from ._scores import default_float
from .._core.errors import DataError
from .._core.exported import persistent_jit
from .._core.checks import positive_int

__all__ = [
    "BootstrapCI", "BootstrapResult", "cluster_bootstrap", "cluster_bootstrap_batched",
    "paired_bootstrap", "paired_bootstrap_stat", "ratio_bootstrap",
]


# ==================================================================================== shared
def _check_level(level) -> None:
    if not 0.0 < level < 1.0:
        raise DataError(f"level must lie in (0, 1), got {level!r}", field="level")


def _percentile_interval(draws, level) -> tuple[np.ndarray, float, float]:
    """The finite ``draws`` (float64) and their ``level`` percentile interval (NaN, NaN when
    none is finite)."""
    draws = np.asarray(draws, np.float64)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return draws, math.nan, math.nan
    lo, hi = np.quantile(draws, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return draws, float(lo), float(hi)


# ========================================================================== paired bootstrap
class BootstrapResult(NamedTuple):
    """Paired bootstrap of arm a against arm b (plain Python numbers; ``._asdict()`` is JSON).

    ``delta`` = statistic(a) - statistic(b) on the full data; ``ci_low``, ``ci_high`` the
    percentile interval of the resampled deltas (or, with ``interval="centred"``, that interval
    moved onto ``delta``); ``p_win`` the fraction of resamples in which a is
    strictly better than b; ``n_resamples`` the resamples used (those with a defined statistic);
    ``n_units`` the number of resampled units (tasks, or clusters).
    """

    delta: float
    ci_low: float
    ci_high: float
    p_win: float
    n_resamples: int
    n_units: int


def _units(clusters, T):
    """[T] resampled unit of each task and the number of units: every task its own, or its
    cluster's code in ``numpy.unique`` order of the labels."""
    if clusters is None:
        return np.arange(T), T
    cl = np.asarray(clusters)
    if cl.shape != (T,):
        raise DataError(f"clusters must be [T] = [{T}], got shape {cl.shape}", field="clusters")
    _, inv = np.unique(cl, return_inverse=True)
    return inv.reshape(T).astype(np.int32), int(inv.max()) + 1


# the intervals paired_bootstrap and paired_bootstrap_stat report
_INTERVALS = ("percentile", "centred")


def _check_interval(interval) -> None:
    if interval not in _INTERVALS:
        raise DataError(f"interval must be one of {_INTERVALS}, got {interval!r}",
                        field="interval")


def _centre(draws, estimate, lo, hi) -> tuple[float, float]:
    """The percentile interval [lo, hi] of ``draws`` moved so that their median sits on
    ``estimate``: [estimate - (median - lo), estimate + (hi - median)]. Quantiles are monotone
    in their level, so lo <= median <= hi and the interval always holds ``estimate``."""
    med = float(np.quantile(draws, 0.5))
    return float(estimate) - (med - lo), float(estimate) + (hi - med)


def _finish(deltas, delta, higher_is_better, level, n_units,
            interval="percentile") -> BootstrapResult:
    deltas, lo, hi = _percentile_interval(deltas, level)
    if deltas.size == 0:
        return BootstrapResult(float(delta), math.nan, math.nan, math.nan, 0, n_units)
    if interval == "centred":
        lo, hi = _centre(deltas, delta, lo, hi)
    win = deltas > 0 if higher_is_better else deltas < 0
    return BootstrapResult(float(delta), lo, hi, float(win.mean()), int(deltas.size), n_units)


def _check_common(key, n_resamples, level):
    if isinstance(key, (int, np.integer)):
        raise DataError("key must be a JAX PRNG key, e.g. jax.random.key(0), not an int",
                        field="key")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise DataError(f"n_resamples must be a positive integer, got {n_resamples!r}",
                        field="n_resamples")
    _check_level(level)


def _map_resamples(one, key, n_resamples, batch_size):
    """[n_resamples] results of ``one(k_r)``, k_r = split(key, n_resamples)[r], vmapped in
    batches of ``batch_size`` under ``lax.map`` (the last batch padded with repeated keys whose
    results are dropped), so the values never depend on the batch size."""
    keys = jax.random.split(key, n_resamples)
    if batch_size >= n_resamples:
        return jax.vmap(one)(keys)
    n_batches = -(-n_resamples // batch_size)
    pad = n_batches * batch_size - n_resamples
    if pad:
        keys = jnp.concatenate([keys, keys[:pad]])
    out = jax.lax.map(jax.vmap(one), keys.reshape(n_batches, batch_size))
    return out.reshape(-1)[:n_resamples]


def _draw_units(k, n_units):
    """n_units uniform draws from [0, n_units): 32 random bits modulo n_units (the modulo bias,
    at most n_units / 2**32 relative, is negligible; cheaper to compile than ``randint``)."""
    bits = jax.random.bits(k, (n_units,), jnp.uint32)
    return (bits % jnp.uint32(n_units)).astype(jnp.int32)


@partial(persistent_jit, static_argnames=("n_resamples", "batch_size"))
def _boot_ratio(key, unit_sum, unit_size, n_resamples, batch_size):
    def one(k):
        idx = _draw_units(k, unit_sum.shape[0])
        return jnp.sum(unit_sum[idx]) / jnp.sum(unit_size[idx])

    return _map_resamples(one, key, n_resamples, batch_size)


@partial(jax.jit, static_argnames=("stat_fn", "n_units", "n_resamples", "batch_size"))
def _boot_stat(key, stat_fn, data_a, data_b, unit, n_units, n_resamples, batch_size):
    def one(k):
        counts = jnp.bincount(_draw_units(k, n_units), length=n_units)
        w = counts.astype(default_float())[unit]
        return stat_fn(data_a, w) - stat_fn(data_b, w)

    return _map_resamples(one, key, n_resamples, batch_size)


def paired_bootstrap(key, metric_a, metric_b, n_resamples=10_000, clusters=None, *,
                     higher_is_better=True, level=0.95, batch_size=None,
                     interval="percentile") -> BootstrapResult:
    """Paired bootstrap of a per-task mean ([BDA] §5 and Appendix D.2: 10,000 resamples).

    ``metric_a``, ``metric_b`` [T]: per-task contributions of two arms on the same tasks (e.g.
    ``correct``, or ``(confidence - correct)**2``, or ``brier_mc(..., reduce=False)``); pass only
    labeled tasks (values must be finite). Each resample draws T tasks with replacement — or, with
    ``clusters`` [T] (any labels), as many whole clusters as there are, with replacement (the
    cluster bootstrap: tasks of a cluster stay together; the resample's delta is the mean over its
    tasks) — and recomputes mean_a - mean_b. ``delta`` is mean_a - mean_b on the full data, the CI
    the ``level`` percentile interval (``numpy.quantile``, linear interpolation) of the resampled
    deltas, and ``p_win`` the fraction of resamples in which a is strictly better: mean_a > mean_b
    when ``higher_is_better`` (scores such as correctness), mean_a < mean_b when
    ``higher_is_better=False`` (losses: squared errors, NLL). ``delta`` keeps its sign either way.

    Deterministic given ``key``: resample r uses ``jax.random.split(key, n_resamples)[r]``
    whatever ``batch_size`` (resamples evaluated at once; default: about 4M drawn indices per
    batch, so memory stays flat in T).

    ``interval``: ``"percentile"`` (default, above) or ``"centred"``: the same percentile
    interval moved so that the resampled deltas' median sits on ``delta``,
    [delta - (median - low), delta + (high - median)]. The percentile interval estimates where
    the *resampled* statistic falls; for a biased statistic (ECE: the absolute value in each
    bin makes every resample's ECE exceed a near-zero one, e.g. of a well-calibrated or a
    constant-confidence arm) that whole distribution can sit above the full-data value, and so
    can the BCa and basic (pivotal) intervals, whose end points are quantiles of the same draws
    (the basic interval holds the estimate exactly when the percentile interval does). The
    centred interval keeps the bootstrap's spread and skew but not its median bias, so it
    always holds ``delta``. For a mean (this function) the two nearly coincide.

    >>> r = paired_bootstrap(jax.random.key(0), [1, 1, 1, 0], [0, 1, 0, 0], n_resamples=200)
    >>> r.delta, r.p_win > 0.8
    (0.5, True)
    """
    _check_common(key, n_resamples, level)
    _check_interval(interval)
    a = np.asarray(metric_a, np.float64)
    b = np.asarray(metric_b, np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise DataError(f"metric_a {a.shape} and metric_b {b.shape} must be the same non-empty [T]",
                        field="metric_b")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise DataError("per-task metrics must be finite (drop unlabeled tasks first)",
                        field="metric_a" if not np.isfinite(a).all() else "metric_b")
    T = a.size
    unit, G = _units(clusters, T)
    d = a - b
    unit_sum = np.bincount(unit, weights=d, minlength=G)
    unit_size = np.bincount(unit, minlength=G).astype(np.float64)
    bs = int(batch_size) if batch_size else max(1, min(n_resamples, (1 << 22) // G))
    ft = default_float()
    deltas = _boot_ratio(key, jnp.asarray(unit_sum, ft), jnp.asarray(unit_size, ft),
                         int(n_resamples), bs)
    return _finish(deltas, d.mean(), higher_is_better, level, G, interval)


def paired_bootstrap_stat(key, stat_fn: Callable[[Any, jax.Array], jax.Array], data_a, data_b,
                          n_resamples=10_000, clusters=None, *, higher_is_better=True, level=0.95,
                          batch_size=None, interval="percentile") -> BootstrapResult:
    """Paired bootstrap of any weighted statistic, e.g. ECE ([BDA] §5, Appendix D.2).

    ``stat_fn(data, weights) -> scalar``: ``data`` a pytree of arrays with a leading task axis T
    (``data_a`` and ``data_b``: the two arms on the same tasks), ``weights`` [T] float
    multiplicities (how often each task was drawn). The scores of bda_jax.metrics take ``weights``,
    so e.g. ``lambda d, w: ece(d[0], d[1], binning="mass", weights=w * d[2])`` with
    ``d = (confidence, correct, labeled)``. Resampling, ``clusters``, ``delta`` (stat_a - stat_b),
    CI, ``p_win`` and determinism as in :func:`paired_bootstrap`, whose draws it shares: with
    ``stat_fn`` a weighted mean both return the same resampled deltas. Resamples are vmapped in
    batches under ``jax.lax.map``; resamples where a statistic is NaN are dropped (counted out of
    ``n_resamples``). For ECE pass ``higher_is_better=False``. ``stat_fn`` is a static argument
    of the compiled bootstrap: reuse one function object across calls (e.g. one per metric, not a
    fresh lambda per arm) and same-shaped calls reuse the compilation. ``interval``:
    ``"percentile"`` or ``"centred"`` as in :func:`paired_bootstrap`; use ``"centred"`` for a
    biased statistic such as ECE, whose percentile interval can miss its own estimate.

    >>> from bda_jax.metrics import ece
    >>> stat = lambda d, w: ece(d[0], d[1], weights=w)
    >>> a = (jnp.array([0.9, 0.9, 0.1, 0.1]), jnp.array([1, 1, 0, 0]))
    >>> b = (jnp.array([0.9, 0.9, 0.9, 0.9]), jnp.array([1, 0, 1, 0]))
    >>> r = paired_bootstrap_stat(jax.random.key(0), stat, a, b, n_resamples=100,
    ...                           higher_is_better=False)
    >>> round(r.delta, 4), r.p_win > 0.9
    (-0.3, True)
    """
    _check_common(key, n_resamples, level)
    _check_interval(interval)
    leaves = jax.tree_util.tree_leaves(data_a) + jax.tree_util.tree_leaves(data_b)
    if not leaves:
        raise DataError("data_a and data_b must hold arrays", field="data_a")
    T = int(np.shape(leaves[0])[0]) if np.ndim(leaves[0]) else 0
    if T == 0 or any(np.ndim(x) == 0 or np.shape(x)[0] != T for x in leaves):
        raise DataError("every array of data_a and data_b needs the same non-empty leading "
                        "task axis T", field="data_b")
    unit, G = _units(clusters, T)
    data_a = jax.tree_util.tree_map(jnp.asarray, data_a)
    data_b = jax.tree_util.tree_map(jnp.asarray, data_b)
    delta = float(_full_stat_delta(stat_fn, data_a, data_b, T))
    bs = int(batch_size) if batch_size else max(1, min(n_resamples, (1 << 20) // max(T, G)))
    deltas = _boot_stat(key, stat_fn, data_a, data_b, jnp.asarray(unit), G, int(n_resamples), bs)
    return _finish(deltas, delta, higher_is_better, level, G, interval)


@partial(jax.jit, static_argnames=("stat_fn", "T"))
def _full_stat_delta(stat_fn, data_a, data_b, T):
    ones = jnp.ones(T, default_float())
    return stat_fn(data_a, ones) - stat_fn(data_b, ones)


# ========================================================================= cluster bootstrap
class BootstrapCI(NamedTuple):
    """A statistic with its problem-cluster bootstrap percentile interval ([Audit] Table 6).

    ``estimate`` on the full data with its ``numerator`` and ``denominator`` (NaN when the
    statistic is a plain number); ``n_boot`` the resamples with a defined statistic;
    ``n_clusters`` the resampled units.
    """

    estimate: float
    ci_low: float
    ci_high: float
    numerator: float
    denominator: float
    level: float
    n_boot: int
    n_clusters: int


def _setup(clusters, n, n_boot, level):
    """Checks the arguments; returns the [n] cluster code of each unit (``numpy.unique`` order
    of the labels as text) and the number of clusters G."""
    cl = np.asarray(clusters)
    if cl.ndim != 1 or (n is not None and cl.shape != (n,)) or cl.size == 0:
        raise DataError(f"clusters must be a non-empty 1-d array{'' if n is None else f' [{n}]'},"
                        f" got shape {cl.shape}", field="clusters")
    positive_int(n_boot, "n_boot")
    _check_level(level)
    _, unit = np.unique(cl.astype(str), return_inverse=True)
    unit = unit.reshape(-1)
    return unit, int(unit.max()) + 1


def _draws(seed, G: int, n_boot: int, chunk: int) -> Iterator[np.ndarray]:
    """[m, G] cluster counts, ``n_boot`` rows in all, in chunks of at most ``chunk`` rows; one
    multinomial draw per resample, so the sequence does not depend on ``chunk``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    p = np.full(G, 1.0 / G)
    for start in range(0, n_boot, chunk):
        yield np.stack([rng.multinomial(G, p) for _ in range(min(chunk, n_boot - start))])


def _ci(estimate, num, den, draws, level, G) -> BootstrapCI:
    used, lo, hi = _percentile_interval(draws, level)
    num = math.nan if num is None or math.isnan(num) else plain_number(num)
    den = math.nan if den is None or math.isnan(den) else plain_number(den)
    return BootstrapCI(float(estimate), lo, hi, num, den, float(level), int(used.size), G)


def cluster_bootstrap(stat_fn: Callable[[np.ndarray], "Ratio | float"], clusters, seed: int = 0,
                      n_boot: int = 2000, level: float = 0.95) -> BootstrapCI:
    """Problem-cluster bootstrap of any statistic ([Audit] Table 6; the paper resamples 421
    problem clusters, which docs/audit.md reads as chunks of at most 10 consecutive problems
    within a tier — a reading its unpublished tier sizes do not let us check).

    ``clusters`` [n]: the cluster label of each unit (e.g. ``log.block_cluster`` for blocks);
    ``stat_fn(weights)`` with ``weights`` [n] float multiplicities returns a :class:`Ratio` or a
    number (e.g. ``lambda w: bda_jax.audit.cra(log, weights=w)``). Resampling as in the module
    docstring.
    """
    unit, G = _setup(clusters, None, n_boot, level)
    full = stat_fn(np.ones(unit.size))
    est, num, den = ((full.value, full.numerator, full.denominator) if isinstance(full, Ratio)
                     else (float(full), math.nan, math.nan))
    draws = np.empty(n_boot)
    for r, counts in enumerate(_draws(seed, G, n_boot, 1)):
        value = stat_fn(counts[0][unit].astype(np.float64))
        draws[r] = value.value if isinstance(value, Ratio) else float(value)
    return _ci(est, num, den, draws, level, G)


def cluster_bootstrap_batched(stat_fn: Callable[[np.ndarray], np.ndarray], clusters,
                              seed: int = 0, n_boot: int = 2000, level: float = 0.95,
                              chunk: int = 100) -> list[BootstrapCI]:
    """:func:`cluster_bootstrap` of ``k`` statistics at once, for vectorized statistics.

    ``stat_fn(weights)`` maps ``weights`` [m, n] (m resamples of the n units' multiplicities)
    to [m, k] values (e.g. ``jax.vmap`` of :func:`bda_jax.metrics.ece` over weights); it is
    called with ``chunk`` resamples at a time and once with all-ones weights for the estimates.
    The same ``seed`` draws the same resamples as :func:`cluster_bootstrap`. Returns ``k``
    :class:`BootstrapCI` (numerator and denominator NaN).

    >>> ci = cluster_bootstrap_batched(lambda w: (w @ [1.0, 0, 1, 1] / w.sum(1))[:, None],
    ...                                ["a", "a", "b", "c"], n_boot=200)
    >>> len(ci), ci[0].estimate, ci[0].n_clusters
    (1, 0.75, 3)
    """
    unit, G = _setup(clusters, None, n_boot, level)
    positive_int(chunk, "chunk")
    est = np.asarray(stat_fn(np.ones((1, unit.size))), np.float64).reshape(1, -1)[0]
    draws = np.empty((n_boot, est.size))
    start = 0
    for counts in _draws(seed, G, n_boot, chunk):
        out = np.asarray(stat_fn(counts[:, unit].astype(np.float64)), np.float64)
        draws[start:start + len(counts)] = out.reshape(len(counts), est.size)
        start += len(counts)
    return [_ci(e, None, None, draws[:, j], level, G) for j, e in enumerate(est)]


def ratio_bootstrap(numerator, denominator, clusters, seed: int = 0, n_boot: int = 2000,
                    level: float = 0.95) -> BootstrapCI:
    """Vectorized :func:`cluster_bootstrap` of ``sum(numerator) / sum(denominator)`` over per-unit
    terms (each [n], e.g. from ``bda_jax.audit.metric_terms`` or ``commitment_terms``); the same
    ``seed`` draws the same resamples as :func:`cluster_bootstrap`, so both give the same
    interval.

    Worked example: terms 1, 0, 1, 1 over one unit each, units a, a, b, c: the estimate is
    3 / 4 over three clusters.

    >>> r = ratio_bootstrap([1, 0, 1, 1], [1, 1, 1, 1], ["a", "a", "b", "c"], n_boot=200)
    >>> r.estimate, r.numerator, r.denominator, r.n_clusters
    (0.75, 3, 4, 3)
    """
    num = np.asarray(numerator, np.float64)
    den = np.asarray(denominator, np.float64)
    if num.ndim != 1 or num.shape != den.shape:
        raise DataError(f"numerator {num.shape} and denominator {den.shape} must be one [n] "
                        "shape", field="denominator")
    unit, G = _setup(clusters, num.size, n_boot, level)
    num_g = np.bincount(unit, weights=num, minlength=G)
    den_g = np.bincount(unit, weights=den, minlength=G)
    draws = np.empty(n_boot)
    start = 0
    for counts in _draws(seed, G, n_boot, max(1, min(n_boot, (1 << 22) // G))):
        n_r, d_r = counts @ num_g, counts @ den_g
        with np.errstate(invalid="ignore", divide="ignore"):
            draws[start:start + len(counts)] = np.where(d_r > 0, n_r / np.where(d_r > 0, d_r, 1.0),
                                                        np.nan)
        start += len(counts)
    full = ratio(num.sum(), den.sum())
    return _ci(full.value, full.numerator, full.denominator, draws, level, G)
