"""Adversarial robustness suite ([BDA] §7, Appendix F): attacks, studies and the drift monitor."""
from ._attacks import (DEFAULT_P_GRID, DEFAULT_REGIMES, DoseResponse, corrupt_traces,
                             corruption_summary, dose_response)
from ._coalition import coalition_report
from ._controls import (ControlStudy, label_permutation_control, policy_shift,
                            recalibration_under_attack, round0_truncation, weak_seat_swap)
from ._drift import (F_GRID, DriftReport, RowDriftMonitor, SleeperStudy, noise_floor,
                         row_drift, sleeper_study)

__all__ = ["ControlStudy", "DEFAULT_P_GRID", "DEFAULT_REGIMES", "DoseResponse", "DriftReport",
           "F_GRID", "RowDriftMonitor", "SleeperStudy", "coalition_report", "corrupt_traces",
           "corruption_summary", "dose_response", "label_permutation_control", "noise_floor",
           "policy_shift", "recalibration_under_attack", "round0_truncation", "row_drift",
           "sleeper_study", "weak_seat_swap"]
