"""Pieces shared by the three axes of the routing audit ([Audit]; docs/audit.md): the
:class:`Ratio` every rate is reported as, the tier-stratified problem folds of the cross-fitted
calibration and the learned router, the problem-cluster bootstrap, and small grouping and
argument checks.

Readings chosen here (each a parameter where it matters):

* A rate is ``value = numerator / denominator``; ``value`` is NaN when the denominator is 0.
  Numerator and denominator are plain Python numbers: ``int`` when whole (block, pair or
  candidate counts), ``float`` otherwise (PCCA's sum of per-block shares, bootstrap weights).
* Folds ([Audit] Table 2: K = 2, by problem, stratified by tier): problems, in order of first
  appearance, are shuffled by ``Generator(PCG64(seed))``, sorted by tier (stable) and dealt
  round-robin, so each tier's problems — and the problems overall — split over the folds as
  evenly as possible (fold sizes in problems differ by at most one).
* Bootstrap (Table 6; docs/audit.md): each resample draws as many clusters as there are, with
  replacement (one ``multinomial`` draw per resample from ``Generator(PCG64(seed))``), and every
  unit inherits its cluster's count; the interval is the ``level`` percentile interval
  (``numpy.quantile``, linear) of the resampled statistics, undefined (NaN) ones dropped. Every
  bootstrap here consumes the same draws for the same ``seed`` and clusters, so metrics of one
  audit share their resamples. The paper gives no resample count; 2,000 is the default.
"""
from __future__ import annotations

import math
from typing import Callable, Iterator, NamedTuple

import numpy as np

from .._core.errors import DataError

__all__ = [
    "BootstrapCI", "Ratio", "cluster_bootstrap", "cluster_bootstrap_batched", "group_rows",
    "ratio", "ratio_bootstrap", "tier_stratified_folds",
]


# ===================================================================================== ratios
def _plain(x):
    v = float(x)
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


class Ratio(NamedTuple):
    """A rate with its parts: ``value = numerator / denominator`` (NaN when the denominator is
    0). ``numerator`` may be negative (a net shift) or fractional (PCCA's summed shares)."""

    value: float
    numerator: float
    denominator: float


def ratio(numerator, denominator) -> Ratio:
    """:class:`Ratio` of two numbers (counts, or sums of weighted terms).

    >>> ratio(1927, 9436).numerator, round(ratio(1927, 9436).value, 3), ratio(0, 0).value
    (1927, 0.204, nan)
    >>> ratio(2.5, 4.0)
    Ratio(value=0.625, numerator=2.5, denominator=4)
    """
    num, den = _plain(numerator), _plain(denominator)
    if den < 0:
        raise DataError(f"a denominator cannot be negative, got {den}", field="denominator")
    return Ratio(num / den if den > 0 else math.nan, num, den)


# ===================================================================================== checks
def positive_int(value, field: str, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (not a bool) >= ``minimum``, else DataError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum:
        raise DataError(f"{field} must be an integer >= {minimum}, got {value!r}", field=field)
    return int(value)


def group_rows(labels) -> list[tuple[object, np.ndarray]]:
    """``(label, row indices)`` per distinct label, labels in sorted order (``repr`` order when
    they do not sort), each label a plain Python value.

    >>> [(k, v.tolist()) for k, v in group_rows(["b", "a", "b"])]
    [('a', [1]), ('b', [0, 2])]
    """
    lab = np.asarray(labels, object).reshape(-1)
    rows: dict = {}
    for i, x in enumerate(lab.tolist()):
        rows.setdefault(x, []).append(i)
    try:
        keys = sorted(rows)
    except TypeError:
        keys = sorted(rows, key=repr)
    return [(k.item() if hasattr(k, "item") else k, np.asarray(rows[k], np.int64))
            for k in keys]


# ====================================================================================== folds
def tier_stratified_folds(problem, tier=None, *, n_folds: int = 2, seed: int = 0) -> np.ndarray:
    """[N] fold id (int64, in [0, n_folds)) of each row: grouped by problem, stratified by tier
    ([Audit] Table 2's cross-fitting: K = 2, by problem, tier-stratified).

    ``problem`` [N] and ``tier`` [N] hashable labels (``tier=None``: one stratum). Every row of
    a problem lands in one fold; a problem under two tiers is refused (the tier is a property
    of the problem). Problems (first-appearance order) are shuffled by
    ``Generator(PCG64(seed))``, sorted by tier (stable) and dealt round-robin, the deal
    continuing across tiers: each tier's problems and all problems split as evenly as possible.

    Worked example: tier A holds p1 and p2, tier B p3 and p4. Sorted by tier, A's two problems
    take deal positions 0 and 1 (folds 0 and 1, in a seeded order) and B's positions 2 and 3
    (folds 0 and 1 again); p1's two rows share a fold.

    >>> f = tier_stratified_folds(["p1", "p1", "p2", "p3", "p4"], ["A", "A", "A", "B", "B"])
    >>> bool(f[0] == f[1]), sorted(f[[1, 2]].tolist()), sorted(f[[3, 4]].tolist())
    (True, [0, 1], [0, 1])
    """
    prob = np.asarray(problem, object)
    if prob.ndim != 1:
        raise DataError(f"problem must be [N], got shape {prob.shape}", field="problem")
    if tier is None:
        tr = np.full(prob.size, "", object)
    else:
        tr = np.asarray(tier, object)
        if tr.shape != prob.shape:
            raise DataError(f"tier must be [N] = [{prob.size}], got shape {tr.shape}",
                            field="tier")
    index: dict = {}
    code = np.fromiter((index.setdefault(p, len(index)) for p in prob.tolist()), np.int64,
                       prob.size)
    tier_of: dict = {}
    for p, t in zip(prob.tolist(), tr.tolist()):
        if tier_of.setdefault(p, t) != t:
            raise DataError(f"problem {p!r} has two tiers ({tier_of[p]!r}, {t!r})",
                            field="tier")
    n_folds = positive_int(n_folds, "n_folds", minimum=2)
    if len(index) < n_folds:
        raise DataError(f"n_folds={n_folds} exceeds the {len(index)} problems (every fold needs "
                        "one)", field="n_folds")
    tiers = [k for k, _ in group_rows(list(tier_of.values()))]
    rank = {t: r for r, t in enumerate(tiers)}
    tier_rank = np.array([rank[tier_of[p]] for p in index], np.int64)
    order = np.random.Generator(np.random.PCG64(seed)).permutation(len(index))
    order = order[np.argsort(tier_rank[order], kind="stable")]
    fold_of_problem = np.empty(len(index), np.int64)
    fold_of_problem[order] = np.arange(len(index)) % n_folds
    return fold_of_problem[code]


# ================================================================================== bootstrap
class BootstrapCI(NamedTuple):
    """A statistic with its problem-cluster bootstrap percentile interval (Table 6).

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
    cl = np.asarray(clusters)
    if cl.ndim != 1 or (n is not None and cl.shape != (n,)) or cl.size == 0:
        raise DataError(f"clusters must be a non-empty 1-d array{'' if n is None else f' [{n}]'},"
                        f" got shape {cl.shape}", field="clusters")
    positive_int(n_boot, "n_boot")
    if not 0.0 < level < 1.0:
        raise DataError(f"level must lie in (0, 1), got {level!r}", field="level")
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


def _interval(draws, level):
    draws = np.asarray(draws, np.float64)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan, 0
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi), int(draws.size)


def _ci(estimate, num, den, draws, level, G) -> BootstrapCI:
    lo, hi, used = _interval(draws, level)
    num = math.nan if num is None or math.isnan(num) else _plain(num)
    den = math.nan if den is None or math.isnan(den) else _plain(den)
    return BootstrapCI(float(estimate), lo, hi, num, den, float(level), used, G)


def cluster_bootstrap(stat_fn: Callable[[np.ndarray], "Ratio | float"], clusters, seed: int = 0,
                      n_boot: int = 2000, level: float = 0.95) -> BootstrapCI:
    """Problem-cluster bootstrap of any statistic (Table 6; the paper resamples 421 problem
    clusters, which docs/audit.md reads as chunks of at most 10 consecutive problems within a tier —
    a reading its unpublished tier sizes do not let us check).

    ``clusters`` [n]: the cluster label of each unit (e.g. ``log.block_cluster`` for blocks);
    ``stat_fn(weights)`` with ``weights`` [n] float multiplicities returns a :class:`Ratio` or a
    number (e.g. ``lambda w: cra(log, weights=w)``). Resampling as in the module docstring.
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
    terms (each [n], e.g. from ``metric_terms`` or ``commitment_terms``); the same ``seed`` draws
    the same resamples as :func:`cluster_bootstrap`, so both give the same interval.

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
