"""The fair attack study ([BDA] §7, Eq. 8, Table 4, Figure 2) end to end against the loopback
fake server: every arm clean and attacked on the same tasks, gamma per arm as Table 4 defines
it, the files, kill -9 and resume without a repeated call, and the CLI's refusals."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

import bda_jax as bda  # noqa: E402
from bda_jax.council import (ATTACK_KIND, CouncilConfig, Endpoint, Question, Seat,  # noqa: E402
                             read_method_run, run_attack)

from cli_calls import invoke  # noqa: E402
from council.fake_server import FakeServer  # noqa: E402

ARMS = ("majority", "bda-per-agent", "moa", "moa-lite", "self-moa", "argllms")


def _questions(n, cands=("yes", "no", "maybe")):
    return [Question(f"q{i}", f"Is claim {i} supported?", tuple(cands), cands[i % len(cands)])
            for i in range(n)]


def _config(base_url, samples=6):
    seats = tuple(Seat(f"s{i}", "fake", "deterministic", 0.5, i) for i in range(3))
    from bda_jax.council import MethodsConfig
    return CouncilConfig(rounds=2, seed=3, endpoints={"fake": Endpoint(
        "fake", base_url, max_concurrency=8, timeout_s=10, max_retries=1)}, seats=seats,
        methods=MethodsConfig(samples=samples))


def _write_inputs(tmp_path, base_url, n=6):
    q = tmp_path / "q.jsonl"
    q.write_text("".join(json.dumps({"task_id": x.task_id, "question": x.question,
                                     "candidates": list(x.candidates), "gold": x.gold}) + "\n"
                         for x in _questions(n)))
    c = tmp_path / "c.toml"
    c.write_text('rounds = 2\nseed = 3\n[endpoints.fake]\nbase_url = "' + base_url + '"\n'
                 "max_concurrency = 8\ntimeout_s = 10\nmax_retries = 1\n"
                 + "".join(f'[[seats]]\nname = "s{i}"\nendpoint = "fake"\nmodel = "deterministic"'
                           f"\ntemperature = 0.5\nseed = {i}\n" for i in range(3))
                 + "[methods]\nsamples = 2\n")
    return q, c


def _chat(srv):
    return [r for r in srv.requests if "messages" in r]


def test_study_scores_every_arm_clean_and_attacked_with_table4_gamma(tmp_path):
    with FakeServer() as srv:
        study = run_attack(_questions(6), _config(srv.base_url, samples=2), tmp_path / "study",
                           k=2, arms=ARMS, folds=2, n_resamples=50)
    rows = {(r["arm"], r["condition"]): r for r in study.rows}
    assert set(rows) == {(a, c) for a in ARMS for c in ("clean", "attacked")}
    assert study.adversaries == ["s1", "s2"]                # the config's last k seats
    assert all(r["n"] == 6 for r in study.rows)             # identical tasks for every arm
    expected_gamma = {"majority": 2 / 3, "bda-per-agent": 2 / 3,
                      "moa": 2 / 3,          # reads s0, s1, s2; s1, s2 play rho
                      "moa-lite": 1 / 2,     # reads s0, s1
                      "self-moa": 1.0, "argllms": 1.0}
    for arm, g in expected_gamma.items():
        assert rows[(arm, "attacked")]["gamma"] == pytest.approx(g)
        assert rows[(arm, "clean")]["gamma"] == 0.0
    assert [rows[(a, "clean")]["reads_council"] for a in ARMS] == [True] * 4 + [False] * 2
    assert rows[("majority", "attacked")]["calls"] == 0     # arithmetic on counts
    assert rows[("self-moa", "attacked")]["calls"] == 6 * (2 + 1)   # 2 draws + synthesizer
    out = tmp_path / "study"
    doc = json.loads((out / "attack.json").read_text())
    assert doc["kind"] == ATTACK_KIND and doc["schema_version"] == 1
    assert set(doc["evaluations"]) == {"clean", "attacked"}
    assert (out / "attack.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "attack.md").read_text().splitlines()
    assert len(table) == 2 + len(ARMS) and table[2].startswith("| majority | yes |")
    attacked = bda.read_traces(out / "attacked.traces.jsonl")
    assert len(attacked) == 6
    run = read_method_run(out / "methods" / "self-moa.attacked.json")
    assert run.attack and not run.reads_council and run.gamma == 1.0


def test_study_refuses_questions_without_gold_and_bad_k(tmp_path):
    cfg = _config("http://127.0.0.1:9/v1")
    q = [Question("q0", "Which?", ("a", "b"), None)]
    with pytest.raises(bda.DataError, match="gold"):
        run_attack(q, cfg, tmp_path / "s")
    with pytest.raises(bda.DataError, match="k must be"):
        run_attack(_questions(2), cfg, tmp_path / "s", k=4)
    with pytest.raises(bda.DataError, match="unknown arm"):
        run_attack(_questions(2), cfg, tmp_path / "s", arms=["majority", "oracle"])


def test_kill_9_and_resume_repeats_no_call(tmp_path):
    with FakeServer(delay_s=0.02) as srv:
        q, c = _write_inputs(tmp_path, srv.base_url)
        out = tmp_path / "study"
        cmd = [sys.executable, "-m", "bda_jax", "council", "attack", str(q), "--config", str(c),
               "--out", str(out), "--folds", "2", "--n-resamples", "20", "--no-progress",
               "--arms", ",".join(ARMS)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(_chat(srv)) < 60 and time.time() < deadline:    # past the clean council
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not (out / "attack.json").exists()
        with sqlite3.connect(out / "cache.sqlite") as db:    # replies stored before the kill
            stored = sum(len(k) == 64 for (k,) in db.execute("SELECT key FROM replies"))
        n_first = len(_chat(srv))
        done = subprocess.run(cmd, timeout=120, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        bodies = [json.dumps(r, sort_keys=True) for r in _chat(srv)]
    resumed = bodies[n_first:]
    assert resumed and len(set(resumed)) == len(resumed)
    # the rerun asked for exactly the replies the cache lacked: only the calls still in flight
    # at the kill (never answered, so never stored) were sent twice
    assert len(resumed) == len(set(bodies)) - stored
    assert len(bodies) - len(set(bodies)) <= 8      # at most the endpoint's max_concurrency
    assert json.loads((out / "attack.json").read_text())["kind"] == ATTACK_KIND


def test_cli_method_and_evaluate_with_a_stored_run(tmp_path):
    with FakeServer() as srv:
        q, c = _write_inputs(tmp_path, srv.base_url)
        traces = tmp_path / "t.jsonl"
        run = invoke                        # in-process `bda` (tests/cli_calls.py)
        assert run("council", "run", str(q), "--config", str(c), "--out", str(traces),
                   "--no-progress").exit_code == 0
        r = run("council", "method", "moa", str(q), "--config", str(c), "--out",
                str(tmp_path / "own.json"), "--attack", "--json", "--no-progress")
        assert r.exit_code == 0, r.stderr        # on questions: the seats as own proposers
        own = json.loads(r.stdout)
        assert own["reads_council"] is False and own["gamma"] == pytest.approx(2 / 3)
        assert own["ledger"]["calls"] == 6 * (3 + 1)
        r = run("council", "method", "moa", str(traces), "--config", str(c), "--out",
                str(tmp_path / "m.json"), "--json", "--no-progress")
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["method"] == "moa" and doc["reads_council"] and doc["ledger"]["calls"] == 6
        n = len(_chat(srv))
        r = run("evaluate", str(traces), "--arms", "majority", "--method-run",
                str(tmp_path / "m.json"), "--folds", "2", "--n-resamples", "20", "--json",
                "--no-progress")
        assert r.exit_code == 0, r.stderr
        assert len(_chat(srv)) == n                       # a stored run makes no call
        result = json.loads(r.stdout)
        assert [row["arm"] for row in result["table"]] == ["majority", "moa"]
        assert result["methods"]["moa"]["reads_council"] is True
        r = run("evaluate", str(traces), "--arms", "majority,argllms", "--folds", "2")
        assert r.exit_code == 2 and "--config" in r.stderr
