"""GLAD and MACE over sparse crowd votes (bda_jax.crowd.glad_em, mace_em) and the SciPy CG port
under GLAD's M-step (bda_jax.crowd.minimize_cg).

Every EM run uses one shape (T = 60 tasks x W = 6 workers, K = 3, every task labeled by every
worker: P = 360 rows; MACE with 3 restarts) so the file compiles each program once.

The crowd-kit numbers below were recorded from crowd-kit 1.4.2 (/work/crowdkit-venv, pandas
3.1.1, scipy 1.18.1, numpy 2.5.5) on the data of ``_glad_data`` / ``_mace_data``::

    import pandas as pd; from crowdkit.aggregation import GLAD, MACE
    task, worker, label, *_ = _glad_data(0)
    g = GLAD().fit(pd.DataFrame({"task": task, "worker": worker, "label": label}))
    g.loss_history_, g.alphas_.sort_index(), g.betas_.sort_index()[:6], g.probas_[:4]
    task, worker, label, *_ = _mace_data(1)
    df = pd.DataFrame({"task": task, "worker": worker, "label": label})
    # crowd-kit's strategy counts come out in sorted (worker, label) order but are indexed in
    # first-appearance order: sort so both orders agree
    m = MACE(method=method).fit(df.sort_values(["worker", "label", "task"]))
    m.spamming_, m.thetas_[4], m.probas_.sort_index()[:3]
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special
import scipy.stats

import bda_jax
from bda_jax.crowd import (GLADParams, MACECounts, MACEParams, difference_line, glad_e_step,
                           glad_em, glad_m_step, glad_objective, mace_e_step, mace_em,
                           mace_m_step, minimize_cg, votes_from_labels)

T, W, K = 60, 6, 3
R = 3                      # MACE restarts in every run here


def _votes(task, worker, label, mask=None, dtype=None):
    return votes_from_labels(task, worker, label, T, W, K, mask=mask, dtype=dtype)


def _glad_data(seed):
    """GLAD-generated labels, every task labeled by all W workers (rows sorted by task)."""
    rs = np.random.RandomState(seed)
    truth = rs.randint(0, K, T)
    alpha = np.array([3.0, 2.5, 1.5, 1.0, 0.4, 0.1])
    log_beta = np.where(np.arange(T) % 2 == 0, 0.7, -1.5)       # even tasks easy, odd hard
    task, worker = np.repeat(np.arange(T), W), np.tile(np.arange(W), T)
    p = 1.0 / (1.0 + np.exp(-alpha[worker] * np.exp(log_beta[task])))
    wrong = (truth[task] + rs.randint(1, K, T * W)) % K
    label = np.where(rs.rand(T * W) < p, truth[task], wrong)
    return task, worker, label, truth, alpha, log_beta


def _mace_data(seed):
    """MACE-generated labels: workers 4 and 5 spam (competence 0.05, uniform strategy)."""
    rs = np.random.RandomState(seed)
    truth = rs.randint(0, K, T)
    theta = np.array([0.9, 0.8, 0.8, 0.7, 0.05, 0.05])
    task, worker = np.repeat(np.arange(T), W), np.tile(np.arange(W), T)
    label = np.where(rs.rand(T * W) < theta[worker], truth[task], rs.randint(0, K, T * W))
    return task, worker, label, truth, theta


def _mask_and_gold(label, task):
    """Tasks 0-4 allow only classes {0, 1} (labels outside are moved to 1); tasks 5, 6 are
    gold."""
    mask = np.ones((T, K), bool)
    mask[:5, 2] = False
    label = np.where((task < 5) & (label == 2), 1, label)
    gold = np.full(T, -1)
    gold[5], gold[6] = 2, 0
    return label, mask, gold


# ---------------------------------------------------------------- numpy references (loops)


def _np_glad_e(task, worker, label, alpha, lb, mask, gold):
    kt = mask.sum(1)
    score = np.where(mask, -np.log(kt)[:, None], -np.inf)
    for t, w, y in zip(task, worker, label):
        x = alpha[w] * np.exp(lb[t])
        for c in range(K):
            if mask[t, c]:
                score[t, c] += (-np.logaddexp(0, -x) if c == y
                                else -np.logaddexp(0, x) - np.log(max(kt[t] - 1, 1)))
    ll = scipy.special.logsumexp(score, axis=1)
    log_q = score - ll[:, None]
    for t in np.flatnonzero(gold >= 0):
        ll[t] = score[t, gold[t]]
        log_q[t] = np.where(np.arange(K) == gold[t], 0.0, -np.inf)
    return log_q, ll


def _np_glad_q_and_grad(task, worker, label, alpha, lb, q, kt):
    """crowd-kit GLAD._compute_Q and _gradient_Q over its melted (row x class) frame, with
    NumPy scatter-adds (``np.add.at``) instead of pandas groupby."""
    t, w = np.repeat(task, K), np.repeat(worker, K)
    c = np.tile(np.arange(K), task.size)
    delta = c == np.repeat(label, K)
    x = alpha[w] * np.exp(lb[t])
    post = q[t, c]
    Q = (post * np.where(delta, -np.logaddexp(0, -x),
                         -np.logaddexp(0, x) - np.log(np.maximum(kt[t] - 1, 1)))).sum()
    Q += scipy.stats.norm.logpdf(alpha - 1).sum() + scipy.stats.norm.logpdf(lb - 1).sum()
    d = post * (delta - scipy.special.expit(x))
    ga, gl = -(alpha - 1.0), -(lb - 1.0)
    np.add.at(ga, w, d * np.exp(lb[t]))
    np.add.at(gl, t, d * x)
    return Q, ga, gl


def _np_mace_e(task, worker, label, spam, comp, strat, mask, gold):
    score = np.where(mask, -np.log(mask.sum(1))[:, None], -np.inf)
    for t, w, y in zip(task, worker, label):
        for c in range(K):
            score[t, c] += np.log(spam[w] * strat[w, y] + comp[w] * (c == y))
    ll = scipy.special.logsumexp(score, axis=1)
    q = np.exp(score - ll[:, None])
    for t in np.flatnonzero(gold >= 0):
        ll[t] = score[t, gold[t]]
        q[t] = np.arange(K) == gold[t]
    c_spam, c_know, c_strat = np.zeros(W), np.zeros(W), np.zeros((W, K))
    for t, w, y in zip(task, worker, label):
        know = q[t, y] * comp[w] / (spam[w] * strat[w, y] + comp[w])
        c_know[w] += know
        c_spam[w] += 1 - know
        c_strat[w, y] += 1 - know
    return q, ll, (c_spam, c_know, c_strat)


# ---------------------------------------------------------------- GLAD


def test_glad_e_step_matches_numpy_reference():
    task, worker, label, *_ = _glad_data(3)
    label, mask, gold = _mask_and_gold(label, task)
    rs = np.random.RandomState(0)
    alpha, lb = rs.normal(1, 1, W), rs.normal(0, 0.5, T)
    data = _votes(task, worker, label, mask)
    params = GLADParams(jnp.asarray(alpha, jnp.float32), jnp.asarray(lb, jnp.float32),
                        jnp.full(K, -np.log(K), jnp.float32))
    log_q, ll = glad_e_step(data, params, gold)
    ref_q, ref_ll = _np_glad_e(task, worker, label, alpha, lb, mask, gold)
    np.testing.assert_allclose(np.exp(np.asarray(log_q)), np.exp(ref_q), atol=1e-5)
    np.testing.assert_allclose(np.asarray(ll), ref_ll, rtol=1e-5)
    assert np.isneginf(np.asarray(log_q)[:5, 2]).all()                 # masked class
    np.testing.assert_array_equal(np.exp(np.asarray(log_q))[5:7], np.eye(K)[[2, 0]])
    # crowd-kit's Q from the same posterior
    Q, *_ = _np_glad_q_and_grad(task, worker, label, alpha, lb, np.exp(ref_q), mask.sum(1))
    assert float(glad_objective(data, params, log_q)) == pytest.approx(Q, rel=1e-5)


def _scipy_m_step(task, worker, label, mask, gold, maxiter):
    """crowd-kit's M-step from the initial E-step: ``minimize(-Q, method="CG", tol=1e-2)``."""
    q = np.exp(_np_glad_e(task, worker, label, np.ones(W), np.ones(T), mask, gold)[0])

    def f(x):
        return -_np_glad_q_and_grad(task, worker, label, x[:W], x[W:], q, mask.sum(1))[0]

    def df(x):
        _, ga, gl = _np_glad_q_and_grad(task, worker, label, x[:W], x[W:], q, mask.sum(1))
        return -np.r_[ga, gl]

    return scipy.optimize.minimize(f, np.ones(W + T), method="CG", jac=df, tol=1e-2,
                                   options={"maxiter": maxiter})


def test_glad_m_step_matches_scipy_cg():
    """One EM iteration = crowd-kit's first M-step, SciPy's CG (DCSRCH line search) ported to
    JAX: same point after 3 CG iterations in float32 (the same compiled program as every EM
    run here; longer float32 CG paths drift from SciPy's float64 one by ~1e-5 per iteration,
    the slow test checks 25 iterations in float64)."""
    task, worker, label, *_ = _glad_data(4)
    label, mask, gold = _mask_and_gold(label, task)
    r = glad_em(_votes(task, worker, label, mask), gold=gold, n_iter=1, m_step_max_iter=3)
    ref = _scipy_m_step(task, worker, label, mask, gold, 3)
    assert int(r.m_step_iters[0]) == ref.nit == 3
    np.testing.assert_allclose(np.asarray(r.params.alpha), ref.x[:W], atol=1e-5)
    np.testing.assert_allclose(np.asarray(r.params.log_beta), ref.x[W:], atol=1e-5)


@pytest.mark.slow
def test_glad_m_step_matches_scipy_cg_float64():
    """crowd-kit's full M-step (25 CG iterations) in float64: the port lands on SciPy's point."""
    task, worker, label, *_ = _glad_data(4)
    label, mask, gold = _mask_and_gold(label, task)
    with jax.enable_x64(True):
        data = _votes(task, worker, label, mask, "float64")
        params = GLADParams(jnp.ones(W, jnp.float64), jnp.ones(T, jnp.float64),
                            jnp.full(K, -np.log(K), jnp.float64))
        log_q, _ = glad_e_step(data, params, gold)
        new, iters, failed = glad_m_step(data, log_q, params)
        new_alpha, new_lb = np.asarray(new.alpha), np.asarray(new.log_beta)
    ref = _scipy_m_step(task, worker, label, mask, gold, 25)
    assert int(iters) == ref.nit and not bool(failed)
    np.testing.assert_allclose(new_alpha, ref.x[:W], atol=1e-5)
    np.testing.assert_allclose(new_lb, ref.x[W:], atol=1e-5)


def test_glad_em_matches_crowdkit_recorded():
    task, worker, label, *_ = _glad_data(0)
    r = glad_em(_votes(task, worker, label))
    # recorded from crowd-kit 1.4.2 (module docstring); float32 here, float64 there
    assert int(r.n_iter) == 2 and bool(r.converged)
    np.testing.assert_allclose(np.asarray(r.loss_history)[:2],
                               [-0.2971435363966468, -0.2994609392564994], atol=2e-5)
    assert float(r.objective) == pytest.approx(-0.2994609392564994, abs=2e-5)
    np.testing.assert_allclose(np.asarray(r.params.alpha),
                               [0.744699, 1.180299, 0.413908, 0.416645, 0.122249, 0.153951],
                               atol=2e-3)
    np.testing.assert_allclose(np.asarray(r.params.log_beta)[:6],
                               [1.511628, 0.255822, 1.226662, 0.232349, 1.443523, 0.626429],
                               atol=3e-3)
    np.testing.assert_allclose(np.exp(np.asarray(r.log_posterior))[:4],
                               [[1.0, 0.0, 0.0], [0.022333, 0.796584, 0.181083],
                                [0.999951, 2.5e-05, 2.4e-05], [0.087993, 0.857401, 0.054606]],
                               atol=1e-3)


def test_glad_map_objective_non_decreasing_and_recovery():
    """With ``tol=-inf`` all 100 iterations run: the MAP objective never decreases; abilities
    separate strong from weak workers and hard items get larger difficulty 1/beta."""
    task, worker, label, truth, alpha, log_beta = _glad_data(0)
    r = glad_em(_votes(task, worker, label), tol=-np.inf)
    assert int(r.n_iter) == 100 and not bool(r.converged)
    obj = np.asarray(r.objective_history)
    assert np.isfinite(obj).all()
    assert np.diff(obj).min() >= -1e-5 * np.abs(obj).max()
    a = np.asarray(r.params.alpha)
    assert a[:3].min() > a[4:].max()                                 # alpha 3, 2.5, 1.5 vs 0.4, 0.1
    assert np.corrcoef(a, alpha)[0, 1] > 0.8
    difficulty = 1.0 / np.asarray(r.params.beta)
    assert difficulty[log_beta < 0].mean() > 2 * difficulty[log_beta > 0].mean()
    assert (np.argmax(np.asarray(r.log_posterior), 1) == truth).mean() >= 0.9


def test_glad_gold_mask_and_determinism():
    task, worker, label, *_ = _glad_data(5)
    label, mask, gold = _mask_and_gold(label, task)
    gold[7] = (label[task == 7][0] + 1) % K           # gold that disagrees with worker 0
    r = glad_em(_votes(task, worker, label, mask), gold=gold)
    p = np.exp(np.asarray(r.log_posterior))
    np.testing.assert_array_equal(p[[5, 6, 7]], np.eye(K)[gold[[5, 6, 7]]])
    assert (p[:5, 2] == 0).all() and np.allclose(p.sum(1), 1, atol=1e-6)
    again = glad_em(_votes(task, worker, label, mask), gold=gold)
    for x, y in zip(jax.tree_util.tree_leaves(r), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ---------------------------------------------------------------- MACE


def test_mace_steps_match_numpy_reference():
    task, worker, label, *_ = _mace_data(2)
    label, mask, gold = _mask_and_gold(label, task)
    rs = np.random.RandomState(1)
    sw = rs.uniform(1, 2.5, (W, 2))
    sw /= sw.sum(1, keepdims=True)
    st = rs.uniform(1, 2.5, (W, K))
    st /= st.sum(1, keepdims=True)
    data = _votes(task, worker, label, mask)
    params = MACEParams(*(jnp.asarray(a, jnp.float32) for a in (sw[:, 0], sw[:, 1], st)))
    log_q, ll, counts = mace_e_step(data, params, gold)
    q, ref_ll, (c_spam, c_know, c_strat) = _np_mace_e(task, worker, label, sw[:, 0], sw[:, 1],
                                                      st, mask, gold)
    np.testing.assert_allclose(np.exp(np.asarray(log_q)), q, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ll), ref_ll, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(counts.spam), c_spam, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(counts.know), c_know, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(counts.strategy), c_strat, rtol=1e-5, atol=1e-5)
    # M-steps: crowd-kit variational_normalize (Beta(0.5, 0.5), Dirichlet(10)) and normalize
    two = np.c_[c_spam, c_know]
    vb = mace_m_step(MACECounts(*(jnp.asarray(a, jnp.float32) for a in (c_spam, c_know,
                                                                          c_strat))))
    dig = scipy.special.digamma
    ref2 = np.exp(dig(two + 0.5) - dig((two + 0.5).sum(1, keepdims=True)))
    ref_s = np.exp(dig(c_strat + 10) - dig((c_strat + 10).sum(1, keepdims=True)))
    np.testing.assert_allclose(np.c_[vb.spam, vb.competence], ref2, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(vb.strategy), ref_s, rtol=1e-5)
    em = mace_m_step(MACECounts(*(jnp.asarray(a, jnp.float32) for a in (c_spam, c_know,
                                                                          c_strat))), "em")
    s = 0.01 / K
    np.testing.assert_allclose(np.c_[em.spam, em.competence],
                               (two + s) / (two + s).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(em.strategy),
                               (c_strat + s) / (c_strat + s).sum(1, keepdims=True), rtol=1e-5)


def _crowdkit_start():
    """crowd-kit's MACE._initialize draws (random_state=0 for both arrays, every restart)."""
    sw = scipy.stats.uniform(1, 1.5).rvs(size=(W, 2), random_state=0)
    st = scipy.stats.uniform(1, 1.5).rvs(size=(W, K), random_state=0)
    sw, st = sw / sw.sum(1, keepdims=True), st / st.sum(1, keepdims=True)
    return np.repeat(sw[None], R, 0), np.repeat(st[None], R, 0)   # its restarts are identical


@pytest.mark.parametrize("method, spamming, thetas4, probas", [
    ("vb", [[0.051443, 0.940512], [0.097323, 0.894531], [0.220658, 0.771132],
            [0.273485, 0.718297], [0.975429, 0.016928], [0.880198, 0.111641]],
     [0.296902, 0.406334, 0.285511],
     [[8e-06, 0.999986, 6e-06], [0.9995, 0.000433, 6.7e-05], [0.915909, 0.055874, 0.028217]]),
    ("em", [[0.05803, 0.94197], [0.095617, 0.904383], [0.223381, 0.776619],
            [0.28121, 0.71879], [0.994802, 0.005198], [0.889279, 0.110721]],
     [0.283555, 0.449716, 0.266729],
     [[1.3e-05, 0.999976, 1.1e-05], [0.999514, 0.000411, 7.4e-05],
      [0.858489, 0.102439, 0.039072]]),
])
def test_mace_matches_crowdkit_recorded(method, spamming, thetas4, probas):
    task, worker, label, *_ = _mace_data(1)
    r = mace_em(None, _votes(task, worker, label), method=method, init=_crowdkit_start())
    # recorded from crowd-kit 1.4.2 (module docstring)
    np.testing.assert_allclose(np.c_[r.params.spam, r.params.competence], spamming, atol=1e-5)
    np.testing.assert_allclose(np.asarray(r.params.strategy)[4], thetas4, atol=1e-5)
    np.testing.assert_allclose(np.exp(np.asarray(r.log_posterior))[:3], probas, atol=1e-5)


@pytest.mark.parametrize("method", ["vb", "em"])
def test_mace_objective_non_decreasing_and_spammers(method):
    """EM's MAP objective and VB's ELBO never decrease; spammers get low competence."""
    task, worker, label, truth, theta = _mace_data(1)
    r = mace_em(0, _votes(task, worker, label), n_restarts=R, method=method)
    obj = np.asarray(r.objective_history)
    for row in obj:
        row = row[np.isfinite(row)]
        assert row.size > 5 and np.diff(row).min() >= -1e-5 * np.abs(row).max()
    comp = np.asarray(r.params.competence)
    assert comp[4:].max() < 0.2 < 0.6 < comp[:4].min()
    assert (np.argmax(np.asarray(r.log_posterior), 1) == truth).mean() >= 0.95
    ll = np.asarray(r.restart_log_likelihood)
    best, n = int(r.best_restart), int(r.n_iter)
    assert best == int(np.argmax(ll)) and float(r.log_likelihood) == ll.max()
    assert np.asarray(r.log_likelihood_history)[best, n - 1] == float(r.log_likelihood)
    assert obj[best, n - 1] == float(r.objective)


def test_mace_gold_mask_and_determinism():
    task, worker, label, *_ = _mace_data(3)
    label, mask, gold = _mask_and_gold(label, task)
    key = jax.random.key(7)
    votes = _votes(task, worker, label, mask)
    r = mace_em(key, votes, n_restarts=R, gold=gold)
    p = np.exp(np.asarray(r.log_posterior))
    np.testing.assert_array_equal(p[[5, 6]], np.eye(K)[[2, 0]])
    assert (p[:5, 2] == 0).all() and np.allclose(p.sum(1), 1, atol=1e-6)
    again = mace_em(key, votes, n_restarts=R, gold=gold)
    for x, y in zip(jax.tree_util.tree_leaves(r), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    other = mace_em(8, votes, n_restarts=R, gold=gold)
    assert not np.array_equal(np.asarray(other.restart_log_likelihood),
                              np.asarray(r.restart_log_likelihood))      # other starts ...
    np.testing.assert_array_equal(np.argmax(np.asarray(other.log_posterior), 1),
                                  np.argmax(p, 1))                        # ... same labels


# ---------------------------------------------------------------- bad inputs


def _raises(field, fn, *args, **kw):
    with pytest.raises(bda_jax.DataError) as err:
        fn(*args, **kw)
    assert err.value.field == field, err.value
    assert field in str(err.value)


def test_bad_inputs_name_the_field():
    task, worker, label, *_ = _glad_data(0)
    bad = label.copy()
    bad[3] = K
    _raises("label", votes_from_labels, task, worker, bad, T, W, K)
    _raises("worker", votes_from_labels, task, np.where(worker == 2, -1, worker), label, T, W, K)
    _raises("task", votes_from_labels, task + 1, worker, label, T, W, K)
    _raises("worker", votes_from_labels, task, worker[:-1], label, T, W, K)
    _raises("label", votes_from_labels, task, worker, label.astype(float) + 0.5, T, W, K)
    _raises("n_classes", votes_from_labels, task, worker, label, T, W, 1)
    _raises("mask", votes_from_labels, task, worker, label, T, W, K, mask=np.ones((T, K + 1)))
    no_class = np.ones((T, K), bool)
    no_class[2] = False
    _raises("mask", votes_from_labels, task, worker, label, T, W, K, mask=no_class)
    m = np.ones((T, K), bool)
    m[task[label == 2][0], 2] = False
    _raises("label", votes_from_labels, task, worker, label, T, W, K, mask=m)
    votes = _votes(task, worker, label)
    for fn, pre in ((glad_em, ()), (mace_em, (0,))):
        _raises("votes", fn, *pre, (task, worker, label))
        _raises("gold", fn, *pre, votes, gold=np.full(T, K))
        _raises("gold", fn, *pre, votes, gold=np.zeros(T - 1, int))
        _raises("n_iter", fn, *pre, votes, n_iter=0)
    _raises("class_prior", glad_em, votes, class_prior=[1, -1, 1])
    _raises("alpha_prior_mean", glad_em, votes, alpha_prior_mean=np.ones(W + 1))
    _raises("m_step_tol", glad_em, votes, m_step_tol=-1.0)
    _raises("method", mace_em, 0, votes, method="gibbs")
    _raises("key", mace_em, "seed", votes)
    _raises("init", mace_em, 0, votes, init=(np.ones((W, 3)), np.ones((W, K))))
    _raises("alpha", mace_em, 0, votes, alpha=0.0)
    _raises("tol", mace_em, 0, votes, tol=-1.0)


def test_repeated_labels_are_weighted_cells():
    """A label given twice is one cell of weight 2, and GLAD's and MACE's E-steps read it as two
    labels (the loop references see the repeated rows); row order does not matter."""
    task, worker, label, *_ = _glad_data(0)
    dup = np.r_[task, task[:30]], np.r_[worker, worker[:30]], np.r_[label, label[:30]]
    votes = _votes(*dup)
    assert votes.task.size == task.size                       # the first 30 rows, repeated
    np.testing.assert_array_equal(votes.weight, np.where(np.arange(task.size) < 30, 2.0, 1.0))
    np.testing.assert_array_equal(votes.agent_votes, np.bincount(dup[1], minlength=W))
    order = np.random.RandomState(0).permutation(dup[0].size)
    for x, y in zip(votes, _votes(*(x[order] for x in dup))):
        np.testing.assert_array_equal(x, y)
    mask, gold = np.ones((T, K), bool), np.full(T, -1)
    rs = np.random.RandomState(2)
    alpha, lb = rs.normal(1, 1, W), rs.normal(0, 0.5, T)
    params = GLADParams(jnp.asarray(alpha, jnp.float32), jnp.asarray(lb, jnp.float32),
                        jnp.full(K, -np.log(K), jnp.float32))
    log_q, ll = glad_e_step(votes, params)
    ref_q, ref_ll = _np_glad_e(*dup, alpha, lb, mask, gold)
    np.testing.assert_allclose(np.exp(np.asarray(log_q)), np.exp(ref_q), atol=1e-5)
    np.testing.assert_allclose(np.asarray(ll), ref_ll, rtol=1e-5)
    sw = rs.uniform(1, 2.5, (W, 2))
    sw /= sw.sum(1, keepdims=True)
    st = rs.uniform(1, 2.5, (W, K))
    st /= st.sum(1, keepdims=True)
    log_q, ll, counts = mace_e_step(votes, MACEParams(*(jnp.asarray(a, jnp.float32)
                                                        for a in (sw[:, 0], sw[:, 1], st))))
    q, ref_ll, (c_spam, c_know, c_strat) = _np_mace_e(*dup, sw[:, 0], sw[:, 1], st, mask, gold)
    np.testing.assert_allclose(np.exp(np.asarray(log_q)), q, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ll), ref_ll, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(counts.know), c_know, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(counts.strategy), c_strat, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- the CG port under GLAD


def _rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


_X = np.random.RandomState(0).randn(50, 4)
_Y = (_X @ np.array([1.0, -2.0, 0.5, 0.0]) + np.random.RandomState(1).randn(50) > 0) * 1.0
_A, _B = np.diag(np.logspace(0, 3, 8)), np.arange(8.0)


@pytest.mark.parametrize("fun, x0, gtol, maxiter", [
    (_rosen, [-1.2, 1.0], 1e-5, 200),                              # 36 iterations
    (_rosen, [1.3, 0.7, 0.8, 1.9, 1.2], 1e-5, 200),                # 47
    (_rosen, [-1.2, 1.0], 1e-5, 10),                               # stops at the cap
    (lambda w: jnp.sum(jnp.logaddexp(0.0, _X @ w) - _Y * (_X @ w)) + 0.5 * w @ w,
     np.zeros(4), 1e-6, 100),                                      # logistic regression
])
def test_minimize_cg_matches_scipy(fun, x0, gtol, maxiter):
    """In float64 the port takes SciPy's CG iterations: same count, same exit, same point."""
    with jax.enable_x64(True):
        vg = jax.value_and_grad(fun)
        x0 = jnp.asarray(x0, jnp.float64)
        f0, g0 = vg(x0)
        r = jax.jit(lambda x, f, g: minimize_cg(difference_line(vg), x, g, f, gtol, maxiter))(
            x0, f0, g0)
        ref = scipy.optimize.minimize(
            lambda x: float(fun(jnp.asarray(x))), np.asarray(x0), method="CG",
            jac=lambda x: np.asarray(jax.grad(fun)(jnp.asarray(x))),
            options={"gtol": gtol, "maxiter": maxiter})
        x, n_iter, failed = np.asarray(r.x), int(r.n_iter), bool(r.failed)
    assert n_iter == ref.nit and failed == (ref.status == 2)
    np.testing.assert_allclose(x, ref.x, atol=1e-6)


@pytest.mark.parametrize("gtol", [1e-8, 0.0])
def test_minimize_cg_stops_at_the_rounding_floor_where_scipy_does(gtol):
    """Past float64's resolution the exit is decided by rounding, not by the algorithm.

    On an ill-conditioned quadratic (condition number 1e3) both SciPy and the port reach the
    minimiser ``B / diag(A)`` in about a dozen iterations; which of the last steps the line
    search still accepts depends on how the platform rounds (SciPy 1.18 takes 13-14, the
    jitted port 12 here; with earlier versions the two agreed). What must hold: the same point,
    within two iterations of SciPy, and a precision-loss exit only once what is left to gain is
    below float64's resolution of f, never short of the optimum."""
    fun = lambda x: 0.5 * x @ (_A @ x) - _B @ x  # noqa: E731
    with jax.enable_x64(True):
        vg = jax.value_and_grad(fun)
        x0 = jnp.zeros(8, jnp.float64)
        f0, g0 = vg(x0)
        r = jax.jit(lambda x, f, g: minimize_cg(difference_line(vg), x, g, f, gtol, 100))(
            x0, f0, g0)
        ref = scipy.optimize.minimize(
            lambda x: float(fun(jnp.asarray(x))), np.zeros(8), method="CG",
            jac=lambda x: np.asarray(jax.grad(fun)(jnp.asarray(x))),
            options={"gtol": gtol, "maxiter": 100})
        x, n_iter, failed = np.asarray(r.x), int(r.n_iter), bool(r.failed)
    x_star = _B / np.diag(_A)
    np.testing.assert_allclose(x, x_star, atol=1e-9)
    np.testing.assert_allclose(ref.x, x_star, atol=1e-9)
    assert abs(n_iter - ref.nit) <= 2
    gnorm = np.abs(_A @ x - _B).max()
    f_star = -0.5 * _B @ x_star
    if failed:  # what is left to gain is below float64's resolution of f (|f*| ~ 1)
        assert float(fun(x)) - f_star <= 1e-13 and gnorm <= 1e-6
    else:
        assert gnorm <= gtol
    if gtol == 0.0:                       # unreachable: both must end on precision loss
        assert failed and ref.status == 2


def test_minimize_cg_takes_pytrees():
    """Positions may be pytrees: a split position lands where the flat one does."""
    with jax.enable_x64(True):
        flat = jax.value_and_grad(_rosen)
        split = jax.value_and_grad(lambda p: _rosen(jnp.concatenate([p[0], p[1]])))
        x0 = jnp.asarray([1.3, 0.7, 0.8, 1.9, 1.2])
        f0, g0 = flat(x0)
        a = minimize_cg(difference_line(flat), x0, g0, f0, 1e-5, 200)
        p0 = (x0[:2], x0[2:])
        f0, g0 = split(p0)
        b = minimize_cg(difference_line(split), p0, g0, f0, 1e-5, 200)
        np.testing.assert_allclose(np.concatenate([b.x[0], b.x[1]]), a.x, atol=1e-6)
        assert int(a.n_iter) == int(b.n_iter)
