"""Supervised and zero-cost baselines ([BDA] Appendix B.1, E.1, E.3) and the leak-free
recalibration wrappers: hand-derivable cases, leak tests, PAV and temperature checks."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import isotonic_regression as scipy_isotonic

from bda_jax import Counts, DataError
from bda_jax.aggregators import (Aggregator, BestMember, GatedVote, IsotonicRecalibrated,
                                 LogisticStacking, Majority, TemperatureScaled, VerbalizedVote,
                                 fit_posterior_temperature, isotonic_regression, pav,
                                 round0_accuracy)

# One stacking configuration and one council shape throughout: the vmapped L-BFGS grid compiles
# once for the whole file.
STACK = dict(steps=40)


def _council(seed=0, T=240, acc=(0.8, 0.65, 0.0), gold=None):
    """Per-task K in {2, 3, 4}; seat i proposes the gold with probability acc[i] (seat 2 is always
    wrong); seat 1 challenges seat 2's answer in round 1 half of the time; clusters of 2 tasks;
    a few unlabeled tasks and a few whose gold is not a candidate."""
    rng = np.random.default_rng(seed)
    I, Kmax = len(acc), 4
    Kt = rng.integers(2, Kmax + 1, T)
    g = rng.integers(0, Kt) if gold is None else np.asarray(gold)
    ans = np.empty((T, I), int)
    for i, a in enumerate(acc):
        wrong = (g + rng.integers(1, Kt)) % Kt
        ans[:, i] = np.where(rng.random(T) < a, g, wrong)
    e = np.zeros((T, I, Kmax), int)
    e[np.arange(T)[:, None], np.arange(I)[None], ans] = 1
    c = e.copy()
    mask = np.arange(Kmax)[None] < Kt[:, None]
    challenge = rng.random(T) < 0.5
    reject = np.zeros((T, Kmax), int)
    reject[np.arange(T), ans[:, 2]] = 1
    c[:, 1] += (challenge[:, None] & mask & (reject == 0)).astype(int)
    N = e.sum(-1)
    N[:, 1] += challenge
    conf0 = np.where(e > 0, rng.uniform(0.55, 0.95, e.shape), np.nan).astype(np.float32)
    conf0[rng.random(T) < 0.3, 2] = np.nan                  # seat 2 often states nothing
    gold_arr = g.copy()
    gold_missing = np.zeros(T, bool)
    gold_arr[200:205] = -1                                  # unlabeled
    gold_arr[205:209] = -1
    gold_missing[205:209] = True                            # gold given, not a candidate
    return Counts.from_arrays(N=N, e=e, c=c, K=Kt, gold=gold_arr, e0=e, conf0=conf0,
                              cluster=np.arange(T) // 2, gold_missing=gold_missing)


@pytest.fixture(scope="module")
def council():
    return _council()


def _with_gold(counts, gold, gold_missing=None):
    return Counts.from_arrays(N=counts.N, e=counts.e, c=counts.c, K=counts.K, gold=gold,
                              e0=counts.e0, conf0=counts.conf0, cluster=counts.cluster,
                              gold_missing=counts.gold_missing if gold_missing is None
                              else gold_missing)


def _hand(answers, gold, K=3, conf=None):
    """Counts of single round-0 proposals: answers [T][I] slot or -1 (silent)."""
    a = np.asarray(answers)
    T, I = a.shape
    e = np.zeros((T, I, K), int)
    t, i = np.nonzero(a >= 0)
    e[t, i, a[t, i]] = 1
    conf0 = None
    if conf is not None:
        conf0 = np.full(e.shape, np.nan, np.float32)
        cf = np.asarray(conf, np.float32)
        conf0[t, i, a[t, i]] = cf[t, i]
    return Counts.from_arrays(N=e.sum(-1), e=e, c=e, gold=gold, conf0=conf0)


ARMS = {
    "stacking": lambda: LogisticStacking(**STACK),
    "gated-vote": lambda: GatedVote(),
    "best-member": lambda: BestMember(),
    "verbalized": lambda: VerbalizedVote(),
    "iso:stacking": lambda: IsotonicRecalibrated(LogisticStacking(**STACK)),
    "temp:stacking": lambda: TemperatureScaled(LogisticStacking(**STACK)),
    "iso:best-member": lambda: IsotonicRecalibrated(BestMember()),
    "temp:gated-vote": lambda: TemperatureScaled(GatedVote()),
}


# ----------------------------------------------------------------------------- every arm

@pytest.mark.parametrize("arm", list(ARMS))
def test_leak_free_and_proper_distributions(council, arm):
    """Zero-weight tasks: permuting (and unlabeling) their gold leaves every prediction
    bit-identical; predict_proba sums to 1 over each task's candidates, 0 on padding."""
    T = council.N.shape[0]
    held = np.arange(T) < 60                                      # clusters 0..29
    w = (~held).astype(np.float32)
    m1 = ARMS[arm]().fit(council, weights=w)
    p1, d1 = m1.predict_proba(council), m1.predict(council)

    gold = np.asarray(council.gold).copy()
    K = np.asarray(council.K)
    gold[held] = np.where(gold[held] >= 0, (gold[held] + 1) % K[held], 0)
    gold[:6] = -1                                                 # and some become unlabeled
    gm = np.asarray(council.gold_missing).copy()
    gm[6:8], gold[6:8] = True, -1
    permuted = _with_gold(council, gold, gm)
    assert (np.asarray(permuted.gold)[held] != np.asarray(council.gold)[held]).any()
    m2 = ARMS[arm]().fit(permuted, weights=w)
    np.testing.assert_array_equal(m2.predict_proba(council), p1)
    np.testing.assert_array_equal(m2.predict(council), d1)

    mask = np.asarray(council.mask)
    assert np.all(p1[~mask] == 0)
    np.testing.assert_allclose(p1.sum(1), 1.0, atol=1e-5)
    assert np.all(p1 >= 0) and np.all(mask[np.arange(T), d1])


def test_training_labels_do_matter(council):
    """The leak test is not vacuous: permuting *training* gold changes the stacking fit."""
    w = (np.arange(council.N.shape[0]) >= 60).astype(np.float32)
    m1 = LogisticStacking(**STACK).fit(council, weights=w)
    gold = np.asarray(council.gold).copy()
    K = np.asarray(council.K)
    sel = (np.arange(gold.size) >= 60) & (gold >= 0)
    gold[sel] = (gold[sel] + 1) % K[sel]
    m2 = LogisticStacking(**STACK).fit(_with_gold(council, gold), weights=w)
    assert not np.array_equal(m1.coef_, m2.coef_)


# ----------------------------------------------------------------------------- stacking

def test_stacking_negative_weight_for_always_wrong_seat_and_beats_majority(council):
    T = council.N.shape[0]
    train = np.arange(T) < 120
    m = LogisticStacking(**STACK).fit(council, weights=train.astype(np.float32))
    assert m.coef_.shape == (3, 2) and m.intercept_ is None   # per-task K: no intercept
    assert m.l2_ in m.l2_grid and m.cv_brier_.shape == (len(m.l2_grid),)
    net = m.coef_[:, 0] - m.coef_[:, 1]        # only w_c - w_d moves the softmax
    assert net[2] < 0 and m.coef_[2, 0] < 0     # always-wrong seat: evidence against its answer
    assert net[0] > net[1] > 0                  # the better seat weighs more
    test = ~train & (np.asarray(council.gold) >= 0)
    gold = np.asarray(council.gold)
    acc_stack = np.mean(m.predict(council)[test] == gold[test])
    acc_major = np.mean(Majority().predict(council)[test] == gold[test])
    assert acc_stack > acc_major + 0.15


def test_stacking_intercept_with_shared_vocab():
    """Uninformative seats, gold always the first label: only the per-label intercept can
    learn it, and it is added automatically when every task shares one candidate list. (One
    seat, K = 4, T = 240: the same feature shape as the council fixture, so no recompile.)"""
    rng = np.random.default_rng(1)
    T, I, K = 240, 1, 4
    ans = rng.integers(0, K, (T, I))
    e = np.zeros((T, I, K), int)
    e[np.arange(T)[:, None], np.arange(I)[None], ans] = 1
    counts = Counts.from_arrays(N=e.sum(-1), e=e, c=e, gold=np.zeros(T, int),
                                vocab=("A", "B", "C", "D"))
    m = LogisticStacking(**STACK).fit(counts)
    assert m.intercept_ is not None and np.argmax(m.intercept_) == 0
    assert np.all(m.predict(counts) == 0)
    with pytest.raises(DataError):
        LogisticStacking(intercept="yes")


# ----------------------------------------------------------------------------- gated vote

def test_gated_vote_excludes_below_chance_seat():
    # K = 3 (chance 1/3). Training: seat 0 right 4/4, seat 1 right 3/4, seat 2 right 0/4.
    train = [[0, 0, 1], [1, 1, 2], [2, 0, 0], [0, 0, 2]]
    test = [[0, 0, 1],          # gated {0, 1}: A with share 1 (plain majority: 2/3)
            [0, 1, 1],          # gated: A/B 1/2 each (plain majority: B 2/3)
            [-1, -1, 2]]        # no gated vote: falls back to every seat's vote
    counts = _hand(train + test, gold=[0, 1, 2, 0, -1, -1, -1])
    m = GatedVote().fit(counts)
    np.testing.assert_allclose(m.seat_accuracy_, [1.0, 0.75, 0.0])
    np.testing.assert_allclose(m.chance_, [1 / 3] * 3, rtol=1e-6)
    assert m.gate_.tolist() == [True, True, False] and not m.fallback_
    p = m.predict_proba(counts)[4:]
    np.testing.assert_allclose(p, [[1, 0, 0], [0.5, 0.5, 0], [0, 0, 1]], atol=1e-7)
    assert m.predict(counts)[4] == 0


def test_gated_vote_falls_back_when_no_seat_clears_chance():
    counts = _hand([[1, 2], [2, 0], [0, 1]], gold=[0, 1, 2])   # both seats always wrong
    m = GatedVote().fit(counts)
    assert m.fallback_ and m.gate_.all()
    np.testing.assert_allclose(m.predict_proba(counts)[0], [0, 0.5, 0.5])


def test_round0_accuracy_ignores_unweighted_and_unanswered_tasks():
    counts = _hand([[0, -1], [1, 1], [0, 0]], gold=[0, 0, 0], K=2)
    acc = round0_accuracy(counts, weights=[1, 1, 0])
    np.testing.assert_allclose(acc.accuracy, [0.5, 0.0])
    np.testing.assert_allclose(acc.n, [2, 1])
    np.testing.assert_allclose(acc.chance, [0.5, 0.5])


# ----------------------------------------------------------------------------- best member

def test_best_member_picks_the_best_seat():
    # training accuracies: seat 0 2/5, seat 1 3/5, seat 2 2/5 (task 4: only seat 2 is right)
    train = [[0, 0, 0], [1, 1, 0], [0, 2, 1], [1, 1, 2], [1, 1, 0]]
    test = [[0, 2, 1], [1, -1, 1]]
    counts = _hand(train + test, gold=[0, 1, 2, 0, 0, -1, -1])
    m = BestMember().fit(counts)
    assert m.member_ == 1
    np.testing.assert_allclose(m.seat_accuracy_, [0.4, 0.6, 0.4], rtol=1e-6)
    p = m.predict_proba(counts)[5:]
    np.testing.assert_allclose(p, [[0.2, 0.2, 0.6], [1 / 3] * 3], atol=1e-6)
    assert m.predict(counts)[5] == 2
    # leak-free: only the weighted tasks count
    assert BestMember().fit(counts, weights=[0, 0, 0, 0, 1, 0, 0]).member_ == 2
    assert BestMember().fit(counts, weights=[0, 0, 1, 0, 0, 1, 1]).member_ == 1


def test_best_member_without_labels_raises():
    counts = _hand([[0, 1]], gold=[-1])
    with pytest.raises(DataError):
        BestMember().fit(counts)


# ----------------------------------------------------------------------------- verbalized

def test_verbalized_vote_ranks_by_stated_confidence():
    answers = [[0, 1, 1],        # A at .9 vs B at .6 + .2 = .8: A wins on confidence
               [0, 1, -1],       # seat 1 states nothing: skipped, A with mean .7
               [0, 1, 2]]        # nobody states anything: uniform
    conf = [[0.9, 0.6, 0.2], [0.7, np.nan, 0], [np.nan, np.nan, np.nan]]
    counts = _hand(answers, gold=[-1, -1, -1], conf=conf)
    m = VerbalizedVote().fit(counts)
    p = m.predict_proba(counts)
    np.testing.assert_allclose(p[0], [0.9, 0.1, 0.0], atol=1e-6)   # winner's mean confidence
    np.testing.assert_allclose(p[1], [0.7, 0.15, 0.15], atol=1e-6)
    np.testing.assert_allclose(p[2], [1 / 3] * 3, atol=1e-6)
    assert m.predict(counts)[:2].tolist() == [0, 0]
    assert Majority().predict(counts)[0] == 1                       # plurality disagrees
    share = VerbalizedVote(confidence="share").predict_proba(counts)
    np.testing.assert_allclose(share[0], [0.9 / 1.7, 0.8 / 1.7, 0.0], atol=1e-6)
    imputed = VerbalizedVote(missing=0.5).predict_proba(counts)
    np.testing.assert_allclose(imputed[1], [0.7, 0.3, 0.0], atol=1e-6)   # B now votes at .5
    np.testing.assert_allclose(np.sort(imputed[2]), [0.25, 0.25, 0.5], atol=1e-6)  # seeded tie
    # two seats at .8 on A: the mean, not the vote share, is the confidence
    two = _hand([[0, 0]], gold=[-1], conf=[[0.8, 0.8]])
    np.testing.assert_allclose(VerbalizedVote().predict_proba(two)[0], [0.8, 0.1, 0.1],
                               atol=1e-6)


# ----------------------------------------------------------------------------- PAV / isotonic

def _brute_isotonic(y, w):
    """Minimum weighted SSE over all partitions into contiguous blocks whose block means are
    non-decreasing (the isotonic solution is one of them)."""
    n, best, best_f = len(y), np.inf, None
    for cuts in itertools.product([0, 1], repeat=n - 1):
        bounds = [0] + [j + 1 for j, c in enumerate(cuts) if c] + [n]
        f = np.empty(n)
        for a, b in zip(bounds[:-1], bounds[1:]):
            f[a:b] = np.sum(w[a:b] * y[a:b]) / np.sum(w[a:b])
        if np.all(np.diff(f) >= -1e-12):
            sse = np.sum(w * (y - f) ** 2)
            if sse < best - 1e-12:
                best, best_f = sse, f
    return best_f


def test_pav_matches_brute_force():
    rng = np.random.default_rng(0)
    for n in range(1, 8):
        for _ in range(25):
            y = rng.integers(0, 2, n).astype(float) if rng.random() < 0.5 else rng.random(n)
            w = rng.uniform(0.1, 3.0, n)
            f = pav(y, w)
            np.testing.assert_allclose(f, _brute_isotonic(y, w), atol=1e-12)
            np.testing.assert_allclose(f, scipy_isotonic(y, weights=w).x, atol=1e-12)
    assert pav([3.0, 1.0, 2.0]).tolist() == [2.0, 2.0, 2.0]


def test_isotonic_regression_pools_tied_abscissae():
    xs, fs = isotonic_regression([0.2, 0.2, 0.9, 0.5], [1, 0, 0, 1], [1, 3, 1, 1])
    np.testing.assert_allclose(xs, [0.2, 0.5, 0.9])
    np.testing.assert_allclose(fs, [0.25, 0.5, 0.5])


def test_isotonic_wrapper_rescales_and_keeps_decisions(council):
    """The decision is the base's; its confidence is the isotonic map of the base's probability
    of it (never floored); the vector puts that on the decision (floored at 1/K_t plus the
    margin) and scales the rest proportionally wherever that keeps the margin (every task
    here; tests/aggregators/test_recalibration.py covers the flattened case)."""
    m = IsotonicRecalibrated(BestMember()).fit(council)
    assert np.all(np.diff(m.iso_y_) >= 0)
    base = m.base_.predict_proba(council).astype(np.float64)
    p = m.predict_proba(council)
    top = m.base_.predict(council)
    np.testing.assert_array_equal(m.predict(council), top)
    r = np.arange(top.size)
    conf = base[r, top]
    want = np.interp(conf, m.iso_x_, m.iso_y_)
    np.testing.assert_allclose(m.predict_confidence(council), want, atol=1e-12)
    K = np.asarray(council.K)
    v = np.clip(want, 1 / K + m.decision_margin * (K - 1) / K, 1.0)
    others = base.copy()
    others[r, top] = 0
    scaled = others * ((1 - v) / (1 - conf))[:, None]     # the rest scaled proportionally
    assert np.all(scaled.max(1) <= v - m.decision_margin)
    scaled[r, top] = v
    np.testing.assert_allclose(p, scaled, atol=1e-6)      # the base's float32 rounding


def test_majority_as_base_needs_no_weights(council):
    m = IsotonicRecalibrated(Majority()).fit(council)
    np.testing.assert_allclose(m.predict_proba(council).sum(1), 1.0, atol=1e-5)


# ----------------------------------------------------------------------------- temperature

def test_fit_temperature_recovers_known_temperature():
    rng = np.random.default_rng(0)
    T, K, true_t = 4000, 4, 2.5
    z = rng.normal(0.0, 2.0, (T, K))
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    gold = (p.cumsum(1) > rng.random((T, 1))).argmax(1)
    overconfident = jax.nn.log_softmax(true_t * z, axis=-1)
    t_hat = fit_posterior_temperature(overconfident, gold, np.ones((T, K), bool))
    assert abs(t_hat - true_t) < 0.2


class _Overconfident(Aggregator):
    """A fixed base: log_softmax(1.5 c_0) while the truth is softmax(0.5 c_0), i.e. T = 3."""

    def fit(self, data, weights=None):
        self.fitted_ = True
        return self

    def _log_proba(self, counts):
        z = 1.5 * jnp.asarray(counts.c[:, 0, :], jnp.float32)
        return jax.nn.log_softmax(jnp.where(counts.mask, z, -jnp.inf), axis=-1)


def test_temperature_wrapper_recovers_temperature():
    rng = np.random.default_rng(3)
    T, K = 3000, 3
    c0 = rng.integers(0, 6, (T, K))
    p = np.exp(0.5 * c0)
    p /= p.sum(1, keepdims=True)
    gold = (p.cumsum(1) > rng.random((T, 1))).argmax(1)
    c = np.zeros((T, 1, K), int)
    c[:, 0] = c0
    counts = Counts.from_arrays(N=c.max(-1), e=np.zeros_like(c), c=c, gold=gold)
    m = TemperatureScaled(_Overconfident()).fit(counts)
    assert abs(m.temperature_ - 3.0) < 0.3
    np.testing.assert_allclose(m.predict_proba(counts), p, atol=0.05)
    assert m.oof_log_proba_.shape == (T, K) and np.isfinite(m.oof_log_proba_).all()
