"""The aggregator base class: one ``fit`` / ``predict_proba`` / ``predict`` surface."""
from __future__ import annotations

from typing import Sequence

import jax
import numpy as np

from .._core.counts import Counts, tally
from .._core.decisions import decide
from .._core.errors import DataError

__all__ = ["Aggregator"]


class Aggregator:
    """Base of every council aggregator (crowd-kit / scikit-learn surface): a subclass sets its
    hyperparameters in ``__init__``, implements ``fit(data) -> self`` and ``_log_proba(counts)``
    ([T, K], -inf on padding slots), and inherits ``predict_proba`` [T, K] (0 on padding) and
    ``predict`` [T] (argmax, seeded random ties, [BDA] Appendix D.6). ``data`` is a
    :class:`~bda_jax.Counts` or a list of traces (tallied with the agent list seen at fit time,
    so train and test agree)."""

    seed: int = 0
    agents_: tuple[str, ...] | None = None

    def _counts(self, data, **options) -> Counts:
        if isinstance(data, Counts):
            return data
        if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
            return tally(data, agents=self.agents_, **options)
        raise DataError(f"expected Counts or a list of traces, got {type(data).__name__}",
                        field="data")

    def predict_proba(self, data) -> np.ndarray:
        counts = self._counts(data)
        return np.where(counts.mask, np.exp(np.asarray(self._log_proba(counts))), 0.0)

    def predict(self, data, key=None) -> np.ndarray:
        """Chosen candidate slot [T] (argmax; exact ties broken at random from ``key`` or the
        estimator's ``seed``)."""
        counts = self._counts(data)
        key = jax.random.key(self.seed) if key is None else key
        return np.asarray(decide(key, self._log_proba(counts), counts.mask).index)
