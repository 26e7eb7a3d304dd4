"""Hardening of DASE stopping (issue #19): replay reads history files exactly as strictly as the
importer (`bda_jax.datasets.read_dase_history`), and the live `Stopper`, `replay_history` and
`resimulate` refuse an `empty_g` outside [0, 1] (NaN included) with a DataError."""
import json
import math

import pytest

from bda_jax import DataError
from bda_jax.stopping import (Stopper, load_history_batch, replay_history, replay_summary,
                              resimulate)


def _history(tmp_path, records):
    path = tmp_path / "safe_DASE_Bellman_History_4_x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _round(step, answers):
    return {"step": step, "norms": answers}


GOOD = {"idx": 0, "category": "AIME", "history": [_round(1, ["1"] * 5)]}

#: (records, line of the error, its task id, its field, a fragment of the reason)
MALFORMED = {
    "repeated idx": ([GOOD, {"idx": 7, "history": [_round(1, ["2"] * 5)]},
                      {"idx": 7, "history": [_round(1, ["3"] * 5)]}],
                     3, 7, "idx", "idx 7 repeats line 2"),
    "restarting steps": ([GOOD, {"idx": 1, "history": [_round(1, ["2"] * 5), _round(2, ["2"] * 5),
                                                       _round(1, ["2"] * 5)]}],
                         2, 1, "history[2].step", "step 1 where 3 was expected"),
    "a round of another width": ([GOOD, {"idx": 1, "history": [_round(1, ["2"] * 4)]}],
                                 2, 1, "history[0].norms", "a list of 5 answers"),
    "a non-string answer": ([GOOD, {"idx": 1, "history": [_round(1, ["2"] * 4 + [2])]}],
                            2, 1, "history[0].norms[4]", "must be a string"),
}

READERS = {
    "load_history_batch": load_history_batch,
    "replay_history": lambda p: replay_history(p, W=4, L=3),
    "resimulate": lambda p: resimulate(p, [2], L=3),
    "replay_summary": lambda p: replay_summary(p, W=4, L=3, gold=False),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", MALFORMED)
def test_replay_is_as_strict_as_the_importer(tmp_path, case, reader):
    records, line, task, field, reason = MALFORMED[case]
    path = _history(tmp_path, records)
    with pytest.raises(DataError, match=reason.replace("[", r"\[").replace("]", r"\]")) as err:
        READERS[reader](path)
    assert (err.value.file, err.value.line, err.value.task_id, err.value.field) == \
        (str(path), line, task, field)


BAD_EMPTY_G = [1.5, -0.1, math.nan, math.inf, "0.5", True, None]


@pytest.mark.parametrize("empty_g", BAD_EMPTY_G, ids=repr)
def test_stopper_refuses_empty_g_outside_the_unit_interval(empty_g):
    with pytest.raises(DataError, match=r"empty_g must be a number in \[0, 1\]") as err:
        Stopper("spatial", W=2, empty_g=empty_g)
    assert err.value.field == "empty_g"


@pytest.mark.parametrize("empty_g", BAD_EMPTY_G, ids=repr)
def test_replay_refuses_empty_g_before_reading_the_file(tmp_path, empty_g):
    missing = tmp_path / "safe_DASE_Bellman_History_4_missing.jsonl"   # never opened
    for run in (lambda: replay_history(missing, empty_g=empty_g),
                lambda: resimulate(missing, [2], empty_g=empty_g)):
        with pytest.raises(DataError, match=r"empty_g must be a number in \[0, 1\]") as err:
            run()
        assert err.value.field == "empty_g"


@pytest.mark.parametrize("empty_g, commit", [(0.0, "left_wall"), (1.0, "right_wall")])
def test_the_ends_of_the_unit_interval_are_valid(empty_g, commit):
    # an all-empty round scores g = empty_g; from x = 0, V_R - V_L = 2g - 1 + 2 cx * 0 is -1 for
    # g = 0 (step left) and +1 for g = 1 (step right): with W = 1 that is the wall, and nobody
    # answered, so the commit carries no answer
    d = Stopper("spatial", W=1, empty_g=empty_g).update([None] * 5)
    assert (d.stop, d.commit, d.answer, d.g) == (True, commit, None, empty_g)
