"""Metrics ([BDA] Appendix B Eq. 5, D.1-D.2).

Expected values come from hand computations or from the brute-force NumPy references below, which
follow the definitions in docs/metrics.md literally (explicit bins, pairwise loops), never from
the code under test.
"""
import json
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bda_jax import DataError
from bda_jax import metrics as M


# ----------------------------------------------------------------------------- references

def ref_bins_width(conf, n_bins):
    """bin m = [m/M, (m+1)/M) with the edges rounded to float32 (the inputs' dtype)."""
    conf = np.asarray(conf, np.float32)
    edges = [np.float32(k / n_bins) for k in range(1, n_bins)]
    return np.array([sum(c >= e for e in edges) for c in conf])


def ref_bins_mass(conf, w, n_bins):
    """bin = floor(M * W(c' < c) / W), in exact rational arithmetic, O(T^2)."""
    conf = np.asarray(conf, np.float32)
    w = [Fraction(int(x)) for x in w]
    total = sum(w)
    out = []
    for c in conf:
        less = sum(wj for cj, wj in zip(conf, w) if cj < c)
        out.append(int(n_bins * less // total))
    return np.array(out)


def ref_ece(conf, corr, n_bins, binning, w=None):
    """Eq. (5) literally: sum over non-empty bins of |B|/n |acc(B) - conf(B)|."""
    conf = np.asarray(conf, np.float32)
    corr = np.asarray(corr, np.float64)
    w = np.ones(len(conf), int) if w is None else np.asarray(w, int)
    b = ref_bins_width(conf, n_bins) if binning == "width" else ref_bins_mass(conf, w, n_bins)
    n = w.sum()
    total = 0.0
    for m in range(n_bins):
        sel = (b == m) & (w > 0)
        if not sel.any():
            continue
        size = w[sel].sum()
        acc = (w[sel] * corr[sel]).sum() / size
        mean_conf = (w[sel] * conf[sel].astype(np.float64)).sum() / size
        total += size / n * abs(acc - mean_conf)
    return total


def ref_auroc(conf, corr, w=None):
    conf = np.asarray(conf, np.float32)
    w = np.ones(len(conf)) if w is None else np.asarray(w, float)
    num = den = 0.0
    for i in range(len(conf)):
        for j in range(len(conf)):
            if corr[i] == 1 and corr[j] == 0:
                pair = w[i] * w[j]
                den += pair
                num += pair * (1.0 if conf[i] > conf[j] else 0.5 if conf[i] == conf[j] else 0.0)
    return num / den if den else float("nan")


def ref_brier_mc(proba, gold, gold_missing, K):
    vals = []
    for p, g, gm, k in zip(proba, gold, gold_missing, K):
        if g < 0 and not gm:
            continue
        vals.append(sum((p[j] - (1.0 if (j == g and not gm) else 0.0)) ** 2 for j in range(k)))
    return np.mean(vals)


def ref_nll(proba, gold, gold_missing, eps=1e-12):
    vals = []
    for p, g, gm in zip(proba, gold, gold_missing):
        if gm:
            vals.append(-np.log(eps))
        elif g >= 0:
            vals.append(-np.log(max(float(p[g]), eps)))
    return np.mean(vals)


def random_tasks(rng, T=200, K=4):
    """Ragged candidate sets, unlabeled and gold_missing tasks, many exact probability ties."""
    Kt = rng.integers(2, K + 1, T)
    mask = np.arange(K)[None, :] < Kt[:, None]
    raw = rng.integers(0, 4, (T, K)).astype(np.float32) * mask          # ties on purpose
    raw[raw.sum(1) == 0, 0] = 1.0
    proba = (raw / raw.sum(1, keepdims=True)).astype(np.float32)
    gold = np.array([rng.integers(0, k) for k in Kt], np.int32)
    kind = rng.random(T)
    gold_missing = kind < 0.1
    gold[(kind < 0.2)] = -1                                             # 10% missing, 10% none
    return proba, gold, gold_missing, mask, Kt


# ----------------------------------------------------------------------------- correctness

def test_correctness_gold_missing_unlabeled_and_first_index_ties():
    proba = np.array([[0.2, 0.8, 0.0], [0.4, 0.4, 0.2], [0.1, 0.9, 0.0], [0.3, 0.3, 0.4],
                      [0.5, 0.5, 0.0]], np.float32)
    gold = np.array([1, 1, -1, -1, 0])
    gm = np.array([False, False, True, False, False])
    mask = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 0], [1, 1, 1], [0, 1, 0]], bool)
    s = M.correctness(proba, gold, gm, mask)
    assert s.pred.tolist() == [1, 0, 1, 2, 1]           # first of a tie; mask respected
    np.testing.assert_allclose(s.confidence, [0.8, 0.4, 0.9, 0.4, 0.5])
    assert s.correct.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]   # gold_missing: wrong
    assert s.labeled.tolist() == [True, True, True, False, True]


def test_correctness_random_ties_only_among_tied_slots():
    proba = np.tile(np.array([[0.4, 0.4, 0.2]], np.float32), (2000, 1))
    s = M.correctness(proba, np.zeros(2000, int), key=jax.random.key(3))
    counts = np.bincount(np.asarray(s.pred), minlength=3)
    assert counts[2] == 0 and 900 < counts[0] < 1100
    s2 = M.correctness(proba, np.zeros(2000, int), key=jax.random.key(3))
    np.testing.assert_array_equal(s.pred, s2.pred)
    # an explicit decision overrides the argmax
    s3 = M.correctness(proba[:2], [2, 2], pred=[2, 0])
    assert s3.correct.tolist() == [1.0, 0.0]
    np.testing.assert_allclose(s3.confidence, [0.2, 0.4])


# ----------------------------------------------------------------------------- ECE and bins

def test_ece_hand_example():
    # bins: {0.05 wrong}, {0.15 right, 0.15 wrong}, {0.95 right}
    # ECE = (1*0.05 + 2*|0.5-0.15| + 1*0.05) / 4 = 0.2
    conf, corr = [0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1]
    assert float(M.ece(conf, corr)) == pytest.approx(0.2, abs=1e-6)
    assert float(M.ece(conf, corr, binning="width", n_bins=10)) == pytest.approx(0.2, abs=1e-6)
    # equal mass, M = 2: {0.05, 0.15, 0.15} (the tie stays together), {0.95}
    # |1/3 - 0.35/3| * 3/4 + |1 - 0.95| * 1/4 = 0.65/4 + 0.05/4 = 0.175
    assert float(M.ece(conf, corr, n_bins=2, binning="mass")) == pytest.approx(0.175, abs=1e-6)


def test_constant_half_on_balanced_data_ece_zero_brier_quarter():
    conf = np.full(1000, 0.5, np.float32)
    corr = np.arange(1000) % 2
    assert float(M.ece(conf, corr)) == pytest.approx(0.0, abs=1e-7)
    assert float(M.ece(conf, corr, binning="mass")) == pytest.approx(0.0, abs=1e-7)
    assert float(M.brier_top(conf, corr)) == pytest.approx(0.25)
    assert float(M.auroc(conf, corr)) == pytest.approx(0.5)    # all pairs tied


def test_perfect_forecaster_via_summary():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 3, 50)
    proba = np.eye(3, dtype=np.float32)[gold]
    out = M.summary(proba, gold)
    assert out == {"accuracy": 1.0, "ece_ew": 0.0, "ece_em": 0.0, "brier": 0.0, "brier_mc": 0.0,
                   "nll": 0.0, "auroc": None, "n": 50}
    json.dumps(out, allow_nan=False)                        # strict JSON


def test_width_bin_edges_and_clipping():
    conf = np.array([0.0, 0.1, 0.7, 0.99, 1.0, -0.2, 1.3, 0.3], np.float32)
    rb = M.reliability_bins(conf, np.ones(8))
    # bins 0, 1, 7, 9, 9, 0 (clipped), 9 (clipped), 3
    assert rb.count.astype(int).tolist() == [2, 1, 0, 1, 0, 0, 0, 1, 0, 3]
    assert np.asarray(ref_bins_width(conf[:5], 10)).tolist() == [0, 1, 7, 9, 9]
    np.testing.assert_allclose(rb.lower, np.arange(10) / 10, atol=1e-7)
    np.testing.assert_allclose(rb.upper, np.arange(1, 11) / 10, atol=1e-7)
    assert np.isnan(rb.accuracy[2]) and np.isnan(rb.confidence[2])


def test_equal_mass_bins_remainders_and_ties():
    # 10 distinct values, 4 bins: rank r -> floor(4 r / 10) = 0,0,0,1,1,2,2,2,3,3
    conf = np.linspace(0.05, 0.95, 10).astype(np.float32)[::-1]   # order must not matter
    rb = M.reliability_bins(conf, np.ones(10), n_bins=4, binning="mass")
    assert rb.count.astype(int).tolist() == [3, 2, 3, 2]
    np.testing.assert_allclose(rb.lower, [0.05, 0.35, 0.55, 0.85], atol=1e-6)
    np.testing.assert_allclose(rb.upper, [0.25, 0.45, 0.75, 0.95], atol=1e-6)
    # ties never split: four tied 0.2 then 0.5..0.8 -> W(<c) = 0,4,5,6,7 -> bins 0,2,2,3,3
    conf = np.array([0.2, 0.5, 0.2, 0.6, 0.2, 0.7, 0.2, 0.8], np.float32)
    corr = np.array([1, 1, 0, 0, 0, 1, 0, 1])
    rb = M.reliability_bins(conf, corr, n_bins=4, binning="mass")
    assert rb.count.astype(int).tolist() == [4, 0, 2, 2]
    # ECE = 4/8 |.25-.2| + 2/8 |.5-.55| + 2/8 |1-.75| = .025 + .0125 + .0625
    assert float(M.ece(conf, corr, n_bins=4, binning="mass")) == pytest.approx(0.1, abs=1e-6)


@pytest.mark.parametrize("binning", ["width", "mass"])
def test_ece_matches_bruteforce_reference_with_weights(rng, binning):
    T = 120
    conf = rng.choice(np.linspace(0, 1, 23), T).astype(np.float32)    # many exact ties
    corr = (rng.random(T) < conf).astype(int)
    w = rng.integers(0, 4, T)                                          # zeros and repeats
    n_bins = 10 if binning == "width" else 15
    got = float(M.ece(conf, corr, binning=binning, weights=w))
    assert got == pytest.approx(ref_ece(conf, corr, n_bins, binning, w), abs=2e-6)
    # integer weights == repeating rows
    rep = np.repeat(np.arange(T), w)
    assert got == pytest.approx(float(M.ece(conf[rep], corr[rep], binning=binning)), abs=2e-6)
    # independent of task order
    perm = rng.permutation(T)
    assert got == pytest.approx(
        float(M.ece(conf[perm], corr[perm], binning=binning, weights=w[perm])), abs=1e-6)


def test_ece_vmaps_and_rejects_bad_binning():
    rng = np.random.default_rng(1)
    C = rng.random((5, 40)).astype(np.float32)
    Y = (rng.random((5, 40)) < C).astype(np.float32)
    batched = jax.vmap(lambda c, y: M.ece(c, y, binning="mass"))(C, Y)
    np.testing.assert_allclose(batched, [ref_ece(c, y, 15, "mass") for c, y in zip(C, Y)],
                               atol=2e-6)
    with pytest.raises(DataError):
        M.ece(C[0], Y[0], binning="quantile")
    with pytest.raises(DataError):
        M.ece(C[0], Y[0], n_bins=0)


# ----------------------------------------------------------------------------- AUROC, Brier, NLL

def test_auroc_matches_pairwise_count(rng):
    T = 150
    conf = rng.choice(np.linspace(0.3, 1, 8), T).astype(np.float32)
    corr = (rng.random(T) < conf).astype(int)
    assert float(M.auroc(conf, corr)) == pytest.approx(ref_auroc(conf, corr), abs=1e-5)
    w = rng.integers(0, 3, T)
    assert float(M.auroc(conf, corr, w)) == pytest.approx(ref_auroc(conf, corr, w), abs=1e-5)
    # hand: correct {0.9, 0.8}, wrong {0.8, 0.3}: pairs 1 + 1 + 0.5 + 1 = 3.5 / 4
    assert float(M.auroc([0.9, 0.8, 0.8, 0.3], [1, 1, 0, 0])) == pytest.approx(0.875)
    assert np.isnan(float(M.auroc([0.9, 0.8], [1, 1])))
    assert np.isnan(float(M.auroc([0.9, 0.8], [1, 0], weights=[1, 0])))


def test_brier_mc_and_nll_match_loops(rng):
    proba, gold, gm, mask, Kt = random_tasks(rng)
    assert float(M.brier_mc(proba, gold, gm, mask)) == pytest.approx(
        ref_brier_mc(proba, gold, gm, Kt), rel=1e-5)
    assert float(M.nll(proba, gold, gm)) == pytest.approx(ref_nll(proba, gold, gm), rel=1e-5)
    per = np.asarray(M.brier_mc(proba, gold, gm, mask, reduce=False))
    unlabeled = (gold < 0) & ~gm
    assert np.isnan(per[unlabeled]).all() and np.isfinite(per[~unlabeled]).all()
    # gold_missing task: one-hot all zeros -> sum p^2; NLL -> -log(1e-12)
    p = np.array([[0.6, 0.4]], np.float32)
    assert float(M.brier_mc(p, [-1], [True])) == pytest.approx(0.52)
    assert float(M.nll(p, [-1], [True])) == pytest.approx(-np.log(1e-12), rel=1e-5)
    assert float(M.nll([[1.0, 0.0]], [1])) == pytest.approx(-np.log(1e-12), rel=1e-5)


def test_top_label_brier_and_accuracy_hand():
    # (0.9-1)^2 + (0.6-0)^2 + (0.7-1)^2 = 0.01 + 0.36 + 0.09 = 0.46 -> /3
    assert float(M.brier_top([0.9, 0.6, 0.7], [1, 0, 1])) == pytest.approx(0.46 / 3)
    assert float(M.brier_top([0.9, 0.6, 0.7], [1, 0, 1], [1, 0, 1])) == pytest.approx(0.05)
    assert float(M.accuracy([1, 0, 1], [1, 0, 1])) == 1.0
    assert np.isnan(float(M.accuracy([1, 0], [0, 0])))


def test_summary_matches_references_and_ignores_unlabeled(rng):
    proba, gold, gm, mask, Kt = random_tasks(rng, T=300)
    out = M.summary(proba, gold, gm, mask)
    lab = (gold >= 0) | gm
    pred = np.argmax(np.where(mask, proba, -1), axis=1)              # first maximal slot
    conf = proba[np.arange(300), pred]
    corr = ((pred == gold) & ~gm).astype(int)
    c, y = conf[lab], corr[lab]
    assert out["n"] == lab.sum()
    assert out["accuracy"] == pytest.approx(y.mean(), abs=1e-6)
    assert out["ece_ew"] == pytest.approx(ref_ece(c, y, 10, "width"), abs=2e-6)
    assert out["ece_em"] == pytest.approx(ref_ece(c, y, 15, "mass"), abs=2e-6)
    assert out["brier"] == pytest.approx(np.mean((c - y) ** 2), abs=1e-6)
    assert out["brier_mc"] == pytest.approx(ref_brier_mc(proba, gold, gm, Kt), rel=1e-5)
    assert out["nll"] == pytest.approx(ref_nll(proba, gold, gm), rel=1e-5)
    assert out["auroc"] == pytest.approx(ref_auroc(c, y), abs=1e-5)
    json.dumps(out, allow_nan=False)
    assert all(type(v) is float for k, v in out.items() if k != "n") and type(out["n"]) is int
    # the probabilities of unlabeled tasks are never read (NaN garbage changes nothing)
    junk = proba.copy()
    junk[~lab] = np.nan
    assert M.summary(junk, gold, gm, mask) == pytest.approx(out, abs=1e-6)


# ----------------------------------------------------------------------------- bootstrap

def test_bootstrap_deterministic_per_key_and_batch_size(rng):
    # shapes shared across these tests (T or clusters 400, 2000 resamples): fewer compilations
    a = (rng.random(400) < 0.7).astype(float)
    b = (rng.random(400) < 0.6).astype(float)
    r1 = M.paired_bootstrap(jax.random.key(1), a, b, n_resamples=2000)
    r2 = M.paired_bootstrap(jax.random.key(1), a, b, n_resamples=2000, batch_size=7)
    r3 = M.paired_bootstrap(jax.random.key(2), a, b, n_resamples=2000)
    assert r1 == r2                                     # batching never changes the draws
    assert (r1.ci_low, r1.ci_high) != (r3.ci_low, r3.ci_high)
    assert r1.delta == pytest.approx(a.mean() - b.mean())
    assert r1.n_resamples == 2000 and r1.n_units == 400
    json.dumps(r1._asdict(), allow_nan=False)


def test_bootstrap_ci_covers_truth_and_matches_normal_width():
    rng = np.random.default_rng(7)
    T = 1600
    u = rng.random(T)                              # shared difficulty: paired, correlated arms
    a = (u < 0.75).astype(float)
    b = ((u < 0.70) ^ (rng.random(T) < 0.05)).astype(float)
    true_delta = 0.75 - (0.70 * 0.95 + 0.30 * 0.05)           # = 0.05
    r = M.paired_bootstrap(jax.random.key(0), a, b, n_resamples=2000)
    assert r.ci_low < true_delta < r.ci_high
    assert r.ci_low < r.delta < r.ci_high
    d = a - b
    half = 1.959964 * d.std(ddof=0) / np.sqrt(T)
    assert (r.ci_high - r.ci_low) / 2 == pytest.approx(half, rel=0.1)
    assert r.p_win > 0.95


def test_cluster_bootstrap_wider_when_tasks_are_duplicated():
    rng = np.random.default_rng(11)
    n, copies = 400, 4
    a0 = (rng.random(n) < 0.7).astype(float)
    b0 = (rng.random(n) < 0.65).astype(float)
    a, b = np.repeat(a0, copies), np.repeat(b0, copies)
    clusters = np.repeat(np.arange(n) * 10 + 3, copies)      # arbitrary labels
    key = jax.random.key(5)
    task = M.paired_bootstrap(key, a, b, n_resamples=2000)
    clus = M.paired_bootstrap(key, a, b, n_resamples=2000, clusters=clusters)
    base = M.paired_bootstrap(key, a0, b0, n_resamples=2000)
    w_task, w_clus, w_base = (r.ci_high - r.ci_low for r in (task, clus, base))
    assert clus.n_units == n and task.n_units == n * copies
    assert w_clus > 1.6 * w_task                               # ~ sqrt(4) = 2 wider
    assert w_clus == pytest.approx(w_base, rel=0.15)           # = bootstrapping the n originals
    assert clus.delta == pytest.approx(a0.mean() - b0.mean())


def test_p_win_direction_and_loss_flag():
    rng = np.random.default_rng(3)
    a = (rng.random(400) < 0.9).astype(float)
    b = (rng.random(400) < 0.6).astype(float)
    key = jax.random.key(0)
    assert M.paired_bootstrap(key, a, b, n_resamples=2000).p_win > 0.999
    assert M.paired_bootstrap(key, b, a, n_resamples=2000).p_win < 0.001
    # losses: arm a has the smaller squared errors -> wins with higher_is_better=False
    la, lb = (0.9 - a) ** 2, (0.6 - b) ** 2
    r = M.paired_bootstrap(key, la, lb, n_resamples=2000, higher_is_better=False)
    assert r.delta < 0 and r.p_win > 0.99


def test_stat_bootstrap_shares_draws_with_mean_bootstrap(rng):
    a = rng.random(400)
    b = rng.random(400) + 0.02
    clusters = rng.integers(0, 60, 400)
    wmean = lambda x, w: jnp.sum(w * x) / jnp.sum(w)
    for cl in (None, clusters):
        r_mean = M.paired_bootstrap(jax.random.key(4), a, b, n_resamples=2000, clusters=cl)
        r_stat = M.paired_bootstrap_stat(jax.random.key(4), wmean, jnp.asarray(a, jnp.float32),
                                         jnp.asarray(b, jnp.float32), n_resamples=2000,
                                         clusters=cl)
        assert r_stat.ci_low == pytest.approx(r_mean.ci_low, abs=1e-5)
        assert r_stat.ci_high == pytest.approx(r_mean.ci_high, abs=1e-5)
        assert r_stat.p_win == pytest.approx(r_mean.p_win, abs=0.01)
        assert r_stat.delta == pytest.approx(r_mean.delta, abs=1e-6)


def test_stat_bootstrap_ece_calibrated_beats_overconfident():
    rng = np.random.default_rng(5)
    T = 600
    p = rng.uniform(0.5, 1.0, T).astype(np.float32)
    y = (rng.random(T) < p).astype(np.float32)
    over = np.minimum(p + 0.2, 1.0).astype(np.float32)           # same decisions, over-confident
    lab = np.ones(T, np.float32)
    lab[:50] = 0                                                   # 50 unlabeled tasks
    stat = lambda d, w: M.ece(d[0], d[1], binning="mass", weights=w * d[2])
    r = M.paired_bootstrap_stat(jax.random.key(9), stat, (p, y, lab), (over, y, lab),
                                n_resamples=300, higher_is_better=False)
    keep = lab > 0
    expect = (ref_ece(p[keep], y[keep], 15, "mass") - ref_ece(over[keep], y[keep], 15, "mass"))
    assert r.delta == pytest.approx(expect, abs=1e-5)
    assert r.delta < 0 and r.p_win > 0.99 and r.ci_high < 0
    assert r.n_resamples == 300


def test_bootstrap_input_errors():
    key = jax.random.key(0)
    with pytest.raises(DataError):
        M.paired_bootstrap(key, [1.0, 0.0], [1.0])
    with pytest.raises(DataError):
        M.paired_bootstrap(key, [1.0, np.nan], [1.0, 0.0])
    with pytest.raises(DataError):
        M.paired_bootstrap(key, [1.0, 0.0], [1.0, 0.0], clusters=[0, 1, 2])
    with pytest.raises(DataError):
        M.paired_bootstrap(key, [1.0, 0.0], [1.0, 0.0], n_resamples=0)
    with pytest.raises(DataError):
        M.paired_bootstrap_stat(key, lambda d, w: d.sum(), np.ones(3), np.ones(4))
    with pytest.raises(DataError):
        M.paired_bootstrap(0, [1.0, 0.0], [1.0, 0.0])
