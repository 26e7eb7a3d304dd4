"""The BDA paper ([BDA]) reproduced: every expected number comes from the paper's text or from
an independent derivation here, never from the code under test."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import betaln, expit

import bda_jax as bda
from reference import EXAMPLE, onecoin_reference, random_counts


def unanimous_counts(sizes, K):
    """Task t: sizes[t] members, each with one propose of candidate 0 (Appendix C.8's setting);
    the other seats, up to max(sizes), make no move (a seat without moves adds nothing to the
    posterior), so the whole table is one kernel shape per K."""
    I = max(sizes)
    e = np.zeros((len(sizes), I, K), int)
    for t, n in enumerate(sizes):
        e[t, :n, 0] = 1
    return bda.Counts.from_arrays(N=e.sum(-1), e=e, c=e)


# Appendix C.8 table: Beta(1, 1), N members unanimous; posterior on the endorsed answer.
C8 = {1: (0.5000, 0.5000, 0.5000), 2: (0.5000, 0.6667, 0.7500), 3: (0.5000, 0.8000, 0.9000),
      5: (0.5000, 0.9412, 0.9878), 10: (0.5000, 0.9981, 0.9999), 20: (0.5000, 1.0000, 1.0000)}


def test_c8_table():
    sizes = sorted(C8)
    for j, K in enumerate((2, 3, 4)):
        counts = unanimous_counts(sizes, K)
        post = np.exp(bda.onecoin_log_posterior(counts, np.ones(max(sizes)), np.ones(max(sizes))))
        for t, n_members in enumerate(sizes):
            assert round(float(post[t, 0]), 4) == C8[n_members][j], (n_members, K)


def test_k_minus_one_factor_both_ways():
    # Reference trace: one agent proposes candidate 0 at K = 3 with prior mean 0.7.
    counts = bda.Counts.from_arrays(N=[[1]], e=[[[1, 0, 0]]], c=[[[1, 0, 0]]])
    post = np.exp(np.asarray(bda.onecoin_log_posterior(counts, [7.0], [3.0]), np.float64))[0]
    np.testing.assert_allclose(post, [0.700, 0.150, 0.150], atol=5e-4)
    # The implementation without the factor returns (0.538, 0.231, 0.231) (paper, C.8).
    without = np.array([0.7, 0.3, 0.3]) / 1.3
    np.testing.assert_allclose(without, [0.538, 0.231, 0.231], atol=5e-4)
    assert np.abs(post - without).max() > 0.1
    # At K = 2 the two coincide.
    counts2 = bda.Counts.from_arrays(N=[[1]], e=[[[1, 0]]], c=[[[1, 0]]])
    post2 = np.exp(bda.onecoin_log_posterior(counts2, [7.0], [3.0]))[0]
    np.testing.assert_allclose(post2, [0.7, 0.3], atol=1e-6)


def test_k2_ceiling_sequence_and_limit():
    # Theorem 2(c) and C.8: Beta(8.8, 7.2), theta* = 0.8, I = 3, c = round(theta* N).
    alpha, beta, theta, I = 8.8, 7.2, 0.8, 3
    limit = expit(I * (alpha - beta) * np.log(theta / (1 - theta)))
    assert round(limit, 4) == 0.9987
    expected = {1: 0.646, 5: 0.810, 20: 0.969, 100: 0.996, 500: 0.998}
    got = []
    for n, want in expected.items():
        c = int(round(theta * n))
        N = np.full((1, I), n)
        e = np.tile([c, n - c], (1, I, 1))          # every move is a proposal
        counts = bda.Counts.from_arrays(N=N, e=e, c=e)
        p = float(np.exp(bda.onecoin_log_posterior(counts, np.full(I, alpha), np.full(I, beta)))[0, 0])
        assert round(p, 3) == want, (n, p)
        got.append(p)
    assert all(p < limit for p in got) and got == sorted(got)
    # far past the table path the posterior stays below the ceiling and approaches it
    n = 10**6
    counts = bda.Counts.from_arrays(N=np.full((1, I), n), e=np.tile([800000, 200000], (1, I, 1)),
                                    c=np.tile([800000, 200000], (1, I, 1)))
    p = float(np.exp(bda.onecoin_log_posterior(counts, np.full(I, alpha), np.full(I, beta)))[0, 0])
    assert p < limit and abs(p - limit) < 1e-5


def test_worked_example_table20():
    # Appendix G.1: r = (0.21, 0.29, 0.60), (b, kappa, s) = (0.52, 1, 4); Eq. (3) with r_bar the
    # plain mean of the r_i. Trace claim-01 of the bundled example reproduces the seat counts.
    r = np.array([0.21, 0.29, 0.60])
    b, kappa, s = 0.52, 1.0, 4.0
    mu = np.clip(b + kappa * (r - r.mean()), 0.05, 0.95)
    np.testing.assert_allclose(mu, [0.37, 0.44, 0.75], atol=0.011)
    np.testing.assert_allclose(np.log(mu / (1 - mu)), [-0.55, -0.24, 1.12], atol=0.03)
    alpha, beta = mu * s, (1 - mu) * s

    counts = bda.tally([t for t in bda.read_traces(EXAMPLE) if t.task_id == "claim-01"])
    assert counts.candidates[0] == ("True", "False") and counts.agents == ("A1", "A2", "A3")
    true, false = 0, 1
    cd_true = np.stack([counts.c[0, :, true], counts.d[0, :, true]], -1)
    np.testing.assert_array_equal(cd_true, [[0, 3], [0, 1], [2, 1]])

    # per-seat contribution to the True-vs-False log-odds, derived independently
    c, d = cd_true[:, 0], cd_true[:, 1]
    delta = betaln(alpha + c, beta + d) - betaln(alpha + d, beta + c)
    np.testing.assert_allclose(delta, [1.18, 0.24, 0.71], atol=0.05)
    assert abs(delta.sum() - 2.12) < 0.1

    post = np.exp(bda.onecoin_log_posterior(counts, alpha, beta))[0]
    assert abs(post[true] - 0.89) <= 0.01
    np.testing.assert_allclose(np.log(post[true] / post[false]), delta.sum(), atol=1e-5)
    # plain majority over all proposals (the coalition plus the flip) says False
    vote = bda.majority(jax.random.key(0), counts, rounds="all")
    assert int(vote.index[0]) == false


@pytest.mark.parametrize("K", [2, 3, 5])
def test_proposition2_single_endorsements_exact(K):
    # Proposition 2: one endorsement per agent -> log-posterior is the w_i-weighted committee
    # (+ the -(N - e) log(K - 1) term for K > 2), exactly for any finite s.
    rng = np.random.default_rng(K)
    G, T, I = 25, 48, 5                                  # 1,200 random instances
    mu = rng.uniform(0.05, 0.95, (G, I))
    s = rng.choice([0.5, 4.0, 8.0, 32.0, 300.0], (G, I))
    answers = rng.integers(0, K, (T, I))
    e = np.zeros((T, I, K), int)
    e[np.arange(T)[:, None], np.arange(I)[None, :], answers] = 1
    counts = bda.Counts.from_arrays(N=np.ones((T, I), int), e=e, c=e)
    with jax.enable_x64(True):
        lp = jax.vmap(lambda a, b: bda.onecoin_log_posterior(counts, a, b, dtype=jnp.float64))(
            jnp.asarray(mu * s), jnp.asarray((1 - mu) * s))
        lp = np.asarray(lp)
    # committee score: sum_i 1{a_i = g} log mu_i + 1{a_i != g} (log(1 - mu_i) - log(K - 1))
    hit = answers[None, :, :, None] == np.arange(K)[None, None, None, :]          # [1,T,I,K]
    m = mu[:, None, :, None]
    score = np.where(hit, np.log(m), np.log1p(-m) - np.log(K - 1)).sum(2)        # [G,T,K]
    ref = score - np.log(np.exp(score).sum(-1, keepdims=True))
    np.testing.assert_allclose(lp, ref, atol=1e-10, rtol=0)
    if K == 2:   # the pairwise log-odds is exactly sum_i w_i (x_i(0) - x_i(1))
        w = np.log(mu / (1 - mu))[:, None, :]
        x = np.where(answers == 0, 1.0, -1.0)[None]
        np.testing.assert_allclose(lp[..., 0] - lp[..., 1], (w * x).sum(-1), atol=1e-10)


def test_property3_confidence_invariance(rng):
    traces = bda.read_traces(EXAMPLE)
    rewritten = []
    for t in traces:
        moves = tuple(m.__class__(**{**m.__dict__, "confidence": float(rng.random())})
                      if m.force in ("propose", "vote") else m for m in t.moves)
        rewritten.append(bda.Trace(t.task_id, moves, t.candidates, t.gold, t.cluster))
    a, b = bda.tally(traces), bda.tally(rewritten)
    assert not np.array_equal(np.nan_to_num(a.conf0), np.nan_to_num(b.conf0))
    alpha, beta = np.array([2.0, 3.0, 1.5]), np.array([1.0, 1.2, 2.5])
    pa = np.asarray(bda.onecoin_log_posterior(a, alpha, beta))
    pb = np.asarray(bda.onecoin_log_posterior(b, alpha, beta))
    assert pa.tobytes() == pb.tobytes()
    P = rng.dirichlet(np.ones(4), (3, 4))
    assert (np.asarray(bda.confusion_log_posterior(a, P, 0.5)).tobytes()
            == np.asarray(bda.confusion_log_posterior(b, P, 0.5)).tobytes())


def test_k2_symmetric_prior_returns_the_prior(rng):
    # Theorem 2(d): alpha_0 = beta_0 at K = 2 -> pi(. | T) = pi_0 for every trace.
    N, e, c, K = random_counts(rng, 200, 4, 2, ragged=False)
    counts = bda.Counts.from_arrays(N=N, e=e, c=c, K=K)
    for a0 in (0.3, 1.0, 8.0):
        for log_prior in (None, np.log([0.3, 0.7])):
            post = np.exp(bda.onecoin_log_posterior(counts, np.full(4, a0), np.full(4, a0),
                                                    log_prior=log_prior))
            want = np.full((200, 2), 0.5) if log_prior is None else np.tile([0.3, 0.7], (200, 1))
            np.testing.assert_allclose(post, want, atol=1e-6)


@pytest.mark.parametrize("dtype,atol", [("float32", 1e-5), ("float64", 1e-10)])
def test_independent_reference_random_counts(rng, dtype, atol):
    T, I, K = 400, 4, 5
    N, e, c, Kt = random_counts(rng, T, I, K, max_moves=20)
    counts = bda.Counts.from_arrays(N=N, e=e, c=c, K=Kt)
    with jax.enable_x64(dtype == "float64"):
        for trial in range(5):
            alpha = rng.uniform(0.1, 100.0, I)
            beta = rng.uniform(0.1, 100.0, I)
            tau = [1.0, 0.25][trial % 2]
            log_prior = np.log(rng.dirichlet(np.ones(K))) if trial >= 3 else None
            got = np.exp(np.asarray(bda.onecoin_log_posterior(
                counts, alpha, beta, tau, log_prior, dtype=dtype), np.float64))
            ref = np.exp(onecoin_reference(N, e, c, Kt, alpha, beta, tau, log_prior))
            np.testing.assert_allclose(got, ref, atol=atol, rtol=0)


def test_independent_reference_from_moves(rng):
    """Random traces written as moves; the reference tallies them itself (Appendix D.7 table)."""
    K, I = 4, 3
    agents = [f"s{i}" for i in range(I)]
    traces, expected = [], []
    alpha, beta = np.array([3.0, 1.2, 6.0]), np.array([2.0, 2.5, 1.0])
    for t in range(60):
        moves, history = [], []      # history: (move id, agent, answer index or None)
        for k in range(int(rng.integers(1, 9))):
            i = int(rng.integers(I))
            force = rng.choice(["propose", "vote", "concede", "challenge", "abstain"])
            mid = f"m{k}"
            answered = [h for h in history if h[2] is not None]
            if force in ("concede", "challenge") and answered:
                tgt = answered[int(rng.integers(len(answered)))]
                moves.append(bda.Move(mid, agents[i], k, str(force), target=tgt[0]))
                history.append((mid, agents[i], tgt[2] if force == "concede" else None, force, tgt))
            elif force == "abstain":
                moves.append(bda.Move(mid, agents[i], k, "abstain"))
                history.append((mid, agents[i], None, "abstain", None))
            else:
                g = int(rng.integers(K))
                moves.append(bda.Move(mid, agents[i], k, "propose", answer="ABCD"[g]))
                history.append((mid, agents[i], g, "propose", None))
        traces.append(bda.Trace(f"t{t}", tuple(moves), ("A", "B", "C", "D")))
        # reference: log F_i(g) from each agent's signed endorsements
        score = np.zeros(K)
        for i, name in enumerate(agents):
            n_inf, e_g, c_g = 0, np.zeros(K), np.zeros(K)
            for mid, who, ans, force, tgt in history:
                if who != name or force == "abstain":
                    continue
                if force == "propose":
                    n_inf += 1; e_g[ans] += 1; c_g[ans] += 1
                elif force == "concede":
                    if tgt[1] == name:
                        continue                       # self-concede: no information
                    n_inf += 1; e_g[ans] += 1; c_g[ans] += 1
                else:                                  # challenge (own target: a retract, also -1)
                    n_inf += 1; c_g += 1; c_g[tgt[2]] -= 1
            score += (betaln(alpha[i] + c_g, beta[i] + n_inf - c_g) - betaln(alpha[i], beta[i])
                      - (n_inf - e_g) * np.log(K - 1))
        expected.append(np.exp(score - score.max()) / np.exp(score - score.max()).sum())
    counts = bda.tally(traces, agents=agents)
    got = np.exp(bda.onecoin_log_posterior(counts, alpha, beta))
    np.testing.assert_allclose(got, np.array(expected), atol=1e-5)
