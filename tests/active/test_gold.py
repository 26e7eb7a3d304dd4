"""Gold files (task_id,answer CSV): what reads, and every malformed file or row refused with
its file, line and field."""
import numpy as np
import pytest

import bda_jax
from bda_jax import Trace, tally
from bda_jax.active import GoldLabels, apply_gold, keep_labels, read_gold
from bda_jax.simulate import simulate_council


@pytest.fixture(scope="module")
def counts():
    """6 binary tasks (candidates True / False); q5-s0 keeps the gold of its trace."""
    traces = simulate_council(0, 6, [0.74, 0.68, 0.68])
    traces = [Trace(t.task_id, t.moves, t.candidates, t.gold if t.task_id == "q5-s0" else None,
                    t.cluster) for t in traces]
    return tally(traces), traces[5].gold


def write(tmp_path, text, name="gold.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_reads_header_rows_quotes_blank_lines_and_a_bom(tmp_path):
    path = write(tmp_path, '\ufefftask_id , Answer\n\nq0-s0, True \n"q1-s0","False"\n\n')
    gold = read_gold(path)
    assert gold.task_ids == ("q0-s0", "q1-s0") and gold.answers == ("True", "False")
    assert gold.lines == (3, 4) and gold.file == str(path)
    assert read_gold(write(tmp_path, "task_id,answer\n", "empty.csv")).task_ids == ()


@pytest.mark.parametrize("text,line,field,fragment", [
    ("", 1, "header", "empty gold file"),
    ("task,answer\nq0-s0,True\n", 1, "header", "header"),
    ("task_id,answer\nq0-s0,True,extra\n", 2, "row", "2 cells"),
    ("task_id,answer\nq0-s0\n", 2, "row", "2 cells"),
    ("task_id,answer\n ,True\n", 2, "task_id", "empty task_id"),
    ("task_id,answer\nq0-s0, \n", 2, "answer", "empty answer"),
    ("task_id,answer\nq0-s0,True\nq1-s0,True\nq0-s0,False\n", 4, "task_id", "line 2"),
    ('task_id,answer\nq0-s0,"True\n', 2, None, "malformed CSV"),
])
def test_malformed_gold_files_name_line_and_field(tmp_path, text, line, field, fragment):
    with pytest.raises(bda_jax.DataError) as err:
        read_gold(write(tmp_path, text))
    assert (err.value.line, err.value.field) == (line, field)
    assert fragment in str(err.value) and err.value.file.endswith("gold.csv")


def test_not_utf8_names_the_line(tmp_path):
    with pytest.raises(bda_jax.DataError) as err:
        read_gold(write(tmp_path, b"task_id,answer\nq0-s0,True\nq1-s0,\xff\n"))
    assert err.value.line == 3 and "UTF-8" in str(err.value)


def test_apply_gold_matches_answers_as_the_trace_reader_does(counts, tmp_path):
    c, _ = counts
    path = write(tmp_path, "task_id,answer\nq0-s0, true \nq2-s0,FALSE\n")
    out = apply_gold(c, path)
    assert np.asarray(out.gold).tolist() == [0, -1, 1, -1, -1, np.asarray(c.gold)[5]]
    assert np.asarray(c.gold)[0] == -1                  # the input is left as it was
    same = apply_gold(c, {"q0-s0": "True", "q2-s0": "False"})
    np.testing.assert_array_equal(same.gold, out.gold)
    assert same.task_ids == c.task_ids and same.agents == c.agents


@pytest.mark.parametrize("row,field,fragment", [
    ("q9-s0,True", "task_id", "no task with this id"),
    ("q1-s0,Maybe", "answer", "not a candidate"),
    ("q5-s0,{other}", "answer", "already give gold"),
])
def test_apply_gold_refuses_unknown_tasks_answers_and_contradictions(counts, tmp_path, row,
                                                                     field, fragment):
    c, gold5 = counts
    other = "False" if gold5 == "True" else "True"
    path = write(tmp_path, "task_id,answer\nq0-s0,True\n" + row.format(other=other) + "\n")
    with pytest.raises(bda_jax.DataError) as err:
        apply_gold(c, path)
    assert (err.value.line, err.value.field) == (3, field)
    assert fragment in str(err.value) and err.value.task_id == row.split(",")[0]
    assert apply_gold(c, {"q5-s0": gold5}).gold[5] == c.gold[5]     # agreeing is fine


def test_gold_needs_tallied_counts_and_a_known_type(counts):
    bare = bda_jax.Counts.from_arrays(N=[[1]], e=[[[1, 0]]], c=[[[1, 0]]])
    with pytest.raises(bda_jax.DataError) as err:
        apply_gold(bare, {"t": "a"})
    assert err.value.field == "counts"
    with pytest.raises(bda_jax.DataError):
        apply_gold(counts[0], [("q0-s0", "True")])
    with pytest.raises(bda_jax.DataError):
        GoldLabels.from_mapping({"q0-s0": 1})


def test_keep_labels_hides_every_other_gold(counts):
    c, _ = counts
    labeled = apply_gold(c, {"q0-s0": "True", "q1-s0": "False"})
    kept = keep_labels(labeled, [1])
    assert np.asarray(kept.gold).tolist() == [-1, 1, -1, -1, -1, -1]
    np.testing.assert_array_equal(keep_labels(labeled, np.ones(6, bool)).gold, labeled.gold)
    with pytest.raises(bda_jax.DataError):
        keep_labels(labeled, np.ones(5, bool))
