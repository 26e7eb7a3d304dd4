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
* The named studies that ``bda study``, ``bda demo`` and the benchmarks run: ``STUDIES``,
  ``STUDY_PRESETS`` (quick and full sizes), ``study_config``, ``run_study`` (``StudyRun``),
  resumable through a cell store (``open_cells``, ``cell``); ``abstain_unsure``.
"""
from ._attacks import (DEFAULT_P_GRID, DEFAULT_REGIMES, DoseResponse, corrupt_traces,
                       corruption_summary, dose_response)
from ._cells import cell, open_cells
from ._coalition import coalition_report
from ._controls import (PAPER_RELIABILITIES, ControlStudy, expected_accuracy,
                        label_permutation_control, onecoin_weight, policy_shift,
                        recalibration_under_attack, round0_truncation, weak_seat_swap)
from ._drift import (F_GRID, DriftReport, RowDriftMonitor, SleeperStudy, noise_floor, row_drift,
                     sleeper_study)
from ._studies import (STUDIES, STUDY_PRESETS, StudyRun, abstain_unsure, run_study,
                       study_config)

__all__ = ["ControlStudy", "DEFAULT_P_GRID", "DEFAULT_REGIMES", "DoseResponse", "DriftReport",
           "F_GRID", "PAPER_RELIABILITIES", "RowDriftMonitor", "STUDIES", "STUDY_PRESETS",
           "SleeperStudy", "StudyRun", "abstain_unsure", "cell", "coalition_report",
           "corrupt_traces", "corruption_summary", "dose_response", "expected_accuracy",
           "label_permutation_control", "noise_floor", "onecoin_weight", "open_cells",
           "policy_shift", "recalibration_under_attack", "round0_truncation", "row_drift",
           "run_study", "sleeper_study", "study_config", "weak_seat_swap"]
