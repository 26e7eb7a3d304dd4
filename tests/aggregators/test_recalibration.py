"""Recalibration keeps the decision ([BDA] Appendix E.1, F.9): isotonic and temperature
recalibration change the confidence of the base's decision, never the decision.

Councils: the paper's binary regime (3 seats, .74/.68/.68) on 120 questions, clean, under a
live-style coalition (2 seats complying 90 %, contagion 0.3) and under the count-level attack
(2 seats, p_wrong 0.9); plus a K = 3 council. Expected confidences come from a plain NumPy PAV
and a SciPy minimization of the temperature NLL, not from the wrappers' own fits.
"""
import jax
import numpy as np
import pytest
from scipy.optimize import isotonic_regression as scipy_isotonic, minimize_scalar

from bda_jax import tally
from bda_jax.adversarial import corrupt_traces
from bda_jax.aggregators import (BDAPerAgent, BestMember, GatedVote, IsotonicRecalibrated,
                                 Majority, TemperatureScaled, VerbalizedVote, evaluate,
                                 load_model, save_model)
from bda_jax.metrics import correctness
from bda_jax.simulate import simulate_council

R = [0.74, 0.68, 0.68]
Q = 120
MARGIN = IsotonicRecalibrated.decision_margin


@pytest.fixture(scope="module")
def councils():
    clean = simulate_council(0, Q, R)
    return {"clean": tally(clean),
            "coalition": tally(simulate_council(0, Q, R, adversaries={0: 0.9, 1: 0.9},
                                                contagion=0.3)),
            "count-level": tally(corrupt_traces(clean, 0.9, k=2))}


@pytest.fixture(scope="module")
def ternary():
    """K = 3 under the coalition: its confident wrong votes are calibrated below 1/3."""
    return tally(simulate_council(1, Q, R, n_candidates=3, adversaries={0: 0.9, 1: 0.9}))


BASES = {"majority": Majority, "gated-vote": GatedVote, "best-member": BestMember,
         "verbalized": VerbalizedVote}


def _fit(base, counts):
    model = base()
    return model.fit(counts) if isinstance(model, (Majority, VerbalizedVote)) else \
        model.fit(counts, weights=np.ones(counts.N.shape[0], np.float32))


def _check_vector(p, decision, mask):
    """predict_proba is a distribution whose strict argmax (by the margin) is the decision."""
    T = decision.size
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    assert np.all(p[~mask] == 0) and np.all(p >= 0)
    others = np.where(mask & (np.arange(p.shape[1]) != decision[:, None]), p, -1.0).max(1)
    top = p[np.arange(T), decision]
    single = mask.sum(1) == 1
    assert np.all(top[~single] - others[~single] >= MARGIN * (1 - 1e-9))
    assert np.all(top[single] == 1.0)


# ----------------------------------------------------------------------------- decisions

@pytest.mark.parametrize("wrapper", [IsotonicRecalibrated, TemperatureScaled])
@pytest.mark.parametrize("name", list(BASES))
def test_decisions_are_the_bases_on_clean_and_attacked_councils(councils, ternary, wrapper,
                                                                name):
    for cname, counts in {**councils, "K=3": ternary}.items():
        base = _fit(BASES[name], counts)
        model = wrapper(BASES[name](), n_folds=3).fit(counts)
        want = base.predict(counts)
        got = model.predict(counts)
        np.testing.assert_array_equal(got, want, err_msg=f"{cname}/{name}")
        d = model.decide(counts)
        np.testing.assert_array_equal(d.index, want)
        np.testing.assert_array_equal(d.proba, model.predict_proba(counts))
        _check_vector(d.proba, d.index, np.asarray(counts.mask))
        # a key overrides the base's tie-break seed, as for the base itself
        key = jax.random.key(7)
        np.testing.assert_array_equal(model.predict(counts, key), base.predict(counts, key))


def test_bda_base_keeps_its_decisions_under_attack(councils):
    counts = councils["coalition"]
    w = np.ones(counts.N.shape[0], np.float32)
    want = BDAPerAgent().fit(counts, weights=w).predict(counts)
    for wrapper in (IsotonicRecalibrated, TemperatureScaled):
        model = wrapper(BDAPerAgent(), n_folds=3).fit(counts, weights=w)
        np.testing.assert_array_equal(model.predict(counts), want)
        _check_vector(model.predict_proba(counts), want, np.asarray(counts.mask))


# ----------------------------------------------------------------------------- isotonic

def _plain_isotonic(x, y):
    """Pool equal abscissae, then pool adjacent violators (a plain loop); knots and values."""
    xs = np.unique(x)
    ys = np.array([y[x == v].mean() for v in xs])
    ws = np.array([(x == v).sum() for v in xs], float)
    blocks = []                                    # [mean, weight, count]
    for yy, ww in zip(ys, ws):
        blocks.append([yy, ww, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, n2 = blocks.pop()
            m1, w1, n1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    fs = np.concatenate([[m] * n for m, _, n in blocks])
    np.testing.assert_allclose(fs, scipy_isotonic(ys, weights=ws).x, atol=1e-12)
    return xs, fs


@pytest.mark.parametrize("cname", ["clean", "coalition", "count-level"])
def test_isotonic_confidence_is_an_independent_pav_fit(councils, cname):
    """Majority needs no label, so its out-of-fold probabilities are its vote shares; with 3
    seats and K = 2 a vote never ties, so its decision is their argmax."""
    counts = councils[cname]
    model = IsotonicRecalibrated(Majority(), n_folds=3).fit(counts)
    gold = np.asarray(counts.gold)
    votes = np.asarray(counts.e0).sum(1).astype(float)            # [T, 2], rows sum to 3
    shares = votes / votes.sum(1, keepdims=True)
    decision = votes.argmax(1)
    conf = shares.max(1)
    xs, fs = _plain_isotonic(conf, (decision == gold).astype(float))
    want = np.interp(conf, xs, fs)
    np.testing.assert_allclose(model.predict_confidence(counts), want, atol=1e-6)
    # the vector at K = 2: the confidence, floored at 1/2 + margin / 2
    p = model.predict_proba(counts)
    top = np.maximum(want, 0.5 + MARGIN / 2)
    np.testing.assert_allclose(p[np.arange(gold.size), decision], top, atol=1e-6)
    np.testing.assert_allclose(p[np.arange(gold.size), 1 - decision], 1 - top, atol=1e-6)
    if cname != "clean":             # the confident coalition vote: calibrated far below 1/2
        assert (want < 0.3).mean() > 0.5


def test_isotonic_vector_at_k3_is_the_minimal_flattening(ternary):
    """K = 3: the decided candidate holds clip(c', 1/3 + 2 m / 3, 1); the rest is shared in
    proportion to the base's probabilities unless that would bring another candidate within the
    margin, in which case it is mixed with the uniform share just enough (the runner-up sits at
    exactly top - margin)."""
    counts = ternary
    model = IsotonicRecalibrated(Majority(), n_folds=3).fit(counts)
    d = model.decide(counts)
    base = Majority().predict_proba(counts).astype(np.float64)
    T = d.index.size
    top = np.clip(d.confidence, 1 / 3 + 2 * MARGIN / 3, 1.0)
    np.testing.assert_allclose(d.proba[np.arange(T), d.index], top, atol=1e-12)
    n_flat = 0
    for t in range(T):
        o = [j for j in range(3) if j != d.index[t]]
        rest = 1 - top[t]
        b = base[t, o]
        prop = rest * b / b.sum() if b.sum() > 0 else np.full(2, rest / 2)
        if prop.max() <= top[t] - MARGIN + 1e-12:     # (uniform rest at the floor: equal)
            np.testing.assert_allclose(d.proba[t, o], prop, atol=1e-12)
        else:                       # mu p + (1 - mu) u with max exactly top - margin
            n_flat += 1
            mu = (top[t] - MARGIN - rest / 2) / (prop.max() - rest / 2)
            np.testing.assert_allclose(d.proba[t, o], mu * prop + (1 - mu) * rest / 2,
                                       atol=1e-12)
            assert d.proba[t, o].max() == pytest.approx(top[t] - MARGIN, abs=1e-12)
    assert 0 < n_flat < T           # both branches are exercised


# ----------------------------------------------------------------------------- temperature

@pytest.mark.parametrize("cname", ["clean", "coalition"])
def test_temperature_confidence_is_an_independent_fit(councils, cname):
    counts = councils[cname]
    model = TemperatureScaled(Majority(), n_folds=3).fit(counts)
    gold = np.asarray(counts.gold)
    votes = np.asarray(counts.e0).sum(1).astype(float)
    lp = np.log(np.maximum(votes / votes.sum(1, keepdims=True), 1e-6))   # floored at 1e-6

    def nll(log_t):
        z = lp / np.exp(log_t)
        z = z - z.max(1, keepdims=True)
        return np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(gold.size), gold])

    t_hat = np.exp(minimize_scalar(nll, bounds=(np.log(0.01), np.log(100.0)), method="bounded",
                                   options={"xatol": 1e-10}).x)
    assert model.temperature_ == pytest.approx(t_hat, rel=1e-4)
    z = lp / model.temperature_
    q = np.exp(z - z.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    decision = votes.argmax(1)
    np.testing.assert_allclose(model.predict_confidence(counts),
                               q[np.arange(gold.size), decision], atol=1e-6)
    # the decision leads q by far more than the margin here, so the vector is q itself
    np.testing.assert_allclose(model.predict_proba(counts), q, atol=1e-6)


# ----------------------------------------------------------------------------- model files

def test_model_file_round_trip_keeps_decisions_and_confidences(councils, tmp_path):
    counts, other = councils["coalition"], councils["clean"]
    for i, model in enumerate([IsotonicRecalibrated(Majority(), n_folds=3),
                               TemperatureScaled(GatedVote(), n_folds=3)]):
        model.fit(counts)
        path = tmp_path / f"model{i}.json"
        save_model(path, model, counts_fingerprint=counts)
        est = load_model(path).estimator
        for data in (counts, other):
            a, b = model.decide(data), est.decide(data)
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(est.predict(data), model.base_.predict(data))


# ----------------------------------------------------------------------------- the harness

def test_harness_scores_the_bases_decisions(councils):
    """evaluate() takes the argmax of predict_proba (random among exact ties): the recalibrated
    majority now has majority's decisions, hence its accuracy, on every council (before, the
    coalition majority's confident wrong votes were recalibrated to ties: 0.10 -> ~0.5)."""
    for cname, counts in councils.items():
        ev = evaluate(counts, ["majority", "iso:majority", "temp:majority"], folds=5,
                      label_budget=25, seed=0, n_resamples=10)
        rows = {r["arm"]: r for r in ev.table}
        gold, gm, mask = (np.asarray(x) for x in (counts.gold, counts.gold_missing,
                                                   counts.mask))
        pred = {a: np.asarray(correctness(ev.proba[a], gold, gm, mask,
                                          key=jax.random.key(0)).pred) for a in rows}
        for arm in ("iso:majority", "temp:majority"):
            np.testing.assert_array_equal(pred[arm], pred["majority"], err_msg=cname)
            assert rows[arm]["accuracy"] == rows["majority"]["accuracy"], cname
        if cname != "clean":
            assert rows["iso:majority"]["accuracy"] < 0.3
