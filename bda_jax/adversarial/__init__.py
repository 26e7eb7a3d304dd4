"""Adversarial robustness suite ([BDA] §7, Appendix F): attacks, studies and the drift monitor.

* Count-level attacks and the dose-response grid ([BDA] Appendix F.1, F.3): ``corrupt_traces``,
  ``corruption_summary``, ``dose_response`` (``DoseResponse``), ``DEFAULT_P_GRID``,
  ``DEFAULT_REGIMES``; the coalition's footprint in a trace set: ``coalition_report``.
* Control studies ([BDA] Appendix F.5, F.9, F.11, F.12, F.14), each a ``ControlStudy``:
  ``label_permutation_control``, ``round0_truncation``, ``recalibration_under_attack``,
  ``policy_shift``, ``weak_seat_swap``; helpers ``onecoin_weight``, ``expected_accuracy`` and the
  paper's binary regime ``PAPER_RELIABILITIES``.
* Row-drift monitor and the sleeper study ([BDA] Appendix F.8, F.13): ``row_drift``,
  ``noise_floor``, ``RowDriftMonitor`` (``DriftReport``), ``sleeper_study`` (``SleeperStudy``),
  ``F_GRID``.
* Clean-data studies ([BDA] Appendix E), each returning a ``StudyResult`` (tidy table, JSON,
  Markdown, a PNG figure): label efficiency ``label_efficiency`` (``LabelEfficiency``,
  ``TABLE11_BUDGETS``; Table 11, Figure 3), leave-one-dataset-out ``transfer_study``
  (``TransferStudy``, ``prefix_traces``), evidence windows over rounds ``round_windows``
  (``RoundWindows``, ``flip_counts``, ``window_label``; Table 8), fix/break by answer-space size
  ``fix_break_by_k`` (``FixBreakByK``, ``PAPER_FIX_BREAK``; Figure 6) and mean ± SD across
  generation seeds ``seed_spread`` (``SeedSpread``, ``PROTOCOLS``; Table 6).
* The named studies that ``bda study``, ``bda demo`` and the benchmarks run: ``STUDIES``,
  ``STUDY_PRESETS`` (quick and full sizes), ``FIGURE_STUDIES`` (those that draw a figure),
  ``study_config``, ``run_study`` (``StudyRun``),
  resumable through a cell store (``open_cells``, ``cell``, ``scoped``, fingerprinted inputs:
  ``fingerprint_traces``); ``abstain_unsure``.
"""
from ._attacks import (DEFAULT_P_GRID, DEFAULT_REGIMES, DoseResponse, corrupt_traces,
                       corruption_summary, dose_response)
from ._cells import cell, fingerprint_traces, open_cells, scoped
from ._coalition import coalition_report
from ._controls import (PAPER_RELIABILITIES, ControlStudy, expected_accuracy,
                        label_permutation_control, onecoin_weight, policy_shift,
                        recalibration_under_attack, round0_truncation, weak_seat_swap)
from ._drift import (F_GRID, DriftReport, RowDriftMonitor, SleeperStudy, noise_floor, row_drift,
                     sleeper_study)
from ._fix_break import PAPER_FIX_BREAK, FixBreakByK, fix_break_by_k
from ._label_efficiency import TABLE11_BUDGETS, LabelEfficiency, label_efficiency
from ._result import StudyResult
from ._rounds import RoundWindows, flip_counts, round_windows, window_label
from ._seeds import PROTOCOLS, SeedSpread, seed_spread
from ._studies import (FIGURE_STUDIES, STUDIES, STUDY_PRESETS, StudyRun, abstain_unsure,
                       run_study, study_config)
from ._transfer import TransferStudy, prefix_traces, transfer_study

__all__ = ["ControlStudy", "DEFAULT_P_GRID", "DEFAULT_REGIMES", "DoseResponse", "DriftReport",
           "F_GRID", "PAPER_RELIABILITIES", "RowDriftMonitor", "STUDIES", "STUDY_PRESETS",
           "SleeperStudy", "StudyRun", "abstain_unsure", "cell", "coalition_report",
           "corrupt_traces", "corruption_summary", "dose_response", "expected_accuracy",
           "label_permutation_control", "noise_floor", "onecoin_weight", "open_cells",
           "policy_shift", "recalibration_under_attack", "round0_truncation", "row_drift",
           "run_study", "sleeper_study", "study_config", "weak_seat_swap",
           "FIGURE_STUDIES", "FixBreakByK", "LabelEfficiency", "PAPER_FIX_BREAK", "PROTOCOLS", "RoundWindows",
           "SeedSpread", "StudyResult", "TABLE11_BUDGETS", "TransferStudy", "fingerprint_traces",
           "fix_break_by_k", "flip_counts", "label_efficiency", "prefix_traces", "round_windows",
           "scoped", "seed_spread", "transfer_study", "window_label"]
