"""Reading a committed answer out of a method's reply ([BDA] Appendix D.3): the schema field
wins, then the candidate-restricted extractor (letters, numbers, True/False, yes/no/maybe), then
the frozen judge on exactly the residual; its verdicts in the run's judge ledger; and the
sub-chance tripwire (``bda_jax.datasets.ParseWarning``) on labeled tasks."""
import asyncio
import json
import re
import warnings

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

from bda_jax.council import (ChatReply, Endpoint, Judge, MethodTask, Question,  # noqa: E402
                             Runtime, Seat, SelfMoA, commitment, read_method_run)
from bda_jax.council import json_object, match_candidate  # noqa: E402
from bda_jax.datasets import ParseWarning  # noqa: E402

from council.fake_server import FakeServer  # noqa: E402

LETTERS = ("A", "B", "C", "D")


# --------------------------------------------------------------------------- pieces
def test_json_object():
    assert json_object('{"answer": "B"}') == {"answer": "B"}
    assert json_object('  ```json\n{"answer": "B", "confidence": 0.5}\n```  ') == \
        {"answer": "B", "confidence": 0.5}
    assert json_object("```\n{\"a\": 1}\n```") == {"a": 1}
    assert json_object('["B"]') is None                  # JSON, but not an object
    assert json_object("Answer: B") is None
    assert json_object('{"answer": "B"') is None         # cut short
    assert json_object(None) is None and json_object(3) is None


def test_match_candidate():
    assert match_candidate("B", LETTERS) == "B"
    assert match_candidate(" b ", LETTERS) == "B"         # through the default normalizer
    assert match_candidate("(C)", LETTERS) == "C"
    assert match_candidate("true", ("True", "False")) == "True"
    assert match_candidate("E", LETTERS) is None
    assert match_candidate("", LETTERS) is None
    assert match_candidate(None, LETTERS) is None and match_candidate(2, ("1", "2")) is None


def _task(candidates=LETTERS, question="Which one?", gold=None):
    q = Question("t", question, tuple(candidates), gold)
    return MethodTask("t", q, tuple(candidates))


def _commit(text, structured=None, candidates=LETTERS, judge=None, caller=None):
    return asyncio.run(commitment(caller, _task(candidates), text, structured, judge))


@pytest.mark.parametrize("text, structured, candidates, answer, rule", [
    # the schema field wins, even over a different answer in the text
    ("I think the answer is (C).", "B", LETTERS, "B", "schema"),
    ("", "maybe", ("yes", "no", "maybe"), "maybe", "schema"),
    # a field that is no candidate: the text is read instead
    ("Weighing it up.\nAnswer: C", "E", LETTERS, "C", "extract:final"),
    ("Weighing it up: the answer: C", "E", LETTERS, "C", "extract:answer_is"),
    ("Therefore the answer is B, not A.", None, LETTERS, "B", "extract:answer_is"),
    ("Long reasoning about (A) and (C)... so the answer is **(B)**.", None, LETTERS, "B",
     "extract:final"),
    ("Adding them gives 42.", None, ("41", "42", "43"), "42", "extract:last_number"),
    ("The total is 1,234 dollars", None, ("1234", "999"), "1234", "extract:answer_is"),
    ("It is plainly correct, so the answer is TRUE.", None, ("True", "False"), "True",
     "extract:final"),
    ("The answer is maybe, given what we know", None, ("yes", "no", "maybe"), "maybe",
     "extract:answer_is"),
    # nothing committed: never guessed
    ("I think B is wrong and A too", None, LETTERS, None, None),
    ("Adding them gives 44.", None, ("41", "42", "43"), None, None),
    ("No doubt, yes and no are both defensible here.", None, ("yes", "no", "maybe"), None, None),
    ("", None, LETTERS, None, None),
])
def test_commitment_without_a_judge(text, structured, candidates, answer, rule):
    assert _commit(text, structured, candidates) == (answer, rule, {})


class StubCaller:
    """A caller whose judge answers are scripted; records every request."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    async def chat(self, seat, messages, *, task, channel, schema=None, draw=0):
        self.calls.append({"seat": seat, "messages": messages, "channel": channel,
                           "schema": schema})
        return ChatReply(text=self.replies.pop(0), prompt_tokens=1, completion_tokens=1,
                         latency_s=0.0, cached=False, model="judge-model")


JUDGE = Seat("judge", "fake", "deterministic", 0.0, 5)


@pytest.mark.parametrize("reply, verdict, answer", [
    ('{"verdict": "C"}', "C", "C"),
    ('{"verdict": "a"}', "A", "A"),
    ('{"verdict": "NONE"}', "NONE", None),
    ("B.", "B", "B"),                                   # a prose verdict of one letter
    ('{"verdict": "E"}', None, None),                    # no such option: unusable
    ("I think it is A", None, None),
    ('{"verdict": 3}', None, None),
])
def test_judge_verdicts(reply, verdict, answer):
    caller = StubCaller(reply)
    got, row = asyncio.run(Judge(JUDGE)(caller, _task(), "some prose"))
    assert got == answer
    assert row == {"text": "some prose", "verdict": verdict, "answer": answer,
                   "model": "judge-model", "cached": False}
    (call,) = caller.calls
    assert call["channel"] == "judge" and call["seat"] is JUDGE
    assert call["schema"]["properties"]["verdict"]["enum"] == ["A", "B", "C", "D", "NONE"]
    user = call["messages"][-1]["content"]
    assert "A) A\nB) B\nC) C\nD) D" in user and "some prose" in user


def test_judge_letters_map_to_word_candidates():
    caller = StubCaller('{"verdict": "B"}')
    got, row = asyncio.run(Judge(JUDGE)(caller, _task(("yes", "no", "maybe")), "hmm"))
    assert got == "no" and row["verdict"] == "B"
    assert "A) yes\nB) no\nC) maybe" in caller.calls[0]["messages"][-1]["content"]


def test_the_judge_sees_only_the_residual():
    judge = Judge(JUDGE)
    caller = StubCaller('{"verdict": "D"}', '{"verdict": "NONE"}')
    assert _commit("Answer: C", "B", judge=judge, caller=caller) == ("B", "schema", {})
    assert _commit("Answer: C", None, judge=judge, caller=caller) == ("C", "extract:final", {})
    assert _commit("   ", None, judge=judge, caller=caller) == (None, None, {})
    assert caller.calls == []
    answer, rule, detail = _commit("I lean towards the last option.", judge=judge,
                                   caller=caller)
    assert (answer, rule) == ("D", "judge") and detail["judge"]["verdict"] == "D"
    answer, rule, detail = _commit("I cannot tell.", judge=judge, caller=caller)
    assert (answer, rule) == (None, None) and detail["judge"]["verdict"] == "NONE"
    assert len(caller.calls) == 2


# --------------------------------------------------------------------------- end to end
def _endpoint(srv):
    return Endpoint("fake", srv.base_url, max_concurrency=8, timeout_s=5, max_retries=1)


def _seat(name, seed, temperature=0.5):
    return Seat(name, "fake", "deterministic", temperature, seed)


def _kind(body):
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name") if fmt else "text"


def _number(body):
    return int(re.search(r"Question: Question number (\d+)\?", body["messages"][-1]["content"])
               .group(1))


def _questions(n, golds):
    return [Question(f"q{i}", f"Question number {i}?", LETTERS, golds[i]) for i in range(n)]


# per question number: the synthesizer's reply and, for the residual, the judge's verdict
SYNTH = {0: json.dumps({"rationale": "r", "answer": "A", "confidence": 0.8}),
         1: "After weighing the responses, the answer is (C).",
         2: "The responses disagree and I will not pick one.",
         3: json.dumps({"rationale": "r", "answer": "B", "confidence": 0.6}),
         4: "Answer: D",
         5: "Too close to call between the options."}
VERDICT = {2: "B", 5: "NONE"}


def _scripted(body):
    kind = _kind(body)
    if kind == "synthesis":
        return SYNTH[_number(body)]
    if kind == "verdict":
        return json.dumps({"verdict": VERDICT[_number(body)]})
    return None


def _self_moa(srv, cache, **kw):
    rt = Runtime({"fake": _endpoint(srv)}, cache_path=str(cache), **kw)
    return SelfMoA(rt, _seat("sampler", 1), _seat("synth", 2, 0.0), n_samples=1,
                   judge=Seat("judge", "fake", "deterministic", 0.0, 77))


def test_schema_extractor_and_judge_end_to_end(tmp_path):
    qs = _questions(6, ["A", "C", "B", "A", "D", "A"])
    with FakeServer(responder=_scripted) as srv:
        run = _self_moa(srv, tmp_path / "c.sqlite").run(qs)
        judged = [b for b in srv.requests if _kind(b) == "verdict"]
        n = len(srv.requests)
        # the judge is asked about exactly the two prose replies that commit to nothing
        assert sorted(_number(b) for b in judged) == [2, 5]
        for b in judged:
            assert b["temperature"] == 0.0 and b["seed"] == 77
            assert SYNTH[_number(b)] in b["messages"][-1]["content"]
        again = _self_moa(srv, tmp_path / "c.sqlite").run(qs)
        assert len(srv.requests) == n                        # the verdicts come from the cache
        replay = _self_moa(srv, tmp_path / "c.sqlite", cache_mode="replay").run(qs)
        assert len(srv.requests) == n
    by_id = {r.task_id: r for r in run.records}
    assert [(by_id[f"q{i}"].answer, by_id[f"q{i}"].rule) for i in range(6)] == [
        ("A", "schema"), ("C", "extract:final"), ("B", "judge"), ("B", "schema"),
        ("D", "extract:final"), (None, None)]
    assert by_id["q0"].confidence == 0.8 and by_id["q2"].confidence is None
    np.testing.assert_allclose(by_id["q5"].proba, [0.25] * 4)
    assert run.channels["judge"]["calls"] == 2
    ledger = run.judge_ledger()
    assert [(row["task_id"], row["verdict"], row["answer"], row["cached"]) for row in ledger] \
        == [("q2", "B", "B", False), ("q5", "NONE", None, False)]
    assert ledger[0]["text"] == SYNTH[2] and ledger[0]["model"] == "deterministic"
    p = run.parse
    assert p["rate"] == 5 / 6 and p["judged"] == 1
    # committed: q0 A (right), q1 C (right), q2 B (right), q3 B (wrong), q4 D (right)
    assert p["accuracy_committed"] == pytest.approx(4 / 5) and p["chance"] == 0.25
    assert p["rules"] == {"None": 1, "extract:final": 2, "judge": 1, "schema": 2}
    # on the rerun the verdicts are the cached ones
    assert [row["cached"] for row in again.judge_ledger()] == [True, True]
    assert [row["cached"] for row in replay.judge_ledger()] == [True, True]
    strip = [{k: v for k, v in row.items() if k != "cached"} for row in ledger]
    assert [{k: v for k, v in row.items() if k != "cached"}
            for row in replay.judge_ledger()] == strip
    path = run.write(tmp_path / "run.json")
    assert read_method_run(path).judge_ledger() == ledger
    assert json.loads((tmp_path / "run.json").read_text())["judge_ledger"] == ledger


def test_without_a_judge_the_residual_stays_uncommitted(tmp_path):
    qs = _questions(6, ["A", "C", "B", "A", "D", "A"])
    with FakeServer(responder=_scripted) as srv:
        rt = Runtime({"fake": _endpoint(srv)})
        run = SelfMoA(rt, _seat("sampler", 1), _seat("synth", 2, 0.0), n_samples=1).run(qs)
        assert not any(_kind(b) == "verdict" for b in srv.requests)
    assert [r.answer for r in run.records] == ["A", "C", None, "B", "D", None]
    assert run.judge_ledger() == [] and "judge" not in run.channels


# --------------------------------------------------------------------------- the tripwire
def _always(answer):
    def responder(body):
        if _kind(body) == "synthesis":
            return json.dumps({"rationale": "r", "answer": answer, "confidence": 0.9})
        return None
    return responder


def _run_quietly(responder, qs):
    with FakeServer(responder=responder) as srv:
        rt = Runtime({"fake": _endpoint(srv)})
        return SelfMoA(rt, _seat("sampler", 1), _seat("synth", 2, 0.0), n_samples=1).run(qs)


def test_below_chance_committed_answers_warn():
    qs = _questions(4, ["A"] * 4)
    with pytest.warns(ParseWarning, match="below chance"):
        run = _run_quietly(_always("B"), qs)
    assert run.parse["accuracy_committed"] == 0.0 and run.parse["chance"] == 0.25
    assert run.parse["tripwire"] is True


@pytest.mark.parametrize("responder, golds", [
    (_always("A"), ["A"] * 4),                              # all right
    (_always("A"), ["A", "B", "C", "D"]),                   # 1 of 4 = chance: not below it
    (_always("B"), [None] * 4),                             # no labels: nothing to compare
    (lambda body: "I will not say." if _kind(body) == "synthesis" else None, ["A"] * 4),
])
def test_no_warning_at_or_above_chance_or_without_labels(responder, golds):
    qs = _questions(4, golds)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParseWarning)
        run = _run_quietly(responder, qs)
    assert run.parse["tripwire"] is False


def test_a_reply_repeating_a_key_is_not_read():
    from bda_jax.council import LegalMoves, ReplyError, parse_reply
    assert json_object('{"answer": "A", "answer": "B"}') is None
    legal = LegalMoves(("propose",), ("A", "B"), ())
    with pytest.raises(ReplyError, match="repeated key 'answer'"):
        parse_reply('{"force": "propose", "answer": "A", "answer": "B", "target": null, '
                    '"argument": ""}', legal)
