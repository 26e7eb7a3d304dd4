"""``bda demo`` end to end (quick mode): the report, the results file, and resuming after a kill."""
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bda_jax.datasets
from bda_jax import CellCache, DataError
from bda_jax.cli import app
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
    cache = results["run"]["cache"]
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
    _check_honest_statistics(results, page)
    print(f"quick demo: {seconds:.1f} s ({results['run']['timings_s']})")


def _check_honest_statistics(results, page):
    """Issue 22.5 on the real quick demo: every point inside its interval, the interval method
    and the confidence spread recorded, bin counts on the page, the degenerate council result
    explained, papers cited by name."""
    n_diagrams = 0
    for name, block in results["datasets"].items():
        for arm in block["arms"]:
            ci = arm["ci"]
            for metric in ("accuracy", "brier_mc", "ece_ew"):
                lo, hi = ci[metric]
                assert lo - 1e-9 <= arm["row"][metric] <= hi + 1e-9, (name, arm["arm"], metric)
            assert ci["method"]["ece_ew"].startswith("centred")
            assert 0.0 <= ci["ece_ew"][0] and ci["ece_ew"][1] <= 1.0
            cal = arm["calibration"]
            assert cal["spread"] == pytest.approx(cal["max"] - cal["min"], abs=2e-6)
            assert cal["constant_confidence"] is False and cal["n"] == block["n_labeled"]
            assert sum(arm["bins"]["count"]) == block["n_labeled"]
            n_diagrams += 1
    assert results["datasets"]["bluebirds"]["stated_confidences"] == 0   # crowd labels only
    assert page.count("tasks per bin (") == n_diagrams
    conf = {a["arm"]: a for a in results["datasets"]["council"]["arms"]}["bda-confusion"]
    assert conf["row"]["accuracy"] == 1.0 and conf["ci"]["accuracy"] == [1.0, 1.0]
    assert "zero-width interval" in page and "by construction" in page
    assert "[BDA] Appendix F.3" in page and "[DASE]" in page
    assert not re.search(r"seed 0\d\d|\b00\d_", re.sub(r'src="[^"]*"', "", page))


def _before_run(path: Path) -> bytes:
    """A results file's bytes before its ``run`` section, checked to be the last one."""
    data = path.read_bytes()
    assert list(json.loads(data))[-1] == "run"
    return data[: data.index(b'\n "run": ')]          # a JSON string holds no raw newline


def test_rerun_loads_every_cell(quick):
    out, first, _ = quick
    before = _before_run(out / "results.json")
    again = run_demo(out, quick=True, progress=False)
    cache = again["run"]["cache"]
    assert cache["computed"] == 0 and cache["loaded"] == first["run"]["cache"]["total"]
    assert _before_run(out / "results.json") == before  # cells from the cache: the same bytes


def test_two_runs_write_identical_results(quick, tmp_path):
    """Two runs of the same inputs and seed, from scratch: results.json is byte-identical but for
    its run section (created, environment, cache counts, timings). The second starts in a folder
    holding another study's cache, which ``resume=False`` discards unread (a mismatched cache
    under ``resume=True`` is replaced: test_cache_of_other_data_is_not_reused)."""
    out, first, _ = quick
    CellCache(tmp_path / CACHE_NAME, "some other study").put("x", 1)
    fresh = run_demo(tmp_path, quick=True, progress=False, resume=False)
    assert fresh["run"]["cache"]["loaded"] == 0 and fresh["run"]["cache"]["reset"] == "resume=False"
    assert _before_run(tmp_path / "results.json") == _before_run(out / "results.json")
    assert set(fresh["run"]) == {"created", "environment", "cache", "timings_s"}
    assert not {"created", "environment", "cache", "timings_s"} & set(fresh)


def test_bda_report_rerenders_the_results(quick, tmp_path):
    out, _, _ = quick
    assert load_results(out / "results.json") == json.loads((out / "results.json").read_text())
    result = CliRunner().invoke(app, ["report", str(out / "results.json"), "--out",
                                      str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "again" / "index.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Bluebirds" in page


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
        before = cache_path.read_bytes()
        with pytest.raises(DataError) as err:       # a second demo on the live folder: refused
            run_demo(tmp_path, quick=False, progress=False, resume=False)
        assert err.value.field == "out" and str(tmp_path) in str(err.value)
        assert cache_path.read_bytes()[: len(before)] == before    # and nothing was reset
        assert not (tmp_path / "results.json").exists()
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

    results = run_demo(tmp_path, quick=True, progress=False)   # the kill left no stale lock
    total = quick[1]["run"]["cache"]["total"]
    assert results["run"]["cache"]["loaded"] == len(done)           # every finished cell reused
    assert results["run"]["cache"]["computed"] == total - len(done)  # only the rest computed
    lines = _cell_lines(cache_path)
    assert len(lines) == total and len({r["key"] for r in lines}) == total
    assert cache_path.read_bytes().endswith(b"\n")            # the torn tail was dropped
    assert [r["key"] for r in lines[: len(done)]] == [r["key"] for r in done]
    # the resumed run equals an uninterrupted one
    assert results["datasets"] == quick[1]["datasets"]
    assert results["dase"] == quick[1]["dase"]
    fp = json.loads(cache_path.read_bytes().split(b"\n", 1)[0])["fingerprint"]
    assert len(CellCache(cache_path, fp)) == total


def test_cache_of_other_data_is_not_reused(quick, tmp_path, monkeypatch):
    """The cache's fingerprint covers the data: with one problem fewer in the DASE excerpt the
    quick demo's finished cells are not reused, and the replay sees 50 - 1 = 49 problems."""
    out, first, _ = quick
    (tmp_path / CACHE_NAME).write_bytes((out / CACHE_NAME).read_bytes())
    original = Path(bda_jax.datasets.DASE_EXCERPTS["gpqa_w4_head50"])
    lines = original.read_bytes().splitlines(keepends=True)
    assert len(lines) == 50
    (tmp_path / "data").mkdir()
    shorter = tmp_path / "data" / original.name
    shorter.write_bytes(b"".join(lines[:-1]))
    monkeypatch.setitem(bda_jax.datasets.DASE_EXCERPTS, "gpqa_w4_head50", shorter)
    results = run_demo(tmp_path, quick=True, progress=False)
    assert results["run"]["cache"]["loaded"] == 0 and "replaced" in results["run"]["cache"]["reset"]
    assert results["dase"]["excerpts"][0]["replays"][0]["partition"]["overall"]["n"] == 49
