"""Hierarchical reliability model (models/hierarchical.py), LOO comparison and posterior predictive
checks. References are derived here: explicit loops, Beta conjugacy with scipy's betaln,
and a 2-D quadrature over the population mean and strength."""
import numpy as np
import jax
import pytest
from numpyro.handlers import condition
from numpyro.infer import MCMC, NUTS, init_to_value
from scipy.special import betaln, logsumexp
from scipy.stats import norm

import bda_jax
from bda_jax.models import diagnostics as dg, hierarchical as hm, inference as inf

# Every NUTS program here runs at the shapes and sampler settings of notebooks/
# 03_model_comparison.ipynb (T = 80 tasks, I = 5 seats, K = 3 slots; two sequential chains of
# 200 + 300 draws; the hierarchical sampler with the data as traced arguments): XLA compiles each
# program once per test session and the rest load it from the session's persistent cache
# (tests/conftest.py), notebook kernel included. Smaller problems are padded with empty tasks and
# seats, which add nothing to the likelihood. Under pytest-xdist this file and the notebook run on
# one worker, one after the other (XDIST_GROUPS in tests/conftest.py), so they share those compiles.
T_NB, I_NB, K_NB = 80, 5, 3
DRAWS = dict(num_warmup=200, num_samples=300, num_chains=2, chain_method="sequential")
JIT_ARGS = {"jit_model_args": True}


def run_hierarchical(key, data, prior=hm.ReliabilityPrior()):
    """NUTS on the hierarchical variant as the notebook runs it (data and prior traced)."""
    return inf.run_nuts(key, hm.HIERARCHICAL_SPEC, data, prior, mcmc_kw=JIT_ARGS, **DRAWS)


def ref_task_log_lik(N, e, c, Kt, gold, gold_missing, theta):
    """Loop reference of the generative story in the module docstring."""
    T, I, _ = c.shape
    out = np.zeros(T)
    for t in range(T):
        if gold_missing[t]:
            rej = N[t] - e[t].sum(-1)
            out[t] = sum(rej[i] * np.log(theta[i]) + (N[t, i] - rej[i]) * np.log(1 - theta[i])
                         - e[t, i].sum() * np.log(Kt[t]) for i in range(I))
            continue
        terms = []
        for g in range(Kt[t]):
            s = -np.log(Kt[t])
            for i in range(I):
                s += (c[t, i, g] * np.log(theta[i]) + (N[t, i] - c[t, i, g]) * np.log(1 - theta[i])
                      - (N[t, i] - e[t, i, g]) * np.log(max(Kt[t] - 1, 1)))
            terms.append(s)
        out[t] = terms[gold[t]] if gold[t] >= 0 else logsumexp(terms)
    return out


def test_log_lik_matches_loop(rng):
    T, I, K = 7, 3, 4
    Kt = np.array([4, 3, 2, 4, 4, 3, 4])
    e = rng.integers(0, 3, size=(T, I, K)) * (np.arange(K) < Kt[:, None])[:, None, :]
    rej = rng.integers(0, 2, size=(T, I, K)) * (np.arange(K) < Kt[:, None])[:, None, :]
    N = e.sum(-1) + rej.sum(-1)
    valid = (np.arange(K) < Kt[:, None])[:, None, :]
    c = e + (rej.sum(-1, keepdims=True) - rej) * valid  # a rejection of a counts for every g != a
    gold = np.array([-1, 1, 0, -1, 3, -1, -1]); gold_missing = np.zeros(T, bool); gold_missing[5] = True
    counts = bda_jax.Counts.from_arrays(N, e, c, K=Kt, gold=gold, gold_missing=gold_missing)
    data = hm.reliability_data(counts)
    theta = np.array([0.8, 0.55, 0.3])
    got = np.asarray(hm.task_log_lik({"theta": theta}, data))
    np.testing.assert_allclose(got, ref_task_log_lik(N, e, c, Kt, gold, gold_missing, theta), rtol=1e-5)
    lp = np.asarray(hm.task_class_log_post({"theta": theta}, data))
    np.testing.assert_allclose(np.exp(lp).sum(1), 1, rtol=1e-5)
    assert np.exp(lp[1, 1]) == 1.0 and np.isneginf(lp[2, 2:]).all()


def frozen_case(T=4, I=2):
    """An unlabeled test task (0) and three labeled calibration tasks (1-3) on two seats at K = 3,
    padded with empty tasks and seats to [T, I, 3]."""
    K = 3
    c = np.zeros((T, I, K)); e = np.zeros((T, I, K)); N = np.zeros((T, I)); gold = np.full(T, -1)
    gold[:4] = [-1, 0, 2, 1]
    e[0, :2] = [[2, 1, 0], [0, 1, 0]]; N[0] = e[0].sum(-1)              # the unlabeled test task
    for t, (right, wrong) in zip((1, 2, 3), ((3, 1), (2, 2), (4, 0))):   # calibration tasks
        e[t, :2, gold[t]] = right; e[t, :2, (gold[t] + 1) % K] = wrong; N[t] = e[t].sum(-1)
    c[:] = e
    return N, e, c, gold, hm.reliability_data_from_arrays(N, e, c, np.ones((T, K), bool), gold)


def frozen_reference(N, e, c, gold, mu, kappa, I=2, K=3):
    """Eq. 1 with alpha = mu kappa + sum c(g*), beta = (1 - mu) kappa + sum d(g*) on the test task."""
    alpha = mu * kappa + np.array([sum(e[t, i, gold[t]] for t in (1, 2, 3)) for i in range(I)])
    beta = (1 - mu) * kappa + np.array([sum(N[t, i] - e[t, i, gold[t]] for t in (1, 2, 3)) for i in range(I)])
    ref = np.array([sum(betaln(alpha[i] + c[0, i, g], beta[i] + N[0, i] - c[0, i, g]) - betaln(alpha[i], beta[i])
                        - (N[0, i] - e[0, i, g]) * np.log(K - 1) for i in range(I)) for g in range(K)])
    return np.exp(ref - logsumexp(ref))


def test_frozen_strength_is_the_finite_construction():
    """mu, kappa frozen + labeled calibration tasks: the test-task posterior is Eq. 1 with
    alpha = mu kappa + sum c(g*), beta = (1 - mu) kappa + sum d(g*) (Beta conjugacy), at K = 3.
    Frozen by the hyperprior: mu ~ Beta(7000, 3000) (sd 0.005) and kappa ~ LogNormal(log 10,
    0.005) pin (mu, kappa) at the sampler's start (0.7, 10), i.e. theta_i ~ Beta(7, 3) give or take
    1 %, and the notebook's hierarchical program samples it (the slow test below conditions the
    model on mu, kappa instead). A swapped Beta parametrization (Beta((1 - mu) kappa, mu kappa))
    moves this posterior by 0.07."""
    N, e, c, gold, data = frozen_case(T_NB, I_NB)
    frozen = hm.ReliabilityPrior(mu_a=7000.0, mu_b=3000.0, kappa_loc=10.0, kappa_scale=0.005)
    mcmc = run_hierarchical(jax.random.key(0), data, frozen)
    s = mcmc.get_samples()
    assert abs(float(s["mu"].mean()) - 0.7) < 0.01 and abs(float(s["kappa"].mean()) - 10) < 0.2
    got = np.asarray(inf.class_posterior(hm.HIERARCHICAL_SPEC, s, data))[0]
    np.testing.assert_allclose(got, frozen_reference(N, e, c, gold, 0.7, 10.0), atol=0.02)


@pytest.mark.slow
def test_frozen_strength_is_the_finite_construction_conditioned():
    """The same identity with mu, kappa conditioned on exactly (0.6, 5), 1,500 draws, no padding."""
    N, e, c, gold, data = frozen_case()
    mu, kappa = 0.6, 5.0
    model = condition(hm.HIERARCHICAL_SPEC.model, data={"mu": np.array([mu]), "kappa": np.array([kappa])})
    mcmc = MCMC(NUTS(model, init_strategy=init_to_value(values={"theta": np.full(2, 0.6)})),
                num_warmup=300, num_samples=1500, progress_bar=False)
    mcmc.run(jax.random.key(0), data, hm.ReliabilityPrior())
    got = np.asarray(inf.class_posterior(hm.PER_AGENT_SPEC, mcmc.get_samples(), data))[0]
    np.testing.assert_allclose(got, frozen_reference(N, e, c, gold, mu, kappa), atol=0.02)


# ---- docs/models.md ceiling example: Beta(8.8, 7.2), theta* = 0.8, I = 3, K = 2, N = 20 (c = 16)
I3, N_TEST = 3, 20
CEILING = 0.9987
HYPER = hm.ReliabilityPrior(mu_a=8.8, mu_b=7.2)   # the finite prior's Beta, now on the population mean


def ceiling_data(L):
    """Task 0: the test task; tasks 1..L: labeled calibration tasks with the same 16/4 split, on
    seats 0-2 and candidate slots 0-1 (slot 2 masked out: K = 2); the other tasks and seats are
    empty (no moves: they contribute nothing), so every L has the notebook's shapes."""
    c = np.zeros((T_NB, I_NB, K_NB)); N = np.zeros((T_NB, I_NB)); gold = np.full(T_NB, -1)
    c[: L + 1, :I3, 0], c[: L + 1, :I3, 1], N[: L + 1, :I3] = 16, 4, N_TEST
    gold[1: L + 1] = 0
    mask = np.zeros((T_NB, K_NB), bool); mask[:, :2] = True
    return hm.reliability_data_from_arrays(N, c.copy(), c, mask, gold)


def quadrature(L):
    """Exact posterior quantities of the test task by quadrature: theta_i integrated in closed form
    given (mu, kappa) (Beta conjugacy), (logit mu, log kappa) on a fine grid. Returns
    (log P(wrong | data), E[mu | data], E[theta_1 | data])."""
    u, v = np.linspace(-10, 10, 801), np.linspace(np.log(10) - 9, np.log(10) + 9, 801)
    U, V = np.meshgrid(u, v, indexing="ij")
    mu, kap = 1 / (1 + np.exp(-U)), np.exp(V)
    a0, b0 = mu * kap, (1 - mu) * kap
    logw = HYPER.mu_a * np.log(mu) + HYPER.mu_b * np.log1p(-mu) + norm.logpdf(V, np.log(10), 1.5)
    A, B = a0 + 16 * L, b0 + 4 * L                      # after the calibration tasks
    hyp = np.stack([logw + I3 * (betaln(A + cg, B + 20 - cg) - betaln(a0, b0)) for cg in (16, 4)])
    z = logsumexp(hyp)
    w = np.exp(hyp - z)                                  # [2, grid]: joint weight of (g, mu, kappa)
    theta_mean = sum(w[j] * (A + cg) / (A + B + 20) for j, cg in enumerate((16, 4))).sum()
    return logsumexp(hyp[1]) - z, float((w.sum(0) * mu).sum()), float(theta_mean)


def test_ceiling_reference_numbers():
    """The finite construction stops at 0.969 for N = 20 (paper) under the 0.9987 limit."""
    lf = [I3 * (betaln(8.8 + cg, 7.2 + 20 - cg) - betaln(8.8, 7.2)) for cg in (16, 4)]
    assert round(float(np.exp(lf[0] - logsumexp(lf))), 3) == 0.969
    lim = I3 * 1.6 * np.log(4)                           # (theta*/(1 - theta*))^(alpha - beta) per seat
    assert round(float(1 / (1 + np.exp(-lim))), 4) == CEILING


def test_hierarchical_rises_above_the_ceiling():
    """Remark 2 of [BDA]: a global theta_i with learned strength pins the orientation as labels
    accumulate. NUTS (one sampler, data as traced arguments) against the quadrature: the tiny
    P(wrong) itself is compared loosely (a mean of tiny per-draw values is a noisy, low-biased
    estimate), the posterior means of mu and theta tightly."""
    log_wrong = {}
    for L in (1, 24):
        data = ceiling_data(L)
        s = run_hierarchical(jax.random.key(L), data, HYPER).get_samples()
        lp = jax.vmap(lambda th: hm.task_class_log_post({"theta": th}, data)[0, 1])(s["theta"])
        log_wrong[L] = float(logsumexp(np.asarray(lp)) - np.log(lp.shape[0]))
        exact = quadrature(L)
        assert exact[0] < np.log(1 - CEILING)
        if L == 24:   # the flipped mode is negligible here, so one chain sees all the mass
            assert abs(log_wrong[L] - exact[0]) < 3, (L, log_wrong[L], exact)
            # posterior sd of mu is 0.064 (quadrature): 0.03 is ~5 Monte Carlo standard errors
            assert abs(float(s["mu"].mean()) - exact[1]) < 0.03, (float(s["mu"].mean()), exact)
            assert abs(float(s["theta"][:, 0].mean()) - exact[2]) < 0.02, (s["theta"][:, 0].mean(), exact)
    assert all(v < np.log(1 - CEILING) for v in log_wrong.values()), log_wrong
    assert log_wrong[1] > log_wrong[24] + 10, log_wrong


# ---- model comparison and posterior predictive checks on a council with two inverted seats
THETA_TRUE = np.array([0.85, 0.8, 0.75, 0.3, 0.25])


def simulate_council_counts(rng, T=T_NB, K=K_NB, n_moves=3, n_gold=20):
    """Each seat's move names the truth with probability theta_i, else one of the K - 1 wrong
    candidates uniformly; gold on the first n_gold tasks (the notebook's council)."""
    truth = rng.integers(0, K, T)
    right = rng.random((T, THETA_TRUE.size, n_moves)) < THETA_TRUE[None, :, None]
    wrong = (truth[:, None, None] + rng.integers(1, K, right.shape)) % K
    answers = np.where(right, truth[:, None, None], wrong)                     # [T, I, moves]
    e = np.stack([(answers == g).sum(-1) for g in range(K)], axis=-1)
    gold = np.where(np.arange(T) < n_gold, truth, -1)
    return bda_jax.Counts.from_arrays(N=e.sum(-1), e=e, c=e, gold=gold), truth


@pytest.fixture(scope="module")
def council_fits():
    counts, truth = simulate_council_counts(np.random.default_rng(5))
    data = hm.reliability_data(counts)
    fits = {}
    for kind in ("hierarchical", "shared"):
        spec = hm.spec_for(kind)
        mcmc = inf.run_nuts(jax.random.key(1), spec, data, mcmc_kw=JIT_ARGS if kind == "hierarchical" else None,
                            **DRAWS)
        samples = mcmc.get_samples(group_by_chain=True)
        fits[kind] = (spec, mcmc, dg.to_datatree(mcmc, inf.draws_log_lik(spec, samples, data)))
    return counts, truth, data, fits


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto:UserWarning")
def test_loo_ranks_the_correct_model_first(council_fits):
    counts, truth, data, fits = council_fits
    table = dg.compare({k: dt for k, (_, _, dt) in fits.items()})
    assert table.index[0] == "hierarchical", table
    # ArviZ 1.x: elpd_diff is elpd(model) - elpd(best), negative for the worse model
    assert -float(table.loc["shared", "elpd_diff"]) > 2 * float(table.loc["shared", "dse"]), table
    diag = dg.convergence(fits["hierarchical"][2], var_names=("theta",))
    assert diag["max_rhat"] < 1.05, diag
    theta = np.asarray(fits["hierarchical"][1].get_samples()["theta"]).mean(0)
    assert np.all(np.abs(theta - THETA_TRUE) < 0.12), theta       # inverted seats learned as such
    unl = np.asarray(counts.gold) < 0
    proba = np.asarray(inf.class_posterior(fits["hierarchical"][0], fits["hierarchical"][1].get_samples(), data))
    votes = np.asarray(counts.e).sum(1)
    assert (proba.argmax(1) == truth)[unl].mean() >= (votes.argmax(1) == truth)[unl].mean()


def test_agreement_rates_reference():
    e = np.zeros((2, 3, 2), int)
    e[0, 0, 0] = e[0, 1, 0] = e[0, 2, 1] = 1       # task 0: seats 0,1 say A, seat 2 says B
    e[1, 0, 1] = 2; e[1, 1, 0] = 1                 # task 1: seat 0 says B twice, seat 1 A, seat 2 nothing
    got = np.asarray(dg.agreement_rates(e, np.ones((2, 2), bool)))
    # seat 0: task 0 others are A and B, a tie -> 1/2 credit; task 1 others say A, it says B
    #         twice -> 0; rate 0.5 / 3.  seat 1: task 0 tie -> 1/2; task 1 others say B -> 0;
    #         rate 0.5 / 2.  seat 2: task 0 others say A, A -> 0.
    np.testing.assert_allclose(got, [1 / 6, 1 / 4, 0.0], rtol=1e-6)


def test_ppc_flags_the_shared_model(council_fits):
    """Per-seat agreement rates: the hierarchical fit reproduces them, the shared one cannot
    (it predicts the inverted seats agree as often as the honest ones)."""
    counts, _, data, fits = council_fits
    observed = np.asarray(dg.agreement_rates(counts.e, counts.mask))

    @jax.jit
    def replicated_rates(keys, theta):        # the notebook's program: one compile for both fits
        one = lambda k, th: dg.agreement_rates(hm.replicate_endorsements(k, {"theta": th}, data), data.mask)
        return jax.vmap(one)(keys, theta)

    keys = jax.random.split(jax.random.key(2), 100)
    pvals = {}
    for kind, (spec, mcmc, _) in fits.items():
        theta = np.asarray(mcmc.get_samples()["theta"])[::6]          # 100 of the 600 draws
        pvals[kind] = dg.ppc_pvalues(observed, replicated_rates(keys, theta))
    assert np.all((pvals["hierarchical"] > 0.02) & (pvals["hierarchical"] < 0.98)), pvals
    assert np.any((pvals["shared"] < 0.01) | (pvals["shared"] > 0.99)), pvals


def test_force_groups_from_traces():
    from importlib import resources
    traces = bda_jax.read_traces(resources.files("bda_jax.data") / "example_council.jsonl")
    counts = bda_jax.tally(traces, seat_key="agent-force")
    data = hm.reliability_data(counts, groups="force")
    forces = [a.rsplit(":", 1)[-1] for a in counts.agents]
    assert data.group.shape == (len(counts.agents), len(set(forces)))
    same = np.asarray(data.group) @ np.asarray(data.group).T
    assert all((same[i, j] == 1) == (forces[i] == forces[j]) for i in range(len(forces)) for j in range(len(forces)))
    init = hm.default_init(data)
    assert init["mu"].shape == (len(set(forces)),)
    assert np.all(np.isfinite(np.asarray(hm.task_log_lik(init, data))))


def test_replicated_endorsements_follow_the_story():
    """Gold known (so g_t is the gold): each seat's N moves split Binomial(N, θ_i) onto g_t and
    uniformly over the task's wrong slots; a task with one candidate keeps only the Binomial
    part. Means and the per-draw totals are checked against that story over 4,000 draws."""
    N = np.array([[12.0, 12.0], [9.0, 9.0]])
    mask = np.array([[True, True, True], [True, False, False]])      # K_t = 3 and K_t = 1
    zeros = np.zeros((2, 2, 3))
    data = hm.reliability_data_from_arrays(N, zeros, zeros, mask, gold=np.array([1, 0]))
    theta = np.array([0.8, 0.3], np.float32)
    keys = jax.random.split(jax.random.key(5), 4000)
    reps = np.asarray(jax.jit(jax.vmap(lambda k: hm.replicate_endorsements(
        k, {"theta": theta}, data)))(keys))                           # [R, T, I, K]
    assert reps.dtype == np.int32 and reps.shape == (4000, 2, 2, 3)
    assert np.all(reps.sum(-1)[:, 0] == 12)                          # every move endorses a slot
    assert np.all(reps[:, 1, :, 1:] == 0)                            # masked slots stay empty
    mean = reps.mean(0)
    se = np.sqrt(12 * 0.25 / 4000) * 4                               # 4 standard errors at most
    np.testing.assert_allclose(mean[0, :, 1], 12 * theta, atol=se)
    np.testing.assert_allclose(mean[0, :, 0], 12 * (1 - theta) / 2, atol=se)
    np.testing.assert_allclose(mean[0, :, 2], 12 * (1 - theta) / 2, atol=se)
    np.testing.assert_allclose(mean[1, :, 0], 9 * theta, atol=se)
    var = reps[:, 0, :, 1].var(0)                                    # Binomial variance
    np.testing.assert_allclose(var, 12 * theta * (1 - theta), rtol=0.1)
