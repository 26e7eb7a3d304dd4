"""The broadcast-log reader shares the package's identities (docs/trace-format.md,
"Identities"): agent ids read as NFKC + stripped, an empty answer is no answer whatever the
normalizer, and a key repeated in one record is an error naming it."""
import json

import pytest

from bda_jax import TraceError
from bda_jax.audit import from_records, read_broadcast_log


def poll(agent, cand="42", correct=True, selected=False, turn=0):
    return {"kind": "poll", "problem": "p1", "outer_round": 0, "turn": turn, "agent": agent,
            "score": 0.5, "candidate": cand, "correct": correct, "selected": selected}


def speak(speaker, spoken="42", turn=0, **extra):
    return {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": turn,
            "speaker": speaker, "spoken": spoken, "spoken_correct": True, **extra}


def test_agent_spellings_are_one_agent():
    # poll " a1" and fullwidth speaker "ａ1" are the agent "a1" (NFKC, stripped)
    log = from_records([poll(" a1", selected=True), poll("b"), speak("\uff41\uff11"),
                        speak("a1", turn=1, earlier_public=[{"agent": " b ", "answer": "41"}]),
                        poll("a1", turn=1, selected=True), poll("b", turn=1)])
    assert log.agent.tolist() == ["a1", "b", "a1", "b"]
    assert log.speaker.tolist() == ["a1", "a1"]
    assert log.speak_poll_row.tolist() == [0, 2]
    assert log.earlier_public[1] == (("b", "41"),)


def test_two_spellings_in_one_block_are_a_repeated_agent():
    with pytest.raises(TraceError) as info:
        from_records([poll("a1"), poll("a1\u3000")])
    assert info.value.field == "agent"


@pytest.mark.parametrize("blank", ["", "  ", "\u3000"])
def test_a_blank_answer_is_no_answer_even_without_a_normalizer(blank):
    log = from_records([poll("a", cand=blank, correct=None), poll("b")], normalizer=None)
    # a's blank candidate reads as null: no candidate, not valid
    assert log.candidate.tolist() == [None, "42"] and log.valid.tolist() == [False, True]


def test_a_repeated_key_in_a_log_line_is_an_error(tmp_path):
    path = tmp_path / "log.jsonl"
    good = json.dumps(poll("a"))
    bad = json.dumps(poll("b"))[:-1] + ', "candidate": "41"}'      # candidate given twice
    path.write_text(good + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as info:
        read_broadcast_log(path)
    err = info.value
    assert (err.file, err.line, err.task_id, err.field) == (str(path), 2, "p1", "candidate")
    assert "duplicate key" in err.reason


def test_audit_card_and_confmad_refuse_a_repeated_key(tmp_path):
    import bda_jax as bda
    from bda_jax.audit import AuditCard, load_confmad
    with pytest.raises(bda.ArtifactError, match="repeats the key 'schema_version'"):
        AuditCard.from_json('{"schema_version": "0.1", "schema_version": "0.1"}')
    f = tmp_path / "confmad.json"
    f.write_text('[{"id": 1, "id": 2}, {}]')
    with pytest.raises(bda.TraceError, match="repeats the key 'id'"):
        load_confmad(f)
