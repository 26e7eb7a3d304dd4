"""Question sets: reading and every typed refusal (file, line, task, field)."""
import json

import pytest

from bda_jax import DataError
from bda_jax.council import Question, read_questions


def write(tmp_path, lines, name="q.jsonl"):
    path = tmp_path / name
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n"
                            for ln in lines), encoding="utf-8")
    return path


def test_reads_fixed_and_open_questions(tmp_path):
    path = write(tmp_path, [
        {"task_id": "q1", "question": "2 + 3?", "candidates": ["4", "5"], "gold": "5",
         "cluster": "arith", "source": "hand"},
        "",
        {"task_id": 7, "question": "Capital of France?"},
    ])
    qs = read_questions(path)
    assert qs[0] == Question("q1", "2 + 3?", ("4", "5"), "5", "arith")
    assert qs[0].extra == {"source": "hand"}
    assert qs[1] == Question("7", "Capital of France?", None, None, None)
    assert qs[1].extra == {}


def test_gold_matches_a_candidate_through_the_normalizer(tmp_path):
    qs = read_questions(write(tmp_path, [{"task_id": "a", "question": "x", "candidates":
                                          ["A", "B"], "gold": "(b)"}]))
    assert qs[0].gold == "(b)"


@pytest.mark.parametrize("record, field, words", [
    ({"question": "x"}, "task_id", "no 'task_id'"),
    ({"task_id": "", "question": "x"}, "task_id", "empty"),
    ({"task_id": True, "question": "x"}, "task_id", "string or an integer"),
    ({"task_id": "a"}, "question", "no 'question'"),
    ({"task_id": "a", "question": "  "}, "question", "empty"),
    ({"task_id": "a", "question": 3}, "question", "must be a string"),
    ({"task_id": "a", "question": "x", "candidates": []}, "candidates", "empty"),
    ({"task_id": "a", "question": "x", "candidates": "A"}, "candidates", "list of strings"),
    ({"task_id": "a", "question": "x", "candidates": ["A", 1]}, "candidates", "list of strings"),
    ({"task_id": "a", "question": "x", "candidates": ["A", "(a)"]}, "candidates", "collide"),
    ({"task_id": "a", "question": "x", "candidates": ["A", " "]}, "candidates", "empty"),
    ({"task_id": "a", "question": "x", "gold": 5}, "gold", "string or null"),
    ({"task_id": "a", "question": "x", "candidates": ["A"], "gold": "B"}, "gold",
     "not one of the candidates"),
    ({"task_id": "a", "question": "x", "cluster": [1]}, "cluster", "string or an integer"),
])
def test_bad_fields_name_file_line_task_and_field(tmp_path, record, field, words):
    path = write(tmp_path, [{"task_id": "ok", "question": "fine"}, record])
    with pytest.raises(DataError, match=words) as info:
        read_questions(path)
    err = info.value
    assert (err.file, err.line, err.field) == (str(path), 2, field)
    if field not in ("task_id",):
        assert err.task_id == "a"


def test_duplicate_task_id_names_both_lines(tmp_path):
    path = write(tmp_path, [{"task_id": "a", "question": "x"}, {"task_id": "b", "question": "y"},
                            {"task_id": "a", "question": "z"}])
    with pytest.raises(DataError, match="first on line 1") as info:
        read_questions(path)
    assert (info.value.line, info.value.task_id, info.value.field) == (3, "a", "task_id")


def test_file_level_problems(tmp_path):
    with pytest.raises(DataError, match="cannot open"):
        read_questions(tmp_path / "missing.jsonl")
    with pytest.raises(DataError, match="no question"):
        read_questions(write(tmp_path, ["", "  "]))
    with pytest.raises(DataError, match="invalid JSON") as info:
        read_questions(write(tmp_path, [{"task_id": "a", "question": "x"}, "{oops"]))
    assert info.value.line == 2
    with pytest.raises(DataError, match="JSON object") as info:
        read_questions(write(tmp_path, ["[1, 2]"]))
    assert info.value.line == 1
