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
from ._dawid_skene import (DEFAULT_SMOOTHING, DSParams, DSResult, check_dense_votes,
                           check_ds_settings, dawid_skene_em, dawid_skene_pairs,
                           dawid_skene_trace, ds_e_step, ds_init_posterior, ds_m_step,
                           spectral_skills)
from ._semisupervised import SemiSupervisedBDA

__all__ = ["DEFAULT_SMOOTHING", "DSParams", "DSResult", "check_dense_votes", "check_ds_settings",
           "dawid_skene_em", "dawid_skene_trace", "ds_e_step", "ds_init_posterior", "ds_m_step",
           "spectral_skills", "DawidSkene", "GLAD", "MACE", "MajorityVote", "OneCoinDawidSkene",
           "PairCounts", "SemiSupervisedBDA", "SpectralDawidSkene", "Wawa", "dawid_skene_pairs",
           "pairs_from_frame"]
