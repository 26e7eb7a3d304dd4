"""The evaluation harness: every arm on identical outer folds, the paper's metric row per arm and
paired (cluster) bootstraps against a reference arm ([BDA] §5, Appendix D.1-D.2; docs/evaluation.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import jax
import numpy as np

from ._bda import BDA, Majority
from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                        TemperatureScaled, VerbalizedVote)
from .._core.counts import Counts, tally
from .._core.decisions import decide
from ._dawid_skene import CouncilDawidSkene
from .._core.errors import DataError
from ..metrics import brier_mc, correctness, paired_bootstrap, summary
from .._core.selection import GRID_COLUMNS, GRIDS, make_folds, select_and_predict

__all__ = ["ARMS", "make_arm", "evaluate", "Evaluation", "decision_flips", "fitted_hyperparameters",
           "fold_weights", "follows_one_seat", "is_supervised", "reliability_ablation",
           "SeatFollowing"]

SCHEMA_VERSION = 1

#: arm name -> (factory(seed), supervised?)
ARMS = {
    "majority": (lambda seed: Majority(seed=seed), False),
    "bda-shared": (lambda seed: BDA("bda-shared", seed=seed), True),
    "bda-per-agent": (lambda seed: BDA("bda-per-agent", seed=seed), True),
    "bda-confusion": (lambda seed: BDA("bda-confusion", seed=seed), True),
    "bda-confusion-uniform": (lambda seed: BDA("bda-confusion", seed=seed, class_prior=False),
                              True),
    "bda-tempered": (lambda seed: BDA("bda-tempered", seed=seed), True),
    "stacking": (lambda seed: LogisticStacking(seed=seed), True),
    "gated-vote": (lambda seed: GatedVote(seed=seed), True),
    "ds-em": (lambda seed: CouncilDawidSkene(seed=seed), False),
    "verbalized": (lambda seed: VerbalizedVote(seed=seed), False),
    "best-member": (lambda seed: BestMember(seed=seed), True),
}


def make_arm(name: str, seed: int = 0):
    """An unfitted aggregator by arm name; ``"iso:<arm>"`` and ``"temp:<arm>"`` wrap any arm in
    leak-free isotonic recalibration or temperature scaling."""
    for prefix, wrapper in (("iso:", IsotonicRecalibrated), ("temp:", TemperatureScaled)):
        if name.startswith(prefix):
            return wrapper(make_arm(name[len(prefix):], seed), seed=seed)
    if name not in ARMS:
        raise DataError(f"unknown arm {name!r}; expected one of {sorted(ARMS)} or iso:/temp: "
                        "wrappers", field="arms")
    return ARMS[name][0](seed)


def is_supervised(name: str) -> bool:
    """Whether arm ``name`` reads gold when fitted (an ``iso:`` / ``temp:`` wrapper always does:
    it recalibrates on labeled tasks)."""
    base = name.split(":")[-1]
    return ARMS[base][1] or ":" in name


@dataclass
class Evaluation:
    """Result of :func:`evaluate` (JSON via :meth:`to_json`).

    ``table``: one row per arm (arm, accuracy, ece_ew, ece_em, brier (top-label), brier_mc, nll,
    auroc, n). ``bootstrap``: per arm, paired bootstraps against ``reference`` of accuracy and
    multiclass Brier (clusters resampled whole). ``selected``: per arm and outer fold, the fitted
    hyperparameters where the arm has any. ``methods``: per LLM-method arm, whether it reads the
    council, gamma, its parse report, calibration note and call ledger. ``folds`` [T] and
    ``proba`` (arm -> [T, K] out-of-fold probabilities; not serialized).
    """

    table: list[dict]
    bootstrap: dict[str, dict]
    selected: dict[str, list]
    folds: np.ndarray
    reference: str
    label_budget: int | None
    seed: int
    proba: dict[str, np.ndarray] = field(repr=False)
    methods: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "reference": self.reference,
                "label_budget": self.label_budget, "seed": self.seed, "table": self.table,
                "bootstrap": self.bootstrap, "selected": self.selected,
                "methods": self.methods, "folds": self.folds.tolist()}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), allow_nan=False)


def fitted_hyperparameters(model) -> dict | None:
    """The fitted hyperparameters worth reporting (plain Python values), or None."""
    out = {}
    if hasattr(model, "base_"):
        out.update({f"base.{k}": v for k, v in (fitted_hyperparameters(model.base_) or {}).items()})
    params = getattr(model, "params_", None)
    if isinstance(params, dict):
        out.update({k: float(v) for k, v in params.items()})
    for attr in ("l2_", "temperature_", "member_", "n_iter_", "converged_"):
        if hasattr(model, attr):
            out[attr.rstrip("_")] = np.asarray(getattr(model, attr)).item()
    return out or None


def fold_weights(counts: Counts, outer, label_budget, seed) -> list[np.ndarray]:
    """Per outer fold, [T] training weights: the labeled tasks of the other folds, or
    ``label_budget`` of them drawn with a seeded generator."""
    labeled = np.asarray((counts.gold >= 0) | counts.gold_missing)
    rng = np.random.default_rng(seed)
    weights = []
    for f in range(int(outer.max()) + 1):
        w = ((outer != f) & labeled).astype(np.float32)
        if label_budget is not None:
            pool = np.flatnonzero(w)
            keep = rng.choice(pool, size=min(label_budget, pool.size), replace=False)
            w = np.zeros_like(w)
            w[keep] = 1.0
        weights.append(w)
    return weights


def _out_of_fold(arm, data, outer, weights, seed):
    """Out-of-fold probabilities [T, K] of one arm (a name, or a factory ``seed -> model`` for a
    supervised custom arm) and its fitted hyperparameters per fold. ``data``: Counts or traces
    (traces let an arm re-tally, e.g. a propose-only reliability basis)."""
    counts = data if isinstance(data, Counts) else tally(data)
    out = np.zeros(counts.mask.shape, np.float64)
    selected = []
    for f, w in enumerate(weights):
        test = np.flatnonzero(outer == f)
        model = make_arm(arm, seed) if isinstance(arm, str) else arm(seed)
        if arm == "ds-em":
            part = counts.take(test)
            out[test] = model.fit(part).predict_proba(part)
        else:
            if not isinstance(arm, str) or is_supervised(arm):
                model.fit(data, w)
            else:
                model.fit(data)
            out[test] = model.predict_proba(data)[test]
        selected.append(fitted_hyperparameters(model))
    return out, selected


def evaluate(data, arms: Sequence[str], folds=5, label_budget: int | None = None, seed: int = 0,
             *, reference: str = "majority", n_resamples: int = 10_000,
             **tally_options) -> Evaluation:
    """Evaluate ``arms`` on identical outer folds (docs/evaluation.md; [BDA] Appendix D.1).

    ``data``: traces or :class:`Counts`. ``folds``: number of outer folds (grouped by cluster,
    stratified by gold where classes repeat; :func:`make_folds`) or an explicit [T] fold id per
    task. For each outer fold every supervised arm is fitted on the labeled tasks of the other
    folds — or, with ``label_budget`` (the paper's 25), on that many labeled tasks drawn (seeded)
    from them — and predicts the held-out fold; unsupervised arms read no label (DS-EM is fitted
    on the held-out fold's own votes, its deployment pool). Decisions break exact ties at random
    from ``seed``. The reference arm is evaluated too if not listed.

    Candidate prior pi0 ([BDA] Eqs. 1 and 4): ``"bda-confusion"`` fits it on each training part's
    gold (Appendix D.6; :func:`~bda_jax.class_log_prior`, refitted inside every inner fold too,
    so no held-out label reaches it), ``"bda-confusion-uniform"`` is the same arm with a uniform
    pi0, and the one-coin arms keep pi0 uniform (§3); a one-coin arm with a fitted pi0 is
    ``BDA(arm, class_prior=True)``, fitted directly.

    An arm may also be an LLM method (:class:`bda_jax.council.LLMMethod`, or a stored
    :class:`bda_jax.council.MethodRun`): any object with a ``name``, ``reads_council`` and
    ``method_proba(data, counts) -> (proba [T, K], pred [T])``. It is scored on the same tasks
    with its own decisions (``pred`` -1: no commitment, scored wrong) and enters the paired
    bootstrap like any arm; a non-reading method is handed the questions only
    (:meth:`~bda_jax.council.LLMMethod.tasks`).
    """
    counts = data if isinstance(data, Counts) else tally(data, **tally_options)
    T = counts.N.shape[0]
    methods = {}
    named = []
    for arm in arms:
        if isinstance(arm, str):
            named.append(arm)
            continue
        if not (hasattr(arm, "method_proba") and isinstance(getattr(arm, "name", None), str)):
            raise DataError(f"an arm is a name or an LLM method (with name and method_proba), "
                            f"got {type(arm).__name__}", field="arms")
        if arm.name in methods:
            raise DataError(f"two method arms are named {arm.name!r}", field="arms")
        methods[arm.name] = arm
    arms = list(dict.fromkeys(named + [reference]))
    for name in arms:
        make_arm(name)                                    # validates every name up front
        if name in methods:
            raise DataError(f"method arm {name!r} shadows the arm of that name", field="arms")
    outer = make_folds(counts, folds, seed) if isinstance(folds, int) else np.asarray(folds)
    if outer.shape != (T,) or not np.issubdtype(outer.dtype, np.integer) or outer.min() < 0:
        raise DataError("folds must be an int or [T] non-negative integer fold ids", field="folds")
    if label_budget is not None and (not isinstance(label_budget, int) or label_budget < 2):
        raise DataError("label_budget must be an integer >= 2", field="label_budget")
    labeled = np.asarray((counts.gold >= 0) | counts.gold_missing)
    weights = fold_weights(counts, outer, label_budget, seed)

    proba, selected = {}, {}
    for name in arms:
        model = make_arm(name)
        if type(model) is BDA:   # the whole nested CV of a BDA arm is one compiled call
            cv = select_and_predict(counts, model.arm, outer, train_weights=np.stack(weights),
                                    class_prior=model.class_prior, seed=seed)
            proba[name] = np.where(counts.mask, np.exp(np.asarray(cv.log_proba, np.float64)), 0.0)
            rows = GRIDS[model.arm]  # report the exact grid values, not their float32 copies
            nearest = np.abs(rows[None] - np.asarray(cv.selected)[:, None]).sum(-1).argmin(1)
            selected[name] = [dict(zip(GRID_COLUMNS[model.arm], map(float, rows[i])))
                              for i in nearest]
            continue
        proba[name], selected[name] = _out_of_fold(name, counts, outer, weights, seed)
        if all(s is None for s in selected[name]):
            del selected[name]
    preds: dict[str, np.ndarray] = {}
    method_info = {}
    for name, method in methods.items():     # an LLM method reads no label: no folds to fit
        proba[name], preds[name] = method.method_proba(data, counts)
        run = getattr(method, "run_", method)
        method_info[name] = {"reads_council": bool(method.reads_council),
                             **({} if run is None else {
                                 "gamma": run.gamma, "parse": run.parse,
                                 "calibration": run.calibration, "ledger": run.ledger})}
    arms = arms + list(methods)

    key = jax.random.key(seed)
    gold, gm, mask = np.asarray(counts.gold), np.asarray(counts.gold_missing), np.asarray(counts.mask)
    table, scored = [], {}
    for name in arms:
        row = {"arm": name}
        row.update(summary(proba[name], gold, gm, mask, key=key, pred=preds.get(name)))
        table.append(row)
        s = correctness(proba[name], gold, gm, mask, key=key, pred=preds.get(name))
        scored[name] = (np.asarray(s.correct)[labeled],
                        np.asarray(brier_mc(proba[name], gold, gm, mask, reduce=False))[labeled])
    clusters = np.asarray(counts.cluster)[labeled]
    bootstrap = {}
    for name in arms:
        if name == reference:
            continue
        acc = paired_bootstrap(key, scored[name][0], scored[reference][0], n_resamples, clusters)
        brier = paired_bootstrap(key, scored[name][1], scored[reference][1], n_resamples,
                                 clusters, higher_is_better=False)
        bootstrap[name] = {"accuracy": acc._asdict(), "brier_mc": brier._asdict()}
    return Evaluation(table, bootstrap, selected, outer, reference, label_budget, seed, proba,
                      method_info)


def decision_flips(traces, arm: str = "bda-per-agent", folds=5, seed: int = 0) -> dict:
    """Do rounds >= 1 change decisions? ([BDA] Table 8, Appendix E.4.)

    The arm is evaluated out of fold on the full traces and on the same traces truncated to
    round 0 (``tally(max_round=0)``), with identical folds and seeded ties. ``fix``: tasks wrong
    on round 0 and right on the full trace; ``break``: the reverse; ``net`` = fix - break and
    ``fix_per_break`` their ratio (None when nothing broke).
    """
    full = tally(traces)
    round0 = tally(traces, agents=full.agents, max_round=0)
    outer = make_folds(full, folds, seed) if isinstance(folds, int) else np.asarray(folds)
    weights = fold_weights(full, outer, None, seed)
    key = jax.random.key(seed)
    gold, gm, mask = np.asarray(full.gold), np.asarray(full.gold_missing), np.asarray(full.mask)
    right = []
    for counts in (round0, full):
        proba, _ = _out_of_fold(arm, counts, outer, weights, seed)
        s = correctness(proba, gold, gm, mask, key=key)
        right.append(np.asarray(s.correct)[np.asarray(s.labeled)] > 0)
    fix = int(np.sum(~right[0] & right[1]))
    brk = int(np.sum(right[0] & ~right[1]))
    return {"arm": arm, "n": int(right[0].size), "fix": fix, "break": brk, "net": fix - brk,
            "fix_per_break": fix / brk if brk else None,
            "accuracy_round0": float(right[0].mean()), "accuracy_full": float(right[1].mean())}


def reliability_ablation(traces, folds=5, seed: int = 0) -> list[dict]:
    """Table 7's reliability-key and estimator-basis ablations of BDA per-agent.

    Rows: the reliability keyed per agent, per force, per agent-and-force (``tally(seat_key=...)``)
    with all moves as the estimator basis, then keyed per agent with propose-only and round-0
    bases. Every row uses the same outer folds; metrics as in :func:`evaluate`'s table.
    """
    full = tally(traces)
    outer = make_folds(full, folds, seed) if isinstance(folds, int) else np.asarray(folds)
    weights = fold_weights(full, outer, None, seed)
    key = jax.random.key(seed)
    gold, gm, mask = np.asarray(full.gold), np.asarray(full.gold_missing), np.asarray(full.mask)
    rows = []
    settings = [("agent", "all"), ("force", "all"), ("agent-force", "all"),
                ("agent", "propose"), ("agent", "round0")]
    for seat_key, basis in settings:
        if basis == "all":
            data = tally(traces, seat_key=seat_key)
            factory = lambda s: BDA("bda-per-agent", seed=s)
        else:
            data = traces
            factory = lambda s, basis=basis: BDA("bda-per-agent", seed=s, basis=basis)
        proba, _ = _out_of_fold(factory, data, outer, weights, seed)
        row = {"key": seat_key, "basis": basis}
        row.update(summary(proba, gold, gm, mask, key=key))
        rows.append(row)
    return rows


class SeatFollowing(NamedTuple):
    """What :func:`follows_one_seat` returns (NumPy arrays over the I seats of ``agents``).

    ``agreement`` [I]: the share of the seat's voted tasks on which the decision is the seat's
    vote (NaN where it never voted); ``n`` [I] those tasks; ``seat_accuracy`` [I]: the seat's
    vote accuracy on its labeled voted tasks (NaN without any); ``accuracy`` [I]: the
    decisions' accuracy on the same labeled tasks, so a follower's ``accuracy`` equals its
    seat's; ``followed``: the seats whose agreement reaches ``threshold``, most agreeing first
    (empty: the aggregator follows no seat; several: seats that always vote alike, e.g. a
    coalition the fit was captured by); ``max_agreement`` (None without votes); ``agents``.
    """

    agreement: np.ndarray
    n: np.ndarray
    seat_accuracy: np.ndarray
    accuracy: np.ndarray
    followed: tuple
    max_agreement: float | None
    agents: tuple


def follows_one_seat(decisions, counts: Counts, *, threshold: float = 0.99,
                     rounds: str = "round0", seed: int = 0) -> SeatFollowing:
    """Does an aggregator just copy one seat? ([BDA] Appendix F.10.)

    The paper's diagnostic of unsupervised DS-EM on a three-seat council: EM can inflate one
    seat's reliability toward 1 and degenerate into "follow that seat" — its decision agreed
    with agent c's vote on 100 % of the clean tasks, and that vote's accuracy was DS-EM's. This
    measures, per seat, the agreement of ``decisions`` with the seat's vote and flags the seat
    whose agreement reaches ``threshold`` (mode capture by a coalition shows the same way: every
    coalition seat is followed).

    ``decisions``: [T] decided slots, or [T, K] probabilities (e.g. ``Evaluation.proba[arm]``),
    decided by argmax with exact ties broken at random from ``seed`` ([BDA] Appendix D.6).
    ``counts``: the tally of the same T tasks. A seat's vote on a task is the candidate it
    endorsed most — in round 0 (``rounds="round0"``, the votes DS-EM reads) or over all rounds
    (``"all"``); a task where the seat endorsed nothing, or two candidates equally often, has no
    vote of that seat. Accuracies count a task whose gold is not a candidate as wrong and leave
    unlabeled tasks out.
    """
    if rounds not in ("round0", "all"):
        raise DataError(f"rounds must be 'round0' or 'all', got {rounds!r}", field="rounds")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or \
            not 0.0 < threshold <= 1.0:
        raise DataError(f"threshold must be in (0, 1], got {threshold!r}", field="threshold")
    mask = np.asarray(counts.mask)
    T = mask.shape[0]
    d = np.asarray(decisions)
    if d.shape == mask.shape and np.issubdtype(d.dtype, np.floating):
        with np.errstate(divide="ignore"):
            log_p = np.where(mask, np.log(d), -np.inf)
        d = np.asarray(decide(jax.random.key(seed), log_p, mask).index)
    if d.shape != (T,) or not np.issubdtype(d.dtype, np.integer) or (d < 0).any() or \
            (d >= mask.shape[1]).any() or not mask[np.arange(T), d].all():
        raise DataError(f"decisions must be [T = {T}] candidate slots or [T, K] probabilities "
                        f"matching the counts, got shape {d.shape}", field="decisions")
    votes = np.asarray(counts.e0 if rounds == "round0" else counts.e)          # [T, I, K]
    votes = np.where(mask[:, None, :], votes, 0)
    top = votes.max(-1)
    single = (top > 0) & ((votes == top[..., None]).sum(-1) == 1)             # [T, I]
    vote = votes.argmax(-1)
    gold, gm = np.asarray(counts.gold), np.asarray(counts.gold_missing)
    labeled = ((gold >= 0) | gm)[:, None] & single
    n = single.sum(0)
    n_lab = labeled.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        agreement = np.where(n > 0, ((vote == d[:, None]) & single).sum(0) / n, np.nan)
        seat_acc = np.where(n_lab > 0, ((vote == gold[:, None]) & labeled).sum(0) / n_lab,
                            np.nan)
        acc = np.where(n_lab > 0, ((d == gold)[:, None] & labeled).sum(0) / n_lab, np.nan)
    agents = tuple(counts.agents) if counts.agents is not None else \
        tuple(f"seat {i}" for i in range(votes.shape[1]))
    seen = np.flatnonzero(np.isfinite(agreement))
    order = seen[np.argsort(-agreement[seen], kind="stable")]       # most agreeing first
    followed = tuple(agents[i] for i in order if agreement[i] >= threshold)
    top_agreement = float(agreement[order[0]]) if order.size else None
    return SeatFollowing(agreement, n, seat_acc, acc, followed, top_agreement, agents)
