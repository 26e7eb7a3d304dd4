"""The persistent compilation cache: bda_jax.enable_compilation_cache and ``bda
--no-compile-cache`` (the task-axis buckets are tested with the fits, tests/core/test_fitting.py)."""
import logging
import os
import warnings

import jax
import numpy as np
import pytest
from jax.experimental.compilation_cache import compilation_cache
from typer.testing import CliRunner

import bda_jax as bda
from bda_jax._core import compilation  # private: where exported programs go
from bda_jax.cli import app

_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")


@pytest.fixture
def jax_cache(monkeypatch):
    """No cache folder configured and no bda_jax cache variable set; the session's JAX cache
    settings are restored afterwards."""
    saved = {name: getattr(jax.config, name) for name in _SETTINGS}
    exported = compilation.set_exported_folder(None)
    for var in ("BDA_JAX_CACHE_DIR", "BDA_JAX_COMPILATION_CACHE"):
        monkeypatch.delenv(var, raising=False)
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", None)
    yield
    for name, value in saved.items():
        jax.config.update(name, value)
    compilation.set_exported_folder(exported)
    compilation_cache.reset_cache()          # JAX reopens the session's folder when next needed


class _Hits(logging.Handler):
    """JAX's persistent-cache-hit log records (logged while ``jax.log_compiles`` is on)."""

    def __init__(self):
        super().__init__()
        self.hits = []

    def emit(self, record):
        if record.getMessage().startswith("Persistent compilation cache hit"):
            self.hits.append(record.getMessage())


def _watch_hits(fn):
    handler = _Hits()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles():
            fn()
    finally:
        logger.removeHandler(handler)
    return handler


def test_cpu_programs_are_written_and_loaded_back(jax_cache, tmp_path):
    folder = bda.enable_compilation_cache(tmp_path / "jax")
    assert folder == tmp_path / "jax"
    assert jax.config.jax_compilation_cache_dir == str(folder)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
    assert compilation.exported_folder() == folder / "exported"
    x = np.arange(7, dtype=np.float32)
    f = jax.jit(lambda x: x * 3.25 + 0.5)            # a tiny program: cached all the same
    np.testing.assert_allclose(f(x), x * 3.25 + 0.5)
    entries = [p for p in os.listdir(folder) if p.endswith("-cache")]
    assert entries, "no executable was written"
    g = jax.jit(lambda x: x * 3.25 + 0.5)            # a new function: not in jit's memory cache
    seen = _watch_hits(lambda: g(x).block_until_ready())
    assert any("jit__lambda" in h for h in seen.hits), seen.hits


def test_folder_from_env_then_xdg_then_home(jax_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("BDA_JAX_CACHE_DIR", str(tmp_path / "env"))
    assert bda.enable_compilation_cache() == tmp_path / "env"
    monkeypatch.delenv("BDA_JAX_CACHE_DIR")
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert bda.enable_compilation_cache() == tmp_path / "xdg" / "bda_jax" / "jax"
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")       # the XDG spec: absolute only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert bda.enable_compilation_cache() == tmp_path / "home" / ".cache" / "bda_jax" / "jax"
    assert (tmp_path / "home" / ".cache" / "bda_jax" / "jax").is_dir()


def test_a_folder_jax_already_has_is_kept(jax_cache, tmp_path):
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "users"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.0)
    assert bda.enable_compilation_cache() == tmp_path / "users"
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.0   # the user's own
    assert compilation.exported_folder() is None          # no files of ours in the user's folder
    assert bda.enable_compilation_cache(tmp_path / "mine") == tmp_path / "mine"   # explicit wins
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")


def test_switched_off_by_env(jax_cache, tmp_path, monkeypatch):
    for value in ("0", "off", "False"):
        monkeypatch.setenv("BDA_JAX_COMPILATION_CACHE", value)
        assert bda.enable_compilation_cache(tmp_path / "c") is None
        assert compilation.exported_folder() is None
    assert jax.config.jax_compilation_cache_dir is None and not (tmp_path / "c").exists()


def test_unusable_folder_warns_and_runs_without(jax_cache, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.warns(UserWarning, match="not usable.*running without it") as caught:
        assert bda.enable_compilation_cache(blocker / "jax") is None
    assert len(caught) == 1
    assert jax.config.jax_compilation_cache_dir is None
    assert float(jax.jit(lambda x: x + 1)(1.0)) == 2.0


def test_folder_is_kept_under_its_size_bound(jax_cache, tmp_path):
    folder = tmp_path / "jax"
    folder.mkdir()
    for age, name in enumerate(("new", "mid", "old")):
        entry = folder / f"jit_f-{name}-cache"
        entry.write_bytes(b"x" * 100)
        os.utime(entry, (1e9 - age * 1e6, 1e9 - age * 1e6))
    (folder / "jit_f-old-atime").write_bytes(b"t")
    (folder / "notes.txt").write_bytes(b"y" * 500)                  # not an entry: kept
    (folder / "exported").mkdir()
    for age, name in ((0.5, "a"), (3, "b")):                         # exported programs count too
        entry = folder / "exported" / f"{name}.jaxexport"
        entry.write_bytes(b"z" * 100)
        os.utime(entry, (1e9 - age * 1e6, 1e9 - age * 1e6))
    bda.enable_compilation_cache(folder, max_bytes=250)
    # oldest first over both kinds: b (3), old (2), mid (1) go; a (0.5) and new (0) stay
    assert sorted(os.listdir(folder)) == ["exported", "jit_f-new-cache", "notes.txt"]
    assert os.listdir(folder / "exported") == ["a.jaxexport"]


def test_cli_flag_and_unusable_folder(jax_cache, tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.setenv("BDA_JAX_CACHE_DIR", str(tmp_path / "cli"))
    result = runner.invoke(app, ["--no-compile-cache", "report", "--help"])
    assert result.exit_code == 0 and jax.config.jax_compilation_cache_dir is None
    result = runner.invoke(app, ["report", "--help"])
    assert result.exit_code == 0 and jax.config.jax_compilation_cache_dir == str(tmp_path / "cli")
    jax.config.update("jax_compilation_cache_dir", None)
    (tmp_path / "f").write_text("")
    monkeypatch.setenv("BDA_JAX_CACHE_DIR", str(tmp_path / "f" / "jax"))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        result = runner.invoke(app, ["report", "--help"])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: compilation cache"), result.stderr
    assert "Traceback" not in result.output

