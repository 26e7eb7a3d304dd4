"""Live deliberation against any OpenAI-compatible endpoint ([BDA] §5, Appendix D.7): the
protocol automaton, question sets and council configs, structured move requests, and the cached,
counted, resumable client. Needs the optional extra ``bda_jax[council]`` (openai, pydantic) for
the client; the protocol pieces need only the core.
"""
__all__: list[str] = []

# --- protocol, inputs, prompts (owner: protocol) ---
from ._config import (EXTRA_FORCES, METHOD_SEATS, ROLES, CouncilConfig, Endpoint,  # noqa: E402
                      MethodsConfig, Price, Seat, read_config)
from ._prompts import PROMPT_VERSION, ROLE_HEAD, ROLE_TAIL, move_messages, reask_message  # noqa: E402
from ._protocol import (ANSWER_FORCES, TARGET_FORCES, IllegalMove, LegalMoves,  # noqa: E402
                        TaskState, apply_move, label_seed, legal_moves, new_task_state,
                        next_round, record_abstain, to_trace, trace_task_id)
from ._questions import Question, read_questions  # noqa: E402
from ._schema import ARGUMENT_MAX, MoveReply, ReplyError, move_schema, parse_reply  # noqa: E402

__all__ += [
    "Question", "read_questions",
    "Endpoint", "Seat", "Price", "CouncilConfig", "MethodsConfig", "read_config", "ROLES",
    "EXTRA_FORCES", "METHOD_SEATS",
    "LegalMoves", "TaskState", "IllegalMove", "new_task_state", "legal_moves", "apply_move",
    "record_abstain", "next_round", "to_trace", "trace_task_id", "label_seed", "ANSWER_FORCES",
    "TARGET_FORCES",
    "MoveReply", "ReplyError", "move_schema", "parse_reply", "ARGUMENT_MAX",
    "PROMPT_VERSION", "ROLE_HEAD", "ROLE_TAIL", "move_messages", "reask_message",
]
# --- end protocol ---
# --- client, cache, ledger (owner: client) ---
from ._cache import CACHE_MODES, CacheMiss, ChatReply, ChatRequest, ReplyCache  # noqa: E402
from ._client import CouncilClient, UpstreamError  # noqa: E402
from ._ledger import Ledger  # noqa: E402

__all__ += [
    "ChatRequest", "ChatReply", "ReplyCache", "CacheMiss", "CACHE_MODES", "UpstreamError",
    "CouncilClient", "Ledger",
]
# --- end client ---
# --- runner (owner: runner) ---
from ._local import (INSTALL_HINT, LOCAL_MODEL_NAME, LocalModelError,  # noqa: E402
                     LocalServer, local_model_path, local_server)
from ._runner import (MANIFEST_KIND, RunSummary, local_config, pointed_at,  # noqa: E402
                      run_council, run_council_files)

__all__ += ["INSTALL_HINT", "LOCAL_MODEL_NAME", "LocalModelError", "LocalServer",
            "local_model_path", "local_server",
            "MANIFEST_KIND", "RunSummary", "local_config", "pointed_at", "run_council",
            "run_council_files"]
# --- end runner ---
# --- LLM-based methods and the fair attack ([BDA] Appendix B.1, B.2, F.7) ---
from ._dfquad import dfquad_strengths  # noqa: E402
from ._methods import (METHOD_RUN_KIND, Caller, Evidence, LLMMethod, MethodAnswer,  # noqa: E402
                       MethodRecord, MethodRun, MethodTask, Runtime,
                       answer_proba, derived_seed, read_method_run, tasks_from_questions,
                       tasks_from_traces)
from ._judge import Judge, commitment, json_object, match_candidate  # noqa: E402
from ._moa import MoA, SelfMoA  # noqa: E402
from ._argllms import ArgLLMs, read_strength  # noqa: E402
from ._catalog import METHODS, make_method, read_method_inputs, run_method_files  # noqa: E402
from ._method_prompts import METHOD_PROMPT_VERSION  # noqa: E402
from ._attack import (ATTACK_KIND, DEFAULT_ATTACK_ARMS, AttackStudy, attack_table,  # noqa: E402
                      plot_attack, run_attack, run_attack_files)

__all__ += ["dfquad_strengths", "METHOD_RUN_KIND", "Caller", "Evidence", "LLMMethod",
            "MethodAnswer", "MethodRecord", "MethodRun", "MethodTask",
            "Runtime", "answer_proba", "derived_seed", "read_method_run", "tasks_from_questions",
            "tasks_from_traces", "Judge", "commitment", "json_object", "match_candidate", "MoA",
            "SelfMoA", "ArgLLMs", "read_strength", "METHODS",
            "make_method", "METHOD_PROMPT_VERSION", "ATTACK_KIND", "DEFAULT_ATTACK_ARMS",
            "AttackStudy", "attack_table", "plot_attack", "run_attack", "run_attack_files",
            "read_method_inputs", "run_method_files"]
# --- live protocols: the DASE ensemble ([DASE] §3-4, Appendix H) ---
from ._ensemble import (BANDWIDTHS, ENSEMBLE_PROMPT_VERSION, ENSEMBLE_RULES,  # noqa: E402
                        EnsembleSettings, EnsembleSummary, ensemble_workers,
                        extract_worker_answer, run_ensemble, run_ensemble_files, worker_messages)

__all__ += ["BANDWIDTHS", "ENSEMBLE_PROMPT_VERSION", "ENSEMBLE_RULES", "EnsembleSettings",
            "EnsembleSummary", "ensemble_workers", "extract_worker_answer", "run_ensemble",
            "run_ensemble_files", "worker_messages"]
from ._compare import (COMPARE_KIND, ComparisonResult, comparison_table,  # noqa: E402
                       plot_comparison, run_comparison, run_comparison_files)

__all__ += ["COMPARE_KIND", "ComparisonResult", "comparison_table", "plot_comparison",
            "run_comparison", "run_comparison_files"]
# --- live protocols: the confidence-routed broadcast ([Audit] Fig. 1, Tables 7-8) ---
from ._broadcast import (BROADCAST_MANIFEST_KIND, BROADCAST_ROUTERS, BroadcastSummary,  # noqa: E402
                         route_floor, run_broadcast, run_broadcast_files)
from ._broadcast_prompts import BROADCAST_PROMPT_VERSION, ConfidenceScale  # noqa: E402

__all__ += ["BROADCAST_MANIFEST_KIND", "BROADCAST_ROUTERS", "BroadcastSummary", "route_floor",
            "run_broadcast", "run_broadcast_files", "BROADCAST_PROMPT_VERSION", "ConfidenceScale"]
