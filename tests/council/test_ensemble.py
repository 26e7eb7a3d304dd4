"""The live DASE ensemble ([DASE] §3-4, Appendix H) against the loopback fake server: every
stopping rule in the loop, the history format the replay tools read (replaying it reproduces
every live decision), injection by bandwidth, per-round temperatures, traces for BDA, an
adversarial worker, kill -9 and resume."""
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("openai")

import bda_jax as bda  # noqa: E402
from bda_jax.council import (CouncilConfig, Endpoint, EnsembleSettings, Question,  # noqa: E402
                             Seat, derived_seed, extract_worker_answer, run_ensemble)
from bda_jax.datasets import read_dase_history  # noqa: E402
from bda_jax.stopping import (build_votes, replay_history, stop_at_threshold,  # noqa: E402
                              vote_log_posterior)

from council.fake_server import FakeServer, has_role  # noqa: E402

LETTERS = ("A", "B", "C", "D")


def _responder(body):
    """A worker reply drawn from the request body: mostly A, sometimes B or C, sometimes no
    committed answer; deterministic per body."""
    r = random.Random(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest())
    u = r.random()
    if u < 0.1:
        return "I cannot tell which option is right."
    return f"Some reasoning.\nAnswer: {r.choice('AAABC')}"


def _questions(n=10):
    return [Question(f"q{i}", f"Problem number {i}?", LETTERS, "A") for i in range(n)]


def _config(url, n=5, roles=()):
    seats = tuple(Seat(f"s{i}", "fake", "deterministic", 0.7, i,
                       role="adversary" if i in roles else "honest") for i in range(n))
    return CouncilConfig(endpoints={"fake": Endpoint("fake", url, max_concurrency=8, timeout_s=10,
                                                     max_retries=1)}, seats=seats)


def _chat(srv):
    return [r for r in srv.requests if "messages" in r]


def _live(path):
    return [json.loads(line) for line in open(path)]


@pytest.mark.parametrize("rule, param", [("spatial", 2), ("spatial", 4), ("heuristic", 2)])
def test_replay_reproduces_every_live_decision(tmp_path, rule, param):
    s = EnsembleSettings(rule=rule, W=param, k=param, L=6)
    with FakeServer(responder=_responder) as srv:
        out = tmp_path / "h.jsonl"
        summary = run_ensemble(_questions(), _config(srv.base_url), out, settings=s)
    records = list(read_dase_history(out))                 # the DASE reader takes it
    assert [r.idx for r in records] == list(range(10))
    live = _live(out)
    replay = replay_history(out, rule=rule, W=param, k=param, L=6, empty_g=0.0)
    for r, rec in zip(replay, live):
        cert = rec["cert"]
        assert (r.commit, r.answer or "empty", r.steps) == \
            (cert["commit_reason"], cert["consensus"], cert["steps"])
        assert r.steps == len(rec["history"])
        if rule == "spatial":
            assert r.final_x == cert["final_x"]
            assert list(r.x) == [h["x"] for h in rec["history"]]
        else:
            assert list(r.streak) == [h["streak"] for h in rec["history"]]
    assert sum(summary.commits.values()) == 10
    assert summary.inferences == 5 * sum(len(rec["history"]) for rec in live)


def test_calibrated_rule_matches_the_offline_stop(tmp_path):
    s = EnsembleSettings(rule="calibrated", threshold=0.95, mean=0.6, strength=6.0, tau=0.5, L=5)
    with FakeServer(responder=_responder) as srv:
        out = tmp_path / "h.jsonl"
        run_ensemble(_questions(), _config(srv.base_url), out, settings=s)
    live = _live(out)
    problems = [[[None if a == "empty" else a for a in h["norms"]] for h in rec["history"]]
                for rec in live]
    vt = build_votes(problems, benchmark="gpqa")
    post = vote_log_posterior(vt, np.full(5, 3.6), np.full(5, 2.4), 0.5)
    off = stop_at_threshold(vt, post, 0.95)
    for b, rec in enumerate(live):
        assert rec["cert"]["steps"] == int(off.round[b])
        assert rec["cert"]["commit_reason"] == ("threshold" if off.stopped[b] else "fallback")
        assert rec["cert"]["consensus"] == vt.vocab[b][int(off.answer[b])]


def test_bandwidth_temperatures_and_budget_reach_the_requests(tmp_path):
    for bandwidth in ("sparse", "dense", "none"):
        s = EnsembleSettings(rule="fixed", rounds=2, bandwidth=bandwidth, dense_chars=20,
                             max_tokens=77)
        with FakeServer(responder=_responder) as srv:
            run_ensemble(_questions(1), _config(srv.base_url, n=3), tmp_path / f"{bandwidth}.jsonl",
                         settings=s, cache_mode="off")
            reqs = _chat(srv)
        assert len(reqs) == 6 and all(r["max_tokens"] == 77 for r in reqs)
        first = [r for r in reqs if "In round 1" not in r["messages"][-1]["content"]]
        later = [r for r in reqs if "In round 1" in r["messages"][-1]["content"]]
        if bandwidth == "none":
            assert len(first) == 6 and not later
            continue
        assert len(first) == 3 and len(later) == 3
        assert {r["temperature"] for r in first} == {0.2}       # DASE: tau_1 = 0.2
        assert {r["temperature"] for r in later} == {0.4}       #       tau_t = 0.4
        shown = [line for line in later[0]["messages"][-1]["content"].splitlines()
                 if line.startswith("- member")]
        assert len(shown) == 3
        for line in shown:
            body = line.split(": ", 1)[1]
            if bandwidth == "sparse":            # the extracted answers only
                assert body in ("A", "B", "C", "(no answer)")
            else:                                # the response text, cut to 20 characters
                assert len(body) <= 20 and body != "(no answer)"


def test_sc_and_debate_settings(tmp_path):
    with FakeServer(responder=_responder) as srv:
        cfg = _config(srv.base_url)
        sc = run_ensemble(_questions(4), cfg, tmp_path / "sc.jsonl",
                          settings=EnsembleSettings(rule="none", bandwidth="none", rounds=1))
        debate = run_ensemble(_questions(4), cfg, tmp_path / "d.jsonl",
                              settings=EnsembleSettings(rule="fixed", rounds=3))
    assert sc.inferences == 4 * 5 and debate.inferences == 4 * 15
    for rec in _live(tmp_path / "sc.jsonl"):
        said = [a for a in rec["history"][0]["norms"] if a != "empty"]
        top = max(said, key=lambda a: (said.count(a), -said.index(a)))   # plurality, first seen
        assert rec["cert"]["consensus"] == top and rec["cert"]["commit_reason"] == "none"
    for rec in _live(tmp_path / "d.jsonl"):
        assert len(rec["history"]) == 3
        said = [a for a in rec["history"][-1]["norms"] if a != "empty"]
        assert rec["cert"]["consensus"] == max(said, key=lambda a: (said.count(a), -said.index(a)))


def test_traces_feed_tally_and_the_adversary_is_one_worker(tmp_path):
    with FakeServer(responder=_responder) as srv:
        out = tmp_path / "h.jsonl"
        run_ensemble(_questions(3), _config(srv.base_url, roles=(4,)), out,
                     settings=EnsembleSettings(rule="fixed", rounds=2))
        reqs = _chat(srv)
    traces = bda.read_traces(f"{out}.traces.jsonl")
    live = _live(out)
    for trace, rec in zip(traces, live):
        said = sum(a != "empty" for h in rec["history"] for a in h["norms"])
        assert len(trace.moves) == said and all(m.force == "propose" for m in trace.moves)
    counts = bda.tally(traces)
    assert counts.N.shape == (3, 5)
    role = [r for r in reqs if has_role(r)]
    assert len(role) == 3 * 2 and all(r["seed"] in (4, derived_seed(4, 0, 1)) for r in role)   # s4 only


def test_extract_worker_answer():
    closed = Question("q", "Which?", LETTERS)
    assert extract_worker_answer("so the answer is (C).", closed) == "C"
    assert extract_worker_answer("no idea", closed) is None
    numeric = Question("q", "How many?")
    assert extract_worker_answer("12 + 30 = 42.\nAnswer: 42", numeric) == "42"
    assert extract_worker_answer("Answer: $1,200.00", numeric) == "1200"
    assert extract_worker_answer("Answer: Paris", numeric) == "Paris"
    assert extract_worker_answer("I do not know.", numeric) is None


def test_bad_settings_and_inputs_are_refused(tmp_path):
    with pytest.raises(bda.DataError, match="rule"):
        EnsembleSettings(rule="magic")
    with pytest.raises(bda.DataError, match="bandwidth"):
        EnsembleSettings(bandwidth="wide")
    with pytest.raises(bda.DataError, match="W"):
        EnsembleSettings(W=0)
    for bad in (-0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(bda.DataError, match="empty_g"):
            EnsembleSettings(empty_g=bad)
    q = tmp_path / "q.jsonl"
    q.write_text('{"task_id": "a", "question": "x?", "candidates": ["A", "B"]}\n')
    with pytest.raises(bda.DataError, match="refusing to overwrite"):
        run_ensemble(_questions(1), _config("http://127.0.0.1:9/v1"), q, question_file=str(q))
    assert q.read_text().startswith('{"task_id": "a"')


def test_kill_9_and_resume_repeats_no_answered_call(tmp_path):
    with FakeServer(delay_s=0.02) as srv:
        q = tmp_path / "q.jsonl"
        q.write_text("".join(json.dumps({"task_id": f"q{i}", "question": f"Problem {i}?",
                                         "candidates": list(LETTERS), "gold": "A"}) + "\n"
                             for i in range(8)))
        c = tmp_path / "c.toml"
        c.write_text('[endpoints.fake]\nbase_url = "' + srv.base_url + '"\nmax_concurrency = 8\n'
                     "timeout_s = 10\nmax_retries = 1\n"
                     + "".join(f'[[seats]]\nname = "s{i}"\nendpoint = "fake"\n'
                               f'model = "deterministic"\nseed = {i}\n' for i in range(5)))
        out = tmp_path / "h.jsonl"
        cmd = [sys.executable, "-m", "bda_jax", "council", "ensemble", str(q), "--config", str(c),
               "--out", str(out), "--rule", "fixed", "--rounds", "3", "--no-progress"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(_chat(srv)) < 40 and time.time() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not out.exists()
        with sqlite3.connect(f"{out}.cache.sqlite") as db:
            stored = sum(len(k) == 64 for (k,) in db.execute("SELECT key FROM replies"))
        n_first = len(_chat(srv))
        done = subprocess.run(cmd, timeout=120, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        bodies = [json.dumps(r, sort_keys=True) for r in _chat(srv)]
    resumed = bodies[n_first:]
    assert len(set(resumed)) == len(resumed)
    assert len(resumed) == len(set(bodies)) - stored       # only what the cache lacked
    assert len(set(bodies)) == 8 * 5 * 3
    assert len(_live(out)) == 8
