"""Issue-3 claims on simulated councils (opt-in: ``pytest -m slow``; about a minute).

The numbers are the issue's acceptance thresholds, derived from the BDA paper ([BDA] §6,
Tables 11 and 16), not from this code.
"""
import numpy as np
import pytest

import bda_jax as bda
from bda_jax.aggregators import CouncilDawidSkene
from bda_jax.simulate import simulate_council

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def binary():
    return simulate_council(0, 1500, [0.74, 0.68, 0.68], seeds_per_question=3)


def row(ev, arm):
    return next(r for r in ev.table if r["arm"] == arm)


def test_per_agent_headline_protocol(binary):
    ev = bda.evaluate(binary, ["bda-per-agent"], folds=5)
    assert row(ev, "bda-per-agent")["ece_ew"] <= 0.02
    assert row(ev, "bda-per-agent")["accuracy"] >= row(ev, "majority")["accuracy"]
    assert ev.bootstrap["bda-per-agent"]["accuracy"]["ci_high"] >= 0


def test_per_agent_with_25_labels(binary):
    ev = bda.evaluate(binary, ["bda-per-agent"], folds=5, label_budget=25)
    assert row(ev, "bda-per-agent")["ece_ew"] <= 0.08


def test_tempering_halves_onecoin_ece_at_k4():
    traces = simulate_council(1, 1500, [0.74, 0.68, 0.68], n_candidates=4, seeds_per_question=3)
    ev = bda.evaluate(traces, ["bda-per-agent", "bda-tempered"], folds=5)
    plain, tempered = row(ev, "bda-per-agent"), row(ev, "bda-tempered")
    assert tempered["ece_ew"] <= plain["ece_ew"] / 2
    assert abs(tempered["accuracy"] - plain["accuracy"]) <= 0.005


def test_ds_em_mirror_under_a_coalition():
    counts = bda.tally(simulate_council(2, 1500, [0.75, 0.75, 0.75], adversaries=[0, 1]))
    gold = np.asarray(counts.gold)
    acc = {init: np.mean(CouncilDawidSkene(init=init).fit(counts).predict(counts) == gold)
           for init in ("majority", "spectral", "anti")}
    assert acc["majority"] <= 0.2 and acc["spectral"] <= 0.2 and acc["anti"] >= 0.8
