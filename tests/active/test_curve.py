"""Label-efficiency curves and the study at a small fixed shape: budgets hit exactly, the
selection never sees a label it has not acquired, the scores are those of an independent refit,
and benchmarks/study_active.py runs end to end and resumes from its cell cache."""
import importlib.util
import json
import sys

import numpy as np
import pytest

import bda_jax
from bda_jax import tally
from bda_jax.active import STRATEGIES, keep_labels, label_curve
from bda_jax.aggregators import BDA
from bda_jax.metrics import summary
from bda_jax.simulate import simulate_council
from reference import REPO


@pytest.fixture(scope="module")
def split():
    counts = tally(simulate_council(0, 120, [0.74, 0.68, 0.68], adversaries={0: 0.6}))
    return counts.take(np.arange(0, 120, 2)), counts.take(np.arange(1, 120, 2))


@pytest.fixture(scope="module")
def curves(split):
    pool, holdout = split
    return {s: label_curve(pool, holdout, s, (5, 10), batch_size=4, seed=1) for s in STRATEGIES}


def test_budgets_are_hit_exactly_in_rounds(curves):
    for strategy, curve in curves.items():
        assert curve.budgets == (5, 10)
        assert len(curve.order) == 10 and len(set(curve.order.tolist())) == 10
        assert [r["labels_before"] for r in curve.rounds] == [0, 4, 5, 9]
        assert [len(r["picked"]) for r in curve.rounds] == [4, 1, 4, 1]
        if strategy in ("expected-brier", "uncertainty"):     # the CV choice from n = 5 on
            assert [r["params_source"] for r in curve.rounds] == ["default", "default",
                                                                  "given", "given"]
            assert curve.rounds[2]["params"] == curve.metrics[0]["params"]
        else:
            assert {r["params_source"] for r in curve.rounds} == {None}


def test_scores_are_those_of_a_fit_on_the_acquired_labels_alone(split, curves):
    pool, holdout = split
    for curve in curves.values():
        for j, n in enumerate(curve.budgets):
            seen = keep_labels(pool, curve.order[:n])
            fit = BDA("bda-per-agent", seed=1).fit(seen)
            want = summary(fit.predict_proba(holdout), holdout.gold, holdout.gold_missing,
                           holdout.mask, key=__import__("jax").random.key(1))
            got = curve.metrics[j]
            assert got["accuracy"] == pytest.approx(want["accuracy"])
            assert got["brier_mc"] == pytest.approx(want["brier_mc"], rel=1e-6)
            assert got["accuracy"] == pytest.approx(curve.per_task[j]["correct"].mean())
            assert got["brier_mc"] == pytest.approx(curve.per_task[j]["brier"].mean(), rel=1e-5)


def test_labels_never_acquired_never_matter(split, curves):
    """Flip the gold of every pool task a strategy did not acquire: same picks, same scores."""
    pool, holdout = split
    for strategy, curve in curves.items():
        gold = np.array(pool.gold)
        untouched = np.setdiff1d(np.arange(gold.size), curve.order)
        gold[untouched] = 1 - gold[untouched]
        flipped = bda_jax.Counts(pool.N, pool.e, pool.c, pool.mask, pool.K, gold,
                                 pool.gold_missing, pool.cluster, pool.e0, pool.conf0, pool.info)
        again = label_curve(flipped, holdout, strategy, (5, 10), batch_size=4, seed=1)
        assert again.order.tolist() == curve.order.tolist(), strategy
        assert json.dumps(again.to_json()) == json.dumps(curve.to_json())


def test_bad_curve_options_are_named(split):
    pool, holdout = split
    for kwargs, field in (({"budgets": (0,)}, "budgets"), ({"budgets": (61,)}, "budgets"),
                          ({"batch_size": 0}, "batch_size"),
                          ({"params_schedule": "never"}, "params_schedule"),
                          ({"params": "cv"}, "params")):
        args = {"budgets": (5,), **kwargs}
        with pytest.raises(bda_jax.DataError) as err:
            label_curve(pool, holdout, "random", args.pop("budgets"), **args)
        assert err.value.field == field


def _study():
    name = "_bda_study_active"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" /
                                                      "study_active.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_study_runs_small_and_resumes_from_its_cache(tmp_path, monkeypatch):
    study = _study()
    config = {**study.CONFIG, "budgets": [5, 10], "seeds": [0, 1], "n_resamples": 200,
              "ece_resamples": 100, "n_candidates": 8, "n_target": 20, "max_tasks": 60,
              "datasets": [{"name": "sim-coalition", "source": "simulated", "n_questions": 60,
                            "reliabilities": [0.74, 0.68, 0.68], "adversaries": {"0": 0.6},
                            "arms": ["bda-per-agent"]}]}
    out = {k: tmp_path / f"{k}.out" for k in ("results", "page")}
    cache = tmp_path / "study.cache.jsonl"
    res = study.run(config, cache=cache, results=out["results"], page=out["page"], fig=None,
                    progress=lambda _: None)
    assert res["schema_version"] == 1 and [d["name"] for d in res["datasets"]] == \
        ["sim-coalition"]
    block = res["datasets"][0]["arms"]["bda-per-agent"]
    assert set(block["bootstrap"]) == {"expected-brier", "uncertainty", "disagreement"}
    boot = block["bootstrap"]["expected-brier"]["5"]["accuracy"]
    assert boot["ci_low"] <= boot["delta"] <= boot["ci_high"] and boot["n_units"] == 60
    assert len(block["summary"]["random"]["accuracy"]["per_seed"]) == 2
    page = out["page"].read_text()
    assert "## Where active acquisition wins" in page
    assert "| sim-coalition | bda-per-agent | expected-brier |" in page
    assert json.loads(out["results"].read_text())["findings"] == res["findings"]

    def boom(*args):
        raise AssertionError("a cached cell was recomputed")
    monkeypatch.setattr(study, "run_cell", boom)
    again = study.run(config, cache=cache, results=out["results"], page=out["page"], fig=None,
                      progress=lambda _: None)
    assert again["datasets"] == res["datasets"]


def test_the_study_splits_a_crowd_set_into_pool_and_holdout():
    study = _study()
    pool, holdout, ids = study.dataset_counts({"name": "bluebirds", "source": "crowd"}, 3, 100)
    assert pool.N.shape[0] == holdout.N.shape[0] == 50 and len(ids) == 50
    assert not set(pool.task_ids) & set(holdout.task_ids)
    assert pool.agents == holdout.agents and set(ids) == set(holdout.task_ids)
    assert (np.asarray(pool.gold) >= 0).all()
    again = study.dataset_counts({"name": "bluebirds", "source": "crowd"}, 3, 100)
    assert again[0].task_ids == pool.task_ids
