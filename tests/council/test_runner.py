"""The council runner end to end against the loopback fake server: traces that the strict reader,
the tally and the aggregators accept; reruns served from the cache; replay-only; parse failures
recorded as abstain; kill -9 and resume without repeating a cached request."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

import bda_jax as bda  # noqa: E402
from bda_jax.aggregators import BDAPerAgent  # noqa: E402
from bda_jax.council import read_config, read_questions, run_council  # noqa: E402

from council.fake_server import FakeServer  # noqa: E402
from reference import traces_without_run_extras  # noqa: E402

LETTERS = ["A", "B", "C", "D"]


def _questions(path: Path, n: int) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"task_id": f"q{i}", "question": f"Question number {i}?",
                                 "candidates": LETTERS, "gold": LETTERS[i % 4]}) + "\n")
    return path


def _config(path: Path, base_url: str, model: str = "deterministic", rounds: int = 3,
            extra: str = "", max_concurrency: int = 4) -> Path:
    seats = "".join(f'[[seats]]\nname = "s{i}"\nendpoint = "fake"\nmodel = "{model}"\n'
                    f'temperature = 0.5\nseed = {i}\n\n' for i in range(3))
    path.write_text(f"rounds = {rounds}\nsamples = 1\nseed = 7\n{extra}\n"
                    f'[endpoints.fake]\nbase_url = "{base_url}"\nmax_concurrency = {max_concurrency}\n'
                    f"timeout_s = 5\nmax_retries = 2\n\n{seats}")
    return path


def _chat_requests(server) -> list:
    return [r for r in server.requests if "messages" in r]


@pytest.fixture
def server():
    with FakeServer() as srv:
        yield srv


def test_traces_pass_the_strict_reader_and_feed_the_aggregators(tmp_path, server):
    qpath = _questions(tmp_path / "q.jsonl", 12)
    cfg = read_config(_config(tmp_path / "c.toml", server.base_url))
    out = tmp_path / "traces.jsonl"
    summary = run_council(read_questions(qpath), cfg, out, question_file=str(qpath))
    traces = bda.read_traces(out)                    # strict
    assert [t.task_id for t in traces] == [f"q{i}" for i in range(12)]
    for t in traces:
        assert len(t.moves) == 9                     # 3 seats x 3 rounds, one move each
        assert [m.force for m in t.moves[:3]] == ["propose"] * 3
        assert {m.agent for m in t.moves} == {"s0", "s1", "s2"}
        assert all(m.round == k // 3 for k, m in enumerate(t.moves))
        assert all("argument" in m.extra and "latency_s" in m.extra for m in t.moves)
    assert summary.ledger["calls"] == len(_chat_requests(server)) == 12 * 9
    counts = bda.tally(traces)
    assert counts.N.shape == (12, 3)
    proba = BDAPerAgent().fit(traces).predict_proba(traces)
    assert proba.shape == (12, 4)
    manifest = json.loads(Path(summary.manifest).read_text())
    assert manifest["kind"] == "bda_jax.council_manifest"
    assert [s["role"] for s in manifest["seats"]] == ["honest"] * 3
    assert not (tmp_path / "traces.jsonl.partial").exists()


def test_rerun_and_replay_only_send_no_request(tmp_path, server):
    qpath = _questions(tmp_path / "q.jsonl", 4)
    cfg = read_config(_config(tmp_path / "c.toml", server.base_url))
    first, again, replay = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    cache = tmp_path / "cache.sqlite"
    run_council(read_questions(qpath), cfg, first, cache_path=cache)
    n = len(_chat_requests(server))
    summary = run_council(read_questions(qpath), cfg, again, cache_path=cache)
    assert len(_chat_requests(server)) == n and summary.ledger["cached"] == n
    run_council(read_questions(qpath), cfg, replay, cache_path=cache, cache_mode="replay")
    assert len(_chat_requests(server)) == n
    same = traces_without_run_extras
    assert same(first) == same(again) == same(replay)


def test_replay_only_miss_names_task_and_seat(tmp_path, server):
    cfg = read_config(_config(tmp_path / "c.toml", server.base_url))
    with pytest.raises(bda.BdaError, match="needs an existing cache"):
        run_council(read_questions(_questions(tmp_path / "q.jsonl", 2)), cfg, tmp_path / "t.jsonl",
                    cache_path=tmp_path / "none.sqlite", cache_mode="replay")
    cache = tmp_path / "cache.sqlite"
    one = read_questions(_questions(tmp_path / "one.jsonl", 1))
    run_council(one, cfg, tmp_path / "one-out.jsonl", cache_path=cache)
    n = len(_chat_requests(server))
    (tmp_path / "other.jsonl").write_text(json.dumps(
        {"task_id": "new", "question": "Something never asked?", "candidates": LETTERS}) + "\n")
    with pytest.raises(bda.BdaError) as err:
        run_council(read_questions(tmp_path / "other.jsonl"), cfg, tmp_path / "t.jsonl",
                    cache_path=cache, cache_mode="replay")
    text = str(err.value)
    assert "new" in text and any(s in text for s in ("s0", "s1", "s2")), text
    assert len(_chat_requests(server)) == n and not (tmp_path / "t.jsonl").exists()


def test_off_schema_replies_are_reasked_then_abstain(tmp_path, server):
    qpath = _questions(tmp_path / "q.jsonl", 1)
    cfg = read_config(_config(tmp_path / "c.toml", server.base_url, model="fault-offschema",
                              rounds=2, extra="max_reasks = 1"))
    out = tmp_path / "t.jsonl"
    summary = run_council(read_questions(qpath), cfg, out)
    (trace,) = bda.read_traces(out)
    assert [m.force for m in trace.moves] == ["abstain"] * 6
    assert all(m.extra["error"] for m in trace.moves)
    assert len(summary.parse_failures) == 6 and summary.reasks == 6
    assert summary.ledger["calls"] == 12               # every move asked twice (one re-ask)


def test_a_server_without_a_model_list_still_runs(tmp_path):
    with FakeServer(serves_model_list=False) as srv:
        qpath = _questions(tmp_path / "q.jsonl", 1)
        summary = run_council(read_questions(qpath),
                              read_config(_config(tmp_path / "c.toml", srv.base_url)),
                              tmp_path / "t.jsonl")
    manifest = json.loads(Path(summary.manifest).read_text())
    assert "404" in manifest["endpoint_models"]["fake"]["error"]
    assert len(bda.read_traces(tmp_path / "t.jsonl")) == 1


def test_unknown_model_stops_with_one_line(tmp_path, server):
    qpath = _questions(tmp_path / "q.jsonl", 1)
    cfg_path = _config(tmp_path / "c.toml", server.base_url, model="no-such-model")
    proc = subprocess.run([sys.executable, "-m", "bda_jax", "council", "run", str(qpath),
                           "--config", str(cfg_path), "--out", str(tmp_path / "t.jsonl"),
                           "--no-progress"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "no-such-model" in lines[0] and "fake" in lines[0]
    assert not (tmp_path / "t.jsonl").exists()


def _cached_keys(path: Path) -> set:
    if not path.exists():
        return set()
    with sqlite3.connect(path) as db:
        keys = {row[0] for row in db.execute("SELECT key FROM replies")}
    return {k for k in keys if len(k) == 64}     # the reply rows (a reserved row holds the version)


@pytest.mark.parametrize("kill_after", [pytest.param(6, marks=pytest.mark.slow), 30])  # round 0 (slow) / later
def test_kill_9_and_resume_repeat_no_cached_request(tmp_path, kill_after):
    qpath = _questions(tmp_path / "q.jsonl", 6)
    with FakeServer(delay_s=0.05) as srv:
        cfg_path = _config(tmp_path / "c.toml", srv.base_url)
        out, cache = tmp_path / "t.jsonl", tmp_path / "cache.sqlite"
        cmd = [sys.executable, "-m", "bda_jax", "council", "run", str(qpath), "--config",
               str(cfg_path), "--out", str(out), "--cache", str(cache), "--no-progress"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(_chat_requests(srv)) < kill_after and time.time() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not out.exists()
        before = _cached_keys(cache)
        assert 0 < len(before) < 6 * 9
        n_first = len(_chat_requests(srv))
        subprocess.run(cmd, check=True, timeout=120, capture_output=True)
        resumed = [json.dumps(r, sort_keys=True) for r in _chat_requests(srv)[n_first:]]
        # an uninterrupted run against the same deterministic server, fresh cache
        clean = tmp_path / "clean.jsonl"
        run_council(read_questions(qpath), read_config(cfg_path), clean,
                    cache_path=tmp_path / "clean.sqlite")
    # every reply cached before the kill is replayed, never asked again
    assert len(resumed) == 6 * 9 - len(before)
    assert len(set(resumed)) == len(resumed)
    assert traces_without_run_extras(out) == traces_without_run_extras(clean)



def test_inputs_are_never_overwritten(tmp_path, server):
    from bda_jax.council import run_council_files
    qpath = _questions(tmp_path / "q.jsonl", 1)
    cfg = _config(tmp_path / "c.toml", server.base_url)
    before = qpath.read_bytes(), cfg.read_bytes()
    for out in (qpath, cfg):
        with pytest.raises(bda.DataError, match="refusing to overwrite"):
            run_council_files(qpath, cfg, out)
    assert (qpath.read_bytes(), cfg.read_bytes()) == before
    assert not _chat_requests(server)


def test_a_run_fills_the_endpoint_concurrency(tmp_path):
    """With max_concurrency 32 and 3 seats, more than 8 tasks are deliberated at once (8 x 3 =
    24 requests was the ceiling), and never more than 32 requests are in flight."""
    with FakeServer(delay_s=0.3) as srv:
        qpath = _questions(tmp_path / "q.jsonl", 16)
        cfg = read_config(_config(tmp_path / "c.toml", srv.base_url, rounds=1,
                                  max_concurrency=32))
        summary = run_council(read_questions(qpath), cfg, tmp_path / "t.jsonl")
        peak = srv.max_in_flight
    assert summary.n_tasks == 16 and len(_chat_requests(srv)) == 16 * 3
    assert 24 < peak <= 32
