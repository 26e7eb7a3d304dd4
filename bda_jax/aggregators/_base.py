"""The aggregator base class: one ``fit`` / ``predict_proba`` / ``predict`` / ``predict_set``
surface."""
from __future__ import annotations

import copy
import inspect
from typing import Sequence

import jax
import numpy as np

from .._core.conformal import (check_alpha, check_set_method, conformal_scores,
                               conformal_threshold, prediction_sets)
from .._core.counts import Counts, tally
from .._core.decisions import decide
from .._core.errors import DataError
from .._core.params import Params, wrap_fit

__all__ = ["Aggregator"]


class Aggregator(Params):
    """Base of every council aggregator (crowd-kit / scikit-learn surface): a subclass sets its
    hyperparameters in ``__init__``, implements ``fit(data) -> self`` and ``_log_proba(counts)``
    ([T, K], -inf on padding slots), and inherits ``predict_proba`` [T, K] (0 on padding) and
    ``predict`` [T] (argmax, seeded random ties, [BDA] Appendix D.6). ``data`` is a
    :class:`~bda_jax.Counts` or a list of traces (tallied with the agent list seen at fit time,
    so train and test agree).

    scikit-learn's parameter protocol (``bda_jax._core.params.Params``): ``get_params(deep=True)``
    / ``set_params(**params)`` over the constructor's named parameters (``base__seed`` for a
    wrapper's base), so ``sklearn.base.clone`` gives an unfitted copy with the same settings.
    A subclass's ``__init__`` stores each parameter unchanged under its own name and checks
    them in ``_check_params``, which every ``fit`` runs first (docs/evaluation.md,
    "scikit-learn compatibility")."""

    seed: int = 0
    agents_: tuple[str, ...] | None = None

    def __init_subclass__(cls, **kwargs):
        # Every subclass ``fit`` checks the settings first and records its arguments after it
        # succeeds (not saved in model files: the name starts with "_"), so predict_set can
        # split the labeled tasks the estimator was fitted on and refit without its
        # calibration share.
        super().__init_subclass__(**kwargs)
        wrap_fit(cls, _record_fit)

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

    def predict_set(self, data, alpha: float, *, method: str = "lac", calibration=None,
                    fraction: float = 0.5, key=None, randomized: bool = True) -> np.ndarray:
        """Answer sets with coverage ``1 - alpha`` [T, K] (bool; False on padding slots): split
        conformal prediction over this estimator's posterior (``bda_jax._core.conformal``,
        docs/answer-sets.md; ``method``: ``"lac"`` or ``"aps"``).

        The calibration tasks are labeled tasks the posterior was not fitted on:

        * ``calibration=None`` (default): a seeded ``fraction`` of the labeled tasks this
          estimator was fitted on (those with a positive weight, if ``fit`` had weights). A
          copy of the estimator is refitted on the rest (their weights; the calibration tasks
          get weight 0) and gives both the calibration scores and the sets, so no calibration
          label reaches the posterior it calibrates. An estimator whose ``fit`` takes no
          ``weights`` reads no gold (Majority, the council DS-EM) and is not refitted.
          ``predict`` and ``predict_proba`` keep the full fit.
        * ``calibration=<Counts or traces>``: labeled tasks the caller guarantees this fit did
          not see (e.g. a later batch); this estimator scores them and predicts the sets.

        ``key`` (default: from ``seed``) draws the split and the APS uniforms. The refitted
        copy and its scores are kept until the next ``fit``, so repeated calls refit once.
        Raises :class:`~bda_jax.DataError` when there is no labeled calibration task or no
        recorded fit (a model loaded from a file: pass ``calibration=``).
        """
        alpha = check_alpha(alpha)
        check_set_method(method)
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0.0 < fraction < 1.0:
            raise DataError(f"fraction must be a number in (0, 1), got {fraction!r}",
                            field="fraction")
        key = jax.random.key(self.seed) if key is None else key
        k_split, k_scores, k_sets = jax.random.split(key, 3)
        model, cal = self._set_calibration_data(calibration, float(fraction), k_split)
        labeled = np.flatnonzero((np.asarray(cal.gold) >= 0) | np.asarray(cal.gold_missing))
        if not labeled.size:
            raise DataError("no labeled calibration task: predict_set needs tasks with gold",
                            field="calibration")
        cal = cal.take(labeled)
        scores = conformal_scores(model.predict_proba(cal), cal.gold, cal.mask, method=method,
                                  gold_missing=cal.gold_missing, key=k_scores,
                                  randomized=randomized)
        counts = self._counts(data)
        return np.asarray(prediction_sets(model.predict_proba(counts), counts.mask,
                                          conformal_threshold(scores, alpha), method=method,
                                          key=k_sets, randomized=randomized))

    def _set_calibration_data(self, calibration, fraction, key):
        """``(model, calibration counts)`` for :meth:`predict_set`."""
        if calibration is not None:
            return self, self._counts(calibration)
        record = self.__dict__.get("_fit_record")
        if record is None:
            raise DataError(f"this {type(self).__name__} has no recorded fit (a loaded model "
                            "file?): pass calibration= labeled tasks it was not fitted on",
                            field="calibration")
        cache_key = (fraction, tuple(np.asarray(jax.random.key_data(key)).ravel().tolist()))
        cached = self.__dict__.get("_set_calibration")
        if cached is not None and cached[0] == cache_key:
            return cached[1]
        args, kw = record
        bound = inspect.signature(type(self).fit).bind(self, *args, **kw)
        bound.apply_defaults()
        data = bound.arguments.get("data")
        counts = self._counts(data)
        weights = bound.arguments.get("weights")
        labeled = (np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing)
        if weights is not None:
            labeled &= np.asarray(weights) > 0
        pool = np.flatnonzero(labeled)
        n_cal = int(round(fraction * pool.size))
        if not 1 <= n_cal <= pool.size:
            raise DataError(f"{pool.size} labeled task(s) in the fit data: too few to hold out "
                            f"a calibration share of {fraction}", field="calibration")
        held = np.zeros(labeled.shape, bool)
        held[pool[np.asarray(jax.random.permutation(key, pool.size))[:n_cal]]] = True
        model = self
        if "weights" in bound.arguments:          # a supervised fit: refit without them
            base = labeled if weights is None else np.asarray(weights)
            model = self._unfitted_copy()
            refit_args, refit_kw = _call_arguments(
                bound, weights=np.where(held, 0.0, base).astype(np.float32))
            model.fit(*refit_args, **refit_kw)
        result = (model, counts.take(np.flatnonzero(held)))
        self.__dict__["_set_calibration"] = (cache_key, result)
        return result

    def _unfitted_copy(self) -> "Aggregator":
        """A deep copy without the recorded fit and its calibration (they hold the data)."""
        saved = {k: self.__dict__.pop(k) for k in ("_fit_record", "_set_calibration")
                 if k in self.__dict__}
        try:
            return copy.deepcopy(self)
        finally:
            self.__dict__.update(saved)


def _call_arguments(bound: inspect.BoundArguments, **override) -> tuple[list, dict]:
    """The positional and keyword arguments of a bound method call (``self`` left out), with
    ``override`` replacing named parameters."""
    args, kwargs = [], {}
    for i, (name, param) in enumerate(bound.signature.parameters.items()):
        if i == 0:
            continue                                   # self
        value = override.get(name, bound.arguments.get(name, param.default))
        if param.kind is param.VAR_POSITIONAL:
            args.extend(value)
        elif param.kind is param.VAR_KEYWORD:
            kwargs.update(value)
        elif param.kind is param.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[name] = value
    return args, kwargs


def _record_fit(model: Aggregator, bound: inspect.BoundArguments) -> None:
    model.__dict__["_fit_record"] = (bound.args[1:], bound.kwargs)
    model.__dict__.pop("_set_calibration", None)
