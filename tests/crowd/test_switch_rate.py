"""The label-switch rate of unsupervised Dawid–Skene ([BDA] Appendix F.10, Table 16)."""
import numpy as np
import pytest

import bda_jax as bda
from bda_jax.aggregators import CouncilDawidSkene
from bda_jax.crowd import dawid_skene_em, ds_switch_rate
from bda_jax.simulate import simulate_council


@pytest.fixture(scope="module")
def coalition():
    return bda.tally(simulate_council(0, 150, [0.74, 0.68, 0.68], adversaries=[0, 1]))


def test_binary_one_coin_starts_land_on_mirror_modes(coalition):
    # K = 2: the one-coin likelihood is invariant under p_i -> 1 - p_i with the labels swapped,
    # so the majority and anti starts reach mirror modes of equal likelihood, deciding every
    # item the other way (the paper's switch rate 1.0 "throughout")
    r = ds_switch_rate(coalition.e0, coalition.mask)
    assert r.inits == ("majority", "anti") and r.n_items == 150 and r.rate == 1.0
    assert r.log_likelihood[0] == pytest.approx(r.log_likelihood[1], rel=1e-5)
    assert (r.decisions[0] == 1 - r.decisions[1]).all()
    same = ds_switch_rate(coalition.e0, coalition.mask, inits=("majority", "spectral"))
    assert same.rate == 0.0                             # both deployable starts: one mode


def test_rate_is_the_share_of_items_decided_differently():
    rng = np.random.default_rng(4)
    T, I, K = 60, 4, 3
    Kt = rng.integers(2, K + 1, T)
    Kt[0] = 1                                                   # one candidate: not an item
    votes = np.zeros((T, I, K), int)
    for t in range(T):
        for i in range(I):
            if rng.random() < 0.8:
                votes[t, i, rng.integers(0, Kt[t])] += 1
    votes[1] = 0                                                # no vote: not an item
    mask = np.arange(K)[None, :] < Kt[:, None]
    r = ds_switch_rate(votes, mask, inits=("majority", "anti"), model="confusion")
    dec = []
    for init in ("majority", "anti"):
        lp = np.asarray(dawid_skene_em(votes, mask, init, model="confusion").log_posterior)
        top = np.sort(np.where(mask, lp, -np.inf), 1)
        assert (top[2:, -1] > top[2:, -2]).all()               # no exact ties on the items
        dec.append(lp.argmax(1))
    items = [t for t in range(T) if Kt[t] >= 2 and votes[t].sum() > 0]
    assert r.n_items == len(items) == T - 2
    expected = sum(dec[0][t] != dec[1][t] for t in items) / len(items)
    assert r.rate == pytest.approx(expected)
    assert not r.disagree[:2].any() and r.items.tolist() == [t in items for t in range(T)]


def test_arguments_and_the_council_arm(coalition):
    for bad in (("majority", "majority"), ("majority",), ("majority", "oracle")):
        with pytest.raises(bda.DataError, match="inits"):
            ds_switch_rate(coalition.e0, coalition.mask, inits=bad)
    arm = CouncilDawidSkene(init="spectral", seed=3)
    a = arm.switch_rate(coalition)
    b = ds_switch_rate(coalition.e0, coalition.mask, ("spectral", "anti"), seed=3)
    assert a.rate == b.rate == 1.0 and (a.decisions == b.decisions).all()
    with pytest.raises(bda.DataError, match="init"):
        CouncilDawidSkene(init=np.full((150, 2), 0.5)).switch_rate(coalition)
