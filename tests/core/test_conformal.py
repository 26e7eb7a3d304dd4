"""Answer sets with coverage (split conformal, LAC and APS): the scores, threshold and sets
against plain NumPy loops, coverage within sampling error of 1 - alpha on held-out tasks, and
``predict_set`` on the estimators (the calibration split comes from the fit data)."""
import math

import jax
import numpy as np
import pytest

import bda_jax as bda
from bda_jax import conformal_scores, conformal_threshold, prediction_sets, set_coverage
from bda_jax.aggregators import BDAPerAgent, Majority
from bda_jax.simulate import simulate_council


def random_posteriors(rng, n, K, ragged=True):
    """Dirichlet posteriors over 2..K candidates per task (padding slots 0) and a true answer
    drawn from each posterior itself (inverse CDF), so the posterior is calibrated (any model
    would do for validity; a calibrated one makes the expected set sizes meaningful)."""
    k = rng.integers(2, K + 1, n) if ragged else np.full(n, K)
    mask = np.arange(K)[None, :] < k[:, None]
    p = rng.dirichlet(np.ones(K) * 0.7, n) * mask
    p /= p.sum(1, keepdims=True)
    gold = np.minimum((rng.random((n, 1)) > np.cumsum(p, 1)).sum(1), k - 1)
    return p, mask, gold


def aps_scores_loop(p, mask, u):
    """[n, K] APS scores by hand: candidates sorted by decreasing probability (ties: lower slot
    first); the score of k is the mass ranked before it plus u * p_k."""
    n, K = p.shape
    out = np.full((n, K), np.inf)
    for t in range(n):
        order = sorted(np.flatnonzero(mask[t]), key=lambda j: (-p[t, j], j))
        before = 0.0
        for j in order:
            out[t, j] = before + u[t] * p[t, j]
            before += p[t, j]
    return out


def test_threshold_is_the_conformal_order_statistic():
    s = np.array([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6])        # n = 9
    for alpha, rank in ((0.1, 9), (0.2, 8), (0.5, 5), (0.05, 10)):
        want = np.sort(s)[rank - 1] if rank <= 9 else math.inf   # ceil(10 (1 - alpha))
        assert conformal_threshold(s, alpha) == want, alpha
    assert conformal_threshold([], 0.1) == math.inf
    for bad in (0, 1, -0.1, 1.5, True, "0.1", None):
        with pytest.raises(bda.DataError, match="alpha"):
            conformal_threshold(s, bad)


def test_lac_and_aps_match_the_loops():
    rng = np.random.default_rng(0)
    p, mask, gold = random_posteriors(rng, 60, 5)
    p[:5, :2] = 0.5 * mask[:5, :2] / np.maximum(mask[:5, :2].sum(1, keepdims=True), 1)  # ties
    p[:5] /= p[:5].sum(1, keepdims=True)
    gm = np.zeros(60, bool)
    gm[7] = True
    lac = np.asarray(conformal_scores(p, gold, mask, method="lac", gold_missing=gm))
    want = 1 - p[np.arange(60), gold]
    want[7] = np.inf
    np.testing.assert_allclose(lac, want, rtol=1e-6)
    q = 0.6
    np.testing.assert_array_equal(np.asarray(prediction_sets(p, mask, q, method="lac")),
                                  mask & (1 - p <= q + 1e-7))
    key = jax.random.key(3)
    u = np.asarray(jax.random.uniform(key, (60,), np.float32))
    table = aps_scores_loop(p, mask, u)
    aps = np.asarray(conformal_scores(p.astype(np.float32), gold, mask, method="aps", key=key))
    np.testing.assert_allclose(aps, table[np.arange(60), gold], rtol=1e-5, atol=1e-6)
    sets = np.asarray(prediction_sets(p.astype(np.float32), mask, q, method="aps", key=key))
    np.testing.assert_array_equal(sets, mask & (table <= q))
    plain = np.asarray(conformal_scores(p, gold, mask, method="aps", randomized=False))
    np.testing.assert_allclose(plain, aps_scores_loop(p, mask, np.ones(60))[np.arange(60), gold],
                               rtol=1e-6)
    with pytest.raises(bda.DataError, match="key"):
        conformal_scores(p, gold, mask, method="aps")
    with pytest.raises(bda.DataError, match="method"):
        conformal_scores(p, gold, mask, method="raps")


@pytest.mark.parametrize("method", ["lac", "aps"])
def test_coverage_is_one_minus_alpha_within_sampling_error(method):
    """Continuous scores, exchangeable tasks: the coverage of a new task, averaged over random
    calibration draws, is exactly ceil((n + 1)(1 - alpha)) / (n + 1). 200 draws of 200
    calibration and 500 test tasks per (K, alpha): the mean lies within 4 standard errors."""
    rng = np.random.default_rng(1)
    n_cal, n_test, reps = 200, 500, 200
    for K in (2, 3, 4):
        p, mask, gold = random_posteriors(rng, reps * (n_cal + n_test), K, ragged=False)
        p = p.reshape(reps, n_cal + n_test, K)
        mask, gold = mask.reshape(p.shape), gold.reshape(reps, -1)
        key_cal, key_new = jax.random.split(jax.random.key(K))
        cal, new = slice(0, n_cal), slice(n_cal, None)
        # every draw's calibration scores in one call (scores are per task), then one
        # threshold per draw, broadcast to that draw's test tasks
        s = np.asarray(conformal_scores(p[:, cal].reshape(-1, K), gold[:, cal].reshape(-1),
                                        mask[:, cal].reshape(-1, K), method=method,
                                        key=key_cal)).reshape(reps, n_cal)
        for alpha in (0.05, 0.1, 0.2):
            q = np.array([conformal_threshold(row, alpha) for row in s])
            sets = np.asarray(prediction_sets(p[:, new].reshape(-1, K), mask[:, new].reshape(-1, K),
                                              np.repeat(q, n_test), method=method, key=key_new))
            sets = sets.reshape(reps, n_test, K)
            stats = [set_coverage(sets[r], gold[r, new]) for r in range(reps)]
            cov = [x["coverage"] for x in stats]
            size = [x["mean_size"] for x in stats]
            exact = math.ceil((n_cal + 1) * (1 - alpha)) / (n_cal + 1)
            se = np.std(cov, ddof=1) / np.sqrt(reps)
            assert abs(np.mean(cov) - exact) < 4 * se + 1e-3, (K, alpha, np.mean(cov), exact)
            assert 1 <= np.mean(size) <= K


def test_set_coverage_counts_by_hand():
    sets = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [0, 1, 1]], bool)
    got = set_coverage(sets, np.array([0, 2, 1, -1]), np.array([False, False, False, True]))
    assert got == {"coverage": 0.25, "mean_size": 1.25, "empty": 0.25, "n_labeled": 4}


# ---------------------------------------------------------------- estimators
@pytest.fixture(scope="module")
def council():
    """K = 3 council of 5 seats (two unreliable); 900 labeled tasks: fit on the first 300 (gold
    kept), hold out the rest as new tasks."""
    traces = simulate_council(11, 900, [0.75, 0.7, 0.65, 0.4, 0.35], n_candidates=3,
                              n_rounds=2)
    counts = bda.tally(traces)
    return counts.take(np.arange(300)), counts.take(np.arange(300, 900))


@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_predict_set_covers_held_out_tasks(council, alpha):
    """Majority (no gold read: calibrated on the fit data's labeled tasks as they are) and BDA
    per-agent (supervised: refitted without its calibration half) both cover held-out tasks at
    1 - alpha within sampling error (a binomial 3-sigma band on 600 tasks, widened by the
    150-task calibration share)."""
    fit, new = council
    for model in (Majority(), BDAPerAgent(seed=0, n_folds=3)):
        model.fit(fit)
        sets = model.predict_set(new, alpha)
        assert sets.shape == new.mask.shape and not (sets & ~np.asarray(new.mask)).any()
        got = set_coverage(sets, new.gold)
        band = 3 * np.sqrt(alpha * (1 - alpha) * (1 / 600 + 1 / 150))
        assert got["coverage"] >= 1 - alpha - band, (type(model).__name__, got)
        if isinstance(model, BDAPerAgent):      # continuous posteriors: not far above either
            assert got["coverage"] <= 1 - alpha + band + 1 / 151, got
        np.testing.assert_array_equal(model.predict_set(new, alpha), sets)   # cached, seeded


def test_predict_set_never_calibrates_on_labels_the_fit_saw(council, monkeypatch):
    """The supervised refit gets weight 0 on exactly the held-out calibration tasks, and the
    full fit's predictions are untouched."""
    fit, new = council
    model = BDAPerAgent(seed=0, n_folds=3).fit(fit)
    before = model.predict_proba(new)
    seen = []
    original = BDAPerAgent.fit

    def spy(self, data, weights=None):
        seen.append(None if weights is None else np.asarray(weights).copy())
        return original(self, data, weights)

    monkeypatch.setattr(BDAPerAgent, "fit", spy)
    model.predict_set(new, 0.1, fraction=0.4)
    (w,) = seen
    assert w is not None and w.shape == (300,) and set(np.unique(w)) == {0.0, 1.0}
    assert int((w == 0).sum()) == round(0.4 * 300)
    np.testing.assert_array_equal(model.predict_proba(new), before)
    # a calibration set given explicitly: no refit
    model.predict_set(new, 0.1, calibration=new)
    assert len(seen) == 1


def test_predict_set_errors_name_the_field(council):
    fit, new = council
    model = Majority().fit(fit)
    for kwargs, field in (({"alpha": 0}, "alpha"), ({"alpha": 0.1, "method": "x"}, "method"),
                          ({"alpha": 0.1, "fraction": 1.0}, "fraction")):
        with pytest.raises(bda.DataError) as err:
            model.predict_set(new, **kwargs)
        assert err.value.field == field
    unlabeled = bda.Counts.from_arrays(N=np.asarray(fit.N), e=np.asarray(fit.e),
                                       c=np.asarray(fit.c))
    with pytest.raises(bda.DataError, match="labeled"):
        Majority().fit(unlabeled).predict_set(new, 0.1)
    with pytest.raises(bda.DataError, match="recorded fit"):
        Majority().predict_set(new, 0.1)


def test_crowd_estimator_sets_cover_tasks_whose_labels_the_fit_never_read():
    """crowd-kit surface: DawidSkene fitted on a crowd's labels (no gold), calibrated on 400
    tasks' known answers, covers the other 800 at 1 - alpha (binomial 3-sigma band); sets come
    as a DataFrame of booleans indexed by task, one column per label; a label the fit read is
    refused as calibration."""
    import pandas as pd
    from bda_jax import crowd
    rng = np.random.default_rng(4)
    T, W, K = 1200, 12, 3
    skill = rng.uniform(0.35, 0.8, W)
    truth = rng.integers(0, K, T)
    task = np.repeat(np.arange(T), 4)
    worker = np.concatenate([rng.choice(W, 4, replace=False) for _ in range(T)])
    right = rng.random(task.size) < skill[worker]
    label = np.where(right, truth[task], (truth[task] + rng.integers(1, K, task.size)) % K)
    df = pd.DataFrame({"task": [f"t{t}" for t in task], "worker": [f"w{w}" for w in worker],
                       "label": [f"l{k}" for k in label]})
    gold = pd.Series([f"l{k}" for k in truth], index=[f"t{t}" for t in range(T)])
    model = crowd.DawidSkene(n_iter=50).fit(df)
    alpha = 0.1
    sets = model.predict_set(alpha, true_labels=gold.iloc[:400])
    assert isinstance(sets, pd.DataFrame) and list(sets.columns) == model.classes_
    rest = sets.loc[gold.index[400:]]
    covered = np.array([rest.loc[t, g] for t, g in gold.iloc[400:].items()])
    band = 3 * np.sqrt(alpha * (1 - alpha) * (1 / 800 + 1 / 400))
    assert covered.mean() >= 1 - alpha - band, covered.mean()
    assert rest.to_numpy().sum(1).mean() < K                # informative: not every label
    supervised = crowd.DawidSkene(n_iter=50).fit(df, true_labels=gold.iloc[:100])
    with pytest.raises(bda.DataError, match="given to fit") as err:
        supervised.predict_set(alpha, true_labels=gold.iloc[50:400])
    assert err.value.task_id == "t50"
    assert supervised.predict_set(alpha, true_labels=gold.iloc[100:400]).shape == (T, K)


def test_model_file_sets_need_calibration_tasks_the_fit_never_saw(tmp_path):
    """predict_tasks(set_alpha=...): calibrated on separate labeled traces (honest coverage),
    or on the predicted traces' own labels (flagged); the training traces are refused."""
    from bda_jax.aggregators import fit_model_file, load_model, predict_tasks
    traces = simulate_council(5, 360, [0.75, 0.7, 0.6, 0.4], n_candidates=3, n_rounds=2)
    train, cal, new = traces[:120], traces[120:240], traces[240:]
    fit_model_file(train, "majority", tmp_path / "m.json")
    artifact = load_model(tmp_path / "m.json")
    rows, summary = predict_tasks(artifact, new, set_alpha=0.2, calibration=cal)
    assert summary["set"]["n_calibration"] == 120 and not summary["set"]["calibrated_on_these_tasks"]
    assert all(set(r["set"]) <= set(r["candidates"]) for r in rows)
    covered = np.mean([r["gold"] in r["set"] for r in rows])
    assert covered == pytest.approx(summary["set"]["coverage"])
    assert covered >= 0.8 - 3 * np.sqrt(0.16 * (1 / 120 + 1 / 120))
    # the same sets as the estimator's own predict_set on the same calibration tasks
    sets = artifact.estimator.predict_set(bda.tally(new, agents=artifact.agents), 0.2,
                                          calibration=bda.tally(cal, agents=artifact.agents))
    assert [r["set"] for r in rows] == [[c for j, c in enumerate(r["candidates"]) if sets[t, j]]
                                        for t, r in enumerate(rows)]
    _, own = predict_tasks(artifact, new, set_alpha=0.2)
    assert own["set"]["calibrated_on_these_tasks"] and own["set"]["n_calibration"] == 120
    with pytest.raises(bda.DataError, match="training data") as err:
        predict_tasks(artifact, new, set_alpha=0.2, calibration=train)
    assert err.value.field == "calibration"
