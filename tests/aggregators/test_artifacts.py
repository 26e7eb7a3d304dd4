"""Model artifacts: exact round trips, and refusal of truncated, tampered and
newer-schema files with an ArtifactError naming the field."""
import dataclasses
import json

import numpy as np
import pytest

from bda_jax import ArtifactError, DataError, make_arm, tally
from bda_jax.aggregators import (MODEL_INLINE_LIMIT, MODEL_SCHEMA_VERSION, BDAConfusion,
                                 CouncilDawidSkene, IsotonicRecalibrated, Majority, check_agents,
                                 fingerprint_counts, load_model, model_state, save_model)
from bda_jax.simulate import simulate_council


def test_a_model_without_arrays_replacing_one_with_them_removes_its_npz(counts, tmp_path):
    """Rewriting a path with a model that needs no .npz removes the replaced model's .npz (the
    new JSON no longer names it), so a later save there with arrays is not refused; an .npz
    the replaced file does not own (a user's) is left alone."""
    path, npz = tmp_path / "m.json", tmp_path / "m.npz"
    big = make_arm("bda-per-agent").fit(counts)
    save_model(path, big, counts_fingerprint=None)
    assert npz.exists()
    save_model(path, make_arm("majority").fit(counts), counts_fingerprint=None)
    assert not npz.exists() and json.loads(path.read_text())["npz"] is None
    save_model(path, big, counts_fingerprint=None)                 # not refused
    assert npz.exists()
    other, mine = tmp_path / "o.json", tmp_path / "o.npz"
    mine.write_bytes(b"the user's own file")
    save_model(other, make_arm("majority").fit(counts), counts_fingerprint=None)
    assert mine.read_bytes() == b"the user's own file"


@pytest.fixture(scope="module")
def counts():
    # the council of tests/cli/test_cli.py: the compiled fits are shared within one pytest run
    return tally(simulate_council(0, 40, [0.74, 0.68, 0.68]))


@pytest.fixture(scope="module")
def other():
    """Different tasks, same agents: the rebuilt model must match off the training data too."""
    return tally(simulate_council(4, 25, [0.7, 0.6, 0.6]), agents=("A1", "A2", "A3"))


# arms covering every encoding: one-coin BDA (grid scores in the .npz), an _arm_class subclass
# (BDAConfusion), a NamedTuple of jax arrays with -inf in the .npz (DS-EM), a nested estimator
# (iso:), tuples and None hyperparameters (stacking), numpy bools / ints (gated vote, best member)
MODELS = {
    "bda-per-agent": lambda: make_arm("bda-per-agent", 1),
    "BDAConfusion": lambda: BDAConfusion(seed=2),
    "ds-em": lambda: CouncilDawidSkene(model="confusion"),
    "iso:majority": lambda: IsotonicRecalibrated(Majority(), n_folds=3),
    "stacking": lambda: make_arm("stacking"),
    "gated-vote": lambda: make_arm("gated-vote"),
    "best-member": lambda: make_arm("best-member"),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_round_trip_is_exact(name, counts, other, tmp_path):
    model = MODELS[name]().fit(counts)
    path = tmp_path / "model.json"
    save_model(path, model, counts_fingerprint=counts, meta={"arm": name})
    art = load_model(path)
    est = art.estimator
    assert type(est) is type(model)
    assert art.agents == counts.agents and art.meta == {"arm": name}
    assert art.counts_fingerprint == fingerprint_counts(counts)
    assert art.schema_version == MODEL_SCHEMA_VERSION
    for data in (counts, other):
        np.testing.assert_array_equal(est.predict_proba(data), model.predict_proba(data))
        np.testing.assert_array_equal(est.predict(data), model.predict(data))
    # hyperparameters come back with their types (tuples stay tuples, numpy scalars numpy)
    for key, value in model_state(model)["hyperparameters"].items():
        if not hasattr(value, "fit"):
            assert type(getattr(est, key)) is type(value), key
    with open(path) as handle:
        assert "pickle" not in handle.read()


def test_large_arrays_go_to_the_npz(counts, tmp_path):
    model = make_arm("bda-per-agent").fit(counts)       # cv_brier_ has 80 > MODEL_INLINE_LIMIT rows
    assert model.cv_brier_.size > MODEL_INLINE_LIMIT
    path = tmp_path / "m.json"
    save_model(path, model, counts_fingerprint=None)
    doc = json.loads(path.read_text())
    assert doc["npz"]["file"] == "m.npz" and (tmp_path / "m.npz").exists()
    assert doc["fitted"]["cv_brier_"]["__array__"]["npz"] in doc["npz"]["arrays"]
    assert doc["fitted"]["alpha_"]["__array__"]["data"]          # small: inline
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z[doc["fitted"]["cv_brier_"]["__array__"]["npz"]],
                                      model.cv_brier_)


@pytest.fixture(scope="module")
def saved(counts, tmp_path_factory):
    """A DS-EM model (it needs the .npz) saved once; tests copy the two files."""
    d = tmp_path_factory.mktemp("saved")
    model = CouncilDawidSkene().fit(counts)
    save_model(d / "model.json", model, counts_fingerprint=counts)
    return d


def _copy(saved, tmp_path):
    for name in ("model.json", "model.npz"):
        (tmp_path / name).write_bytes((saved / name).read_bytes())
    return tmp_path / "model.json"


def _refused(path, field):
    with pytest.raises(ArtifactError) as info:
        load_model(path)
    assert info.value.field == field, info.value
    assert info.value.file == str(path)
    return info.value


def test_truncated_file_is_refused(saved, tmp_path):
    path = _copy(saved, tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    err = _refused(path, None)
    assert "truncated" in err.reason and err.line is not None


def test_empty_and_non_json_files_are_refused(tmp_path):
    path = tmp_path / "model.json"
    path.write_bytes(b"")
    assert "truncated" in _refused(path, None).reason
    path.write_bytes(b"\xff\xfe garbage")
    _refused(path, None)
    path.write_text("[1, 2]")
    _refused(path, None)
    path.write_text('{"kind": "something else"}')
    _refused(path, "kind")
    with pytest.raises(ArtifactError, match="cannot open"):
        load_model(tmp_path / "missing.json")


def test_tampered_content_is_refused(saved, tmp_path):
    path = _copy(saved, tmp_path)
    doc = json.loads(path.read_text())
    doc["hyperparameters"]["n_iter"] = 7                   # a plausible, valid edit
    path.write_text(json.dumps(doc))
    _refused(path, "sha256")
    doc = json.loads((saved / "model.json").read_text())
    doc["agents"] = ["x", "y", "z"]
    path.write_text(json.dumps(doc))
    _refused(path, "sha256")


def test_tampered_or_missing_npz_is_refused(saved, tmp_path):
    path = _copy(saved, tmp_path)
    npz = tmp_path / "model.npz"
    data = bytearray(npz.read_bytes())
    data[len(data) // 2] ^= 0xFF
    npz.write_bytes(bytes(data))
    _refused(path, "npz.sha256")
    npz.unlink()
    _refused(path, "npz.file")


def test_newer_schema_is_refused_naming_the_field(saved, tmp_path):
    path = _copy(saved, tmp_path)
    doc = json.loads(path.read_text())
    doc["schema_version"] = MODEL_SCHEMA_VERSION + 1
    doc["something_new"] = {"a": 1}                         # a newer writer's extra field
    path.write_text(json.dumps(doc))
    err = _refused(path, "schema_version")
    assert "newer" in err.reason


def test_rehashed_but_invalid_content_is_refused(saved, tmp_path):
    """Someone editing the file and recomputing the hash still gets typed errors, no crash."""
    import hashlib

    def write(doc):     # the file format's checksum, written out here (docs/cli.md, model files)
        doc = {k: v for k, v in doc.items() if k != "sha256"}
        canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False,
                               ensure_ascii=True).encode("ascii")
        doc["sha256"] = hashlib.sha256(canonical).hexdigest()
        path.write_text(json.dumps(doc))

    path = _copy(saved, tmp_path)
    base = json.loads(path.read_text())
    write({**base, "estimator": "os.system"})
    _refused(path, "estimator.estimator")
    write({**base, "hyperparameters": {**base["hyperparameters"], "votes": "sideways"}})
    _refused(path, "estimator.hyperparameters")
    write({**base, "hyperparameters": {**base["hyperparameters"], "evil": 1}})
    _refused(path, "estimator.hyperparameters")
    write({**base, "npz": {**base["npz"], "file": "../model.npz"}})
    _refused(path, "npz.file")


def test_unsavable_values_raise_data_error(counts, tmp_path):
    model = Majority().fit(counts)
    model.extra_ = object()
    with pytest.raises(DataError) as info:
        save_model(tmp_path / "m.json", model, counts_fingerprint=None)
    assert info.value.field == "fitted.extra_"
    with pytest.raises(DataError):
        save_model(tmp_path / "m.json", Majority(), counts_fingerprint=None, meta={"x": object()})
    assert not (tmp_path / "m.json").exists()          # nothing half-written


def test_check_agents(counts, tmp_path):
    save_model(tmp_path / "m.json", Majority().fit(counts), counts_fingerprint=counts)
    art = load_model(tmp_path / "m.json")
    check_agents(art, ["A1", "A2", "A3", "A1"])
    with pytest.raises(DataError, match="not in the model"):
        check_agents(art, ["A1", "B9"], file="t.jsonl")
    with pytest.raises(DataError, match="do not appear"):
        check_agents(art, ["A1", "A2"])
    check_agents(art, ["A1", "A2"], allow_missing=True)


def test_fingerprint_tracks_the_data(counts, other):
    assert fingerprint_counts(counts) == fingerprint_counts(counts.take(np.arange(40)))
    assert fingerprint_counts(counts) != fingerprint_counts(other)
    assert fingerprint_counts(counts) != fingerprint_counts(counts.take(np.arange(39)))


def test_fit_model_file_and_predict_tasks(tmp_path):
    """The library side of `bda fit` / `bda predict`: the saved model predicts what the fitted
    one does, rows carry gold and correctness, and a supervised arm refuses unlabeled traces."""
    from bda_jax.aggregators import fit_model_file, predict_tasks

    traces = simulate_council(0, 40, [0.74, 0.68, 0.68])
    path = tmp_path / "m.json"
    summary = fit_model_file(traces, "majority", path, seed=3, source="council.jsonl")
    assert summary["n_tasks"] == 40 and summary["n_labeled"] == 40
    art = load_model(path)
    assert art.meta["traces"] == "council.jsonl" and art.meta["seed"] == 3
    rows, result = predict_tasks(art, traces)
    counts = tally(traces)
    expected = Majority(seed=3).fit(counts).predict(counts)
    assert [r["index"] for r in rows] == expected.tolist()
    n_ok = sum(r["correct"] for r in rows)
    assert result["training_data"] and result["accuracy"] == n_ok / 40
    assert all(r["gold"] == r["candidates"][g] for r, g in zip(rows, counts.gold.tolist()))
    unlabeled = [dataclasses.replace(t, gold=None) for t in traces]
    with pytest.raises(DataError) as err:
        fit_model_file(unlabeled, "bda-per-agent", tmp_path / "s.json", source="u.jsonl")
    assert err.value.field == "gold" and err.value.file == "u.jsonl"
    assert not (tmp_path / "s.json").exists()
