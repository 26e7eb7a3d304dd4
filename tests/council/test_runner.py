"""The council runner end to end against the loopback fake server: traces that the strict reader,
the tally and the aggregators accept; reruns served from the cache; replay-only; parse failures
recorded as abstain; kill -9 and resume without repeating a cached request."""
import hashlib
import itertools
import json
import os
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
from bda_jax import Move  # noqa: E402
from bda_jax.aggregators import BDAPerAgent  # noqa: E402
from bda_jax.council import (TARGET_FORCES, LegalMoves, MoveReply, Question,  # noqa: E402
                             ReplyError, apply_move, label_seed, legal_moves, new_task_state,
                             next_round, parse_reply, read_config, read_questions,
                             record_abstain, run_council, to_trace, trace_task_id)

from cli_calls import invoke  # noqa: E402
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
    result = invoke("council", "run", qpath, "--config", cfg_path, "--out", tmp_path / "t.jsonl",
                    "--no-progress")
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
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


def test_a_rerun_with_new_questions_asks_only_for_them(tmp_path, server):
    """Tasks the cache holds whole are played at once, tasks with misses wait on the network:
    a rerun over more questions sends exactly the new tasks' requests, and the old tasks'
    traces are the first run's."""
    cfg = read_config(_config(tmp_path / "c.toml", server.base_url, rounds=2))
    cache = tmp_path / "cache.sqlite"
    run_council(read_questions(_questions(tmp_path / "q3.jsonl", 3)), cfg, tmp_path / "a.jsonl",
                cache_path=cache)
    n = len(_chat_requests(server))
    done = []
    summary = run_council(read_questions(_questions(tmp_path / "q5.jsonl", 5)), cfg,
                          tmp_path / "b.jsonl", cache_path=cache,
                          progress=lambda d, total, counters: done.append((d, total)))
    assert n == 3 * 6 and len(_chat_requests(server)) == n + 2 * 6
    assert summary.ledger["calls"] == 5 * 6 and summary.ledger["cached"] == 3 * 6
    assert done == [(k, 5) for k in range(6)]
    fresh = run_council(read_questions(tmp_path / "q5.jsonl"), cfg, tmp_path / "c.jsonl",
                        cache_path=tmp_path / "fresh.sqlite")
    assert fresh.n_tasks == 5
    again = traces_without_run_extras(tmp_path / "b.jsonl")
    assert again[:3] == traces_without_run_extras(tmp_path / "a.jsonl")
    assert again == traces_without_run_extras(tmp_path / "c.jsonl")


def test_a_replay_writes_the_partial_file_in_whole_lines(tmp_path, server):
    """A replay answers every task at once; its progress file gets the finished tasks' lines
    some tasks at a time (``PARTIAL_BATCH``), whole lines only, and is gone at the end."""
    from bda_jax.council import _runner  # private: the batch size the partial file is written in
    n = _runner.PARTIAL_BATCH + 6
    cfg = read_config(_config(tmp_path / "c.toml", server.base_url, rounds=1))
    questions = read_questions(_questions(tmp_path / "q.jsonl", n))
    cache, out = tmp_path / "cache.sqlite", tmp_path / "t.jsonl"
    run_council(questions, cfg, tmp_path / "live.jsonl", cache_path=cache)
    seen = []

    def progress(done, total, counters):
        text = Path(f"{out}.partial").read_text() if done else ""
        assert text == "" or text.endswith("\n")
        seen.append((done, len(text.splitlines())))

    run_council(questions, cfg, out, cache_path=cache, cache_mode="replay", progress=progress)
    assert seen[0] == (0, 0) and seen[-1][0] == n
    batch = _runner.PARTIAL_BATCH
    assert [lines for _, lines in seen[1:]] == [(d // batch) * batch for d, _ in seen[1:]]
    assert not Path(f"{out}.partial").exists()
    assert out.read_text() == (tmp_path / "live.jsonl").read_text().replace(
        '"cache_hit": false', '"cache_hit": true')


# ------------------------------------------------------------------ the protocol's fast paths
def _reference_trace(state):
    """The trace ``to_trace`` documents, made the long way: the record from its documented
    recipe, then ``parse_trace`` and the strict automaton (``resolve_trace``)."""
    q = state.question
    raw = {"task_id": trace_task_id(q, state.sample)}
    if q.candidates is not None:
        raw["candidates"] = list(q.candidates)
    if q.gold is not None:
        raw["gold"] = q.gold
    raw["cluster"] = q.cluster if q.cluster is not None else q.task_id
    raw["moves"] = [m.to_json() for m in state.moves]
    raw.update({k: v for k, v in q.extra.items() if k not in raw})
    raw.update({"question": q.question, "sample": state.sample, "labels": dict(state.labels)})
    trace = bda.parse_trace(raw)
    return trace, bda.resolve_trace(trace)


def _play(rng, question, seats, rounds=3, extra_forces=(), use_legal=True, abstain=0.1):
    """A task played with random legal moves (a seat's legal moves passed to apply_move as the
    runner passes them, or not), some seats recorded as abstain."""
    state = new_task_state(question, seats, seed=int(rng.integers(50)),
                           extra_forces=extra_forces)
    for r in range(rounds):
        if r:
            next_round(state)
        for seat in seats:
            legal = legal_moves(state, seat)
            if rng.random() < abstain:
                record_abstain(state, seat, "unusable", extra={"model": "m"})
                continue
            force = str(rng.choice(legal.forces))
            answer = target = None
            pool = legal.own_targets if force == "retract" else \
                [t for t in legal.targets if t not in legal.own_targets]
            if force in TARGET_FORCES and pool:
                target = str(rng.choice(pool))
            elif force != "abstain":
                force = "propose" if force in TARGET_FORCES else force
                answer = str(rng.choice(legal.answers)) if legal.answers else \
                    str(rng.choice(["Paris", " Lyon ", "42"]))
            apply_move(state, seat, MoveReply(force, answer, target, f"because {r}"),
                       extra={"model": "m", "latency_s": 0.25, "cache_hit": True},
                       legal=legal if use_legal else None)
    return state


def _same_as_reference(state):
    try:
        ref, resolved = _reference_trace(state)
    except bda.TraceError as err:
        with pytest.raises(bda.TraceError) as got:
            to_trace(state)
        assert (got.value.field, got.value.move_id) == (err.field, err.move_id)
        return False
    got = to_trace(state)
    assert got == ref and got.to_json() == ref.to_json()
    assert bda.resolve_trace(got) == resolved           # admissible, resolved alike
    return True


QUESTION = Question("q1", "Which?", ("A", "B", "C"), "B", None, {"source": "hand"})
OPEN = Question("o1", "Capital?", None, "Paris", "c7")


@pytest.mark.parametrize("question, extra_forces", [
    (QUESTION, ()), (QUESTION, ("retract", "vote", "abstain")), (OPEN, ("retract",))])
def test_to_trace_is_parse_trace_and_the_strict_automaton(question, extra_forces):
    """Random legal plays: the trace is the one parse_trace and resolve_trace give the task's
    documented record, its resolution too; for an open question nobody answered both raise."""
    rng = np.random.default_rng(3)
    ok = 0
    for k in range(40):
        state = _play(rng, question, ("s0", "s1", "s2"), extra_forces=extra_forces,
                      use_legal=k % 2 == 0, abstain=0.5 if k % 5 == 0 else 0.1)
        ok += _same_as_reference(state)
    assert ok > 30


def test_to_trace_of_a_task_changed_by_hand_checks_it_whole():
    """A move made by hand or with made-up legal moves, a round set back, a question swapped,
    seat names that are not canonical agent ids, fields to convert: to_trace gives (or refuses)
    exactly what parse_trace and the strict automaton give (or refuse)."""
    rng = np.random.default_rng(5)
    seats = ("s0", "s1", "s2")

    def played(question=QUESTION, names=seats):
        return _play(rng, question, names, abstain=0.0)

    s = played()
    s.moves.append(Move(f"m{len(s.moves) + 1}", "s0", 2, "propose", "A", extra={"argument": ""}))
    assert _same_as_reference(s)                                     # by hand, admissible
    s = played()
    s.moves.append(Move(f"m{len(s.moves) + 1}", "s0", 0, "propose", "A"))
    assert not _same_as_reference(s)                                 # a round set back
    s = played()
    s.round = -1
    apply_move(s, "s0", MoveReply("propose", "A", None, ""))
    assert not _same_as_reference(s)                                 # a negative round
    s = played()
    s.question = Question("q1", "Which?", ("X", "Y"), None)
    assert not _same_as_reference(s)                                 # answers not candidates
    s = played()
    next_round(s)
    apply_move(s, "s0", MoveReply("concede", None, "m99", ""),
               legal=LegalMoves(("concede",), QUESTION.candidates, ("m99",)))
    assert not _same_as_reference(s)                                 # made-up legal moves
    assert _same_as_reference(played(names=(" s0 ", "ｓ1", "s2")))   # agents normalized
    assert _same_as_reference(played(Question(7, "Which?", ("A", "B"), "  ", 3)))  # ints, blank
    assert not _same_as_reference(played(Question("q2", "Which?", ("A", "a"), None)))  # collide
    s = new_task_state(QUESTION, seats, seed=1)
    apply_move(s, "s0", MoveReply("propose", "A", None, ""), extra={"round": 7})
    assert _same_as_reference(s)                                     # an extra that is a field


def test_labels_and_label_seed_follow_the_documented_recipe():
    for seed, task, sample, n in itertools.product((0, 7, 2**40), ("q1", 'é "x"\n', "数"),
                                                   (0, 3), (1, 2, 3, 5)):
        text = json.dumps([seed, task, sample], separators=(",", ":"))
        number = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
        assert label_seed(seed, task, sample) == number
        names = [f"s{i}" for i in range(n)]
        state = new_task_state(Question(task, "?", ("A", "B")), names, seed=seed, sample=sample)
        perm = np.random.default_rng(number).permutation(n)
        assert state.labels == {s: f"Agent {p + 1}" for s, p in zip(names, perm)}


GOOD = '{"force": "propose", "answer": "A", "target": null, "argument": "x"}'


@pytest.mark.parametrize("raw, reason", [
    ("\ufeff" + GOOD, "not JSON"),                                    # a byte-order mark
    (GOOD + " and more", "not JSON"),
    (GOOD.replace('"answer"', '"force": "vote", "answer"'), "repeated key 'force'"),
    (GOOD.replace('"A"', '{"a": 1, "a": 2}'), "repeated key 'a'"),
    (GOOD.replace('"A"', '{"a": 1}'), "answer must be a string"),
    (GOOD.replace('"A"', '"a"'), None), ("\n  " + GOOD + " \n", None),
    ("```json\n" + GOOD + "\n```", None), (" ```\n\t" + GOOD + "\n``` ", None),
])
def test_a_cached_reply_is_judged_as_the_live_run_judged_it(raw, reason):
    """parse_reply reads a reply with the duplicate-refusing decoder however it is spelled:
    the fast read of a plain body changes no verdict and no reason."""
    legal = LegalMoves(("propose",), ("A", "B"), ())
    if reason is None:
        assert parse_reply(raw, legal) == MoveReply("propose", "A", None, "x")
    else:
        with pytest.raises(ReplyError, match=reason):
            parse_reply(raw, legal)
