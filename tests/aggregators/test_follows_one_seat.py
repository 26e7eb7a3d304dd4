"""The "follows one seat" diagnostic ([BDA] Appendix F.10)."""
import jax
import numpy as np
import pytest

import bda_jax as bda
from bda_jax.aggregators import CouncilDawidSkene, follows_one_seat
from bda_jax.simulate import simulate_council


def _counts():
    # 4 tasks, 3 seats, K = 2; round-0 votes per (task, seat); seat 2 votes twice on task 3,
    # once for each candidate (no vote of that seat there); gold 0, 1, 0, unlabeled
    e0 = np.zeros((4, 3, 2), int)
    votes = [[0, 1, 0], [1, 1, 0], [0, 0, 1], [1, None, "both"]]
    for t, row in enumerate(votes):
        for i, v in enumerate(row):
            if v == "both":
                e0[t, i] = 1
            elif v is not None:
                e0[t, i, v] = 1
    N = e0.sum(-1)
    return bda.Counts.from_arrays(N=N, e=e0, c=e0, gold=[0, 1, 0, -1], e0=e0,
                                  agents=("A1", "A2", "A3"))


def test_agreement_by_hand():
    counts = _counts()
    rep = follows_one_seat(np.array([0, 1, 0, 1]), counts)       # seat A1's votes exactly
    # A2 votes 1, 1, 0 on tasks 0-2 (agrees on 1, 2); A3 votes 0, 0, 1 (agrees on 0)
    np.testing.assert_allclose(rep.agreement, [1.0, 2 / 3, 1 / 3])
    assert rep.n.tolist() == [4, 3, 3]
    np.testing.assert_allclose(rep.seat_accuracy, [1.0, 2 / 3, 1 / 3])   # labeled: tasks 0-2
    np.testing.assert_allclose(rep.accuracy, [1.0, 1.0, 1.0])
    assert rep.followed == ("A1",) and rep.max_agreement == 1.0
    assert follows_one_seat(np.array([0, 1, 0, 1]), counts, threshold=0.6).followed == ("A1", "A2")
    proba = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]])
    assert follows_one_seat(proba, counts).followed == ("A1",)
    for bad in (np.array([0, 1, 0]), np.array([0, 1, 0, 2]), np.array([0.0, 1, 0, 1])):
        with pytest.raises(bda.DataError, match="decisions"):
            follows_one_seat(bad, counts)
    with pytest.raises(bda.DataError, match="threshold"):
        follows_one_seat(np.array([0, 1, 0, 1]), counts, threshold=0)


def test_mode_capture_of_unsupervised_em():
    # a two-seat coalition on a binary council: EM lands on the coalition's mode and copies both
    # its seats (so does plurality, which the pair always carries); the follower's accuracy is
    # its seats'. On the clean council neither follows a seat.
    counts = bda.tally(simulate_council(0, 150, [0.74, 0.68, 0.68], adversaries=[0, 1]))
    ds = follows_one_seat(CouncilDawidSkene().fit(counts).predict(counts), counts)
    assert set(ds.followed) == {"A1", "A2"} and ds.max_agreement == 1.0
    np.testing.assert_allclose(ds.accuracy[:2], ds.seat_accuracy[:2])
    votes = np.asarray(counts.e0).argmax(-1)                  # [T, I], one vote each
    assert ds.seat_accuracy[2] == pytest.approx(np.mean(votes[:, 2] == np.asarray(counts.gold)))
    maj = follows_one_seat(bda.majority(jax.random.key(0), counts).index, counts)
    assert set(maj.followed) == {"A1", "A2"}
    clean = bda.tally(simulate_council(0, 150, [0.74, 0.68, 0.68]))
    for pred in (CouncilDawidSkene().fit(clean).predict(clean),
                 bda.majority(jax.random.key(0), clean).index):
        rep = follows_one_seat(pred, clean)
        assert rep.followed == () and rep.max_agreement < 0.95
