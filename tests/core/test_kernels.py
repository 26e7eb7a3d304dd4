"""Kernel properties (hypothesis), the confusion posterior, decisions, dtypes and batching."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import bda_jax as bda
from reference import onecoin_reference, random_counts

T, I, K = 8, 3, 4          # fixed shapes: every example reuses one compiled kernel


@st.composite
def count_tensors(draw, max_count):
    """Consistent counts [T, I, K] with every count up to ``max_count`` (log-uniform sizes)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = 10 ** rng.uniform(0, np.log10(max_count), (T, I))
    N = np.minimum(np.floor(scale), max_count).astype(np.int64)
    pos = (rng.random((T, I)) * (N + 1)).astype(np.int64).clip(max=N)
    e = np.stack([[rng.multinomial(pos[t, i], rng.dirichlet(np.ones(K) * 0.5))
                   for i in range(I)] for t in range(T)])
    rej = np.stack([[rng.multinomial(N[t, i] - pos[t, i], rng.dirichlet(np.ones(K) * 0.5))
                     for i in range(I)] for t in range(T)])
    c = e + rej.sum(-1, keepdims=True) - rej
    alpha = 10 ** rng.uniform(-3, 3, I)
    beta = 10 ** rng.uniform(-3, 3, I)
    return N, e, c, alpha, beta


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(count_tensors(max_count=10**7), st.permutations(range(K)))
def test_equivariance_under_candidate_relabeling(data, perm):
    N, e, c, alpha, beta = data
    counts = bda.Counts.from_arrays(N=N, e=e, c=c)
    moved = bda.Counts.from_arrays(N=N, e=e[..., perm], c=c[..., perm])
    a = np.asarray(bda.onecoin_log_posterior(counts, alpha, beta))
    b = np.asarray(bda.onecoin_log_posterior(moved, alpha, beta))
    np.testing.assert_allclose(np.exp(a[:, perm]), np.exp(b), atol=1e-5)


@SETTINGS
@given(count_tensors(max_count=10**7), st.permutations(range(I)))
def test_invariance_to_agent_order(data, perm):
    N, e, c, alpha, beta = data
    counts = bda.Counts.from_arrays(N=N, e=e, c=c)
    moved = bda.Counts.from_arrays(N=N[:, perm], e=e[:, perm], c=c[:, perm])
    a = np.exp(bda.onecoin_log_posterior(counts, alpha, beta))
    b = np.exp(bda.onecoin_log_posterior(moved, alpha[perm], beta[perm]))
    np.testing.assert_allclose(a, b, atol=1e-5)


@SETTINGS
@given(count_tensors(max_count=10**7), st.sampled_from([1.0, 0.3]))
def test_finite_normalized_and_float32_matches_float64(data, tau):
    N, e, c, alpha, beta = data
    counts = bda.Counts.from_arrays(N=N, e=e, c=c)
    lp = np.asarray(bda.onecoin_log_posterior(counts, alpha, beta, tau))
    assert lp.dtype == np.float32 and not np.isnan(lp).any() and (lp <= 0).all()
    np.testing.assert_allclose(np.exp(lp.astype(np.float64)).sum(1), 1.0, atol=1e-5)
    ref = onecoin_reference(N, e, c, np.full(T, K), alpha, beta, tau)
    np.testing.assert_allclose(np.exp(lp), np.exp(ref), atol=1e-4)
    with jax.enable_x64(True):
        lp64 = np.asarray(bda.onecoin_log_posterior(counts, alpha, beta, tau, dtype=jnp.float64))
    assert lp64.dtype == np.float64
    np.testing.assert_allclose(np.exp(lp64), np.exp(ref), atol=1e-9)


def test_naive_float32_lgamma_fails_where_the_kernel_holds():
    """The large-count path matters: at counts ~1e6 naive float32 log-Gamma differences are off."""
    from jax.scipy.special import gammaln
    N = np.array([[1_000_000, 1_000_000]])
    e = np.array([[[500_000, 500_000], [500_001, 499_999]]])
    alpha, beta = np.array([3.0, 2.0]), np.array([2.0, 3.0])
    ref = np.exp(onecoin_reference(N, e, e, [2], alpha, beta))
    naive = (gammaln(jnp.float32(alpha)[None, :, None] + e) +
             gammaln(jnp.float32(beta)[None, :, None] + (N[..., None] - e))).sum(1)
    naive = np.exp(np.asarray(naive - logsumexp(np.asarray(naive, np.float64), 1, keepdims=True)))
    got = np.exp(bda.onecoin_log_posterior(bda.Counts.from_arrays(N=N, e=e, c=e), alpha, beta))
    assert np.abs(naive - ref).max() > 1e-2
    np.testing.assert_allclose(got, ref, atol=1e-6)


def test_large_counts_under_jit_and_vmap():
    N = np.full((2, 2), 10**6)
    e = np.array([[[600000, 400000], [500000, 500000]], [[10, 999990], [999990, 10]]])
    counts = bda.Counts.from_arrays(N=N, e=e, c=e)
    A = jnp.array([[2.0, 3.0], [5.0, 1.0], [0.5, 0.5]])
    B = jnp.array([[3.0, 2.0], [1.0, 5.0], [0.5, 0.5]])
    grid = jax.jit(jax.vmap(lambda a, b: bda.onecoin_log_posterior(counts, a, b)))(A, B)
    for g in range(3):
        ref = onecoin_reference(N, e, e, [2, 2], A[g], B[g])
        np.testing.assert_allclose(np.exp(grid[g]), np.exp(ref), atol=1e-6)


def test_vmap_over_a_prior_grid_equals_a_loop(rng):
    N, e, c, Kt = random_counts(rng, 50, I, K)
    counts = bda.Counts.from_arrays(N=N, e=e, c=c, K=Kt)
    A, B = rng.uniform(0.5, 20, (6, I)), rng.uniform(0.5, 20, (6, I))
    taus = jnp.array([1.0, 0.5, 0.25, 1.0, 0.1, 0.75])
    grid = jax.vmap(lambda a, b, t: bda.onecoin_log_posterior(counts, a, b, t))(A, B, taus)
    for g in range(6):
        one = bda.onecoin_log_posterior(counts, A[g], B[g], taus[g])
        np.testing.assert_allclose(grid[g], one, atol=1e-6)
    assert np.isneginf(np.asarray(grid)[:, ~counts.mask]).all()


def confusion_reference(c, K_t, P, tau, log_prior):
    """Eq. (4) in float64: log pi0(g) + tau * sum_i sum_h c_i(h) log P_i(h | g), normalized."""
    score = tau * np.einsum("tih,igh->tg", c.astype(np.float64), np.log(P)) + log_prior
    mask = np.arange(c.shape[2])[None, :] < np.asarray(K_t)[:, None]
    score = np.where(mask, score, -np.inf)
    return score - logsumexp(score, 1, keepdims=True)


@pytest.mark.parametrize("tau", [1.0, 0.25])
def test_confusion_posterior_matches_eq4(rng, tau):
    N, e, c, Kt = random_counts(rng, 100, I, K, max_moves=10)
    counts = bda.Counts.from_arrays(N=N, e=e, c=c, K=Kt)
    P = rng.dirichlet(np.ones(K), (I, K))
    log_prior = np.log(rng.dirichlet(np.ones(K)))
    ref = confusion_reference(c, Kt, P, tau, log_prior)
    got = bda.confusion_log_posterior(counts, P, tau, log_prior)
    np.testing.assert_allclose(np.exp(got), np.exp(ref), atol=1e-5)
    with jax.enable_x64(True):
        got64 = bda.confusion_log_posterior(counts, P, tau, log_prior, dtype="float64")
    np.testing.assert_allclose(np.exp(got64), np.exp(ref), atol=1e-12)


def test_uniform_error_confusion_is_the_onecoin_for_single_endorsements(rng):
    # Lemma 2: P(h|g) = theta [h = g] + (1 - theta)/(K - 1) [h != g] at a point mass theta is
    # the one-coin's mean likelihood; for single endorsements it equals Eq. (1) at mu = theta.
    answers = rng.integers(0, K, (30, I))
    e = np.zeros((30, I, K), int)
    e[np.arange(30)[:, None], np.arange(I), answers] = 1
    counts = bda.Counts.from_arrays(N=np.ones((30, I), int), e=e, c=e)
    theta = np.array([0.7, 0.4, 0.9])
    P = np.stack([np.full((K, K), (1 - t) / (K - 1)) + np.eye(K) * (t - (1 - t) / (K - 1))
                  for t in theta])
    conf = np.exp(bda.confusion_log_posterior(counts, P))
    onecoin = np.exp(bda.onecoin_log_posterior(counts, theta * 8, (1 - theta) * 8))
    np.testing.assert_allclose(conf, onecoin, atol=1e-5)


def test_majority_ties_are_random_but_seeded():
    e = np.zeros((400, 2, 3), int)
    e[:, 0, 0] = 1
    e[:, 1, 1] = 1                            # a 1-1 tie between candidates 0 and 1 everywhere
    counts = bda.Counts.from_arrays(N=np.ones((400, 2), int), e=e, c=e)
    a = bda.majority(jax.random.key(3), counts)
    b = bda.majority(jax.random.key(3), counts)
    np.testing.assert_array_equal(a.index, b.index)
    share = float(np.mean(np.asarray(a.index) == 0))
    assert 0.4 < share < 0.6 and set(np.asarray(a.index).tolist()) == {0, 1}
    np.testing.assert_allclose(a.confidence, 0.5)
    np.testing.assert_allclose(a.proba.sum(1), 1.0)
    # a clear winner is always chosen; round0 vs all rounds
    e2 = e.copy()
    e2[:, 0, 0] = 2
    win = bda.majority(jax.random.key(0), bda.Counts.from_arrays(
        N=np.full((400, 2), 2), e=e2, c=e2, e0=e))
    assert set(np.asarray(win.index).tolist()) == {0, 1}
    win_all = bda.majority(jax.random.key(0), bda.Counts.from_arrays(
        N=np.full((400, 2), 2), e=e2, c=e2, e0=e), rounds="all")
    assert (np.asarray(win_all.index) == 0).all()
    np.testing.assert_allclose(win_all.confidence, 2 / 3, rtol=1e-6)


def test_decide_breaks_posterior_ties_randomly_and_reports_confidence():
    lp = jnp.log(jnp.array([[0.5, 0.5, 0.0], [0.2, 0.7, 0.1]] * 200))
    d = bda.decide(jax.random.key(1), lp)
    idx = np.asarray(d.index)
    assert set(idx[0::2].tolist()) == {0, 1} and (idx[1::2] == 1).all()
    np.testing.assert_allclose(np.asarray(d.confidence)[1::2], 0.7, rtol=1e-6)


def test_bad_kernel_arguments_raise_data_error():
    counts = bda.Counts.from_arrays(N=[[1, 1]], e=[[[1, 0], [0, 1]]], c=[[[1, 0], [0, 1]]])
    with pytest.raises(bda.DataError, match="alpha"):
        bda.onecoin_log_posterior(counts, [1.0], [1.0, 1.0])
    with pytest.raises(bda.DataError, match="log_prior"):
        bda.onecoin_log_posterior(counts, [1.0, 1.0], [1.0, 1.0], log_prior=[0.0, 0.0, 0.0])
    with pytest.raises(bda.DataError, match="confusion"):
        bda.confusion_log_posterior(counts, np.ones((2, 3, 3)))
    with pytest.raises(bda.DataError, match="x64"):
        bda.onecoin_log_posterior(counts, [1.0, 1.0], [1.0, 1.0], dtype=jnp.float64)
    with pytest.raises(bda.DataError, match="dtype"):
        bda.onecoin_log_posterior(counts, [1.0, 1.0], [1.0, 1.0], dtype=jnp.int32)
    for a, tau in (([0.0, 1.0], 1.0), ([np.nan, 1.0], 1.0), ([1.0, 1.0], -0.5)):
        with pytest.raises(bda.DataError):
            bda.onecoin_log_posterior(counts, a, [1.0, 1.0], tau)
    with pytest.raises(bda.DataError, match="confusion"):
        bda.confusion_log_posterior(counts, -np.ones((2, 2, 2)))
    with pytest.raises(bda.DataError, match="rounds"):
        bda.majority(jax.random.key(0), counts, rounds="last")


@pytest.mark.parametrize("dtype,max_moves", [(np.int8, 60), (np.int16, 9000)])
def test_narrow_integer_counts_match_the_reference(rng, dtype, max_moves):
    """Counts stored as int8 / int16 (what a memory-bound user passes) give the float64
    reference's posteriors: index arithmetic must not overflow in the narrow dtype."""
    I, K = 4, 4
    N, e, c, Kt = random_counts(rng, 300, I, K, max_moves=max_moves)
    base = bda.Counts.from_arrays(N=N, e=e, c=c, K=Kt)
    narrow = bda.Counts(*(x.astype(dtype) if name in ("N", "e", "c") else x
                          for name, x in zip(("N", "e", "c", "mask", "K", "gold", "gold_missing",
                                              "cluster", "e0", "conf0"), base.tree_flatten()[0])))
    alpha, beta = rng.uniform(1, 9, I), rng.uniform(1, 9, I)
    ref = onecoin_reference(N, e, c, Kt, alpha, beta)
    got = bda.onecoin_log_posterior(narrow, alpha, beta)
    np.testing.assert_allclose(np.exp(got), np.exp(ref), atol=5e-5)      # float32 at N ~ 60
    np.testing.assert_allclose(np.exp(got), np.exp(bda.onecoin_log_posterior(base, alpha, beta)),
                               atol=1e-6)
    P = rng.dirichlet(np.ones(K) * 3, (I, K))
    np.testing.assert_allclose(np.exp(bda.confusion_log_posterior(narrow, P)),
                               np.exp(bda.confusion_log_posterior(base, P)), atol=1e-5)


def test_counts_below_compiles_the_table_path_inside_a_users_jit():
    """Issue 20: a bound the caller knows selects the table path for traced counts (the same
    posterior as the float64 reference); a bound the concrete counts break is refused."""
    from reference import onecoin_reference
    N, e, c = [[3, 1]], [[[2, 1], [0, 1]]], [[[2, 1], [0, 1]]]
    counts = bda.Counts.from_arrays(N=N, e=e, c=c)
    alpha, beta = np.array([4.0, 3.0]), np.array([2.0, 1.0])
    fn = jax.jit(lambda k: bda.onecoin_log_posterior(k, alpha, beta, counts_below=8,
                                                     table_size=8))
    np.testing.assert_allclose(np.asarray(fn(counts.on_device())),
                               onecoin_reference(N, e, c, [2], alpha, beta), atol=1e-5)
    assert "cond" not in str(jax.make_jaxpr(fn)(counts.on_device()))
    with pytest.raises(bda.DataError, match="counts_below"):
        bda.onecoin_log_posterior(counts, alpha, beta, counts_below=3)
