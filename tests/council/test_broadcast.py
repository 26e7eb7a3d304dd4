"""The live broadcast protocol ([Audit] Fig. 1, Tables 7-8) end to end against the loopback fake
server with scripted replies: the log a hand-derived deliberation must produce (router picks,
incumbents, the evaluator's outer rounds, notes, what each call may see), the audit reading the
live log and building its card, the online routers, the adversary role and the evaluator's hint
guard, re-asks, open answers, the CLI, reruns from the cache, and kill -9 then resume repeating
no completed call."""
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

import bda_jax as bda  # noqa: E402
from bda_jax import audit  # noqa: E402
from bda_jax.council import (BROADCAST_ROUTERS, ConfidenceScale, derived_seed,  # noqa: E402
                             read_config, read_questions, route_floor, run_broadcast,
                             run_broadcast_files)

from council.fake_server import ROLE_MARK, FakeServer, request_kind  # noqa: E402

NAMES = ("ann", "bob", "cy")            # seat i has seed i: the responder tells seats by seed
#: a request's seed -> its seat, samples 0 and 1 (the request seed of seat i is derived_seed(i, ...))
SEAT_OF = {derived_seed(i, s, 0): i for i in range(3) for s in range(2)}
LETTERS = ["A", "B", "C", "D"]
_WHEN = re.compile(r"Outer round (\d+) of at most \d+, discussion turn (\d+) of \d+\.")


def _write_questions(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _config(path: Path, base_url: str, *, n: int = 3, extra: str = "", roles=None) -> Path:
    roles = roles or ["honest"] * n
    seats = "".join(f'[[seats]]\nname = "{NAMES[i]}"\nendpoint = "fake"\nmodel = "deterministic"'
                    f'\ntemperature = 0.5\nseed = {i}\nrole = "{roles[i]}"\n\n' for i in range(n))
    path.write_text(f"seed = 3\n{extra}\n[endpoints.fake]\nbase_url = \"{base_url}\"\n"
                    f"max_concurrency = 8\ntimeout_s = 5\nmax_retries = 1\n\n{seats}")
    return path


def _when(body) -> tuple[int, int]:
    """(outer round, turn), 0-based, of a poll or speak request."""
    m = _WHEN.search(body["messages"][1]["content"])
    return int(m.group(1)) - 1, int(m.group(2)) - 1


def _poll_reply(score, answer, reason):
    return json.dumps({"reason": reason, "has_candidate_answer": answer is not None,
                       "candidate_answer": answer or LETTERS[0], "score": score,
                       "intent": "say it"})


def _chats(server) -> list:
    return [r for r in server.requests if "messages" in r]


def _text(body) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"])


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def _stable(value):
    """A log without what differs between two runs of one deliberation (latency, cache hits)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()
                if k not in ("latency_s", "cache_hit", "cached")}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


# ------------------------------------------------------------------ the hand-derived deliberation
# (outer round, turn) -> per seat (stated score on 0-100, polled answer or None)
POLLS = {(0, 0): [(40, "A"), (90, "B"), (90, "C")],      # tie at 90: bob is listed first
         (0, 1): [(70, "C"), (50, None), (60, "B")],     # ann
         (1, 0): [(80, "B"), (80, "B"), (95, "D")],      # cy
         (1, 1): [(100, "B"), (20, "B"), (20, "D")]}     # ann
SPEAKS = {(0, 0): "B fits every clue.\nAnswer: B", (0, 1): "On reflection it is A.\nAnswer: A",
          (1, 0): "I argue for D.\nAnswer: D", (1, 1): "Back to B.\nAnswer: B"}


def _scripted(body):
    kind = request_kind(body)
    if kind == "poll":
        o, t = _when(body)
        seat = body["seed"]
        score, answer = POLLS[o, t][seat]
        return _poll_reply(score, answer, f"reason R{seat} at {o}.{t}")
    if kind == "text":
        return SPEAKS[_when(body)]
    return None


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    d = tmp_path_factory.mktemp("broadcast")
    q = _write_questions(d / "q.jsonl", [{"task_id": "p1", "question": "Which letter?",
                                          "candidates": LETTERS, "gold": "B", "tier": "07"}])
    with FakeServer(responder=_scripted) as srv:
        cfg = read_config(_config(d / "c.toml", srv.base_url))
        out = d / "log.jsonl"
        summary = run_broadcast(read_questions(q), cfg, out, turns=2, max_outer_rounds=2,
                                evaluator="exact", question_file=str(q))
        yield summary, out, _chats(srv)


def test_the_log_is_the_hand_derived_deliberation(scripted):
    summary, out, requests = scripted
    lines = _lines(out)
    assert [x["kind"] for x in lines] == (["poll"] * 3 + ["speak"]) * 4
    polls = [x for x in lines if x["kind"] == "poll"]
    speaks = [x for x in lines if x["kind"] == "speak"]
    # the floor went to the argmax-confidence agent of every block, first listed on ties
    assert [s["speaker"] for s in speaks] == ["bob", "ann", "cy", "ann"]
    assert [p["agent"] for p in polls if p["selected"]] == ["bob", "ann", "cy", "ann"]
    assert [p["score"] for p in polls[:3]] == [0.4, 0.9, 0.9]          # 40, 90, 90 of 100
    assert [p["stated_score"] for p in polls[:3]] == [40, 90, 90]       # integers, as stated
    assert all(isinstance(p["stated_score"], int) for p in polls if p["stated_score"] is not None)
    assert polls[4]["candidate"] is None and polls[4]["correct"] is None  # bob had no answer
    assert [p["correct"] for p in polls[:3]] == [False, True, False]
    assert all(p["tier"] == "07" for p in polls)
    # incumbent: none in round 1; then B, A tie -> the latest, A; the exact evaluator fails it
    assert [s["incumbent"] for s in speaks] == [None, None, "A", "A"]
    assert [s["spoken"] for s in speaks] == ["B", "A", "D", "B"]
    assert [s["equivalence"] for s in speaks] == ["equivalent", "divergent", "equivalent",
                                                  "equivalent"]
    assert speaks[3]["earlier_public"] == [{"agent": "bob", "answer": "B"},
                                           {"agent": "ann", "answer": "A"},
                                           {"agent": "cy", "answer": "D"}]
    assert speaks[1]["evaluation"]["verdict"] == "FAIL"
    assert speaks[1]["evaluation"]["submitted"] == "A"
    # round 2 spoke D, B: a tie, the latest (B) is submitted and passes
    assert speaks[3]["evaluation"] == {"outer_round": 1, "submitted": "B", "evaluator": "exact",
                                       "verdict": "PASS", "correct": True, "hint": ""}
    assert "evaluation" not in speaks[0] and "evaluation" not in speaks[2]
    assert summary.outcomes == [{"problem": "p1", "final_answer": "B", "final_correct": True,
                                 "verdict": "PASS", "outer_rounds": 2, "blocks": 4}]
    assert summary.n_blocks == 4 and summary.passed == 1
    assert summary.ledger["calls"] == len(requests) == 4 * 3 + 4     # no evaluator call


def test_each_call_sees_what_table_7_gives_it(scripted):
    _, _, requests = scripted
    polls = {(_when(b), b["seed"]): _text(b) for b in requests if request_kind(b) == "poll"}
    speaks = {_when(b): _text(b) for b in requests if request_kind(b) == "text"}
    # cy's 90 at 0.0 was not selected and reaches the 65 threshold: a private note for cy only
    assert "reason R2 at 0.0" in polls[(0, 1), 2]
    assert "reason R2 at 0.0" not in polls[(0, 1), 0] + polls[(0, 1), 1] + speaks[0, 1]
    assert "reason R0 at 0.0" not in "".join(polls.values())     # 40 < 65: no note
    # a speaker sees its own poll, never a peer's
    assert "reason R1 at 0.0" in speaks[0, 0] and "reason R2" not in speaks[0, 0]
    # evaluator feedback only after the failed first outer round
    assert all("judged FAIL" not in polls[(0, t), s] for t in (0, 1) for s in range(3))
    assert all('answer "A" was judged FAIL' in polls[(1, t), s] for t in (0, 1) for s in range(3))
    # the public discussion shows anonymized labels: no seat name, no gold, no role in any call
    for text in list(polls.values()) + list(speaks.values()):
        assert not any(re.search(rf"\b{n}\b", text) for n in NAMES)
        assert ROLE_MARK not in text and "Reference answer" not in text
    assert "B fits every clue" in polls[(0, 1), 0]                  # the public message


def test_audit_reads_the_live_log_and_the_card_builds(scripted, tmp_path):
    summary, out, _ = scripted
    log = audit.read_broadcast_log(out)                # the default [0, 1] score range
    assert (log.n_blocks, log.n_polls, log.n_speaks) == (4, 12, 4)
    assert audit.effective_selection(log)[1] == "logged"
    np.testing.assert_array_equal(log.selected, audit.runtime_argmax(log))
    # by hand: selected B (right), C, D (wrong), B (right) -> CRA 2/4; a correct candidate in
    # every block -> HRWP 2/4; one divergent pair (C polled, A spoken) of 4 -> PSDR 1/4
    assert tuple(audit.cra(log)) == (0.5, 2, 4)
    assert tuple(audit.hrwp(log)) == (0.5, 2, 4)
    report = audit.audit_file(out, n_boot=20, **summary.card_fields)
    rows = {m.name: m for m in report.card.metrics}
    assert (rows["CRA"].numerator, rows["CRA"].denominator) == (2, 4)
    assert (rows["PSDR"].numerator, rows["PSDR"].denominator) == (1, 4)
    assert (rows["PSIR"].numerator, rows["PSDRg"].numerator) == (0, 0)   # A and C both wrong
    assert report.card.n_agents == 3 and report.card.agent_model == ["deterministic"]
    assert report.card.confidence_scale.startswith("integer 0-100")
    assert report.card.speak_threshold == 0.65
    for name in ("card.json", "card.md"):
        report.card.write(tmp_path / name)
    assert audit.AuditCard.read(tmp_path / "card.json") == report.card
    manifest = json.loads(Path(summary.manifest).read_text())
    assert manifest["kind"] == "bda_jax.broadcast_manifest"
    assert manifest["protocol"]["router"] == "runtime_argmax"
    assert manifest["outcomes"] == summary.outcomes
    assert not Path(f"{out}.partial").exists()


# ------------------------------------------------------------------------------ online routers
def test_online_routers_pick_by_hand():
    rng = random.Random(0)
    assert route_floor("runtime_argmax", [0.5, 0.9, 0.9], ["a", "b", "c"], rng) == 1
    assert route_floor("runtime_argmax", [None, None], [None, "a"], rng) == 0
    assert route_floor("runtime_argmax", [None, 0.1], ["a", "a"], rng) == 1

    def picks(router, scores, answers):
        return {route_floor(router, scores, answers, random.Random(s)) for s in range(200)}

    assert picks("top_confidence_tie_random", [0.9, 0.5, 0.9], ["a", "b", "c"]) == {0, 2}
    assert picks("random_valid", [0.9, 0.5, 0.1], [None, "a", "b"]) == {1, 2}
    assert picks("majority_vote", [0.9, 0.5, 0.4, 0.8], ["a", "b", "b", None]) == {1, 2}
    # b's scores sum to 0.8 < 0.9 for a; then 0.8 > 0.7
    assert picks("confidence_weighted_vote", [0.9, 0.5, 0.3], ["a", "b", "b"]) == {0}
    assert picks("confidence_weighted_vote", [0.7, 0.5, 0.3], ["a", "b", "b"]) == {1, 2}
    # 0.1 + 0.2 ties 0.3 once the sums are rounded: either cluster, then a uniform member
    assert picks("confidence_weighted_vote", [0.1, 0.2, 0.3], ["a", "a", "b"]) == {0, 1, 2}
    # nothing parsed: the valid-candidate routers fall back to the runtime argmax
    assert picks("majority_vote", [0.2, 0.6], [None, None]) == {1}
    for name in ("oracle", "learned", "loudest"):
        with pytest.raises(bda.DataError, match=name) as err:
            route_floor(name, [0.5], ["a"], rng)
        assert err.value.field == "router"
    assert set(BROADCAST_ROUTERS) < set(audit.ROUTERS)


def test_a_live_majority_vote_run_gives_the_floor_to_the_plurality(tmp_path):
    def responder(body):
        if request_kind(body) == "poll":     # ann is most confident, bob and cy agree on B
            return _poll_reply(*[(99, "A"), (50, "B"), (40, "B")][body["seed"]], "r")
        return None

    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "p", "question": "Which?",
                                                 "candidates": LETTERS, "gold": "B"}])
    with FakeServer(responder=responder) as srv:
        run_broadcast(read_questions(q), read_config(_config(tmp_path / "c.toml", srv.base_url)),
                      tmp_path / "log.jsonl", router="majority_vote", turns=3,
                      max_outer_rounds=1, evaluator="exact")
    log = audit.read_broadcast_log(tmp_path / "log.jsonl")
    assert set(log.agent[log.selected]) <= {"bob", "cy"} and log.selected.sum() == 3
    assert not (log.selected & audit.runtime_argmax(log)).any()      # argmax would pick ann


# ------------------------------------------------------- evaluator, adversary, re-asks, open
def test_llm_evaluator_adversary_role_and_the_hint_guard(tmp_path):
    def responder(body):
        kind = request_kind(body)
        if kind == "poll":
            return _poll_reply(60 + body["seed"], "A" if body["seed"] else "C", "r")
        if kind == "evaluation":
            first = "Outer round 1:" in body["messages"][1]["content"]
            return json.dumps({"verdict": "FAIL", "hint": "The answer is C, check again."}
                              if first else {"verdict": "PASS", "hint": ""})
        return "Answer: A" if body["seed"] else "Answer: C"

    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "p", "question": "Which?",
                                                 "candidates": LETTERS, "gold": "C"}])
    with FakeServer(responder=responder) as srv:
        cfg = read_config(_config(tmp_path / "c.toml", srv.base_url, n=2,
                                  roles=["honest", "adversary"]))
        summary = run_broadcast(read_questions(q), cfg, tmp_path / "log.jsonl", turns=1,
                                max_outer_rounds=3)
        requests = _chats(srv)
    evals = [b for b in requests if request_kind(b) == "evaluation"]
    agents = [b for b in requests if request_kind(b) != "evaluation"]
    # the evaluator: the first seat at temperature 0, the only call that sees the reference
    assert len(evals) == 2 and all(b["temperature"] == 0 and b["seed"] == 0 for b in evals)
    assert all('Reference answer (for you only): "C"' in _text(b) for b in evals)
    assert all("Reference answer" not in _text(b) for b in agents)
    # the adversary (seed 1) reads the role head with the gold, the honest seat never
    assert all((ROLE_MARK in _text(b)) == (b["seed"] == 1) for b in agents)
    assert all('the correct answer is "C"' in _text(b) for b in agents if b["seed"] == 1)
    speaks = [x for x in _lines(tmp_path / "log.jsonl") if x["kind"] == "speak"]
    # the adversary (61 > 60) speaks A, the incumbent; the FAIL hint names C: dropped
    first = speaks[0]["evaluation"]
    assert (first["verdict"], first["hint"], first["hint_redacted"]) == ("FAIL", "", True)
    assert speaks[1]["evaluation"]["verdict"] == "PASS"            # stops before round 3
    later = [b for b in agents if request_kind(b) == "poll" and _when(b)[0] == 1]
    assert later and all("judged FAIL" in _text(b) and "check again" not in _text(b)
                         for b in later)
    assert summary.outcomes[0]["outer_rounds"] == 2 and summary.outcomes[0]["final_correct"] is False
    manifest = json.loads(Path(summary.manifest).read_text())
    assert [s["role"] for s in manifest["seats"]] == ["honest", "adversary"]
    assert "adversary" not in (tmp_path / "log.jsonl").read_text()      # roles stay out of the log


def test_unusable_polls_are_reasked_then_logged_without_a_score(tmp_path):
    def responder(body):
        if request_kind(body) != "poll":
            return "no answer here"
        if body["seed"] == 0:               # ann: prose first, valid once re-asked
            return _poll_reply(30, "A", "r") if len(body["messages"]) > 2 else "I think A."
        return _poll_reply(150, "B", "r")   # bob: off the 0-100 scale every time

    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "p", "question": "Which?",
                                                 "candidates": LETTERS, "gold": "B"}])
    with FakeServer(responder=responder) as srv:
        cfg = read_config(_config(tmp_path / "c.toml", srv.base_url, n=2, extra="max_reasks = 1"))
        summary = run_broadcast(read_questions(q), cfg, tmp_path / "log.jsonl", turns=1,
                                max_outer_rounds=1, evaluator="exact")
        requests = _chats(srv)
    ann, bob, speak = _lines(tmp_path / "log.jsonl")
    assert (ann["score"], ann["candidate"], ann["selected"]) == (0.3, "A", True)
    assert "error" not in ann
    assert (bob["score"], bob["candidate"], bob["correct"]) == (None, None, None)
    assert bob["error"] == "score 150 is outside 0-100"
    assert speak["spoken"] is None and speak["evaluation"]["verdict"] == "FAIL"
    assert summary.reasks == 2 and len(summary.parse_failures) == 1
    assert summary.parse_failures[0]["agent"] == "bob"
    assert len(requests) == 2 + 2 + 1                 # each poll asked twice, one speak
    reask = [b for b in requests if len(b["messages"]) > 2 and b["seed"] == 1][0]
    assert "score 150 is outside 0-100" in reask["messages"][-1]["content"]
    assert audit.read_broadcast_log(tmp_path / "log.jsonl").n_polls == 2


def test_open_answers_numbers_boxes_samples_and_a_real_scale(tmp_path):
    def responder(body):
        if request_kind(body) == "poll":
            return json.dumps({"reason": "r", "has_candidate_answer": True,
                               "candidate_answer": ["42.0", "41"][SEAT_OF[body["seed"]]],
                               "score": [0.8, 0.5][SEAT_OF[body["seed"]]], "intent": "i"})
        if request_kind(body) == "text":
            return "Six sevens make $\\boxed{42}$ as I said."
        return None

    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "m", "question": "What is 6*7?",
                                                 "gold": "42"}])
    with FakeServer(responder=responder) as srv:
        cfg = read_config(_config(tmp_path / "c.toml", srv.base_url, n=2, extra="samples = 2"))
        summary = run_broadcast(read_questions(q), cfg, tmp_path / "log.jsonl", turns=1,
                                max_outer_rounds=1, evaluator="exact", confidence_scale="0-1")
    lines = _lines(tmp_path / "log.jsonl")
    assert [x["problem"] for x in lines] == ["m"] * 3 + ["m#s1"] * 3
    assert all(x.get("cluster") == "m" for x in lines if x["kind"] == "poll")
    ann, bob, speak = lines[:3]
    assert (ann["candidate"], ann["correct"], ann["score"]) == ("42", True, 0.8)
    assert (bob["candidate"], bob["correct"]) == ("41", False)
    assert (speak["spoken"], speak["spoken_rule"], speak["equivalence"]) == ("42", "boxed",
                                                                             "equivalent")
    assert [o["verdict"] for o in summary.outcomes] == ["PASS", "PASS"]
    log = audit.read_broadcast_log(tmp_path / "log.jsonl")
    assert len(log.problems) == 2 and set(log.cluster) == {"m"}


def test_the_confidence_scale_reads_and_checks():
    assert ConfidenceScale.parse("0-100") == ConfidenceScale(0, 100, True)
    assert ConfidenceScale.parse("0-1") == ConfidenceScale(0.0, 1.0, False)
    assert ConfidenceScale.parse("1 to 10").integer
    s = ConfidenceScale(0, 100)
    assert s.check(85.0) == 85.0 and s.unit(65) == 0.65
    for bad, why in ((85.5, "integer"), (101, "outside"), (True, "number")):
        with pytest.raises(ValueError, match=why):
            s.check(bad)
    for text in ("high", "5-5", "0.5-0.1"):
        with pytest.raises(bda.DataError) as err:
            ConfidenceScale.parse(text)
        assert err.value.field == "confidence_scale"


# ----------------------------------------------------------------------------- bad inputs, CLI
def test_bad_inputs_are_refused_before_any_call(tmp_path):
    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "p", "question": "Which?",
                                                 "candidates": LETTERS, "tier": [1]}])
    with FakeServer() as srv:
        cfg = _config(tmp_path / "c.toml", srv.base_url)
        before = q.read_bytes(), cfg.read_bytes()
        for out in (q, cfg):
            with pytest.raises(bda.DataError, match="refusing to overwrite"):
                run_broadcast_files(q, cfg, out)
        assert (q.read_bytes(), cfg.read_bytes()) == before
        with pytest.raises(bda.DataError) as err:
            run_broadcast_files(q, cfg, tmp_path / "log.jsonl")
        assert (err.value.task_id, err.value.field, err.value.file) == ("p", "tier", str(q))
        for kwargs, fld in (({"router": "oracle"}, "router"),
                            ({"confidence_scale": "lots"}, "confidence_scale"),
                            ({"turns": 0}, "turns"), ({"evaluator": "zed"}, "evaluator"),
                            ({"note_threshold": 120}, "note_threshold")):
            with pytest.raises(bda.DataError) as err:
                run_broadcast_files(q, cfg, tmp_path / "log.jsonl", **kwargs)
            assert err.value.field == fld, kwargs
        assert not _chats(srv) and not (tmp_path / "log.jsonl").exists()


def test_cli_broadcast_then_bda_audit(tmp_path):
    from typer.testing import CliRunner

    from bda_jax.cli import app
    runner = CliRunner()
    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "p1", "question": "Which letter?",
                                                 "candidates": LETTERS, "gold": "B"}])
    with FakeServer(responder=_scripted) as srv:
        cfg = _config(tmp_path / "c.toml", srv.base_url)
        out = tmp_path / "log.jsonl"
        res = runner.invoke(app, ["council", "broadcast", str(q), "--config", str(cfg), "--out",
                                  str(out), "--turns", "2", "--outer-rounds", "2",
                                  "--evaluator", "exact", "--no-progress", "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert (doc["command"], doc["n_blocks"], doc["passed"]) == ("council broadcast", 4, 1)
        bad = runner.invoke(app, ["council", "broadcast", str(q), "--config", str(cfg), "--out",
                                  str(tmp_path / "x.jsonl"), "--router", "oracle",
                                  "--no-progress"])
        assert bad.exit_code == 2
        errors = [x for x in bad.stderr.splitlines() if x.startswith("error")]
        assert len(errors) == 1 and "router" in errors[0] and "oracle" in errors[0]
    res = runner.invoke(app, ["audit", str(out), "--n-boot", "20", "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    card = json.loads(res.stdout)["card"]
    cra = next(m for m in card["metrics"] if m["name"] == "CRA")
    assert (cra["numerator"], cra["denominator"]) == (2, 4)


# ------------------------------------------------------------------------ cache and kill -9
def test_rerun_and_replay_only_send_no_request(tmp_path):
    q = _write_questions(tmp_path / "q.jsonl", [{"task_id": "p1", "question": "Which letter?",
                                                 "candidates": LETTERS, "gold": "B"}])
    with FakeServer(responder=_scripted) as srv:
        cfg = read_config(_config(tmp_path / "c.toml", srv.base_url))
        cache = tmp_path / "cache.sqlite"
        kw = dict(turns=2, max_outer_rounds=2, cache_path=cache)
        run_broadcast(read_questions(q), cfg, tmp_path / "a.jsonl", **kw)
        n = len(_chats(srv))
        again = run_broadcast(read_questions(q), cfg, tmp_path / "b.jsonl", **kw)
        replay = run_broadcast(read_questions(q), cfg, tmp_path / "c.jsonl", cache_mode="replay",
                               **kw)
        assert len(_chats(srv)) == n
    assert again.ledger["cached"] == again.ledger["calls"] == n == replay.ledger["cached"]
    assert _stable(_lines(tmp_path / "a.jsonl")) == _stable(_lines(tmp_path / "b.jsonl")) \
        == _stable(_lines(tmp_path / "c.jsonl"))


def _cached_keys(path: Path) -> set:
    if not path.exists():
        return set()
    with sqlite3.connect(path) as db:
        keys = {row[0] for row in db.execute("SELECT key FROM replies")}
    return {k for k in keys if len(k) == 64}          # reply rows, not the version row


def test_kill_9_and_resume_repeat_no_completed_call(tmp_path):
    rows = [{"task_id": f"p{i}", "question": f"Question {i}?", "candidates": LETTERS,
             "gold": LETTERS[i % 4]} for i in range(2)]
    q = _write_questions(tmp_path / "q.jsonl", rows)
    with FakeServer(delay_s=0.03) as srv:
        cfg = _config(tmp_path / "c.toml", srv.base_url)
        out, cache = tmp_path / "log.jsonl", tmp_path / "cache.sqlite"
        cmd = [sys.executable, "-m", "bda_jax", "council", "broadcast", str(q), "--config",
               str(cfg), "--out", str(out), "--cache", str(cache), "--turns", "2",
               "--outer-rounds", "2", "--no-progress"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(_chats(srv)) < 12 and time.time() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not out.exists()
        before = _cached_keys(cache)
        n_first = len(_chats(srv))
        # the same command again (in this process: a fresh start of the run, the same cache)
        run_broadcast_files(q, cfg, out, cache_path=cache, turns=2, max_outer_rounds=2)
        resumed = [json.dumps(r, sort_keys=True) for r in _chats(srv)[n_first:]]
        clean = tmp_path / "clean.jsonl"
        summary = run_broadcast(read_questions(q), read_config(cfg), clean, turns=2,
                                max_outer_rounds=2, cache_path=tmp_path / "clean.sqlite")
    total = summary.ledger["calls"]
    assert 0 < len(before) < total
    assert len(resumed) == total - len(before)        # nothing cached before the kill is re-asked
    assert len(set(resumed)) == len(resumed)
    assert _stable(_lines(out)) == _stable(_lines(clean))
    assert not Path(f"{out}.partial").exists()
