"""Control studies of the adversarial suite ([BDA] Appendix F.5, F.9, F.11,
F.12, F.14) on small simulated councils.

The asserted shapes are the paper's (Tables 14, 15, 17, 18, F.14), checked where the simulator
reproduces them robustly; the sizes are small (200-300 questions), so thresholds carry a margin
justified next to each assert.
"""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.adversarial import (ControlStudy, label_permutation_control, onecoin_weight,
                                 policy_shift, recalibration_under_attack, round0_truncation,
                                 weak_seat_swap)
from bda_jax.simulate import Behavior, simulate_council

R = [0.74, 0.68, 0.68]          # the paper's binary regime
N = 200


@pytest.fixture(scope="module")
def clean():
    return simulate_council(0, N, R)


@pytest.fixture(scope="module")
def attacked():
    """A single adversary (seat 0, 90 % compliance, as measured live) with contagion on."""
    return simulate_council(0, N, R, adversaries={0: 0.9}, contagion=0.3)


def strict_json(study: ControlStudy):
    return json.loads(json.dumps(study.to_json(), allow_nan=False))


def test_label_permutation_table_and_invariance(clean, attacked):
    arms = ("bda-per-agent", "bda-confusion", "stacking")
    for traces in (clean, attacked):
        study = label_permutation_control(traces, arms, seed=0, n_resamples=100)
        assert [r["arm"] for r in study.table] == list(arms) + ["majority"]
        for r in study.table:
            assert {"accuracy_original", "accuracy_permuted", "delta_accuracy", "ece_ew_original",
                    "ece_ew_permuted", "n"} <= set(r)
            assert r["n"] == N
            assert r["delta_accuracy"] == pytest.approx(r["accuracy_permuted"]
                                                        - r["accuracy_original"])
        # label-indifferent arms: the posteriors are permuted exactly, so only random tie-breaks
        # (and the inner-fold draw) can move a decision; the paper bound is 0.01, on 200 tasks
        # that is 2 decisions
        for arm in ("bda-per-agent", "stacking", "majority"):
            assert abs(study.row(arm=arm)["delta_accuracy"]) <= 0.01, arm
        assert study.plot["arms"] == [r["arm"] for r in study.table]
        assert study.params["label_space"] == "semantic"
        strict_json(study)


def test_label_permutation_is_deterministic(attacked):
    a = label_permutation_control(attacked, ("bda-per-agent",), seed=3, n_resamples=100)
    b = label_permutation_control(attacked, ("bda-per-agent",), seed=3, n_resamples=100)
    assert a.table == b.table and a.params["permutation_seed"] == 3


def test_round0_truncation_beats_full_trace_under_contagion():
    """F.5: with contagion on, the rounds import the flipped seats' corrupted moves, so the
    round-0 weighted vote is more accurate under attack than the full trace. An always-wrong
    seat keeps round 0 clean; contagion then costs the full trace 7-16 points (8 simulator
    seeds at this size) and widens the round-0 advantage on every one of them."""
    arms = ("bda-per-agent", "bda-confusion")
    off, on = (round0_truncation(simulate_council(0, N, R, adversaries=[0], contagion=c), arms,
                                 seed=0, n_resamples=100) for c in (0.0, 0.3))
    assert [r["arm"] for r in on.table] == ["bda-per-agent", "bda-confusion", "majority"]
    pa = on.row(arm="bda-per-agent")
    assert pa["accuracy_round0"] > pa["accuracy_full"] + 0.05
    assert pa["delta_accuracy"] == pytest.approx(pa["accuracy_full"] - pa["accuracy_round0"])
    assert pa["delta_accuracy"] < off.row(arm="bda-per-agent")["delta_accuracy"]
    maj = on.row(arm="majority")               # plurality reads round 0 on both bases
    assert maj["accuracy_round0"] == maj["accuracy_full"]
    assert on.plot["round0"] == [r["accuracy_round0"] for r in on.table]
    seats = on.tables["seats"]               # contagion corrupts the genuine seats' later moves
    assert [s["agent"] for s in seats] == ["A1", "A2", "A3"]
    assert all(s["reliability_full"] < s["reliability_round0"] - 0.05 for s in seats[1:])
    back = ControlStudy.from_json(strict_json(on))     # what a resumed study script reads
    assert back.to_json() == strict_json(on) and back.row(arm="majority") == maj
    with pytest.raises(bda.ArtifactError):
        ControlStudy.from_json({"schema_version": 99})


def test_round0_truncation_wins_against_a_relenting_coalition():
    """F.5 at k = 2: live adversaries relent in later rounds (Appendix G.1, full-trace r_i
    0.21 / 0.29), so their later moves carry less inverted evidence while contagion corrupts
    the genuine seat's; round 0 is then the more accurate basis for the one-coin and the
    confusion model. With relent 0.2 the one-coin's round-0 margin was 0.07-0.26 and the
    confusion's 0.02-0.11 over 8 simulator seeds at this size (0.135 / 0.07 on seed 0)."""
    traces = simulate_council(0, N, R, adversaries={0: 0.9, 1: 0.9}, contagion=0.3,
                              behavior=Behavior(adversary_relent=0.2))
    study = round0_truncation(traces, ("bda-per-agent", "bda-confusion"), seed=0,
                              n_resamples=100)
    assert study.row(arm="bda-per-agent")["delta_accuracy"] < -0.05
    assert study.row(arm="bda-confusion")["delta_accuracy"] < -0.01
    seats = study.tables["seats"]           # the adversaries' later moves are partly right
    assert all(s["reliability_full"] > s["reliability_round0"] + 0.05 for s in seats[:2])
    assert seats[2]["reliability_full"] < seats[2]["reliability_round0"] - 0.1


def test_recalibration_fixes_calibration_not_accuracy(clean):
    """F.9, Table 15: under the coalition a recalibrated majority is calibrated (paper: ECE_ew
    ~0) but keeps majority's decisions, hence its accuracy (paper: 0.37 on the live council;
    0.10 here, where the coalition complies on 90 % of the tasks)."""
    attacked2 = simulate_council(0, N, R, adversaries={0: 0.9, 1: 0.9}, contagion=0.3)
    study = recalibration_under_attack({"clean": clean, "k=2": attacked2},
                                       ("majority", "bda-per-agent"), seed=0, n_resamples=100)
    assert len(study.table) == 4
    assert {r["council"] for r in study.table} == {"clean", "k=2"}
    for r in study.table:
        assert {"accuracy", "accuracy_iso", "ece_ew", "ece_ew_iso", "brier", "brier_iso",
                "brier_mc", "brier_mc_iso", "decisions_kept", "n"} <= set(r)
    for council in ("clean", "k=2"):           # majority: the very decisions of the harness
        maj = study.row(council=council, arm="majority")
        assert maj["decisions_kept"] == 1.0
        assert maj["accuracy_iso"] == maj["accuracy"]
    maj = study.row(council="k=2", arm="majority")
    bda = study.row(council="k=2", arm="bda-per-agent")
    # isotonic recalibration repairs the coalition-majority's confidence (its calibrated
    # confidence goes below 1/2, which the unclipped confidence can say) ...
    assert maj["ece_ew_iso"] < 0.05 < maj["ece_ew"] - 0.3
    assert maj["brier_iso"] < maj["brier"] - 0.3
    # ... but not its accuracy
    assert maj["accuracy_iso"] < 0.2 < 0.65 < bda["accuracy_iso"]
    assert study.params["label_budget"] == 25
    strict_json(study)


def test_policy_shift_within_policy_beats_shift_for_confusion():
    study = policy_shift(seed=0, n_questions=300, adversaries={0: 0.9, 1: 0.9},
                         arms=("bda-per-agent", "bda-confusion"))
    assert len(study.table) == 2 * 4
    assert {(r["calibrate"], r["deploy"]) for r in study.table} == {
        ("A", "A"), ("A", "B"), ("B", "A"), ("B", "B")}
    assert all(r["shifted"] == (r["calibrate"] != r["deploy"]) for r in study.table)
    acc = study.plot["bda-confusion"]
    # the confusion rows learn the label-systematic policy B; across policies they mislead
    assert acc["A->A"] > acc["B->A"] and acc["B->B"] > acc["A->B"]
    # (6 simulator seeds at this size: the mean within-minus-shifted gap is 0.15-0.23)
    assert (acc["A->A"] + acc["B->B"]) - (acc["A->B"] + acc["B->A"]) > 2 * 0.1
    # the one-coin's statistic (consistency with gold) transfers: shifts cost it little
    one = study.plot["bda-per-agent"]
    assert abs(one["A->B"] - one["B->B"]) <= 0.05 and abs(one["B->A"] - one["A->A"]) <= 0.05
    assert study.params["n_calibrate_tasks"] + study.params["n_deploy_tasks"] == 300
    strict_json(study)


def test_policy_shift_rejects_mismatched_tasks():
    a = simulate_council(0, 20, R, n_candidates=3)
    b = simulate_council(0, 21, R, n_candidates=3)
    with pytest.raises(Exception, match="same tasks"):
        policy_shift({"A": a, "B": b})


def test_weak_seat_is_shrunk_toward_zero_weight():
    study = weak_seat_swap(1, 300, R, seat=2, mediocre=0.52, adversary_rate=0.5,
                           arms=("majority", "bda-per-agent"), n_resamples=100)
    councils = ["original", "mediocre", "partial-adversary"]
    assert [r["council"] for r in study.table] == [c for c in councils for _ in range(2)]
    seats = study.tables["seats"]
    assert len(seats) == 3 * 3
    w = {(s["council"], s["seat"]): s["weight"] for s in seats}
    # an honestly mediocre seat is shrunk toward zero weight (10 simulator seeds at this size:
    # |w_mediocre| / max |w_genuine| in 0.00-0.45, median 0.24) ...
    assert abs(w["mediocre", 2]) < 0.5 * max(abs(w["mediocre", 0]), abs(w["mediocre", 1]))
    # ... while a partially adversarial seat earns a large negative weight
    assert w["partial-adversary", 2] < -abs(w["mediocre", 2]) - 0.3
    role = {(s["council"], s["seat"]): s["role"] for s in seats}
    assert role["mediocre", 2] == "mediocre" and role["partial-adversary", 2] == "partial-adversary"
    # graceful degradation: BDA per-agent still beats plurality with the mediocre seat (8 of 8
    # simulator seeds at this size)
    acc = {(r["council"], r["arm"]): r["accuracy"] for r in study.table}
    assert acc["mediocre", "bda-per-agent"] > acc["mediocre", "majority"]
    d = {(r["council"], r["arm"]): r["delta_accuracy"] for r in study.table}
    assert d["original", "majority"] == 0.0
    strict_json(study)


def test_onecoin_weight():
    assert onecoin_weight(0.5) == pytest.approx(0.0)
    assert onecoin_weight(0.37) == pytest.approx(np.log(0.37 / 0.63))     # Table 20: w1 = -0.55
    assert onecoin_weight(0.25, K=4) == pytest.approx(0.0)
