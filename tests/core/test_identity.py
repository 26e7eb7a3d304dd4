"""One answer identity, one agent identity, one key per JSON object (docs/trace-format.md,
"Identities"; issue #19 class 4).

Expected values are derived by hand from the Unicode tables: NFKC maps fullwidth ``Ａ``
(U+FF21) to ``A``, the decomposed ``e`` + U+0301 to the composed ``é`` (U+00E9), the Angstrom
sign U+212B and ``A`` + U+030A both to ``Å`` (U+00C5), and ideographic space U+3000 to a space.
"""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax._core.io import read_json_file  # private: the shared whole-file JSON reader
from bda_jax import normalize_id

NFC, NFD = "caf\u00e9", "cafe\u0301"          # one word, two Unicode spellings


def _write(tmp_path, *tasks, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join((t if isinstance(t, str) else json.dumps(t)) + "\n"
                            for t in tasks), encoding="utf-8")
    return path


def _move(mid, agent, answer=None, force="propose", rnd=0, **kw):
    m = {"id": mid, "agent": agent, "round": rnd, "force": force}
    if answer is not None:
        m["answer"] = answer
    m.update(kw)
    return m


# ------------------------------------------------------------------------- the normalizer
@pytest.mark.parametrize("a, b", [
    (NFC, NFD),                          # composed vs decomposed
    ("\uff21", "A"),                     # fullwidth letter
    ("\uff08\uff22\uff09", "b"),         # fullwidth "(B)": parentheses and letter
    ("\u212b", "A\u030a"),               # Angstrom sign vs A + combining ring
    ("\uff04\\boxed{7}\uff04", "7"),     # fullwidth dollar signs around \boxed{7}
])
def test_default_normalizer_reads_unicode_forms_as_one_answer(a, b):
    assert bda.default_normalizer(a) == bda.default_normalizer(b)


def test_default_normalizer_leaves_ascii_as_before_and_is_idempotent():
    # the pre-NFKC rules, by hand: strip, peel $ and \boxed{}, casefold, (a) -> a
    assert [bda.default_normalizer(s) for s in (" $\\boxed{625}$ ", "(A)", "b)", "True", "1/2")] \
        == ["625", "a", "b", "true", "1/2"]
    for s in (NFD, "\u01f0", "\u1fb7", "(\uff21)", "$$", "\u3000x\u3000", "\u017f"):
        once = bda.default_normalizer(s)
        assert bda.default_normalizer(once) == once, s


def test_normalize_id_strips_and_folds_width_but_keeps_case():
    assert normalize_id("\u3000gemma ") == "gemma"
    assert normalize_id("\uff47\uff45\uff4d\uff4d\uff41") == "gemma"       # fullwidth
    assert normalize_id("GEMMA") == "GEMMA"
    assert normalize_id(NFD) == NFC


# ------------------------------------------------------------------------- answers in traces
def test_nfc_and_nfd_answers_are_one_candidate(tmp_path):
    path = _write(tmp_path, {"task_id": "t", "moves": [_move("m1", "a", NFC),
                                                       _move("m2", "b", NFD)]})
    counts = bda.tally(bda.read_traces(path))
    # one candidate (first seen: the NFC spelling), both agents endorse it once
    assert counts.info.candidates == ((NFC,),)
    assert np.asarray(counts.e).tolist() == [[[1], [1]]]


def test_fullwidth_answer_matches_its_candidate_and_gold(tmp_path):
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", "B"], "gold": "\uff22",
                             "moves": [_move("m1", "a", "\uff08\uff22\uff09")]})
    counts = bda.tally(bda.read_traces(path))
    assert np.asarray(counts.e).tolist() == [[[0, 1]]] and np.asarray(counts.gold).tolist() == [1]


# ------------------------------------------------------------------------- empty answers
@pytest.mark.parametrize("empty", ["", "   ", "\u3000", "$$", "\\boxed{}"])
def test_a_propose_with_an_empty_answer_is_inadmissible(tmp_path, empty):
    task = {"task_id": "t", "candidates": ["A", "B"],
            "moves": [_move("m1", "a", "A"), _move("m2", "b", empty)]}
    path = _write(tmp_path, task)
    with pytest.raises(bda.TraceError) as info:
        bda.read_traces(path)
    err = info.value
    assert (err.file, err.line, err.task_id, err.move_id, err.field) == (
        str(path), 1, "t", "m2", "answer")
    with pytest.warns(UserWarning, match="missing_answer: 1"):
        (trace,) = bda.read_traces(path, lenient=True)
    assert [m.id for m in trace.moves] == ["m1"]
    assert [(s.move_id, s.code, s.field) for s in trace.skipped] == [("m2", "missing_answer",
                                                                      "answer")]


def test_an_empty_answer_never_becomes_a_candidate(tmp_path):
    # without a candidate list the candidates are the answers seen: the blank one is not one
    path = _write(tmp_path, {"task_id": "t", "moves": [_move("m1", "a", "A"),
                                                       _move("m2", "b", " ")]})
    with pytest.warns(UserWarning):
        (trace,) = bda.read_traces(path, lenient=True)
    assert bda.tally([trace]).info.candidates == (("A",),)


def test_an_empty_answer_on_concede_challenge_abstain_is_absent(tmp_path):
    moves = [_move("m1", "a", "A"),
             _move("m2", "b", "", force="concede", target="m1"),     # counts for A (+1)
             _move("m3", "c", " ", force="challenge", target="m1"),  # no 'answer' given: -1 on A
             _move("m4", "d", "", force="abstain")]                  # no information
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", "B"], "moves": moves})
    (r,) = [bda.resolve_trace(t) for t in bda.read_traces(path)]
    assert (r.agent, r.cand, r.sign) == (("a", "b", "c"), (0, 0, 0), (1, 1, -1))


@pytest.mark.parametrize("cand", ["", "  ", "$$"])
def test_an_empty_candidate_is_a_task_error(tmp_path, cand):
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", cand],
                             "moves": [_move("m1", "a", "A")]})
    for lenient in (False, True):
        with pytest.raises(bda.TraceError) as info:
            bda.read_traces(path, lenient=lenient)
        assert (info.value.task_id, info.value.field) == ("t", "candidates")


@pytest.mark.parametrize("gold", ["", " ", "$$"])
def test_an_empty_gold_is_unlabeled_not_wrong(tmp_path, gold):
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", "B"], "gold": gold,
                             "moves": [_move("m1", "a", "A")]})
    counts = bda.tally(bda.read_traces(path))
    assert np.asarray(counts.gold).tolist() == [-1]
    assert np.asarray(counts.gold_missing).tolist() == [False]


# ------------------------------------------------------------------------- agent ids
def test_two_spellings_of_one_agent_are_one_agent(tmp_path):
    moves = [_move("m1", "gemma", "A"), _move("m2", " gemma\t", "B", rnd=1),
             _move("m3", "\uff47\uff45\uff4d\uff4d\uff41", "A", rnd=2), _move("m4", "phi", "B")]
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", "B"], "moves": moves})
    traces = bda.read_traces(path)
    assert [m.agent for m in traces[0].moves] == ["gemma", "gemma", "gemma", "phi"]
    counts = bda.tally(traces)
    assert counts.agents == ("gemma", "phi")
    # gemma proposed A twice and B once; phi B once
    assert np.asarray(counts.e).tolist() == [[[2, 1], [0, 1]]]
    out = tmp_path / "back.jsonl"                       # written back in the canonical form
    bda.write_traces(traces, out)
    assert [m["agent"] for m in json.loads(out.read_text())["moves"]] == [
        "gemma", "gemma", "gemma", "phi"]


def test_agent_spellings_share_round_order_and_own_moves(tmp_path):
    # round order is per agent: the fullwidth spelling's round 0 comes after round 1
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", "B"], "moves": [
        _move("m1", "a", "A", rnd=1), _move("m2", "\uff41", "B", rnd=0)]})
    with pytest.raises(bda.TraceError) as info:
        bda.read_traces(path)
    assert (info.value.move_id, info.value.field) == ("m2", "round")
    # a retract of one's own move under another spelling is one's own
    path = _write(tmp_path, {"task_id": "t", "candidates": ["A", "B"], "moves": [
        _move("m1", "a", "A"), _move("m2", " a ", force="retract", rnd=1, target="m1")]},
        name="own.jsonl")
    (r,) = [bda.resolve_trace(t) for t in bda.read_traces(path)]
    assert (r.agent, r.sign) == (("a", "a"), (1, -1))


def test_an_agent_id_that_is_only_whitespace_is_refused(tmp_path):
    path = _write(tmp_path, {"task_id": "t", "moves": [_move("m1", "\u3000", "A")]})
    with pytest.raises(bda.TraceError) as info:
        bda.read_traces(path)
    assert (info.value.move_id, info.value.field) == ("m1", "agent")


def test_in_memory_traces_get_the_same_agent_identity():
    moves = (bda.Move("m1", "a", 0, "propose", "A"), bda.Move("m2", "\uff41 ", 0, "propose", "A"))
    counts = bda.tally([bda.Trace("t", moves, ("A",))])
    assert counts.agents == ("a",) and np.asarray(counts.e).tolist() == [[[2]]]


# ------------------------------------------------------------------------- duplicate keys
@pytest.mark.parametrize("line, where", [
    ('{"task_id": "t", "candidates": ["A"], "moves": [{"id": "m1", "agent": "a", "round": 0, '
     '"force": "propose", "answer": "A", "answer": "B"}]}', ("t", "m1", "answer")),
    ('{"task_id": "t", "gold": "A", "candidates": ["A"], "gold": "B", "moves": [{"id": "m1", '
     '"agent": "a", "round": 0, "force": "propose", "answer": "A"}]}', ("t", None, "gold")),
    ('{"task_id": "t", "candidates": ["A"], "moves": [{"id": "m1", "agent": "a", "round": 0, '
     '"force": "propose", "answer": "A", "note": {"k": 1, "k": 2}}]}', ("t", None, "k")),
])
def test_a_repeated_key_is_an_error_naming_it(tmp_path, line, where):
    path = _write(tmp_path, {"task_id": "t0", "moves": [_move("m1", "a", "A")]}, line)
    for read in (bda.read_traces, bda.tally_stream):
        with pytest.raises(bda.TraceError) as info:
            read(path)
        err = info.value
        assert (err.file, err.line) == (str(path), 2)
        assert (err.task_id, err.move_id, err.field) == where
        assert "duplicate key" in err.reason


def test_a_repeated_key_in_a_json_file_is_an_error(tmp_path):
    path = tmp_path / "model.json"
    path.write_text('{"schema_version": 1, "kind": "x", "kind": "y"}', encoding="utf-8")
    with pytest.raises(bda.ArtifactError) as info:
        read_json_file(path, bda.ArtifactError, "the model file")
    assert (info.value.file, info.value.field) == (str(path), "kind")
