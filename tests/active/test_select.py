"""Batch selection: seeded and deterministic, each strategy's ranking checked independently,
candidate subsampling, exclusions, and every bad option refused with the option's name."""
import numpy as np
import pytest

import bda_jax
from bda_jax import tally
from bda_jax.active import (DEFAULT_PARAMS, MIN_CV_LABELS, STRATEGIES, acquisition_params,
                            keep_labels, select_batch, vote_disagreement)
from bda_jax.simulate import simulate_council


@pytest.fixture(scope="module")
def full():
    """40 labeled binary tasks of the paper's regime."""
    return tally(simulate_council(0, 40, [0.74, 0.68, 0.68]))


@pytest.fixture(scope="module")
def counts(full):
    """The same tasks, 8 of them labeled."""
    return keep_labels(full, np.arange(0, 40, 5))


def test_same_inputs_same_selection_and_seeds_matter(counts):
    for strategy in STRATEGIES:
        a = select_batch(counts, 4, strategy, seed=11)
        b = select_batch(counts, 4, strategy, seed=11)
        assert a.index.tolist() == b.index.tolist(), strategy
        np.testing.assert_array_equal(a.score, b.score)
        assert len(set(a.index.tolist())) == 4
        assert not (np.asarray(counts.gold)[a.index] >= 0).any()     # unlabeled only
    draws = {tuple(select_batch(counts, 4, "random", seed=s).index) for s in range(5)}
    assert len(draws) == 5


def test_random_is_a_seeded_uniform_draw(counts):
    pool = np.flatnonzero(np.asarray(counts.gold) < 0)
    sel = select_batch(counts, 6, "random", seed=2)
    assert set(sel.index) <= set(pool) and np.isnan(sel.score).all()
    hits = np.zeros(40)
    for s in range(300):
        hits[select_batch(counts, 6, "random", seed=s).index] += 1
    assert hits[np.asarray(counts.gold) >= 0].sum() == 0
    share = hits[pool] / 300                      # each of 32 pool tasks: 6/32 ~ 0.19
    assert share.min() > 0.08 and share.max() < 0.32


def test_disagreement_takes_the_most_split_tasks(counts):
    d = vote_disagreement(counts)
    sel = select_batch(counts, 5, "disagreement", seed=0)
    pool = np.flatnonzero(np.asarray(counts.gold) < 0)
    rest = np.setdiff1d(pool, sel.index)
    assert d[sel.index].min() >= d[rest].max()
    np.testing.assert_allclose(sel.score, d[sel.index])
    # ties at the threshold are broken by the seed: different seeds, different members
    picks = {tuple(sorted(select_batch(counts, 5, "disagreement", seed=s).index))
             for s in range(6)}
    assert (d[pool] == d[sel.index].min()).sum() > 1 and len(picks) > 1


def test_uncertainty_first_pick_is_the_least_sure_posterior(counts):
    params = {"b": 0.55, "kappa": 2.0, "s": 8.0, "tau": 1.0}
    r = bda_jax.reliability(counts)
    prior = bda_jax.prior_from_reliability(r, 0.55, 2.0, 8.0)
    p = np.exp(np.asarray(bda_jax.onecoin_log_posterior(counts, prior.alpha, prior.beta),
                          np.float64))
    own = 1 - (p ** 2).sum(-1)
    own[np.asarray(counts.gold) >= 0] = -np.inf
    sel = select_batch(counts, 3, "uncertainty", params=params, seed=0)
    best = np.flatnonzero(own >= own.max() - 1e-6)        # tasks of one count pattern tie
    assert sel.index[0] in best
    assert sel.score[0] == pytest.approx(own.max(), abs=1e-5)


def test_candidate_subsample_and_exclusions(counts):
    sel = select_batch(counts, 3, "expected-brier", n_candidates=5, params="default", seed=4)
    assert sel.n_scored == 5 and sel.params_source == "default"
    assert sel.params == DEFAULT_PARAMS["bda-per-agent"]
    again = select_batch(counts, 3, "expected-brier", n_candidates=5, params="default", seed=4)
    assert again.index.tolist() == sel.index.tolist()
    banned = sel.index.tolist()
    other = select_batch(counts, 3, "expected-brier", params="default", exclude=banned, seed=4)
    assert not set(other.index) & set(banned)
    pool = np.asarray(counts.gold) < 0
    only = np.where(pool, True, False)
    only[np.flatnonzero(pool)[:2]] = False      # all but two pool tasks excluded
    left = select_batch(counts, 5, "uncertainty", exclude=only, seed=0)
    assert sorted(left.index.tolist()) == np.flatnonzero(pool)[:2].tolist()


def test_acquisition_hyperparameters_come_from_cv_once_there_are_labels(counts):
    params, source = acquisition_params(counts)
    assert source == "cv" and set(params) == {"b", "kappa", "s", "tau"}
    few = keep_labels(counts, np.flatnonzero(np.asarray(counts.gold) >= 0)[:MIN_CV_LABELS - 1])
    assert acquisition_params(few) == (DEFAULT_PARAMS["bda-per-agent"], "default")
    assert select_batch(few, 2, "expected-brier", seed=0).params_source == "default"


@pytest.mark.parametrize("kwargs,field", [
    ({"batch_size": 0}, "batch_size"), ({"strategy": "greedy"}, "strategy"),
    ({"batch": "all"}, "batch"), ({"rounds": "last"}, "rounds"), ({"seed": -1}, "seed"),
    ({"arm": "majority"}, "arm"), ({"n_candidates": 0}, "n_candidates"),
    ({"params": "best"}, "params"), ({"exclude": [99]}, "exclude"),
    ({"target": np.ones(3)}, "target"),
])
def test_bad_options_are_named(counts, kwargs, field):
    args = {"batch_size": 2, "strategy": "expected-brier", **kwargs}
    with pytest.raises(bda_jax.DataError) as err:
        select_batch(counts, args.pop("batch_size"), args.pop("strategy"), **args)
    assert err.value.field == field


def test_nothing_left_to_pick_is_an_error(full):
    with pytest.raises(bda_jax.DataError) as err:
        select_batch(full, 1, "random")
    assert "no unlabeled task" in str(err.value)
