"""The harness: identical folds for every arm, leak-free predictions, JSON results."""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.aggregators import (decision_flips, evaluate, fold_weights, make_arm,
                                 reliability_ablation)
from bda_jax.simulate import simulate_council

SUPERVISED = ["bda-per-agent", "bda-confusion", "stacking", "gated-vote", "best-member",
              "iso:bda-shared", "temp:majority"]


@pytest.fixture(scope="module")
def traces():
    return simulate_council(3, 90, [0.8, 0.65, 0.3], n_candidates=3)


@pytest.fixture(scope="module")
def council(traces):
    return bda.tally(traces)


def test_held_out_labels_never_reach_their_predictions(council):
    folds = bda.make_folds(council, 3, seed=1)
    base = evaluate(council, SUPERVISED, folds=folds, n_resamples=200)
    gold = np.asarray(council.gold).copy()
    held = folds == 0
    gold[held] = (gold[held] + 1) % 3
    moved = bda.Counts.from_arrays(N=council.N, e=council.e, c=council.c, gold=gold,
                                   e0=council.e0, conf0=council.conf0, cluster=council.cluster,
                                   vocab=council.vocab)
    again = evaluate(moved, SUPERVISED, folds=folds, n_resamples=200)
    for arm in SUPERVISED:
        assert base.proba[arm][held].tobytes() == again.proba[arm][held].tobytes(), arm
    assert (base.folds == folds).all()


def test_table_bootstrap_and_json(council):
    ev = evaluate(council, ["bda-per-agent", "ds-em", "verbalized"], folds=3, label_budget=12,
                  n_resamples=300)
    arms = [row["arm"] for row in ev.table]
    assert arms == ["bda-per-agent", "ds-em", "verbalized", "majority"]
    for row in ev.table:
        assert set(row) >= {"accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "auroc", "n"}
        assert row["n"] == 90
    assert set(ev.bootstrap) == {"bda-per-agent", "ds-em", "verbalized"}
    acc = ev.bootstrap["bda-per-agent"]["accuracy"]
    assert acc["ci_low"] <= acc["delta"] <= acc["ci_high"]
    assert len(ev.selected["bda-per-agent"]) == 3
    data = json.loads(ev.dumps())
    assert data["schema_version"] == 1 and data["label_budget"] == 12
    for arm in ev.proba:
        np.testing.assert_allclose(ev.proba[arm].sum(1), 1.0, rtol=1e-5)


def test_bad_arguments(council):
    with pytest.raises(bda.DataError, match="unknown arm"):
        evaluate(council, ["oracle"])
    with pytest.raises(bda.DataError, match="folds"):
        evaluate(council, ["majority"], folds=np.zeros(3, int))
    with pytest.raises(bda.DataError, match="label_budget"):
        evaluate(council, ["majority"], label_budget=1)
    assert type(make_arm("iso:stacking")).__name__ == "IsotonicRecalibrated"


def test_decision_flips_and_ablation_rows(traces):
    """On the module's council and with its 3 folds, so BDA per-agent's compiled search is the
    one the tests above already built."""
    flips = decision_flips(traces, folds=3)
    assert flips["fix"] - flips["break"] == flips["net"] and flips["n"] == 90
    assert 0 <= flips["accuracy_round0"] <= 1
    # the identity: accuracy_full - accuracy_round0 = net / n
    assert abs(flips["accuracy_full"] - flips["accuracy_round0"] - flips["net"] / 90) < 1e-9
    rows = reliability_ablation(traces, folds=3)
    assert [(r["key"], r["basis"]) for r in rows] == [
        ("agent", "all"), ("force", "all"), ("agent-force", "all"), ("agent", "propose"),
        ("agent", "round0")]
    assert all(r["n"] == 90 for r in rows)


# ----------------------------------------------------------------------------- scoring

def _ece_loop(conf, correct, n_bins=10):
    """Equal-width ECE by a plain loop over bins ([BDA] Appendix B Eq. 5)."""
    total = 0.0
    for m in range(n_bins):
        lo, hi = m / n_bins, (m + 1) / n_bins
        inside = [(c, y) for c, y in zip(conf, correct)
                  if (lo <= c < hi) or (m == n_bins - 1 and c >= hi) or (m == 0 and c < lo)]
        if inside:
            total += abs(sum(y for _, y in inside) - sum(c for c, _ in inside))
    return total / len(conf)


def test_summary_reads_a_given_confidence():
    proba = np.array([[0.6, 0.4], [0.3, 0.7], [0.5, 0.5]])
    gold = np.array([0, 0, 1])
    conf = np.array([0.2, 0.9, 0.45])               # below 1/K on tasks 0 and 2
    pred = np.array([0, 1, 0])
    row = bda.metrics.summary(proba, gold, pred=pred, confidence=conf)
    correct = [1.0, 0.0, 0.0]
    assert row["ece_ew"] == pytest.approx(_ece_loop(conf, correct))
    assert row["brier"] == pytest.approx(np.mean((conf - correct) ** 2))
    # the vector scores keep the probabilities
    assert row["brier_mc"] == pytest.approx(np.mean([0.32, 0.98, 0.5]))
    assert row["nll"] == pytest.approx(-np.mean(np.log([0.6, 0.3, 0.5])))
    assert row["auroc"] == pytest.approx(0.0)       # the right task has the lowest confidence
    s = bda.metrics.correctness(proba, gold, pred=pred, confidence=conf)
    np.testing.assert_allclose(s.confidence, conf)
    with pytest.raises(bda.DataError, match="confidence"):
        bda.metrics.summary(proba, gold, confidence=conf[:2])


def test_arms_are_scored_on_their_own_decisions_and_confidences(council):
    ev = evaluate(council, ["verbalized", "iso:majority"], folds=3, label_budget=25,
                  n_resamples=50)
    gold, rows = np.asarray(council.gold), {r["arm"]: r for r in ev.table}
    own = make_arm("verbalized").fit(council).predict(council)
    np.testing.assert_array_equal(ev.pred["verbalized"], own)
    assert rows["verbalized"]["accuracy"] == pytest.approx(np.mean(own == gold))
    # the recalibrated majority: its fold models' decisions and unclipped confidences
    weights = fold_weights(council, ev.folds, 25, 0)
    conf = np.zeros(len(gold))
    for f, w in enumerate(weights):
        test = ev.folds == f
        d = make_arm("iso:majority").fit(council, w).decide(council)
        np.testing.assert_array_equal(ev.pred["iso:majority"][test], d.index[test])
        conf[test] = d.confidence[test]
    np.testing.assert_array_equal(ev.confidence["iso:majority"], conf)
    assert "verbalized" not in ev.confidence
    correct = (ev.pred["iso:majority"] == gold).astype(float)
    assert rows["iso:majority"]["ece_ew"] == pytest.approx(_ece_loop(conf, correct), abs=1e-6)
    assert rows["iso:majority"]["brier"] == pytest.approx(np.mean((conf - correct) ** 2),
                                                          abs=1e-6)
    onehot = np.eye(3)[gold]
    brier_mc = np.mean(((ev.proba["iso:majority"] - onehot) ** 2).sum(1))
    assert rows["iso:majority"]["brier_mc"] == pytest.approx(brier_mc, abs=1e-6)


def test_bda_fit_makes_the_harness_decisions(council):
    """The harness's BDA arm is the BDA class fitted on each fold's weights, so a wrapper of it
    (iso:) recalibrates the very decisions the arm is scored on."""
    ev = evaluate(council, ["bda-per-agent", "iso:bda-per-agent"], folds=3, label_budget=25,
                  n_resamples=50)
    for f, w in enumerate(fold_weights(council, ev.folds, 25, 0)):
        test = ev.folds == f
        model = bda.aggregators.BDA("bda-per-agent", seed=0).fit(council, w)
        np.testing.assert_array_equal(ev.pred["bda-per-agent"][test], model.predict(council)[test])
        np.testing.assert_array_equal(ev.proba["bda-per-agent"][test],
                                      model.predict_proba(council)[test])
        assert ev.selected["bda-per-agent"][f] == model.params_
    np.testing.assert_array_equal(ev.pred["iso:bda-per-agent"], ev.pred["bda-per-agent"])


# ----------------------------------------------------------------------------- answer sets

SET_ARMS = ["bda-per-agent", "ds-em", "verbalized", "iso:majority"]


def test_answer_sets_cover_and_never_read_a_test_label(council):
    alpha = 0.2
    folds = bda.make_folds(council, 3, seed=1)
    base = evaluate(council, SET_ARMS, folds=folds, n_resamples=50, set_alpha=alpha)
    n = 90
    se = np.sqrt(alpha * (1 - alpha) / n)
    gold = np.asarray(council.gold)
    for row in base.table:
        sets = base.answer_sets[row["arm"]]
        assert row["coverage"] == pytest.approx(np.mean(sets[np.arange(n), gold]))
        assert row["coverage"] >= 1 - alpha - 3 * se, row
        assert row["mean_set_size"] == pytest.approx(sets.sum(1).mean())
        assert row["empty_sets"] == pytest.approx(np.mean(sets.sum(1) == 0))
        assert not (sets & ~np.asarray(council.mask)).any()
    assert json.loads(base.dumps())["sets"] == {"alpha": 0.2, "method": "lac", "fraction": 0.5}
    # permuting the gold of outer fold 0 leaves fold 0's sets unchanged, for every arm
    moved_gold = gold.copy()
    held = folds == 0
    moved_gold[held] = (moved_gold[held] + 1) % 3
    moved = bda.Counts.from_arrays(N=council.N, e=council.e, c=council.c, gold=moved_gold,
                                   e0=council.e0, conf0=council.conf0, cluster=council.cluster,
                                   vocab=council.vocab)
    again = evaluate(moved, SET_ARMS, folds=folds, n_resamples=50, set_alpha=alpha)
    for arm in base.answer_sets:
        np.testing.assert_array_equal(base.answer_sets[arm][held], again.answer_sets[arm][held],
                                      err_msg=arm)


def test_answer_set_arguments(council):
    with pytest.raises(bda.DataError, match="alpha"):
        evaluate(council, ["majority"], set_alpha=1.5)
    with pytest.raises(bda.DataError, match="method"):
        evaluate(council, ["majority"], set_alpha=0.1, set_method="topk")
    with pytest.raises(bda.DataError, match="set_fraction"):
        evaluate(council, ["majority"], set_alpha=0.1, set_fraction=1.0)
    ev = evaluate(council, ["majority"], folds=3, n_resamples=20)
    assert "coverage" not in ev.table[0] and ev.to_json()["sets"] is None


class _MajorityMethod:
    """A stand-in LLM method (the harness' method protocol) whose posterior is the majority's."""

    name, reads_council, run_ = "majority-method", True, None

    def method_proba(self, data, counts):
        model = make_arm("majority").fit(counts)
        return model.predict_proba(counts), model.predict(counts)


def test_method_arms_get_answer_sets_like_an_unsupervised_arm(council):
    ev = evaluate(council, ["majority", _MajorityMethod()], folds=3, n_resamples=20,
                  set_alpha=0.2)
    np.testing.assert_array_equal(ev.answer_sets["majority-method"], ev.answer_sets["majority"])
    rows = {r["arm"]: r for r in ev.table}
    assert rows["majority-method"]["coverage"] == rows["majority"]["coverage"]
