"""The arm that chooses itself (bda-auto): the confusion arm under a decoy coalition, a one-coin
arm (or a tie within noise) on a clean council, its selection rule against a plain loop, and its
model file."""
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import bda_jax as bda
from bda_jax import ArtifactError, DataError, write_traces
from bda_jax.aggregators import (AUTO_VARIANTS, BDA, BDAAuto, auto_scores, evaluate,
                                 fold_weights, load_model, model_state, save_model)
from bda_jax.cli import app
from bda_jax.simulate import simulate_council

# One shape for every fit here (4 seats, K = 4, 64 tasks: one padded bucket), so the four
# variants' searches compile once for the whole module.
SEATS = [0.74, 0.68, 0.68, 0.70]
ARMS = ["bda-auto", "bda-per-agent", "bda-confusion"]
ONE_COIN = ("bda-shared", "bda-per-agent", "bda-tempered")


@pytest.fixture(scope="module")
def coalition_traces():
    """K = 4, seats 0 and 1 a persistent coalition pushing the question's decoy (distractor)."""
    return simulate_council(0, 64, SEATS, n_candidates=4, adversaries=[0, 1])


@pytest.fixture(scope="module")
def coalition(coalition_traces):
    return bda.tally(coalition_traces)


@pytest.fixture(scope="module")
def clean():
    return bda.tally(simulate_council(0, 64, SEATS, n_candidates=4))


def rows(ev):
    return {r["arm"]: r for r in ev.table}


def test_auto_picks_confusion_under_a_decoy_coalition(coalition):
    ev = evaluate(coalition, ARMS, folds=3, seed=0, n_resamples=50)
    r = rows(ev)
    assert [s["variant"] for s in ev.selected["bda-auto"]] == ["bda-confusion"] * 3
    for s in ev.selected["bda-auto"]:
        others = [s[f"brier.{v}"] for v in AUTO_VARIANTS if v != "bda-confusion"]
        assert s["margin"] == pytest.approx(min(others) - s["brier.bda-confusion"])
        assert s["margin"] > 0 and set(s) >= {"lambda", "tau"}
    # the winner is the confusion arm itself, fold for fold
    np.testing.assert_array_equal(ev.proba["bda-auto"], ev.proba["bda-confusion"])
    assert r["bda-auto"]["accuracy"] == r["bda-confusion"]["accuracy"]
    # the one-coin's uniform-error model is wrong for a decoy-concentrated adversary
    assert r["bda-per-agent"]["accuracy"] <= r["bda-confusion"]["accuracy"] - 0.1
    assert r["bda-per-agent"]["ece_ew"] >= r["bda-confusion"]["ece_ew"] + 0.1
    json.loads(ev.dumps())                                 # margins and names are strict JSON


def test_auto_never_reads_a_held_out_label(coalition):
    folds = bda.make_folds(coalition, 3, seed=0)
    base = evaluate(coalition, ["bda-auto"], folds=folds, n_resamples=20)
    gold = np.asarray(coalition.gold).copy()
    held = folds == 0
    gold[held] = (gold[held] + 1) % 4
    moved = bda.Counts.from_arrays(N=coalition.N, e=coalition.e, c=coalition.c, gold=gold,
                                   e0=coalition.e0, conf0=coalition.conf0,
                                   cluster=coalition.cluster, vocab=coalition.vocab)
    again = evaluate(moved, ["bda-auto"], folds=folds, n_resamples=20)
    assert base.proba["bda-auto"][held].tobytes() == again.proba["bda-auto"][held].tobytes()
    assert base.selected["bda-auto"][0] == again.selected["bda-auto"][0]


def test_auto_on_a_clean_council_is_one_coin_or_within_noise(clean):
    ev = evaluate(clean, ARMS, folds=3, seed=0, n_resamples=50)
    for s in ev.selected["bda-auto"]:
        best_one_coin = min(s[f"brier.{v}"] for v in ONE_COIN)
        # a Brier difference under 0.05 on ~40 training tasks is within fold-to-fold noise
        assert s["variant"] in ONE_COIN or best_one_coin - s[f"brier.{s['variant']}"] < 0.05
    r = rows(ev)
    assert r["bda-auto"]["brier_mc"] <= min(r[a]["brier_mc"] for a in ARMS[1:]) + 0.05


def _selected_by_loop(sums, n):
    """[BDA]-free reference of the 'selected' criterion: fold j scored at the row that is best
    on the other folds (first of ties)."""
    F, G = sums.shape
    total = 0.0
    for j in range(F):
        best, best_row = None, None
        for g in range(G):
            other = sum(sums[k, g] for k in range(F) if k != j)
            if best is None or other < best:
                best, best_row = other, g
        total += sums[j, best_row]
    return total / n.sum()


def test_auto_scores_against_a_plain_loop(rng):
    n = np.array([9.0, 8.0, 8.0, 7.0])
    sums = rng.uniform(0.5, 6.0, size=(4, 11))
    sums[:, 3] = sums[:, 5]                                          # an exact tie of two rows
    assert auto_scores(sums, n) == pytest.approx(_selected_by_loop(sums, n), rel=1e-12)
    assert auto_scores(sums, n, "best-row") == pytest.approx(sums.sum(0).min() / n.sum())
    assert auto_scores(sums, n) >= auto_scores(sums, n, "best-row")  # no free optimism
    with pytest.raises(DataError, match="criterion"):
        auto_scores(sums, n, "mean")
    with pytest.raises(DataError, match="variants"):
        BDAAuto(variants=("bda-per-agent", "bda-oracle"))
    with pytest.raises(DataError, match="variants"):
        BDAAuto(variants="bda-confusion")
    with pytest.raises(DataError, match="criterion"):
        BDAAuto(criterion="lowest")


def test_auto_is_its_winner_fitted_on_the_same_folds(coalition):
    w = fold_weights(coalition, bda.make_folds(coalition, 3, seed=0), None, 0)[1]
    auto = BDAAuto(seed=0, criterion="best-row").fit(coalition, w)
    fits = {v: BDA(v, seed=0).fit(coalition, w) for v in AUTO_VARIANTS}
    # best-row scores are each variant's own best CV score. The one-coin variants are scored in
    # one search over the union of their grids (the tempered grid, which holds the per-agent and
    # shared rows): the tempered arm's exactly, the others' up to float32 rounding (the same
    # rows in a larger float32 matrix product); the confusion arm has its own search, exactly.
    own = np.array([fits[v].cv_brier_.min() for v in AUTO_VARIANTS])
    np.testing.assert_allclose(auto.variant_brier_, own, rtol=1e-6)
    exact = [AUTO_VARIANTS.index(v) for v in ("bda-tempered", "bda-confusion")]
    np.testing.assert_array_equal(auto.variant_brier_[exact], own[exact])
    assert auto.variant_ == AUTO_VARIANTS[int(np.argmin(auto.variant_brier_))]
    winner = fits[auto.variant_]
    assert auto.best_.params_ == winner.params_
    np.testing.assert_array_equal(auto.predict_proba(coalition), winner.predict_proba(coalition))
    np.testing.assert_array_equal(auto.predict(coalition), winner.predict(coalition))
    one = BDAAuto(variants=("bda-per-agent",), seed=0).fit(coalition, w)
    assert one.variant_ == "bda-per-agent" and np.isnan(one.margin_)
    assert bda.aggregators.fitted_hyperparameters(one)["margin"] is None


def test_auto_from_traces_is_each_variant_fitted_alone(coalition_traces):
    """From traces with the propose-only reliability basis: BDAAuto tallies once, scores each
    program's grids in one search and refits only the winner, and gets each variant's own
    score and the winner's own fit (the alone fits tally the same traces again)."""
    auto = BDAAuto(seed=1, basis="propose", criterion="best-row").fit(coalition_traces)
    alone = {v: BDA(v, seed=1, basis="propose").fit(coalition_traces) for v in AUTO_VARIANTS}
    np.testing.assert_allclose(auto.variant_brier_,
                               [alone[v].cv_brier_.min() for v in AUTO_VARIANTS], rtol=1e-6)
    winner = alone[auto.variant_]
    assert auto.best_.params_ == winner.params_ and auto.agents_ == winner.agents_
    np.testing.assert_array_equal(auto.predict_proba(coalition_traces),
                                  winner.predict_proba(coalition_traces))


def test_auto_model_file_round_trip_and_refusals(coalition, tmp_path):
    model = BDAAuto(seed=3).fit(coalition)
    path = tmp_path / "auto.json"
    save_model(path, model, counts_fingerprint=coalition)
    art = load_model(path)
    assert type(art.estimator) is BDAAuto and art.estimator.variant_ == model.variant_
    np.testing.assert_array_equal(art.estimator.predict_proba(coalition),
                                  model.predict_proba(coalition))
    assert art.estimator.variants == AUTO_VARIANTS and art.estimator.best_.seed == 3

    def refused(edit, field):
        state = model_state(model)
        edit(state)
        bad = tmp_path / "bad.json"
        save_model(bad, state, counts_fingerprint=None)
        with pytest.raises(ArtifactError, match=field):
            load_model(bad)

    other = next(v for v in AUTO_VARIANTS if v != model.variant_)
    refused(lambda s: s["fitted"].update(variant_=other), "variant_")
    refused(lambda s: s["fitted"].update(variant_="bda-oracle"), "variant_")
    refused(lambda s: s["fitted"].update(margin_=model.margin_ + 0.1), "margin_")
    refused(lambda s: s["fitted"].update(variant_brier_=model.variant_brier_[:2]),
            "variant_brier_")
    refused(lambda s: s["hyperparameters"].update(seed=4), "best_")


def test_cli_fit_defaults_to_auto(coalition_traces, tmp_path):
    write_traces(coalition_traces, tmp_path / "train.jsonl")
    res = CliRunner().invoke(app, ["fit", str(tmp_path / "train.jsonl"), "--out",
                                   str(tmp_path / "m.json"), "--no-progress"],
                             env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "fitted bda-auto (BDAAuto)" in res.stdout
    chose = next(ln for ln in res.stdout.splitlines() if ln.startswith("chose "))
    assert chose.startswith("chose bda-confusion: inner-CV Brier ") and " below bda-" in chose
    art = load_model(tmp_path / "m.json")
    assert art.meta["arm"] == "bda-auto" and art.estimator.variant_ == "bda-confusion"


@pytest.mark.slow
def test_the_documented_numbers():
    """docs/evaluation.md, "The arm that chooses itself": the 200-task councils, 5 folds."""
    arms = ["bda-auto", "bda-shared", "bda-per-agent", "bda-tempered", "bda-confusion"]
    attacked = bda.tally(simulate_council(0, 200, SEATS, n_candidates=4, adversaries=[0, 1]))
    ev = evaluate(attacked, arms, folds=5, seed=0, n_resamples=200, set_alpha=0.1)
    r = rows(ev)
    assert [s["variant"] for s in ev.selected["bda-auto"]] == ["bda-confusion"] * 5
    assert round(r["bda-confusion"]["accuracy"] * 200) == 171 == round(r["bda-auto"]["accuracy"]
                                                                       * 200)
    assert round(r["bda-per-agent"]["accuracy"] * 200) == 145
    assert r["bda-per-agent"]["ece_ew"] == pytest.approx(0.255, abs=1e-3)
    assert r["bda-confusion"]["ece_ew"] == pytest.approx(0.044, abs=1e-3)
    assert r["bda-confusion"]["mean_set_size"] == pytest.approx(1.14, abs=5e-3)
    clean = bda.tally(simulate_council(0, 200, SEATS, n_candidates=4))
    ev = evaluate(clean, arms, folds=5, seed=0, n_resamples=200)
    assert sorted(s["variant"] for s in ev.selected["bda-auto"]) == \
        ["bda-confusion"] * 2 + ["bda-tempered"] * 3
    assert round(rows(ev)["bda-auto"]["accuracy"] * 200) == 162
