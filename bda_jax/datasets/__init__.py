"""Offline importers of real data: crowd label sets and LLM ensemble / debate logs.

Crowd sets load as :class:`CrowdData` (a crowd-kit DataFrame ``task, worker, label`` plus a gold
Series) and convert to traces with :func:`to_traces`; :func:`load_crowd` knows the public sets by
name (Bluebirds and the ActiveCrowdToolkit files are bundled, the rest are read from
``root`` / ``$BDA_SHARED_DATA``). LLM logs load straight to traces: DASE histories with gold
recovered from the logs' correctness flags, Du et al. and small-model debates through a
candidate-restricted answer parser with a parse report, each in two move mappings
(``"proposals"`` or ``"typed"`` concede / retract moves derived from answer revisions).
:data:`DASE_EXCERPTS` names the bundled DASE excerpts.
"""
from pathlib import Path

from ._crowd import (DUPLICATE_POLICIES, SNOW_NUMERIC, CrowdData, Duplicates,
                              list_crowd, load_active_crowd, load_bluebirds, load_crowd,
                              load_crowdscale, load_snow, load_zhang, load_zheng,
                              shared_data_root, to_traces)
from ._llm import (MOVE_MAPPINGS, DaseGold, DaseTraces, DebateLoad, ParseReport,
                            ParseWarning, Parsed, canonical_number, dase_slot_models,
                            load_dase_history, load_du_debate, load_slm_debate,
                            normalize_dase_answer, parse_letter, parse_number, recover_dase_gold,
                            revisions_to_moves)

_DASE_DIR = Path(__file__).resolve().parent.parent / "data" / "dase_council_traces"
#: Bundled DASE history excerpts (Apache-2.0; see NOTICE): GPQA W = 4 (problems 1-50) and AIME
#: W = 8 (problems 1-20). Load with ``load_dase_history(DASE_EXCERPTS[name], ...)``.
DASE_EXCERPTS = {
    "gpqa_w4_head50": _DASE_DIR / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.head50.jsonl",
    "aime_w8_head20": _DASE_DIR / "safe_DASE_Bellman_History_8_alpha0_2.head20.jsonl",
}

__all__ = [
    "CrowdData", "DUPLICATE_POLICIES", "Duplicates", "SNOW_NUMERIC", "list_crowd",
    "load_active_crowd", "load_bluebirds", "load_crowd", "load_crowdscale", "load_snow",
    "load_zhang", "load_zheng", "shared_data_root", "to_traces",
    "DASE_EXCERPTS", "DaseGold", "DaseTraces", "DebateLoad", "MOVE_MAPPINGS", "ParseReport",
    "ParseWarning", "Parsed", "canonical_number", "dase_slot_models", "load_dase_history",
    "load_du_debate", "load_slm_debate", "normalize_dase_answer", "parse_letter",
    "parse_number", "recover_dase_gold", "revisions_to_moves",
]
