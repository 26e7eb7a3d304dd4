"""The live ensemble and the live broadcast protocol against the fake server's faults, as the
council runner is: a 429 or a 500 on each first try is retried and the run completes with the
same answers as a clean server gives; a model the server refuses stops the run with one line
naming the endpoint and the model; a truncated reply is an unusable answer, never a guess."""
import json

import pytest

pytest.importorskip("openai")

from bda_jax.council import (CouncilConfig, Endpoint, EnsembleSettings, Question, Seat,  # noqa: E402
                             UpstreamError, run_broadcast, run_ensemble)

from council.fake_server import FakeServer  # noqa: E402


def _config(url, model):
    return CouncilConfig(max_reasks=0, endpoints={"fake": Endpoint(
        "fake", url, max_concurrency=4, timeout_s=10, max_retries=2)},
        seats=tuple(Seat(f"s{i}", "fake", model, 0.7, i) for i in range(3)))


QS = [Question(f"q{i}", f"Problem {i}?", ("A", "B", "C"), "A") for i in range(3)]
SETTINGS = EnsembleSettings(rule="fixed", rounds=2)


def _ensemble(tmp_path, srv, model, name):
    out = tmp_path / f"{name}.jsonl"
    summary = run_ensemble(QS, _config(srv.base_url, model), out, settings=SETTINGS,
                           cache_mode="off")
    return summary, [json.loads(line)["history"] for line in open(out)]


@pytest.mark.parametrize("fault", ["fault-429", "fault-500"])
def test_ensemble_retries_transient_faults(tmp_path, fault):
    with FakeServer() as srv:
        summary, history = _ensemble(tmp_path, srv, fault, "faulty")
    assert summary.ledger["retries"] == summary.ledger["calls"] == 3 * 3 * 2
    with FakeServer() as srv:
        _, clean = _ensemble(tmp_path, srv, "deterministic", "clean")
    # the fake server's answers depend on the request body, not on the model's fault: the
    # retried run answered every call and the free-text replies read the same (no commitment)
    assert [[h["norms"] for h in p] for p in history] == [[h["norms"] for h in p] for p in clean]


def test_protocols_stop_on_a_refused_model_with_one_line(tmp_path):
    with FakeServer() as srv:
        with pytest.raises(UpstreamError) as err:
            run_ensemble(QS, _config(srv.base_url, "no-such-model"), tmp_path / "e.jsonl",
                         settings=SETTINGS, cache_mode="off")
        assert "\n" not in str(err.value) and "no-such-model" in str(err.value)
        assert "'fake'" in str(err.value) and err.value.status == 404
        with pytest.raises(UpstreamError) as err:
            run_broadcast(QS, _config(srv.base_url, "no-such-model"), tmp_path / "b.jsonl",
                          turns=1, max_outer_rounds=1, evaluator="exact", cache_mode="off")
        assert "\n" not in str(err.value) and err.value.status == 404
    assert not (tmp_path / "e.jsonl").exists() and not (tmp_path / "b.jsonl").exists()


def test_truncated_replies_are_empty_answers_and_unusable_polls(tmp_path):
    with FakeServer() as srv:
        summary, history = _ensemble(tmp_path, srv, "fault-truncated", "cut")
        assert summary.n_problems == 3
        out = tmp_path / "b.jsonl"
        run_broadcast(QS, _config(srv.base_url, "fault-truncated"), out, turns=1,
                      max_outer_rounds=1, evaluator="exact", cache_mode="off")
    lines = [json.loads(line) for line in open(out)]
    polls = [x for x in lines if x["kind"] == "poll"]
    assert len(polls) == 3 * 3                     # every agent polled, every poll unusable
    assert all(p["score"] is None and p["candidate"] is None and p["error"] for p in polls)
    speaks = [x for x in lines if x["kind"] == "speak"]
    assert len(speaks) == 3 and all(x["spoken"] is None for x in speaks)   # nothing guessed
    assert all(a == "empty" for p in history for h in p for a in h["norms"])
