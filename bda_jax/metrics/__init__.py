"""Metrics of the BDA paper ([BDA] Appendix B, D.1-D.2) and the bootstrap of the routing audit
([Audit] Table 6). Conventions: ``docs/metrics.md``.

Scores (``_scores``): ``accuracy``, ``ece``, ``brier_top``, ``brier_mc`` (per task:
``brier_mc_per_task``, from ``_core.scoring``, which model selection minimizes), ``nll``
(``NLL_EPS``), ``auroc``, ``reliability_bins`` (``ReliabilityBins``), ``correctness``
(``Scored``), ``summary``.
Calibration toolkit (``_calibration``): ``calibration_error`` (top-label L1 = ECE, L2 = RMS, max =
MCE, debiased L2 of Kumar et al. 2019), ``classwise_calibration_error``, ``brier_decomposition``
(top-label Brier) and ``brier_decomposition_mc`` (multiclass Brier), both
``BrierDecomposition`` (Murphy 1973 plus the two within-bin terms).
Rates (``_ratio``): ``Ratio``, ``ratio``.
Bootstrap (``_bootstrap``): ``paired_bootstrap``, ``paired_bootstrap_stat`` (``BootstrapResult``;
JAX keys) and ``cluster_bootstrap``, ``cluster_bootstrap_batched``, ``ratio_bootstrap``
(``BootstrapCI``; integer seeds).
"""
from ._bootstrap import (BootstrapCI, BootstrapResult, cluster_bootstrap, cluster_bootstrap_batched,
                         paired_bootstrap, paired_bootstrap_stat, ratio_bootstrap)
from ._calibration import (BrierDecomposition, brier_decomposition, brier_decomposition_mc,
                           calibration_error, classwise_calibration_error)
from ._ratio import Ratio, ratio
from ._scores import (NLL_EPS, ReliabilityBins, Scored, accuracy, auroc, brier_mc, brier_top,
                      correctness, ece, nll, reliability_bins, summary)
from .._core.scoring import brier_mc_per_task

__all__ = [
    # scores
    "NLL_EPS", "ReliabilityBins", "Scored", "accuracy", "auroc", "brier_mc", "brier_mc_per_task",
    "brier_top", "correctness", "ece", "nll", "reliability_bins", "summary",
    # calibration toolkit
    "BrierDecomposition", "brier_decomposition", "brier_decomposition_mc", "calibration_error",
    "classwise_calibration_error",
    # rates
    "Ratio", "ratio",
    # bootstrap
    "BootstrapCI", "BootstrapResult", "cluster_bootstrap", "cluster_bootstrap_batched",
    "paired_bootstrap", "paired_bootstrap_stat", "ratio_bootstrap",
]
