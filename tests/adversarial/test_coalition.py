import pytest

import bda_jax as bda
from bda_jax.adversarial import coalition_report
from bda_jax.simulate import simulate_council


def test_hand_made_coalition():
    moves = (bda.Move("1", "A1", 0, "propose", "False"), bda.Move("2", "A2", 0, "propose", "True"),
             bda.Move("3", "A3", 0, "propose", "True"), bda.Move("4", "A2", 1, "concede", target="1"))
    t = bda.Trace("q", moves, ("True", "False"), "True", extra={"sim": {"coalition": "False",
                                                                         "active": ["A1"]}})
    rep = coalition_report([t])
    assert rep["attacked_tasks"] == 1 and rep["compliance"] == 1.0
    assert rep["genuine_flip_rate"] == 0.5                 # A2 flipped, A3 held
    assert rep["effective_corrupted_fraction"] == pytest.approx(2 / 3)
    assert rep["nominal_fraction"] == pytest.approx(1 / 3)
    with pytest.raises(bda.DataError):
        coalition_report([bda.Trace("x", moves, ("True", "False"))])


def test_contagion_raises_the_effective_fraction():
    quiet = coalition_report(simulate_council(0, 200, [0.75, 0.7, 0.7], adversaries=[0, 1]),
                             adversaries=["A1", "A2"])
    loud = coalition_report(simulate_council(0, 200, [0.75, 0.7, 0.7], adversaries=[0, 1],
                                             contagion=0.4), adversaries=["A1", "A2"])
    assert quiet["compliance"] == 1.0 and quiet["nominal_fraction"] == pytest.approx(2 / 3)
    assert loud["genuine_flip_rate"] > quiet["genuine_flip_rate"]
    assert loud["effective_corrupted_fraction"] > quiet["effective_corrupted_fraction"] >= 2 / 3 - 0.05
    partial = coalition_report(simulate_council(1, 400, [0.75, 0.7, 0.7], adversaries={0: 0.5}),
                               adversaries=["A1"])
    assert 0.4 < partial["compliance"] < 0.6
