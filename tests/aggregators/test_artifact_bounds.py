"""Model files that someone edited, swapped or built to hurt: bounded reads, array headers checked
before any decompression, every fitted value validated on load, and saves that never overwrite
an ``.npz`` the model file being replaced does not own (issue #19, classes 2 and 5).

The models are hand-made states (``save_model`` takes a state dict), so no test fits anything.
An edited file gets its checksums recomputed (``_rehash``): the checksums detect damage, not
tampering, and these tests check what a tampered file meets after them.
"""
import contextlib
import hashlib
import io
import json
import os
import pickle
import signal
import sys
import zipfile

import numpy as np
import pytest

from bda_jax import ArtifactError, Counts, DataError
from bda_jax.aggregators import fit_model_file, load_model, save_model
from bda_jax.crowd import DSParams
from bda_jax.simulate import simulate_council

AGENTS = ("A1", "A2", "A3")
F32 = np.float32


def _bda_state():
    """BDA per-agent with b = 0.6, kappa = 0, s = 10: every seat's prior Beta(6, 4); the 80-row
    CV score table (> 64 elements) goes to the .npz."""
    return {"estimator": "BDAPerAgent",
            "hyperparameters": {"arm": "bda-per-agent", "grid": None, "n_folds": 5, "seed": 0,
                                "basis": "all", "class_prior": False},
            "fitted": {"agents_": AGENTS, "params_": {"b": 0.6, "kappa": 0.0, "s": 10.0,
                                                       "tau": 1.0},
                       "cv_brier_": np.linspace(0.3, 0.5, 80).astype(F32),
                       "log_prior_": None,
                       "reliability_": np.array([0.8, 0.7, 0.6], F32),
                       "alpha_": np.full(3, 6.0, F32), "beta_": np.full(3, 4.0, F32)}}


def _ds_state():
    """One-coin Dawid-Skene, skills 0.8 / 0.7 / 0.6 on K = 2 (the implied confusion rows are
    [p, 1 - p] on the diagonal side), uniform prior; 40 x 2 fitted posteriors in the .npz."""
    p = np.array([0.8, 0.7, 0.6], F32)
    conf = np.stack([np.stack([np.stack([q, 1 - q]), np.stack([1 - q, q])]) for q in p])
    log_prior = np.log(np.array([0.5, 0.5], F32))
    table = np.log(np.stack([p, 1 - p], -1))
    import jax.numpy as jnp
    params = DSParams(jnp.asarray(p), jnp.asarray(conf), jnp.asarray(log_prior),
                      jnp.asarray(table))
    return {"estimator": "CouncilDawidSkene",
            "hyperparameters": {"model": "one-coin", "init": "majority", "n_iter": 100,
                                "tol": 1e-6, "smoothing": 0.01, "votes": "round0",
                                "prior": "estimate", "seed": 0},
            "fitted": {"agents_": AGENTS, "params_": params, "skills_": p, "confusion_": conf,
                       "prior_": np.array([0.5, 0.5], F32), "log_likelihood_": -70.0,
                       "objective_": -71.0, "n_iter_": 12, "converged_": True,
                       "log_proba_": np.log(np.full((40, 2), 0.5, F32)),
                       "label_space_": "semantic"}}


def _small_states():
    """Hand-made fitted states of the other classes (inline arrays only)."""
    acc, chance = np.array([0.9, 0.4, 0.7], F32), np.array([0.5, 0.5, 0.5], F32)
    majority = {"estimator": "Majority", "hyperparameters": {"rounds": "round0", "seed": 0},
                "fitted": {}}
    theta = np.array([1.0, 0.5, 0.2, -0.1, 0.0, 0.1, 0.3, -0.3], F32)   # c: 3, d: 3, b: 2
    return {
        "best": {"estimator": "BestMember", "hyperparameters": {"seed": 0},
                 "fitted": {"agents_": AGENTS, "member_": 0, "seat_accuracy_": acc}},
        "gated": {"estimator": "GatedVote", "hyperparameters": {"seed": 0},
                  "fitted": {"agents_": AGENTS, "seat_accuracy_": acc, "chance_": chance,
                             "fallback_": False, "gate_": np.array([True, False, True])}},
        "stacking": {"estimator": "LogisticStacking",
                     "hyperparameters": {"l2_grid": (0.1, 1.0), "n_folds": 5, "seed": 0,
                                         "steps": 50, "learning_rate": None,
                                         "optimizer": "lbfgs", "intercept": "auto"},
                     "fitted": {"agents_": AGENTS, "vocab_": ("yes", "no"),
                                "cv_brier_": np.array([0.4, 0.5], F32), "l2_": 0.1,
                                "theta_": theta, "coef_": theta[:6].reshape(2, 3).T.copy(),
                                "intercept_": theta[6:].copy()}},
        "iso": {"estimator": "IsotonicRecalibrated",
                "hyperparameters": {"base": _Est(majority), "n_folds": 3, "seed": 0},
                "fitted": {"agents_": AGENTS, "base_": _Est({**majority,
                                                            "fitted": {"agents_": AGENTS}}),
                           "oof_log_proba_": np.log(np.full((4, 2), 0.5, F32)),
                           "iso_x_": np.array([0.5, 0.75, 1.0]),
                           "iso_y_": np.array([0.4, 0.6, 0.9])}},
        "temp": {"estimator": "TemperatureScaled",
                 "hyperparameters": {"base": _Est(majority), "n_folds": 3, "seed": 0},
                 "fitted": {"agents_": AGENTS, "base_": _Est({**majority,
                                                             "fitted": {"agents_": AGENTS}}),
                            "oof_log_proba_": np.log(np.full((4, 2), 0.5, F32)),
                            "temperature_": 2.0}},
    }


class _Est:
    """Marks a nested estimator state for _build."""

    def __init__(self, state):
        self.state = state


def _build(state):
    """A state with its nested estimators rebuilt (save_model wants estimator objects there)."""
    import bda_jax.aggregators as agg

    def conv(v):
        if isinstance(v, _Est):
            obj = getattr(agg, v.state["estimator"])(**{k: conv(x) for k, x in
                                                       v.state["hyperparameters"].items()})
            vars(obj).update({k: conv(x) for k, x in v.state["fitted"].items()})
            return obj
        return v
    return {"estimator": state["estimator"],
            "hyperparameters": {k: conv(v) for k, v in state["hyperparameters"].items()},
            "fitted": {k: conv(v) for k, v in state["fitted"].items()}}


def _save(path, state):
    save_model(path, _build(state), counts_fingerprint=None)
    return path


def _rehash(path, doc=None, npz_bytes=None):
    """Write ``doc`` (default: the file's) and ``npz_bytes`` with both checksums recomputed, as
    anyone editing a model file can (the recipe of docs/cli.md: SHA-256 of the canonical JSON)."""
    doc = json.loads(path.read_text()) if doc is None else doc
    if npz_bytes is not None:
        (path.parent / doc["npz"]["file"]).write_bytes(npz_bytes)
        doc["npz"]["sha256"] = hashlib.sha256(npz_bytes).hexdigest()
    body = {k: v for k, v in doc.items() if k != "sha256"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False,
                           ensure_ascii=True).encode("ascii")
    doc["sha256"] = hashlib.sha256(canonical).hexdigest()
    path.write_text(json.dumps(doc))


def _refused(path, field, match=None):
    with pytest.raises(ArtifactError) as info:
        load_model(path)
    assert info.value.field == field, info.value
    if match:
        assert match in info.value.reason, info.value
    return info.value


@contextlib.contextmanager
def _no_hang(seconds=5):
    """Fail (instead of hanging the run) if the body blocks, e.g. on opening a FIFO."""
    if not hasattr(signal, "SIGALRM"):       # pragma: no cover - not on Windows
        yield
        return

    def boom(*_):
        raise AssertionError(f"blocked for {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def bda(tmp_path):
    return _save(tmp_path / "model.json", _bda_state())


# --------------------------------------------------------------------------- the files themselves

def test_hand_made_states_round_trip(tmp_path):
    """The reference states load (so every refusal below is caused by its one edit)."""
    for name, state in {"bda": _bda_state(), "ds": _ds_state(), **_small_states()}.items():
        art = load_model(_save(tmp_path / f"{name}.json", state))
        assert art.agents == AGENTS and art.estimator.agents_ == AGENTS, name
    # hand derivation: Beta(6, 4) priors, tau 1, one seat endorsing slot 0 once: the posterior
    # odds are the prior predictive 6/10 against 4/10 times the (K - 1) = 1 spread: 0.6 / 0.4
    e0 = np.zeros((1, 3, 2), int)
    e0[0, 0, 0] = 1
    counts = Counts.from_arrays(N=e0.sum(-1), e=e0, c=e0, agents=AGENTS)
    proba = load_model(tmp_path / "bda.json").estimator.predict_proba(counts)
    np.testing.assert_allclose(proba[0], [0.6, 0.4], rtol=1e-5)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_the_npz_must_be_a_regular_file(bda, tmp_path):
    npz = tmp_path / "model.npz"
    good = npz.read_bytes()
    npz.unlink()
    os.mkfifo(npz)
    with _no_hang():
        _refused(bda, "npz.file", "FIFO")
    npz.unlink()
    npz.mkdir()
    _refused(bda, "npz.file", "folder")
    npz.rmdir()
    if os.path.exists("/dev/zero"):
        npz.symlink_to("/dev/zero")
        err = _refused(bda, "npz.file", "character device")
        assert "/dev/zero" in err.reason                     # the symlink is resolved and named
        npz.unlink()
    (tmp_path / "real.npz").write_bytes(good)
    npz.symlink_to(tmp_path / "real.npz")                   # a symlink to a regular file: fine
    assert load_model(bda).agents == AGENTS


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_the_model_file_must_be_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    with _no_hang(), pytest.raises(ArtifactError, match="FIFO"):
        load_model(tmp_path / "fifo.json")
    with pytest.raises(ArtifactError, match="folder"):
        load_model(tmp_path)


def test_oversized_files_are_refused_unread(bda, tmp_path):
    """Sparse files of 8 GiB: refused on their size (no read could finish in the test's time)."""
    huge = 8 * 2 ** 30
    with open(tmp_path / "model.npz", "r+b") as handle:
        handle.truncate(huge)
    _refused(bda, "npz.file", "over the limit")
    with open(tmp_path / "big.json", "wb") as handle:
        handle.truncate(huge)
    with pytest.raises(ArtifactError, match="over the limit"):
        load_model(tmp_path / "big.json")


def _rezip(members: dict) -> bytes:
    """A plain (no zip64) deflated zip of ``{name: bytes}``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _members(npz_path):
    with zipfile.ZipFile(npz_path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_a_zip_bomb_is_refused_before_decompression(bda, tmp_path, monkeypatch):
    data = bytearray(_rezip(_members(tmp_path / "model.npz")))
    central = data.index(b"PK\x01\x02")                 # the central directory entry
    data[central + 24:central + 28] = (0xF000_0000).to_bytes(4, "little")   # "3.75 GiB"
    _rehash(bda, npz_bytes=bytes(data))

    def no_decompression(*args, **kwargs):
        raise AssertionError("a member was opened")
    monkeypatch.setattr(zipfile.ZipFile, "open", no_decompression)
    _refused(bda, "npz", "refused before decompressing")


def test_object_arrays_are_never_unpickled(bda, tmp_path, monkeypatch):
    """A member whose .npy header says object dtype is refused on its header: no pickle runs."""
    evil = io.BytesIO()
    np.save(evil, np.array([{"x": 1}] * 80, dtype=object), allow_pickle=True)
    _rehash(bda, npz_bytes=_rezip({"a0.npy": evil.getvalue()}))

    def no_pickle(*args, **kwargs):
        raise AssertionError("pickle was called")
    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    _refused(bda, "estimator.fitted.cv_brier_", "object dtype")


def test_array_headers_must_match_the_json(bda, tmp_path):
    members = _members(tmp_path / "model.npz")
    good = members["a0.npy"]
    # a header that says float64 (the JSON says float32)
    f64 = io.BytesIO()
    np.save(f64, np.linspace(0.3, 0.5, 80))
    _rehash(bda, npz_bytes=_rezip({"a0.npy": f64.getvalue()}))
    _refused(bda, "estimator.fitted.cv_brier_", "declares float32[80]")
    # the JSON declares another shape than the header
    doc = json.loads(bda.read_text())
    doc["fitted"]["cv_brier_"]["__array__"]["shape"] = [8, 10]
    _rehash(bda, doc, npz_bytes=_rezip({"a0.npy": good}))
    _refused(bda, "estimator.fitted.cv_brier_", "declares float32[8, 10]")
    # a header that promises more data than the member holds
    short = io.BytesIO()
    np.save(short, np.zeros(80, F32))
    doc["fitted"]["cv_brier_"]["__array__"]["shape"] = [80]
    _rehash(bda, doc, npz_bytes=_rezip({"a0.npy": short.getvalue()[:-40]}))
    _refused(bda, "estimator.fitted.cv_brier_", "header says 320")
    # members the JSON does not declare, or a path in a member name
    for name in ("../a0.npy", "a1.npy", "a0.npy/"):
        _rehash(bda, npz_bytes=_rezip({"a0.npy": good, name: good}))
        _refused(bda, "npz.arrays", "does not declare")
    _rehash(bda, npz_bytes=_rezip({}))
    _refused(bda, "npz.arrays")
    _rehash(bda, npz_bytes=b"not a zip file at all")
    _refused(bda, "npz", "not a readable .npz")


@pytest.mark.parametrize("name", ["../model.npz", "sub/model.npz", "a\\b.npz", "a\x00.npz", "",
                                  "..", 7])
def test_the_npz_name_must_be_a_bare_file_name(bda, name):
    doc = json.loads(bda.read_text())
    doc["npz"]["file"] = name
    _rehash(bda, doc)
    _refused(bda, "npz.file" if isinstance(name, str) else "npz")


# --------------------------------------------------------------------------- fitted values

def _edit(path, where, value):
    doc = json.loads(path.read_text())
    node = doc
    for key in where[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[where[-1]]
    else:
        node[where[-1]] = value
    _rehash(path, doc)


_DELETE = object()


def _arr(dtype, values, shape=None):
    return {"__array__": {"dtype": dtype, "shape": [len(values)] if shape is None else shape,
                          "data": values, "jax": False}}


BDA_EDITS = {
    "negative prior strength": (("fitted", "alpha_"), _arr("float32", [6.0, -1.0, 6.0]),
                                "estimator.fitted.alpha_"),
    "reliability above 1": (("fitted", "reliability_"), _arr("float32", [0.8, 1.5, 0.6]),
                            "estimator.fitted.reliability_"),
    "NaN strength": (("fitted", "beta_"), {"__array__": {"dtype": "float32", "shape": [3],
                                                         "npz": "a1", "jax": False}},
                     "estimator.fitted.beta_"),
    "integer array": (("fitted", "alpha_"), _arr("int32", [6, 6, 6]), "estimator.fitted.alpha_"),
    "too few seats": (("fitted", "beta_"), _arr("float32", [4.0, 4.0]), "estimator.fitted.beta_"),
    "zero temperature": (("fitted", "params_", "tau"), 0.0, "estimator.fitted.params_"),
    "missing tau": (("fitted", "params_", "tau"), _DELETE, "estimator.fitted.params_"),
    "string seed": (("hyperparameters", "seed"), "abc", "estimator.hyperparameters.seed"),
    "huge seed": (("hyperparameters", "seed"), 2 ** 70, "estimator.hyperparameters.seed"),
    "one fold": (("hyperparameters", "n_folds"), 1, "estimator.hyperparameters.n_folds"),
    "duplicate agents": (("fitted", "agents_"), {"__tuple__": ["A1", "A1", "A2"]},
                         "estimator.fitted.agents_"),
    "empty agent": (("fitted", "agents_"), {"__tuple__": ["A1", "", "A2"]},
                    "estimator.fitted.agents_"),
    "agents disagree": (("agents",), ["A1", "A2", "B3"], "agents"),
    "missing fitted attribute": (("fitted", "alpha_"), _DELETE, "estimator.fitted.alpha_"),
    "ragged inline data": (("fitted", "alpha_"), _arr("float32", [[6.0], [6.0, 1.0], [6.0]],
                                                      [3]), "estimator.fitted.alpha_"),
    "int8 overflow": (("fitted", "alpha_"), _arr("int8", [300, 1, 1]), "estimator.fitted.alpha_"),
}


@pytest.mark.parametrize("case", list(BDA_EDITS))
def test_edited_fitted_values_are_refused(bda, tmp_path, case):
    where, value, field = BDA_EDITS[case]
    if case == "NaN strength":         # an .npz array of NaN under a name the JSON declares
        members = _members(tmp_path / "model.npz")
        nan = io.BytesIO()
        np.save(nan, np.array([4.0, np.nan, 4.0], F32))
        members["a1.npy"] = nan.getvalue()
        doc = json.loads(bda.read_text())
        doc["fitted"]["beta_"] = value
        doc["npz"]["arrays"] = ["a0", "a1"]
        _rehash(bda, doc, npz_bytes=_rezip(members))
    else:
        _edit(bda, where, value)
    _refused(bda, field)


def test_absurd_nesting_is_refused(bda):
    deep = 0
    for _ in range(500):
        deep = [deep]
    _edit(bda, ("hyperparameters", "grid"), deep)
    with pytest.raises(ArtifactError, match="nested more than") as info:
        load_model(bda)
    assert info.value.field.startswith("estimator.hyperparameters.grid[0][0]")


OTHER_EDITS = {
    "best": [(("fitted", "member_"), 7, "member_"),
             (("fitted", "member_"), 1, "member_"),              # not the most accurate seat
             (("fitted", "seat_accuracy_"), _arr("float32", [0.9, -0.4, 0.7]), "seat_accuracy_")],
    "gated": [(("fitted", "gate_"), _arr("bool", [True, True, True]), "gate_"),
              (("fitted", "chance_"), _arr("float32", [0.0, 0.5, 0.5]), "chance_"),
              (("fitted", "fallback_"), "no", "fallback_")],
    "stacking": [(("fitted", "theta_", "__array__", "data", 0), 9.0, "theta_"),
                 (("fitted", "l2_"), 0.5, "l2_"),
                 (("fitted", "intercept_"), None, "intercept_"),
                 (("fitted", "vocab_"), {"__tuple__": ["yes", "yes"]}, "vocab_")],
    "iso": [(("fitted", "iso_y_"), _arr("float64", [0.9, 0.6, 0.4]), "iso_y_"),
            (("fitted", "iso_x_"), _arr("float64", [0.5, 0.5, 1.0]), "iso_x_"),
            (("fitted", "base_", "__estimator__", "fitted", "agents_"),
             {"__tuple__": ["A1", "A2", "X"]}, "agents_")],
    "temp": [(("fitted", "temperature_"), 0.0, "temperature_"),
             (("fitted", "temperature_"), -2.0, "temperature_"),
             (("fitted", "temperature_"), "2.0", "temperature_")],
}


@pytest.mark.parametrize("name", list(OTHER_EDITS))
def test_edited_baseline_states_are_refused(tmp_path, name):
    for i, (where, value, attr) in enumerate(OTHER_EDITS[name]):
        path = _save(tmp_path / f"{name}{i}.json", _small_states()[name])
        _edit(path, where, value)
        _refused(path, f"estimator.fitted.{attr}")


def test_edited_dawid_skene_states_are_refused(tmp_path):
    cases = [(("fitted", "skills_"), _arr("float32", [0.8, 1.7, 0.6]), "skills_"),
             (("fitted", "params_", "__namedtuple__", "fields", "skill"),
              {"__array__": {"dtype": "float32", "shape": [3], "data": [0.8, -0.7, 0.6],
                             "jax": True}}, "params_.skill"),
             (("fitted", "params_", "__namedtuple__", "fields", "log_table"),
              {"__array__": {"dtype": "float32", "shape": [3, 2], "data": [0.5] * 6,
                             "jax": True}}, "params_.log_table"),
             (("fitted", "n_iter_"), -3, "n_iter_"),
             (("fitted", "label_space_"), "cosmic", "label_space_")]
    for i, (where, value, attr) in enumerate(cases):
        path = _save(tmp_path / f"ds{i}.json", _ds_state())
        _edit(path, where, value)
        _refused(path, f"estimator.fitted.{attr}")


# --------------------------------------------------------------------------- saving

def test_saving_never_overwrites_a_foreign_npz(tmp_path):
    state = _bda_state()
    out = tmp_path / "model.json"
    foreign = tmp_path / "model.npz"
    foreign.write_bytes(b"the user's own file")
    with pytest.raises(DataError) as info:                  # belongs to no model file
        _save(out, state)
    assert "\n" not in str(info.value) and "model.npz" in str(info.value)
    assert info.value.file == str(foreign) and not out.exists()
    assert foreign.read_bytes() == b"the user's own file"
    foreign.unlink()
    _save(tmp_path / "model", state)                        # its array file is model.npz too
    theirs = foreign.read_bytes()
    with pytest.raises(DataError, match="does not belong"):
        _save(out, state)
    assert foreign.read_bytes() == theirs and not out.exists()
    out.write_text('{"my": "notes"}')                       # a JSON that is not a model file
    with pytest.raises(DataError, match="not a bda_jax model file"):
        _save(out, state)
    assert out.read_text() == '{"my": "notes"}' and foreign.read_bytes() == theirs
    with pytest.raises(DataError, match="does not belong"):  # checked before any fit
        fit_model_file(simulate_council(0, 4, [0.7, 0.7, 0.7]), "majority", out)
    assert out.read_text() == '{"my": "notes"}'
    # the owner may replace its own array file
    (tmp_path / "model").unlink()
    foreign.unlink()
    _save(out, state)
    state["fitted"]["cv_brier_"] = np.linspace(0.2, 0.4, 80).astype(F32)
    _save(out, state)
    np.testing.assert_array_equal(load_model(out).estimator.cv_brier_,
                                  state["fitted"]["cv_brier_"])


def test_a_failed_npz_write_leaves_the_old_files(tmp_path):
    out = _save(tmp_path / "model.json", _bda_state())
    before = out.read_bytes()
    npz = tmp_path / "model.npz"
    npz.unlink()
    npz.mkdir()                                             # the rename onto it must fail
    (npz / "keep").write_text("x")
    with pytest.raises(OSError):
        _save(out, _bda_state())
    assert out.read_bytes() == before                       # the JSON was never written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json", "model.npz"]
    with pytest.raises(DataError, match="folder"):          # a folder as the model path
        _save(tmp_path / "model.npz", _bda_state())
    assert not (tmp_path / "model.npz.npz").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_saved_files_get_the_usual_permissions(tmp_path):
    out = _save(tmp_path / "model.json", _bda_state())
    mask = os.umask(0)
    os.umask(mask)
    for path in (out, tmp_path / "model.npz"):
        assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask
