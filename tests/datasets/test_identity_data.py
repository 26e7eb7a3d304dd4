"""The dataset readers share the package's identities (docs/trace-format.md, "Identities"):
answers through the one default normalizer (NFKC first), agent ids NFKC + stripped, an empty
answer is no answer, and a key repeated within one JSON object is an error naming it. Also: a
malformed DASE vote-log record is a located DataError, never another exception."""
import json

import numpy as np
import pandas as pd
import pytest

import bda_jax as bda
from bda_jax import datasets as ld

FULL_B = "\uff22"                                  # fullwidth B; NFKC: "B"


def _lines(tmp_path, name, *records):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records), encoding="utf-8")
    return path


# ------------------------------------------------------------------------- answers
def test_dase_answers_read_through_nfkc():
    assert ld.normalize_dase_answer(FULL_B, "gpqa") == "B"
    assert ld.normalize_dase_answer("\uff08\uff42\uff09", "gpqa") == "B"       # fullwidth "(b)"
    assert ld.normalize_dase_answer("\uff11\uff0c\uff10\uff10\uff10") == "1000"  # "1,000"
    assert ld.normalize_dase_answer("\u3000") is None                            # blank: empty
    assert ld.normalize_dase_answer("\uff25\uff2d\uff30\uff34\uff39") is None  # "EMPTY"


def test_parse_label_reads_nfkc_and_never_crashes_on_case_variants():
    assert ld.parse_label("So the answer is \uff34\uff32\uff35\uff25.", ["True", "False"]) \
        == ld.Parsed("True", "final")
    # re.I lets "i" match dotless U+0131, whose casefold is itself: the label is still "i"
    assert ld.parse_label("the answer is \u0131", ["i", "ii"]).answer == "i"
    assert ld.parse_label("the answer is yes", ["", " "]) == ld.Parsed(None, None)


# ------------------------------------------------------------------------- DASE files
def _vote(idx, votes, **over):
    rec = {"idx": idx, "category": "GPQA (Physics)", "votes": votes, "winner": "A", "acc": 1,
           "cost": 0.5}
    rec.update(over)
    return rec


def test_dase_vote_log_reads_blank_votes_as_empty(tmp_path):
    path = _lines(tmp_path, "safe_SC70_x_GPQA_Logs.jsonl",
                  _vote(1, ["A", " ", "empty", "", "$$", "Empty", FULL_B], winner="  "))
    log = ld.load_dase_vote_log(path)
    assert log.votes == [["A", None, None, None, None, None, FULL_B]] and log.winner == [None]


@pytest.mark.parametrize("bad, field", [
    ('["not", "an", "object"]', None),
    (_vote("x7", ["A"]), "idx"),
    (_vote(1, ["A"]), "idx"),                        # repeats line 1
    (_vote(2, ["A"], acc="yes"), "acc"),
    (_vote(2, ["A"], cost="cheap"), "cost"),
    (_vote(2, ["A"], winner=3), "winner"),
    (json.dumps(_vote(2, ["A"]))[:-1] + ', "acc": 0}', "acc"),   # a repeated key
])
def test_dase_vote_log_errors_are_located(tmp_path, bad, field):
    path = _lines(tmp_path, "safe_SC70_x_GPQA_Logs.jsonl", _vote(1, ["A"]), bad)
    with pytest.raises(bda.DataError) as info:
        ld.load_dase_vote_log(path)
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, field)


def test_dase_history_refuses_a_repeated_key(tmp_path):
    rec = json.dumps({"idx": 3, "history": [{"step": 1, "norms": ["A"] * 5}]})
    path = _lines(tmp_path, "safe_DASE_Bellman_History_GPQA_4.jsonl",
                  rec[:-1] + ', "idx": 4}')
    with pytest.raises(bda.DataError) as info:
        list(ld.read_dase_history(path))
    err = info.value
    assert (err.line, err.field) == (1, "idx") and "duplicate key" in err.reason


# ------------------------------------------------------------------------- debates
def _chat(*answers):
    return [{"role": "user", "content": "q"}] + [
        {"role": "assistant", "content": f"The answer is {a}."} for a in answers]


def test_debate_file_refuses_a_repeated_question(tmp_path):
    record = json.dumps([[_chat("4"), _chat("4")], "#### 4"])
    path = tmp_path / "debate.json"
    path.write_text('{"What is 2+2?": ' + record + ',\n "What is 2+2?": ' + record + "}",
                    encoding="utf-8")
    with pytest.raises(bda.DataError) as info:
        ld.load_du_debate(path, task="gsm", tripwire="ignore")
    assert (info.value.line, info.value.field) == (2, "What is 2+2?")


def test_debate_agent_names_must_stay_distinct_as_agent_ids(tmp_path):
    path = tmp_path / "debate.json"
    path.write_text(json.dumps({"What is 2+2?": [[_chat("4"), _chat("5")], "#### 4"]}),
                    encoding="utf-8")
    with pytest.raises(bda.DataError) as info:
        ld.load_du_debate(path, task="gsm", agent_names=["gpt", " gpt"], tripwire="ignore")
    assert info.value.field == "agent_names"
    traces, _ = ld.load_du_debate(path, task="gsm", agent_names=["\uff47pt", "b"],
                                  tripwire="ignore")
    assert bda.tally(traces).agents == ("gpt", "b")


# ------------------------------------------------------------------------- crowd label sets
def test_crowd_loader_reads_worker_spellings_as_one_worker(tmp_path):
    path = tmp_path / "act.csv"                        # worker, task, label, gold
    path.write_text("w1,t1,0,0\n\uff57\uff11,t2,1,1\nw2,t1,1,0\n", encoding="utf-8")
    data = ld.load_active_crowd(path)
    assert data.labels["worker"].tolist() == ["w1", "w1", "w2"] and data.n_workers == 2


def test_to_traces_reads_worker_spellings_as_one_agent():
    labels = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["w1", "w2", " \uff57\uff11"],
                           "label": ["0", "1", "1"]})
    data = ld.CrowdData("hand", labels, pd.Series(dtype=object), ("0", "1"), "hand",
                        ld.Duplicates(0, 0, "keep", 0))
    counts = bda.tally(ld.to_traces(data))
    assert counts.agents == ("w1", "w2")
    # w1 labels t1 "0" and t2 "1"; w2 labels t1 "1"
    assert np.asarray(counts.e).tolist() == [[[1, 0], [0, 1]], [[0, 1], [0, 0]]]
