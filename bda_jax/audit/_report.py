"""One call for the whole routing audit of a broadcast log ([Audit]; docs/audit.md): routing,
calibration and commitment, each metric with its numerator, denominator and problem-cluster
bootstrap interval, gathered on a Trace-Audit Card (Table 21) plus per-tier tables (Table 10).
:func:`audit_file` does the same for a log file (what ``bda audit`` runs).

:func:`audit_broadcast` runs, on a :class:`~bda_jax.audit.BroadcastLog`:

* **routing** — :func:`~bda_jax.audit.routing_audit` (selected-invalid rate, CRA,
  HRWP, runtime and oracle success, MCR, PCCA, CTR) and the router counterfactuals of Table 1
  (expected success per all-routeable block, and each router's gap to the oracle);
* **calibration** — :func:`~bda_jax.audit.calibration_report` on the valid
  poll candidates with a stated score (raw, temperature, isotonic; cross-fitted over
  tier-stratified problem folds): ECE, Brier, AUROC and mean confidence per method, and the
  candidate accuracy;
* **commitment** (only when the log has speak records) — the speaker's poll candidate in the
  block against its spoken answer: :func:`~bda_jax.audit.commitment_metrics`
  (PSDR, PSIR, PSDRg, NPCS|D, unconditional rates and shift) and
  :func:`~bda_jax.audit.divergence_sources` (primary classes with their
  correctness change, and the overlapping flags);
* the **parse rate**: polls with a parsed candidate (not null after normalization) over all
  polls, and beside it, as a metric row, the **labeled share**: parsed candidates with a
  correctness label over parsed candidates (their product is the valid-candidate share).

Readings chosen here:

* Selection: the log's :func:`~bda_jax.audit.effective_selection`. A log with no
  selected poll at all is audited on a replayed selection (speaker's poll where a speak record
  exists, runtime argmax elsewhere) and the card's notes say so; in a log where only some
  blocks lack a selected poll, those blocks are left out of the selection-based denominators
  and the notes give their count.
* Folds: one tier-stratified problem deal per log (over all its problems,
  :func:`~bda_jax.audit.tier_stratified_folds` with ``n_folds`` and ``seed``),
  shared by the calibration cross-fit and the learned router, and returned as
  ``AuditReport.folds``.
* The gap to the oracle of each router gets its own row, with a paired interval: the
  per-block difference (oracle - router) over the same denominator, resampled with the same
  draws as every other routing interval.
* Every interval is the percentile interval of a problem-cluster bootstrap
  (``bda_jax.metrics.ratio_bootstrap`` and ``cluster_bootstrap_batched``; the log's clusters,
  ``n_boot`` resamples, ``seed``).
  Calibration intervals resample the held-out predictions without refitting the recalibrators;
  router intervals keep the learned router's cross-fitted probabilities fixed.
* ECE, Brier and AUROC are not ratios of counts. Their denominator is what they average over
  (candidates; for AUROC the correct-wrong candidate pairs) and their numerator is
  ``value x denominator`` (summed absolute bin gaps, summed squared errors, tie-aware
  correctly ordered pairs).
* Commitment inputs from the log, per speak record: poll answer and correctness = the speaker's
  poll row in that block (``speak_poll_row``); spoken answer and correctness from the record;
  ``equivalence`` gives the judge verdict; own earlier answers = the ``earlier_public`` answers
  whose author is the speaker; peer earlier answers = all other ``earlier_public`` answers
  (those of unknown author included); incumbent = the record's incumbent.
* Per-tier tables are made only when the log has more than one tier; each tier's interval
  resamples that tier's clusters only.
"""
from __future__ import annotations

import math
from dataclasses import fields
from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._calibration import CalibrationReport, calibration_report
from ._card import AuditCard, MetricEntry
from ._commitment import (DEFAULT_PRECEDENCE, CommitmentMetrics, DivergenceSources,
                          commitment_metrics, commitment_terms, divergence_sources)
from ._common import group_rows, positive_int
from ._folds import tier_stratified_folds
from ._format import fmt_count, fmt_value, md_cell
from ._io import read_broadcast_log
from ._log import BroadcastLog
from ._router import effective_selection
from ._routing import METRICS, ROUTERS, metric_terms, router_block_success, unselected_blocks
from ._traces import commitment_inputs
from .._core.errors import DataError
from ..metrics import (BootstrapCI, auroc, brier_top, cluster_bootstrap_batched, ece,
                       ratio_bootstrap)

__all__ = ["AuditReport", "audit_broadcast", "audit_file"]

_ROUTING_NAMES = {"selected_invalid_rate": "selected-invalid rate", "cra": "CRA", "hrwp": "HRWP",
                  "runtime_success": "runtime success", "oracle_success": "oracle success",
                  "mcr": "MCR", "pcca": "PCCA (tie-aware)", "ctr": "CTR"}
_COMMITMENT_NAMES = {"psdr": "PSDR", "psir": "PSIR", "psdrg": "PSDRg", "npcs_d": "NPCS|D",
                     "improvement_rate": "improvement-event rate",
                     "degradation_rate": "degradation-event rate",
                     "unconditional_shift": "unconditional shift (spoken - poll)",
                     "poll_accuracy": "poll accuracy", "spoken_accuracy": "spoken accuracy"}
_TIER_COLUMNS = ("CRA", "HRWP", "MCR", "PCCA (tie-aware)", "CTR", "PSDR", "NPCS|D",
                 "ECE (raw)", "ECE (isotonic)")
_CARD_DEFAULTS = {"protocol_name": "confidence-routed broadcast",
                  "protocol_version": "unversioned", "agent_model": ["unknown"],
                  "routing_rule": "confidence argmax",
                  "tie_rule": "first listed agent wins (strict >)",
                  "confidence_scale": "[0, 1]"}
_COMPUTED = ("metrics", "parse_rate", "ci_level", "ci_method", "schema_version")


class AuditReport(NamedTuple):
    """Output of :func:`audit_broadcast`.

    ``card`` the filled :class:`~bda_jax.audit.AuditCard`; ``per_tier`` {tier: list of
    :class:`~bda_jax.audit.MetricEntry`} ({} with one tier); ``routing`` {metric:
    :class:`~bda_jax.audit.BootstrapCI`}; ``routers`` {router: BootstrapCI of its
    expected success}; ``calibration`` the
    :class:`~bda_jax.audit.CalibrationReport` (None when not computable);
    ``commitment`` and ``sources`` (None without speak records); ``router_gaps`` {router:
    BootstrapCI of the oracle's success minus the router's, paired on the shared resamples};
    ``folds`` [R] the fold of each poll shared by the calibration cross-fit and the learned
    router (None when the log has too few problems to deal); ``selection`` "logged" or
    "replayed" (:func:`~bda_jax.audit.effective_selection`).
    """

    card: AuditCard
    per_tier: dict
    routing: dict
    routers: dict
    calibration: CalibrationReport | None
    commitment: CommitmentMetrics | None
    sources: DivergenceSources | None
    router_gaps: dict | None = None
    folds: np.ndarray | None = None
    selection: str = "logged"

    def to_dict(self) -> dict:
        """JSON-ready: the card and the per-tier entries."""
        return {"card": self.card.to_dict(),
                "per_tier": {t: [e.to_dict() for e in rows] for t, rows in self.per_tier.items()}}

    def to_markdown(self) -> str:
        """The card's Markdown, then (with several tiers) a per-tier table, each cell
        "estimate (numerator / denominator)"."""
        text = self.card.to_markdown()
        if not self.per_tier:
            return text
        lines = ["", "## Per tier", "",
                 "Each cell: estimate (numerator / denominator); intervals in the JSON.", "",
                 "| Tier | " + " | ".join(md_cell(c) for c in _TIER_COLUMNS) + " |",
                 "|---" * (len(_TIER_COLUMNS) + 1) + "|"]
        for tier, rows in self.per_tier.items():
            by_name = {e.name: e for e in rows}
            cells = []
            for c in _TIER_COLUMNS:
                e = by_name.get(c)
                cells.append("n/a" if e is None else f"{fmt_value(e.value)} "
                             f"({fmt_count(e.numerator)} / {fmt_count(e.denominator)})")
            lines.append(f"| {md_cell(tier) or '(none)'} | " + " | ".join(cells) + " |")
        return text + "\n" + "\n".join(lines)


# ==================================================================================== helpers
def _entry(name, ci: BootstrapCI, *, axis, unit, note=None) -> MetricEntry:
    return MetricEntry(name, ci.estimate, ci.numerator, ci.denominator, ci.ci_low, ci.ci_high, note,
                       axis, unit)


def _scaled_entry(name, value, den, ci: BootstrapCI, *, axis, unit, note) -> MetricEntry:
    """An entry for a statistic that is not a ratio of counts: numerator = value x den."""
    value = value if math.isfinite(value) else None
    num = None if value is None else value * den
    return MetricEntry(name, value, num, den, ci.ci_low, ci.ci_high, note, axis, unit)


@partial(jax.jit, static_argnames=("n_bins",))
def _calibration_stats(P, y, W, n_bins):
    """[m, M, 3] (ECE, Brier, AUROC) of each of M probability rows ``P`` [M, N] against ``y``
    [N] under each weight row of ``W`` [m, N]."""
    def one(w):
        return jnp.stack([jnp.stack([ece(p, y, n_bins=n_bins, weights=w),
                                     brier_top(p, y, weights=w), auroc(p, y, weights=w)])
                          for p in P])

    return jax.vmap(one)(W)


class _CalibrationBoot:
    """Bootstrap intervals of ECE, Brier and AUROC of fixed held-out probabilities over a subset
    of candidates; every call uses weight matrices of one shape, so one compilation serves the
    whole audit (tiers included: candidates outside the subset get weight 0)."""

    def __init__(self, P, y, n_bins, chunk=100):
        self.P, self.y = jnp.asarray(P), jnp.asarray(y)
        self.n_bins, self.chunk = n_bins, chunk

    def __call__(self, mask, clusters, seed, n_boot, level):
        N = self.y.shape[0]
        rows = np.flatnonzero(mask)

        def stat(W):
            m = W.shape[0]
            full = np.zeros((self.chunk, N))
            full[:m, rows] = W
            out = np.asarray(_calibration_stats(self.P, self.y, jnp.asarray(full), self.n_bins))
            return out[:m].reshape(m, -1)

        cis = cluster_bootstrap_batched(stat, clusters[rows], seed, n_boot, level, self.chunk)
        M = self.P.shape[0]
        return [[cis[3 * k + j] for j in range(3)] for k in range(M)]


# ================================================================================== the audit
def audit_broadcast(log: BroadcastLog, *, seed: int = 0, n_boot: int = 2000,
                    level: float = 0.95, over: str = "routeable", eligible: str = "contested",
                    routers: Sequence[str] = ROUTERS, n_folds: int = 2, n_bins: int = 10,
                    score_scale: float = 1.0, rule: str = "residual",
                    precedence: Sequence[str] = DEFAULT_PRECEDENCE, answer_cluster=None,
                    **card_fields) -> AuditReport:
    """Audit a broadcast log on all three axes and fill a Trace-Audit Card ([Audit] Tables 1,
    2, 3, 6, 10 and 21).

    ``seed``, ``n_boot``, ``level``: the problem-cluster bootstrap (and the folds and the
    learned router use ``seed`` too); ``over`` and ``eligible``: the denominators of the
    success rates and of MCR (:func:`~bda_jax.audit.metric_terms`); ``routers``:
    the counterfactual routers to score; ``n_folds``, ``n_bins``: cross-fitting folds and ECE
    bins; ``score_scale``: the top of the score scale (100 for 0-100 scores); ``rule`` and
    ``precedence``: divergence rule and source precedence
    (:func:`~bda_jax.audit.divergence_sources`); ``answer_cluster`` [R]: answer
    clusters for the two vote routers (default: exact normalized answers;
    :func:`~bda_jax.audit.router_block_success`). ``card_fields``: the card's
    descriptive fields (``protocol_name``, ``protocol_version``, ``agent_model``,
    ``agent_pool`` (default: "homogeneous" for one distinct ``agent_model`` given, else
    "heterogeneous"; unset when ``agent_model`` is not given), ``routing_rule``, ``tie_rule``,
    ``confidence_scale``, ``paper_of_record``, ``decoding_temperature``, ``speak_threshold``,
    ``memory_regime``, ``approval_policy``, ``evaluator``, ``judge``, ``extraction_method``,
    ``n_agents`` (default: the largest block), ``notes``); the metrics, parse rate and
    interval fields are filled here.

    Example (a small simulated run):

    >>> from bda_jax.audit import simulate_broadcast
    >>> report = audit_broadcast(simulate_broadcast(0, n_problems=30), n_boot=50)
    >>> cra = next(m for m in report.card.metrics if m.name == "CRA")
    >>> cra.value == cra.numerator / cra.denominator, cra.ci_low <= cra.value <= cra.ci_high
    (True, True)
    """
    if not isinstance(log, BroadcastLog):
        raise DataError(f"log must be a BroadcastLog, got {type(log).__name__}", field="log")
    positive_int(n_boot, "n_boot")
    known = {f.name for f in fields(AuditCard)} - set(_COMPUTED)
    unknown = sorted(set(card_fields) - known)
    if unknown:
        raise DataError(f"unknown card field(s) {unknown}; expected some of {sorted(known)}",
                        field=unknown[0])
    boot = dict(seed=seed, n_boot=n_boot, level=level)
    notes: list[str] = []
    metrics: list[MetricEntry] = []
    per_tier: dict = {}
    tiers = group_rows(log.block_tier) if len(set(log.block_tier)) > 1 else []

    def tier_entries(tier) -> list:
        return per_tier.setdefault(tier, [])

    # ---------------------------------------------------------------- selection and folds
    selection = effective_selection(log)[1]
    if selection == "replayed":
        notes.append("No poll of the log is selected: the selection is replayed (the speaker's "
                     "poll in blocks with a speak record, the runtime argmax, first listed "
                     "winning ties, elsewhere)")
    else:
        n_unselected = unselected_blocks(log)
        if n_unselected:
            notes.append(f"{n_unselected} of {log.n_blocks} blocks have no selected poll: they "
                         "are left out of the denominators of the selected-invalid rate, CRA, "
                         "HRWP, runtime success and MCR")
    try:
        folds = tier_stratified_folds(log.problem, log.tier, n_folds=n_folds, seed=seed)
        fold_error = None
    except DataError as err:
        folds, fold_error = None, err.reason

    # ------------------------------------------------------------------------------ routing
    block_cl = log.block_cluster
    units = {"selected_invalid_rate": "selected blocks", "cra": "selected-valid blocks",
             "hrwp": "possible-hit blocks",
             "runtime_success": "all-routeable blocks" if over == "routeable" else "blocks",
             "oracle_success": "all-routeable blocks" if over == "routeable" else "blocks",
             "mcr": f"eligible blocks ({eligible})", "pcca": "mixed blocks",
             "ctr": "correct-vs-wrong pairs"}
    rnotes = {"pcca": "numerator: sum of per-block tie-aware shares",
              "runtime_success": "an invalid pick counts as a failure"}
    routing = {}
    for m in METRICS:
        num, den = metric_terms(log, m, over=over, eligible=eligible)
        routing[m] = ratio_bootstrap(num, den, block_cl, **boot)
        metrics.append(_entry(_ROUTING_NAMES[m], routing[m], axis="routing", unit=units[m],
                              note=rnotes.get(m)))
        for tier, rows in tiers:
            tier_entries(tier).append(_entry(
                _ROUTING_NAMES[m], ratio_bootstrap(num[rows], den[rows], block_cl[rows], **boot),
                axis="routing", unit=units[m]))
    base = metric_terms(log, "oracle_success", over=over)[1]
    oracle_terms = router_block_success(log, "oracle")
    router_ci, gap_ci = {}, {}
    for name in routers:
        if name == "learned" and folds is None:
            notes.append(f"Router learned not scored: {fold_error}")
            continue
        try:
            success = router_block_success(log, name, seed=seed, n_folds=n_folds, folds=folds,
                                           answer_cluster=answer_cluster)
        except DataError as err:
            notes.append(f"Router {name} not scored: {err.reason}")
            continue
        router_ci[name] = ci = ratio_bootstrap(success, base, block_cl, **boot)
        gap_ci[name] = gap = ratio_bootstrap(oracle_terms - success, base, block_cl, **boot)
        metrics.append(_entry(f"router: {name}", ci, axis="routing (counterfactual)",
                              unit=units["oracle_success"], note="expected success"))
        if name != "oracle":
            metrics.append(_entry(f"gap to oracle: {name}", gap,
                                  axis="routing (counterfactual)", unit=units["oracle_success"],
                                  note="oracle - router expected success; paired interval "
                                  "(same resamples)"))

    # -------------------------------------------------------------------------- calibration
    cand = log.valid & ~np.isnan(log.score)
    n_unstated = int((log.valid & np.isnan(log.score)).sum())
    calib = None
    if n_unstated:
        notes.append(f"{n_unstated} valid candidates without a stated score are left out of "
                     "the calibration rows")
    try:
        if not cand.any():
            raise DataError("no valid candidate with a stated score", field="score")
        if folds is None:
            raise DataError(fold_error, field="n_folds")
        calib = calibration_report(log.score[cand], log.correct[cand], log.problem[cand],
                                   log.tier[cand], n_bins=n_bins, scale=score_scale,
                                   folds=folds[cand])
    except DataError as err:
        notes.append(f"Calibration not computed: {err.reason}")
    if calib is not None:
        y = log.correct[cand].astype(np.float64)
        cl = log.cluster[cand]
        methods = [r.method for r in calib.rows]
        P = np.stack([calib.calibrated[m] for m in methods])
        ones = np.ones(y.size)
        boots = _CalibrationBoot(P, y, n_bins)
        cunit = "valid candidates with a stated score"

        def calibration_entries(mask, out, *, full):
            """Entries over the candidates in ``mask``: every row of Table 2 (``full``), or the
            per-tier subset (ECE raw and isotonic, AUROC raw, accuracy)."""
            n = int(mask.sum())
            n_pos = int(y[mask].sum())
            cis = boots(mask, cl, **boot)
            for k, method in enumerate(methods):
                ece_ci, brier_ci, auroc_ci = cis[k]
                if full or method in ("raw", "isotonic"):
                    out.append(_scaled_entry(f"ECE ({method})", ece_ci.estimate, n, ece_ci,
                                             axis="calibration", unit=cunit,
                                             note=f"{n_bins} equal-width bins; numerator: "
                                             "summed absolute bin gaps"))
                if full:
                    out.append(_scaled_entry(f"Brier ({method})", brier_ci.estimate, n,
                                             brier_ci, axis="calibration", unit=cunit,
                                             note="numerator: summed squared errors"))
                if full or method == "raw":
                    out.append(_scaled_entry(f"AUROC ({method})", auroc_ci.estimate,
                                             n_pos * (n - n_pos), auroc_ci, axis="calibration",
                                             unit="correct-wrong candidate pairs",
                                             note="numerator: tie-aware correctly ordered pairs"))
                if full:
                    out.append(_entry(f"mean confidence ({method})",
                                      ratio_bootstrap(P[k][mask], ones[mask], cl[mask], **boot),
                                      axis="calibration", unit=cunit))
            out.append(_entry("candidate accuracy",
                              ratio_bootstrap(y[mask], ones[mask], cl[mask], **boot),
                              axis="calibration", unit=cunit))

        calibration_entries(np.ones(y.size, bool), metrics, full=True)
        temps = ", ".join(f"{t:.3g}" for t in calib.temperatures)
        notes.append(f"Calibration cross-fitted over {len(calib.temperatures)} tier-stratified "
                     f"problem folds (seed {seed}; the learned router uses the same folds); "
                     f"fitted temperatures per fold: {temps}")
        cand_tier = log.tier[cand]
        for tier, _ in tiers:
            calibration_entries(cand_tier == tier, tier_entries(tier), full=False)

    # --------------------------------------------------------------------------- commitment
    commitment = sources = None
    if log.n_speaks:
        inputs = commitment_inputs(log)
        pair_args = {k: inputs[k] for k in ("poll_answer", "spoken_answer", "poll_correct",
                                            "spoken_correct")}
        terms = commitment_terms(**pair_args, equivalent=inputs["equivalent"], rule=rule)
        commitment = commitment_metrics(**pair_args, equivalent=inputs["equivalent"], rule=rule)
        sources = divergence_sources(**pair_args, own_earlier=inputs["own_earlier"],
                                     incumbent=inputs["incumbent"],
                                     peer_earlier=inputs["peer_earlier"],
                                     equivalent=inputs["equivalent"], rule=rule,
                                     precedence=precedence)
        speak_cl = block_cl[log.speak_block]
        speak_tier = log.block_tier[log.speak_block]
        cunits = {"psir": "divergent pairs", "psdrg": "divergent pairs",
                  "npcs_d": "divergent pairs"}
        for name, (num, den) in terms.items():
            unit = cunits.get(name, "valid selected pairs")
            metrics.append(_entry(_COMMITMENT_NAMES[name],
                                  ratio_bootstrap(num, den, speak_cl, **boot),
                                  axis="commitment", unit=unit))
            if name in ("psdr", "psir", "psdrg", "npcs_d"):
                for tier, _ in tiers:
                    rows = speak_tier == tier
                    tier_entries(tier).append(_entry(
                        _COMMITMENT_NAMES[name],
                        ratio_bootstrap(num[rows], den[rows], speak_cl[rows], **boot),
                        axis="commitment", unit=unit))
        pc = np.nan_to_num(inputs["poll_correct"])
        sc = np.nan_to_num(inputs["spoken_correct"])
        div = sources.divergent.astype(np.float64)
        any_flag = np.zeros(div.size, bool)
        for f in sources.flags.values():
            any_flag |= f
        for k, cls in enumerate(sources.classes):
            in_class = (sources.primary == k).astype(np.float64)
            metrics.append(_entry(f"source {cls}: share",
                                  ratio_bootstrap(in_class, div, speak_cl, **boot),
                                  axis="commitment (sources)", unit="divergent pairs",
                                  note="primary class, precedence " + " > ".join(
                                      sources.classes)))
            metrics.append(_entry(f"source {cls}: change in correctness",
                                  ratio_bootstrap((sc - pc) * in_class, in_class, speak_cl,
                                                  **boot),
                                  axis="commitment (sources)", unit=f"{cls} pairs",
                                  note="spoken - poll correctness"))
        for cls in sources.classes:
            flag = (sources.flags[cls] if cls in sources.flags
                    else sources.divergent & ~any_flag).astype(np.float64)
            metrics.append(_entry(f"flag {cls}: share", ratio_bootstrap(flag, div, speak_cl,
                                                                        **boot),
                                  axis="commitment (flags, overlapping)",
                                  unit="divergent pairs"))
    else:
        notes.append("No speak records: the commitment axis is not measured")

    # ---------------------------------------------------------------------------- the card
    parsed = np.array([c is not None for c in log.candidate.tolist()], bool)
    parse = ratio_bootstrap(parsed.astype(np.float64), np.ones(log.n_polls), log.cluster, **boot)
    metrics.append(_entry("labeled share", ratio_bootstrap(
        log.valid.astype(np.float64)[parsed], np.ones(int(parsed.sum())), log.cluster[parsed],
        **boot) if parsed.any() else BootstrapCI(math.nan, math.nan, math.nan, 0, 0, level, 0, 0),
        axis="log", unit="parsed candidates",
        note="parsed candidates with a correctness label (valid = parsed and labeled)"))
    n_clusters = len(set(block_cl.tolist()))
    fields_ = {**_CARD_DEFAULTS, "n_agents": int(log.block_size.max()), **card_fields}
    if "agent_pool" not in card_fields and "agent_model" in card_fields:
        models = card_fields["agent_model"]
        models = [models] if isinstance(models, str) else list(models or [])
        if models:
            fields_["agent_pool"] = "homogeneous" if len(set(models)) == 1 else "heterogeneous"
    user_notes = fields_.pop("notes", None)
    fields_["notes"] = " ".join(([user_notes] if user_notes else []) +
                                [n.rstrip(".") + "." for n in notes]) or None
    card = AuditCard(
        **fields_, metrics=metrics,
        parse_rate=_entry("parse rate", parse, axis="log", unit="polls",
                          note="polls with a parsed candidate (not null after normalization); "
                          "the labeled share is a metric row"),
        ci_level=level,
        ci_method=(f"problem-cluster percentile bootstrap, {n_boot} resamples over "
                   f"{n_clusters} clusters (seed {seed}); calibration intervals keep the "
                   "cross-fitted predictions fixed, router intervals the learned router's "
                   "probabilities"))
    return AuditReport(card, per_tier, routing, router_ci, calib, commitment, sources, gap_ci,
                       folds, selection)


def audit_file(path, *, score_scale: float = 1.0, **kwargs) -> AuditReport:
    """Read the broadcast log at ``path`` (JSON Lines, docs/audit.md) and audit it: the stated
    scores must lie in ``[0, score_scale]`` (e.g. 100 for 0-100 scores), the audit reads them
    on that scale; every other keyword argument (bootstrap, folds, card fields) is passed to
    :func:`audit_broadcast`. Read errors are :class:`~bda_jax.TraceError` naming the file, line,
    problem and field.
    """
    if not score_scale > 0:
        raise DataError(f"score scale must be > 0, got {score_scale!r}", field="score_scale")
    log = read_broadcast_log(path, score_range=(0.0, float(score_scale)))
    return audit_broadcast(log, score_scale=score_scale, **kwargs)
