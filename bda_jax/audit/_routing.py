"""Routing audit of confidence-routed broadcast deliberation ([Audit] §3 routing axis; Tables 1,
6, 10 and 15; readings pinned in docs/audit.md).

Everything here is a pure function of a :class:`~bda_jax.audit.BroadcastLog`'s poll
table (R rows, B blocks; see that class for the array shapes) plus optional overrides:
``score`` [R] (e.g. permuted or noisy-oracle scores), ``selected`` [R] bool (e.g. a replayed
router) and ``weights`` [B] (non-negative block multiplicities, as drawn by the cluster bootstrap;
integer weights act exactly like repeating blocks).

Selection (``selected=None``, the default): the log's
:func:`~bda_jax.audit.effective_selection`. When some poll is selected, the logged
flags; a block without a selected poll then leaves every selection-based denominator (CRA,
HRWP, runtime success, MCR, selected-invalid rate) — :func:`unselected_blocks` counts them.
When *no* poll of the log is selected (a log written without ``selected`` flags), the selection
is replayed: the speaker's poll where the block has a speak record, the runtime argmax
(first listed wins ties) elsewhere; ``audit_broadcast`` says so in the card's notes.

Block classes (per block ``b``; "valid" = parsed, normalized, labeled candidate):

* *selected*: the block has a selected poll; *selected-valid*: that poll is a valid candidate;
* *all-routeable*: at least one valid candidate;
* *possible-hit*: at least one valid candidate is correct;
* *mixed*: at least one correct and one wrong valid candidate, both with stated scores.

Headline metrics (Table 6 and the glossary, Table 9) are ratios ``numerator / denominator`` of
per-block terms, returned as :class:`Ratio` (``value`` NaN when the denominator is 0):

==========================  ==============================================  =====================
metric                      numerator (blocks)                              denominator (blocks)
==========================  ==============================================  =====================
selected_invalid_rate       selected poll is not a valid candidate          selected
cra                         selected candidate correct                      selected-valid
hrwp                        selected candidate correct                      possible-hit, selected
runtime_success             selected candidate correct (invalid pick = 0)   all-routeable (or all),
                                                                            selected
oracle_success              possible-hit                                    all-routeable (or all)
mcr                         selected valid and wrong, another valid correct eligible (see mcr)
pcca                        sum over mixed blocks of the block's tie-aware  mixed
                            share of (correct, wrong) pairs ordered right
ctr                         tied (correct, wrong) pairs, pooled             all such pairs
==========================  ==============================================  =====================

Router counterfactuals (Table 1) are scored as *expected* success per all-routeable block,
computed exactly (ties are averaged over, never sampled); see :func:`router_block_success`.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

from ._common import group_rows, positive_int
from ._folds import tier_stratified_folds
from ._log import BroadcastLog
from ._router import effective_selection, runtime_argmax
from .._core.errors import DataError
from ..metrics import BootstrapCI, Ratio, ratio, ratio_bootstrap

__all__ = [
    "MCR_ELIGIBLE", "METRICS", "ROUTERS", "RouterResult", "SanityCheck", "ScorePairs", "cra",
    "ctr", "hrwp", "learned_router_probabilities", "mcr", "metric_terms", "noisy_oracle_check",
    "noisy_oracle_scores", "oracle_success", "pcca", "per_tier", "permutation_null_pcca",
    "permute_scores_within_blocks", "router_block_success", "router_counterfactuals",
    "routing_audit", "runtime_success", "score_pairs", "selected_invalid_rate",
    "unselected_blocks",
]

METRICS = ("selected_invalid_rate", "cra", "hrwp", "runtime_success", "oracle_success", "mcr",
           "pcca", "ctr")
ROUTERS = ("runtime_argmax", "top_confidence_tie_random", "random_valid", "majority_vote",
           "confidence_weighted_vote", "learned", "oracle")
MCR_ELIGIBLE = ("contested", "selected_valid", "routeable")
_VOTE_DECIMALS = 9   # confidence-weighted vote sums are compared after rounding (float sums)


def _ratio(num: np.ndarray, den: np.ndarray, weights=None) -> Ratio:
    """:class:`~bda_jax.audit.Ratio` of the sums of per-block terms [B], each block
    counted ``weights`` [B] times."""
    if weights is not None:
        num, den = num * weights, den * weights
    return ratio(np.sum(num), np.sum(den))


# ===================================================================================== views
def _score(log: BroadcastLog, score) -> np.ndarray:
    if score is None:
        return log.score
    score = np.asarray(score, np.float64)
    if score.shape != (log.n_polls,):
        raise DataError(f"score must be [R] = [{log.n_polls}], got shape {score.shape}",
                        field="score")
    return score


def _selected(log: BroadcastLog, selected) -> np.ndarray:
    if selected is None:
        return effective_selection(log)[0]
    selected = np.asarray(selected)
    if selected.shape != (log.n_polls,) or selected.dtype != bool:
        raise DataError(f"selected must be a bool [R] = [{log.n_polls}] array, got "
                        f"{selected.dtype} {selected.shape}", field="selected")
    if (np.bincount(log.block, weights=selected, minlength=log.n_blocks) > 1).any():
        raise DataError("selected marks more than one poll in a block", field="selected")
    return selected


def _weights(log: BroadcastLog, weights):
    if weights is None:
        return None
    weights = np.asarray(weights, np.float64)
    if weights.shape != (log.n_blocks,) or not np.isfinite(weights).all() or (weights < 0).any():
        raise DataError(f"weights must be finite non-negative [B] = [{log.n_blocks}], got shape "
                        f"{weights.shape}", field="weights")
    return weights


def _count(log: BroadcastLog, mask: np.ndarray) -> np.ndarray:
    """[B] number of rows of each block where ``mask`` [R] holds."""
    return np.bincount(log.block, weights=mask, minlength=log.n_blocks)


class _Blocks(NamedTuple):
    has_selected: np.ndarray     # [B] bool
    selected_valid: np.ndarray
    selected_correct: np.ndarray
    n_valid: np.ndarray          # [B] float counts
    n_correct: np.ndarray

    @property
    def routeable(self):
        return self.n_valid > 0

    @property
    def possible_hit(self):
        return self.n_correct > 0


def _blocks(log: BroadcastLog, selected) -> _Blocks:
    sel = _selected(log, selected)
    return _Blocks(_count(log, sel) > 0, _count(log, sel & log.valid) > 0,
                   _count(log, sel & log.correct) > 0, _count(log, log.valid),
                   _count(log, log.correct))


def _pair_terms(log: BroadcastLog, score=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[B] each: (correct, wrong) valid-candidate pairs per block with the correct one scored
    higher, tied, and in total; candidates without a stated score (NaN) form no pair."""
    s = _score(log, score)
    stated = log.valid & ~np.isnan(s)
    right = log.padded(stated & log.correct, False)
    wrong = log.padded(stated & ~log.correct, False)
    S = log.padded(np.where(np.isnan(s), 0.0, s), 0.0)
    pair = right[:, :, None] & wrong[:, None, :]                 # [B, A(correct), A(wrong)]
    diff = S[:, :, None] - S[:, None, :]
    higher = (pair & (diff > 0)).sum((1, 2)).astype(np.float64)
    tied = (pair & (diff == 0)).sum((1, 2)).astype(np.float64)
    return higher, tied, pair.sum((1, 2)).astype(np.float64)


# =================================================================================== metrics
def metric_terms(log: BroadcastLog, metric: str, *, score=None, selected=None,
                 over: str = "routeable", eligible: str = "contested"
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per-block ``(numerator, denominator)`` terms, each [B] float, of a metric in
    :data:`METRICS` (the table of the module docstring); the metric is their ratio of sums, and
    :func:`ratio_bootstrap` resamples them. ``over`` ("routeable" or "all") sets the
    denominator of ``runtime_success`` and ``oracle_success``; ``eligible`` that of ``mcr``.

    >>> from bda_jax.audit import simulate_broadcast
    >>> log = simulate_broadcast(0, n_problems=20)
    >>> num, den = metric_terms(log, "cra")
    >>> num.shape == den.shape == (log.n_blocks,), bool(cra(log).value == num.sum() / den.sum())
    (True, True)
    """
    if metric not in METRICS:
        raise DataError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}",
                        field="metric")
    if over not in ("routeable", "all"):
        raise DataError(f"over must be 'routeable' or 'all', got {over!r}", field="over")
    if metric in ("pcca", "ctr"):
        higher, tied, pairs = _pair_terms(log, score)
        if metric == "ctr":
            return tied, pairs
        mixed = pairs > 0
        share = np.divide(higher + 0.5 * tied, pairs, out=np.zeros_like(pairs), where=mixed)
        return share, mixed.astype(np.float64)
    b = _blocks(log, selected)
    f = (lambda x: np.asarray(x, np.float64))
    base = b.routeable if over == "routeable" else np.ones(log.n_blocks, bool)
    if metric == "selected_invalid_rate":
        return f(b.has_selected & ~b.selected_valid), f(b.has_selected)
    if metric == "cra":
        return f(b.selected_correct), f(b.selected_valid)
    if metric == "hrwp":
        return f(b.selected_correct & b.possible_hit), f(b.possible_hit & b.has_selected)
    if metric == "runtime_success":
        return f(b.selected_correct), f(base & b.has_selected)
    if metric == "oracle_success":
        return f(b.possible_hit), f(base)
    # mcr
    if eligible not in MCR_ELIGIBLE:
        raise DataError(f"eligible must be one of {', '.join(MCR_ELIGIBLE)}, got {eligible!r}",
                        field="eligible")
    missed = b.selected_valid & ~b.selected_correct & b.possible_hit
    den = {"contested": b.selected_valid & (b.n_valid >= 2),
           "selected_valid": b.selected_valid,
           "routeable": b.routeable & b.has_selected}[eligible]
    return f(missed & den), f(den)


def selected_invalid_rate(log: BroadcastLog, *, selected=None, weights=None) -> Ratio:
    """Share of selected blocks whose selected poll is not a valid candidate (Table 6: 0.149 =
    1,655 / 11,122 selected blocks)."""
    return _ratio(*metric_terms(log, "selected_invalid_rate", selected=selected),
                  _weights(log, weights))


def cra(log: BroadcastLog, *, selected=None, weights=None) -> Ratio:
    """Candidate Routing Accuracy (Table 6, glossary Table 9): among selected-valid blocks, the
    share whose selected candidate is correct (0.506 = 4,795 / 9,467)."""
    return _ratio(*metric_terms(log, "cra", selected=selected), _weights(log, weights))


def hrwp(log: BroadcastLog, *, selected=None, weights=None) -> Ratio:
    """Hit Rate When Possible (Table 6): among possible-hit blocks (some valid candidate correct)
    with a selection, the share whose selected candidate is correct (0.906 = 4,795 / 5,295)."""
    return _ratio(*metric_terms(log, "hrwp", selected=selected), _weights(log, weights))


def runtime_success(log: BroadcastLog, *, selected=None, over: str = "routeable",
                    weights=None) -> Ratio:
    """Per-block success of the logged selection (Table 1 "runtime confidence argmax": 0.497 =
    4,795 / 9,653 all-routeable blocks); an invalid pick counts as a failure. ``over="all"``
    divides by every block instead. Blocks without a selection are left out either way."""
    return _ratio(*metric_terms(log, "runtime_success", selected=selected, over=over),
                  _weights(log, weights))


def oracle_success(log: BroadcastLog, *, over: str = "routeable", weights=None) -> Ratio:
    """Oracle ceiling (Table 1): share of all-routeable blocks with a correct valid candidate
    (0.549 = 5,295 / 9,653)."""
    return _ratio(*metric_terms(log, "oracle_success", over=over), _weights(log, weights))


def mcr(log: BroadcastLog, *, selected=None, eligible: str = "contested",
        weights=None) -> Ratio:
    """Missed Correct Rate (Table 6, glossary Table 9): share of eligible blocks where the
    selected valid candidate is wrong while a non-selected valid candidate is correct.

    The paper's denominator is "7,970 eligible blocks" without a definition. ``eligible``:

    * ``"contested"`` (default): selected-valid blocks with at least two valid candidates — the
      blocks where a miss is possible at all (a selected valid candidate plus an alternative);
    * ``"selected_valid"``: every selected-valid block (CRA's denominator);
    * ``"routeable"``: every all-routeable block (with a selection).

    The paper's other counts rule the last two out. A miss is a possible-hit block whose
    selected candidate is not correct, so the numerator is at most 5,295 - 4,795 = 500
    (Table 6's HRWP parts); ``"selected_valid"`` then gives at most 500 / 9,467 = .053 and
    ``"routeable"`` at most 500 / 9,653 = .052, and neither reaches the printed .058. Only a
    subset denominator can (7,970 < 9,467); ``"contested"`` is one that does, which the counts
    allow but do not confirm.
    """
    return _ratio(*metric_terms(log, "mcr", selected=selected, eligible=eligible),
                  _weights(log, weights))


def unselected_blocks(log: BroadcastLog, *, selected=None) -> int:
    """Number of blocks without a selected poll under ``selected`` (default: the log's
    effective selection) — the blocks left out of the selection-based denominators."""
    return int((~_blocks(log, selected).has_selected).sum())


def pcca(log: BroadcastLog, *, score=None, weights=None) -> Ratio:
    """Pairwise Confidence-Correctness Alignment, tie-aware (Table 6; docs/audit.md).

    Over mixed blocks only: each block's value is the mean over its (correct c, wrong w)
    valid-candidate pairs of ``1(s_c > s_w) + 0.5 * 1(s_c = s_w)``; PCCA is the block-macro
    average (numerator: sum of block values, denominator: mixed blocks). 0.5 = no ordering
    signal. Example: a block with c=.9, w=.9, w=.5 has pairs (tie, win) → 0.75.
    """
    return _ratio(*metric_terms(log, "pcca", score=score), _weights(log, weights))


def ctr(log: BroadcastLog, *, score=None, weights=None) -> Ratio:
    """Confidence Tie Rate (Table 6): tied (correct, wrong) valid-candidate pairs over all such
    pairs, pooled over blocks (0.327 of 2,079 pairs)."""
    return _ratio(*metric_terms(log, "ctr", score=score), _weights(log, weights))


class ScorePairs(NamedTuple):
    """Within-block (correct, wrong) valid-candidate pairs by how their scores order them: the
    tallies behind PCCA and CTR ([Audit] Table 6). Not to be confused with
    :class:`bda_jax.PairCounts`, the sparse (task, worker) layout of crowd counts."""

    n_mixed_blocks: int
    n_pairs: int
    correct_higher: int
    wrong_higher: int
    tied: int


def score_pairs(log: BroadcastLog, *, score=None) -> ScorePairs:
    """Tally the (correct, wrong) valid-candidate pairs of every block by score order: correct
    higher, wrong higher, tied ([Audit] Table 6's "1,184 blocks / 2,079 pairs"); candidates
    without a stated score form no pair. ``score`` [R] overrides the log's scores."""
    higher, tied, pairs = _pair_terms(log, score)
    n_pairs, n_higher, n_tied = int(pairs.sum()), int(higher.sum()), int(tied.sum())
    return ScorePairs(int((pairs > 0).sum()), n_pairs, n_higher, n_pairs - n_higher - n_tied,
                      n_tied)


def per_tier(log: BroadcastLog, metric: str, **kwargs) -> dict[str, Ratio]:
    """A metric of :data:`METRICS` within each tier (Table 10), tiers in sorted order; keyword
    arguments as for :func:`metric_terms`."""
    num, den = metric_terms(log, metric, **kwargs)
    return {t: _ratio(num[rows], den[rows]) for t, rows in group_rows(log.block_tier)}


# ==================================================================== router counterfactuals
def _expected_top(values, eligible, gain, group_weight=None) -> np.ndarray:
    """[B] expected ``gain`` of a uniform pick among the eligible entries at the row maximum of
    ``values`` [B, A]; ``group_weight`` [B, A] down-weights members of one answer group so that
    each group counts once. Rows with nothing eligible get 0."""
    vals = np.where(eligible, values, -np.inf)
    top = eligible & (vals == vals.max(axis=1, keepdims=True))
    w = top * (1.0 if group_weight is None else group_weight)
    den = w.sum(1)
    return np.divide((w * gain).sum(1), den, out=np.zeros(den.shape), where=den > 0)


def _answer_cluster(log: BroadcastLog, answer_cluster) -> np.ndarray:
    """[R] object: the answer-cluster label of each poll (default: the normalized candidate);
    every valid candidate needs a hashable, non-null label."""
    if answer_cluster is None:
        return log.candidate
    lab = np.empty(log.n_polls, object)
    values = list(answer_cluster) if not isinstance(answer_cluster, (str, bytes)) else None
    if values is None or len(values) != log.n_polls:
        raise DataError(f"answer_cluster must be [R] = [{log.n_polls}] labels",
                        field="answer_cluster")
    lab[:] = values
    for r in np.flatnonzero(log.valid):
        x = lab[r]
        if x is None or (isinstance(x, float) and x != x):
            raise DataError(f"answer_cluster[{r}] is null for a valid candidate",
                            field="answer_cluster")
        try:
            hash(x)
        except TypeError:
            raise DataError(f"answer_cluster[{r}] is not hashable: {type(x).__name__}",
                            field="answer_cluster") from None
    return lab


def _answer_groups(log: BroadcastLog, answer_cluster=None):
    """[B, A, A] bool: entries (a, a') are valid candidates of one block in one answer cluster
    (default: equal normalized answers)."""
    labels = _answer_cluster(log, answer_cluster)
    codes = np.full(log.n_polls, -1, np.int64)
    index: dict = {}
    for r in np.flatnonzero(log.valid):
        codes[r] = index.setdefault(labels[r], len(index))
    C = log.padded(codes, -1)
    return (C[:, :, None] == C[:, None, :]) & (C[:, :, None] >= 0)


def _router_features(log: BroadcastLog, score: np.ndarray) -> np.ndarray:
    """[R, F] features of each poll for the learned router (used on valid rows only): stated
    score (missing → 0) and a missing flag, score minus the block's best valid score, the share
    of the block's valid candidates giving the same answer, a plurality flag, agent one-hot."""
    stated = ~np.isnan(score)
    s = np.where(stated, score, 0.0)
    S = log.padded(np.where(log.valid & stated, s, -np.inf), -np.inf)
    best = S.max(1)
    best = np.where(np.isfinite(best), best, 0.0)[log.block]
    support = (_answer_groups(log).sum(2))[log.block, log.position].astype(np.float64)
    n_valid = np.maximum(_count(log, log.valid), 1.0)[log.block]
    top_support = log.padded(support, 0.0).max(1)[log.block]
    agents = sorted(set(log.agent.tolist()))
    onehot = (log.agent[:, None] == np.array(agents[1:], object)[None, :]).astype(np.float64)
    return np.column_stack([s, (~stated).astype(np.float64), s - best, support / n_valid,
                            (support == top_support).astype(np.float64), onehot])


def _fit_logistic(X: np.ndarray, y: np.ndarray, l2: float, max_iter: int = 100) -> np.ndarray:
    """Newton-Raphson for L2-penalized logistic regression (intercept unpenalized); X [N, F]
    already standardized, returns [F + 1] coefficients (intercept first)."""
    Xb = np.column_stack([np.ones(len(X)), X])
    beta = np.zeros(Xb.shape[1])
    penalty = np.full(Xb.shape[1], float(l2))
    penalty[0] = 0.0
    for _ in range(max_iter):
        eta = Xb @ beta
        p = 1.0 / (1.0 + np.exp(-eta))
        grad = Xb.T @ (y - p) - penalty * beta
        hess = (Xb * (p * (1 - p))[:, None]).T @ Xb + np.diag(penalty) + 1e-10 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


def _folds(log: BroadcastLog, folds, n_folds: int, seed: int) -> tuple[np.ndarray, list]:
    """[R] fold id of each poll and the fold ids: ``folds`` as given, else
    :func:`~bda_jax.audit.tier_stratified_folds` over the log's problems."""
    if folds is None:
        f = tier_stratified_folds(log.problem, log.tier, n_folds=n_folds, seed=seed)
    else:
        f = np.asarray(folds)
        if f.shape != (log.n_polls,) or not np.issubdtype(f.dtype, np.integer):
            raise DataError(f"folds must be [R] = [{log.n_polls}] integers", field="folds")
    return f, np.unique(f).tolist()


def learned_router_probabilities(log: BroadcastLog, *, score=None, seed: int = 0,
                                 n_folds: int = 2, l2: float = 1.0, folds=None) -> np.ndarray:
    """[R] cross-fitted P(correct) of each valid candidate (NaN for invalid rows), the learned
    router of Table 1.

    An L2-penalized logistic regression (``l2`` on standardized features, intercept free) of
    ``correct`` on the features of :func:`_router_features` (stated score, missing-score flag,
    gap to the block's best valid score, answer-cluster share, plurality flag, agent one-hot),
    cross-fitted: problems are split by
    :func:`~bda_jax.audit.tier_stratified_folds` (tier-stratified, ``n_folds``,
    ``seed``) — or ``folds`` [R], the fold id of each poll, if given (``audit_broadcast``
    passes the folds its calibration uses) — and each fold is predicted by a model fitted on
    the other folds. Deterministic.
    """
    s = _score(log, score)
    X = _router_features(log, s)
    folds, fold_ids = _folds(log, folds, n_folds, seed)
    out = np.full(log.n_polls, np.nan)
    y = log.correct.astype(np.float64)
    for k in fold_ids:
        train, test = log.valid & (folds != k), log.valid & (folds == k)
        if not test.any():
            continue
        if not train.any():
            raise DataError(f"fold {k}: no valid candidate outside it to fit the learned router "
                            "on", field="n_folds")
        mu = X[train].mean(0)
        sd = X[train].std(0)
        sd = np.where(sd > 0, sd, 1.0)
        beta = _fit_logistic((X[train] - mu) / sd, y[train], l2)
        eta = beta[0] + ((X[test] - mu) / sd) @ beta[1:]
        out[test] = 1.0 / (1.0 + np.exp(-eta))
    return out


def router_block_success(log: BroadcastLog, router: str, *, score=None, seed: int = 0,
                         n_folds: int = 2, l2: float = 1.0, folds=None,
                         answer_cluster=None) -> np.ndarray:
    """[B] expected success of a router in each block (0 where no valid candidate), Table 1.

    Picking an invalid candidate scores 0; ties are averaged over exactly (no sampling):

    * ``runtime_argmax``: the runtime rule replayed on ``score`` — the largest score over all
      polled agents, first listed wins ties (:func:`runtime_argmax`);
    * ``top_confidence_tie_random``: a uniform pick among all agents tied at the largest score;
    * ``random_valid``: a uniform pick among the valid candidates (= their share correct);
    * ``majority_vote``: the answer cluster with the most valid candidates; tied clusters are
      picked uniformly, each cluster once;
    * ``confidence_weighted_vote``: the answer cluster with the largest sum of stated scores of
      its valid candidates (missing scores add 0; sums compared after rounding to 1e-9); ties
      as above;
    * ``learned``: the valid candidate with the largest cross-fitted P(correct)
      (:func:`learned_router_probabilities`; ``seed``, ``n_folds``, ``l2``, ``folds``); ties
      uniform;
    * ``oracle``: 1 if any valid candidate is correct.

    Answer clusters (the two votes only): ``answer_cluster`` [R], a hashable label per poll
    (read on valid candidates), e.g. the class of a semantic-equivalence judge that puts "1/2"
    and "0.5" together; default: the normalized candidate, i.e. exact match. A picked
    cluster's success is the mean correctness of its valid candidates (a member drawn
    uniformly), which is its one label when the cluster is label-consistent.
    """
    if router not in ROUTERS:
        raise DataError(f"unknown router {router!r}; expected one of {', '.join(ROUTERS)}",
                        field="router")
    s = _score(log, score)
    gain = log.padded(log.correct.astype(np.float64), 0.0)
    valid = log.padded(log.valid, False)
    present = log.padded(np.ones(log.n_polls, bool), False)
    if router == "runtime_argmax":
        pick = runtime_argmax(log, s)
        return np.bincount(log.block, weights=pick & log.correct,
                           minlength=log.n_blocks).astype(np.float64)
    if router == "top_confidence_tie_random":
        return _expected_top(log.padded(np.where(np.isnan(s), -np.inf, s), -np.inf), present,
                             gain)
    if router == "random_valid":
        return _expected_top(np.zeros(valid.shape), valid, gain)
    if router == "oracle":
        return (_count(log, log.correct) > 0).astype(np.float64)
    if router == "learned":
        p = learned_router_probabilities(log, score=s, seed=seed, n_folds=n_folds, l2=l2,
                                         folds=folds)
        return _expected_top(log.padded(np.nan_to_num(p, nan=-np.inf), -np.inf), valid, gain)
    same = _answer_groups(log, answer_cluster)
    size = same.sum(2).astype(np.float64)
    group_weight = np.divide(1.0, size, out=np.zeros(size.shape), where=size > 0)
    if router == "majority_vote":
        support = size
    else:
        S = log.padded(np.where(np.isnan(s), 0.0, s), 0.0)
        support = np.round((same * S[:, None, :]).sum(2), _VOTE_DECIMALS)
    return _expected_top(support, valid, gain, group_weight)


class RouterResult(NamedTuple):
    """Expected success of one router (Table 1): ``value = numerator / denominator`` with the
    denominator the all-routeable blocks (or all, ``over="all"``), and the oracle's value minus
    it (fields in :class:`~bda_jax.audit.Ratio`'s order, then the gap)."""

    value: float
    numerator: float
    denominator: float
    gap_to_oracle: float


def router_counterfactuals(log: BroadcastLog, *, routers: Sequence[str] = ROUTERS, score=None,
                           over: str = "routeable", seed: int = 0, n_folds: int = 2,
                           l2: float = 1.0, weights=None, folds=None,
                           answer_cluster=None) -> dict[str, RouterResult]:
    """Table 1: expected success and gap to oracle of each router of :func:`router_block_success`
    over all-routeable blocks (``over="all"``: every block). For a CI, pass
    ``router_block_success(...)`` and the denominator terms to
    :func:`~bda_jax.audit.ratio_bootstrap`; for the gap's CI, the per-block
    difference oracle - router over the same denominator (``audit_broadcast`` does both on
    the shared resamples).
    """
    if over not in ("routeable", "all"):
        raise DataError(f"over must be 'routeable' or 'all', got {over!r}", field="over")
    w = _weights(log, weights)
    den = (_count(log, log.valid) > 0).astype(np.float64) if over == "routeable" \
        else np.ones(log.n_blocks)
    oracle = _ratio(router_block_success(log, "oracle"), den, w).value
    out = {}
    for name in routers:
        r = _ratio(router_block_success(log, name, score=score, seed=seed, n_folds=n_folds,
                                        l2=l2, folds=folds, answer_cluster=answer_cluster),
                   den, w)
        out[name] = RouterResult(*r, oracle - r.value)
    return out


# ============================================================================ sanity checks
def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.Generator(
        np.random.PCG64(seed))


def permute_scores_within_blocks(log: BroadcastLog, seed, *, score=None) -> np.ndarray:
    """[R] scores shuffled uniformly within each block, over all polled agents (valid or not,
    missing scores included) — the permutation null of Table 15, construction A. ``seed``: an int
    or a ``numpy.random.Generator``."""
    s = _score(log, score)
    order = np.lexsort((_rng(seed).random(log.n_polls), log.block))
    return s[order]


def noisy_oracle_scores(log: BroadcastLog, sigma: float, seed) -> np.ndarray:
    """[R] synthetic scores ``clip(y + N(0, sigma^2), 0, 1)`` with ``y`` = 1 for correct valid
    candidates, else 0 (Table 15, construction B; docs/audit.md). Clipping at 0 and 1 creates ties."""
    if not (isinstance(sigma, (int, float, np.floating)) and sigma >= 0):
        raise DataError(f"sigma must be a non-negative number, got {sigma!r}", field="sigma")
    y = log.correct.astype(np.float64)
    return np.clip(y + sigma * _rng(seed).standard_normal(log.n_polls), 0.0, 1.0)


class SanityCheck(NamedTuple):
    """Metrics recomputed on ``n`` synthetic score sets (each [n]); the selection is the runtime
    argmax replayed on each set. :meth:`summary` gives (mean, standard deviation) per metric,
    as Table 15 reports them."""

    pcca: np.ndarray
    ctr: np.ndarray
    cra: np.ndarray
    hrwp: np.ndarray

    def summary(self) -> dict[str, tuple[float, float]]:
        return {name: (float(np.nanmean(v)), float(np.nanstd(v)))
                for name, v in self._asdict().items()}


def _sanity(log: BroadcastLog, draw: Callable[[np.random.Generator], np.ndarray], seed,
            n: int, n_name: str) -> SanityCheck:
    n = positive_int(n, n_name)
    out = {k: np.empty(n) for k in SanityCheck._fields}
    for r, child in enumerate(np.random.SeedSequence(seed).spawn(n)):
        s = draw(np.random.Generator(np.random.PCG64(child)))
        sel = runtime_argmax(log, s)
        out["pcca"][r] = pcca(log, score=s).value
        out["ctr"][r] = ctr(log, score=s).value
        out["cra"][r] = cra(log, selected=sel).value
        out["hrwp"][r] = hrwp(log, selected=sel).value
    return SanityCheck(**out)


def permutation_null_pcca(log: BroadcastLog, seed: int = 0, n_perm: int = 50) -> SanityCheck:
    """Table 15 construction A: shuffle the scores within every block ``n_perm`` times and
    recompute PCCA, CTR, CRA and HRWP; PCCA's expectation under the shuffle is exactly 0.5.
    Replicate ``r`` uses ``SeedSequence(seed).spawn(n_perm)[r]``."""
    return _sanity(log, lambda g: permute_scores_within_blocks(log, g), seed, n_perm, "n_perm")


def noisy_oracle_check(log: BroadcastLog, sigma: float, seed: int = 0,
                       n_rep: int = 50) -> SanityCheck:
    """Table 15 construction B: replace the scores by :func:`noisy_oracle_scores` ``n_rep`` times
    (σ = .05: PCCA 1 and CTR 0; σ = .5: PCCA ≈ .91, tie rate ≈ .023)."""
    return _sanity(log, lambda g: noisy_oracle_scores(log, sigma, g), seed, n_rep, "n_rep")


# ================================================================================ bootstrap
def routing_audit(log: BroadcastLog, *, metrics: Sequence[str] = METRICS, seed: int = 0,
                  n_boot: int = 2000, level: float = 0.95, over: str = "routeable",
                  eligible: str = "contested",
                  clusters=None) -> dict[str, BootstrapCI]:
    """Table 6: each routing metric with its explicit numerator, denominator and problem-cluster
    bootstrap CI (:func:`~bda_jax.audit.ratio_bootstrap` on :func:`metric_terms`;
    every metric uses the same resamples). ``clusters`` [B] overrides ``log.block_cluster``."""
    cl = log.block_cluster if clusters is None else np.asarray(clusters)
    return {m: ratio_bootstrap(*metric_terms(log, m, over=over, eligible=eligible), cl, seed,
                               n_boot, level) for m in metrics}
