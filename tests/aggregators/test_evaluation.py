"""The harness: identical folds for every arm, leak-free predictions, JSON results."""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.aggregators import decision_flips, evaluate, make_arm, reliability_ablation
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
