"""Crowd aggregation on crowd-kit's surface, jitted over the sparse pair layout.

Estimators (crowd-kit's surface): ``MajorityVote``, ``Wawa``, ``DawidSkene``,
``OneCoinDawidSkene``, ``SpectralDawidSkene``, ``GLAD``, ``MACE``:
``fit(df, true_labels=None)`` with a DataFrame of columns ``task``, ``worker``, ``label`` (or
traces, :class:`~bda_jax.Counts`, :class:`PairCounts`); ``labels_``, ``probas_``, ``skills_``,
``errors_``, ``priors_``. The constructors take crowd-kit 1.4.2's arguments by name and in its
positional order (``MajorityVote(default_skill, on_missing_skill)`` and ``fit(df, skills)``,
``GLAD(..., silent, labels_priors, ...)``, ``MACE(..., random_state, verbose)``), ours after
them, keyword-only; ``tie_break="crowdkit"`` breaks ties in crowd-kit's column order
(docs/coming-from-crowd-kit.md). ``SemiSupervisedBDA``: BDA with worker priors fitted on a gold
subset, ``fit(df, true_labels=gold_subset)``. ``pairs_from_frame`` builds the
:class:`PairCounts` of a frame.

Votes: every EM reads one sparse vote type, :class:`CrowdVotes` (the nonzero (task, worker,
label) cells with their vote counts), built from :class:`PairCounts` by :func:`crowd_votes`,
from one row per label by :func:`votes_from_labels`, or from dense [T, I, K] votes by
:func:`votes_from_dense`.

The functional layer under the estimators, pure and jitted:

* Dawid–Skene (one-coin and confusion): :func:`dawid_skene_votes` (the EM), its entry points
  :func:`dawid_skene_pairs` and :func:`dawid_skene_em` (dense votes), :func:`dawid_skene_trace`,
  the steps :func:`ds_e_step`, :func:`ds_m_step`, :func:`ds_predict`, the starts
  :func:`ds_init_posterior` / :func:`spectral_skills`; results :class:`DSResult`,
  :class:`DSParams`; the label-switch diagnostic :func:`ds_switch_rate` -> :class:`DSSwitch`
  ([BDA] Appendix F.10: the share of items two initializations decide differently).
* GLAD: :func:`glad_em` -> :class:`GLADResult` (:class:`GLADParams`), the steps
  :func:`glad_e_step`, :func:`glad_m_step` and crowd-kit's loss :func:`glad_objective`; its
  M-step is SciPy's conjugate gradient in JAX, :func:`minimize_cg` (:func:`difference_line`
  adapts a value-and-gradient function to it).
* MACE: :func:`mace_em` -> :class:`MACEResult` (:class:`MACEParams`), :func:`mace_init`,
  :func:`mace_e_step` -> :class:`MACECounts`, :func:`mace_m_step`.
* Semi-supervised BDA: :func:`semisupervised_em` -> :class:`SemiSupervisedResult`,
  :func:`crowd_prior`, :func:`max_pair_votes`.

>>> import numpy as np
>>> votes = votes_from_labels([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [1, 1, 0, 0, 0, 0])
>>> r = glad_em(votes)
>>> np.argmax(np.asarray(r.log_posterior), axis=1).tolist()
[1, 0]
"""
from .._core.counts import PairCounts
from ._cg import CGResult, difference_line, minimize_cg
from ._dawid_skene import (DEFAULT_SMOOTHING, DSParams, DSResult, DSSwitch, check_ds_settings,
                           dawid_skene_em, dawid_skene_pairs, dawid_skene_trace,
                           dawid_skene_votes, ds_e_step, ds_init_posterior, ds_m_step,
                           ds_predict, ds_switch_rate, spectral_skills)
from ._estimators import (GLAD, MACE, DawidSkene, MajorityVote, OneCoinDawidSkene,
                          SpectralDawidSkene, Wawa, pairs_from_frame)
from ._glad import (GLADParams, GLADResult, glad_e_step, glad_em, glad_m_step,
                    glad_objective)
from ._mace import (MACECounts, MACEParams, MACEResult, mace_e_step, mace_em, mace_init,
                    mace_m_step)
from ._semisupervised import (SemiSupervisedBDA, SemiSupervisedResult, crowd_prior,
                              max_pair_votes, semisupervised_em)
from ._votes import (CrowdVotes, check_dense_votes, check_gold, crowd_votes, votes_from_dense,
                     votes_from_labels)

__all__ = ["DEFAULT_SMOOTHING", "CGResult", "CrowdVotes", "DSParams", "DSResult", "DSSwitch",
           "DawidSkene",
           "GLAD", "GLADParams", "GLADResult", "MACE", "MACECounts", "MACEParams",
           "MACEResult", "MajorityVote", "OneCoinDawidSkene", "PairCounts",
           "SemiSupervisedBDA", "SemiSupervisedResult", "SpectralDawidSkene", "Wawa",
           "check_dense_votes", "check_ds_settings", "check_gold", "crowd_prior",
           "crowd_votes", "dawid_skene_em", "dawid_skene_pairs", "dawid_skene_trace",
           "difference_line",
           "dawid_skene_votes", "ds_e_step", "ds_init_posterior", "ds_m_step", "ds_predict",
           "ds_switch_rate",
           "glad_e_step", "glad_em", "glad_m_step", "glad_objective", "mace_e_step", "mace_em",
           "mace_init", "mace_m_step", "max_pair_votes", "minimize_cg", "pairs_from_frame",
           "semisupervised_em", "spectral_skills", "votes_from_dense", "votes_from_labels"]
