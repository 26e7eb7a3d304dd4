"""Routing audit of confidence-routed broadcast deliberation ([Audit]; docs/audit.md).

In the audited protocol every agent privately polls a candidate answer and a confidence score,
the most confident agent gets the floor and speaks publicly. The audit measures three things
separately: whether the router picks correct candidates (routing), whether the scores behave
like probabilities (calibration), and whether the speaker says the answer that won the poll
(commitment). Every rate carries its numerator, denominator and a problem-cluster bootstrap
interval.

Logs (JSON Lines format in docs/audit.md):
    ``BroadcastLog`` (``EQUIVALENCE_LABELS``), ``read_broadcast_log``, ``write_broadcast_log``,
    ``from_records``, ``from_frame`` (``CLUSTER_ORDERS``), ``simulate_broadcast``,
    ``load_confmad`` (``ConfmadReport``), ``runtime_argmax``, ``effective_selection``
    (``SELECTION_SOURCES``).
One call for everything, filling a Trace-Audit Card:
    ``audit_broadcast`` -> ``AuditReport`` (``.card``, ``.per_tier``, ``.to_markdown()``);
    ``audit_file`` reads a log file and audits it.
Routing ([Audit] Tables 1, 6, 10, 15):
    ``selected_invalid_rate``, ``cra``, ``hrwp``, ``runtime_success``, ``oracle_success``,
    ``mcr`` (``MCR_ELIGIBLE``), ``pcca``, ``ctr``, ``score_pairs`` (``ScorePairs``),
    ``unselected_blocks``, ``metric_terms`` (``METRICS``), ``per_tier``, ``routing_audit``;
    routers: ``router_block_success``, ``router_counterfactuals`` (``ROUTERS``,
    ``RouterResult``), ``learned_router_probabilities``; sanity checks:
    ``permutation_null_pcca``, ``permute_scores_within_blocks``, ``noisy_oracle_check``,
    ``noisy_oracle_scores`` (``SanityCheck``).
Calibration ([Audit] Tables 2, 5, 10):
    ``calibration_report`` (``CalibrationReport``, ``CalibrationRow``), ``calibration_row``,
    ``calibration_by_group``, ``fit_temperature``, ``apply_temperature``, ``fit_isotonic``,
    ``apply_isotonic`` (``IsotonicFit``).
Commitment ([Audit] Tables 3, 4, 10-13, 16, 17):
    ``commitment_metrics`` (``CommitmentMetrics``, ``COMMITMENT_METRICS``), ``commitment_terms``,
    ``commitment_by_group``, ``divergence``, ``divergence_sources`` (``DivergenceSources``,
    ``SourceRow``, ``CLASSES``, ``DEFAULT_PRECEDENCE``), ``cluster_logit``, ``outcome_linkage``,
    ``adoption_logit``, ``fixed_effects`` (``LogitFit``, ``LogitTerm``), ``cohens_kappa``
    (``KappaResult``).
Regression inputs ([Audit] Tables 4, 12, 18):
    ``trace_summaries`` (``TraceSummaries``, ``TRACE_PREDICTORS``), ``adoption_rows``
    (``AdoptionRows``, ``ADOPTION_COVARIATES``), ``commitment_inputs``.
Shared:
    ``tier_stratified_folds``; from :mod:`bda_jax.metrics`: ``Ratio``, ``ratio``,
    ``BootstrapCI``, ``cluster_bootstrap``, ``cluster_bootstrap_batched``, ``ratio_bootstrap``.
Trace-Audit Card ([Audit] Table 21):
    ``AuditCard``, ``MetricEntry``, ``AGENT_POOLS``, ``SCHEMA_VERSION``,
    ``SUPPORTED_SCHEMA_VERSIONS``.

>>> from bda_jax import audit
>>> log = audit.simulate_broadcast(0, n_problems=30)
>>> r = audit.cra(log)
>>> r.value == r.numerator / r.denominator
True
"""
from ._assemble import CLUSTER_ORDERS
from ._calibration import (CalibrationReport, CalibrationRow, IsotonicFit, apply_isotonic,
                           apply_temperature, calibration_by_group, calibration_report,
                           calibration_row, fit_isotonic, fit_temperature)
from ._card import AGENT_POOLS, SCHEMA_VERSION, SUPPORTED_SCHEMA_VERSIONS, AuditCard, MetricEntry
from ._commitment import (CLASSES, COMMITMENT_METRICS, DEFAULT_PRECEDENCE, CommitmentMetrics,
                          DivergenceSources, KappaResult, LogitFit, LogitTerm, SourceRow,
                          adoption_logit, cluster_logit, cohens_kappa, commitment_by_group,
                          commitment_metrics, commitment_terms, divergence, divergence_sources,
                          fixed_effects, outcome_linkage)
from ._confmad import ConfmadReport, load_confmad
from ._folds import tier_stratified_folds
from ._io import from_frame, from_records, read_broadcast_log, write_broadcast_log
from ._log import EQUIVALENCE_LABELS, BroadcastLog
from ._report import AuditReport, audit_broadcast, audit_file
from ._router import SELECTION_SOURCES, effective_selection, runtime_argmax
from ._routing import (MCR_ELIGIBLE, METRICS, ROUTERS, RouterResult, SanityCheck, ScorePairs, cra,
                       ctr, hrwp, learned_router_probabilities, mcr, metric_terms,
                       noisy_oracle_check, noisy_oracle_scores, oracle_success, pcca, per_tier,
                       permutation_null_pcca, permute_scores_within_blocks, router_block_success,
                       router_counterfactuals, routing_audit, runtime_success, score_pairs,
                       selected_invalid_rate, unselected_blocks)
from ._simulate import simulate_broadcast
from ._traces import (ADOPTION_COVARIATES, TRACE_PREDICTORS, AdoptionRows, TraceSummaries,
                      adoption_rows, commitment_inputs, trace_summaries)
from ..metrics import (BootstrapCI, Ratio, cluster_bootstrap, cluster_bootstrap_batched, ratio,
                       ratio_bootstrap)

__all__ = [
    # logs
    "BroadcastLog", "CLUSTER_ORDERS", "ConfmadReport", "EQUIVALENCE_LABELS", "SELECTION_SOURCES",
    "effective_selection", "from_frame", "from_records", "load_confmad", "read_broadcast_log",
    "runtime_argmax", "simulate_broadcast", "write_broadcast_log",
    # the whole audit
    "AuditReport", "audit_broadcast", "audit_file",
    # routing
    "MCR_ELIGIBLE", "METRICS", "ROUTERS", "RouterResult", "SanityCheck", "ScorePairs", "cra",
    "ctr", "hrwp", "learned_router_probabilities", "mcr", "metric_terms", "noisy_oracle_check",
    "noisy_oracle_scores", "oracle_success", "pcca", "per_tier", "permutation_null_pcca",
    "permute_scores_within_blocks", "router_block_success", "router_counterfactuals",
    "routing_audit", "runtime_success", "score_pairs", "selected_invalid_rate",
    "unselected_blocks",
    # calibration
    "CalibrationReport", "CalibrationRow", "IsotonicFit", "apply_isotonic", "apply_temperature",
    "calibration_by_group", "calibration_report", "calibration_row", "fit_isotonic",
    "fit_temperature",
    # commitment
    "CLASSES", "COMMITMENT_METRICS", "DEFAULT_PRECEDENCE", "CommitmentMetrics",
    "DivergenceSources", "KappaResult", "LogitFit", "LogitTerm", "SourceRow", "adoption_logit",
    "cluster_logit", "cohens_kappa", "commitment_by_group", "commitment_metrics",
    "commitment_terms", "divergence", "divergence_sources", "fixed_effects", "outcome_linkage",
    # regression inputs
    "ADOPTION_COVARIATES", "AdoptionRows", "TRACE_PREDICTORS", "TraceSummaries", "adoption_rows",
    "commitment_inputs", "trace_summaries",
    # shared
    "BootstrapCI", "Ratio", "cluster_bootstrap", "cluster_bootstrap_batched", "ratio",
    "ratio_bootstrap", "tier_stratified_folds",
    # card
    "AGENT_POOLS", "AuditCard", "MetricEntry", "SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS",
]
