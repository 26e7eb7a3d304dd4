"""Unsupervised Dawid–Skene EM ([BDA] Appendix B.1 "DS-EM", F.10 / Table 16)."""
import jax
import numpy as np
import pytest
from scipy.special import logsumexp

import bda_jax as bda
from bda_jax.aggregators import CouncilDawidSkene
from bda_jax.crowd import (dawid_skene_em, dawid_skene_pairs,
                                      dawid_skene_trace, ds_init_posterior, spectral_skills)


# ---------------------------------------------------------------- data
def onecoin_votes(rng, T, acc, K, p_vote=1.0, class_p=None):
    """One-coin data: per task K_t = K[t] (int or [T]); worker i right w.p. acc[i], else uniform
    over the other K_t - 1 candidates; votes w.p. p_vote. Returns votes [T, I, Kmax], mask, gold."""
    Kt = np.broadcast_to(np.asarray(K), (T,))
    Kmax, I = int(Kt.max()), len(acc)
    gold = (rng.random(T) * Kt).astype(int) if class_p is None else rng.choice(Kmax, T, p=class_p)
    votes = np.zeros((T, I, Kmax), np.int32)
    for i, a in enumerate(acc):
        right = rng.random(T) < a
        shift = 1 + (rng.random(T) * (Kt - 1)).astype(int)          # uniform over the others
        ans = np.where(right | (Kt == 1), gold, (gold + shift) % Kt)
        voted = rng.random(T) < p_vote
        votes[np.arange(T)[voted], i, ans[voted]] = 1
    mask = np.arange(Kmax)[None, :] < Kt[:, None]
    return votes, mask, gold


def confusion_votes(rng, T, P):
    """Votes from per-worker confusion matrices P [I, K, K] (rows = truth), uniform classes."""
    I, K, _ = P.shape
    gold = rng.integers(0, K, T)
    votes = np.zeros((T, I, K), np.int32)
    for i in range(I):
        u = rng.random(T)[:, None]
        ans = (u > np.cumsum(P[i][gold], axis=1)).sum(1).clip(max=K - 1)
        votes[np.arange(T), i, ans] = 1
    return votes, np.ones((T, K), bool), gold


# ---------------------------------------------------------------- independent NumPy EM
def reference_em(votes, mask, q0, n_iter, s, model, prior):
    """Plain float64 loops over tasks, candidates, workers (same init, same smoothing)."""
    votes = np.asarray(votes, np.float64)
    T, I, K = votes.shape
    Kt = mask.sum(1)
    q = np.asarray(q0, np.float64).copy()
    for _ in range(n_iter):
        pi = (q.sum(0) + s) / (q.sum() + K * s) if prior == "estimate" else None
        if model == "one-coin":
            p = np.array([(np.sum(q * votes[:, i]) + s) / (votes[:, i].sum() + 2 * s)
                          for i in range(I)])
        else:
            P = np.zeros((I, K, K))
            for i in range(I):
                for g in range(K):
                    row = np.array([np.sum(q[:, g] * votes[:, i, k]) for k in range(K)]) + s
                    P[i, g] = row / row.sum()
        ll = 0.0
        q = np.zeros((T, K))
        for t in range(T):
            lp = np.full(Kt[t], 0.0)
            for g in range(Kt[t]):
                lp[g] = np.log(pi[g]) if prior == "estimate" else -np.log(Kt[t])
                for i in range(I):
                    for k in range(Kt[t]):
                        if votes[t, i, k] == 0:
                            continue
                        if model == "one-coin":
                            prob = p[i] if k == g else (1 - p[i]) / (Kt[t] - 1)
                        else:
                            prob = P[i, g, k]
                        lp[g] += votes[t, i, k] * np.log(prob)
            z = logsumexp(lp)
            ll += z
            q[t, :Kt[t]] = np.exp(lp - z)
    return q, (p if model == "one-coin" else P), pi, ll


@pytest.mark.parametrize("model,prior,init", [("one-coin", "estimate", "majority"),
                                              ("one-coin", "uniform", "anti"),
                                              ("confusion", "estimate", "majority"),
                                              ("confusion", "uniform", "majority")])
def test_matches_independent_numpy_em(rng, model, prior, init):
    T = 60
    Kt = rng.integers(2, 5, T) if model == "one-coin" else 3     # ragged K for the one-coin
    votes, mask, _ = onecoin_votes(rng, T, [0.8, 0.7, 0.6, 0.55], Kt, p_vote=0.85)
    votes[:5, 0] *= 2                                             # a few repeated votes
    q0 = np.asarray(ds_init_posterior(votes, mask, init))
    n, s = 25, 0.05
    q_ref, par_ref, pi_ref, ll_ref = reference_em(votes, mask, q0, n, s, model, prior)
    r = dawid_skene_em(votes, mask, init, n_iter=n, tol=0.0, smoothing=s, model=model,
                       prior=prior)
    assert int(r.n_iter) == n and not bool(r.converged)
    np.testing.assert_allclose(np.where(mask, np.exp(r.log_posterior), 0), q_ref, atol=1e-5)
    got = r.params.skill if model == "one-coin" else r.params.confusion
    np.testing.assert_allclose(got, par_ref, atol=1e-5)
    if prior == "estimate":
        np.testing.assert_allclose(np.exp(r.params.log_prior), pi_ref, atol=1e-5)
    np.testing.assert_allclose(float(r.log_likelihood), ll_ref, rtol=1e-5)


def test_float64_matches_reference_tightly(rng):
    votes, mask, _ = onecoin_votes(rng, 40, [0.8, 0.7, 0.6], rng.integers(2, 4, 40))
    q0 = np.asarray(ds_init_posterior(votes, mask, "majority"))
    q_ref, p_ref, _, ll_ref = reference_em(votes, mask, q0, 10, 0.1, "one-coin", "estimate")
    with jax.enable_x64(True):
        r = dawid_skene_em(votes, mask, "majority", 10, 0.0, 0.1, dtype="float64")
        assert r.log_posterior.dtype == np.float64
        np.testing.assert_allclose(np.where(mask, np.exp(r.log_posterior), 0), q_ref, atol=1e-10)
        np.testing.assert_allclose(r.params.skill, p_ref, atol=1e-10)
        np.testing.assert_allclose(float(r.log_likelihood), ll_ref, rtol=1e-10)


# ---------------------------------------------------------------- behaviour
def argmax(est):
    return np.argmax(est.log_proba_, axis=1)


def test_recovers_one_coin_accuracies_and_beats_majority(rng):
    acc = np.array([0.92, 0.85, 0.55, 0.45, 0.4, 0.4, 0.35])
    votes, mask, gold = onecoin_votes(rng, 3000, acc, 3, p_vote=0.9)
    counts = bda.Counts.from_arrays(votes.sum(-1), votes, votes)
    est = CouncilDawidSkene().fit(counts)
    assert est.converged_
    np.testing.assert_allclose(est.skills_, acc, atol=0.03)
    maj_acc = np.mean(np.asarray(bda.majority(jax.random.key(0), counts).index) == gold)
    assert np.mean(argmax(est) == gold) > maj_acc + 0.05
    # the spectral start alone is already close (chance-corrected w = (K p - 1) / (K - 1))
    w = np.asarray(spectral_skills(votes.astype(np.float32), mask))
    np.testing.assert_allclose(w, (3 * acc - 1) / 2, atol=0.08)


@pytest.mark.parametrize("model", ["one-coin", "confusion"])
def test_em_is_monotone_and_trace_matches_em(rng, model):
    votes, mask, _ = onecoin_votes(rng, 200, [0.75, 0.6, 0.55, 0.5, 0.7], 3, p_vote=0.8)
    ll, obj, change = map(np.asarray, dawid_skene_trace(votes, mask, 30, smoothing=0.5,
                                                        model=model))
    assert (np.diff(obj) >= -1e-4 * np.abs(obj[1:])).all()
    assert not np.allclose(ll, obj)                          # smoothing enters the objective
    ll0 = np.asarray(dawid_skene_trace(votes, mask, 30, smoothing=0.0, model=model)[0])
    assert (np.diff(ll0) >= -1e-4 * np.abs(ll0[1:])).all()
    assert ll0[-1] > ll0[0]
    for k in range(1, 6):                                    # n_iter = k gives the k-th entry
        r = dawid_skene_em(votes, mask, n_iter=k, tol=0.0, smoothing=0.5, model=model)
        assert int(r.n_iter) == k
        np.testing.assert_allclose(float(r.log_likelihood), ll[k - 1], rtol=1e-6)
        np.testing.assert_allclose(float(r.objective), obj[k - 1], rtol=1e-6)


def test_convergence_flag_and_tolerance(rng):
    votes, mask, _ = onecoin_votes(rng, 200, [0.75, 0.6, 0.55, 0.5, 0.7], 3, p_vote=0.8)
    r = dawid_skene_em(votes, mask, tol=1e-6)
    assert bool(r.converged) and 1 < int(r.n_iter) < 100
    early = dawid_skene_em(votes, mask, n_iter=int(r.n_iter) - 1, tol=1e-6)
    assert not bool(early.converged)                         # stopped at the first small change
    capped = dawid_skene_em(votes, mask, n_iter=2, tol=0.0)
    assert int(capped.n_iter) == 2 and not bool(capped.converged)
    loose = dawid_skene_em(votes, mask, tol=1.0)
    assert int(loose.n_iter) == 1 and bool(loose.converged)


def test_confusion_model_learns_a_systematically_confused_worker(rng):
    K = 3
    honest = 0.7 * np.eye(K) + 0.3 / (K - 1) * (1 - np.eye(K))
    cyclic = 0.9 * np.roll(np.eye(K), 1, axis=1) + 0.05 * (1 - np.roll(np.eye(K), 1, axis=1))
    P = np.stack([honest] * 4 + [cyclic])                    # worker 4: truth g -> votes g + 1
    votes, mask, gold = confusion_votes(rng, 2000, P)
    counts = bda.Counts.from_arrays(votes.sum(-1), votes, votes, vocab=("x", "y", "z"))
    conf = CouncilDawidSkene(model="confusion", n_iter=500).fit(counts)
    one = CouncilDawidSkene(model="one-coin", n_iter=500).fit(counts)
    assert conf.label_space_ == "semantic" and conf.converged_ and one.converged_
    np.testing.assert_allclose(conf.confusion_, P, atol=0.07)
    np.testing.assert_allclose(conf.prior_, 1 / K, atol=0.04)
    acc_conf, acc_one = np.mean(argmax(conf) == gold), np.mean(argmax(one) == gold)
    assert acc_conf > acc_one + 0.03, (acc_conf, acc_one)
    assert one.skills_[4] < 0.1                              # one-coin: merely anti-accurate
    np.testing.assert_allclose(one.skills_[:4], 0.7, atol=0.04)


@pytest.mark.parametrize("model", ["one-coin", "confusion"])
def test_table16_label_switching_under_an_always_wrong_coalition(rng, model):
    """K = 2, seats 0 and 1 always vote the wrong answer, seat 2 is ~0.75 accurate: the
    coalition is the majority, so majority and spectral starts converge to the mirror of the
    truth; only the anti start (the label-requiring mode) recovers it ([BDA] Table 16)."""
    votes, mask, gold = onecoin_votes(rng, 600, [0.0, 0.0, 0.75], 2)
    counts = bda.Counts.from_arrays(votes.sum(-1), votes, votes, gold=gold)
    acc, pred = {}, {}
    for init in ("majority", "spectral", "anti"):
        pred[init] = argmax(CouncilDawidSkene(model=model, init=init).fit(counts))
        acc[init] = np.mean(pred[init] == gold)
    assert acc["majority"] <= 0.2 and acc["spectral"] <= 0.2, acc
    assert acc["anti"] >= 0.8, acc
    assert np.mean(pred["majority"] != pred["anti"]) >= 0.95  # the switch rate: mirror modes


def test_predict_proba_ragged_padding_and_fit_equivalence(rng):
    Kt = rng.integers(1, 6, 150)                               # K_t = 1 .. 5, ragged
    votes, mask, gold = onecoin_votes(rng, 150, [0.8, 0.7, 0.6], Kt, p_vote=0.7)
    counts = bda.Counts.from_arrays(votes.sum(-1), votes, votes, K=Kt, gold=gold)
    for model, init in [("one-coin", "majority"), ("one-coin", "spectral"),
                        ("one-coin", "anti"), ("confusion", "majority")]:
        est = CouncilDawidSkene(model=model, init=init).fit(counts)
        proba = est.predict_proba(counts)
        assert proba.shape == mask.shape and np.isfinite(proba).all()
        np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)
        assert (proba[~mask] == 0).all()
        assert np.isneginf(est.log_proba_[~mask]).all()
        np.testing.assert_allclose(proba, np.where(mask, np.exp(est.log_proba_), 0),
                                   atol=1e-6)
        assert (proba[Kt == 1, 0] == 1).all()
        pred = est.predict(counts)
        assert (pred < Kt).all()
    # a new task set with the fitted parameters: one E-step
    votes2, _, _ = onecoin_votes(rng, 20, [0.8, 0.7, 0.6], Kt[:20])
    new = bda.Counts.from_arrays(votes2.sum(-1), votes2, votes2, K=Kt[:20])
    np.testing.assert_allclose(est.predict_proba(new).sum(1), 1.0, atol=1e-5)


def test_deterministic_gold_blind_and_seeded_ties(rng):
    Kt = np.r_[np.full(20, 4), rng.integers(2, 5, 40)]         # shapes as in the reference test
    votes, mask, gold = onecoin_votes(rng, 60, [0.8, 0.7, 0.6, 0.7], Kt, p_vote=0.8)
    votes[:20] = 0                                            # no votes: exact ties (uniform prior)
    a = bda.Counts.from_arrays(votes.sum(-1), votes, votes, K=Kt, gold=gold)
    other = np.where(rng.random(60) < 0.5, -1, (gold + 1) % Kt)             # different gold
    b = bda.Counts.from_arrays(votes.sum(-1), votes, votes, K=Kt, gold=other)
    f1, f2 = (CouncilDawidSkene(prior="uniform", seed=3).fit(c) for c in (a, b))
    np.testing.assert_array_equal(f1.log_proba_, f2.log_proba_)   # gold is never read
    np.testing.assert_array_equal(f1.skills_, f2.skills_)
    assert f1.log_likelihood_ == f2.log_likelihood_ and f1.n_iter_ == f2.n_iter_
    np.testing.assert_array_equal(f1.predict(a), f2.predict(a))
    np.testing.assert_allclose(f1.predict_proba(a)[:20], 1 / 4, atol=1e-7)
    picks = np.stack([CouncilDawidSkene(prior="uniform", seed=s).fit(a).predict(a)[:20]
                      for s in range(2)])
    assert len(np.unique(picks[0])) >= 3                     # ties are random, not lexicographic
    assert (picks[0] != picks[1]).any()


def test_traces_and_round0_vs_all_votes():
    mv = bda.Move
    traces = []
    for t in range(12):
        right, wrong = ("yes", "no") if t % 2 else ("no", "yes")
        moves = [mv("1", "a", 0, "propose", right), mv("2", "b", 0, "propose", right),
                 mv("3", "c", 0, "propose", wrong if t % 3 else right),
                 mv("4", "c", 1, "vote", right)]
        traces.append(bda.Trace(f"q{t}", tuple(moves), ("yes", "no"), right))
    counts = bda.tally(traces)
    from_traces = CouncilDawidSkene().fit(traces)
    from_counts = CouncilDawidSkene().fit(counts)
    assert from_traces.agents_ == ("a", "b", "c")
    np.testing.assert_array_equal(from_traces.log_proba_, from_counts.log_proba_)
    np.testing.assert_array_equal(from_traces.predict_proba(traces),
                                  from_counts.predict_proba(counts))
    r0 = CouncilDawidSkene(votes="round0").fit(counts)
    everything = CouncilDawidSkene(votes="all").fit(counts)
    assert r0.skills_[2] < everything.skills_[2]               # c's round-1 votes agree


def test_errors(rng):
    votes, mask, _ = onecoin_votes(rng, 10, [0.8, 0.7], 2)
    with pytest.raises(bda.DataError, match="model"):
        CouncilDawidSkene(model="three-coin")
    with pytest.raises(bda.DataError, match="votes"):
        CouncilDawidSkene(votes="round1")
    with pytest.raises(bda.DataError, match="init"):
        CouncilDawidSkene(init="random")
    with pytest.raises(bda.DataError, match="n_iter"):
        dawid_skene_em(votes, mask, n_iter=0)
    with pytest.raises(bda.DataError, match="smoothing"):
        dawid_skene_em(votes, mask, smoothing=-1.0)
    with pytest.raises(bda.DataError, match="init"):
        dawid_skene_em(votes, mask, init="random")
    with pytest.raises(bda.DataError, match="init"):
        dawid_skene_em(votes, mask, init=np.ones((3, 2)))
    with pytest.raises(bda.DataError, match="votes"):
        dawid_skene_em(votes[0], mask)
    with pytest.raises(bda.DataError, match="fit"):
        CouncilDawidSkene().predict_proba(bda.Counts.from_arrays(votes.sum(-1), votes, votes))
    est = CouncilDawidSkene().fit(bda.Counts.from_arrays(votes.sum(-1), votes, votes))
    v3 = np.concatenate([votes, np.zeros((10, 2, 1), np.int32)], axis=2)
    with pytest.raises(bda.DataError, match="K"):
        est.predict_proba(bda.Counts.from_arrays(v3.sum(-1), v3, v3))
    # an explicit starting posterior is accepted
    r = dawid_skene_em(votes, mask, init=np.full((10, 2), 0.5))
    assert np.isfinite(np.asarray(r.log_likelihood))


def test_dense_and_pair_layouts_run_the_same_em(rng):
    """One EM: dense votes and the pair layout give identical results, with gold clamping and
    crowd-kit's stopping rule too."""
    votes, mask, gold = onecoin_votes(rng, 120, [0.8, 0.7, 0.6, 0.55], 3, p_vote=0.8)
    counts = bda.Counts.from_arrays(votes.sum(-1), votes, votes, gold=gold)
    pairs = counts.to_pairs()
    clamp = np.where(np.arange(120) % 4 == 0, gold, -1)
    for model, criterion in (("one-coin", "crowdkit"), ("confusion", "posterior")):
        dense = dawid_skene_em(votes, mask, model=model, criterion=criterion, gold=clamp)
        sparse = dawid_skene_pairs(pairs, model=model, criterion=criterion, gold=clamp)
        np.testing.assert_array_equal(dense.log_posterior, sparse.log_posterior)
        assert int(dense.n_iter) == int(sparse.n_iter) and bool(sparse.converged)
        q = np.exp(np.asarray(sparse.log_posterior))
        np.testing.assert_array_equal(q[clamp >= 0], np.eye(3)[clamp[clamp >= 0]])
    logged = dawid_skene_pairs(pairs, criterion="crowdkit", gold=clamp, history=True)
    n = int(logged.n_iter)
    assert len(logged.loss_history) == 100 and np.isfinite(logged.loss_history[:n]).all()
    assert np.isnan(logged.loss_history[n:]).all()
    assert (np.diff(logged.loss_history[:n - 1]) >= 1e-6).all()     # it stops at the first
    assert logged.loss_history[n - 1] - logged.loss_history[n - 2] < 1e-6   # gain below tol
    # gold=True clamps the tasks with counts.gold
    every = dawid_skene_pairs(pairs, gold=True)
    assert (np.argmax(np.asarray(every.log_posterior), 1) == gold).all()
