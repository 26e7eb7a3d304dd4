"""DASE stopping rules ([DASE]): the evidence score, the spatial arena and the heuristic streak
rule as batched JAX functions, a live :class:`Stopper`, and replay / re-simulation of the released
DASE history logs with commit-partition, routing-gap and accuracy-coverage summaries.
See docs/stopping.md."""
from ._rules import (COMMITS, RULES, EncodedBatch, HistoryBatch, ReplayRecord,
                            StopDecision, StopResult, Stopper, accuracy_coverage,
                            commit_partition, encode_answers, evidence_score, file_settings,
                            heuristic_rule, load_history_batch, replay_history, resimulate,
                            round_plurality, routing_gap, spatial_rule)
from ._baselines import (benjamini_hochberg, load_vote_log, mcnemar_exact,
                                  pairwise_mcnemar, sc_curve, sc_k_winners)
from ._calibrated import build_votes, crossfit_log_posterior, stop_at_threshold

__all__ = [
    "COMMITS", "RULES", "EncodedBatch", "HistoryBatch", "ReplayRecord", "StopDecision",
    "StopResult", "Stopper", "accuracy_coverage", "commit_partition", "encode_answers",
    "evidence_score", "file_settings", "heuristic_rule", "load_history_batch", "replay_history",
    "resimulate", "round_plurality", "routing_gap", "spatial_rule",
    "benjamini_hochberg", "load_vote_log", "mcnemar_exact", "pairwise_mcnemar", "sc_curve",
    "sc_k_winners", "build_votes", "crossfit_log_posterior", "stop_at_threshold",
]
