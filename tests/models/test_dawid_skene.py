"""Bayesian Dawid–Skene (bda_jax.models.dawid_skene) and its ArviZ helpers."""
import numpy as np
import jax
import pytest
from scipy.special import logsumexp

from bda_jax.models import dawid_skene as ds, diagnostics as dg, inference as inf
from reference import simulate_labels


def simulate(rng, T, conf, prior, p_answer=1.0):
    """Labels from a confusion tensor ``conf`` [W, K_true, K_obs]."""
    W, K, _ = conf.shape
    return simulate_labels(rng, T, W, K, prior, lambda w, t, z: conf[w, z], p_answer)


def ref_log_lik(task, worker, label, pi, conf, T, gold=None):
    """numpy/scipy reference: explicit loop over labels, logsumexp over classes."""
    joint = np.tile(np.log(pi), (T, 1))
    for t, w, l in zip(task, worker, label):
        joint[t] += np.log(conf[w, :, l])
    ll = logsumexp(joint, axis=1)
    if gold is not None:
        ll = np.where(gold >= 0, joint[np.arange(T), np.clip(gold, 0, None)], ll)
    return ll


def test_log_lik_matches_reference(rng):
    T, W, K = 30, 4, 3
    task, worker, label, _ = simulate(rng, T, rng.dirichlet(np.ones(K) * 2, size=(W, K)),
                                      np.ones(K) / K, p_answer=0.7)
    # duplicate some labels (same worker answers twice) and leave a task unlabelled
    task = np.concatenate([task, task[:5]]); worker = np.concatenate([worker, worker[:5]])
    label = np.concatenate([label, label[:5]])
    keep = task != 7
    task, worker, label = task[keep], worker[keep], label[keep]
    pi = rng.dirichlet(np.ones(K)); conf = rng.dirichlet(np.ones(K), size=(W, K))
    gold = np.full(T, -1); gold[[1, 2, 7]] = [0, 2, 1]
    for g in (None, gold):
        data = ds.prepare(task, worker, label, K=K, n_tasks=T, n_workers=W, gold=g)
        got = np.asarray(ds.task_log_lik({"pi": jax.numpy.asarray(pi), "conf": jax.numpy.asarray(conf)}, data))
        np.testing.assert_allclose(got, ref_log_lik(task, worker, label, pi, conf, T, g), rtol=1e-5, atol=1e-5)


def test_map_recovers_confusion(rng):
    K = 3
    conf = np.array([[[.8, .1, .1], [.1, .8, .1], [.1, .1, .8]],
                     [[.7, .2, .1], [.1, .7, .2], [.2, .1, .7]],
                     [[.9, .05, .05], [.3, .6, .1], [.3, .1, .6]],
                     [[.6, .3, .1], [.1, .8, .1], [.1, .3, .6]]])
    task, worker, label, truth = simulate(rng, 3000, conf, np.array([.5, .3, .2]))
    data = ds.prepare(task, worker, label, K=K)
    est = inf.fit_map(jax.random.key(0), ds.SPEC, data, steps=800, lr=0.08)
    assert np.abs(np.asarray(est["conf"]) - conf).max() < 0.06
    assert np.abs(np.asarray(est["pi"]) - [.5, .3, .2]).max() < 0.04


def test_gold_clamping(rng):
    K, W = 3, 3
    conf = np.broadcast_to(np.full((K, K), .1) + .7 * np.eye(K), (W, K, K))
    task, worker, label, truth = simulate(rng, 50, conf, np.ones(K) / K)
    gold = np.full(50, -1); gold[:10] = (truth[:10] + 1) % K   # deliberately contrary gold
    data = ds.prepare(task, worker, label, K=K, gold=gold)
    params = ds.default_init(data)
    lp = np.asarray(ds.task_class_log_post(params, data))
    np.testing.assert_allclose(np.exp(lp[:10]), np.eye(K)[gold[:10]])
    samples = {k: v[None] for k, v in params.items()}
    np.testing.assert_allclose(np.asarray(inf.class_posterior(ds.SPEC, samples, data))[:10], np.eye(K)[gold[:10]])
    # unclamped tasks are unaffected by the clamps of others
    free = ds.prepare(task, worker, label, K=K)
    np.testing.assert_allclose(lp[10:], np.asarray(ds.task_class_log_post(params, free))[10:], atol=1e-6)


@pytest.fixture(scope="module")
def nuts_fit():
    rng = np.random.default_rng(7)
    K, good = 3, np.full((3, 3), .15) + .55 * np.eye(3)
    adversary = np.roll(np.eye(3) * .7 + .1, 1, axis=1)       # answers the next class 80 %
    conf = np.stack([good, good, adversary, adversary, good])
    task, worker, label, truth = simulate(rng, 200, conf, np.ones(K) / K)
    data = ds.prepare(task, worker, label, K=K)
    mcmc = inf.run_nuts(jax.random.key(3), ds.SPEC, data, num_warmup=75, num_samples=75, num_chains=2,
                       chain_method="vectorized")
    return data, mcmc, (task, worker, label, truth)


def test_nuts_tiny_beats_majority(nuts_fit):
    data, mcmc, (task, worker, label, truth) = nuts_fit
    samples = mcmc.get_samples(group_by_chain=True)
    dt = dg.to_datatree(mcmc, inf.draws_log_lik(ds.SPEC, samples, data))
    diag = dg.convergence(dt)
    assert np.isfinite(diag["max_rhat"]) and diag["min_ess_bulk"] > 0
    acc = (np.asarray(inf.class_posterior(ds.SPEC, samples, data)).argmax(1) == truth).mean()
    votes = np.zeros((data.n_tasks, data.K)); np.add.at(votes, (task, label), 1)
    mv = (votes.argmax(1) == truth).mean()
    assert acc > mv + 0.05, (acc, mv)


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto:UserWarning")  # tiny data
def test_datatree_log_likelihood_group(nuts_fit):
    data, mcmc, _ = nuts_fit
    samples = mcmc.get_samples(group_by_chain=True)
    ll = inf.draws_log_lik(ds.SPEC, samples, data)
    dt = dg.to_datatree(mcmc, ll)
    assert dict(dt["log_likelihood"]["log_lik"].sizes) == {"chain": 2, "draw": 75, "task": data.n_tasks}
    # the hand-computed values equal NumPyro's own log-likelihood of the factor site
    from numpyro.infer import log_likelihood
    nll = log_likelihood(ds.ds_model, mcmc.get_samples(), data)["log_lik"]
    np.testing.assert_allclose(np.asarray(nll), np.asarray(ll).reshape(150, -1), rtol=1e-5, atol=1e-4)
    import arviz as az
    assert np.isfinite(float(az.loo(dt, var_name="log_lik").elpd))


def test_svi_mean_field_recovers_confusion(rng):
    """SVI (AutoNormal, optax Adam) on the same model object: the guide's draws centre on the
    simulated confusion and have a positive spread."""
    K = 2
    conf = np.array([[[.85, .15], [.2, .8]], [[.7, .3], [.3, .7]], [[.3, .7], [.75, .25]]])
    task, worker, label, truth = simulate(rng, 2000, conf, np.array([.6, .4]))
    data = ds.prepare(task, worker, label, K=K)
    fit = inf.fit_svi(jax.random.key(0), ds.SPEC, data, guide="normal", steps=1500)
    assert np.isfinite(np.asarray(fit.losses)).all() and fit.losses[-100:].mean() < fit.losses[:100].mean()
    draws = inf.guide_draws(jax.random.key(1), fit, ds.SPEC, data, num_samples=200)
    assert draws["conf"].shape == (200, 3, K, K)
    mean = np.asarray(draws["conf"]).mean(0)
    assert np.abs(mean - conf).max() < 0.05, mean
    assert 0 < np.asarray(draws["conf"]).std(0).min() < 0.05
    proba = np.asarray(inf.class_posterior(ds.SPEC, draws, data))
    joint = np.tile(np.log([.6, .4]), (2000, 1))         # Bayes rule with the true parameters
    for t, w, l in zip(task, worker, label):
        joint[t] += np.log(conf[w, :, l])
    bayes = (joint.argmax(1) == truth).mean()
    assert (proba.argmax(1) == truth).mean() >= bayes - 0.01, bayes


def test_likelihood_is_one_compiled_program_per_data_shape(rng):
    """inference.jit_over_data: an eager call of the jitted likelihood compiles one program (the
    int sizes static) where the unwrapped function compiles several (its jitted parts and each
    eager operation between them); same values, equal to the loop reference."""
    import jax.monitoring

    K, W, T = 3, 7, 43                      # shapes no other test here uses
    conf = np.broadcast_to(np.full((K, K), .1) + .7 * np.eye(K), (W, K, K))
    task, worker, label, _ = simulate(rng, T, conf, np.ones(K) / K)
    data = ds.prepare(task, worker, label, K=K)
    params = {"pi": jax.numpy.full(K, 1 / K), "conf": jax.numpy.asarray(conf * 0.9 + 0.1 / K)}
    compiled = []

    def listen(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        got = np.asarray(ds.task_log_lik(params, data))
        n_jit = len(compiled)
        want = np.asarray(ds.task_log_lik.__wrapped__(params, data))
        n_eager = len(compiled) - n_jit
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert n_jit <= 1 < n_eager, (n_jit, n_eager)     # 0 when the session cache served it
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, ref_log_lik(task, worker, label, np.asarray(params["pi"]),
                                                np.asarray(params["conf"]), T), rtol=1e-5)
