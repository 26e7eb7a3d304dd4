"""Offline importers of real data: crowd label sets and LLM ensemble / debate logs.

Crowd sets load as :class:`CrowdData` (a crowd-kit DataFrame ``task, worker, label`` plus a gold
Series) and convert to traces with :func:`to_traces`; :func:`load_crowd` knows the public sets by
name (Bluebirds and the ActiveCrowdToolkit files are bundled, the rest are read from
``root`` / ``$BDA_SHARED_DATA``). LLM logs load straight to traces, each in two move mappings
(:data:`MOVE_MAPPINGS`: ``"proposals"`` or ``"typed"`` concede / retract moves derived from
answer revisions by :func:`revisions_to_moves`):

* DASE histories (:func:`load_dase_history`), with gold recovered from the logs' correctness
  flags (:func:`recover_dase_gold` -> :class:`DaseGold`). Everything about the DASE file format
  lives here: :func:`read_dase_history` (validated :class:`DaseRecord` per problem),
  :func:`normalize_dase_answer`, :data:`GPQA_LETTERS`, what a file name says
  (:func:`dase_slot_models`, :func:`dase_file_settings`), the SC70 / IMSC70 vote logs
  (:func:`load_dase_vote_log` -> :class:`DaseVoteLog`) and the bundled excerpts
  :data:`DASE_EXCERPTS`.
* Du et al. and small-model debates (:func:`load_du_debate`, :func:`load_slm_debate` ->
  :class:`DebateLoad`), through the candidate-restricted parsers :func:`parse_number` /
  :func:`parse_letter` (-> :class:`Parsed`; :func:`canonical_number`; word labels with
  :func:`parse_label`, and :func:`extract_answer` choosing by the candidates) and a
  :class:`ParseReport` with the below-chance tripwire of [BDA] Appendix D.3
  (:func:`build_parse_report`, :func:`apply_tripwire`, :class:`ParseWarning`).

Open-answer candidates are the answers said on a task (:func:`answers_said`). See
docs/datasets.md.
"""
from ._crowd import (DUPLICATE_POLICIES, SNOW_NUMERIC, CrowdData, Duplicates, list_crowd,
                     load_active_crowd, load_bluebirds, load_crowd, load_crowdscale, load_snow,
                     load_zhang, load_zheng, shared_data_root, to_traces)
from ._dase import (DASE_EXCERPTS, GPQA_LETTERS, DaseGold, DaseRecord, DaseVoteLog,
                    dase_file_settings, dase_slot_models, load_dase_vote_log,
                    normalize_dase_answer, read_dase_history, recover_dase_gold)
from ._dase_traces import DaseTraces, load_dase_history
from ._debate import DebateLoad, load_du_debate, load_slm_debate
from ._moves import MOVE_MAPPINGS, answers_said, revisions_to_moves
from ._parse_report import ParseReport, ParseWarning, apply_tripwire, build_parse_report
from ._parsers import (Parsed, canonical_number, extract_answer, parse_label, parse_letter,
                       parse_number)

__all__ = [
    "CrowdData", "DUPLICATE_POLICIES", "Duplicates", "SNOW_NUMERIC", "list_crowd",
    "load_active_crowd", "load_bluebirds", "load_crowd", "load_crowdscale", "load_snow",
    "load_zhang", "load_zheng", "shared_data_root", "to_traces",
    "DASE_EXCERPTS", "DaseGold", "DaseRecord", "DaseTraces", "DaseVoteLog", "GPQA_LETTERS",
    "dase_file_settings", "dase_slot_models", "load_dase_history", "load_dase_vote_log",
    "normalize_dase_answer", "read_dase_history", "recover_dase_gold",
    "DebateLoad", "load_du_debate", "load_slm_debate",
    "MOVE_MAPPINGS", "answers_said", "revisions_to_moves",
    "ParseReport", "ParseWarning", "apply_tripwire", "build_parse_report",
    "Parsed", "canonical_number", "extract_answer", "parse_label", "parse_letter", "parse_number",
]
