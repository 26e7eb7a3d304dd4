"""scikit-learn compatibility of the estimators (docs/evaluation.md and docs/crowd.md,
"scikit-learn compatibility"): hyperparameters are the constructor's arguments, stored unchanged;
``get_params`` / ``set_params`` / ``sklearn.base.clone`` round trips; nested ``base__<name>``
parameters of the recalibration wrappers; scikit-learn's own estimator checks that need no data;
their fit-time checks re-run on our inputs; a ``ParameterGrid`` search on a simulated council.

scikit-learn is a test dependency only: the package implements the protocol itself.
"""
import inspect
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import ParameterGrid
from sklearn.utils import estimator_checks
from sklearn.utils.validation import check_is_fitted

from bda_jax import DataError, tally
from bda_jax import crowd
from bda_jax.aggregators import (BDA, Aggregator, BDAAuto, BDAConfusion, BDAPerAgent,
                                 BDAShared, BDATempered, BestMember, CouncilDawidSkene,
                                 GatedVote, IsotonicRecalibrated, LogisticStacking, Majority,
                                 TemperatureScaled, VerbalizedVote)
from bda_jax.metrics import brier_mc
from bda_jax.simulate import simulate_council

# every estimator class with a non-default value for (nearly) every parameter: each value is a
# fresh object, so "stored unchanged" can be checked by identity
AGGREGATORS = {
    Majority: lambda: dict(rounds="all", seed=3),
    LogisticStacking: lambda: dict(l2_grid=[0.1, 1.0], n_folds=3, seed=1, steps=7,
                                   learning_rate=0.1, optimizer="adam", intercept=False),
    GatedVote: lambda: dict(seed=2),
    BestMember: lambda: dict(seed=2),
    VerbalizedVote: lambda: dict(seed=1, confidence="share", missing=0.5),
    IsotonicRecalibrated: lambda: dict(base=VerbalizedVote(confidence="share"), n_folds=3,
                                       seed=1),
    TemperatureScaled: lambda: dict(base=GatedVote(seed=4), n_folds=2, seed=5),
    CouncilDawidSkene: lambda: dict(model="confusion", init="spectral", n_iter=7, tol=1e-4,
                                    smoothing=0.1, votes="all", prior="uniform", seed=2),
    BDA: lambda: dict(arm="bda-confusion", grid=[[0.5, 1.0]], n_folds=3, seed=1,
                      basis="propose", class_prior=False),
    BDAShared: lambda: dict(n_folds=3, seed=2, basis="round0", class_prior=True),
    BDAPerAgent: lambda: dict(grid=[[1.0, 4.0, 1.0, 1.0]], n_folds=4, seed=3),
    BDATempered: lambda: dict(n_folds=3, seed=4, class_prior=False),
    BDAConfusion: lambda: dict(n_folds=3, seed=5, class_prior=True),
    BDAAuto: lambda: dict(variants=["bda-per-agent", "bda-confusion"], criterion="best-row",
                          n_folds=3, seed=6, basis="all"),
}
CROWD = {
    crowd.MajorityVote: lambda: dict(default_skill=0.5, on_missing_skill="value",
                                     tie_break="first", seed=1, votes="all"),
    crowd.Wawa: lambda: dict(tie_break="first", seed=2, votes="all"),
    crowd.DawidSkene: lambda: dict(n_iter=7, tol=1e-3, initial_error_strategy="addition",
                                   model="one-coin", init="spectral", prior="uniform",
                                   smoothing=0.1, error_prior=2.0, criterion="posterior",
                                   votes="all", dtype="float32", tie_break="first", seed=3),
    crowd.OneCoinDawidSkene: lambda: dict(n_iter=5, init=np.full((4, 2), 0.5)),
    crowd.SpectralDawidSkene: lambda: dict(n_iter=5, prior="estimate"),
    crowd.GLAD: lambda: dict(n_iter=5, tol=1e-3, silent=False,
                             labels_priors=pd.Series({"x": 0.4, "y": 0.6}),
                             alphas_priors_mean=0.5, betas_priors_mean=[1.0, 2.0],
                             m_step_max_iter=3, m_step_tol=0.1, votes="all", tie_break="first",
                             seed=4),
    crowd.MACE: lambda: dict(n_restarts=2, n_iter=3, method="em", smoothing=0.1,
                             default_noise=0.3, alpha=0.6, beta=0.4, random_state=7, verbose=1,
                             votes="all", tie_break="first"),
    crowd.SemiSupervisedBDA: lambda: dict(model="one-coin", kappa_grid=[4.0, 8.0],
                                          tau_grid=(1.0,), folds=3, seed=2, n_iter=20, tol=1e-4,
                                          tie_break="first"),
}
SETTINGS = {**AGGREGATORS, **CROWD}
CLASSES = list(SETTINGS)
REQUIRED = {IsotonicRecalibrated: lambda: {"base": Majority()},
            TemperatureScaled: lambda: {"base": Majority()}}


def _default(cls):
    """``cls`` with its required arguments only."""
    return cls(**REQUIRED.get(cls, dict)())


def _names(cls) -> list[str]:
    return sorted(p for p in inspect.signature(cls.__init__).parameters if p != "self")


def _same(a, b) -> bool:
    """Equal settings: estimators by type and parameters (recursively), anything else by value
    (joblib's hash: arrays and Series included)."""
    if hasattr(a, "get_params"):
        return type(a) is type(b) and a.get_params(deep=False).keys() == \
            b.get_params(deep=False).keys() and all(
                _same(v, b.get_params(deep=False)[k]) for k, v in a.get_params(deep=False).items())
    return joblib.hash(a) == joblib.hash(b)


@pytest.fixture(scope="module")
def council():
    return tally(simulate_council(0, 24, [0.74, 0.68, 0.68]))


@pytest.fixture(scope="module")
def held_out():
    return tally(simulate_council(1, 24, [0.74, 0.68, 0.68]), agents=("A1", "A2", "A3"))


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"task": np.repeat(np.arange(8), 3), "worker": list("abc") * 8,
                         "label": rng.choice(["x", "y"], 24)})


# ---------------------------------------------------------------- the parameter protocol


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_parameters_are_the_constructor_arguments_stored_unchanged(cls):
    settings = SETTINGS[cls]()
    est = cls(**settings)
    params = est.get_params(deep=False)
    assert sorted(params) == _names(cls)
    for name, value in settings.items():
        assert params[name] is value, name                 # the very object passed
    # __init__ sets its parameters and nothing else (fitted state comes with fit, ending in _)
    assert set(vars(est)) == set(_names(cls))
    assert not any(name.endswith("_") for name in params)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_set_params_then_clone_round_trip(cls):
    settings = SETTINGS[cls]()
    est = _default(cls)
    assert est.set_params() is est
    assert est.set_params(**settings) is est
    params = est.get_params(deep=False)
    for name, value in settings.items():
        assert params[name] is value, name
    twin = clone(est)
    assert type(twin) is cls and twin is not est
    assert _same(twin, est) and _same(twin, cls(**settings))
    for name, value in twin.get_params(deep=False).items():
        if hasattr(value, "get_params"):
            assert value is not params[name]               # nested estimators are cloned too


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_set_params_refuses_an_unknown_name(cls):
    est = cls(**SETTINGS[cls]())
    before = joblib.hash(est.get_params(deep=False))
    with pytest.raises(DataError) as err:
        est.set_params(not_a_parameter=1)
    assert err.value.field == "not_a_parameter" and "not_a_parameter" in str(err.value)
    with pytest.raises(DataError) as err:
        est.set_params(seed__x=1)                          # seed is no estimator
    assert err.value.field == "seed"
    assert joblib.hash(est.get_params(deep=False)) == before


@pytest.mark.parametrize("cls", [IsotonicRecalibrated, TemperatureScaled],
                         ids=lambda c: c.__name__)
def test_nested_parameters_of_the_wrappers(cls):
    base = VerbalizedVote(confidence="share", seed=4)
    est = cls(base, n_folds=3)
    deep = est.get_params()
    assert deep["base"] is base
    assert {k: deep[f"base__{k}"] for k in ("seed", "confidence", "missing")} == \
        {"seed": 4, "confidence": "share", "missing": None}
    assert set(deep) == {"base", "n_folds", "seed", "base__seed", "base__confidence",
                         "base__missing"}
    est.set_params(base__seed=9, base__missing=0.25, n_folds=2)
    assert (base.seed, base.missing, est.n_folds) == (9, 0.25, 2)
    # a new base and its settings in one call: the settings reach the new base
    est.set_params(base=GatedVote(), base__seed=5)
    assert type(est.base) is GatedVote and est.base.seed == 5 and base.seed == 9
    with pytest.raises(DataError) as err:
        est.set_params(base__confidence="mean")            # GatedVote has no such parameter
    assert err.value.field == "confidence"
    twin = clone(est)
    assert twin.base is not est.base and _same(twin, est)
    assert twin.get_params()["base__seed"] == 5


# ---------------------------------------------------------------- scikit-learn's own checks

# scikit-learn's estimator checks that read no data. The others fit on [n_samples, n_features]
# arrays from make_blobs and friends (check_estimators_overwrite_params,
# check_dont_overwrite_parameters, check_fit_idempotent, check_n_features_in, ...): our inputs
# are Counts, traces and crowd DataFrames, so test_fit_leaves_parameters_alone runs the logic of
# the first two on those instead. Not applied: check_do_not_raise_errors_in_init_or_set_params
# (constructors refuse bad values at once with a DataError, the package's convention; values
# given by set_params are checked when fit starts, test_set_params_values_are_checked_at_fit).
SKLEARN_CHECKS = ["check_estimator_cloneable", "check_get_params_invariance", "check_set_params",
                  "check_parameters_default_constructible", "check_no_attributes_set_in_init",
                  "check_estimator_repr", "check_mixin_order", "check_estimator_tags_renamed",
                  "check_valid_tag_types"]


@pytest.mark.parametrize("check", SKLEARN_CHECKS)
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_sklearn_estimator_checks(cls, check):
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # check_set_params warns when set_params validates
        getattr(estimator_checks, check)(cls.__name__, cls(**SETTINGS[cls]()))
        getattr(estimator_checks, check)(cls.__name__, _default(cls))


# ---------------------------------------------------------------- fitted state


def _fit(est, council, frame):
    return est.fit(frame) if isinstance(est, crowd.MajorityVote) else est.fit(council)


# cheap fits only (no EM, no grid search): enough to see fitted state come and go
FITTED = [lambda: Majority(seed=3), lambda: GatedVote(seed=1), lambda: BestMember(seed=2),
          lambda: VerbalizedVote(confidence="share"),
          lambda: IsotonicRecalibrated(VerbalizedVote(), n_folds=2, seed=1),
          lambda: crowd.MajorityVote(tie_break="first"), lambda: crowd.Wawa(seed=4)]


@pytest.mark.parametrize("make", FITTED, ids=lambda m: type(m()).__name__)
def test_fit_leaves_parameters_alone_and_clone_is_unfitted(make, council, frame):
    est = make()
    before_params = joblib.hash(est.get_params())
    before = dict(vars(est))
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert _fit(est, council, frame) is est
    check_is_fitted(est)
    # check_estimators_overwrite_params: fit changes no parameter, not even inside one
    assert joblib.hash(est.get_params()) == before_params
    # check_dont_overwrite_parameters: fit adds only fitted (..._) or private (_...) attributes
    # and rebinds no public one
    added = [k for k in vars(est) if k not in before and not k.startswith("_")]
    assert added and all(k.endswith("_") for k in added), added
    assert all(vars(est)[k] is v for k, v in before.items())
    twin = clone(est)
    assert _same(twin, est)
    assert not [k for k in vars(twin) if k.endswith("_") or k.startswith("_")]
    with pytest.raises(NotFittedError):
        check_is_fitted(twin)
    # the clone fits to the same result
    np.testing.assert_array_equal(np.asarray(_fit(twin, council, frame).predict_proba(
        frame if isinstance(est, crowd.MajorityVote) else council)), np.asarray(
        est.predict_proba(frame if isinstance(est, crowd.MajorityVote) else council)))


@pytest.mark.parametrize("cls, bad, field", [
    (LogisticStacking, {"optimizer": "sgd"}, "optimizer"),
    (LogisticStacking, {"l2_grid": []}, "l2_grid"),
    (VerbalizedVote, {"missing": "half"}, "missing"),
    (IsotonicRecalibrated, {"base": 3}, "base"),
    (CouncilDawidSkene, {"votes": "some"}, "votes"),
    (crowd.MajorityVote, {"on_missing_skill": "value"}, "default_skill"),
    (crowd.DawidSkene, {"model": "three-coin"}, "model"),
    (crowd.GLAD, {"silent": "no"}, "silent"),
    (crowd.MACE, {"seed": 1, "random_state": 2}, "random_state"),
    (crowd.SemiSupervisedBDA, {"kappa_grid": [0.0]}, "kappa_grid"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_set_params_values_are_checked_at_fit(cls, bad, field, council, frame):
    est = _default(cls).set_params(**bad)                  # set_params checks names only
    for name, value in bad.items():
        assert getattr(est, name) is value
    with pytest.raises(DataError) as err:
        est.fit(frame if cls in CROWD else council)
    assert err.value.field == field
    with pytest.raises(DataError) as err:                  # the constructor refuses at once
        cls(**{**REQUIRED.get(cls, dict)(), **bad})
    assert err.value.field == field


def test_an_init_with_var_keyword_is_refused():
    class Loose(Aggregator):
        def __init__(self, **settings):
            self.settings = settings

    with pytest.raises(TypeError, match=r"Loose.__init__ takes \*\*settings"):
        Loose(seed=1).get_params()
    with pytest.raises(TypeError, match="names every hyperparameter"):
        clone(Loose(seed=1))


def test_defaults_stay_none_until_fit():
    """Constructors store None as given (clone and get_params see the arguments); the class
    default is resolved when fitting."""
    assert crowd.OneCoinDawidSkene().get_params()["prior"] is None
    assert {k: crowd.DawidSkene().get_params()[k] for k in ("model", "init", "prior")} == \
        {"model": None, "init": None, "prior": None}
    mace = crowd.MACE(random_state=7)
    assert (mace.seed, mace.random_state) == (None, 7)
    assert clone(mace).get_params()["random_state"] == 7


# ---------------------------------------------------------------- a grid search


def test_parameter_grid_search_on_a_simulated_council(council, held_out):
    template = IsotonicRecalibrated(VerbalizedVote(), n_folds=2)
    grid = ParameterGrid({"base__confidence": ["mean", "share"], "n_folds": [2, 3]})
    scores = {}
    for params in grid:
        est = clone(template).set_params(**params).fit(council)
        assert all(est.get_params()[k] == v for k, v in params.items())
        proba = est.predict_proba(held_out)
        # the same as the estimator built directly with those settings
        direct = IsotonicRecalibrated(VerbalizedVote(confidence=params["base__confidence"]),
                                      n_folds=params["n_folds"]).fit(council)
        np.testing.assert_array_equal(proba, direct.predict_proba(held_out))
        scores[tuple(sorted(params.items()))] = float(brier_mc(proba, held_out.gold,
                                                               mask=held_out.mask))
    # the template was never fitted nor changed
    assert _same(template, IsotonicRecalibrated(VerbalizedVote(), n_folds=2))
    assert "base_" not in vars(template) and "agents_" not in vars(template.base)
    assert len(scores) == 4 and len(set(scores.values())) > 1      # the settings reach the fit
    best = dict(min(scores, key=scores.get))
    refit = clone(template).set_params(**best).fit(council)
    assert float(brier_mc(refit.predict_proba(held_out), held_out.gold,
                          mask=held_out.mask)) == min(scores.values())
