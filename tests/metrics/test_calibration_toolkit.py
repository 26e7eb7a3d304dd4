"""The calibration toolkit (``bda_jax.metrics``: ``calibration_error``,
``classwise_calibration_error``, ``brier_decomposition``, ``brier_decomposition_mc``, and the
reliability data of ``reliability_bins``).

Expected values come from scikit-learn (``calibration_curve``, ``brier_score_loss``) and from the
plain NumPy loops below, which follow the definitions in docs/metrics.md literally (explicit bins,
one bin at a time, exact rational arithmetic for the equal-mass ranks), never from the code under
test. Shapes are fixed (T = 240 at the score level, [60, 5] at the probability level) so each
compiled program serves many tests (short examples are padded with weight-0 tasks).
"""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

import jax
import jax.numpy as jnp

from bda_jax import DataError
from bda_jax import metrics as M

T = 240                                  # a multiple of 15 (see the quantile test)


# ----------------------------------------------------------------------------- references

def ref_bins(conf, w, n_bins, binning):
    """Bin of every task (by the definitions of docs/metrics.md, "Bins"); -1 where w == 0."""
    conf = np.asarray(conf, np.float32)
    out = np.full(len(conf), -1)
    live = [i for i in range(len(conf)) if w[i] > 0]
    if binning == "width":
        edges = [np.float32(m / n_bins) for m in range(1, n_bins)]     # rounded to float32
        for i in live:
            out[i] = sum(conf[i] >= e for e in edges)
        return out
    fw = [Fraction(float(x)) for x in w]
    total = sum(fw[i] for i in live)
    for i in live:
        less = sum(fw[j] for j in live if conf[j] < conf[i])
        out[i] = int(n_bins * less // total)                           # floor(M W(c' < c) / W)
    return out


def ref_bin_stats(conf, corr, w, n_bins, binning):
    """[(W_m, mean confidence, mean correctness)] of the non-empty bins, in bin order."""
    b = ref_bins(conf, w, n_bins, binning)
    conf, corr, w = (np.asarray(x, np.float64) for x in (np.float32(conf), corr, w))
    out = []
    for m in range(n_bins):
        idx = np.flatnonzero(b == m)
        if len(idx):
            wm = w[idx].sum()
            out.append((wm, (w[idx] * conf[idx]).sum() / wm, (w[idx] * corr[idx]).sum() / wm))
    return out


def ref_errors(conf, corr, w, n_bins, binning):
    """L1, L2, max and Kumar et al.'s debiased L2 (and its signed square), one bin at a time."""
    stats = ref_bin_stats(conf, corr, w, n_bins, binning)
    total = sum(s[0] for s in stats)
    l1 = sum(wm * abs(o - f) for wm, f, o in stats) / total
    l2_sq = sum(wm * (o - f) ** 2 for wm, f, o in stats) / total
    d_sq = sum(wm * ((o - f) ** 2 - o * (1 - o) / (wm - 1)) for wm, f, o in stats if wm > 1) / total
    return {"l1": l1, "l2": np.sqrt(l2_sq), "max": max(abs(o - f) for _, f, o in stats),
            "l2_debiased": np.sqrt(max(d_sq, 0.0)), "l2_sq": l2_sq, "d_sq": d_sq}


def ref_decomposition_sums(conf, corr, w, n_bins, binning):
    """Murphy's terms and the two within-bin terms as weighted sums (not yet divided by W)."""
    b = ref_bins(conf, w, n_bins, binning)
    conf, corr, w = (np.asarray(x, np.float64) for x in (np.float32(conf), corr, w))
    live = b >= 0
    total = w[live].sum()
    base = (w[live] * corr[live]).sum() / total
    out = dict(brier=0.0, reliability=0.0, resolution=0.0, within_variance=0.0,
               within_covariance=0.0, uncertainty=total * base * (1 - base))
    for m in range(n_bins):
        idx = np.flatnonzero(b == m)
        if not len(idx):
            continue
        wm = w[idx].sum()
        f, o = (w[idx] * conf[idx]).sum() / wm, (w[idx] * corr[idx]).sum() / wm
        out["reliability"] += wm * (f - o) ** 2
        out["resolution"] += wm * (o - base) ** 2
        for i in idx:
            out["brier"] += w[i] * (conf[i] - corr[i]) ** 2
            out["within_variance"] += w[i] * (conf[i] - f) ** 2
            out["within_covariance"] += w[i] * (conf[i] - f) * (corr[i] - o)
    return out


def ref_class_problems(proba, gold, gm, mask, w):
    """Per slot k: (p_k, 1{gold = k}, weight) over its labeled, valid, weighted tasks (or None)."""
    labeled = (gold >= 0) | gm
    out = []
    for k in range(proba.shape[1]):
        sel = labeled & mask[:, k] & (w > 0)
        y = ((gold == k) & ~gm).astype(float)
        out.append((proba[sel, k], y[sel], w[sel]) if sel.any() else None)
    return out


FIELDS = ("brier", "reliability", "resolution", "uncertainty", "within_variance",
          "within_covariance")


# ----------------------------------------------------------------------------- data

def pad(conf, corr, w=None):
    """A short example padded to T tasks of weight 0 (never read), so that every score-level
    call shares one compiled shape."""
    n = len(conf)
    w = np.ones(n, np.int64) if w is None else np.asarray(w, np.int64)
    return (np.concatenate([np.asarray(conf, np.float32), np.full(T - n, 0.5, np.float32)]),
            np.concatenate([np.asarray(corr, np.int64), np.zeros(T - n, np.int64)]),
            np.concatenate([w, np.zeros(T - n, np.int64)]))


@pytest.fixture(scope="module")
def scores():
    """T confidences on a grid of 1000 values (i + 1/2) / 1000: distinct, 1e-3 apart, never on
    an edge m/10; correctness from a miscalibrated forecaster; integer weights (zeros, repeats)."""
    rng = np.random.default_rng(20261130)
    conf = ((rng.choice(1000, T, replace=False) + 0.5) / 1000).astype(np.float32)
    corr = (rng.random(T) < conf ** 1.5).astype(np.int64)
    w = rng.integers(0, 4, T)
    return conf, corr, w


def as_table(proba, gold, gm=None, mask=None, w=None):
    """A [n, k <= K] example as a [60, K] table (extra slots masked out): one compiled shape."""
    n, k = proba.shape
    full = np.zeros((N, K), np.float32)
    full[:n, :k] = proba
    m = np.zeros((N, K), bool)
    m[:n, :k] = True if mask is None else mask
    g = np.full(N, -1, np.int64)
    g[:n] = gold
    gmf = np.zeros(N, bool)
    gmf[:n] = False if gm is None else gm
    wf = np.zeros(N, np.int64)
    wf[:n] = 1 if w is None else w
    return full, g, gmf, m, wf


N, K = 60, 5


@pytest.fixture(scope="module")
def table():
    """A [60, 5] probability table: ragged candidates (2-4 valid slots; slot 4 never valid),
    unlabeled and gold_missing tasks, probabilities with exact ties, integer weights."""
    rng = np.random.default_rng(7)
    n_valid = rng.integers(2, 5, N)
    mask = np.arange(K)[None, :] < n_valid[:, None]
    raw = np.where(mask, rng.integers(1, 9, (N, K)), 0).astype(np.float64)
    proba = (raw / raw.sum(1, keepdims=True)).astype(np.float32)
    gold = np.array([rng.integers(0, v) for v in n_valid])
    gold[:5] = -1                                     # unlabeled
    gm = np.zeros(N, bool)
    gm[5:9] = True                                    # gold given but not a candidate
    gold[5:9] = -1
    proba[:5] = np.nan                                # never read: weight 0
    w = rng.integers(0, 3, N)
    w[10:] = np.maximum(w[10:], 1)
    return proba, gold, gm, mask, w


# ----------------------------------------------------------------------------- scikit-learn

def test_width_bins_match_sklearn_uniform_calibration_curve(scores):
    """Equal width = sklearn's strategy="uniform" wherever no confidence sits on an inner edge
    (the data keep 5e-4 away from every m/10): same per-bin accuracy and mean confidence for the
    non-empty bins (sklearn returns only those). Integer weights = sklearn on repeated rows."""
    conf, corr, w = scores
    for weights in (np.ones(T, np.int64), w):
        c, y = np.repeat(conf, weights), np.repeat(corr, weights)
        rb = M.reliability_bins(conf, corr, weights=weights)
        prob_true, prob_pred = calibration_curve(y, c.astype(np.float64), n_bins=10,
                                                 strategy="uniform")
        live = np.asarray(rb.count) > 0
        np.testing.assert_allclose(np.asarray(rb.accuracy)[live], prob_true, atol=1e-6)
        np.testing.assert_allclose(np.asarray(rb.confidence)[live], prob_pred, atol=1e-6)
        # and the calibration errors are those of sklearn's bins
        counts = np.histogram(c, bins=10, range=(0.0, 1.0))[0]
        counts = counts[counts > 0]
        gap = np.abs(prob_true - prob_pred)
        assert float(M.calibration_error(conf, corr, norm="l1", weights=weights)) == \
            pytest.approx(np.sum(counts * gap) / counts.sum(), abs=1e-6)
        assert float(M.calibration_error(conf, corr, norm="max", weights=weights)) == \
            pytest.approx(gap.max(), abs=1e-6)


def test_width_edge_values_follow_the_left_closed_convention_not_sklearns():
    """On an inner edge the conventions differ: bda_jax's bins are [m/M, (m+1)/M) (as NumPy's
    histogram and netcal's equal-width bins), sklearn's calibration_curve puts a value equal to an
    inner edge in the bin *below* (``searchsorted(edges[1:-1], p)``: bins (e_m, e_{m+1}]).
    0.5 is an edge of M = 10 exactly in float32 and float64."""
    conf = np.array([0.0, 0.5, 1.0, 0.45, 0.55], np.float32)
    corr = np.array([0, 1, 1, 0, 1])
    c, y, w = pad(conf, corr)
    rb = M.reliability_bins(c, y, weights=w)
    count = np.asarray(rb.count).astype(int)
    assert count.tolist() == [1, 0, 0, 0, 1, 2, 0, 0, 0, 1]                  # ours: 0.5 in bin 5
    assert np.histogram(conf, bins=10, range=(0, 1))[0].tolist() == count.tolist()
    np.testing.assert_allclose(np.asarray(rb.confidence)[[4, 5]], [0.45, 0.525], atol=1e-6)
    assert np.asarray(rb.lower)[5] == 0.5 and np.asarray(rb.upper)[4] == 0.5
    _, prob_pred = calibration_curve(corr, conf.astype(np.float64), n_bins=10)
    np.testing.assert_allclose(prob_pred, [0.0, 0.475, 0.55, 1.0])           # sklearn: bin 4


def test_mass_bins_match_sklearn_quantile_on_distinct_values(scores):
    """Equal mass vs sklearn's strategy="quantile": sklearn cuts at ``np.percentile(p, 100 m/M)``
    (linear interpolation) with (e_m, e_{m+1}] bins; bda_jax puts rank r in bin floor(r M / n).
    With n distinct values and n a multiple of M (here 240 = 16 * 15) the percentile m/M falls
    strictly between ranks n m / M - 1 and n m / M, so the two partitions coincide."""
    conf, corr, _ = scores
    n_bins = 15
    rb = M.reliability_bins(conf, corr, n_bins, "mass", np.ones(T, np.int64))
    prob_true, prob_pred = calibration_curve(corr, conf.astype(np.float64), n_bins=n_bins,
                                             strategy="quantile")
    assert np.asarray(rb.count).tolist() == [T // n_bins] * n_bins
    np.testing.assert_allclose(np.asarray(rb.accuracy), prob_true, atol=1e-6)
    np.testing.assert_allclose(np.asarray(rb.confidence), prob_pred, atol=1e-6)


def test_mass_bins_keep_a_tie_together_as_sklearn_quantile_does_here():
    """Eight tied values among 30, M = 15: sklearn's first percentile edges all equal the tied
    value, and a value equal to an edge goes below it, so the tie fills bin 0 and the collapsed
    bins vanish; bda_jax gives a tie the bin of its first member and leaves bins 1-3 empty. The
    non-empty bins then agree (12 of them, the 22 distinct values two per bin)."""
    rng = np.random.default_rng(4)
    conf = np.concatenate([np.full(8, 0.2),
                           (rng.choice(700, 22, replace=False) + 300.5) / 1000]).astype(np.float32)
    corr = rng.integers(0, 2, 30)
    c, y, w = pad(conf, corr)
    rb = M.reliability_bins(c, y, 15, "mass", w)
    prob_true, prob_pred = calibration_curve(corr, conf.astype(np.float64), n_bins=15,
                                             strategy="quantile")
    count = np.asarray(rb.count).astype(int)
    assert count.tolist() == [8, 0, 0, 0] + [2] * 11 and len(prob_true) == 12
    np.testing.assert_allclose(np.asarray(rb.accuracy)[count > 0], prob_true, atol=1e-6)
    np.testing.assert_allclose(np.asarray(rb.confidence)[count > 0], prob_pred, atol=1e-6)


def test_brier_terms_match_sklearn_brier_score_loss(scores, table):
    conf, corr, w = scores
    d = M.brier_decomposition(conf, corr, weights=w)
    expected = brier_score_loss(corr, conf.astype(np.float64), sample_weight=w)
    assert float(d.brier) == pytest.approx(expected, abs=1e-6)
    assert float(M.brier_top(conf, corr, w)) == pytest.approx(expected, abs=1e-6)
    # multiclass, full rows and gold among the candidates (sklearn's setting)
    rng = np.random.default_rng(3)
    p64 = rng.dirichlet(np.ones(4), N)
    gold = rng.integers(0, 4, N)
    args = as_table(p64.astype(np.float32), gold)
    d = M.brier_decomposition_mc(*args[:4], weights=args[4])
    expected = brier_score_loss(gold, p64, labels=[0, 1, 2, 3], scale_by_half=False)
    assert float(d.brier) == pytest.approx(expected, abs=1e-5)
    # ragged rows, unlabeled and gold_missing tasks: the package's own multiclass Brier
    proba, gold, gm, mask, _ = table
    d = M.brier_decomposition_mc(proba, gold, gm, mask, weights=np.ones(N, np.int64))
    assert float(d.brier) == pytest.approx(float(M.brier_mc(proba, gold, gm, mask)), abs=1e-6)


# ----------------------------------------------------------------------------- NumPy references

@pytest.mark.parametrize("binning", ["width", "mass"])
def test_calibration_error_norms_match_the_loop(scores, binning):
    conf, corr, w = scores
    conf = (np.round(conf * 20) / 20).astype(np.float32)           # 21 values: heavy exact ties
    n_bins = 10 if binning == "width" else 15
    ref = ref_errors(conf, corr, w, n_bins, binning)
    for norm in ("l1", "l2", "max"):
        got = float(M.calibration_error(conf, corr, None, binning, norm, w))
        assert got == pytest.approx(ref[norm], abs=2e-6), norm
    got = float(M.calibration_error(conf, corr, None, binning, "l2", w, debias=True))
    assert got == pytest.approx(ref["l2_debiased"], abs=2e-6)
    assert ref["d_sq"] < ref["l2_sq"]                              # a variance is subtracted
    if binning == "width":                                         # norm="l1" is the ECE
        assert float(M.calibration_error(conf, corr, weights=w)) == \
            pytest.approx(float(M.ece(conf, corr, weights=w)), abs=1e-7)


def test_debiased_l2_by_hand():
    """Bins of M = 10 (each value below alone in its bin). 0.25 (bin 2): four tasks, correct
    (1, 1, 1, 0): gap 0.5, variance term 0.75 * 0.25 / (4 - 1) = 0.0625 -> 0.1875; 0.75 (bin 7):
    two tasks, both right: gap 0.25, variance 0 -> 0.0625. Debiased L2 =
    sqrt((4 * 0.1875 + 2 * 0.0625) / 6); plugin L2 = sqrt((4 * 0.25 + 2 * 0.0625) / 6)."""
    conf = np.array([0.25, 0.25, 0.25, 0.25, 0.75, 0.75, 0.78], np.float32)
    corr = np.array([1, 1, 1, 0, 1, 1, 0])
    c, y, w = pad(conf, corr, [1, 1, 1, 1, 1, 1, 0])             # 0.78: weight 0, not read
    assert float(M.calibration_error(c, y, norm="l2", weights=w)) == \
        pytest.approx(np.sqrt(1.125 / 6), abs=1e-7)
    assert float(M.calibration_error(c, y, norm="l2", weights=w, debias=True)) == \
        pytest.approx(np.sqrt(0.875 / 6), abs=1e-7)
    # 0.78 (wrong) joins bin 7: that bin's term goes negative and is *not* clipped per bin
    c, y, w = pad(conf, corr)
    b7 = 3 * ((2 / 3 - np.float32(2.28) / 3) ** 2 - (2 / 3) * (1 / 3) / 2)
    assert b7 < 0
    assert float(M.calibration_error(c, y, norm="l2", weights=w, debias=True)) == \
        pytest.approx(np.sqrt((4 * 0.1875 + b7) / 7), abs=1e-6)
    # only the total is clipped at 0: two bins whose variance terms exceed their squared gaps
    c, y, w = pad([0.25, 0.25, 0.75, 0.75], [0, 1, 0, 1])
    assert float(M.calibration_error(c, y, norm="l2", weights=w, debias=True)) == 0.0
    # a bin of weight 1 adds 0 but counts in W: (0 + 2 * 0.0625) / 3
    c, y, w = pad([0.25, 0.75, 0.75], [0, 1, 1])
    assert float(M.calibration_error(c, y, norm="l2", weights=w, debias=True)) == \
        pytest.approx(np.sqrt(0.125 / 3), abs=1e-7)


@pytest.mark.parametrize("binning", ["width", "mass"])
def test_classwise_calibration_error_matches_the_loop(table, binning):
    proba, gold, gm, mask, w = table
    n_bins = 10 if binning == "width" else 15
    problems = ref_class_problems(proba, gold, gm, mask, w)
    assert problems[4] is None                          # slot 4 is valid nowhere: left out
    per = [ref_errors(*prob, n_bins, binning) for prob in problems if prob is not None]
    expected = {
        ("l1", "mean"): np.mean([e["l1"] for e in per]),
        ("l2", "mean"): np.mean([e["l2"] for e in per]),
        ("max", "mean"): np.mean([e["max"] for e in per]),
        ("l2_debiased", "mean"): np.mean([e["l2_debiased"] for e in per]),
        ("l1", "power"): np.mean([e["l1"] for e in per]),
        ("l2", "power"): np.sqrt(np.mean([e["l2_sq"] for e in per])),
        ("max", "power"): np.max([e["max"] for e in per]),
        ("l2_debiased", "power"): np.sqrt(np.mean([max(e["d_sq"], 0.0) for e in per])),
    }
    for (norm, average), value in expected.items():
        debias = norm == "l2_debiased"
        got = M.classwise_calibration_error(proba, gold, gm, mask, None, binning,
                                            "l2" if debias else norm, w, debias=debias,
                                            average=average)
        assert float(got) == pytest.approx(value, abs=2e-6), (norm, average)


def test_brier_decomposition_matches_murphys_terms_by_loop(scores):
    conf, corr, w = scores
    ref = ref_decomposition_sums(conf, corr, w, 10, "width")
    d = [float(x) for x in M.brier_decomposition(conf, corr, weights=w)]
    for f, got in zip(FIELDS, d):
        assert got == pytest.approx(ref[f] / w.sum(), abs=2e-6), f
    brier, rel, res, unc, wv, wc = d
    assert brier == pytest.approx(rel - res + unc + wv - 2 * wc, abs=2e-6)   # any data
    assert abs(brier - (rel - res + unc)) > 1e-5        # Murphy's three terms alone are off here
    # reliability is the squared L2 calibration error
    assert rel == pytest.approx(float(M.calibration_error(conf, corr, norm="l2", weights=w)) ** 2,
                                abs=1e-6)


@pytest.mark.parametrize("binning", ["width", "mass"])
def test_murphy_identity_is_exact_when_every_bin_has_one_confidence(binning):
    """Confidences 0.05, 0.15, ..., 0.95 (one per equal-width bin), or three values of equal
    frequency (equal mass, 15 bins: ranks 0, 80, 160 open bins 0, 5, 10): every bin's forecasts
    are equal, so brier = reliability - resolution + uncertainty with no within-bin terms."""
    rng = np.random.default_rng(11)
    if binning == "width":
        conf = ((rng.integers(0, 10, T) + 0.5) / 10).astype(np.float32)
    else:
        conf = np.repeat(np.array([0.3, 0.6, 0.9], np.float32), T // 3)[rng.permutation(T)]
    corr = (rng.random(T) < conf).astype(np.int64)
    brier, rel, res, unc, wv, wc = (float(x) for x in
                                    M.brier_decomposition(conf, corr, None, binning,
                                                          np.ones(T, np.int64)))
    assert wv == pytest.approx(0.0, abs=1e-9) and wc == pytest.approx(0.0, abs=1e-9)
    assert brier == pytest.approx(rel - res + unc, abs=1e-6)
    assert brier == pytest.approx(np.mean((conf.astype(float) - corr) ** 2), abs=1e-6)
    assert unc == pytest.approx(corr.mean() * (1 - corr.mean()), abs=1e-6)


def test_multiclass_decomposition_matches_the_loop_and_is_exact_on_binned_rows(table):
    proba, gold, gm, mask, w = table
    d = M.brier_decomposition_mc(proba, gold, gm, mask, weights=w)
    total = w[(gold >= 0) | gm].sum()
    sums = dict.fromkeys(FIELDS, 0.0)
    for prob in ref_class_problems(proba, gold, gm, mask, w):
        if prob is not None:
            for f, v in ref_decomposition_sums(*prob, 10, "width").items():
                sums[f] += v
    for f, got in zip(FIELDS, d):
        assert float(got) == pytest.approx(sums[f] / total, abs=2e-6), f
    # rows whose every probability sits alone in its equal-width bin: Murphy's identity exactly
    rows = np.array([[0.15, 0.85], [0.55, 0.45], [0.35, 0.65]], np.float32)
    rng = np.random.default_rng(5)
    proba = rows[rng.integers(0, 3, N)]
    gold = (rng.random(N) < proba[:, 1]).astype(np.int64)
    args = as_table(proba, gold)
    brier, rel, res, unc, wv, wc = (float(x) for x in
                                    M.brier_decomposition_mc(*args[:4], weights=args[4]))
    assert abs(wv) < 1e-9 and abs(wc) < 1e-9
    assert brier == pytest.approx(rel - res + unc, abs=1e-6)
    assert brier == pytest.approx(float(M.brier_mc(*args[:4])), abs=1e-6)


# ----------------------------------------------------------------------------- properties

@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=32, max_size=32),
       st.lists(st.booleans(), min_size=32, max_size=32),
       st.lists(st.integers(0, 3), min_size=32, max_size=32))
def test_norm_ordering_identity_and_order_invariance(grid, correct, weights):
    w = np.array(weights)
    w[0] = max(w[0], 1)                                  # never an empty input
    conf, corr, w = pad(np.array(grid) / 20, correct, w)
    err = {n: float(M.calibration_error(conf, corr, None, "mass", n, w))
           for n in ("l1", "l2", "max")}
    deb = float(M.calibration_error(conf, corr, None, "mass", "l2", w, debias=True))
    assert err["l1"] <= err["l2"] + 1e-6 and err["l2"] <= err["max"] + 1e-6
    assert deb <= err["l2"] + 1e-6
    rev = float(M.calibration_error(conf[::-1], corr[::-1], None, "mass", "l1", w[::-1]))
    assert rev == pytest.approx(err["l1"], abs=1e-6)    # ties never split: order-free
    brier, rel, res, unc, wv, wc = (float(x) for x in
                                    M.brier_decomposition(conf, corr, None, "mass", w))
    assert brier == pytest.approx(rel - res + unc + wv - 2 * wc, abs=1e-6)


def test_jit_and_vmap_over_weights_like_the_bootstrap(scores):
    conf, corr, w = scores
    ws = np.stack([w, np.ones(T, np.int64), (w > 1).astype(np.int64)])

    def stat(wt):
        return M.calibration_error(conf, corr, None, "mass", "l2", wt, debias=True)

    batched = np.asarray(jax.jit(jax.vmap(stat))(jnp.asarray(ws)))
    for row, got in zip(ws, batched):
        assert got == pytest.approx(ref_errors(conf, corr, row, 15, "mass")["l2_debiased"],
                                    abs=2e-6)


def test_empty_inputs_are_nan_and_bad_options_raise():
    conf, corr, zero = np.full(T, 0.5, np.float32), np.ones(T, np.int64), np.zeros(T, np.int64)
    for norm in ("l1", "l2", "max"):
        assert np.isnan(float(M.calibration_error(conf, corr, norm=norm, weights=zero)))
    assert all(np.isnan(float(x)) for x in M.brier_decomposition(conf, corr, weights=zero))
    args = as_table(np.full((N, 2), 0.5, np.float32), np.full(N, -1))      # nothing labeled
    assert np.isnan(float(M.classwise_calibration_error(*args[:4], weights=args[4])))
    assert all(np.isnan(float(x)) for x in M.brier_decomposition_mc(*args[:4], weights=args[4]))
    cases = [(dict(norm="l3"), "norm"), (dict(norm="l1", debias=True), "debias"),
             (dict(norm="l2", debias=1), "debias"), (dict(binning="quantile"), "binning"),
             (dict(n_bins=0), "n_bins")]
    for kwargs, field in cases:
        with pytest.raises(DataError) as e:
            M.calibration_error(conf, corr, **kwargs)
        assert e.value.field == field
    proba, gold = args[0], args[1]
    bad = [(lambda: M.calibration_error(conf, corr[:3]), "correct"),
           (lambda: M.calibration_error(proba, corr), "confidence"),
           (lambda: M.classwise_calibration_error(proba, gold, average="median"), "average"),
           (lambda: M.classwise_calibration_error(conf, gold), "proba"),
           (lambda: M.brier_decomposition_mc(proba, gold, mask=np.ones((N, 3), bool)), "mask"),
           (lambda: M.brier_decomposition_mc(proba, gold[:5]), "gold"),
           (lambda: M.brier_decomposition(conf, corr, weights=np.ones(5)), "weights")]
    for call, field in bad:
        with pytest.raises(DataError) as e:
            call()
        assert e.value.field == field
