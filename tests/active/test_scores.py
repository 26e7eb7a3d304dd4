"""Expected Brier reduction and vote disagreement against independent NumPy brute force: every
hypothetical label refits Eq. 3 (or the Dirichlet rows of Eq. 4) from scratch by plain loops
over the labeled tasks, the posteriors come from SciPy's Beta functions (tests/reference.py) or
a log-sum over agents and cells, and the score is the definition written out task by task."""
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import entropy

import bda_jax
from bda_jax import Counts
from bda_jax.active import (ARMS, DEFAULT_PARAMS, add_label, arm_theta,
                            expected_brier_reduction, label_totals, reliability_from_totals,
                            vote_disagreement)
from reference import onecoin_reference, random_counts

T, I, K = 10, 3, 3
LABELED = {0: 1, 3: 0, 5: 2, 8: 1}          # task -> gold slot (each below that task's K)


@pytest.fixture(scope="module")
def council():
    """A ragged tiny council (K_t in {2, 3}) with the labels ``LABELED`` (slot mod K_t)."""
    rng = np.random.default_rng(7)
    N, e, c, Kt = random_counts(rng, T, I, K, max_moves=4)
    gold = np.full(T, -1)
    for t, g in LABELED.items():
        gold[t] = g % Kt[t]
    LABELED.update({t: int(gold[t]) for t in LABELED})
    return Counts.from_arrays(N, e, c, K=Kt, gold=gold), (N, e, c, Kt, gold)


# ----------------------------------------------------------------- the NumPy brute force

def np_totals(N, c, labels):
    """labels: {task: slot or soft [K] vector}; plain loops."""
    num, den, n = np.zeros(I), np.zeros(I), np.zeros((I, K, K))
    for t, g in labels.items():
        q = np.eye(K)[g] if np.isscalar(g) else np.asarray(g, float)
        for i in range(I):
            den[i] += N[t, i]
            for k in range(K):
                num[i] += q[k] * c[t, i, k]
                for h in range(K):
                    n[i, k, h] += q[k] * c[t, i, h]
    return num, den, n


def np_reliability(num, den):
    r = np.zeros(I)
    seen = [i for i in range(I) if den[i] > 0]
    for i in seen:
        r[i] = num[i] / den[i]
    pooled = np.mean([r[i] for i in seen]) if seen else 0.5
    for i in range(I):
        if den[i] == 0:
            r[i] = pooled
    return r


def np_posterior(arm, N, e, c, Kt, labels, theta):
    num, den, n = np_totals(N, c, labels)
    if arm == "bda-confusion":
        lam, tau = theta
        off = 0.4 / (K - 1)
        m = np.full((K, K), off) + np.eye(K) * (0.6 - off)
        P = (lam * m[None] + n) / (lam + n.sum(-1, keepdims=True))
        score = np.full((T, K), -np.inf)
        for t in range(T):
            for g in range(Kt[t]):
                score[t, g] = tau * sum(c[t, i, h] * np.log(P[i, g, h])
                                        for i in range(I) for h in range(K))
        return score - logsumexp(score, axis=1, keepdims=True)
    b, kappa, s, tau = theta
    r = np_reliability(num, den)
    mu = np.clip(b + kappa * (r - r.mean()), 0.05, 0.95)
    return onecoin_reference(N, e, c, Kt, mu * s, (1 - mu) * s, tau)


def np_self_brier(lp, Kt):
    p = np.exp(lp)
    return np.array([1 - sum(p[t, g] ** 2 for g in range(Kt[t])) for t in range(T)])


def brute_force(arm, arrays, theta, candidates, target, count_self=False, labels=None):
    N, e, c, Kt, gold = arrays
    labels = dict(LABELED) if labels is None else labels
    p_now = np.exp(np_posterior(arm, N, e, c, Kt, labels, theta))
    b_now = np_self_brier(np.log(np.maximum(p_now, 1e-300)), Kt)
    out = []
    for t in candidates:
        others = [u for u in range(T) if u != t]
        den = sum(target[u] for u in others) + (target[t] if count_self else 0)
        before = sum(target[u] * b_now[u] for u in others)
        if count_self:
            before += target[t] * b_now[t]
        expected = 0.0
        for k in range(Kt[t]):
            b_k = np_self_brier(np_posterior(arm, N, e, c, Kt, {**labels, t: k}, theta), Kt)
            expected += p_now[t, k] * sum(target[u] * b_k[u] for u in others)
        out.append((before - expected) / den)
    return np.array(out)


# ----------------------------------------------------------------- the tests

def test_totals_reproduce_the_library_fits(council):
    counts, (N, e, c, Kt, gold) = council
    tot = label_totals(counts)
    num, den, n = np_totals(N, c, LABELED)
    np.testing.assert_allclose(tot.num, num)
    np.testing.assert_allclose(tot.den, den)
    np.testing.assert_allclose(tot.n, n)
    np.testing.assert_allclose(reliability_from_totals(tot.num, tot.den),
                               bda_jax.reliability(counts), rtol=1e-6)
    lam = 3.0
    m = np.asarray(bda_jax.uniform_error_confusion(K))[None]
    np.testing.assert_allclose((lam * m + tot.n) / (lam + tot.n.sum(-1, keepdims=True)),
                               bda_jax.fit_confusion(counts, lam), rtol=1e-6)
    # a hard label added to the totals = the totals of the counts with that gold
    g2 = gold.copy()
    g2[2] = 1
    relabeled = Counts.from_arrays(N, e, c, K=Kt, gold=g2)
    added = add_label(tot, c[2], N[2], np.eye(K)[1])
    for a, b in zip(added, label_totals(relabeled)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_no_labels_pool_every_agent_at_one_half():
    r = reliability_from_totals(np.zeros(3), np.zeros(3))
    np.testing.assert_allclose(r, [0.5, 0.5, 0.5])
    r = reliability_from_totals(np.array([3.0, 0.0, 1.0]), np.array([4.0, 0.0, 4.0]))
    np.testing.assert_allclose(r, [0.75, 0.5, 0.25])


@pytest.mark.parametrize("arm", ["bda-per-agent", "bda-confusion"])
@pytest.mark.parametrize("count_self", [False, True])
def test_expected_brier_reduction_matches_a_brute_force_refit(council, arm, count_self):
    counts, arrays = council
    params = ({"b": 0.58, "kappa": 3.0, "s": 6.0, "tau": 0.8} if arm == "bda-per-agent"
              else {"lambda": 2.0, "tau": 0.7})
    theta = [float(x) for x in arm_theta(arm, params)]
    candidates = [t for t in range(T) if t not in LABELED]
    target = np.array([0.0 if t in LABELED else 1.0 for t in range(T)])
    target[1] = 2.5                           # unequal weights count
    got = expected_brier_reduction(counts, candidates, arm=arm, params=params, target=target,
                                   count_self=count_self)
    want = brute_force(arm, arrays, theta, candidates, target, count_self)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-6)
    assert np.abs(want).max() > 1e-3          # the scores are not all ~0: the check has teeth


def test_default_candidates_and_target_are_the_unlabeled_tasks(council):
    counts, arrays = council
    theta = [float(x) for x in arm_theta("bda-per-agent")]
    unlabeled = [t for t in range(T) if t not in LABELED]
    got = expected_brier_reduction(counts)
    want = brute_force("bda-per-agent", arrays, theta, unlabeled,
                       np.array([0.0 if t in LABELED else 1.0 for t in range(T)]))
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-6)
    assert DEFAULT_PARAMS["bda-per-agent"]["kappa"] > 0


def test_a_shared_prior_learns_nothing_from_a_label(council):
    """kappa = 0: no label moves any prior, so every score is exactly 0 (ties, not noise)."""
    counts, _ = council
    got = expected_brier_reduction(counts, arm="bda-shared", params=DEFAULT_PARAMS["bda-shared"])
    assert np.all(got == 0.0)


def test_every_arm_scores_and_bad_options_are_named(council):
    counts, _ = council
    for arm in ARMS:
        assert np.all(np.isfinite(expected_brier_reduction(counts, [1, 2], arm=arm)))
    with pytest.raises(bda_jax.DataError) as err:
        expected_brier_reduction(counts, [T])
    assert err.value.field == "candidates"
    with pytest.raises(bda_jax.DataError) as err:
        expected_brier_reduction(counts, [1], target=np.ones(T - 1))
    assert err.value.field == "target"
    with pytest.raises(bda_jax.DataError) as err:
        expected_brier_reduction(counts, [1], arm="bda-nope")
    assert err.value.field == "arm"
    with pytest.raises(bda_jax.DataError) as err:
        expected_brier_reduction(counts, [1], params={"b": 0.5})
    assert err.value.field == "params"


def test_vote_disagreement_is_the_normalized_vote_entropy(council):
    counts, (N, e, c, Kt, gold) = council
    for rounds, votes in (("all", e), ("round0", np.asarray(counts.e0))):
        got = vote_disagreement(counts, rounds)
        want = []
        for t in range(T):
            v = votes[t].sum(0)[:Kt[t]].astype(float)
            want.append(0.0 if v.sum() == 0 or Kt[t] < 2 else entropy(v) / np.log(Kt[t]))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    # ranking: unanimous < split two ways < split evenly over three
    c3 = Counts.from_arrays(N=[[2, 2, 2]] * 3,
                            e=[[[2, 0, 0]] * 3, [[2, 0, 0], [0, 2, 0], [2, 0, 0]],
                               [[2, 0, 0], [0, 2, 0], [0, 0, 2]]],
                            c=[[[2, 0, 0]] * 3, [[2, 0, 0], [0, 2, 0], [2, 0, 0]],
                               [[2, 0, 0], [0, 2, 0], [0, 0, 2]]])
    d = vote_disagreement(c3)
    assert d[0] == 0.0 and 0 < d[1] < d[2] and d[2] == pytest.approx(1.0)
    with pytest.raises(bda_jax.DataError):
        vote_disagreement(c3, rounds="last")


def test_greedy_batch_conditions_on_each_picks_expected_label(council):
    """select_batch's greedy rule, written out: pick the best score, add that task with its
    current posterior as a soft label, drop it from the target, score again."""
    from bda_jax.active import select_batch
    counts, arrays = council
    N, e, c, Kt, gold = arrays
    params = {"b": 0.58, "kappa": 3.0, "s": 6.0, "tau": 0.8}
    theta = [float(x) for x in arm_theta("bda-per-agent", params)]
    unlabeled = [t for t in range(T) if t not in LABELED]
    target = np.array([0.0 if t in LABELED else 1.0 for t in range(T)])
    first = brute_force("bda-per-agent", arrays, theta, unlabeled, target)
    assert np.sort(first)[-1] - np.sort(first)[-2] > 1e-4       # a clear best: no tie-break
    t1 = unlabeled[int(np.argmax(first))]
    p1 = np.exp(np_posterior("bda-per-agent", N, e, c, Kt, LABELED, theta))[t1]
    rest = [t for t in unlabeled if t != t1]
    target2 = target.copy()
    target2[t1] = 0.0
    second = brute_force("bda-per-agent", arrays, theta, rest, target2,
                         labels={**LABELED, t1: p1})
    assert np.sort(second)[-1] - np.sort(second)[-2] > 1e-4
    t2 = rest[int(np.argmax(second))]

    sel = select_batch(counts, 2, "expected-brier", params=params, n_candidates=None, seed=3)
    assert sel.index.tolist() == [t1, t2]
    np.testing.assert_allclose(sel.score, [first.max(), second.max()], rtol=2e-3, atol=2e-6)
    assert sel.params_source == "given" and sel.params["kappa"] == 3.0
    top = select_batch(counts, 2, "expected-brier", params=params, n_candidates=None,
                       batch="top", seed=3)
    assert top.index.tolist() == [unlabeled[j] for j in np.argsort(-first)[:2]]
    # the greedy second score is the refitted one, not the first pass's runner-up
    assert abs(second.max() - np.sort(first)[-2]) > 1e-3
