"""The clean-data studies ([BDA] Appendix E: Tables 6, 8, 11, Figures 3 and 6, the transfer
paragraph of E.2) on small fixed-shape councils: each study's table against an independent
computation (the harness called directly, ``decision_flips``, a fitted estimator, plain NumPy
or ``statistics``), its JSON round trip, determinism, resuming from a cell cache, the figure,
the presets through ``run_study`` and ``bda study``.
"""
import json
import statistics

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

import bda_jax as bda
from bda_jax.adversarial import (FIGURE_STUDIES, STUDIES, FixBreakByK, LabelEfficiency,
                                 RoundWindows, SeedSpread, StudyResult, TransferStudy,
                                 fix_break_by_k, flip_counts, label_efficiency, prefix_traces,
                                 round_windows, run_study, seed_spread, study_config,
                                 transfer_study, window_label)
from bda_jax.aggregators import BDA, decision_flips
from bda_jax.cli import app
from bda_jax.metrics import summary
from bda_jax.simulate import simulate_council

R = [0.74, 0.68, 0.68]            # the paper's binary regime
N = 60                            # tasks of every evaluation below: one padded task bucket (64),
                                  # so the whole file compiles each arm's nested CV once


class CountingStore(dict):
    """A cell store that counts the cells it had to compute."""

    def __init__(self):
        super().__init__()
        self.computed = 0

    def get_or_compute(self, key, compute):
        if key not in self:
            self.computed += 1
            self[key] = compute()
        return self[key]


def strict(result):
    return json.loads(json.dumps(result.to_json(), allow_nan=False))


@pytest.fixture(scope="module")
def binary():
    return simulate_council(0, N, R)


@pytest.fixture(scope="module")
def windows(binary):
    return round_windows(binary, ["majority", "bda-per-agent"], (0, 1, None),
                         n_resamples=200)


# ----------------------------------------------------------------------------- flip counts

def test_flip_counts_against_a_loop():
    rng = np.random.default_rng(3)
    pb, p = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    gold = rng.integers(0, 3, 200)
    cb, c = (pb == gold).astype(int), (p == gold).astype(int)
    fix = brk = changed = 0
    for j in range(200):
        changed += int(pb[j] != p[j])
        fix += int(cb[j] == 0 and c[j] == 1)
        brk += int(cb[j] == 1 and c[j] == 0)
    out = flip_counts(pb, p, cb, c, rng.integers(0, 50, 200), n_resamples=500, seed=1)
    assert (out["changed"], out["fix"], out["break"], out["net"]) == (changed, fix, brk,
                                                                      fix - brk)
    assert out["fix_per_break"] == pytest.approx(fix / brk)
    assert out["ci_low"] <= out["fix_per_break"] <= out["ci_high"] and out["n_valid"] == 500
    clusters = np.arange(200) % 50
    assert flip_counts(pb, p, cb, c, clusters, n_resamples=300, seed=4) == \
        flip_counts(pb, p, cb, c, clusters, n_resamples=300, seed=4)        # seeded
    assert "ci_low" not in flip_counts(pb, p, cb, c)
    none = flip_counts([0, 1], [0, 1], [1, 0], [1, 1])
    assert none["fix"] == 1 and none["break"] == 0 and none["fix_per_break"] is None
    with pytest.raises(bda.DataError):
        flip_counts([0, 1], [0], [1, 0], [1, 1])


# ----------------------------------------------------------------------------- round windows

def test_round_windows_against_the_harness_and_decision_flips(binary, windows):
    full = bda.tally(binary)
    r1 = bda.tally(binary, agents=full.agents, max_round=1)
    ev = bda.evaluate(r1, ["bda-per-agent"], folds=bda.make_folds(full, 5, 0), seed=0,
                      n_resamples=10)
    row = windows.row(window="<= round 1", protocol="refit", arm="bda-per-agent")
    harness = next(r for r in ev.table if r["arm"] == "bda-per-agent")
    assert row["accuracy"] == harness["accuracy"] and row["ece_em"] == harness["ece_em"]
    flips = decision_flips(binary, "bda-per-agent", folds=5, seed=0)      # its own code path
    full_row = windows.row(window="full", protocol="refit", arm="bda-per-agent")
    assert (full_row["fix"], full_row["break"], full_row["net"]) == (
        flips["fix"], flips["break"], flips["net"])
    assert full_row["accuracy"] == pytest.approx(flips["accuracy_full"])
    base = windows.row(window="<= round 0", protocol="refit", arm="bda-per-agent")
    assert base["accuracy"] == pytest.approx(flips["accuracy_round0"]) and base["fix"] is None
    for w in ("<= round 1", "full"):            # plurality reads round-0 votes on every window
        assert windows.row(window=w, protocol="refit", arm="majority")["changed"] == 0
    assert window_label(None) == "full" and window_label(2) == "<= round 2"


def test_round_windows_full_trace_fit_is_the_full_fit_on_truncated_counts(binary, windows):
    full = bda.tally(binary)
    r0 = bda.tally(binary, agents=full.agents, max_round=0)
    folds = bda.make_folds(full, 5, 0)
    weights = bda.aggregators.fold_weights(full, folds, None, 0)
    proba = np.zeros(np.shape(full.mask))
    for f, w in enumerate(weights):                     # the estimator, fold by fold
        test = folds == f
        proba[test] = BDA("bda-per-agent", seed=0).fit(full, w).predict_proba(r0)[test]
    expect = summary(proba, full.gold, full.gold_missing, full.mask, key=jax.random.key(0))
    row = windows.row(window="<= round 0", protocol="full-trace fit", arm="bda-per-agent")
    assert row["accuracy"] == pytest.approx(expect["accuracy"])
    assert row["ece_em"] == pytest.approx(expect["ece_em"], abs=1e-6)
    assert not windows.rows(protocol="full-trace fit", arm="majority")    # unsupervised
    assert not windows.rows(protocol="full-trace fit", window="full")     # nothing truncated


def test_round_windows_json_markdown_figure(windows, tmp_path):
    data = strict(windows)
    assert data["kind"] == "bda_jax.study_result" and data["study"] == "round_windows"
    again = RoundWindows.from_json(data)
    assert again.table == windows.table and again.params == windows.params
    assert {"window", "max_round", "protocol", "arm", "accuracy", "ece_em", "changed", "fix",
            "break", "net", "fix_per_break", "ci_low", "ci_high"} <= set(windows.table[0])
    assert "decisions changed" in windows.to_markdown()
    png = windows.plot_png(tmp_path / "w.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(bda.ArtifactError):
        SeedSpread.from_json(data)                      # another study
    with pytest.raises(bda.ArtifactError):
        RoundWindows.from_json({**data, "schema_version": 2})
    with pytest.raises(bda.DataError) as err:
        round_windows(simulate_council(0, 12, R), windows=(0, 0))
    assert err.value.field == "windows"
    with pytest.raises(bda.DataError):
        StudyResult([], {}).plot_png(tmp_path / "x.png")


def test_round_windows_resume_and_determinism(binary, tmp_path):
    kwargs = dict(arms=["bda-per-agent"], windows=(0, None), full_trace_fit=False,
                  n_resamples=50)
    first = round_windows(binary, cache=tmp_path / "rw.jsonl", **kwargs)
    lines = (tmp_path / "rw.jsonl").read_text().splitlines()
    store = CountingStore()
    second = round_windows(binary, cache=store, **kwargs)
    assert second.table == first.table and store.computed == 2
    seen = []
    third = round_windows(binary, cache=tmp_path / "rw.jsonl", progress=lambda *a: seen.append(a),
                          **kwargs)
    assert third.table == first.table
    assert (tmp_path / "rw.jsonl").read_text().splitlines() == lines      # nothing recomputed
    assert seen[-1] == ("round windows", 2, 2)
    with pytest.raises(bda.ArtifactError):                          # other settings
        round_windows(binary, cache=tmp_path / "rw.jsonl", **{**kwargs, "n_resamples": 51})


# ----------------------------------------------------------------------------- fix/break by K

def test_fix_break_by_k_rows_are_the_round_windows(binary):
    other = simulate_council(1, N, R)            # a second K = 2 council: the same shapes
    store = CountingStore()
    fb = fix_break_by_k({"K=2": binary, "K=2 b": other}, ["bda-per-agent"], n_resamples=100,
                        cache=store)
    assert [r["council"] for r in fb.table] == ["K=2", "K=2 b"]
    assert (fb.table[1]["k_min"], fb.table[1]["k_max"]) == (2, 2)
    flips = decision_flips(other, "bda-per-agent", folds=5, seed=0)
    assert (fb.table[1]["fix"], fb.table[1]["break"]) == (flips["fix"], flips["break"])
    assert sorted(store) == ["K=2 b/refit|<= round 0", "K=2 b/refit|full", "K=2/refit|<= round 0",
                             "K=2/refit|full"]
    again = fix_break_by_k({"K=2": binary, "K=2 b": other}, ["bda-per-agent"], n_resamples=100,
                           cache=store)
    assert again.table == fb.table and store.computed == 4
    assert FixBreakByK.from_json(strict(fb)).plot == fb.plot
    assert "fix:break" in fb.to_markdown()


# ----------------------------------------------------------------------------- label efficiency

@pytest.fixture(scope="module")
def efficiency(binary):
    return label_efficiency({"binary": binary}, ["bda-per-agent"], [10, None], seeds=[0, 1],
                            n_resamples=10)


def test_label_efficiency_cells_are_the_harness(binary, efficiency):
    ev = bda.evaluate(binary, ["bda-per-agent"], folds=5, label_budget=10, seed=1,
                      n_resamples=10)
    harness = next(r for r in ev.table if r["arm"] == "bda-per-agent")
    row = efficiency.row(council="binary", budget=10, seed=1, arm="bda-per-agent")
    assert row["accuracy"] == harness["accuracy"] and row["ece_ew"] == harness["ece_ew"]
    assert row["n_labels"] == 10.0
    T = len(binary)
    every = efficiency.row(council="binary", budget="all", seed=0, arm="bda-per-agent")
    assert every["n_labels"] == pytest.approx(T * 4 / 5)          # every task of 4 folds of 5
    ref = efficiency.rows(council="binary", arm="majority")
    assert len(ref) == 4 and not ref[0]["supervised"]
    mean = efficiency.row("mean", council="binary", budget=10, arm="bda-per-agent")
    vals = [r["accuracy"] for r in efficiency.rows(council="binary", budget=10,
                                                   arm="bda-per-agent")]
    assert mean["accuracy"] == pytest.approx(statistics.mean(vals))
    assert mean["accuracy_sd"] == pytest.approx(statistics.stdev(vals))
    assert efficiency.value("binary", None, "bda-per-agent") == efficiency.row(
        "mean", council="binary", budget="all", arm="bda-per-agent")["accuracy"]


def test_label_efficiency_json_markdown_figure_and_errors(binary, efficiency, tmp_path):
    again = LabelEfficiency.from_json(strict(efficiency))
    assert again.tables == efficiency.tables
    md = efficiency.to_markdown()
    assert "### binary" in md and "bda-per-agent acc" in md and "majority ECE_ew" in md
    assert open(efficiency.plot_png(tmp_path / "le.png"), "rb").read(4) == b"\x89PNG"
    for kwargs, field in (({"arms": ["ds-em"]}, "arms"), ({"arms": ["majority"]}, "arms"),
                          ({"budgets": [1]}, "budgets"), ({"budgets": [10, 10]}, "budgets"),
                          ({"seeds": []}, "seeds")):
        with pytest.raises(bda.DataError) as err:
            label_efficiency({"b": binary}, **{"arms": ["bda-per-agent"], **kwargs})
        assert err.value.field == field


def test_label_efficiency_is_deterministic_and_resumes(binary, tmp_path):
    kwargs = dict(arms=["bda-per-agent"], budgets=[10], seeds=[0], n_resamples=10)
    a = label_efficiency({"b": binary}, cache=tmp_path / "le.jsonl", **kwargs)
    b = label_efficiency({"b": binary}, cache=tmp_path / "le.jsonl", **kwargs)
    c = label_efficiency({"b": binary}, **kwargs)
    assert a.to_json() == b.to_json() == c.to_json()
    assert len((tmp_path / "le.jsonl").read_text().splitlines()) == 2   # header + one cell


# ----------------------------------------------------------------------------- transfer

@pytest.fixture(scope="module")
def datasets():
    n = N // 3
    return {"A": simulate_council(0, n, R), "B": simulate_council(1, n, [0.70, 0.72, 0.66]),
            "C": simulate_council(2, n, [0.78, 0.66, 0.70], difficulty_sd=1.3)}


@pytest.fixture(scope="module")
def transfer(datasets):
    return transfer_study(datasets, ["majority", "bda-per-agent"], n_resamples=200)


def test_transfer_fits_on_the_other_datasets(datasets, transfer):
    pooled = [t for name, ts in datasets.items() for t in prefix_traces(name, ts)]
    counts = bda.tally(pooled)
    held = np.asarray([t.task_id.startswith("B/") for t in pooled])
    model = BDA("bda-per-agent", seed=0).fit(counts, (~held).astype(np.float32))
    proba = np.asarray(model.predict_proba(counts))[held]
    expect = summary(proba, np.asarray(counts.gold)[held],
                     np.asarray(counts.gold_missing)[held], np.asarray(counts.mask)[held],
                     key=jax.random.key(0))
    row = transfer.row(dataset="B", protocol="transfer", arm="bda-per-agent")
    assert row["accuracy"] == pytest.approx(expect["accuracy"])
    assert row["ece_ew"] == pytest.approx(expect["ece_ew"], abs=1e-6)
    ev = bda.evaluate(prefix_traces("B", datasets["B"]), ["bda-per-agent"], folds=5, seed=0,
                      n_resamples=10)
    inner = next(r for r in ev.table if r["arm"] == "bda-per-agent")
    assert transfer.row(dataset="B", protocol="in-domain", arm="bda-per-agent")["accuracy"] \
        == inner["accuracy"]
    for d in "ABC":                             # plurality reads no label: protocol-free
        assert transfer.row(dataset=d, protocol="transfer", arm="majority")["accuracy"] == \
            transfer.row(dataset=d, protocol="in-domain", arm="majority")["accuracy"]
    v = transfer.row("vs_reference", dataset="B", arm="bda-per-agent")
    assert v["delta_accuracy"] == pytest.approx(
        row["accuracy"] - transfer.row(dataset="B", protocol="transfer",
                                       arm="majority")["accuracy"])
    assert v["ci_low"] <= v["delta_accuracy"] <= v["ci_high"]
    info = transfer.row("datasets", dataset="C")
    assert info["n_labeled"] == N // 3 and info["agents"] == ["A1", "A2", "A3"]


def test_transfer_json_markdown_figure_resume_and_errors(datasets, transfer, tmp_path):
    assert TransferStudy.from_json(strict(transfer)).table == transfer.table
    assert "### held out: A" in transfer.to_markdown() and "Δacc vs majority" in \
        transfer.to_markdown()
    assert open(transfer.plot_png(tmp_path / "t.png"), "rb").read(4) == b"\x89PNG"
    store = CountingStore()
    a = transfer_study(datasets, ["majority"], in_domain=False, n_resamples=20, cache=store)
    b = transfer_study(datasets, ["majority"], in_domain=False, n_resamples=20, cache=store)
    assert a.table == b.table and sorted(store) == ["transfer"] and store.computed == 1
    with pytest.raises(bda.DataError):
        transfer_study({"A": datasets["A"]})
    unlabeled = [bda.Trace(t.task_id, t.moves, t.candidates) for t in datasets["B"]]
    with pytest.raises(bda.DataError, match="no labeled task"):
        transfer_study({"A": datasets["A"], "B": unlabeled})


# ----------------------------------------------------------------------------- seed spread

@pytest.fixture(scope="module")
def replicates():
    traces = simulate_council(0, N // 3, R, seeds_per_question=3)
    return {f"seed {s}": traces[s::3] for s in range(3)}


def test_seed_spread_protocols(replicates, tmp_path):
    arms = ["majority", "bda-per-agent"]
    sep = seed_spread(replicates, arms, n_resamples=100)
    for name, traces in replicates.items():
        ev = bda.evaluate(traces, arms, folds=5, seed=0, n_resamples=10)
        for r in ev.table:
            assert sep.row(replicate=name, arm=r["arm"])["accuracy"] == r["accuracy"]
    vals = [sep.row(replicate=n, arm="bda-per-agent")["ece_ew"] for n in replicates]
    spread = sep.row("spread", arm="bda-per-agent")
    assert spread["ece_ew"] == pytest.approx(statistics.mean(vals))
    assert spread["ece_ew_sd"] == pytest.approx(statistics.stdev(vals))
    pop = seed_spread(replicates, arms, n_resamples=100, ddof=0)
    assert pop.row("spread", arm="bda-per-agent")["ece_ew_sd"] == pytest.approx(
        statistics.pstdev(vals))
    pooled = seed_spread(replicates, arms, n_resamples=100, protocol="pooled")
    allt = [t for ts in replicates.values() for t in ts]
    ev = bda.evaluate(allt, arms, folds=5, seed=0, n_resamples=100)
    counts = bda.tally(allt)
    sel = np.asarray([t.task_id.endswith("-s1") for t in allt])
    expect = summary(ev.proba["bda-per-agent"][sel], np.asarray(counts.gold)[sel],
                     np.asarray(counts.gold_missing)[sel], np.asarray(counts.mask)[sel],
                     key=jax.random.key(0))
    assert pooled.row(replicate="seed 1", arm="bda-per-agent")["accuracy"] == \
        pytest.approx(expect["accuracy"])
    boot = pooled.row("bootstrap", arm="bda-per-agent")
    assert boot["accuracy_delta"] == pytest.approx(ev.bootstrap["bda-per-agent"]["accuracy"]
                                                   ["delta"])
    assert pooled.tables["pooled"] == sep.tables["pooled"]
    assert SeedSpread.from_json(strict(sep)).tables == sep.tables
    assert " ± " in sep.to_markdown() and "Pooled paired cluster bootstrap" in sep.to_markdown()
    assert open(sep.plot_png(tmp_path / "s.png"), "rb").read(4) == b"\x89PNG"
    for kwargs, field in (({"protocol": "nope"}, "protocol"), ({"ddof": 2}, "ddof")):
        with pytest.raises(bda.DataError) as err:
            seed_spread(replicates, arms, **kwargs)
        assert err.value.field == field
    with pytest.raises(bda.DataError, match="distinct"):
        seed_spread({"a": replicates["seed 0"], "b": replicates["seed 0"]}, arms)


# ----------------------------------------------------------------------------- presets, CLI

TINY = {"label-efficiency": dict(n_questions=20, arms=["bda-per-agent"],
                                 councils=[{"label": "binary", "n_candidates": 2,
                                            "budgets": [10]}], n_resamples=10),
        "transfer": dict(n_questions=20, arms=["majority"], in_domain=False, n_resamples=10),
        "round-window": dict(n_questions=20, arms=["majority"], n_resamples=10),
        "seeds": dict(n_questions=20, arms=["majority"], n_resamples=10),
        "fix-break-k": dict(n_questions=20, arms=["bda-per-agent"], k_grid=[2],
                            n_resamples=10)}


def test_presets_run_resume_and_draw(tmp_path):
    assert set(FIGURE_STUDIES) <= set(STUDIES) and set(TINY) == set(FIGURE_STUDIES)
    for name, overrides in TINY.items():
        quick, full = study_config(name, quick=True), study_config(name)
        assert set(quick) == set(full) and quick["n_questions"] < full["n_questions"]
        cache = tmp_path / f"{name}.jsonl"
        run = run_study(name, quick=True, cache=cache, **overrides)
        assert run.to_json()["result"]["kind"] == "bda_jax.study_result"
        lines = cache.read_text().splitlines()
        again = run_study(name, quick=True, cache=cache, **overrides)
        assert again.result == run.result and cache.read_text().splitlines() == lines
        assert open(run.plot_png(tmp_path / f"{name}.png"), "rb").read(4) == b"\x89PNG"
    with pytest.raises(bda.DataError) as err:
        run_study("dose-response", quick=True, n_questions=12, arms=["majority"],
                  p_grid=[0.0], regimes=[["persistent", 1]], n_resamples=10).plot_png(
            tmp_path / "x.png")
    assert err.value.field == "figure"
    with pytest.raises(bda.DataError):
        study_config("seeds", seeds_per_question=1)
    with pytest.raises(bda.DataError, match="other than majority"):
        study_config("label-efficiency", arms=["majority"])
    with pytest.raises(bda.DataError, match="unknown settings"):
        run_study("label-efficiency", quick=True, n_questions=20,
                  councils=[{"label": "x", "budgets": [10], "nope": 1}])


def test_bda_study_cli_figure(tmp_path):
    runner = CliRunner()
    out, fig = tmp_path / "s.json", tmp_path / "s.png"
    res = runner.invoke(app, ["study", "seeds", "--quick", "--questions", "20", "--arms",
                              "majority", "--out", str(out), "--figure", str(fig),
                              "--no-progress"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["result"]["study"] == "seed_spread"
    assert fig.read_bytes()[:4] == b"\x89PNG"
    bad = runner.invoke(app, ["study", "controls", "--quick", "--figure", str(fig)])
    assert bad.exit_code == 2 and "--figure" in bad.output
    assert len(bad.output.strip().splitlines()) == 1
