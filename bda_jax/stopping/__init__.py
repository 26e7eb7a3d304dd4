"""DASE adaptive stopping ([DASE]; docs/stopping.md): when has an ensemble re-answering a problem
round after round deliberated enough?

Functional layer (pure JAX; ``ids`` [B, R, n] int32 answer ids, -1 empty, ``mask`` [B, R]):

* :func:`evidence_score` (g_t, [DASE] Eq. 1, Appendix H.1) and :func:`round_plurality`;
* the per-round step functions of the two :data:`RULES`, each ``step(params, state, ids_t
  [n], active [], last []) -> (state, (g, x, winner))`` for one problem: :func:`spatial_step`
  (the spatial arena, [DASE] §3 / Appendix H.2, parameters :class:`ArenaParams`) and
  :func:`heuristic_step` (the streak-k rule, :class:`HeuristicParams`), over a
  :class:`RuleState` started by :func:`init_rule_state`;
* the batched rules built from them, ``jax.lax.scan`` over rounds and ``jax.vmap`` over problems
  and a grid of W (or k) in one compiled call: :func:`spatial_rule`, :func:`heuristic_rule` ->
  :class:`StopResult` (``commit`` indexes :data:`COMMITS`; :data:`DISPATCHED` are the commits a
  router sends out without review).

Answers to ids: :func:`encode_answers` -> :class:`EncodedBatch` (:func:`answer_key` is the
identity of one answer). Live: :class:`Stopper` feeds one round at a time to the same step
functions and answers a :class:`StopDecision`.

Replay of the released history logs (read by :func:`bda_jax.datasets.read_dase_history`):
:func:`load_history_batch` -> :class:`HistoryBatch`, :func:`replay_history` and
:func:`resimulate` (other W / k) -> :class:`ReplayRecord` per problem; summaries
:func:`commit_partition`, :func:`routing_gap` ([DASE] §5), :func:`accuracy_coverage`, and
:func:`replay_summary` -> :class:`ReplaySummary` (all of it for one file; ``bda stop replay``).

Baselines ([DASE] §4-§5): SC-k / IMSC-k from the vote logs (:func:`sc_k_winners`,
:func:`sc_curve`), :func:`answers_correct` (against recovered gold), :func:`accuracy_both`,
:func:`dase_history_outcomes`, :func:`align`, exact McNemar tests (:func:`mcnemar_exact`,
:func:`pairwise_mcnemar`) with :func:`benjamini_hochberg`, :func:`cost_summary`.

Calibrated stopping on the BDA posterior ([BDA] Eqs. 1-2): :func:`build_votes` ->
:class:`VoteTensor`, :func:`vote_log_posterior`, :func:`crossfit_log_posterior`,
:func:`stop_at_threshold` -> :class:`StopOutcome`, :func:`summarize_stops`,
:func:`match_coverage`.
"""
from ._baselines import (accuracy_both, align, answers_correct, benjamini_hochberg, cost_summary,
                         dase_history_outcomes, mcnemar_exact, pairwise_mcnemar, sc_curve,
                         sc_k_winners)
from ._calibrated import (StopOutcome, VoteTensor, build_votes, crossfit_log_posterior,
                          match_coverage, stop_at_threshold, summarize_stops, vote_log_posterior)
from ._encoding import EncodedBatch, answer_key, encode_answers
from ._replay import HistoryBatch, ReplayRecord, load_history_batch, replay_history, resimulate
from ._rules import (COMMITS, DISPATCHED, RULES, ArenaParams, HeuristicParams, RuleState,
                     StopResult, evidence_score, heuristic_rule, heuristic_step, init_rule_state,
                     round_plurality, spatial_rule, spatial_step)
from ._stopper import StopDecision, Stopper
from ._summary import (ReplaySummary, accuracy_coverage, commit_partition, replay_summary,
                       routing_gap)

__all__ = [
    "COMMITS", "DISPATCHED", "RULES", "ArenaParams", "HeuristicParams", "RuleState",
    "StopResult", "evidence_score", "heuristic_rule", "heuristic_step", "init_rule_state",
    "round_plurality", "spatial_rule", "spatial_step",
    "EncodedBatch", "answer_key", "encode_answers",
    "StopDecision", "Stopper",
    "HistoryBatch", "ReplayRecord", "load_history_batch", "replay_history", "resimulate",
    "ReplaySummary", "accuracy_coverage", "commit_partition", "replay_summary", "routing_gap",
    "accuracy_both", "align", "answers_correct", "benjamini_hochberg", "cost_summary",
    "dase_history_outcomes", "mcnemar_exact", "pairwise_mcnemar", "sc_curve", "sc_k_winners",
    "StopOutcome", "VoteTensor", "build_votes", "crossfit_log_posterior", "match_coverage",
    "stop_at_threshold", "summarize_stops", "vote_log_posterior",
]
