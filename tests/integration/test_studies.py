"""The named studies (``bda_jax.adversarial.run_study``): presets, overrides, resuming from a
cell cache; and the claims of [BDA] §6 on simulated councils (opt-in: ``pytest -m slow``; about a
minute), whose numbers are acceptance thresholds derived from the paper ([BDA] §6, Tables 11
and 16), not from this code.
"""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.adversarial import (STUDIES, STUDY_PRESETS, dose_response, run_study,
                                 study_config)
from bda_jax.aggregators import CouncilDawidSkene
from bda_jax.simulate import simulate_council

TINY = dict(quick=True, n_questions=12, arms=["majority"], p_grid=[0.0, 1.0],
            regimes=[["persistent", 2]], n_resamples=10)


def test_presets_and_overrides():
    assert set(STUDY_PRESETS) == set(STUDIES)
    for name in STUDIES:
        quick, full = study_config(name, quick=True), study_config(name)
        assert set(quick) == set(full) and quick["n_questions"] < full["n_questions"]
        json.dumps(full, allow_nan=False)                  # plain JSON: it fingerprints a cache
    cfg = study_config("sleeper", quick=True, n_questions=30, arms=("bda-per-agent",))
    assert cfg["n_questions"] == 30 and cfg["arms"] == ["bda-per-agent"]
    assert study_config("sleeper", quick=True) != cfg            # the preset is not modified
    cells = [c["name"] for c in study_config("controls")["cells"]]
    assert len(cells) == len(set(cells)) == 16
    assert study_config("Dose_Response", quick=True, n_questions=None)["n_questions"] == 150
    for kwargs, field in (({"n_questions": 5}, "n_questions"), ({"arms": ["nope"]}, "arms"),
                          ({"p_grid": [0.0]}, "p_grid")):
        with pytest.raises(bda.DataError) as err:
            study_config("sleeper", **kwargs)
        assert err.value.field == field
    with pytest.raises(bda.DataError, match="other than majority"):
        study_config("controls", arms=["majority"])
    with pytest.raises(bda.DataError, match="unknown study"):
        run_study("nope")


def test_run_study_equals_the_library_and_resumes(tmp_path):
    run = run_study("dose-response", **TINY)
    traces = simulate_council(0, 12, [0.74, 0.68, 0.68])
    dr = dose_response(traces, ["majority"], [0.0, 1.0], [("persistent", 2)], n_resamples=10)
    assert run.result["result"]["rows"] == dr.rows
    assert run.to_json()["kind"] == "bda_jax.study" and run.to_json()["study"] == "dose-response"
    cache, seen = tmp_path / "cells.jsonl", []
    first = run_study("dose-response", cache=cache, progress=lambda *a: seen.append(a), **TINY)
    assert first.result == run.result and len(cache.read_text().splitlines()) == 3
    assert seen[-1] == ("dose-response", 2, 2)
    seen.clear()
    again = run_study("dose-response", cache=cache, progress=lambda *a: seen.append(a), **TINY)
    assert again.result == run.result and [s[1] for s in seen] == [0, 2]   # nothing computed
    with pytest.raises(bda.ArtifactError):                   # another configuration
        run_study("dose-response", cache=cache, **{**TINY, "n_questions": 13})

    class Store(dict):                                       # any cell store
        def get_or_compute(self, key, compute):
            return self[key] if key in self else self.setdefault(key, compute())
    store = Store()
    assert run_study("dose-response", cache=store, **TINY).result == run.result
    assert sorted(store) == ["clean", "persistent|2|1.0"]


@pytest.fixture(scope="module")
def binary():
    return simulate_council(0, 1500, [0.74, 0.68, 0.68], seeds_per_question=3)


def row(ev, arm):
    return next(r for r in ev.table if r["arm"] == arm)


@pytest.mark.slow
def test_per_agent_headline_protocol(binary):
    ev = bda.evaluate(binary, ["bda-per-agent"], folds=5)
    assert row(ev, "bda-per-agent")["ece_ew"] <= 0.02
    assert row(ev, "bda-per-agent")["accuracy"] >= row(ev, "majority")["accuracy"]
    assert ev.bootstrap["bda-per-agent"]["accuracy"]["ci_high"] >= 0


@pytest.mark.slow
def test_per_agent_with_25_labels(binary):
    ev = bda.evaluate(binary, ["bda-per-agent"], folds=5, label_budget=25)
    assert row(ev, "bda-per-agent")["ece_ew"] <= 0.08


@pytest.mark.slow
def test_tempering_halves_onecoin_ece_at_k4():
    traces = simulate_council(1, 1500, [0.74, 0.68, 0.68], n_candidates=4, seeds_per_question=3)
    ev = bda.evaluate(traces, ["bda-per-agent", "bda-tempered"], folds=5)
    plain, tempered = row(ev, "bda-per-agent"), row(ev, "bda-tempered")
    assert tempered["ece_ew"] <= plain["ece_ew"] / 2
    assert abs(tempered["accuracy"] - plain["accuracy"]) <= 0.005


@pytest.mark.slow
def test_ds_em_mirror_under_a_coalition():
    counts = bda.tally(simulate_council(2, 1500, [0.75, 0.75, 0.75], adversaries=[0, 1]))
    gold = np.asarray(counts.gold)
    acc = {init: np.mean(CouncilDawidSkene(init=init).fit(counts).predict(counts) == gold)
           for init in ("majority", "spectral", "anti")}
    assert acc["majority"] <= 0.2 and acc["spectral"] <= 0.2 and acc["anti"] >= 0.8
