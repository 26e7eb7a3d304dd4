"""Hyperparameters as constructor arguments: scikit-learn's ``get_params`` / ``set_params``
contract, without scikit-learn (docs/evaluation.md, "scikit-learn compatibility").

:class:`Params` is the mixin of the estimator bases (``bda_jax.aggregators.Aggregator`` and
the crowd estimators' base), so every estimator answers ``get_params`` / ``set_params`` and
``sklearn.base.clone`` rebuilds it unfitted. The contract is scikit-learn's ``BaseEstimator``
one:

* the parameters are the named parameters of the class's ``__init__`` (``self`` left out),
  sorted by name; ``__init__`` takes no ``*args`` / ``**kwargs`` and stores every parameter,
  unchanged, as the attribute of the same name (``clone`` checks that the constructor stored
  each value it was given: the very object);
* ``get_params(deep=True)`` also lists the parameters of every parameter that is itself an
  estimator (anything with ``get_params``) as ``<name>__<param>``;
* ``set_params(**params)`` sets them (``<name>__<param>`` on the nested estimator), validates
  nothing but the names, and returns ``self``;
* fitted state lives in attributes ending in ``_`` (or private ones starting with ``_``), so a
  fresh constructor call is an unfitted estimator with the same settings;
* ``__sklearn_tags__`` describes the estimator to scikit-learn's tools that ask
  (``check_is_fitted``); it is the one method that imports scikit-learn, and only when called.

Validation: ``set_params`` (like scikit-learn's) does not check values, so an estimator checks
its settings in ``_check_params``: its constructor calls it after storing them (a bad value
fails at once) and the estimator bases' ``fit`` wrappers call it before every fit (a bad value
given through ``set_params`` or an attribute fails there, with the same
:class:`~bda_jax.DataError`).
"""
from __future__ import annotations

import functools
import inspect

from .errors import DataError

__all__ = ["Params", "wrap_fit"]


def wrap_fit(cls, after) -> None:
    """Wrap the ``fit`` defined on ``cls`` (if any; once): the settings are checked first
    (``self._check_params()``: values given by ``set_params`` reach no fit unchecked) and, after
    the fit succeeds, ``after(self, bound)`` runs with the call's
    :class:`inspect.BoundArguments` (``bound.arguments`` by parameter name). The estimator
    bases call it from ``__init_subclass__`` to remember what a fit was given."""
    fit = cls.__dict__.get("fit")
    if fit is None or getattr(fit, "_wrapped_fit", False):
        return
    signature = inspect.signature(fit)

    @functools.wraps(fit)
    def checked_fit(self, *args, **kw):
        self._check_params()
        out = fit(self, *args, **kw)
        after(self, signature.bind(self, *args, **kw))
        return out

    checked_fit._wrapped_fit = True
    cls.fit = checked_fit


class Params:
    """scikit-learn's parameter protocol (``get_params`` / ``set_params``) for an estimator whose
    ``__init__`` names its hyperparameters and stores them unchanged (module docstring)."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The named parameters of ``cls.__init__``, sorted (``self`` left out). Raises
        ``TypeError`` for an ``__init__`` with ``*args`` or ``**kwargs``: its parameters could
        not be read back, and ``clone`` would silently drop them."""
        init = cls.__init__
        if init is object.__init__:
            return []
        names = []
        for p in list(inspect.signature(init).parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{cls.__name__}.__init__ takes {p}: an estimator names every "
                                "hyperparameter in its constructor (scikit-learn's contract), "
                                "so get_params, set_params and clone can read them back")
            names.append(p.name)
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters ``{name: value}`` (the attributes of the same name); with
        ``deep``, also ``<name>__<param>`` for every parameter of a parameter that is an
        estimator (scikit-learn's ``BaseEstimator.get_params``)."""
        out = {}
        for name in self._get_param_names():
            try:
                value = getattr(self, name)
            except AttributeError:
                raise AttributeError(f"{type(self).__name__} has no attribute {name!r}: its "
                                     "__init__ must store every parameter under its own name"
                                     ) from None
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{key}", v) for key, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params) -> "Params":
        """Set constructor parameters by name, ``<name>__<param>`` for a nested estimator's
        (scikit-learn's ``BaseEstimator.set_params``); returns ``self``. Values are not checked
        here (``fit`` checks them); a name that is not a parameter raises
        :class:`~bda_jax.DataError` naming it."""
        if not params:
            return self
        names = self._get_param_names()
        valid = self.get_params(deep=True)
        nested: dict[str, dict] = {}
        for key, value in params.items():
            name, delim, sub = key.partition("__")
            if name not in names:
                raise DataError(f"invalid parameter {name!r} for {type(self).__name__}; its "
                                f"parameters are {names}", field=key)
            if delim:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
                valid[name] = value
        for name, sub in nested.items():
            target = valid[name]
            if not hasattr(target, "set_params") or isinstance(target, type):
                raise DataError(f"parameter {name!r} of {type(self).__name__} is a "
                                f"{type(target).__name__}, not an estimator: "
                                f"{name}__{next(iter(sub))} names nothing", field=name)
            target.set_params(**sub)
        return self

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (what ``sklearn.utils.get_tags`` reads, e.g. inside
        ``sklearn.utils.validation.check_is_fitted``): no scikit-learn estimator type, inputs
        that are not [n_samples, n_features] arrays (Counts, traces, crowd data frames) and no
        separate target (the labels travel inside the data), deterministic given the seed,
        fit before predicting. scikit-learn is imported only here, when it asks."""
        from sklearn.utils import InputTags, Tags, TargetTags
        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    input_tags=InputTags(two_d_array=False), non_deterministic=False,
                    requires_fit=True)

    def _check_params(self) -> None:
        """Validate the settings (raise :class:`~bda_jax.DataError` naming the field); called by
        the constructor and at the start of every ``fit``. Nothing to check by default."""
