"""Aggregators with one interface (crowd-kit/sklearn surface): ``fit`` returns self,
``predict_proba`` gives [T, K] probabilities over each task's candidates (0 on padding slots),
``predict`` the chosen slot with seeded random ties ([BDA] Appendix D.6). Fitted attributes
end in ``_``. ``fit``/``predict`` accept :class:`Counts` or a list of traces (tallied with the
agent list seen at fit time, so train and test agree).
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from .._core.counts import Counts
from .._core.decisions import majority
from .._core.errors import DataError
from .._core.fitting import fit_confusion, prior_from_reliability, reliability, class_log_prior
from .._core.kernels import confusion_log_posterior, onecoin_log_posterior, table_size_for
from ._base import Aggregator
from .._core.selection import GRID_COLUMNS, GRIDS, device_counts, nested_grid_search, training_folds, training_weights

__all__ = ["Majority", "BDA", "BDAShared", "BDAPerAgent", "BDATempered", "BDAConfusion"]


class Majority(Aggregator):
    """Plurality of round-0 endorsements; confidence = the winner's vote share (Appendix B.1)."""

    def __init__(self, rounds: str = "round0", seed: int = 0):
        self.rounds, self.seed = rounds, seed

    def fit(self, data=None) -> "Majority":
        """No parameters: majority needs no labels. Records the agent list of ``data``."""
        if data is not None:
            self.agents_ = self._counts(data).agents
        return self

    def _log_proba(self, counts):
        shares = majority(jax.random.key(0), counts, rounds=self.rounds).proba
        return jnp.where(counts.mask, jnp.log(shares), -jnp.inf)

    def predict(self, data, key=None) -> np.ndarray:
        counts = self._counts(data)
        key = jax.random.key(self.seed) if key is None else key
        return np.asarray(majority(key, counts, rounds=self.rounds).index)


class BDA(Aggregator):
    """Supervised BDA arm; hyperparameters chosen by k-fold CV on the multiclass Brier.

    Arms: ``"bda-shared"`` (Eq. 3 with kappa = 0), ``"bda-per-agent"`` (Eq. 3), ``"bda-tempered"``
    (Eq. 3 with a temperature), ``"bda-confusion"`` (Eq. 4 with Dirichlet rows). ``basis``
    ("all", "propose", "round0") chooses which moves estimate the reliabilities (Table 7) when
    fitting from traces. ``class_prior`` uses the training gold frequencies as pi0.

    Fitted: ``params_`` (dict of the selected hyperparameters), ``cv_brier_`` (mean CV Brier per
    grid row), ``reliability_`` [I] (one-coin arms), ``alpha_``/``beta_`` [I] (one-coin arms),
    ``confusion_`` [I, K, K] and ``label_space_`` ("semantic" when every task shares one candidate
    list, else "positional"; confusion arm), ``log_prior_``, ``agents_``.
    """

    def __init__(self, arm: str = "bda-per-agent", *, grid=None, n_folds: int = 5, seed: int = 0,
                 basis: str = "all", class_prior: bool = False):
        if arm not in GRIDS:
            raise DataError(f"unknown BDA arm {arm!r}; expected one of {sorted(GRIDS)}",
                            field="arm")
        if basis not in ("all", "propose", "round0"):
            raise DataError(f"basis must be 'all', 'propose' or 'round0', got {basis!r}",
                            field="basis")
        self.arm, self.grid, self.n_folds, self.seed = arm, grid, n_folds, seed
        self.basis, self.class_prior = basis, class_prior

    def fit(self, data, weights=None) -> "BDA":
        """Select hyperparameters by ``n_folds``-fold CV on the labeled tasks of ``data`` (or of
        ``weights`` > 0), then refit on all of them."""
        counts = self._counts(data)
        self.agents_ = counts.agents
        fit_counts = counts
        if self.basis != "all":
            if isinstance(data, Counts):
                raise DataError("basis other than 'all' needs traces, not counts", field="basis")
            option = {"propose": {"forces": ("propose",)}, "round0": {"max_round": 0}}[self.basis]
            fit_counts = self._counts(data, **option)
        w = training_weights(counts, weights)
        # folds over the training tasks only: labels outside them must not move fold boundaries
        folds = training_folds(counts, w, self.n_folds, self.seed)
        n = int(folds.max()) + 1
        inner_train = ((folds[None, :] != np.arange(n)[:, None]) & (folds >= 0)) * w
        inner_val = (folds[None, :] == np.arange(n)[:, None]) * w
        grid = np.asarray(GRIDS[self.arm] if self.grid is None else self.grid, np.float64)
        _, _, scores = nested_grid_search(self.arm, jnp.asarray(grid, jnp.float32), jnp.asarray(w)[None],
                               jnp.asarray(inner_train)[None], jnp.asarray(inner_val)[None],
                               device_counts(counts), device_counts(fit_counts), self.class_prior,
                               table_size_for(counts))
        theta = grid[int(np.argmin(np.asarray(scores[0])))]
        self.params_ = dict(zip(GRID_COLUMNS[self.arm], map(float, theta)))
        self.cv_brier_ = np.asarray(scores[0])
        wj = jnp.asarray(w)
        self.log_prior_ = (np.asarray(class_log_prior(fit_counts, wj)) if self.class_prior
                           else None)
        if self.arm == "bda-confusion":
            self.confusion_ = np.asarray(fit_confusion(fit_counts, theta[0], wj))
            self.label_space_ = "semantic" if counts.vocab is not None else "positional"
        else:
            self.reliability_ = np.asarray(reliability(fit_counts, wj))
            prior = prior_from_reliability(self.reliability_, *theta[:3])
            self.alpha_, self.beta_ = np.asarray(prior.alpha), np.asarray(prior.beta)
        return self

    def _log_proba(self, counts):
        if not hasattr(self, "params_"):
            raise DataError("fit the aggregator first", field="fit")
        if self.arm == "bda-confusion":
            if self.confusion_.shape[1] != counts.e.shape[2]:
                raise DataError(f"fitted on K = {self.confusion_.shape[1]} slots, got "
                                f"{counts.e.shape[2]}", field="K")
            return confusion_log_posterior(counts, self.confusion_, self.params_["tau"],
                                           self.log_prior_)
        return onecoin_log_posterior(counts, self.alpha_, self.beta_, self.params_["tau"],
                                     self.log_prior_)


def _arm_class(name, arm, doc):
    def __init__(self, **kwargs):
        BDA.__init__(self, arm, **kwargs)
    return type(name, (BDA,), {"__init__": __init__, "__doc__": doc})


BDAShared = _arm_class("BDAShared", "bda-shared", "BDA with one shared Beta prior (Eq. 3, kappa = 0).")
BDAPerAgent = _arm_class("BDAPerAgent", "bda-per-agent", "BDA with per-agent priors (Eq. 3).")
BDATempered = _arm_class("BDATempered", "bda-tempered", "Per-agent one-coin BDA with a CV temperature.")
BDAConfusion = _arm_class("BDAConfusion", "bda-confusion", "Tempered confusion-matrix BDA (Eq. 4).")
