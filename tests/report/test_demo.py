"""``bda demo`` end to end (quick mode): the report, the results file, and resuming after a kill."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bda_jax import CellCache
from bda_jax.report import CACHE_NAME, load_results, run_demo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    t0 = time.perf_counter()
    results = run_demo(out, quick=True, progress=False)
    return out, results, time.perf_counter() - t0


def _cell_lines(path: Path) -> list[dict]:
    """The complete cell lines of a cache file (header and any torn tail left out)."""
    data = path.read_bytes()
    lines = data[: data.rfind(b"\n") + 1].split(b"\n")[1:-1]
    return [json.loads(line) for line in lines]


def test_quick_demo_writes_report_and_results(quick):
    out, results, seconds = quick
    page = (out / "index.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page.lower()
    assert page.count('src="data:image/png;base64,') >= 8
    assert load_results(out / "results.json") == results
    assert results["schema_version"] == 1 and results["config"]["quick"] is True
    cache = results["cache"]
    assert cache["loaded"] == 0 and cache["computed"] == cache["total"] > 10
    assert len(_cell_lines(out / CACHE_NAME)) == cache["total"]
    # the story the demo tells: BDA per-agent beats majority against the coalition and gives the
    # coalition seats negative weights
    council = results["datasets"]["council"]
    acc = {a["arm"]: a["row"]["accuracy"] for a in council["arms"]}
    assert acc["bda-per-agent"] > acc["majority"] + 0.2
    w = dict(zip(council["weights"]["agents"], council["weights"]["weight"]))
    assert council["weights"]["adversaries"] == ["A1", "A2"]
    assert w["A1"] < 0 and w["A2"] < 0 and min(w["A3"], w["A4"], w["A5"]) > 0
    assert results["datasets"]["bluebirds"]["n_tasks"] == 108
    part = results["dase"]["excerpts"][0]["replays"][0]["partition"]
    assert part["overall"]["n"] == 50
    print(f"quick demo: {seconds:.1f} s ({results['timings_s']})")


def test_rerun_loads_every_cell(quick, tmp_path):
    out, first, _ = quick
    again = run_demo(out, quick=True, progress=False)
    assert again["cache"]["computed"] == 0 and again["cache"]["loaded"] == first["cache"]["total"]
    for key in ("datasets", "dose_response", "sleeper", "dase"):
        assert again[key] == first[key]
    fresh = run_demo(tmp_path, quick=True, progress=False, resume=False)
    assert fresh["cache"]["loaded"] == 0
    assert fresh["datasets"] == first["datasets"]              # deterministic given the seed


def test_killed_demo_resumes_without_recomputing(quick, tmp_path):
    cache_path = tmp_path / CACHE_NAME
    code = "import sys; from bda_jax.report import run_demo; " \
           "run_demo(sys.argv[1], quick=True, progress=False)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if cache_path.exists() and len(_cell_lines(cache_path)) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the demo ended before it was killed: {proc.stderr.read()}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = _cell_lines(cache_path)
    assert len(done) >= 2
    with open(cache_path, "ab") as handle:          # a write cut short by the kill
        handle.write(b'{"key": "bluebirds|main|seed=0|-|maj')

    results = run_demo(tmp_path, quick=True, progress=False)
    total = quick[1]["cache"]["total"]
    assert results["cache"]["loaded"] == len(done)           # every finished cell reused
    assert results["cache"]["computed"] == total - len(done)  # and only the rest computed
    lines = _cell_lines(cache_path)
    assert len(lines) == total and len({r["key"] for r in lines}) == total
    assert cache_path.read_bytes().endswith(b"\n")            # the torn tail was dropped
    assert [r["key"] for r in lines[: len(done)]] == [r["key"] for r in done]
    # the resumed run equals an uninterrupted one
    assert results["datasets"] == quick[1]["datasets"]
    assert results["dase"] == quick[1]["dase"]
    fp = json.loads(cache_path.read_bytes().split(b"\n", 1)[0])["fingerprint"]
    assert len(CellCache(cache_path, fp)) == total


def test_cache_of_other_settings_is_replaced(quick, tmp_path):
    path = tmp_path / CACHE_NAME
    CellCache(path, "some other study").put("x", 1)
    results = run_demo(tmp_path, quick=True, progress=False)
    assert results["cache"]["loaded"] == 0 and "replaced" in results["cache"]["reset"]
    assert "fingerprint" in results["cache"]["reset"] or "other study" in results["cache"]["reset"]
