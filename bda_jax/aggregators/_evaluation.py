"""The evaluation harness: every arm on identical outer folds, the paper's metric row per arm and
paired (cluster) bootstraps against a reference arm ([BDA] §5, Appendix D.1-D.2; docs/evaluation.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import jax
import numpy as np

from ._bda import BDA, BDAAuto, Majority
from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                        TemperatureScaled, VerbalizedVote)
from .._core.conformal import (check_alpha, check_set_method, conformal_scores,
                               conformal_threshold, prediction_sets, set_coverage)
from .._core.counts import Counts, tally
from .._core.decisions import decide
from ._dawid_skene import CouncilDawidSkene
from .._core.errors import DataError
from ..metrics import brier_mc, correctness, paired_bootstrap, summary
from .._core.selection import make_folds

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
    "bda-auto": (lambda seed: BDAAuto(seed=seed), True),
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
    auroc, n; with answer sets also coverage, mean_set_size, empty_sets). ``bootstrap``: per
    arm, paired bootstraps against ``reference`` of accuracy and multiclass Brier (clusters
    resampled whole). ``selected``: per arm and outer fold, the fitted hyperparameters where the
    arm has any (``bda-auto``: the winning ``variant``, its ``margin`` and every variant's
    ``brier.<variant>``, then the winner's own). ``methods``: per LLM-method arm, whether it
    reads the council, gamma, its parse report, calibration note and call ledger. ``sets``: the
    answer-set settings (``alpha``, ``method``, ``fraction``), None without sets. Not
    serialized: ``folds`` [T] (serialized as a list), ``proba`` (arm -> [T, K] out-of-fold
    probabilities), ``pred`` (arm -> [T] the decisions scored: the arm's own ``predict``),
    ``confidence`` (arm -> [T] the top-label confidence scored, for the arms with their own,
    e.g. the recalibration wrappers' unclipped one) and ``answer_sets`` (arm -> [T, K] bool).
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
    pred: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    confidence: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    sets: dict | None = None
    answer_sets: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "reference": self.reference,
                "label_budget": self.label_budget, "seed": self.seed, "table": self.table,
                "bootstrap": self.bootstrap, "selected": self.selected,
                "methods": self.methods, "sets": self.sets, "folds": self.folds.tolist()}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), allow_nan=False)


def fitted_hyperparameters(model) -> dict | None:
    """The fitted hyperparameters worth reporting (plain Python values), or None. A
    :class:`BDAAuto` reports ``variant`` (the winner), ``margin`` (the runner-up's inner-CV
    Brier minus the winner's; None with one variant), ``brier.<variant>`` for every variant,
    then the winner's own hyperparameters."""
    out = {}
    if hasattr(model, "base_"):
        out.update({f"base.{k}": v for k, v in (fitted_hyperparameters(model.base_) or {}).items()})
    if isinstance(model, BDAAuto) and hasattr(model, "variant_"):
        margin = float(model.margin_)
        out.update({"variant": model.variant_, "margin": margin if np.isfinite(margin) else None})
        out.update({f"brier.{v}": float(b) for v, b in zip(model.variants, model.variant_brier_)})
        out.update(fitted_hyperparameters(model.best_) or {})
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


class _SetSpec(NamedTuple):
    """Answer-set settings of :func:`evaluate` (checked)."""

    alpha: float
    method: str
    fraction: float


class _OutOfFold(NamedTuple):
    """One arm out of fold: ``proba`` [T, K], ``pred`` [T] (the fold models' ``predict``),
    ``confidence`` [T] (the fold models' own ``decide`` confidence) or None where the arm has
    none, ``selected`` (fitted hyperparameters per fold), ``sets`` [T, K] bool or None."""

    proba: np.ndarray
    pred: np.ndarray
    confidence: np.ndarray | None
    selected: list
    sets: np.ndarray | None


def _set_key(seed: int, fold: int):
    """The key of outer fold ``fold``'s answer sets (calibration split and APS uniforms)."""
    return jax.random.fold_in(jax.random.key(seed), fold)


def _conformal_sets(proba, counts: Counts, cal, test, spec: _SetSpec, k_scores, k_sets):
    """Split-conformal sets [len(test), K] of the ``test`` tasks, calibrated on the ``cal``
    tasks, from probabilities ``proba`` [T, K] over every task. Scored and thresholded on the
    whole task axis (gold hidden outside ``cal``, so the other tasks score +inf and are left
    out): one compiled shape per data set, whatever the fold sizes."""
    gold, gm = np.asarray(counts.gold), np.asarray(counts.gold_missing)
    mask = np.asarray(counts.mask)
    is_cal = np.zeros(gold.shape, bool)
    is_cal[cal] = True
    scores = np.asarray(conformal_scores(proba, np.where(is_cal, gold, -1), mask,
                                         method=spec.method, gold_missing=is_cal & gm,
                                         key=k_scores))[cal]
    sets = prediction_sets(proba, mask, conformal_threshold(scores, spec.alpha),
                           method=spec.method, key=k_sets)
    return np.asarray(sets)[test]


def _fold_sets(arm, model, proba, data, counts, test, w, spec: _SetSpec, key) -> np.ndarray:
    """Answer sets [len(test), K] of one outer fold's ``test`` tasks, calibrated on labeled
    tasks of the fold's training part only (``w`` > 0; docs/evaluation.md, "Answer sets").
    ``model``: the fold's fitted model, ``proba`` [T, K] its probabilities (None for
    ``ds-em``, fitted on the test tasks alone).

    * A supervised arm: a seeded ``fraction`` of the training labels is held out, a fresh
      model fitted on the rest, and that model's probabilities calibrate on the held-out share
      and give the sets (no calibration label reaches the posterior it calibrates; the split
      of :meth:`Aggregator.predict_set`).
    * ``ds-em`` reads no gold and is fitted on its deployment pool: a fresh EM on the test tasks
      and the calibration tasks (every training label) together scores both (a fit symmetric
      in the tasks it pools, so calibration and test scores stay exchangeable).
    * Any other arm that reads no gold: its probabilities, calibrated on every training label.
    """
    k_split, k_scores, k_sets = jax.random.split(key, 3)
    pool = np.flatnonzero(w > 0)             # fold_weights: labeled training tasks only
    if not pool.size:
        raise DataError("an outer fold has no labeled training task to calibrate answer sets "
                        "on", field="set_alpha")
    if arm == "ds-em":
        both = np.concatenate([test, pool])
        em = make_arm(arm, model.seed).fit(counts.take(both))
        full = np.zeros(counts.mask.shape, np.float64)
        full[both] = em.predict_proba(counts.take(both))
        return _conformal_sets(full, counts, pool, test, spec, k_scores, k_sets)
    if isinstance(arm, str) and not is_supervised(arm):
        return _conformal_sets(proba, counts, pool, test, spec, k_scores, k_sets)
    n_cal = int(round(spec.fraction * pool.size))
    if not 1 <= n_cal < pool.size:
        raise DataError(f"{pool.size} labeled training task(s) in an outer fold: too few to "
                        f"hold out a calibration share of {spec.fraction} (set_fraction)",
                        field="set_fraction")
    held = pool[np.asarray(jax.random.permutation(k_split, pool.size))[:n_cal]]
    refit = np.asarray(w, np.float32).copy()
    refit[held] = 0.0
    copy = make_arm(arm, model.seed) if isinstance(arm, str) else arm(model.seed)
    copy.fit(data, refit)
    return _conformal_sets(np.asarray(copy.predict_proba(data), np.float64), counts, held, test,
                           spec, k_scores, k_sets)


def _out_of_fold(arm, data, outer, weights, seed, sets: _SetSpec | None = None) -> _OutOfFold:
    """One arm (a name, or a factory ``seed -> model`` for a supervised custom arm) out of fold:
    per outer fold a fresh model fitted on the fold's training weights (an unsupervised arm on
    no label; ``ds-em`` on the test fold's own votes) scores the test fold. ``data``: Counts or
    traces (traces let an arm re-tally, e.g. a propose-only reliability basis). ``sets``: also
    answer sets (:func:`_fold_sets`)."""
    counts = data if isinstance(data, Counts) else tally(data)
    T, K = counts.mask.shape
    proba = np.zeros((T, K), np.float64)
    pred = np.zeros(T, np.int32)
    conf = np.full(T, np.nan)
    own_confidence = False
    answer_sets = None if sets is None else np.zeros((T, K), bool)
    selected = []
    for f, w in enumerate(weights):
        test = np.flatnonzero(outer == f)
        model = make_arm(arm, seed) if isinstance(arm, str) else arm(seed)
        full = None                                  # the fold model's [T, K] probabilities
        if arm == "ds-em":
            part = counts.take(test)
            model.fit(part)
            proba[test] = model.predict_proba(part)
            pred[test] = model.predict(part)
        else:
            if not isinstance(arm, str) or is_supervised(arm):
                model.fit(data, w)
            else:
                model.fit(data)
            if hasattr(model, "decide"):            # its own (e.g. recalibrated) confidence
                d = model.decide(data)
                full, index = np.asarray(d.proba, np.float64), np.asarray(d.index)
                conf[test] = np.asarray(d.confidence)[test]
                own_confidence = True
            else:
                full = np.asarray(model.predict_proba(data), np.float64)
                index = np.asarray(model.predict(data))
            proba[test], pred[test] = full[test], index[test]
        if sets is not None:
            answer_sets[test] = _fold_sets(arm, model, full, data, counts, test, w, sets,
                                           _set_key(seed, f))
        selected.append(fitted_hyperparameters(model))
    return _OutOfFold(proba, pred, conf if own_confidence else None, selected, answer_sets)


def _method_sets(proba, counts: Counts, outer, weights, seed, spec: _SetSpec) -> np.ndarray:
    """Answer sets [T, K] of an LLM method's probabilities (it reads no label): per outer
    fold, split conformal calibrated on all of the fold's training labels (``weights`` > 0)."""
    out = np.zeros(counts.mask.shape, bool)
    for f, w in enumerate(weights):
        test, cal = np.flatnonzero(outer == f), np.flatnonzero(w > 0)
        if not cal.size:
            raise DataError(f"outer fold {f} has no labeled training task to calibrate answer "
                            "sets on", field="set_alpha")
        _, k_scores, k_sets = jax.random.split(_set_key(seed, f), 3)
        out[test] = _conformal_sets(np.asarray(proba, np.float64), counts, cal, test, spec,
                                    k_scores, k_sets)
    return out


def _set_spec(set_alpha, set_method, set_fraction) -> _SetSpec | None:
    if set_alpha is None:
        return None
    alpha = check_alpha(set_alpha)
    check_set_method(set_method)
    if isinstance(set_fraction, bool) or not isinstance(set_fraction, (int, float)) or \
            not 0.0 < set_fraction < 1.0:
        raise DataError(f"set_fraction must be a number in (0, 1), got {set_fraction!r}",
                        field="set_fraction")
    return _SetSpec(alpha, set_method, float(set_fraction))


def evaluate(data, arms: Sequence[str], folds=5, label_budget: int | None = None, seed: int = 0,
             *, reference: str = "majority", n_resamples: int = 10_000,
             set_alpha: float | None = None, set_method: str = "lac", set_fraction: float = 0.5,
             **tally_options) -> Evaluation:
    """Evaluate ``arms`` on identical outer folds (docs/evaluation.md; [BDA] Appendix D.1).

    ``data``: traces or :class:`Counts`. ``folds``: number of outer folds (grouped by cluster,
    stratified by gold where classes repeat; :func:`make_folds`) or an explicit [T] fold id per
    task. For each outer fold every supervised arm is fitted on the labeled tasks of the other
    folds — or, with ``label_budget`` (the paper's 25), on that many labeled tasks drawn (seeded)
    from them — and predicts the held-out fold; unsupervised arms read no label (DS-EM is fitted
    on the held-out fold's own votes, its deployment pool). Every arm is fitted by its class, so
    a BDA arm's out-of-fold predictions are exactly those of ``BDA(arm, seed=seed).fit(data,
    w)`` on the fold's weights ``w`` (:func:`fold_weights`; inner folds from ``seed``), and an
    ``iso:``/``temp:`` wrapper recalibrates those very decisions. Each arm is scored on its own
    decisions (``predict``, exact ties broken at random from ``seed``) and, where it has one,
    its own top-label confidence (``decide``: the recalibration wrappers' unclipped calibrated
    confidence), which ECE, top-label Brier and AUROC read; multiclass Brier and NLL read the
    probabilities. The reference arm is evaluated too if not listed.

    Candidate prior pi0 ([BDA] Eqs. 1 and 4): ``"bda-confusion"`` fits it on each training part's
    gold (Appendix D.6; :func:`~bda_jax.class_log_prior`, refitted inside every inner fold too,
    so no held-out label reaches it), ``"bda-confusion-uniform"`` is the same arm with a uniform
    pi0, and the one-coin arms keep pi0 uniform (§3); a one-coin arm with a fitted pi0 is
    ``BDA(arm, class_prior=True)``, fitted directly. ``"bda-auto"`` (:class:`BDAAuto`) chooses,
    per outer training part, among the shared, per-agent, tempered and confusion arms by their
    inner-fold Brier on that part's labels alone.

    Answer sets (``set_alpha``, a miscoverage level in (0, 1); default None: none): per outer
    fold, split conformal sets with ``set_method`` (``"lac"`` / ``"aps"``;
    docs/answer-sets.md) calibrated on labeled tasks of that fold's training part only
    (with ``label_budget``, on its drawn labels). A supervised arm is refitted without a seeded
    ``set_fraction`` of them, which calibrate the refitted copy; an arm that reads no label is
    calibrated on all of them (DS-EM refitted on the test and calibration tasks together). The
    table gains ``coverage`` (share of labeled tasks whose gold is in its set), ``mean_set_size``
    and ``empty_sets`` (share of empty sets), ``Evaluation.sets`` records the settings.

    An arm may also be an LLM method (:class:`bda_jax.council.LLMMethod`, or a stored
    :class:`bda_jax.council.MethodRun`): any object with a ``name``, ``reads_council`` and
    ``method_proba(data, counts) -> (proba [T, K], pred [T])``. It is scored on the same tasks
    with its own decisions (``pred`` -1: no commitment, scored wrong) and enters the paired
    bootstrap like any arm; a non-reading method is handed the questions only
    (:meth:`~bda_jax.council.LLMMethod.tasks`).
    """
    counts = data if isinstance(data, Counts) else tally(data, **tally_options)
    T = counts.N.shape[0]
    spec = _set_spec(set_alpha, set_method, set_fraction)
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

    proba, preds, confidence, selected, answer_sets = {}, {}, {}, {}, {}
    for name in arms:
        oof = _out_of_fold(name, counts, outer, weights, seed, spec)
        proba[name], preds[name] = oof.proba, oof.pred
        if oof.confidence is not None:
            confidence[name] = oof.confidence
        if oof.sets is not None:
            answer_sets[name] = oof.sets
        if any(s is not None for s in oof.selected):
            selected[name] = oof.selected
    method_info = {}
    for name, method in methods.items():     # an LLM method reads no label: no folds to fit
        proba[name], preds[name] = method.method_proba(data, counts)
        preds[name] = np.asarray(preds[name])
        if spec is not None:
            answer_sets[name] = _method_sets(np.asarray(proba[name]), counts, outer, weights,
                                             seed, spec)
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
        row.update(summary(proba[name], gold, gm, mask, key=key, pred=preds.get(name),
                           confidence=confidence.get(name)))
        if spec is not None:
            cov = set_coverage(answer_sets[name], gold, gm)
            row.update(coverage=cov["coverage"], mean_set_size=cov["mean_size"],
                       empty_sets=cov["empty"])
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
                      method_info, preds, confidence, None if spec is None else spec._asdict(),
                      answer_sets)


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
        oof = _out_of_fold(arm, counts, outer, weights, seed)
        s = correctness(oof.proba, gold, gm, mask, key=key, pred=oof.pred)
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
        oof = _out_of_fold(factory, data, outer, weights, seed)
        row = {"key": seat_key, "basis": basis}
        row.update(summary(oof.proba, gold, gm, mask, key=key, pred=oof.pred))
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
