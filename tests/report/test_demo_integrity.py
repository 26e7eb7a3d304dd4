"""One demo at a time per output folder: a second writer is refused at once and changes nothing,
and the lock dies with its holder (a ``kill -9`` leaves no stale lock). Cheap: nothing is
computed (the live-demo case is in test_demo.py's kill test)."""
import signal
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

import bda_jax.report
from bda_jax import CellCache, DataError
from bda_jax.cli import app
from bda_jax.report import CACHE_NAME, run_demo

pytest.importorskip("fcntl")

# another process in the middle of a demo: it holds the cache's documented lock file
HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()}\\n".encode())
    print("locked", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def held_folder(tmp_path):
    """A demo folder with a previous run's files, locked by a live process."""
    out = tmp_path / "R"
    out.mkdir()
    files = {CACHE_NAME: b"previous cache\n", "results.json": b'{"previous": true}\n',
             "index.html": b"<!DOCTYPE html>previous\n"}
    for name, data in files.items():
        (out / name).write_bytes(data)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out / (CACHE_NAME + ".lock"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield out, files, holder
    finally:
        if holder.poll() is None:
            holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()


def _unchanged(out, files):
    return {p.name for p in out.iterdir()} == set(files) | {CACHE_NAME + ".lock"} and \
        all((out / name).read_bytes() == data for name, data in files.items())


def test_second_demo_on_a_held_folder_is_refused(held_folder):
    out, files, holder = held_folder
    for quick, resume in ((True, True), (False, False)):       # quick or full, resume or not
        with pytest.raises(DataError) as err:
            run_demo(out, quick=quick, resume=resume, progress=False)
        message = str(err.value)
        assert err.value.field == "out" and err.value.file == str(out)
        assert "another bda demo" in message and f"process {holder.pid}" in message
        assert "\n" not in message
    assert _unchanged(out, files)


def test_cli_refuses_with_one_line_and_exit_2(held_folder, monkeypatch):
    out, files, _ = held_folder
    # the posterior table printed before the demo is not under test here: skip its compile
    monkeypatch.setattr(bda_jax.report, "posterior_table",
                        lambda *a, **k: {"rows": [], "traces": "x.jsonl", "alpha": 1, "beta": 1})
    result = CliRunner().invoke(app, ["demo", "--out", str(out), "--quick", "--no-progress"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(out) in lines[0] and "another bda demo" in lines[0]
    assert _unchanged(out, files)


def test_kill_9_leaves_no_stale_lock(held_folder):
    out, files, holder = held_folder
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    # the folder is free: the cache opens (and, being the demo's, is started afresh)
    with CellCache(out / CACHE_NAME, "fp", on_mismatch="reset") as cache:
        assert len(cache) == 0 and cache.reset.startswith("replaced")
