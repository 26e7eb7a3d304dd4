"""Offline crowd data importers: exact counts and majority-vote accuracy against the numbers in
../shared/data (INDEX.md and each folder's SOURCE.md), bad input, duplicate policies, traces.

Majority vote is recomputed here with pandas, independently of bda_jax: per task the labels with
the most votes win, and a tie among w winners scores 1/w when gold is one of them (the fractional
split SOURCE.md uses); duplicates are kept (every row a vote) unless a test says otherwise.
"""
import dataclasses
import functools
import gc
import gzip
import hashlib

import numpy as np
import pandas as pd
import pytest

import bda_jax as bda
from bda_jax import datasets as cd
from reference import REPO, SHARED_DATA

needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"shared data folder {SHARED_DATA} is absent")

# name: tasks, workers, labels, K, gold tasks, duplicate rows, MV accuracy (SOURCE.md, 4 dp)
EXPECTED = {
    "bluebirds": (108, 39, 4212, 2, 108, 0, 0.7593),
    "d_duck": (108, 39, 4212, 2, 108, 0, 0.7593),
    "d_product": (8315, 176, 24945, 2, 8315, 0, 0.8966),
    "d_sentiment": (1000, 85, 20000, 2, 1000, 0, 0.9335),
    "s4_dog": (807, 109, 8070, 4, 807, 0, 0.8222),
    "s4_face": (584, 27, 5242, 4, 584, 0, 0.6367),
    "s4_relevance": (20232, 766, 98453, 4, 4460, 1570, 0.5411),
    "s5_adult": (11040, 825, 92721, 4, 333, 2922, 0.7598),
    "zhang_bluebird": (108, 39, 4212, 2, 108, 0, 0.7593),
    "zhang_rte": (800, 164, 8000, 2, 800, 0, 0.8969),
    "zhang_trec": (19033, 762, 88385, 2, 2275, 0, 0.6514),
    "zhang_dog": (807, 109, 8070, 4, 807, 0, 0.8222),
    "zhang_web": (2665, 177, 15567, 5, 2653, 0, 0.7307),
    "snow_rte": (800, 164, 8000, 2, 800, 0, 0.8969),
    "snow_temp": (462, 76, 4620, 2, 462, 0, 0.9361),
    "snow_wsd": (177, 34, 1770, 3, 177, 0, 0.9944),
    "act_CF": (300, 461, 1720, 5, 300, 0, 0.8822),
    "act_CF_amt": (300, 110, 6030, 5, 300, 5, 0.8533),
    "act_MS": (700, 44, 2945, 10, 700, 0, 0.7042),
    "act_SP": (4999, 203, 27746, 2, 4999, 0, 0.8859),
    "act_SP_amt": (500, 143, 10000, 2, 500, 0, 0.9430),
    "act_ZenCrowd_all": (2040, 78, 21855, 2, 2040, 1730, 0.8319),
    "act_ZenCrowd_in": (2040, 25, 11205, 2, 2040, 710, 0.7409),
    "act_ZenCrowd_us": (2040, 74, 12190, 2, 2040, 1035, 0.8613),
    "crowdscale_fact": (42624, 57, 216725, 3, 576, 1810, 0.9019),
}
# Published MV accuracies from other tools (crowd-kit JOSS paper table, via SOURCE.md). Their tie
# rule differs, so each must lie between "every tie lost" and "every tie won" (3-dp rounding).
PUBLISHED_MV = {"d_product": 0.897, "d_sentiment": 0.932, "s4_relevance": 0.536,
                "s5_adult": 0.763}
BUNDLED = set(cd.list_crowd(bundled=True))


def params(names):
    return [pytest.param(n, marks=() if n in BUNDLED else needs_shared) for n in names]


@functools.lru_cache(maxsize=None)
def load(name, duplicates="keep"):
    return cd.load_crowd(name, root=None if name in BUNDLED else SHARED_DATA,
                         duplicates=duplicates)


def majority_vote(labels: pd.DataFrame, gold: pd.Series):
    """(fractional-tie accuracy, all-ties-lost, all-ties-won, tied gold tasks) on gold tasks."""
    votes = labels.groupby(["task", "label"]).size().unstack(fill_value=0)
    winners = votes.eq(votes.max(axis=1), axis=0).loc[gold.index]
    hit = np.array([bool(winners.at[t, g]) if g in winners.columns else False
                    for t, g in gold.items()])
    n_win = winners.sum(axis=1).to_numpy()
    return (hit / n_win).mean(), (hit & (n_win == 1)).mean(), hit.mean(), int((n_win > 1).sum())


# ----------------------------------------------------------------------------------- real data
def test_registry_lists_every_expected_set():
    assert set(cd.list_crowd()) == set(EXPECTED)
    assert BUNDLED == {"bluebirds"} | {n for n in EXPECTED if n.startswith("act_")}


@pytest.mark.parametrize("name", params(EXPECTED))
def test_counts_and_majority_vote_match_source(name):
    tasks, workers, n_labels, K, n_gold, dup_rows, mv = EXPECTED[name]
    data = load(name)
    labels = data.labels
    assert list(labels.columns) == ["task", "worker", "label"]
    assert all(isinstance(v, str) for v in labels.iloc[0])
    assert (data.n_tasks, data.n_workers, data.n_labels) == (tasks, workers, n_labels)
    assert len(data.candidates) == K == labels["label"].nunique()
    assert len(data.gold) == n_gold and data.gold.index.is_unique
    assert data.gold.index.isin(labels["task"]).all()
    assert (data.duplicates.rows, data.duplicates.policy, data.duplicates.dropped) == (
        dup_rows, "keep", 0)
    assert labels.duplicated(["task", "worker"]).sum() == dup_rows
    frac, lost, won, _ = majority_vote(labels, data.gold)
    assert abs(frac - mv) < 5e-5, (name, frac)
    if name in PUBLISHED_MV:
        assert lost - 5e-4 <= PUBLISHED_MV[name] <= won + 5e-4, (name, lost, won)


@needs_shared
def test_source_details_hold():
    # ties among gold tasks (SOURCE.md): d_sentiment 43, s4_face 28, s4_relevance 916
    for name, ties in (("d_sentiment", 43), ("s4_face", 28), ("s4_relevance", 916)):
        data = load(name)
        assert majority_vote(data.labels, data.gold)[3] == ties
    adult = load("s5_adult")               # truth.csv: 1517 rows, 333 of them labelled tasks
    assert adult.notes["gold_without_labels"] == 1517 - 333
    assert load("s4_relevance").duplicates.pairs == 1489
    # the same crowds under other names: Zhang's copies are 1-based
    for a, b, shift in (("zhang_dog", "s4_dog", 1), ("zhang_rte", "snow_rte", 1),
                        ("zhang_bluebird", "d_duck", 1)):
        ha = load(a).labels["label"].astype(int).value_counts().sort_index()
        hb = load(b).labels["label"].astype(int).value_counts().sort_index()
        assert list(ha.index) == [i + shift for i in hb.index] and list(ha) == list(hb)


@needs_shared
def test_bundled_copies_are_faithful():
    bundled = REPO / "bda_jax" / "data"
    for path in sorted((SHARED_DATA / "active_crowd_toolkit").glob("*.csv")):
        packed = gzip.decompress((bundled / "active_crowd_toolkit" / (path.name + ".gz"))
                                 .read_bytes())
        assert hashlib.sha256(packed).digest() == hashlib.sha256(path.read_bytes()).digest()
    for name in ("labels.yaml", "gt.yaml"):
        assert ((bundled / "bluebirds" / name).read_bytes()
                == (SHARED_DATA / "bluebirds" / name).read_bytes())
    # CUBAM's YAML and Zheng's d_Duck CSV are the same crowd: true <-> "1"
    yaml_rows = set(map(tuple, load("bluebirds").labels.to_numpy().tolist()))
    csv_rows = set(map(tuple, load("d_duck").labels.to_numpy().tolist()))
    assert yaml_rows == csv_rows
    assert load("bluebirds").gold.to_dict() == load("d_duck").gold.to_dict()
    act = cd.load_active_crowd(SHARED_DATA / "active_crowd_toolkit" / "CF_amt.csv")
    assert act.labels.equals(load("act_CF_amt").labels)


def test_bundled_sets_load_without_shared_data(monkeypatch, tmp_path):
    monkeypatch.setenv("BDA_SHARED_DATA", str(tmp_path / "nowhere"))
    data = cd.load_crowd("bluebirds")
    assert (data.n_tasks, data.n_workers, data.n_labels, len(data.gold)) == (108, 39, 4212, 108)
    assert data.notes["bundled"] and data.candidates == ("0", "1")
    assert cd.load_bluebirds().labels.equals(data.labels)
    ms = cd.load_crowd("ACT_ms")                       # names match case-insensitively
    assert ms.name == "act_MS"
    assert ms.candidates == tuple(str(i) for i in range(1, 11))     # numeric order
    with pytest.raises(bda.DataError, match="BDA_SHARED_DATA") as info:
        cd.load_crowd("d_product")
    assert info.value.field == "root"


def test_shared_root_resolution(monkeypatch, tmp_path):
    folder = tmp_path / "zheng_d_product"
    folder.mkdir()
    (folder / "answer.csv").write_text("question,worker,answer\nq1,w1,1\nq1,w2,0\n")
    (folder / "truth.csv").write_text("question,truth\nq1,1\n")
    monkeypatch.setenv("BDA_SHARED_DATA", str(tmp_path))
    data = cd.load_crowd("d_product")
    assert data.name == "d_product" and data.n_labels == 2 and data.gold.to_dict() == {"q1": "1"}
    assert cd.shared_data_root() == tmp_path
    with pytest.raises(bda.DataError) as info:
        cd.load_crowd("d_product", root=tmp_path / "missing")
    assert info.value.field == "root"


def test_unknown_and_numeric_names_are_refused():
    with pytest.raises(bda.DataError, match="unknown crowd data set"):
        cd.load_crowd("nope")
    for name in ("f201_emotion", "snow_anger", "snow_wordsim"):
        with pytest.raises(bda.DataError, match="numeric ratings") as info:
            cd.load_crowd(name)
        assert info.value.field == "name"


@needs_shared
def test_numeric_files_are_refused():
    with pytest.raises(bda.DataError, match="numeric rating") as info:
        cd.load_zheng(SHARED_DATA / "zheng_f201_emotion")
    assert info.value.file.endswith("answer.csv") and info.value.field == "label"
    with pytest.raises(bda.DataError, match="numeric ratings"):
        cd.load_snow(SHARED_DATA / "snow2008" / "wordsim.standardized.tsv")


# ----------------------------------------------------------------------------------- traces
def check_traces(data):
    traces = cd.to_traces(data)
    counts = bda.tally(traces)
    assert counts.vocab == data.candidates
    assert int(counts.N.sum()) == int(counts.e0.sum()) == int(counts.e.sum()) == data.n_labels
    assert counts.shape == (data.n_tasks, data.n_workers, len(data.candidates))
    first_seen = list(dict.fromkeys(data.labels["task"]))
    assert list(counts.task_ids) == first_seen
    index = {c: k for k, c in enumerate(data.candidates)}
    want_gold = [index[data.gold[t]] if t in data.gold.index else -1 for t in first_seen]
    np.testing.assert_array_equal(np.asarray(counts.gold), want_gold)
    return traces, counts


def test_to_traces_tally_bundled():
    data = cd.load_crowd("act_CF_amt")
    traces, counts = check_traces(data)
    # every label is one round-0 propose; the per-cell counts equal a pandas crosstab
    assert all(m.force == "propose" and m.round == 0 for t in traces for m in t.moves)
    assert traces[0].moves[0].id == "r0" and traces[0].moves[0].agent == data.labels.worker[0]
    tab = data.labels.groupby(["task", "worker", "label"]).size()
    agents = {a: i for i, a in enumerate(counts.agents)}
    tasks = {t: i for i, t in enumerate(counts.task_ids)}
    cands = {c: k for k, c in enumerate(data.candidates)}
    e0 = np.zeros(counts.shape, np.int64)
    for (t, w, lab), n in tab.items():
        e0[tasks[t], agents[w], cands[lab]] = n
    np.testing.assert_array_equal(np.asarray(counts.e0), e0)
    assert int(np.asarray(counts.N).max()) == 2          # the 5 duplicated pairs vote twice
    firsts = cd.load_crowd("act_CF_amt", duplicates="first")
    assert int(bda.tally(cd.to_traces(firsts)).N.sum()) == 6030 - 5
    check_traces(cd.load_bluebirds())


@needs_shared
def test_to_traces_tally_largest_set():
    data = load("crowdscale_fact")              # 216,725 labels, 42,624 tasks
    traces, counts = check_traces(data)
    assert sum(len(t.moves) for t in traces) == 216725
    assert int((np.asarray(counts.gold) >= 0).sum()) == 576


# ----------------------------------------------------------------------------------- bad input
def write(path, text, mode="w"):
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def zheng_dir(tmp_path, answers, truth="question,truth\nt1,0\n"):
    write(tmp_path / "z" / "answer.csv", answers)
    if truth is not None:
        write(tmp_path / "z" / "truth.csv", truth)
    return tmp_path / "z"


def raises(func, *args, **kw):
    with pytest.raises(bda.DataError) as info:
        func(*args, **kw)
    assert gc.isenabled()                       # the loaders' GC pause is always undone
    return info.value


def test_error_wrong_column_count(tmp_path):
    d = zheng_dir(tmp_path, "question,worker,answer\nt1,w1,0\nt1,w2,1,9\n")
    err = raises(cd.load_zheng, d)
    assert (err.file, err.line, err.task_id) == (str(d / "answer.csv"), 3, "t1")
    assert "found 4" in str(err)
    path = write(tmp_path / "act.csv", "w1,t1,0,0\nw2,t1,1\n")
    err = raises(cd.load_active_crowd, path)
    assert (err.line, err.task_id) == (2, "t1")


def test_error_empty_label(tmp_path):
    d = zheng_dir(tmp_path, "question,worker,answer\r\nt1,w1,0\r\n\r\nt1,w2,\r\n")   # CRLF
    err = raises(cd.load_zheng, d)
    assert (err.line, err.task_id, err.field) == (4, "t1", "label")


def test_error_not_an_integer(tmp_path):
    crowd = write(tmp_path / "x_crowd.txt", "1 1 1\n1 2 two\n")
    err = raises(cd.load_zhang, crowd)
    assert (err.file, err.line, err.task_id, err.field) == (str(crowd), 2, "1", "label")
    zero = write(tmp_path / "y_crowd.txt", "1 1 1\n0 2 1\n")           # ids are 1-based
    err = raises(cd.load_zhang, zero)
    assert (err.line, err.field) == (2, "task") and ">= 1" in str(err)
    cs = tmp_path / "cs"
    write(cs / "label.csv", "item,worker,label\n0,3,1\n1,w7,0\n")
    write(cs / "truth.csv", "item,truth\n0,1\n")
    err = raises(cd.load_crowdscale, cs)
    assert (err.line, err.task_id, err.field) == (3, "1", "worker")
    snow = write(tmp_path / "rte.standardized.tsv",
                 "!amt_annotation_ids\t!amt_worker_ids\torig_id\tresponse\tgold\n"
                 "a1\tw1\t7\t1\t1\na2\tw2\t7\t0.5\t1\n")
    err = raises(cd.load_snow, snow)
    assert (err.line, err.task_id, err.field) == (3, "7", "label")


def test_error_gold_outside_candidates(tmp_path):
    d = zheng_dir(tmp_path, "question,worker,answer\nt1,w1,0\nt1,w2,1\n",
                  truth="question,truth\nt1,1\nt2,7\n")
    err = raises(cd.load_zheng, d)
    assert (err.file, err.line, err.task_id, err.field) == (str(d / "truth.csv"), 3, "t2", "gold")
    # with the label set given, a label outside it is refused too
    d2 = zheng_dir(tmp_path / "b", "question,worker,answer\nt1,w1,0\nt1,w2,5\n")
    err = raises(cd.load_zheng, d2, candidates=("0", "1"))
    assert (err.line, err.field) == (3, "label")
    # a gold value no worker gave is fine once the candidates include it
    d3 = zheng_dir(tmp_path / "c", "question,worker,answer\nt1,w1,0\n", "question,truth\nt1,1\n")
    assert cd.load_zheng(d3, candidates=["0", "1"]).gold.to_dict() == {"t1": "1"}


def test_error_conflicting_gold(tmp_path):
    path = write(tmp_path / "g.csv", "w1,t1,0,0\nw2,t1,1,0\nw3,t1,1,1\n")
    err = raises(cd.load_active_crowd, path)
    assert (err.line, err.task_id, err.field) == (3, "t1", "gold") and "line 1" in str(err)


def test_error_missing_file_and_header(tmp_path):
    d = zheng_dir(tmp_path, "question,worker,answer\nt1,w1,0\n", truth=None)
    err = raises(cd.load_zheng, d)
    assert err.file == str(d / "truth.csv") and "not found" in str(err)
    err = raises(cd.load_active_crowd, tmp_path / "absent.csv")
    assert err.file == str(tmp_path / "absent.csv")
    headless = zheng_dir(tmp_path / "h", "t1,w1,0\nt1,w2,1\n")
    err = raises(cd.load_zheng, headless)
    assert (err.line, err.field) == (1, "header")
    err = raises(cd.load_bluebirds, tmp_path)                  # no labels.yaml here
    assert err.file.endswith("labels.yaml")


def test_error_bad_encoding_and_yaml(tmp_path):
    path = write(tmp_path / "bad.csv", b"w1,t1,0,0\nw2,t\xff1,1,0\n", mode="wb")
    assert raises(cd.load_active_crowd, path).line == 2
    y = tmp_path / "y"
    write(y / "labels.yaml", "7: {1: true, 2: false,\n  3: [true]}\n")
    write(y / "gt.yaml", "{1: true, 2: true, 3: false}\n")
    err = raises(cd.load_bluebirds, y)
    assert err.line == 2 and "YAML" in str(err)
    write(y / "labels.yaml", "7: {1: true, 2: maybe}\n")
    err = raises(cd.load_bluebirds, y)
    assert (err.line, err.task_id, err.field) == (1, "2", "label")


def test_numeric_labels_refused_generically(tmp_path):
    rows = "".join(f"t{i},w{i},{i * 7 - 100}\n" for i in range(30))
    d = zheng_dir(tmp_path, "question,worker,answer\n" + rows, truth="question,truth\nt1,-93\n")
    err = raises(cd.load_zheng, d)
    assert "numeric rating" in str(err) and err.field == "label"
    assert cd.load_zheng(d, max_classes=50).n_labels == 30       # the user may insist
    anger = write(tmp_path / "anger.standardized.tsv", "x\n")
    assert "numeric ratings" in str(raises(cd.load_snow, anger))


# ----------------------------------------------------------------------------------- formats
DUPS = "question,worker,answer\nt1,w1,0\nt1,w1,1\nt1,w2,1\nt2,w1,0\nt1,w1,1\n"


def test_duplicate_policies(tmp_path):
    d = zheng_dir(tmp_path, DUPS, truth="question,truth\nt1,1\n")
    keep = cd.load_zheng(d)
    assert keep.duplicates == cd.Duplicates(rows=2, pairs=1, policy="keep", dropped=0)
    assert keep.n_labels == 5
    first = cd.load_zheng(d, duplicates="first")
    assert first.labels.values.tolist() == [["t1", "w1", "0"], ["t1", "w2", "1"],
                                            ["t2", "w1", "0"]]
    assert first.duplicates.dropped == 2 and first.duplicates.rows == 2
    last = cd.load_zheng(d, duplicates="last")
    assert last.labels.values.tolist() == [["t1", "w2", "1"], ["t2", "w1", "0"],
                                           ["t1", "w1", "1"]]
    err = raises(cd.load_zheng, d, duplicates="error")
    assert (err.file, err.line, err.task_id, err.field) == (str(d / "answer.csv"), 3, "t1",
                                                            "worker")
    assert "first on line 2" in str(err)
    assert raises(cd.load_zheng, d, duplicates="mean").field == "duplicates"
    counts = bda.tally(cd.to_traces(keep))
    w1 = counts.agents.index("w1")
    assert int(counts.N[0, w1]) == 3 and counts.e0[0, w1].tolist() == [1, 2]


def test_format_variants(tmp_path):
    # BOM, CRLF, padded fields, quoted ids with commas, header aliases, blank lines
    d = zheng_dir(tmp_path, '\ufeffid , worker , answer\r\n"a,b", w1 , 01\r\n\r\nc,w2,1\r\n',
                  truth="q,truth\n\"a,b\",1\n")
    data = cd.load_zheng(d, name="mini")
    assert data.name == "mini"
    assert data.labels.values.tolist() == [["a,b", "w1", "1"], ["c", "w2", "1"]]
    assert data.candidates == ("1",) and data.gold.to_dict() == {"a,b": "1"}
    assert data.gold.index.name == "task" and data.source == str(d / "answer.csv")
    # Zhang: sibling truth found automatically, repeated consistent truth rows, CR-only ends
    crowd = write(tmp_path / "m_crowd.txt", "1\t1\t2\r2\t1\t10\r2\t2\t2\r")
    write(tmp_path / "m_truth.txt", "1 2\n1 2\n2 10\n")
    z = cd.load_zhang(crowd)
    assert z.name == "m" and z.candidates == ("2", "10") and z.gold.to_dict() == {"1": "2",
                                                                                 "2": "10"}
    assert z.notes["gold_source"].endswith("m_truth.txt")
    assert len(cd.load_zhang(crowd, candidates=["2", "10"]).gold) == 2
    # ActiveCrowdToolkit: three columns = no gold; an empty gold cell = unknown
    plain = cd.load_active_crowd(write(tmp_path / "p.csv", "w1,t1,0\nw2,t1,1\n"))
    assert len(plain.gold) == 0 and plain.n_labels == 2
    part = cd.load_active_crowd(write(tmp_path / "q.csv", "w1,t1,0,\nw2,t2,1,1\n"))
    assert part.gold.to_dict() == {"t2": "1"}
    gz = tmp_path / "r.csv.gz"
    gz.write_bytes(gzip.compress(b"w1,t1,0,0,5\nw2,t1,1,0,6\n"))
    assert cd.load_active_crowd(gz).name == "r"


def test_crowd_data_surface():
    data = cd.load_crowd("act_SP_amt")
    assert "act_SP_amt" in repr(data) and "10000 labels" in repr(data)
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.name = "other"                             # frozen
    assert data.notes["format"] == "active_crowd_toolkit"
    assert data.gold.dtype == data.labels["label"].dtype


def test_to_traces_checks_hand_built_data():
    data = cd.load_crowd("act_CF")
    bad = cd.CrowdData("x", data.labels.assign(label=data.labels["label"].where(
        data.labels.index > 0, "9")), data.gold, data.candidates, "mem", data.duplicates)
    assert raises(cd.to_traces, bad).field == "candidates"
    ints = cd.CrowdData("x", data.labels.assign(worker=1), data.gold, data.candidates, "mem",
                        data.duplicates)
    assert raises(cd.to_traces, ints).field == "worker"
    for col, value in (("task", None), ("label", ""), ("worker", float("nan"))):
        column = data.labels[col].astype(object)
        column.iat[7] = value
        hole = cd.CrowdData("x", data.labels.assign(**{col: column}), data.gold,
                            data.candidates, "mem", data.duplicates)
        assert raises(cd.to_traces, hole).field == col, col
