"""Calibrated (BDA-posterior) stopping: hand-derived stop rounds, kernel agreement, leak-freeness."""
import numpy as np
import pytest

from bda_jax import Counts, onecoin_log_posterior
from bda_jax.stopping import (build_votes, crossfit_log_posterior, stop_at_threshold,
                              summarize_stops, vote_log_posterior)


def _one_slot_batch():
    # one slot, GPQA letters (K = 4); problem 0 says A, A, A; problem 1 says A, B, B
    return build_votes([[["A"], ["A"], ["A"]], [["A"], ["B"], ["B"]]], ["A", "B"], "gpqa")


def test_posterior_by_hand():
    vt = _one_slot_batch()
    p = np.exp(vote_log_posterior(vt, [7.0], [3.0], 1.0))
    # round 1: p = 0.7 on A, 0.1 each elsewhere
    np.testing.assert_allclose(p[0, 0, :4], [0.7, 0.1, 0.1, 0.1], atol=1e-12)
    # round 2 (A, A): B(9,3) : B(7,5)/9 = 56/110 : 12/990 -> 42 : 1 : 1 : 1
    np.testing.assert_allclose(p[0, 1, :4], np.array([42, 1, 1, 1]) / 45, atol=1e-12)


def test_stop_rounds_by_hand():
    vt = _one_slot_batch()
    lp = vote_log_posterior(vt, [7.0], [3.0], 1.0)
    # problem 0 (A, A, A): .7, 42/45 = .9333, then B(10,3) : B(7,6)/27 (x 3) = 226.8 : 1 -> .987
    # problem 1 (A, B, B): .7 on A; round 2 A, B tie (.4667 each); round 3:
    #   B: B(9,4)/3, A: B(8,5)/9, C, D: B(7,6)/27 -> 1 : 1/6 : 1/25.2 (x 2) -> .8025 on B
    out = stop_at_threshold(vt, lp, 0.9)
    assert out.round.tolist() == [2, 3] and out.stopped.tolist() == [True, False]
    assert out.answer.tolist() == [0, 1]                 # fallback answer = argmax (B)
    assert out.confidence[1] == pytest.approx(1 / (1 + 1 / 6 + 2 / 25.2), abs=1e-9)
    out = stop_at_threshold(vt, lp, 0.95)
    assert out.round.tolist() == [3, 3] and out.stopped.tolist() == [True, False]
    assert out.confidence[0] == pytest.approx(226.8 / 229.8, abs=1e-9)
    out = stop_at_threshold(vt, lp, 0.7)
    assert out.round.tolist() == [1, 1] and out.stopped.all()
    out = stop_at_threshold(vt, lp, 0.999999)
    assert out.round.tolist() == [3, 3] and not out.stopped.any()    # fallback at last round
    s = summarize_stops(vt, stop_at_threshold(vt, lp, 0.9))
    assert s["coverage"] == 0.5 and s["acc_stopped"] == 1.0 and s["mean_rounds"] == 2.5
    assert s["acc_overall"] == 1.0                       # the fallback (B) is right too


def test_matches_bda_onecoin_kernel():
    probs = [[["7", "7", None], ["7", "3", "3"]], [["5", "5", "5"]]]
    vt = build_votes(probs, ["7", None], "aime")
    alpha, beta = np.array([6.0, 4.0, 3.0]), np.array([2.0, 3.0, 3.0])
    lp = vote_log_posterior(vt, alpha, beta, 0.5)
    t = 1   # problem 0, round 2: candidates 7, 3 and the unseen slot
    E = vt.E[0, t][:, [0, 1, 2]]
    counts = Counts.from_arrays(N=vt.N[0, t][None], e=E[None], c=E[None])
    ref = np.exp(np.asarray(onecoin_log_posterior(counts, alpha, beta, tau=0.5)))[0]
    np.testing.assert_allclose(np.exp(lp[0, t, :3]), ref, rtol=1e-5)


def test_crossfit_is_leak_free():
    rng = np.random.default_rng(0)
    B, R, S = 40, 4, 3
    truth = rng.integers(0, 4, B)
    probs = [[[("ABCD"[truth[b]] if rng.uniform() < 0.7 else "ABCD"[rng.integers(4)])
               for _ in range(S)] for _ in range(R)] for b in range(B)]
    gold = ["ABCD"[g] for g in truth]
    lp, fold = crossfit_log_posterior(build_votes(probs, gold, "gpqa"), folds=4)
    flipped = list(gold)
    flipped[0] = "ABCD"[(truth[0] + 1) % 4]
    lp2, fold2 = crossfit_log_posterior(build_votes(probs, flipped, "gpqa"), folds=4)
    assert (fold == fold2).all()
    own = fold == fold[0]
    np.testing.assert_array_equal(lp[own], lp2[own])        # own fold: own gold never used
    assert not np.array_equal(lp[~own], lp2[~own])          # other folds do use it
    assert np.isfinite(lp[:, :, :4]).all()


@pytest.mark.parametrize("th", [0.5, 0.99])
def test_stop_never_beyond_recorded_round(th):
    probs = [[["A", "B"]], [["A", "A"], ["B", "B"], ["B", "B"]]]
    vt = build_votes(probs, ["A", "B"], "gpqa")
    out = stop_at_threshold(vt, vote_log_posterior(vt, [3.0, 3.0], [2.0, 2.0], 1.0), th)
    assert (out.round <= vt.mask.sum(1)).all()
