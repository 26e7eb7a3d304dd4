"""Metrics of the BDA paper ([BDA] Appendix B, D.1-D.2): accuracy, ECE, Brier, NLL, AUROC,
reliability bins, and the paired (and cluster) bootstrap. Conventions: ``docs/metrics.md``."""
from ._scores import (NLL_EPS, BootstrapResult, ReliabilityBins, Scored, accuracy, auroc,
                           brier_mc, brier_mc_per_task, brier_top, correctness, ece, nll,
                           paired_bootstrap, paired_bootstrap_stat, reliability_bins, summary)

__all__ = [
    "NLL_EPS", "BootstrapResult", "ReliabilityBins", "Scored", "accuracy", "auroc", "brier_mc",
    "brier_mc_per_task", "brier_top", "correctness", "ece", "nll", "paired_bootstrap",
    "paired_bootstrap_stat", "reliability_bins", "summary",
]
