"""bda_jax: calibrated probabilities from multi-agent deliberation records (JAX + NumPyro).

One data path: traces -> counts -> kernels -> posteriors -> metrics and reports.
This module is the core surface (traces, counts, the closed-form kernels of [BDA] Eqs. 1, 2
and 4, fitting and nested CV, decisions, answer sets with coverage, sharding, the evaluation
harness and the errors).
Subpackages, one domain each (docs/architecture.md): ``bda_jax.aggregators`` (council arms,
harness, model files), ``bda_jax.crowd`` (crowd-kit's surface and the crowd EMs),
``bda_jax.datasets`` (importers), ``bda_jax.metrics``, ``bda_jax.simulate``,
``bda_jax.adversarial``, ``bda_jax.stopping`` ([DASE]), ``bda_jax.audit`` ([Audit]),
``bda_jax.models`` (NumPyro), ``bda_jax.report`` (the demo and its report), ``bda_jax.cli``.
"""
from ._core.cache import CellCache, fingerprint
from ._core.compilation import enable_compilation_cache
from ._core.io import atomic_write
from ._core.abstention import RiskCoverage, risk_coverage, selective_decision
from ._core.conformal import (SET_METHODS, conformal_scores, conformal_threshold, prediction_sets,
                             set_coverage)
from ._core.counts import Counts, CountsInfo, PairCounts, tally
from ._core.decisions import Decision, decide, majority
from ._core.errors import ArtifactError, BdaError, DataError, TraceError
from .aggregators import ARMS, Evaluation, decision_flips, evaluate, make_arm, reliability_ablation
from ._core.fitting import (BetaPrior, class_log_prior, fit_confusion, gold_consistent, labeled_count,
                           prior_from_reliability, reliability, uniform_error_confusion)
from ._core.kernels import confusion_log_posterior, onecoin_log_posterior
from ._core.normalize import default_normalizer, identity_normalizer, normalize_id
from ._core.selection import GRIDS, CVResult, inner_folds, make_folds, select_and_predict
from ._core.sharding import (shard_counts, sharded_confusion_log_posterior,
                             sharded_onecoin_log_posterior, task_mesh)
from ._core.stream import tally_stream
from ._core.traces import (FORCES, Move, ResolvedTrace, SkippedMove, Trace, parse_trace,
                          read_traces, resolve_trace, skipped_summary, write_traces)
from ._core.version import __version__

__all__ = [
    "__version__", "CellCache", "atomic_write", "enable_compilation_cache", "fingerprint",
    "ARMS", "Evaluation", "RiskCoverage", "decision_flips", "evaluate", "make_arm",
    "reliability_ablation", "risk_coverage", "selective_decision",
    "SET_METHODS", "conformal_scores", "conformal_threshold", "prediction_sets", "set_coverage",
    "BetaPrior", "CVResult", "GRIDS", "class_log_prior", "fit_confusion", "gold_consistent",
    "inner_folds", "labeled_count", "make_folds", "prior_from_reliability", "reliability", "select_and_predict",
    "uniform_error_confusion",
    "ArtifactError", "BdaError", "Counts", "CountsInfo", "DataError", "Decision", "FORCES", "Move",
    "PairCounts",
    "ResolvedTrace", "SkippedMove", "Trace", "TraceError", "confusion_log_posterior", "decide",
    "default_normalizer", "identity_normalizer", "majority", "normalize_id", "onecoin_log_posterior",
    "parse_trace", "read_traces", "resolve_trace", "skipped_summary", "tally", "tally_stream",
    "write_traces",
    "shard_counts", "sharded_confusion_log_posterior", "sharded_onecoin_log_posterior",
    "task_mesh",
]
