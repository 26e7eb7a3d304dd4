"""The train-fitted candidate prior pi0 of [BDA] Eq. 4 / Appendix D.6 (``class_log_prior``)."""
import numpy as np
import pytest
from scipy.optimize import minimize

import bda_jax as bda
from bda_jax import class_log_prior
from reference import random_counts


def _counts(rng, T, K, ragged):
    N, e, c, Kt = random_counts(rng, T, 2, K, max_moves=2, ragged=ragged)
    gold = (rng.random(T) * Kt).astype(int)
    gold[rng.random(T) < 0.1] = -1                                   # some unlabeled tasks
    return bda.Counts.from_arrays(N=N, e=e, c=c, gold=gold, K=Kt), gold, Kt


def test_fixed_K_is_the_smoothed_gold_frequency():
    rng = np.random.default_rng(0)
    counts, gold, _ = _counts(rng, 80, 4, ragged=False)
    w = (rng.random(80) < 0.6).astype(np.float32)
    n = np.array([np.sum((gold == k) & (w > 0)) for k in range(4)], float)
    expected = np.log((n + 1.0) / (n.sum() + 4.0))
    np.testing.assert_allclose(class_log_prior(counts, w), expected, atol=1e-5)
    n_all = np.array([np.sum(gold == k) for k in range(4)], float)
    np.testing.assert_allclose(class_log_prior(counts, smoothing=0.5),
                               np.log((n_all + 0.5) / (n_all.sum() + 2.0)), atol=1e-5)


def _luce_mle(gold, Kt, w, K, s):
    """The penalized Luce fit by a generic optimizer: maximize sum_t w_t log(pi_g / pi(M_t)) +
    s sum_k log(pi_k / pi(all))."""
    def nll(theta):
        p = np.exp(theta - theta.max())
        ll = s * np.sum(np.log(p / p.sum()))
        for t in np.flatnonzero((w > 0) & (gold >= 0)):
            ll += w[t] * np.log(p[gold[t]] / p[:Kt[t]].sum())
        return -ll
    theta = minimize(nll, np.zeros(K), method="BFGS", options={"gtol": 1e-9}).x
    p = np.exp(theta - theta.max())
    return np.log(p / p.sum())


def test_ragged_K_is_the_penalized_luce_fit():
    rng = np.random.default_rng(1)
    counts, gold, Kt = _counts(rng, 120, 4, ragged=True)
    w = (rng.random(120) < 0.8).astype(np.float32)
    np.testing.assert_allclose(class_log_prior(counts, w), _luce_mle(gold, Kt, w, 4, 1.0),
                               atol=2e-4)


def test_ragged_K_removes_the_frequency_bias():
    # gold uniform over each task's own candidates: the right prior is uniform, while the raw
    # gold frequency under-weights the slots only the larger tasks have
    rng = np.random.default_rng(2)
    T = 6000
    Kt = rng.integers(2, 5, T)
    gold = (rng.random(T) * Kt).astype(int)
    z = np.zeros((T, 1, 4), int)
    counts = bda.Counts.from_arrays(N=np.zeros((T, 1), int), e=z, c=z, gold=gold, K=Kt)
    p = np.exp(np.asarray(class_log_prior(counts)))
    np.testing.assert_allclose(p, 0.25, atol=0.02)
    freq = np.bincount(gold, minlength=4) / T
    assert freq[3] < 0.1 < 0.3 < freq[0]                     # what the frequency would say


def test_only_training_gold_enters():
    rng = np.random.default_rng(3)
    counts, gold, Kt = _counts(rng, 60, 3, ragged=True)
    w = (rng.random(60) < 0.5).astype(np.float32)
    moved = gold.copy()
    out = (w == 0) & (gold >= 0)
    moved[out] = 0
    other = bda.Counts.from_arrays(N=counts.N, e=counts.e, c=counts.c, gold=moved, K=Kt)
    assert np.asarray(class_log_prior(counts, w)).tobytes() == \
        np.asarray(class_log_prior(other, w)).tobytes()


@pytest.mark.parametrize("smoothing", [0.0, 1.0])
def test_a_slot_no_training_task_offers(smoothing):
    # K_max = 3 but every training task has K = 2: slot 2 keeps only its pseudo-count share
    gold = np.array([0, 0, 0, 1, 0, 2])
    Kt = np.array([2, 2, 2, 2, 2, 3])
    w = np.array([1, 1, 1, 1, 1, 0], np.float32)
    z = np.zeros((6, 1, 3), int)
    counts = bda.Counts.from_arrays(N=np.zeros((6, 1), int), e=z, c=z, gold=gold, K=Kt)
    lp = np.asarray(class_log_prior(counts, w, smoothing=smoothing))
    assert np.isfinite(lp[:2]).all() and np.exp(lp).sum() == pytest.approx(1.0, abs=1e-6)
    if smoothing == 0.0:
        assert lp[2] == -np.inf                                    # no evidence, no mass
        assert np.exp(lp[0] - lp[1]) == pytest.approx(4.0, rel=1e-5)
    else:
        np.testing.assert_allclose(lp, _luce_mle(gold, Kt, w, 3, 1.0), atol=2e-4)
