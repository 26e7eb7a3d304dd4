"""The method machinery of ``bda_jax.council._methods``: scores of one answer (``answer_proba``),
a stored run's alignment to a tally, the run file's round trip and refusals, every method end
to end against the loopback fake server (reruns from the cache, replay-only, ledger channels),
non-reading methods blind to the trace, and method arms in ``bda_jax.evaluate``."""
import hashlib
import json
import re

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

import bda_jax as bda  # noqa: E402
from bda_jax import ArtifactError, DataError  # noqa: E402
from bda_jax import parse_trace  # noqa: E402
from bda_jax.council import (ArgLLMs, CouncilConfig, Endpoint, MethodRecord,  # noqa: E402
                             MethodRun, MoA, Question, Runtime, Seat, SelfMoA,
                             answer_proba, read_method_run, run_council, tasks_from_questions,
                             tasks_from_traces)

from council.fake_server import ROLE_MARK, FakeServer, has_role, request_kind  # noqa: E402

# the fake server's schema instances answer at random: a below-chance run is expected here
pytestmark = pytest.mark.filterwarnings("ignore::bda_jax.datasets.ParseWarning")

LETTERS = ("A", "B", "C", "D")


# --------------------------------------------------------------------------- helpers
def _endpoint(srv):
    return Endpoint("fake", srv.base_url, max_concurrency=8, timeout_s=5, max_retries=1)


def _seat(name, seed, temperature=0.5, role="honest"):
    return Seat(name, "fake", "deterministic", temperature, seed, role)


def _questions(n, golds=None):
    return [Question(f"q{i}", f"Question number {i}?", LETTERS,
                     LETTERS[i % 4] if golds is None else golds[i]) for i in range(n)]


def _bodies(requests):
    return sorted(json.dumps(r, sort_keys=True) for r in requests)


def _council(srv, tmp_path, qs, adversaries=(), name="t"):
    seats = tuple(_seat(f"s{i}", 100 * (i + 1), role="adversary" if f"s{i}" in adversaries
                        else "honest") for i in range(3))
    cfg = CouncilConfig(rounds=2, seed=7, endpoints={"fake": _endpoint(srv)}, seats=seats)
    out = tmp_path / f"{name}.jsonl"
    run_council(qs, cfg, out, cache_path=tmp_path / f"{name}.sqlite")
    return bda.read_traces(out)


def _distinct_arguments(body):
    """Generator replies whose argument texts name the claim they bear on (so no two argument
    requests of a run are the same request); every other reply is the schema instance."""
    if request_kind(body) != "arguments":
        return None
    claim = re.search(r"Claim: (.*?)\n\nWrite", body["messages"][-1]["content"], re.S).group(1)
    tag = hashlib.sha256(claim.encode()).hexdigest()[:12]
    return json.dumps({"supporters": [f"for {tag}"], "attackers": [f"against {tag}"]})


def _runtime(srv, **kw):
    return Runtime({"fake": _endpoint(srv)}, **kw)


def _trace(tid, cands, gold, answers, question="What is it?"):
    moves = [{"id": f"m{i}", "agent": f"s{i}", "round": 0, "force": "propose", "answer": a}
             for i, a in enumerate(answers)]
    return parse_trace({"task_id": tid, "candidates": list(cands), "gold": gold, "moves": moves,
                        "question": question})


def _record(tid, cands, answer, conf, *, gold=None, proba=None, rule="schema", corrupted=0,
            evidence=0, detail=None):
    proba = tuple(answer_proba(answer, conf, cands)) if proba is None else tuple(proba)
    return MethodRecord(tid, 0, tuple(cands), gold, answer, conf, proba, rule, corrupted,
                        evidence, dict(detail or {}))


def _run(records, **kw):
    base = dict(method="stub", reads_council=False, attack=False, records=list(records),
                ledger={"calls": 0, "cached": 0}, channels={})
    base.update(kw)
    return MethodRun(**base)


# --------------------------------------------------------------------------- answer_proba
def test_answer_proba_hand_values():
    # p(answer) = confidence, the rest spread evenly: (1 - 0.7) / 3 = 0.1 each
    np.testing.assert_allclose(answer_proba("B", 0.7, LETTERS), [0.1, 0.7, 0.1, 0.1])
    np.testing.assert_allclose(answer_proba("A", 0.9, ("A", "B")), [0.9, 0.1])
    np.testing.assert_allclose(answer_proba("C", 0.4, ("A", "B", "C")), [0.3, 0.3, 0.4])
    np.testing.assert_allclose(answer_proba("D", 1.0, LETTERS), [0, 0, 0, 1])


def test_answer_proba_clips_at_chance_so_no_other_candidate_wins():
    # 0.1 < 1/4: the answer gets 1/4, the other three share 3/4 -> uniform, never above it
    p = answer_proba("C", 0.1, LETTERS)
    np.testing.assert_allclose(p, [0.25] * 4)
    assert p[2] >= p.max()
    np.testing.assert_allclose(answer_proba("A", 0.0, ("A", "B", "C")), [1 / 3] * 3)
    np.testing.assert_allclose(answer_proba("B", 0.2, ("A", "B")), [0.5, 0.5])


def test_answer_proba_without_answer_is_uniform_and_without_confidence_one_hot():
    np.testing.assert_allclose(answer_proba(None, 0.9, LETTERS), [0.25] * 4)
    np.testing.assert_allclose(answer_proba(None, None, ("x", "y", "z")), [1 / 3] * 3)
    np.testing.assert_allclose(answer_proba("B", None, LETTERS), [0, 1, 0, 0])
    for args in (("B", 0.7), ("A", 0.05), (None, None), ("D", None)):
        assert answer_proba(*args, LETTERS).sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------- a run's scores
def _three_traces():
    return [_trace("t0", ("A", "B", "C"), "C", ["A", "B", "C"]),
            _trace("t1", ("x", "y"), "y", ["x", "y"]),
            _trace("t2", ("A", "B", "C"), "A", ["A", "A", "B"])]


def test_method_proba_moves_scores_to_the_tally_slots():
    traces = _three_traces()
    run = _run([                              # records in another order and candidate order
        _record("t2", ("B", "A", "C"), None, None, gold="A"),
        _record("t0", ("C", "A", "B"), "C", None, gold="C", proba=(0.6, 0.3, 0.1)),
        _record("t1", ("Y", "x"), "Y", None, gold="y", proba=(0.8, 0.2)),
    ])
    proba, pred = run.method_proba(traces)
    # t0: C -> slot 2 (0.6), A -> slot 0 (0.3), B -> slot 1 (0.1); t1: "Y" is "y" after the
    # normalizer -> slot 1; t2 committed to nothing: uniform and -1; slot 2 of t1 is padding
    np.testing.assert_allclose(proba, [[0.3, 0.1, 0.6], [0.2, 0.8, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    assert pred.tolist() == [2, 1, -1]
    again = run.method_proba(traces, bda.tally(traces))
    np.testing.assert_array_equal(again[0], proba)
    np.testing.assert_array_equal(again[1], pred)


def test_method_proba_refuses_a_missing_task_and_another_candidate_set():
    traces = _three_traces()
    short = _run([_record("t0", ("A", "B", "C"), "A", 0.9), _record("t1", ("x", "y"), "x", 0.9)])
    with pytest.raises(DataError) as err:
        short.method_proba(traces)
    assert err.value.task_id == "t2" and err.value.field == "task_id"
    other = _run([_record("t0", ("A", "B", "C"), "A", 0.9), _record("t1", ("x", "y"), "x", 0.9),
                  _record("t2", ("A", "B", "D"), "A", 0.9)])
    with pytest.raises(DataError) as err:
        other.method_proba(traces)
    assert err.value.task_id == "t2" and err.value.field == "candidates"
    fewer = _run([_record("t0", ("A", "B"), "A", 0.9), _record("t1", ("x", "y"), "x", 0.9),
                  _record("t2", ("A", "B", "C"), "A", 0.9)])
    with pytest.raises(DataError) as err:
        fewer.method_proba(traces)
    assert err.value.task_id == "t0" and err.value.field == "candidates"


def test_parse_calibration_and_gamma_by_hand():
    run = _run([
        _record("t0", LETTERS, "A", 0.9, gold="A", corrupted=2, evidence=3),
        _record("t1", LETTERS, "B", 0.5, gold="A", rule="extract:final", evidence=3),
        _record("t2", LETTERS, None, None, gold="A", rule=None, corrupted=3, evidence=3),
        _record("t3", ("A", "B"), "A", None, gold=None, rule="judge",
                detail={"judge": {"text": "t", "verdict": "A", "answer": "A", "model": "m",
                                  "cached": False}}),
    ])
    p = run.parse
    assert p["rate"] == 3 / 4
    assert p["rules"] == {"None": 1, "extract:final": 1, "judge": 1, "schema": 1}
    assert p["judged"] == 1
    # committed and labeled: t0 (right), t1 (wrong); chance = mean of 1/4, 1/4
    assert p["accuracy_committed"] == 0.5 and p["chance"] == 0.25 and p["tripwire"] is False
    # stated confidences of committed answers: 0.9, 0.5 -> population sd 0.2
    assert run.calibration["confidence_sd"] == pytest.approx(0.2)
    assert run.calibration["applicable"] is True
    # corrupted fractions 2/3, 0/3, 3/3, 0 (no evidence) -> mean 5/12
    assert run.gamma == pytest.approx((2 / 3 + 0 + 1 + 0) / 4)
    assert run.judge_ledger() == [{"task_id": "t3", "sample": 0, "text": "t", "verdict": "A",
                                   "answer": "A", "model": "m", "cached": False}]
    flat = _run([_record(f"t{i}", LETTERS, "A", c, gold="A") for i, c in
                 enumerate((0.8, 0.8, 0.82))])
    assert flat.calibration["confidence_sd"] < 0.05 and flat.calibration["applicable"] is False


# --------------------------------------------------------------------------- run files
def _stored_run():
    return _run([
        _record("q0", LETTERS, "B", 0.7, gold="B", corrupted=1, evidence=3,
                detail={"synthesis": "{...}"}),
        _record("q1", LETTERS, None, None, gold="A", rule=None,
                detail={"judge": {"text": "hmm", "verdict": "NONE", "answer": None,
                                  "model": "deterministic", "cached": False}}),
        _record("q2#s1", ("yes", "no"), "no", None, gold=None, rule="extract:final"),
    ], method="moa", reads_council=True, attack=True,
        ledger={"calls": 7, "cached": 2, "cost": None},
        channels={"synthesizer": {"calls": 7, "cached": 2, "tokens": 40, "cost": None}},
        settings={"n_proposers": 3, "adversaries": ["s1", "s2"]})


def test_method_run_write_read_round_trip(tmp_path):
    run = _stored_run()
    path = run.write(tmp_path / "run.json")
    back = read_method_run(path)
    assert back.records == run.records
    assert (back.method, back.reads_council, back.attack) == ("moa", True, True)
    assert back.ledger == run.ledger and back.channels == run.channels
    assert back.settings == run.settings
    assert back.parse == run.parse and back.calibration == run.calibration
    assert back.judge_ledger() == run.judge_ledger() and len(back.judge_ledger()) == 1
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["kind"] == "bda_jax.method_run" and doc["schema_version"] == 1
    assert doc["gamma"] == pytest.approx((1 / 3 + 0 + 0) / 3)
    assert len(doc["records"]) == 3 and doc["judge_ledger"][0]["verdict"] == "NONE"


def test_read_method_run_refuses_what_it_cannot_read(tmp_path):
    good = json.loads(json.dumps(_stored_run().to_json()))
    cases = {"kind.json": {**good, "kind": "bda_jax.council_manifest"},
             "version.json": {**good, "schema_version": 99},
             "list.json": [good],
             "record.json": {**good, "records": [{"task_id": "q0"}]}}
    for name, doc in cases.items():
        (tmp_path / name).write_text(json.dumps(doc))
    (tmp_path / "text.json").write_text("not json at all\n")
    (tmp_path / "cut.json").write_text(json.dumps(good)[:40])
    for name, words in [("kind.json", "not a bda_jax method run"),
                        ("version.json", "schema version"), ("list.json", "not a bda_jax"),
                        ("record.json", "unreadable"), ("text.json", "JSON"),
                        ("cut.json", "truncated"), ("missing.json", "cannot open")]:
        with pytest.raises(ArtifactError, match=words) as err:
            read_method_run(tmp_path / name)
        assert err.value.file == str(tmp_path / name)


def test_read_method_run_refuses_a_malformed_ledger(tmp_path):
    doc = {**json.loads(json.dumps(_stored_run().to_json())), "ledger": "oops"}
    (tmp_path / "ledger.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError):
        read_method_run(tmp_path / "ledger.json")


# --------------------------------------------------------------------------- tasks
def test_tasks_from_questions_and_traces(tmp_path):
    qs = _questions(2)
    tasks = tasks_from_questions(qs, samples=2)
    assert [(t.task_id, t.sample) for t in tasks] == [("q0", 0), ("q0#s1", 1), ("q1", 0),
                                                     ("q1#s1", 1)]
    assert all(t.trace is None and t.candidates == LETTERS for t in tasks)
    with pytest.raises(DataError) as err:
        tasks_from_questions([Question("open", "How many?")])
    assert err.value.field == "candidates" and err.value.task_id == "open"
    tr = _trace("x#s3", ("A", "B"), "B", ["A", "B"])
    tr = parse_trace({**tr.to_json(), "sample": 3})
    (task,) = tasks_from_traces([tr])
    assert (task.task_id, task.sample, task.question.task_id) == ("x#s3", 3, "x")
    assert task.question.question == "What is it?" and task.question.gold == "B"
    bare = parse_trace({"task_id": "n", "candidates": ["A", "B"],
                        "moves": [{"id": "m0", "agent": "s0", "round": 0, "force": "propose",
                                   "answer": "A"}]})
    with pytest.raises(DataError) as err:
        tasks_from_traces([bare])
    assert err.value.field == "question" and err.value.task_id == "n"


# --------------------------------------------------------------------------- end to end
def _methods(rt):
    """One of every method that runs on questions (MoA with its own proposers)."""
    return {
        "self-moa": SelfMoA(rt, _seat("sampler", 40), _seat("synth", 50, 0.0), n_samples=3),
        "argllms": ArgLLMs(rt, _seat("gen", 60), _seat("eval", 70, 0.0)),
        "moa-own": MoA(rt, _seat("synth", 50, 0.0),
                       own_proposers=[_seat(f"p{i}", 80 + i) for i in range(3)]),
    }


@pytest.mark.parametrize("which, per_task, channels", [
    ("self-moa", 3 + 1, {"sampler": 3, "synthesizer": 1}),
    # two candidates x (1 generator call + 3 scored arguments: root, supporter, attacker)
    ("argllms", 2 * (1 + 3), {"generator": 2, "evaluator": 6}),
    ("moa-own", 3 + 1, {"proposer": 3, "synthesizer": 1}),
])
def test_rerun_is_cached_and_replay_sends_nothing(tmp_path, which, per_task, channels):
    qs = [Question(f"q{i}", f"Is {i} even?", ("yes", "no"), "yes" if i % 2 == 0 else "no")
          for i in range(3)]
    cache = tmp_path / "cache.sqlite"
    with FakeServer(responder=_distinct_arguments) as srv:
        first = _methods(_runtime(srv, cache_path=str(cache)))[which].run(qs)
        n = len(srv.requests)
        assert n == first.ledger["calls"] == 3 * per_task and first.ledger["cached"] == 0
        assert {k: v["calls"] for k, v in first.channels.items()} == \
            {k: 3 * v for k, v in channels.items()}
        again = _methods(_runtime(srv, cache_path=str(cache)))[which].run(qs)
        assert len(srv.requests) == n
        assert again.ledger["calls"] == again.ledger["cached"] == n
        assert all(v["cached"] == v["calls"] for v in again.channels.values())
        replay = _methods(_runtime(srv, cache_path=str(cache), cache_mode="replay"))[which]
        out = tmp_path / "run.json"
        replayed = replay.run(qs, out=out)
        assert len(srv.requests) == n
    assert first.records == again.records == replayed.records
    assert [r.task_id for r in first.records] == ["q0", "q1", "q2"]
    assert read_method_run(out).records == first.records
    assert not (tmp_path / "run.json.partial").exists()
    assert replay.run_ is replayed


def test_progress_and_the_partial_file(tmp_path):
    seen = []
    out = tmp_path / "run.json"

    def progress(done, total, counters):
        seen.append((done, total))
        if 0 < done < total:                  # finished tasks are on disk while running
            lines = (tmp_path / "run.json.partial").read_text().splitlines()
            assert len(lines) == done and all(json.loads(x)["task_id"] for x in lines)
    with FakeServer() as srv:
        m = SelfMoA(_runtime(srv), _seat("sampler", 1), _seat("synth", 2, 0.0), n_samples=1)
        run = m.run(_questions(3), out=out, progress=progress)
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) == 4
    assert read_method_run(out).records == run.records
    assert not (tmp_path / "run.json.partial").exists()


def test_replay_without_the_reply_fails_and_needs_a_cache(tmp_path):
    qs = _questions(1)
    with FakeServer() as srv:
        rt = _runtime(srv, cache_path=str(tmp_path / "none.sqlite"), cache_mode="replay")
        with pytest.raises(bda.BdaError):
            SelfMoA(rt, _seat("sampler", 1), _seat("synth", 2, 0.0), n_samples=1).run(qs)
        assert srv.requests == []


def test_methods_refuse_wrong_inputs(tmp_path):
    with FakeServer() as srv:
        rt = _runtime(srv)
        with pytest.raises(DataError) as err:
            SelfMoA({"fake": None}, _seat("a", 1), _seat("b", 2))
        assert err.value.field == "runtime"
        reader = MoA(rt, _seat("synth", 1, 0.0))
        with pytest.raises(DataError, match="reads the council"):
            reader.run(_questions(2))
        with pytest.raises(DataError) as err:
            reader.run([])
        assert err.value.field == "data"
        with pytest.raises(DataError, match="expected a list"):
            reader.run([_questions(1)[0], "text"])
        with pytest.raises(DataError) as err:
            SelfMoA(rt, _seat("a", 1), _seat("b", 2), n_samples=0)
        assert err.value.field == "n_samples"
        with pytest.raises(DataError) as err:
            MoA(rt, _seat("synth", 1), surfaces="first")
        assert err.value.field == "surfaces"
        with pytest.raises(DataError, match="not on Counts"):
            reader.method_proba(bda.tally(_three_traces()))
        assert srv.requests == []


def test_predict_surfaces_on_questions():
    qs = [Question("a", "Pick?", ("x", "y", "z"), "x"), Question("b", "Pick?", ("p", "q"), "q")]
    with FakeServer() as srv:
        m = SelfMoA(_runtime(srv), _seat("sampler", 1), _seat("synth", 2, 0.0), n_samples=2)
        proba = m.predict_proba(qs)
        pred = m.predict(qs)
    run = m.run_
    assert proba.shape == (2, 3) and proba[1, 2] == 0.0          # padded to K_max
    for t, rec in enumerate(run.records):
        np.testing.assert_allclose(proba[t, :len(rec.candidates)], rec.proba)
        assert pred[t] == (-1 if rec.answer is None else rec.candidates.index(rec.answer))
    assert m.fit() is m


def test_non_reading_methods_send_the_same_requests_on_clean_and_attacked_traces(tmp_path):
    qs = _questions(2)
    with FakeServer(responder=_distinct_arguments) as srv:
        clean = _council(srv, tmp_path, qs, name="clean")
        attacked = _council(srv, tmp_path, qs, adversaries=("s1", "s2"), name="attacked")
        # the two councils did differ: the adversaries' requests carry the role
        assert any(has_role(b) for b in srv.requests)
        sent = {}
        for label, data in (("clean", clean), ("attacked", attacked), ("questions", qs)):
            for which in ("self-moa", "argllms"):
                n = len(srv.requests)
                m = _methods(_runtime(srv, cache_mode="off"))[which]
                m.run(data)
                sent[label, which] = _bodies(srv.requests[n:])
            n = len(srv.requests)
            if label != "questions":          # a council reader does see the traces
                MoA(_runtime(srv, cache_mode="off"), _seat("synth", 50, 0.0)).run(data)
                sent[label, "moa"] = _bodies(srv.requests[n:])
    for which in ("self-moa", "argllms"):
        assert sent["clean", which] == sent["attacked", which] == sent["questions", which]
        assert sent["clean", which] and not any(ROLE_MARK in b for b in sent["clean", which])
        assert len(set(sent["clean", which])) == len(sent["clean", which])   # no repeats
    assert sent["clean", "moa"] != sent["attacked", "moa"]


def test_non_reading_method_tasks_never_hold_the_trace(tmp_path):
    with FakeServer() as srv:
        traces = _council(srv, tmp_path, _questions(2))
        rt = _runtime(srv)
        assert all(t.trace is None for t in _methods(rt)["self-moa"].tasks(traces))
        assert all(t.trace is not None for t in MoA(rt, _seat("s", 1, 0.0)).tasks(traces))


# --------------------------------------------------------------------------- evaluate
def test_evaluate_scores_a_non_commitment_wrong_by_hand():
    traces = [_trace(f"t{i}", ("A", "B"), "A", ["A", "B"]) for i in range(4)]
    run = _run([_record("t0", ("A", "B"), "A", 0.9, gold="A"),
                _record("t1", ("A", "B"), "B", 0.8, gold="A"),
                _record("t2", ("A", "B"), None, None, gold="A", rule=None),  # uniform, pred -1
                _record("t3", ("A", "B"), "A", None, gold="A")],
               method="hand")
    ev = bda.evaluate(traces, ["majority", run], folds=np.array([0, 1, 0, 1]),
                      n_resamples=50)
    row = {r["arm"]: r for r in ev.table}["hand"]
    assert row["accuracy"] == pytest.approx(2 / 4)       # t2 is wrong whatever its tie
    assert row["n"] == 4
    # multiclass Brier: 0.02, 1.28, 0.5, 0 -> mean 0.45
    assert row["brier_mc"] == pytest.approx(0.45, abs=1e-6)
    np.testing.assert_allclose(ev.proba["hand"], [[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [1, 0]])
    assert ev.methods["hand"]["reads_council"] is False


def test_evaluate_with_a_method_arm_and_its_stored_run(tmp_path):
    qs = _questions(8)
    with FakeServer() as srv:
        traces = _council(srv, tmp_path, qs)
        method = MoA(_runtime(srv), _seat("synth", 50, 0.0), adversaries=("s2",))
        n = len(srv.requests)
        ev = bda.evaluate(traces, ["majority", method], n_resamples=200)
        assert len(srv.requests) == n + 8                   # one synthesizer call per task
        path = method.run_.write(tmp_path / "moa.json")
        stored = read_method_run(path)
        n = len(srv.requests)
        again = bda.evaluate(traces, ["majority", stored], n_resamples=200)
        assert len(srv.requests) == n                        # a stored run sends nothing
    rows = {r["arm"]: r for r in ev.table}
    assert list(rows) == ["majority", "moa"]
    assert "moa" in ev.bootstrap and set(ev.bootstrap["moa"]) == {"accuracy", "brier_mc"}
    info = ev.methods["moa"]
    assert set(info) == {"reads_council", "gamma", "parse", "calibration", "ledger"}
    assert info["reads_council"] is True and info["gamma"] == pytest.approx(1 / 3)
    assert info["ledger"]["calls"] == 8
    # the method row, by hand from the run's records (a non-commitment is wrong)
    recs = method.run_.records
    right = [r.answer is not None and r.answer == r.gold for r in recs]
    assert rows["moa"]["accuracy"] == pytest.approx(np.mean(right))
    assert rows["moa"]["n"] == 8
    assert {r["arm"]: r for r in again.table}["moa"] == rows["moa"]
    assert again.bootstrap["moa"] == ev.bootstrap["moa"]
    assert again.methods["moa"] == info
    json.dumps(ev.to_json(), allow_nan=False)                # strict JSON
