"""Crowd aggregation on crowd-kit's surface, jitted over the sparse pair layout.

``MajorityVote``, ``Wawa``, ``DawidSkene``, ``OneCoinDawidSkene``, ``SpectralDawidSkene``,
``GLAD``, ``MACE``:
``fit(df, true_labels=None)`` with a DataFrame of columns ``task``, ``worker``, ``label`` (or
traces, :class:`~bda_jax.Counts`, :class:`PairCounts`); ``labels_``, ``probas_``, ``skills_``,
``errors_``, ``priors_``. ``SemiSupervisedBDA``: BDA with worker priors fitted on a gold
subset, ``fit(df, true_labels=gold_subset)``. ``pairs_from_frame`` builds the
:class:`PairCounts` of a frame; ``dawid_skene_pairs`` is the EM itself.
"""
from .._core.counts import PairCounts
from ._estimators import (GLAD, MACE, DawidSkene, MajorityVote, OneCoinDawidSkene,
                         SpectralDawidSkene, Wawa, pairs_from_frame)
from ._dawid_skene import DSParams, DSResult, dawid_skene_pairs
from ._semisupervised import SemiSupervisedBDA

__all__ = ["DSParams", "DSResult", "DawidSkene", "GLAD", "MACE", "MajorityVote", "OneCoinDawidSkene",
           "PairCounts", "SemiSupervisedBDA", "SpectralDawidSkene", "Wawa", "dawid_skene_pairs",
           "pairs_from_frame"]
