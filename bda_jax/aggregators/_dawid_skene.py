"""Dawid–Skene EM as a council aggregator (Dawid and Skene 1979; [BDA] Appendix B.1 "DS-EM"):
the ``ds-em`` arm. The EM itself is :func:`bda_jax.crowd.dawid_skene_em` (its docstring states
the model, the M-step and the initializations); this class runs it on a council's counts."""
from __future__ import annotations

import numpy as np

from .._core.errors import DataError
from ..crowd import (DEFAULT_SMOOTHING, DSSwitch, check_dense_votes, check_ds_settings,
                     dawid_skene_em, ds_e_step, ds_switch_rate)
from ._base import Aggregator

__all__ = ["CouncilDawidSkene"]


class CouncilDawidSkene(Aggregator):
    """Unsupervised Dawid–Skene EM as an aggregator (``fit`` ignores gold).

    ``model``: "one-coin" (one accuracy per worker; the paper's DS-EM) or "confusion" (per-worker
    [K, K] rows; meaningful when all tasks share one candidate list — ``label_space_`` says
    "semantic" when ``Counts.vocab`` is set, else "positional"). ``init``: "majority",
    "spectral", "anti" (module docstring). ``votes``: "round0" (``e0``, the paper's basis) or
    "all" (``e``). ``prior``: "estimate" or "uniform" class prior. ``seed`` breaks exact ties in
    ``predict``. For crowd data frames see :mod:`bda_jax.crowd` (same EM).

    Fitted: ``params_`` (:class:`DSParams`), ``skills_`` [I], ``confusion_`` [I, K, K],
    ``prior_`` [K], ``log_likelihood_``, ``objective_``, ``n_iter_``, ``converged_``,
    ``log_proba_`` [T, K] (the fitted tasks' EM posteriors, -inf on padding), ``label_space_``,
    ``agents_``. ``predict_proba(data)`` runs one E-step with the fitted parameters: on the fit
    data it returns the EM posteriors. ``switch_rate(data)`` is the label-switch diagnostic of
    [BDA] Appendix F.10 with these settings (:func:`bda_jax.crowd.ds_switch_rate`).
    """

    def __init__(self, model: str = "one-coin", init="majority", n_iter: int = 100,
                 tol: float = 1e-6, smoothing: float = DEFAULT_SMOOTHING, votes: str = "round0",
                 prior: str = "estimate", seed: int = 0):
        self.model, self.init, self.n_iter, self.tol = model, init, n_iter, tol
        self.smoothing, self.votes, self.prior, self.seed = smoothing, votes, prior, seed
        self._check_params()

    def _check_params(self) -> None:
        check_ds_settings(self.model, self.prior, n_iter=self.n_iter, tol=self.tol,
                          smoothing=self.smoothing, init=self.init)
        if self.votes not in ("round0", "all"):
            raise DataError(f"votes must be 'round0' or 'all', got {self.votes!r}",
                            field="votes")

    def _votes(self, counts):
        return counts.e0 if self.votes == "round0" else counts.e

    def fit(self, data) -> "CouncilDawidSkene":
        """Run EM on ``data`` (Counts or traces); gold, if any, is not read."""
        counts = self._counts(data)
        self.agents_ = counts.agents
        res = dawid_skene_em(self._votes(counts), counts.mask, self.init, self.n_iter, self.tol,
                             self.smoothing, model=self.model, prior=self.prior)
        self.params_ = res.params
        self.skills_ = np.asarray(res.params.skill)
        self.confusion_ = np.asarray(res.params.confusion)
        self.prior_ = np.exp(np.asarray(res.params.log_prior))
        self.log_likelihood_ = float(res.log_likelihood)
        self.objective_ = float(res.objective)
        self.n_iter_ = int(res.n_iter)
        self.converged_ = bool(res.converged)
        self.log_proba_ = np.asarray(res.log_posterior)
        self.label_space_ = "semantic" if counts.vocab is not None else "positional"
        return self

    def _log_proba(self, counts):
        if not hasattr(self, "params_"):
            raise DataError("fit the aggregator first", field="fit")
        votes, mask = check_dense_votes(self._votes(counts), counts.mask,
                                        self.params_.skill.dtype)
        I, K = self.confusion_.shape[:2]
        if votes.shape[1] != I:
            raise DataError(f"fitted on I = {I} workers, got {votes.shape[1]}", field="agents")
        if votes.shape[2] != K:
            raise DataError(f"fitted on K = {K} slots, got {votes.shape[2]}", field="K")
        return ds_e_step(votes, mask, self.params_, model=self.model, prior=self.prior)[0]

    def switch_rate(self, data, against: str = "anti") -> DSSwitch:
        """The label-switch rate ([BDA] Appendix F.10, Table 16) of this arm's EM on ``data``
        (Counts or traces; gold is not read): the share of items on which the fit from this
        arm's ``init`` and the fit from ``against`` (default the mirror start, "anti") decide
        differently, with this arm's model, votes, prior, smoothing, loop settings and ``seed``
        (:func:`bda_jax.crowd.ds_switch_rate`). Needs no prior ``fit``."""
        if not isinstance(self.init, str):
            raise DataError("switch_rate compares two named initializations; this arm starts "
                            "from an explicit posterior", field="init")
        counts = self._counts(data)
        return ds_switch_rate(self._votes(counts), counts.mask, (self.init, against),
                              self.n_iter, self.tol, self.smoothing, model=self.model,
                              prior=self.prior, seed=self.seed)
