"""Control studies of the adversarial suite ([BDA] Appendix F.5, F.9, F.11,
F.12, F.14; Tables 14, 15, 17, 18 and the weak-seat paragraph of F.14).

Each study is a function with a seed that returns a :class:`ControlStudy`: a tidy ``table`` (a
list of flat dict rows, strict JSON), the ``plot`` data for its figure, the ``params`` it ran
with, and, where a study has a second table, ``tables`` by name. All evaluation goes through
:func:`~bda_jax.evaluate` (the same outer folds for every basis or labeling of one trace set, so
a difference between two bases is never a difference between two fold draws); the recalibrated
arms of F.9 are fitted on its folds and training weights and scored on their own confidences.

* :func:`label_permutation_control` (F.11, Table 17): per-task random relabeling of the candidate
  slots (``tally(permute_candidates=...)``). Arms that never compare labels across tasks (the
  one-coin, the stacker, plurality) must not move; the confusion model loses whatever it learned
  from label identity.
* :func:`round0_truncation` (F.5, Table 14): every arm refit on round-0-truncated traces
  (``tally(max_round=0)``) against the full trace. Under a coalition with contagion the rounds
  import corrupted evidence, so round-0 weighting can be the more accurate basis.
* :func:`recalibration_under_attack` (F.9, Table 15): each arm and its leak-free isotonic
  recalibration (``iso:<arm>``, fitted on the harness's folds and labels) on clean and attacked
  councils, on a label budget; the recalibrated arm keeps the arm's decisions and is scored on
  its calibrated confidence.
* :func:`policy_shift` (F.12, Table 18): fit on councils under one adversary wrong-answer policy,
  deploy on disjoint questions under another, against within-policy controls.
* :func:`weak_seat_swap` (F.14): a genuine seat replaced by an honestly mediocre seat and by a
  partially adversarial one; accuracy per arm and each seat's fitted one-coin weight.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import jax
import numpy as np

from .._core.counts import Counts, tally
from .._core.errors import ArtifactError, DataError
from .._core.fitting import fit_confusion, prior_from_reliability, reliability
from .._core.selection import make_folds
from ..aggregators import evaluate, fold_weights, is_supervised, make_arm
from ..metrics import accuracy, brier_mc, brier_top, correctness, ece, summary
from ..simulate import simulate_council

__all__ = ["ControlStudy", "label_permutation_control", "round0_truncation",
           "recalibration_under_attack", "policy_shift", "weak_seat_swap", "onecoin_weight",
           "expected_accuracy", "PAPER_RELIABILITIES"]

SCHEMA_VERSION = 1
#: The paper's binary regime ([BDA] §5): three seats, move-level reliabilities .74/.68/.68.
PAPER_RELIABILITIES = (0.74, 0.68, 0.68)
_METRICS = ("accuracy", "ece_ew", "brier_mc")


@dataclass
class ControlStudy:
    """Result of a control study.

    ``study``: its name. ``table``: tidy rows (one observation per row, flat JSON values).
    ``plot``: the data of its figure. ``params``: the settings it ran with (seeds included).
    ``tables``: further tables by name (e.g. the per-seat weights of :func:`weak_seat_swap`).
    """

    study: str
    table: list[dict]
    plot: dict
    params: dict
    tables: dict[str, list[dict]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "study": self.study, "params": self.params,
                "table": self.table, "tables": self.tables, "plot": self.plot}

    @classmethod
    def from_json(cls, data: dict) -> "ControlStudy":
        """Inverse of :meth:`to_json` (refuses another schema version)."""
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise ArtifactError(f"not a control study of schema version {SCHEMA_VERSION}",
                                field="schema_version")
        return cls(data["study"], data["table"], data["plot"], data["params"], data["tables"])

    def row(self, **match) -> dict:
        """The one row of ``table`` whose fields equal ``match`` (KeyError if none or several)."""
        rows = [r for r in self.table if all(r.get(k) == v for k, v in match.items())]
        if len(rows) != 1:
            raise KeyError(f"{len(rows)} rows match {match}")
        return rows[0]


# ----------------------------------------------------------------------------- helpers

def _outer(counts: Counts, folds, seed):
    if isinstance(folds, (int, np.integer)) and not isinstance(folds, bool):
        return make_folds(counts, int(folds), seed)
    outer = np.asarray(folds)
    if outer.shape != (counts.N.shape[0],) or not np.issubdtype(outer.dtype, np.integer):
        raise DataError("folds must be an int or [T] integer fold ids", field="folds")
    return outer


def _arms(arms, name="arms") -> list[str]:
    if isinstance(arms, str):
        arms = [arms]
    arms = list(dict.fromkeys(arms))
    if not arms:
        raise DataError("at least one arm is needed", field=name)
    for a in arms:
        make_arm(a)                           # validates the name
    return arms


def _by_arm(ev) -> dict[str, dict]:
    return {r["arm"]: r for r in ev.table}


def _metrics(row: dict, suffix: str = "") -> dict:
    return {f"{m}{suffix}": row[m] for m in _METRICS}


def _diff(a, b):
    return None if a is None or b is None else a - b


def _paired_bases(first: Counts, second: Counts, arms, folds, seed, label_budget, n_resamples):
    """Evaluate ``arms`` on two tallies of the same tasks with identical outer folds."""
    outer = _outer(first, folds, seed)
    kw = dict(folds=outer, label_budget=label_budget, seed=seed, n_resamples=n_resamples)
    return outer, evaluate(first, arms, **kw), evaluate(second, arms, **kw)


def expected_accuracy(proba, counts: Counts, rtol: float = 1e-6) -> float:
    """Accuracy with exact ties split instead of broken at random: the mean over labeled tasks
    of 1/m when the gold is one of the m top candidates (within relative ``rtol``), else 0 (a
    gold that is not a candidate scores 0). It is the expectation of the seeded-tie accuracy
    and, unlike it, is unchanged by a relabeling that permutes each task's posterior."""
    p = np.where(np.asarray(counts.mask), np.asarray(proba, np.float64), -np.inf)
    top = p.max(-1, keepdims=True)
    is_top = p >= top - rtol * np.abs(top)
    gold = np.asarray(counts.gold)
    labeled = (gold >= 0) | np.asarray(counts.gold_missing)
    hit = np.take_along_axis(is_top, np.maximum(gold, 0)[:, None], 1)[:, 0] & (gold >= 0)
    share = np.where(hit, 1.0 / is_top.sum(-1), 0.0)
    return float(share[labeled].mean()) if labeled.any() else None


def onecoin_weight(mu, K: int = 2):
    """Log-odds weight of one informative move of a seat whose one-coin reliability is ``mu``:
    ``log(mu (K - 1) / (1 - mu))`` (positive: evidence for what it endorses; negative: against;
    [BDA] Appendix G.1 writes w_i = logit(mu_i) at K = 2).

    >>> [round(float(onecoin_weight(m)), 2) for m in (0.37, 0.5, 0.75)]
    [-0.53, 0.0, 1.1]
    >>> round(float(onecoin_weight(0.25, K=4)), 2)     # chance at K = 4
    0.0
    """
    mu = np.asarray(mu, np.float64)
    return np.log(mu * (K - 1) / (1.0 - mu))


# ----------------------------------------------------------------------------- F.11

def label_permutation_control(traces, arms: Sequence[str] = ("bda-per-agent", "bda-confusion",
                                                             "stacking"),
                              folds=5, seed: int = 0, *, permutation_seed: int | None = None,
                              label_budget: int | None = None,
                              n_resamples: int = 1000) -> ControlStudy:
    """Per-task candidate-label permutation ([BDA] Appendix F.11, Table 17).

    The traces are tallied twice: as given, and with each task's candidate slots randomly
    reordered (``tally(permute_candidates=permutation_seed)``, default ``seed``), which destroys
    cross-task label identity and keeps every within-task relationship. Every arm (plus the
    majority reference) is evaluated on both with the *same* outer folds (those of the original
    tally). Label-indifferent arms (one-coin BDA, stacking, plurality) can only move through
    random tie-breaks and, for the stacker, the per-candidate intercept it drops when tasks no
    longer share a label list; the confusion model loses its label-identity component.

    Table: one row per arm: ``accuracy``, ``ece_ew`` and ``brier_mc`` on the ``_original`` and
    ``_permuted`` labels, ``delta_accuracy`` = permuted - original, and the same for
    :func:`expected_accuracy` (ties split rather than broken at random: it separates a real
    move from tie-break noise, which is large at K > 2 under a coalition, where the one-coin
    often ties the two candidates the coalition did not name). Plot: accuracy per arm,
    original and permuted.
    """
    arms = _arms(arms)
    pseed = seed if permutation_seed is None else int(permutation_seed)
    original = tally(traces)
    permuted = tally(traces, agents=original.agents, permute_candidates=pseed)
    _, ev_a, ev_b = _paired_bases(original, permuted, arms, folds, seed, label_budget,
                                  n_resamples)
    a, b = _by_arm(ev_a), _by_arm(ev_b)
    table = []
    for arm in a:
        ea = expected_accuracy(ev_a.proba[arm], original)
        eb = expected_accuracy(ev_b.proba[arm], permuted)
        row = {"arm": arm, **_metrics(a[arm], "_original"), **_metrics(b[arm], "_permuted"),
               "delta_accuracy": _diff(b[arm]["accuracy"], a[arm]["accuracy"]),
               "expected_accuracy_original": ea, "expected_accuracy_permuted": eb,
               "delta_expected_accuracy": _diff(eb, ea), "n": a[arm]["n"]}
        table.append(row)
    plot = {"arms": [r["arm"] for r in table],
            "original": [r["accuracy_original"] for r in table],
            "permuted": [r["accuracy_permuted"] for r in table]}
    params = {"seed": seed, "permutation_seed": pseed, "folds": _folds_param(folds),
              "label_budget": label_budget, "n_tasks": len(original.N),
              "label_space": "semantic" if original.vocab is not None else "positional"}
    return ControlStudy("label_permutation", table, plot, params)


def _folds_param(folds):
    return int(folds) if isinstance(folds, (int, np.integer)) else "explicit"


# ----------------------------------------------------------------------------- F.5

def round0_truncation(traces, arms: Sequence[str] = ("bda-per-agent", "bda-confusion",
                                                     "stacking"),
                      folds=5, seed: int = 0, *, label_budget: int | None = None,
                      n_resamples: int = 1000) -> ControlStudy:
    """Round-0-truncated against full traces, every arm refit per basis ([BDA] Appendix F.5,
    Table 14).

    The traces are tallied in full and truncated to round 0 (``tally(max_round=0)``, the same
    agent list); each arm is fitted leak-free on each basis with the same outer folds. Round-0
    one-coin BDA is the classical supervised weighted vote (Proposition 1). Under a coalition
    with contagion the later rounds carry the flipped seats' corrupted moves, so round 0 can be
    the more accurate basis. Plurality reads round-0 votes on both bases.

    Table: one row per arm: ``accuracy``, ``ece_ew``, ``brier_mc`` on ``_round0`` and ``_full``,
    and ``delta_accuracy`` = full - round0 (the paper's Delta; negative: the rounds cost
    accuracy). ``tables["seats"]``: each seat's move-level reliability r_i (Eq. 3's estimator,
    all labeled tasks) on each basis: contagion shows as genuine seats whose full-trace r_i
    falls below their round-0 r_i. Plot: accuracy per arm on each basis.
    """
    arms = _arms(arms)
    full = tally(traces)
    round0 = tally(traces, agents=full.agents, max_round=0)
    _, fu, r0 = _paired_bases(full, round0, arms, folds, seed, label_budget, n_resamples)
    fu, r0 = _by_arm(fu), _by_arm(r0)
    table = []
    for arm in fu:
        table.append({"arm": arm, **_metrics(r0[arm], "_round0"), **_metrics(fu[arm], "_full"),
                      "delta_accuracy": _diff(fu[arm]["accuracy"], r0[arm]["accuracy"]),
                      "n": fu[arm]["n"]})
    plot = {"arms": [r["arm"] for r in table],
            "round0": [r["accuracy_round0"] for r in table],
            "full": [r["accuracy_full"] for r in table]}
    rel_full = np.asarray(reliability(full), np.float64)
    rel_r0 = np.asarray(reliability(round0), np.float64)
    seats = [{"seat": i, "agent": a, "reliability_round0": float(rel_r0[i]),
              "reliability_full": float(rel_full[i])} for i, a in enumerate(full.agents)]
    params = {"seed": seed, "folds": _folds_param(folds), "label_budget": label_budget,
              "n_tasks": len(full.N)}
    return ControlStudy("round0_truncation", table, plot, params, {"seats": seats})



# ----------------------------------------------------------------------------- F.9

def _recalibrated_out_of_fold(arm: str, counts: Counts, outer, weights, seed):
    """Decisions [T], calibrated confidences [T] and probabilities [T, K] of the wrapper ``arm``
    (``iso:<arm>``) on each outer test fold, fitted as the harness fits it (``weights`` [F][T]
    from :func:`fold_weights`)."""
    T, K = counts.mask.shape
    index, conf, proba = np.zeros(T, np.int32), np.zeros(T), np.zeros((T, K))
    for f, w in enumerate(weights):
        test = np.flatnonzero(outer == f)
        d = make_arm(arm, seed).fit(counts, w).decide(counts)
        index[test], conf[test], proba[test] = d.index[test], d.confidence[test], d.proba[test]
    return index, conf, proba


def recalibration_under_attack(councils: Mapping[str, Sequence], arms: Sequence[str] = (
        "majority", "bda-per-agent", "bda-confusion", "stacking"), folds=5,
        label_budget: int | None = 25, seed: int = 0, *,
        n_resamples: int = 1000) -> ControlStudy:
    """Each arm and its leak-free isotonic recalibration, on clean and attacked councils ([BDA]
    Appendix F.9, Table 15).

    ``councils``: name -> traces (e.g. ``{"clean": ..., "k=2": ...}``). On each council the
    arms are evaluated with :func:`~bda_jax.evaluate`, and each arm's ``iso:<arm>`` wrapper
    (:class:`~bda_jax.aggregators.IsotonicRecalibrated`) is fitted on the same outer folds and
    the same training tasks (with ``label_budget`` — the paper's 25 — every supervised fit,
    recalibration map included, sees the same drawn labels) and scored as the paper scores it:
    accuracy of its decisions, which are the base's own (recalibration changes only the
    confidence), and ECE_ew and the top-label Brier of its calibrated top-label confidence,
    unclipped (below 1/K where a confident vote is usually wrong, as a coalition majority's).
    The multiclass Brier reads the wrapper's probability vector (``predict_proba``, whose
    top value is clipped to keep the decision its argmax). So recalibration repairs the
    calibration of a flipped vote but cannot restore its accuracy.

    Table: one row per (council, arm): ``accuracy``, ``ece_ew``, ``brier`` (top-label),
    ``brier_mc`` of the arm (the harness's row) and the same with ``_iso``;
    ``decisions_kept``: the fraction of labeled tasks on which the wrapper's decision is the
    harness's decision for the arm (1.0 unless the arm's ``predict`` and the argmax of its
    harness probabilities differ); ``n``. Plot: per council, ECE_ew raw and recalibrated and
    accuracy per arm.
    """
    arms = [a for a in _arms(arms) if not a.startswith(("iso:", "temp:"))]
    if not isinstance(councils, Mapping) or not councils:
        raise DataError("councils must be a non-empty mapping name -> traces", field="councils")
    key = jax.random.key(seed)
    table, plot = [], {}
    for name, traces in councils.items():
        counts = tally(traces)
        result = evaluate(counts, arms, folds=folds, label_budget=label_budget, seed=seed,
                          n_resamples=n_resamples)
        ev = _by_arm(result)
        weights = fold_weights(counts, result.folds, label_budget, seed)
        gold, gm = np.asarray(counts.gold), np.asarray(counts.gold_missing)
        mask = np.asarray(counts.mask)
        labeled = ((gold >= 0) | gm).astype(np.float64)
        rows = []
        for a in arms:
            pred, conf, proba = _recalibrated_out_of_fold(f"iso:{a}", counts, result.folds,
                                                          weights, seed)
            s = correctness(proba, gold, gm, mask, pred=pred)
            harness = np.asarray(correctness(result.proba[a], gold, gm, mask, key=key).pred)
            iso = {"accuracy_iso": float(accuracy(s.correct, labeled)),
                   "ece_ew_iso": float(ece(conf, s.correct, weights=labeled)),
                   "brier_iso": float(brier_top(conf, s.correct, labeled)),
                   "brier_mc_iso": float(brier_mc(proba, gold, gm, mask))}
            rows.append({"council": name, "arm": a, **_metrics(ev[a]), "brier": ev[a]["brier"],
                         **iso, "decisions_kept": float(np.mean((pred == harness)[labeled > 0])),
                         "n": ev[a]["n"]})
        table += rows
        plot[name] = {"arms": arms, "ece_ew": [r["ece_ew"] for r in rows],
                      "ece_ew_iso": [r["ece_ew_iso"] for r in rows],
                      "accuracy": [r["accuracy"] for r in rows],
                      "accuracy_iso": [r["accuracy_iso"] for r in rows]}
    params = {"seed": seed, "folds": _folds_param(folds), "label_budget": label_budget,
              "councils": list(councils)}
    return ControlStudy("recalibration_under_attack", table, plot, params)


# ----------------------------------------------------------------------------- F.12

def policy_shift(policies: Mapping[str, Sequence] | None = None, *,
                 arms: Sequence[str] = ("bda-per-agent", "bda-confusion", "stacking"),
                 seed: int = 0, calibrate_fraction: float = 0.5, n_questions: int = 600,
                 reliabilities: Sequence[float] = PAPER_RELIABILITIES,
                 n_candidates: int = 3, adversaries=(0, 1), seeds_per_question: int = 1,
                 **simulate_options) -> ControlStudy:
    """Wrong-answer policy shift with within-policy controls ([BDA] Appendix F.12, Table 18).

    ``policies``: name -> traces of the *same tasks* (identical task ids, agents and candidate
    lists) under different adversary wrong-answer policies. Default: simulated with
    :func:`~bda_jax.simulate.simulate_council` (``seed``, ``n_questions``, ``reliabilities``,
    ``n_candidates``, ``adversaries``, ``seeds_per_question`` and ``simulate_options``) twice,
    identical except ``adversary_target``: policy ``"A"`` = ``"distractor"`` (the question's
    attractive wrong answer: a random wrong slot per question, no label structure) and ``"B"`` =
    ``"shift"`` (candidate gold + 1 mod K: a label-systematic policy a confusion row can learn).
    The two policies coincide at K = 2, so the default is K = 3.

    The questions (clusters) are split once, seeded: ``calibrate_fraction`` calibrate, the rest
    deploy. For every calibration policy each supervised arm is fitted on its calibration tasks
    (``make_arm(arm, seed).fit(counts, weights)``) and predicts the deployment tasks of every
    policy; unsupervised arms read no label and are fitted on the deployment tasks themselves.

    Table: one row per (calibrate, deploy, arm): ``shifted`` (calibrate != deploy),
    ``accuracy``, ``ece_ew``, ``brier_mc``, ``n``. Plot: per arm, accuracy by ``"cal->dep"``.
    """
    arms = _arms(arms)
    if not 0.0 < calibrate_fraction < 1.0:
        raise DataError(f"calibrate_fraction must be in (0, 1), got {calibrate_fraction!r}",
                        field="calibrate_fraction")
    sim = None
    if policies is None:
        sim = dict(n_questions=n_questions, reliabilities=list(reliabilities),
                   n_candidates=n_candidates, adversaries=_plain(adversaries),
                   seeds_per_question=seeds_per_question, **_json_options(simulate_options))
        policies = {p: simulate_council(seed, n_questions, reliabilities,
                                        n_candidates=n_candidates, adversaries=adversaries,
                                        seeds_per_question=seeds_per_question,
                                        adversary_target=target, **simulate_options)
                    for p, target in (("A", "distractor"), ("B", "shift"))}
    if not isinstance(policies, Mapping) or len(policies) < 2:
        raise DataError("policies must map at least two names to traces", field="policies")
    names = list(policies)
    first = tally(policies[names[0]])
    counts = {names[0]: first}
    for p in names[1:]:
        counts[p] = tally(policies[p], agents=first.agents)
        if counts[p].task_ids != first.task_ids or counts[p].shape != first.shape or \
                counts[p].candidates != first.candidates:
            raise DataError(f"policy {p!r} is not over the same tasks, agents and candidates as "
                            f"{names[0]!r}", field="policies")
    cluster = np.asarray(first.cluster)
    ids = np.unique(cluster)
    if ids.size < 4:
        raise DataError("the policy shift needs at least 4 questions (clusters)", field="policies")
    order = np.random.default_rng(seed).permutation(ids.size)
    n_cal = min(max(int(round(calibrate_fraction * ids.size)), 2), ids.size - 2)
    calibrate = np.isin(cluster, ids[order[:n_cal]])
    deploy = np.flatnonzero(~calibrate)
    key = jax.random.key(seed)

    def score(proba, c):
        take = lambda x: np.asarray(x)[deploy]
        return summary(proba[deploy], take(c.gold), take(c.gold_missing), take(c.mask), key=key)

    table = []
    for arm in arms:
        for cal in names:
            if is_supervised(arm):
                model = make_arm(arm, seed).fit(counts[cal], calibrate.astype(np.float32))
            for dep in names:
                if not is_supervised(arm):
                    model = make_arm(arm, seed)
                    model.fit(counts[dep].take(deploy))
                    proba = np.zeros(counts[dep].mask.shape)
                    proba[deploy] = model.predict_proba(counts[dep].take(deploy))
                else:
                    proba = model.predict_proba(counts[dep])
                s = score(np.asarray(proba, np.float64), counts[dep])
                table.append({"calibrate": cal, "deploy": dep, "shifted": cal != dep,
                              "arm": arm, **_metrics(s), "n": s["n"]})
    plot = {arm: {f"{r['calibrate']}->{r['deploy']}": r["accuracy"]
                  for r in table if r["arm"] == arm} for arm in arms}
    params = {"seed": seed, "calibrate_fraction": calibrate_fraction, "policies": names,
              "n_calibrate_tasks": int(calibrate.sum()), "n_deploy_tasks": int(deploy.size),
              "simulation": sim}
    if sim is not None:
        params["adversary_target"] = {"A": "distractor", "B": "shift"}
    return ControlStudy("policy_shift", table, plot, params)


def _json_options(options: Mapping) -> dict:
    """Simulator options as JSON values (others, e.g. a ``Behavior``, by their repr)."""
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
            for k, v in options.items()}


def _plain(adversaries):
    """JSON form of an ``adversaries`` argument."""
    if adversaries is None:
        return None
    if isinstance(adversaries, Mapping):
        return {str(int(k)): float(v) for k, v in adversaries.items()}
    return [int(s) for s in adversaries]


# ----------------------------------------------------------------------------- F.14

def weak_seat_swap(seed: int = 0, n_questions: int = 600,
                   reliabilities: Sequence[float] = PAPER_RELIABILITIES, *, seat: int = 2,
                   mediocre: float = 0.52, adversary_rate: float | Sequence[float] = 0.5,
                   arms: Sequence[str] = ("majority", "bda-per-agent", "bda-confusion",
                                          "stacking"),
                   folds=5, label_budget: int | None = None, seeds_per_question: int = 1,
                   n_resamples: int = 1000, **simulate_options) -> ControlStudy:
    """A genuine seat swapped for an honestly mediocre seat and for a partially adversarial one
    ([BDA] Appendix F.14, "weak seat" and "near-chance seat").

    Three councils are simulated with the same ``seed`` (so the same questions, difficulties and
    gold answers): ``"original"`` (``reliabilities``), ``"mediocre"`` (seat ``seat`` honest at
    round-0 accuracy ``mediocre``, near chance) and ``"partial-adversary"`` (seat ``seat`` keeps
    its reliability but argues the coalition's wrong answer on a fraction ``adversary_rate`` of
    the tasks: ``adversaries={seat: adversary_rate}``; a sequence of rates gives one council
    ``"partial-adversary@<rate>"`` each). Every arm is evaluated on each (same outer folds:
    the questions are the same). At rate ~0.25 the partially adversarial seat has about the
    mediocre seat's round-0 accuracy (near chance); at 0.5 it is identifiably below chance.

    An honestly mediocre seat is merely uninformative: BDA shrinks its weight toward zero and
    degrades gracefully. A partially adversarial seat is sometimes misleading and also
    challenges (and, with ``contagion``, flips) the others — the regime of the dose-response dip.

    Table: one row per (council, arm): ``accuracy``, ``ece_ew``, ``brier_mc`` and
    ``delta_accuracy`` against the original council. ``tables["seats"]``: one row per (council,
    seat): empirical ``round0_accuracy``; one-coin (BDA per-agent) ``reliability`` r_i, prior
    mean ``mu`` (Eq. 3, the hyperparameters evaluate's nested CV selected) and ``weight`` =
    log(mu (K - 1) / (1 - mu)) per informative move, each the mean over the outer folds' fits;
    ``relative_weight`` = weight / the largest |weight| of the council's other seats; and, with
    ``bda-confusion`` among the arms, ``confusion_weight`` = tau x mean over true answers g of
    log(P_i(g | g) (K - 1) / (1 - P_i(g | g))). Plot: accuracy per arm per council, weights
    per seat per council.
    """
    arms = _arms(arms)
    if "bda-per-agent" not in arms:
        arms.append("bda-per-agent")
    r = [float(x) for x in reliabilities]
    if not 0 <= seat < len(r):
        raise DataError(f"seat must index the {len(r)} seats, got {seat!r}", field="seat")
    weak = list(r)
    weak[seat] = float(mediocre)
    common = dict(seeds_per_question=seeds_per_question, **simulate_options)
    extra_adv = common.pop("adversaries", None)
    if extra_adv is not None:
        raise DataError("weak_seat_swap sets the adversaries itself", field="adversaries")
    rates = ([float(adversary_rate)] if np.ndim(adversary_rate) == 0
             else [float(x) for x in adversary_rate])
    if not rates:
        raise DataError("adversary_rate needs at least one rate", field="adversary_rate")
    councils = {"original": simulate_council(seed, n_questions, r, **common),
                "mediocre": simulate_council(seed, n_questions, weak, **common)}
    roles = {"original": "genuine", "mediocre": "mediocre"}
    for p in rates:
        name = "partial-adversary" if len(rates) == 1 else f"partial-adversary@{p:g}"
        councils[name] = simulate_council(seed, n_questions, r, adversaries={seat: p}, **common)
        roles[name] = "partial-adversary"
    table, seats, plot = [], [], {"councils": list(councils), "accuracy": {}, "weight": {},
                                  "weight_folds": {}}
    outer, base = None, {}
    for name, traces in councils.items():
        counts = tally(traces)
        if outer is None:
            outer = _outer(counts, folds, seed)
        ev = evaluate(counts, arms, folds=outer, label_budget=label_budget, seed=seed,
                      n_resamples=n_resamples)
        rows = _by_arm(ev)
        for arm, row in rows.items():
            if name == "original":
                base[arm] = row["accuracy"]
            table.append({"council": name, "arm": arm, **_metrics(row),
                          "delta_accuracy": _diff(row["accuracy"], base.get(arm)),
                          "n": row["n"]})
            plot["accuracy"].setdefault(arm, []).append(row["accuracy"])
        seat_rows, per_fold = _seat_weights(counts, ev, outer, label_budget, seed)
        for i, sr in enumerate(seat_rows):
            sr.update(council=name, seat=i,
                      role=roles[name] if i == seat else "genuine")
        seats += [{k: sr[k] for k in ("council", "seat", "agent", "role", *_SEAT_COLUMNS)
                   if k in sr} for sr in seat_rows]
        plot["weight"][name] = [sr["weight"] for sr in seat_rows]
        plot["weight_folds"][name] = per_fold
    params = {"seed": seed, "n_questions": n_questions, "reliabilities": r, "seat": seat,
              "mediocre": mediocre, "adversary_rate": rates if len(rates) > 1 else rates[0],
              "folds": _folds_param(folds), "label_budget": label_budget,
              "seeds_per_question": seeds_per_question,
              "simulate_options": _json_options(simulate_options)}
    return ControlStudy("weak_seat_swap", table, plot, params, {"seats": seats})


_SEAT_COLUMNS = ("round0_accuracy", "reliability", "mu", "weight", "relative_weight",
                 "confusion_weight")


def _seat_weights(counts: Counts, ev, outer, label_budget, seed):
    """Per seat, the BDA per-agent fit of each outer fold (evaluate's selected hyperparameters
    and that fold's training tasks), averaged over folds; the confusion weight likewise."""
    weights = fold_weights(counts, outer, label_budget, seed)
    K = int(counts.e.shape[2])
    r_f, mu_f, conf_f = [], [], []
    for f, w in enumerate(weights):
        sel = ev.selected["bda-per-agent"][f]
        r = np.asarray(reliability(counts, w), np.float64)
        prior = prior_from_reliability(r, sel["b"], sel["kappa"], sel["s"])
        r_f.append(r)
        mu_f.append(np.asarray(prior.alpha, np.float64) / sel["s"])
        if "bda-confusion" in ev.selected:
            csel = ev.selected["bda-confusion"][f]
            P = np.asarray(fit_confusion(counts, csel["lambda"], w), np.float64)   # [I, K, K]
            diag = np.clip(np.diagonal(P, axis1=1, axis2=2), 1e-12, 1 - 1e-12)
            conf_f.append(csel["tau"] * np.log(diag * (K - 1) / (1 - diag)).mean(-1))
    r_f, mu_f = np.array(r_f), np.array(mu_f)
    w_f = onecoin_weight(mu_f, K)
    e0 = np.asarray(counts.e0)
    gold = np.asarray(counts.gold)
    voted = e0.sum(-1) > 0                                                    # [T, I]
    hit = np.take_along_axis(e0, np.maximum(gold, 0)[:, None, None], 2)[..., 0] > 0
    hit &= (gold >= 0)[:, None]
    acc0 = (hit & voted).sum(0) / np.maximum(voted.sum(0), 1)
    weight = w_f.mean(0)
    rows = []
    I = weight.size
    for i in range(I):
        others = np.abs(np.delete(weight, i))
        rows.append({"agent": counts.agents[i], "round0_accuracy": float(acc0[i]),
                     "reliability": float(r_f[:, i].mean()), "mu": float(mu_f[:, i].mean()),
                     "weight": float(weight[i]),
                     "relative_weight": (float(weight[i] / others.max())
                                         if others.size and others.max() > 0 else None)})
        if conf_f:
            rows[-1]["confusion_weight"] = float(np.array(conf_f)[:, i].mean())
    return rows, {"weight": w_f.tolist(), "mu": mu_f.tolist()}
