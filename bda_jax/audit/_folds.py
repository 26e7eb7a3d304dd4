"""Tier-stratified problem folds ([Audit] Table 2: cross-fitting with K = 2 folds, by problem,
stratified by tier), shared by the cross-fitted calibration and the learned router.

Reading: problems, in order of first appearance, are shuffled by ``Generator(PCG64(seed))``,
sorted by tier (stable) and dealt round-robin, so each tier's problems — and the problems
overall — split over the folds as evenly as possible (fold sizes in problems differ by at most
one).
"""
from __future__ import annotations

import numpy as np

from ._common import group_rows, positive_int
from .._core.errors import DataError

__all__ = ["tier_stratified_folds"]


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
