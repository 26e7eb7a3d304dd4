"""Active label acquisition: which tasks to label next (docs/active.md).

The supervised BDA arms characterize agents from labeled tasks ([BDA] §3 Eq. 3, Eq. 4); the
paper draws its calibration labels at random ([BDA] Appendix E.6). This subpackage chooses them.

* Scores: ``expected_brier_reduction`` (the expected drop of the pool's posterior Brier from
  one label, closed form through the count totals; ``expected_brier``, ``reduction_scores``,
  ``posterior_proba``) and ``vote_disagreement`` (the agents' vote entropy, ``ROUNDS``).
* The refit behind them (``_totals``): ``LabelTotals``, ``label_totals``, ``add_label``,
  ``reliability_from_totals``, ``totals_log_posterior``, ``arm_theta``, ``check_arm``, ``ARMS``,
  ``DEFAULT_PARAMS``.
* Selection: ``select_batch`` (``Selection``; ``STRATEGIES``, ``BATCH_MODES``), seeded, b tasks
  at a time; ``acquisition_params`` (``MIN_CV_LABELS``), ``labeled_mask``.
* Gold files: ``read_gold`` (``GoldLabels``, ``GOLD_HEADER``), ``apply_gold``, ``keep_labels``.
* ``label_next`` (``LabelPlan``): the library side of ``bda label next``.
* ``label_curve`` (``LabelCurve``, ``DEFAULT_BUDGETS``): a label-efficiency curve on a pool and
  a disjoint holdout (benchmarks/study_active.py).

>>> from bda_jax import tally
>>> from bda_jax.simulate import simulate_council
>>> pool = keep_labels(tally(simulate_council(0, 40, [0.8, 0.7, 0.6])), range(10))
>>> sel = select_batch(pool, 3, "expected-brier", seed=0)
>>> len(sel.index), sel.params_source
(3, 'cv')
"""
from ._brier import expected_brier, expected_brier_reduction, posterior_proba, reduction_scores
from ._curve import DEFAULT_BUDGETS, LabelCurve, label_curve
from ._disagreement import ROUNDS, vote_disagreement
from ._gold import GOLD_HEADER, GoldLabels, apply_gold, keep_labels, read_gold
from ._next import LabelPlan, label_next
from ._select import (BATCH_MODES, MIN_CV_LABELS, STRATEGIES, Selection, acquisition_params,
                      labeled_mask, select_batch)
from ._totals import (ARMS, DEFAULT_PARAMS, LabelTotals, add_label, arm_theta, check_arm,
                      label_totals, reliability_from_totals, totals_log_posterior)

__all__ = [
    "expected_brier", "expected_brier_reduction", "posterior_proba", "reduction_scores",
    "ROUNDS", "vote_disagreement",
    "ARMS", "DEFAULT_PARAMS", "LabelTotals", "add_label", "arm_theta", "check_arm",
    "label_totals", "reliability_from_totals", "totals_log_posterior",
    "BATCH_MODES", "MIN_CV_LABELS", "STRATEGIES", "Selection", "acquisition_params",
    "labeled_mask", "select_batch",
    "GOLD_HEADER", "GoldLabels", "apply_gold", "keep_labels", "read_gold",
    "LabelPlan", "label_next",
    "DEFAULT_BUDGETS", "LabelCurve", "label_curve",
]
