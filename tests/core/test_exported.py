"""Compiled functions kept as JAX exports across processes (bda_jax._core.exported): what is
written, when it is read back instead of traced, what is never exported, and that the results
are those of ``jax.jit``."""
import os
import subprocess
import sys
import warnings
from functools import partial
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bda_jax as bda
from bda_jax._core import compilation, exported  # private: the module under test
from bda_jax import make_folds, select_and_predict
from bda_jax.simulate import simulate_council

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(tmp_path):
    """Exported programs go to a fresh folder for the test, and nowhere afterwards."""
    where = tmp_path / "exported"
    previous = compilation.set_exported_folder(where)
    yield where
    compilation.set_exported_folder(previous)


TRACES = []


def _scaled_sum(x, w, *, power):
    TRACES.append(power)                       # runs only while JAX traces the function
    return {"total": jnp.sum(x ** power * w, axis=-1), "max": jnp.max(x, axis=-1)}


def _fresh():
    """A new wrapper of the same function: what a new process has (nothing in memory)."""
    return partial(exported.persistent_jit, static_argnames=("power",))(_scaled_sum)


def _args():
    rng = np.random.default_rng(0)
    return rng.random((5, 7), dtype=np.float32), rng.random(7).astype(np.float32)


def _files(where):
    return sorted(p.name for p in where.glob("*" + exported.SUFFIX)) if where.exists() else []


def test_a_program_is_written_once_and_read_back_without_tracing(folder):
    x, w = _args()
    reference = jax.jit(_scaled_sum, static_argnames=("power",))(x, w, power=3)
    TRACES.clear()
    first = _fresh()(x, w, power=3)
    assert TRACES == [3] and len(_files(folder)) == 1
    assert (folder / _files(folder)[0]).read_bytes().startswith(exported.HEADER)
    second = _fresh()(x, w, power=3)                       # a new "process": read, not traced
    assert TRACES == [3]
    for got in (first, second):
        assert set(got) == {"total", "max"}
        for k in got:                                      # the same bits as jax.jit
            np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(reference[k]))


def test_each_static_value_and_shape_is_its_own_program(folder):
    x, w = _args()
    f = _fresh()
    f(x, w, power=2)
    f(x, w, power=3)
    f(x[:2], w, power=2)
    f(x.astype(np.float16), w, power=2)
    assert len(_files(folder)) == 4
    TRACES.clear()
    f(x, w, power=2)                                       # in memory: no file read, no trace
    assert TRACES == []


def test_the_key_names_the_sources_and_settings(folder, monkeypatch):
    key = exported.program_key("f", (("power", 2),), "tree", (((5, 7), "float32"),))
    assert key != exported.program_key("f", (("power", 3),), "tree", (((5, 7), "float32"),))
    assert key != exported.program_key("g", (("power", 2),), "tree", (((5, 7), "float32"),))
    assert key != exported.program_key("f", (("power", 2),), "tree", (((5, 8), "float32"),))
    monkeypatch.setattr(exported, "_source_digest", lambda: "an edited package")
    assert key != exported.program_key("f", (("power", 2),), "tree", (((5, 7), "float32"),))


@pytest.mark.parametrize("damage", [b"", b"bda_jax exported program 0\n" + b"x" * 40,
                                    None])
def test_a_damaged_file_is_exported_again_and_replaced(folder, damage):
    x, w = _args()
    _fresh()(x, w, power=2)
    (path,) = folder.glob("*" + exported.SUFFIX)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2] if damage is None else damage)   # None: truncated
    TRACES.clear()
    got = _fresh()(x, w, power=2)
    assert TRACES == [2] and path.read_bytes().startswith(exported.HEADER)
    np.testing.assert_allclose(np.asarray(got["total"]), np.sum(x ** 2 * w, axis=-1), rtol=1e-6)
    _fresh()(x, w, power=2)                                  # the replacement reads back
    assert TRACES == [2] and len(_files(folder)) == 1


def test_scalars_weak_types_and_traces_go_to_jit(folder):
    x, w = _args()
    f = _fresh()
    assert np.allclose(f(x, 0.5, power=1)["total"], x.sum(-1) * 0.5)          # a Python float
    assert np.allclose(f(x, jnp.asarray(0.5), power=1)["total"], x.sum(-1) * 0.5)   # weak type
    grad = jax.grad(lambda v: f(x, v, power=2)["total"].sum())(w)            # inside a trace
    np.testing.assert_allclose(grad, (x ** 2).sum(0), rtol=1e-6)
    jax.jit(lambda x, w: f(x, w, power=2)["total"])(x, w)
    assert _files(folder) == []


def test_an_unwritable_folder_still_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    previous = compilation.set_exported_folder(blocker / "exported")
    try:
        x, w = _args()
        got = _fresh()(x, w, power=2)
    finally:
        compilation.set_exported_folder(previous)
    np.testing.assert_allclose(got["total"], np.sum(x ** 2 * w, axis=-1), rtol=1e-6)


def test_without_a_folder_it_is_jax_jit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    previous = compilation.set_exported_folder(None)
    try:
        x, w = _args()
        got = _fresh()(x, w, power=2)
    finally:
        compilation.set_exported_folder(previous)
    reference = jax.jit(_scaled_sum, static_argnames=("power",))(x, w, power=2)
    np.testing.assert_array_equal(np.asarray(got["total"]), np.asarray(reference["total"]))
    assert list(tmp_path.iterdir()) == []                  # nothing written anywhere


def test_the_nested_cv_reads_its_program_back_with_the_same_bits(folder):
    counts = bda.tally(simulate_council(3, 60, [0.8, 0.7, 0.6, 0.55]))
    outer = make_folds(counts, 3, seed=1)
    plain = select_and_predict(counts, "bda-per-agent", outer)
    compilation.set_exported_folder(None)
    reference = select_and_predict(counts, "bda-per-agent", outer)           # jax.jit alone
    compilation.set_exported_folder(folder)
    assert _files(folder)                                                    # written by `plain`
    exported_ = select_and_predict(counts, "bda-per-agent", outer)
    for a, b, c in zip(plain, reference, exported_):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(b))


def test_two_cli_processes_share_the_exported_programs(tmp_path):
    """``bda fit`` twice with one cache folder: the first writes exported programs, the second
    reads them, and both write the model a run without any cache writes."""
    traces = tmp_path / "t.jsonl"
    bda.write_traces(simulate_council(5, 120, [0.8, 0.7, 0.6, 0.55]), traces)
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(BDA_JAX_CACHE_DIR=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
    bda_cmd = [sys.executable, "-m", "bda_jax"]
    models = []
    for run, flags in enumerate(([], [], ["--no-compile-cache"])):
        (tmp_path / f"run{run}").mkdir()
        out = tmp_path / f"run{run}" / "model.json"
        subprocess.run(bda_cmd + flags + ["fit", str(traces), "--arm", "bda-per-agent",
                                          "--out", str(out)],
                       env=env, cwd=ROOT, check=True, capture_output=True, timeout=120)
        models.append(out.read_text())
        if run == 0:
            written = _files(tmp_path / "cache" / "exported")
            assert written
    assert _files(tmp_path / "cache" / "exported") == written      # read back, none added
    assert models[0] == models[1] == models[2]


def test_what_the_export_refuses_runs_under_jit_and_errors_are_the_calls_own(folder):
    def host(x):                              # a host callback: jax.export does not serialize it
        return jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape,
                                                                                x.dtype), x)

    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(exported.persistent_jit(host)(x), x * 2)
    bad = exported.persistent_jit(lambda a, b: a @ b)
    with pytest.raises(TypeError, match="dot_general requires contracting dimensions"):
        bad(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    assert _files(folder) == []


class _Pair(NamedTuple):
    low: jax.Array
    high: jax.Array


@exported.serializable
class _KeptPair(NamedTuple):
    low: jax.Array
    high: jax.Array


def test_named_tuple_results_are_kept_once_registered(folder):
    x = np.arange(6, dtype=np.float32)
    kept = exported.persistent_jit(lambda v: _KeptPair(v.min(), v.max()))
    assert kept(x) == _KeptPair(0.0, 5.0) and len(_files(folder)) == 1
    unregistered = exported.persistent_jit(lambda v: _Pair(v.min(), v.max()))
    with pytest.warns(exported.ExportWarning, match="not kept across processes.*_Pair"):
        assert unregistered(x) == _Pair(0.0, 5.0)          # runs all the same
    assert len(_files(folder)) == 1


def test_typed_keys_pass_as_key_data_with_the_same_draws(folder):
    draw = exported.persistent_jit(lambda k, x: jax.random.uniform(k, x.shape) + x)
    x = np.zeros(5, np.float32)
    for key in (jax.random.key(3), jax.random.key(3, impl="rbg")):
        np.testing.assert_array_equal(draw(key, x), jax.random.uniform(key, (5,)))
    assert len(_files(folder)) == 2                         # one program per implementation


def test_static_arguments_without_a_stable_repr_go_to_jit(folder):
    f = partial(exported.persistent_jit, static_argnames=("fn",))(lambda x, fn: fn(x))
    np.testing.assert_array_equal(f(np.ones(3, np.float32), fn=jnp.exp), jnp.exp(np.ones(3, np.float32)))
    assert _files(folder) == []


def test_crowd_em_and_stopping_results_are_read_back(folder):
    """Functions returning NamedTuples (DSResult and its DSParams, StopResult) write their
    programs; a second call with a cleared memory reads them with the same bits."""
    from bda_jax.crowd import _dawid_skene  # private: the EM's compiled function
    from bda_jax.stopping import _rules  # private: DASE's compiled grid

    rng = np.random.default_rng(0)
    votes = np.eye(3, dtype=np.float32)[rng.integers(0, 3, (40, 4))]
    mask = np.ones((40, 3), bool)
    ids = rng.integers(0, 3, (6, 5, 5)).astype(np.int32)              # [B, R, n]
    runs, traced = [], []
    for _ in range(2):
        before = _rules._TRACES["spatial"]              # private: counts the grid's traces
        with warnings.catch_warnings():
            warnings.simplefilter("error", exported.ExportWarning)
            runs.append((bda.crowd.dawid_skene_em(votes, mask),
                         bda.stopping.spatial_rule(ids, W=2)))
        traced.append(_rules._TRACES["spatial"] - before)
        written = _files(folder)
        for fn in (_dawid_skene._em, _rules._spatial_grid):
            fn.clear_cache()                               # a fresh process's memory
    assert written and traced == [1, 0]                   # the second run read the program
    for a, b in zip(jax.tree.leaves(runs[0]), jax.tree.leaves(runs[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_arguments_are_bound_as_python_binds_them(folder):
    def f(a, b, c=2.0, *, d, e=3):
        return a * b + c * d + e
    g = exported.persistent_jit(f)
    one = np.float32(1.5)
    arrays = [np.asarray(v, np.float32) for v in (1.0, 2.0, 4.0, 5.0, 6.0)]
    a, b, c, d, e = arrays
    for args, kwargs in [((a, b), dict(d=d)), ((a,), dict(b=b, c=c, d=d, e=e)),
                         ((a, b, c), dict(e=e, d=d)), ((), dict(d=d, a=a, b=b))]:
        np.testing.assert_array_equal(g(*args, **kwargs), jax.jit(f)(*args, **kwargs))
    for args, kwargs in [((a, b, c, d), {}), ((a, b), {}), ((a, b), dict(d=d, a=a)),
                         ((a, b), dict(d=d, z=one))]:
        with pytest.raises(TypeError):
            g(*args, **kwargs)


def test_arrays_sharded_over_devices_go_to_jit(tmp_path):
    """Four CPU devices in a child process: a sharded argument keeps jax.jit's program (and
    its sharding); nothing is exported."""
    code = f"""
import numpy as np, jax
from jax.sharding import NamedSharding, PartitionSpec as P
from bda_jax._core import compilation, exported
compilation.set_exported_folder({str(tmp_path / "exported")!r})
double = exported.persistent_jit(lambda x: x * 2)
x = jax.device_put(np.arange(8, dtype=np.float32), NamedSharding(jax.make_mesh((4,), ("t",)), P("t")))
y = double(x)
assert np.array_equal(np.asarray(y), np.arange(8) * 2) and len(y.sharding.device_set) == 4
files = lambda: len(list(compilation.exported_folder().glob("*.jaxexport")))
assert files() == 0, "a sharded call was exported"
double(np.arange(8, dtype=np.float32))                 # one device: exported
print(files())
"""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "1"
