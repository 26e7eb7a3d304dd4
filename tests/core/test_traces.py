"""Trace format, JSON Lines I/O, the protocol automaton and bad input (docs/trace-format.md)."""
import json

import numpy as np
import pytest

import bda_jax as bda
from reference import EXAMPLE

GOOD_MOVES = [
    {"id": "m1", "agent": "a", "round": 0, "force": "propose", "answer": "A", "confidence": 0.8},
    {"id": "m2", "agent": "b", "round": 0, "force": "propose", "answer": "B"},
    {"id": "m3", "agent": "c", "round": 1, "force": "concede", "target": "m1"},
    {"id": "m4", "agent": "b", "round": 1, "force": "challenge", "target": "m1"},
]


def task(**over):
    base = {"task_id": "t1", "candidates": ["A", "B", "C"], "gold": "A",
            "moves": [dict(m) for m in GOOD_MOVES]}
    base.update(over)
    return base


def write_lines(tmp_path, lines):
    path = tmp_path / "traces.jsonl"
    path.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
    return path


def read_error(tmp_path, lines, **kw):
    path = write_lines(tmp_path, lines)
    with pytest.raises(bda.TraceError) as info:
        bda.read_traces(path, **kw)
    err = info.value
    assert err.file == str(path) and str(path) in str(err)
    return err


def moved(i, **changes):
    moves = [dict(m) for m in GOOD_MOVES]
    for key, value in changes.items():
        if value is KeyError:
            moves[i].pop(key, None)
        else:
            moves[i][key] = value
    return task(moves=moves)


def test_example_file_reads_and_round_trips(tmp_path):
    traces = bda.read_traces(EXAMPLE)
    assert [t.task_id for t in traces][:2] == ["claim-01", "claim-02"]
    out = tmp_path / "copy.jsonl"
    bda.write_traces(traces, out)
    again = bda.read_traces(out)
    assert again == traces
    a, b = bda.tally(traces), bda.tally(again)
    for f in ("N", "e", "c", "e0", "gold", "mask"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


def test_extra_fields_are_kept(tmp_path):
    t = task()
    t["moves"][0]["text"] = "free-text surface"
    t["source"] = "unit"
    path = write_lines(tmp_path, [t])
    (trace,) = bda.read_traces(path)
    assert trace.moves[0].extra == {"text": "free-text surface"}
    assert trace.to_json()["source"] == "unit"


def test_invalid_json(tmp_path):
    err = read_error(tmp_path, [task(), '{"task_id": "t2", "moves": ['])
    assert err.line == 2 and "invalid JSON" in err.reason


def test_missing_and_duplicate_task_id(tmp_path):
    t = task()
    del t["task_id"]
    err = read_error(tmp_path, [t])
    assert err.line == 1 and err.field == "task_id"
    err = read_error(tmp_path, [task(), task()])
    assert err.line == 2 and err.task_id == "t1" and err.field == "task_id"
    assert "first on line 1" in err.reason


@pytest.mark.parametrize("moves,fragment", [(KeyError, "no 'moves'"), ([], "empty"),
                                            ("m1", "must be a list")])
def test_missing_or_empty_moves(tmp_path, moves, fragment):
    t = task()
    if moves is KeyError:
        del t["moves"]
    else:
        t["moves"] = moves
    err = read_error(tmp_path, [t])
    assert err.field == "moves" and fragment in err.reason and err.task_id == "t1"


@pytest.mark.parametrize("index,changes,field,fragment", [
    (1, {"force": "shout"}, "force", "unknown force"),
    (1, {"force": 3}, "force", "must be a string"),
    (1, {"agent": KeyError}, "agent", "no 'agent'"),
    (1, {"agent": ""}, "agent", "non-empty"),
    (1, {"agent": 7}, "agent", "non-empty string"),
    (1, {"round": -1}, "round", "non-negative integer"),
    (1, {"round": 1.5}, "round", "non-negative integer"),
    (1, {"round": "0"}, "round", "non-negative integer"),
    (1, {"round": True}, "round", "non-negative integer"),
    (1, {"id": "m1"}, "id", "used twice"),
    (1, {"id": KeyError}, "id", "no 'id'"),
    (1, {"id": ["m2"]}, "id", "non-empty string"),
    (2, {"target": KeyError}, "target", "needs a 'target'"),
    (2, {"target": "zz"}, "target", "not a move of this task"),
    (2, {"target": "m4"}, "target", "does not come earlier"),
    (2, {"target": "m3"}, "target", "does not come earlier"),
    (3, {"target": 1.5}, "target", "non-empty string"),
    (1, {"answer": "Z"}, "answer", "not one of the candidates"),
    (1, {"answer": KeyError}, "answer", "needs an 'answer'"),
    (1, {"answer": 5}, "answer", "must be a string"),
    (0, {"confidence": "high"}, "confidence", "must be a number"),
    (0, {"confidence": float("nan")}, "confidence", "in [0, 1]"),
    (0, {"confidence": 1.5}, "confidence", "in [0, 1]"),
    (0, {"confidence": -0.1}, "confidence", "in [0, 1]"),
    (0, {"confidence": True}, "confidence", "must be a number"),
    (3, {"answer": "A"}, "answer", "takes no 'answer'"),
    (0, {"target": "m2"}, "target", "takes no 'target'"),
])
def test_move_errors_name_line_task_move_field(tmp_path, index, changes, field, fragment):
    err = read_error(tmp_path, [{"task_id": "ok", "moves": GOOD_MOVES}, moved(index, **changes)])
    assert (err.line, err.task_id, err.field) == (2, "t1", field), err
    expected_id = changes.get("id", GOOD_MOVES[index]["id"])
    if expected_id is not KeyError and not isinstance(expected_id, list):
        assert err.move_id == expected_id
    assert fragment in err.reason, err.reason


def test_round_decreasing_for_an_agent(tmp_path):
    err = read_error(tmp_path, [moved(1, round=5)])
    assert (err.move_id, err.field) == ("m4", "round") and "comes after round 5" in err.reason


def test_target_without_answer(tmp_path):
    moves = GOOD_MOVES + [{"id": "m5", "agent": "a", "round": 2, "force": "concede",
                           "target": "m4"}]
    err = read_error(tmp_path, [task(moves=moves)])
    assert (err.move_id, err.field) == ("m5", "target") and "carries no answer" in err.reason
    moves = GOOD_MOVES + [{"id": "m5", "agent": "a", "round": 2, "force": "abstain"},
                          {"id": "m6", "agent": "b", "round": 2, "force": "challenge",
                           "target": "m5"}]
    err = read_error(tmp_path, [task(moves=moves)])
    assert err.move_id == "m6" and "carries no answer" in err.reason


def test_retract_rules(tmp_path):
    moves = GOOD_MOVES + [{"id": "m5", "agent": "c", "round": 2, "force": "retract",
                           "target": "m2"}]
    err = read_error(tmp_path, [task(moves=moves)])
    assert err.move_id == "m5" and "belongs to agent" in err.reason
    moves = GOOD_MOVES + [{"id": "m5", "agent": "c", "round": 2, "force": "retract",
                           "answer": "C"}]
    err = read_error(tmp_path, [task(moves=moves)])
    assert "never endorsed" in err.reason
    moves = GOOD_MOVES + [{"id": "m5", "agent": "b", "round": 2, "force": "retract"}]
    err = read_error(tmp_path, [task(moves=moves)])
    assert err.field == "target"


@pytest.mark.parametrize("field,value,fragment", [
    ("candidates", ["A", "(a)"], "collide after normalization"),
    ("candidates", ["A", " a "], "collide after normalization"),
    ("candidates", [], "empty"),
    ("candidates", "A,B", "list of strings"),
    ("candidates", ["A", 2], "list of strings"),
    ("gold", 1, "gold must be a string"),
    ("cluster", 1.5, "non-empty string"),
    ("task_id", {"a": 1}, "non-empty string"),
    ("task_id", True, "non-empty string"),
])
def test_task_field_errors(tmp_path, field, value, fragment):
    err = read_error(tmp_path, [task(**{field: value})])
    assert err.field == field and fragment in err.reason


def test_task_must_be_an_object_and_file_nonempty(tmp_path):
    err = read_error(tmp_path, [[1, 2]])
    assert err.line == 1 and "JSON object" in err.reason
    err = read_error(tmp_path, ["", "  "])
    assert "no task" in err.reason
    with pytest.raises(bda.TraceError, match="cannot open"):
        bda.read_traces(tmp_path / "missing.jsonl")


def test_no_candidates_at_all(tmp_path):
    t = {"task_id": "x", "moves": [{"id": "1", "agent": "a", "round": 0, "force": "abstain"}]}
    err = read_error(tmp_path, [t])
    assert err.field == "candidates"


def test_every_error_is_a_bda_error(tmp_path):
    err = read_error(tmp_path, [moved(1, force="shout")])
    assert isinstance(err, bda.BdaError) and not isinstance(err, bda.DataError)
    assert "line 1" in str(err) and "task 't1'" in str(err) and "move 'm2'" in str(err)


def test_single_candidate_task_is_not_an_error(tmp_path):
    t = {"task_id": "k1", "gold": "7", "moves": [
        {"id": "1", "agent": "a", "round": 0, "force": "propose", "answer": "7"},
        {"id": "2", "agent": "b", "round": 0, "force": "propose", "answer": "7"},
        {"id": "3", "agent": "b", "round": 1, "force": "challenge", "target": "1"}]}
    counts = bda.tally(bda.read_traces(write_lines(tmp_path, [t])))
    assert int(counts.K[0]) == 1
    for tau in (1.0, 0.3):
        lp = np.asarray(bda.onecoin_log_posterior(counts, [2.0, 2.0], [1.0, 1.0], tau))
        assert lp[0, 0] == 0.0 and np.isfinite(lp[0, 0])
    assert np.asarray(bda.confusion_log_posterior(counts, np.ones((2, 1, 1)))).tolist() == [[0.0]]


def test_lenient_mode_skips_counts_and_reports(tmp_path):
    moves = GOOD_MOVES + [
        {"id": "m5", "agent": "c", "round": 2, "force": "shout"},
        {"id": "m6", "agent": "a", "round": 2, "force": "propose", "answer": "Z"},
        {"id": "m7", "agent": "b", "round": 2, "force": "concede", "target": "m6"},
        {"id": "m1", "agent": "b", "round": 3, "force": "vote", "answer": "B"},
        {"id": "m8", "agent": "c", "round": 0, "force": "vote", "answer": "A"},
    ]
    path = write_lines(tmp_path, [task(moves=moves)])
    with pytest.raises(bda.TraceError):
        bda.read_traces(path)
    with pytest.warns(UserWarning, match="skipped 5 inadmissible"):
        (trace,) = bda.read_traces(path, lenient=True)
    assert bda.skipped_summary([trace]) == {
        "unknown_force": 1, "answer_not_candidate": 1, "target_skipped": 1,
        "duplicate_move_id": 1, "round_decreasing": 1}
    assert [m.id for m in trace.moves] == ["m1", "m2", "m3", "m4"]
    strict = bda.tally(bda.read_traces(write_lines(tmp_path, [task()])))
    relaxed = bda.tally([trace])
    np.testing.assert_array_equal(strict.c, relaxed.c)


def test_write_is_atomic(tmp_path):
    good = bda.read_traces(EXAMPLE)
    bad = bda.Trace("x", (bda.Move("1", "a", 0, "propose", "A", confidence=float("nan")),))
    out = tmp_path / "out.jsonl"
    with pytest.raises(bda.TraceError, match="cannot write") as info:
        bda.write_traces(good + [bad], out)
    assert info.value.task_id == "x"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("raw,canon", [
    ("$\\boxed{625}$", "625"), (" 625 ", "625"), ("\\boxed{ 625 }", "625"), ("(A)", "a"),
    ("A", "a"), ("[c]", "c"), ("d)", "d"), ("True", "true"), ("$x^2$", "x^2"),
])
def test_default_normalizer(raw, canon):
    assert bda.default_normalizer(raw) == canon


def test_custom_normalizer_changes_matching(tmp_path):
    t = {"task_id": "q", "candidates": ["A", "a"], "moves": [
        {"id": "1", "agent": "x", "round": 0, "force": "propose", "answer": "a"}]}
    path = write_lines(tmp_path, [t])
    with pytest.raises(bda.TraceError, match="collide"):
        bda.read_traces(path)
    (trace,) = bda.read_traces(path, normalizer=bda.identity_normalizer)
    counts = bda.tally([trace], normalizer=bda.identity_normalizer)
    assert counts.e[0, 0].tolist() == [0, 1]


def test_in_memory_traces_are_checked_like_files():
    bad = bda.Trace("m", (bda.Move("1", "a", "0", "propose", "A"),), ("A", "B"))
    with pytest.raises(bda.TraceError) as info:
        bda.tally([bad])
    assert (info.value.task_id, info.value.move_id, info.value.field) == ("m", "1", "round")
    with pytest.raises(bda.TraceError, match="must be a string"):
        bda.tally([bda.Trace("m", (bda.Move("1", "a", 0, "propose", 5),))])
    with pytest.raises(bda.TraceError, match="list of strings"):
        bda.tally([bda.Trace("m", (bda.Move("1", "a", 0, "propose", "A"),), ("A", 3))])
    lenient = bda.tally([bda.Trace("m", (bda.Move("1", "a", 0, "propose", "A"),
                                          bda.Move("2", "b", -1, "propose", "A")))], lenient=True)
    assert lenient.N.tolist() == [[1]] and lenient.agents == ("a",)


def test_bytes_nesting_and_huge_numbers_are_trace_errors(tmp_path):
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(json.dumps(task()).encode() + b"\n\xff\xfe{}\n")
    with pytest.raises(bda.TraceError, match="UTF-8") as info:
        bda.read_traces(path)
    assert info.value.line == 2
    err = read_error(tmp_path, ["[" * 100000 + "]" * 100000])
    assert "nested too deeply" in err.reason or "JSON object" in err.reason
    err = read_error(tmp_path, [moved(1, round=10**30)])
    assert err.field == "round" and "at most" in err.reason
    err = read_error(tmp_path, [moved(0, confidence=10**400)])
    assert err.field == "confidence"


def test_write_keeps_lone_surrogates_as_escapes(tmp_path):
    t = task()
    t["moves"][0]["text"] = "\ud800 broken"
    (trace,) = bda.read_traces(write_lines(tmp_path, [t]))
    out = tmp_path / "out.jsonl"
    bda.write_traces([trace], out)
    assert bda.read_traces(out)[0].moves[0].extra["text"] == "\ud800 broken"


def test_skipped_moves_add_no_candidates(tmp_path):
    t = {"task_id": "q", "moves": [
        {"id": "1", "agent": "x", "round": 0, "force": "propose", "answer": "A"},
        {"id": "2", "agent": "y", "round": 0, "force": "concede", "target": "1", "answer": "B"}]}
    with pytest.warns(UserWarning, match="answer_mismatch"):
        (trace,) = bda.read_traces(write_lines(tmp_path, [t]), lenient=True)
    assert bda.tally([trace]).candidates == (("A",),)
    assert bda.tally([trace], normalizer=bda.identity_normalizer).candidates == (("A",),)


def test_oversized_integers(tmp_path):
    err = read_error(tmp_path, ['{"task_id": ' + "9" * 5000 + ', "moves": []}'])
    assert "invalid JSON" in err.reason and err.line == 1
    err = read_error(tmp_path, [task(cluster=10**40)])
    assert err.field == "cluster" and "2**63" in err.reason


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(tmp_path, newline):
    path = tmp_path / "nl.jsonl"
    path.write_bytes((json.dumps(task()) + newline + newline + json.dumps(task(task_id="t2"))
                      + newline).encode())
    assert [t.task_id for t in bda.read_traces(path)] == ["t1", "t2"]
    path.write_bytes((json.dumps(task()) + newline + "{" + newline).encode())
    with pytest.raises(bda.TraceError) as info:
        bda.read_traces(path)
    assert info.value.line == 2


def test_no_admissible_move_anywhere_names_the_file(tmp_path):
    path = write_lines(tmp_path, [{"task_id": "t", "candidates": ["A"], "moves": [
        {"id": "m1", "agent": "a", "round": 0, "force": "attack"}]}])
    with pytest.warns(UserWarning):
        traces = bda.read_traces(path, lenient=True)
    with pytest.raises(bda.TraceError, match="no agent") as info:
        bda.tally(traces)
    assert info.value.file == str(path)
