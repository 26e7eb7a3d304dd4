"""Row-drift monitor and the sleeper study ([BDA] Appendix F.8 and F.13).

The sleeper thresholds are the acceptance criterion ("at f = 0 per-agent is below majority
and recovers as f grows; the drift alarm exceeds twice its noise floor by f = 0.2"), asserted on a
small f grid at the paper's window size (1,500 traces per window; smaller windows raise the floor).
"""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax import DataError
from bda_jax.adversarial import (F_GRID, DriftReport, RowDriftMonitor, SleeperStudy, noise_floor,
                                 row_drift, sleeper_study)
from bda_jax.simulate import simulate_council

REL = [0.74, 0.68, 0.68]
AGENTS = ("A1", "A2", "A3")


def window(seed, n=200, **kw):
    return bda.tally(simulate_council(seed, n, REL, seeds_per_question=2, **kw), agents=AGENTS)


def inverted(counts, seat):
    """The same window with one seat's answers mirrored (K = 2): its rows swap columns."""
    e, c, e0 = (np.array(x) for x in (counts.e, counts.c, counts.e0))
    for x in (e, c, e0):
        x[:, seat] = x[:, seat, ::-1]
    return bda.Counts.from_arrays(counts.N, e, c, counts.K, counts.gold, e0=e0,
                                  cluster=counts.cluster, agents=counts.agents, vocab=counts.vocab)


@pytest.fixture(scope="module")
def clean():
    return window(0)


def test_identical_windows_have_zero_drift(clean):
    np.testing.assert_array_equal(np.asarray(row_drift(clean, clean)), 0.0)


def test_symmetric_and_bounded(clean):
    other = window(1)
    attacked = window(2, adversaries=[0])
    for a, b in ((clean, other), (clean, attacked), (other, attacked)):
        ab, ba = np.asarray(row_drift(a, b, lam=3.0)), np.asarray(row_drift(b, a, lam=3.0))
        np.testing.assert_allclose(ab, ba, rtol=0, atol=1e-7)
        assert np.all((ab >= 0) & (ab <= 1))
    # K > 2 with per-task K (padding slots have no rows and no weight)
    a = bda.tally(simulate_council(3, 150, REL, n_candidates=(2, 4)), agents=AGENTS)
    b = bda.tally(simulate_council(4, 150, REL, n_candidates=(2, 4), adversaries=[1]),
                  agents=AGENTS)
    d = np.asarray(row_drift(a, b))
    assert d.shape == (3,) and np.all((d >= 0) & (d <= 1))


def test_inverted_seat_drifts_alone(clean):
    d = np.asarray(row_drift(clean, inverted(clean, 1), lam=1.0))
    assert d[1] > 0.3
    np.testing.assert_array_equal(d[[0, 2]], 0.0)


def test_weights_select_tasks_like_take(clean):
    T = clean.N.shape[0]
    half = np.asarray(clean.cluster) % 2 == 0
    via_weights = row_drift(clean, clean, 2.0, weights_a=half, weights_b=~half)
    via_take = row_drift(clean.take(half), clean.take(~half), 2.0)
    np.testing.assert_allclose(np.asarray(via_weights), np.asarray(via_take), atol=1e-6)
    assert T == half.sum() + (~half).sum()


def test_agent_without_shared_evidence_is_nan(clean):
    e, c, N = np.array(clean.e), np.array(clean.c), np.array(clean.N)
    e[:, 2], c[:, 2], N[:, 2] = 0, 0, 0
    silent = bda.Counts.from_arrays(N, e, c, clean.K, clean.gold, agents=AGENTS,
                                    vocab=clean.vocab)
    d = np.asarray(row_drift(clean, silent))
    assert np.isnan(d[2]) and np.isfinite(d[:2]).all()


def test_mismatched_windows_are_rejected(clean):
    renamed = bda.tally(simulate_council(1, 20, REL), agents=("A2", "A1", "A3"))
    with pytest.raises(DataError):
        row_drift(clean, renamed)
    with pytest.raises(DataError):
        row_drift(clean, bda.tally(simulate_council(1, 20, REL, n_candidates=3)))


def test_noise_floor_positive_and_small(clean):
    floor, splits = noise_floor(clean, lam=10.0, n_splits=10, seed=0, return_splits=True)
    floor = np.asarray(floor)
    assert splits.shape == (10, 3)
    assert np.all(floor > 0) and np.all(floor < 0.1)
    q95 = np.asarray(noise_floor(clean, lam=10.0, n_splits=10, seed=0, quantile=0.95))
    assert np.all(q95 >= floor)
    # deterministic in the seed
    np.testing.assert_array_equal(floor, np.asarray(noise_floor(clean, 10.0, 10, 0)))


def test_monitor_alarms_for_a_turned_seat_only():
    monitor = RowDriftMonitor(lam=10.0, factor=2.0, seed=0, n_splits=10)
    monitor.fit_reference(simulate_council(10, 200, REL, seeds_per_question=2))
    assert monitor.agents_ == AGENTS and monitor.floor_.shape == (3,)
    assert monitor.rows_.shape == (3, 2, 2) and monitor.n_reference_ == 400
    for seed in (11, 12):
        ok = monitor.update(simulate_council(seed, 200, REL, seeds_per_question=2))
        assert not ok.any_alarm and ok.recommendation == "keep"
    turned = monitor.update(simulate_council(13, 200, REL, seeds_per_question=2,
                                             adversaries=[2]))
    assert turned.alarm[2] and turned.ratio[2] > 2.0
    assert turned.recommendation == "one-coin fallback"
    assert len(monitor.history_) == 3
    json.dumps(turned.to_dict())
    assert isinstance(turned, DriftReport)


def test_monitor_requires_reference_and_matching_agents():
    monitor = RowDriftMonitor()
    with pytest.raises(DataError):
        monitor.update(simulate_council(0, 10, REL))
    monitor.fit_reference(simulate_council(0, 40, REL))
    with pytest.raises(bda.TraceError):  # a seat the reference never saw
        monitor.update(simulate_council(1, 10, [0.7] * 4))


@pytest.fixture(scope="module")
def sleeper():
    return sleeper_study(seed=0, f_grid=(0.0, 0.2, 1.0), n_questions=1500)


def test_sleeper_table_is_tidy(sleeper):
    assert len(sleeper.table) == 3 * 3
    assert {r["arm"] for r in sleeper.table} == {"majority", "bda-per-agent", "bda-confusion"}
    for r in sleeper.table:
        assert {"f", "arm", "accuracy", "ece_ew", "drift_ratio"} <= set(r)
    n = sleeper.config["n_tasks"]
    assert n["reference"] == n["calibration"] == n["deployment"] == 1500
    back = SleeperStudy.from_json(json.loads(json.dumps(sleeper.to_json(), allow_nan=False)))
    assert back.to_json() == sleeper.to_json()          # what a resumed study script reads
    np.testing.assert_array_equal(back.curve("bda-per-agent"), sleeper.curve("bda-per-agent"))
    with pytest.raises(bda.ArtifactError):
        SleeperStudy.from_json({"table": []})
    assert F_GRID == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def test_sleeper_below_majority_then_recovers(sleeper):
    maj = sleeper.curve("majority")
    per = sleeper.curve("bda-per-agent")
    assert per[0] < maj[0]                     # the pure sleeper is trusted
    assert per[1] > per[0] and per[2] >= per[0] + 0.3
    assert sleeper.curve("bda-confusion")[2] >= sleeper.curve("bda-confusion")[0] + 0.3


def test_sleeper_drift_alarm_by_a_fifth(sleeper):
    ratio = sleeper.curve("majority", "drift_ratio")
    paired = sleeper.curve("majority", "drift_ratio_paired")
    assert ratio[0] < 2.0 and paired[0] == 0.0            # clean window: no alarm
    assert ratio[1] > 2.0 and paired[1] > 2.0             # f = 0.2: past twice the floor
    assert ratio[2] > ratio[1]
    alarms = [m["alarm"] for m in sleeper.monitor]
    assert not any(alarms[0]) and alarms[2][0] and alarms[2][1]


def test_simulated_twins_pair_up():
    clean = simulate_council(5, 30, REL)
    attacked = simulate_council(5, 30, REL, adversaries={0: 0.6, 1: 0.6})
    assert [t.gold for t in clean] == [t.gold for t in attacked]
    # the honest seat's round-0 answer is the same in both twins
    assert [t.moves[2].answer for t in clean] == [t.moves[2].answer for t in attacked]
