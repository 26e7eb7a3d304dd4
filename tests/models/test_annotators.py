"""Bayesian one-coin Dawid–Skene, MACE and GLAD (bda_jax.models.annotators).

Every expected value is derived here independently (explicit loops over labels and classes,
scipy's logsumexp), never by running the code under test."""
import numpy as np
import jax
import jax.numpy as jnp
import pytest
from numpyro.infer import log_likelihood
from scipy.special import logsumexp

import bda_jax
from bda_jax.models import annotators as am, dawid_skene as ds, inference as inf
from reference import simulate_labels


# ------------------------------------------------------------------ independent references


def p_one_coin(theta, K):
    """P(label l | worker w, truth k) of the one-coin model, by loops: [W, K, K]."""
    W = len(theta)
    C = np.empty((W, K, K))
    for w in range(W):
        for k in range(K):
            for l in range(K):
                C[w, k, l] = theta[w] if l == k else (1 - theta[w]) / (K - 1)
    return C


def p_mace(theta, xi):
    """P(label | worker, truth) of MACE: spam indicator summed by hand (copy or strategy)."""
    W, K = xi.shape
    C = np.empty((W, K, K))
    for w in range(W):
        for k in range(K):
            for l in range(K):
                C[w, k, l] = theta[w] * (l == k) + (1 - theta[w]) * xi[w, l]
    return C


def p_glad(a, log_b, K, truth, l):
    s = 1.0 / (1.0 + np.exp(-a * np.exp(log_b)))
    return s if l == truth else (1 - s) / (K - 1)


def ref_joint(task, worker, label, T, K, log_prior, log_p):
    """joint[t, k] = log prior_k + sum over the labels of t of log_p(t, w, l, k), by loops."""
    joint = np.tile(np.asarray(log_prior, float), (T, 1))
    for t, w, l in zip(task, worker, label):
        for k in range(K):
            joint[t, k] += log_p(t, w, l, k)
    return joint


def ref_log_lik(joint, gold=None):
    ll = logsumexp(joint, axis=1)
    if gold is not None:
        ll = np.array([joint[t, g] if g >= 0 else ll[t] for t, g in enumerate(gold)])
    return ll


def messy_labels(rng, T, W, K):
    """Random labels with duplicates (a worker answering twice) and an unlabelled task (7)."""
    task, worker, label, _ = simulate_labels(rng, T, W, K, np.ones(K) / K, lambda w, t, z: np.ones(K) / K,
                                      p_answer=0.7)
    task = np.concatenate([task, task[:6]]); worker = np.concatenate([worker, worker[:6]])
    label = np.concatenate([label, label[:6]])
    keep = task != 7
    return task[keep], worker[keep], label[keep]


def majority_accuracy(task, label, T, K, truth):
    votes = np.zeros((T, K)); np.add.at(votes, (task, label), 1)
    return (votes.argmax(1) == truth).mean()


# ------------------------------------------------------------------ (a) log-lik vs loop reference

T_, W_, K_ = 25, 4, 3


def _case(name, rng):
    """(spec, data builder, params, reference joint) at random parameters."""
    task, worker, label = messy_labels(rng, T_, W_, K_)
    if name == "one_coin":
        pi, theta = rng.dirichlet(np.ones(K_)), rng.uniform(0.05, 0.95, W_)
        C = p_one_coin(theta, K_)
        joint = ref_joint(task, worker, label, T_, K_, np.log(pi), lambda t, w, l, k: np.log(C[w, k, l]))
        return am.ONE_COIN_SPEC, ds.prepare, {"pi": pi, "theta": theta}, joint, (task, worker, label)
    if name == "mace":
        theta, xi = rng.uniform(0.05, 0.95, W_), rng.dirichlet(np.ones(K_), size=W_)
        C = p_mace(theta, xi)
        joint = ref_joint(task, worker, label, T_, K_, np.full(K_, -np.log(K_)),
                          lambda t, w, l, k: np.log(C[w, k, l]))
        return am.MACE_SPEC, ds.prepare, {"theta": theta, "xi": xi}, joint, (task, worker, label)
    alpha, log_beta = rng.normal(0.5, 1.5, W_), rng.normal(0, 0.7, T_)
    joint = ref_joint(task, worker, label, T_, K_, np.full(K_, -np.log(K_)),
                      lambda t, w, l, k: np.log(p_glad(alpha[w], log_beta[t], K_, k, l)))
    return am.GLAD_SPEC, am.prepare_glad, {"alpha": alpha, "log_beta": log_beta}, joint, (task, worker, label)


def _jnp(params):
    return {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}


@pytest.mark.parametrize("name", ["one_coin", "mace", "glad"])
def test_log_lik_matches_reference(rng, name):
    spec, prep, params, joint, (task, worker, label) = _case(name, rng)
    gold = np.full(T_, -1); gold[[1, 2, 7]] = [0, 2, 1]        # task 7 has no label
    for g in (None, gold):
        data = prep(task, worker, label, K=K_, n_tasks=T_, n_workers=W_, gold=g)
        got = np.asarray(spec.log_lik(_jnp(params), data))
        np.testing.assert_allclose(got, ref_log_lik(joint, g), rtol=1e-5, atol=1e-4)
        # class posterior: softmax of the reference joint (unclamped tasks)
        free = np.ones(T_, bool) if g is None else g < 0
        post = np.exp(joint - logsumexp(joint, axis=1, keepdims=True))
        np.testing.assert_allclose(np.exp(np.asarray(spec.class_log_post(_jnp(params), data)))[free],
                                   post[free], atol=1e-5)


def test_prepare_glad_sorts_and_checks():
    d = am.prepare_glad([2, 0, 1, 0, 2], [0, 1, 1, 0, 0], [1, 0, 2, 2, 1], K=3, gold=[-1, 1, -1])
    assert (d.n_tasks, d.n_workers, d.K) == (3, 2, 3)
    v = d.votes                                   # the vote cells, sorted by (task, worker, label)
    np.testing.assert_array_equal(np.asarray(v.task), [0, 0, 1, 2])
    np.testing.assert_array_equal(np.asarray(v.agent), [0, 1, 1, 0])
    np.testing.assert_array_equal(np.asarray(v.label), [2, 0, 2, 1])
    np.testing.assert_array_equal(np.asarray(v.weight), [1, 1, 1, 2])   # a label given twice
    np.testing.assert_array_equal(np.asarray(d.gold), [-1, 1, -1])
    with pytest.raises(bda_jax.DataError) as err:
        am.prepare_glad([0], [0], [3], K=3)
    assert err.value.field == "label"
    with pytest.raises(bda_jax.DataError) as err:
        am.prepare_glad([0], [0], [1], K=3, gold=[3])
    assert err.value.field == "gold"


# ------------------------------------------------------------------ (c) special cases of DS


def test_one_coin_and_mace_are_dawid_skene_special_cases(rng):
    task, worker, label = messy_labels(rng, T_, W_, K_)
    gold = np.full(T_, -1); gold[[0, 3]] = [2, 1]
    data = ds.prepare(task, worker, label, K=K_, n_tasks=T_, n_workers=W_, gold=gold)
    pi, theta = rng.dirichlet(np.ones(K_)), rng.uniform(0.05, 0.95, W_)
    xi = rng.dirichlet(np.ones(K_), size=W_)
    cases = [(am.ONE_COIN_SPEC, {"pi": pi, "theta": theta}, pi, p_one_coin(theta, K_)),
             (am.MACE_SPEC, {"theta": theta, "xi": xi}, np.ones(K_) / K_, p_mace(theta, xi))]
    for spec, params, prior, C in cases:
        dsp = {"pi": jnp.asarray(prior, jnp.float32), "conf": jnp.asarray(C, jnp.float32)}
        np.testing.assert_allclose(np.asarray(spec.log_lik(_jnp(params), data)),
                                   np.asarray(ds.task_log_lik(dsp, data)), rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(np.exp(np.asarray(spec.class_log_post(_jnp(params), data))),
                                   np.exp(np.asarray(ds.task_class_log_post(dsp, data))), atol=1e-6)
    # a MACE worker with competence theta and a uniform strategy is a one-coin worker of accuracy
    # theta + (1 - theta) / K (derived: copy with prob. theta, else uniform guess)
    acc = theta + (1 - theta) / K_
    np.testing.assert_allclose(p_mace(theta, np.full((W_, K_), 1 / K_)), p_one_coin(acc, K_), atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(am.mace_log_lik(_jnp({"theta": theta, "xi": np.full((W_, K_), 1 / K_)}), data)),
        np.asarray(am.one_coin_log_lik(_jnp({"pi": np.ones(K_) / K_, "theta": acc}), data)),
        rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ (d) gold clamp


@pytest.mark.parametrize("name", ["one_coin", "mace", "glad"])
def test_gold_clamp_one_hot(rng, name):
    spec, prep, params, _, (task, worker, label) = _case(name, rng)
    gold = np.full(T_, -1); gold[:6] = [2, 0, 1, 1, 0, 2]
    data = prep(task, worker, label, K=K_, n_tasks=T_, n_workers=W_, gold=gold)
    lp = np.asarray(spec.class_log_post(_jnp(params), data))
    np.testing.assert_allclose(np.exp(lp[:6]), np.eye(K_)[gold[:6]])
    samples = {k: v[None] for k, v in _jnp(params).items()}
    np.testing.assert_allclose(np.asarray(inf.class_posterior(spec, samples, data))[:6], np.eye(K_)[gold[:6]])
    free = prep(task, worker, label, K=K_, n_tasks=T_, n_workers=W_)
    np.testing.assert_allclose(lp[6:], np.asarray(spec.class_log_post(_jnp(params), free))[6:], atol=1e-5)
    np.testing.assert_allclose(np.asarray(spec.log_lik(_jnp(params), data))[6:],
                               np.asarray(spec.log_lik(_jnp(params), free))[6:], atol=1e-5)


# ------------------------------------------------------------------ (b) MAP recovery


@pytest.fixture(scope="module")
def one_coin_fit():
    """One MAP fit serves (b) and (e): K = 3, four honest workers and two adversaries whose
    accuracy 0.05 is far below chance (1/3)."""
    rng = np.random.default_rng(0)
    K, T, theta, pi = 3, 400, np.array([.9, .75, .65, .55, .05, .05]), np.array([.5, .3, .2])
    C = p_one_coin(theta, K)
    task, worker, label, truth = simulate_labels(rng, T, len(theta), K, pi, lambda w, t, z: C[w, z])
    data = ds.prepare(task, worker, label, K=K)
    est = inf.fit_map(jax.random.key(0), am.ONE_COIN_SPEC, data, steps=400, lr=0.05)
    return data, est, (task, worker, label, truth), theta, pi


def test_map_recovers_one_coin_accuracies(one_coin_fit):
    data, est, (task, worker, label, truth), theta, pi = one_coin_fit
    realized = np.array([(label[worker == w] == truth[task[worker == w]]).mean() for w in range(len(theta))])
    got = np.asarray(est["theta"])
    assert np.abs(got - realized).max() < 0.04, (got, realized)
    assert np.abs(got - theta).max() < 0.07, got
    assert np.abs(np.asarray(est["pi"]) - pi).max() < 0.07, est["pi"]


def test_map_recovers_mace_competences():
    rng = np.random.default_rng(2)
    K, theta = 3, np.array([.9, .8, .7, .6, .1, .05])
    xi = rng.dirichlet(np.full(K, 2.0), size=len(theta))
    C = p_mace(theta, xi)
    task, worker, label, _ = simulate_labels(rng, 400, len(theta), K, np.ones(K) / K, lambda w, t, z: C[w, z])
    data = ds.prepare(task, worker, label, K=K)
    est = np.asarray(inf.fit_map(jax.random.key(0), am.MACE_SPEC, data, steps=400, lr=0.05)["theta"])
    assert np.abs(est - theta).max() < 0.12, est
    assert est[4:].max() < 0.3 < 0.5 < est[:4].min(), est            # spammers found


def test_map_recovers_glad_ability_sign_and_order():
    rng = np.random.default_rng(3)
    K, T, alpha = 3, 300, np.array([2.5, 1.5, 0.6, -0.6, -1.5])
    log_beta = rng.normal(0, 0.5, T)

    def dist(w, t, z):
        return np.array([p_glad(alpha[w], log_beta[t], K, z, l) for l in range(K)])

    task, worker, label, _ = simulate_labels(rng, T, len(alpha), K, np.ones(K) / K, dist)
    data = am.prepare_glad(task, worker, label, K=K)
    est = np.asarray(inf.fit_map(jax.random.key(0), am.GLAD_SPEC, data, steps=400, lr=0.05)["alpha"])
    np.testing.assert_array_equal(np.sign(est), np.sign(alpha))
    np.testing.assert_array_equal(np.argsort(est), np.argsort(alpha))


# ------------------------------------------------------------------ (e) adversary vs majority


def test_one_coin_beats_majority_with_adversaries(one_coin_fit):
    data, est, (task, worker, label, truth), theta, _ = one_coin_fit
    assert np.asarray(est["theta"])[4:].max() < 0.15 < 0.5 < np.asarray(est["theta"])[:4].min()
    proba = np.asarray(inf.class_posterior(am.ONE_COIN_SPEC, {k: v[None] for k, v in est.items()}, data))
    acc, mv = (proba.argmax(1) == truth).mean(), majority_accuracy(task, label, data.n_tasks, data.K, truth)
    assert acc > mv + 0.15, (acc, mv)


# ------------------------------------------------------------------ (f) the factor site = draws_log_lik


def _small(name, rng):
    spec, prep, _, _, (task, worker, label) = _case(name, rng)
    gold = np.full(T_, -1); gold[[1, 7]] = [2, 0]
    return spec, prep(task, worker, label, K=K_, n_tasks=T_, n_workers=W_, gold=gold)


@pytest.mark.parametrize("name", ["one_coin", "mace"])      # GLAD: the NUTS test below
def test_factor_site_equals_draws_log_lik_random_draws(rng, name):
    spec, data = _small(name, rng)
    draws = [_case(name, rng)[2] for _ in range(4)]              # 4 random parameter draws
    draws = {k: jnp.asarray(np.stack([d[k] for d in draws]), jnp.float32) for k in draws[0]}
    nll = log_likelihood(spec.model, draws, data, spec.default_prior)["log_lik"]
    ll = inf.draws_log_lik(spec, draws, data)
    assert ll.shape == (4, T_)
    np.testing.assert_allclose(np.asarray(nll), np.asarray(ll), rtol=1e-5, atol=1e-4)


@pytest.fixture(scope="module")
def glad_nuts():
    spec, data = _small("glad", np.random.default_rng(5))
    mcmc = inf.run_nuts(jax.random.key(2), spec, data, num_warmup=20, num_samples=10)
    return spec, data, mcmc


def test_nuts_factor_site_equals_draws_log_lik(glad_nuts):
    spec, data, mcmc = glad_nuts
    samples = mcmc.get_samples()
    ll = inf.draws_log_lik(spec, samples, data)
    nll = log_likelihood(spec.model, samples, data)["log_lik"]
    assert ll.shape == (10, T_) and np.isfinite(np.asarray(ll)).all()
    np.testing.assert_allclose(np.asarray(nll), np.asarray(ll), rtol=1e-5, atol=1e-4)
    proba = np.asarray(inf.class_posterior(spec, samples, data))
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(proba[1], np.eye(K_)[2], atol=1e-6)
