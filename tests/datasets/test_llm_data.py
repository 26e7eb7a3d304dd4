"""LLM ensemble / debate importers: DASE histories, Du et al. debates, small-model debates.

Expected numbers come from outside the code under test: docs/stopping.md (gold recovery ranges), the
SOURCE.md files of ../shared/data (problem/round counts, accuracies recomputed there with an
independent simple parser), the repository's own result files, and moves derived by hand.
Fixtures under tests/data/llm: a few unmodified lines of the DASE logs (Apache-2.0) and synthetic
transcripts in the Du et al. format (the real ones carry no licence).
"""
import functools
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import bda_jax as bda
from bda_jax import datasets as ld
from bda_jax.stopping import load_history_batch
from reference import REPO, SHARED_DATA

HERE = Path(__file__).resolve().parents[1] / "data" / "llm"
FIX_DASE = HERE / "dase"
FIX_GSM = HERE / "du_gsm_synthetic.json"
FIX_ARITH = HERE / ("agents3_rounds2_temperature_temperature_0.5_0.7_0.9_evaluationRound_2_"
                    "model_synthetic.json")
FIX_MMLU = HERE / "mmlu_TinyLM-1B_persona_alpha+beta+gamma_agents3_rounds2.json"

DASE = SHARED_DATA / "dase_council_traces"
DU_GSM = SHARED_DATA / "du2023_debate_gsm_gpt35"
DU_ARITH = SHARED_DATA / "du2023_debate_arithmetic_gpt35"
SLM = SHARED_DATA / "slm_debate_gsm_mmlu"


def _needs(folder):
    return pytest.mark.skipif(not folder.is_dir(), reason=f"shared data folder {folder} is absent "
                              "(tests on the real logs skipped)")


def _strict_ok(traces):
    """Every trace passes the protocol automaton strictly, and the list tallies."""
    for t in traces:
        bda.resolve_trace(t)
    return bda.tally(traces)


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ld.ParseWarning)
        return fn(*args, **kw)


# =============================================================================== parsers
@pytest.mark.parametrize("text, answer, rule", [
    ("She earns 9 x 2 = 18 dollars, so \\boxed{18}.", "18", "boxed"),
    ("Answer: $\\boxed{1,234}$ apples", "1234", "boxed"),
    ("\\boxed{52 WPM} is the average", "52", "boxed"),
    ("first \\boxed{3} then, correcting, \\boxed{7}", "7", "boxed"),
    ("\\boxed{\\frac{3}{4}}", "0.75", "boxed"),
    ("\\boxed{\\dfrac{1}{3}}", "1/3", "boxed"),
    ("\\boxed{-\\frac{1}{2}}", "-0.5", "boxed"),
    ("the outer \\boxed{ 10 - 5 = \\boxed{5} } wins", "5", "boxed"),
    ("\\boxed{1{,}000}", "1000", "boxed"),
    ("The total is 1,234.50 dollars", "1234.5", "answer_is"),
    ("x = 3 - 10 = -7", "-7", "last_number"),
    ("The result is \u221213.", "-13", "answer_is"),
    ("so 552-70 = 482", "482", "last_number"),
    ("She sold 3/4 of the pie", "0.75", "last_number"),
    ("Reference solution\n#### 72", "72", "hashes"),
    ("the answer is:\n\n19 + 27 * 14 = 397", "397", "last_number"),   # not the expression's 19
    ("the answer is 42 apples, from 6 * 7", "42", "answer_is"),
    ("It costs $18.00 in total.", "18", "last_number"),
    ("The total is $18.00.", "18", "answer_is"),
])
def test_parse_number(text, answer, rule):
    assert ld.parse_number(text) == (answer, rule)


@pytest.mark.parametrize("text", ["no number at all", "", None, "\\boxed{x}"])
def test_parse_number_unparsed(text):
    assert ld.parse_number(text) == (None, None)


@pytest.mark.parametrize("text, answer, rule", [
    ("Mercury is closest.\n\n(B)", "B", "final"),
    ("... not monosomy. (D)", "D", "final"),
    ("Reasoning...\n**(C)**", "C", "final"),
    ("Reasoning...\nAnswer: D", "D", "final"),
    ("Thus the answer is B, not A.", "B", "answer_is"),
    ("I think the correct option is (C) because it is warm.", "C", "answer_is"),
    ("So we choose **(A) 46,XX** here, though others differ.", "A", "bold"),
    ("This aligns with **Option D**, the usual trend.", "D", "bold"),
    ("Review of the options:\n(C) The articular disc is the site.\nDone.", "C", "line_start"),
    ("We only discussed (B) at length here.", "B", "only_paren"),
])
def test_parse_letter(text, answer, rule):
    assert ld.parse_letter(text) == (answer, rule)


@pytest.mark.parametrize("text", [
    "A fine question; I would rather write a poem about it.",     # prose capitals are not read
    "Options (A) and (C) are both plausible here.",                # two letters, no commitment
    "(X) I cannot decide.",
    "The answer is E.",                                            # not a candidate
])
def test_parse_letter_unparsed(text):
    assert ld.parse_letter(text) == (None, None)


def test_parse_letter_is_restricted_to_the_candidates():
    assert ld.parse_letter("The answer is (E).", "ABCDE") == ("E", "final")
    assert ld.parse_letter("The answer is E, surely.", "ABCDE") == ("E", "answer_is")
    assert ld.parse_letter("The answer is (E).") == (None, None)
    options = {"A": "Venus", "B": "Mercury", "C": "Mars", "D": "Earth"}
    assert ld.parse_letter("(X) Mercury", "ABCD", options) == ("B", "option_text")
    assert ld.parse_letter("I pick B) Mercury, the fast one", "ABCD", options).answer == "B"


def test_canonical_number_and_dase_normalization():
    assert [ld.canonical_number(x) for x in ("0.50", "1/2", "-0", "12,000", "7/3")] == \
        ["0.5", "0.5", "0", "12000", "7/3"]
    norm = ld.normalize_dase_answer
    assert norm("$\\boxed{625}$") == norm("625") == "625"
    assert norm("a + c = 11 + 78 = 89\\") == "a + c = 11 + 78 = 89"
    assert norm("007") == "7" and norm("1,000") == "1000" and norm("0,47") == "0,47"
    assert norm("(A)", "gpqa") == norm("a", "gpqa") == "A" and norm("4.2.0", "gpqa") == "4.2.0"
    assert norm("empty") is None and norm("") is None and norm("  ") is None
    # distinct canonical answers stay distinct under the default normalizer (tally's)
    keys = {norm(x) for x in ("ABCD", "abcd", "$84$", "84", "\\boxed{84}\\", "X^2 - Y^2")}
    assert len({bda.default_normalizer(k) for k in keys}) == len(keys) == 3


# =============================================================================== revisions -> moves
# a, b, c over four rounds (None: no usable answer that round)
HISTORY = [{"a": "1", "b": "2", "c": None},
           {"a": "1", "b": "1", "c": "3"},
           {"a": "3", "b": "4", "c": None},
           {"a": "3", "b": "1", "c": "3"}]


def _view(moves):
    return [(m.id, m.force, m.target if m.force in ("concede", "retract") else m.answer)
            for m in moves]


def test_typed_moves_by_hand():
    moves = ld.revisions_to_moves(HISTORY, ["a", "b", "c"], moves="typed")
    assert _view(moves) == [
        ("r0.a", "propose", "1"), ("r0.b", "propose", "2"),
        ("r1.a", "propose", "1"),                 # keeps 1: re-proposal
        ("r1.b", "concede", "r0.a"),              # 1 was a's answer in round 0
        ("r1.c", "propose", "3"),                 # first answer, nobody said 3
        ("r2.a", "concede", "r1.c"),              # 3 was c's answer in round 1 (no retract)
        ("r2.b.retract", "retract", "r1.b"),      # 4 is new: retract own 1 (held by r1.b) ...
        ("r2.b", "propose", "4"),                 # ... and propose 4
        ("r3.a", "propose", "3"),
        ("r3.b.retract", "retract", "r2.b"),      # back to 1, which nobody said in round 2
        ("r3.b", "propose", "1"),
        ("r3.c", "propose", "3"),                 # c's standing answer survives its silent round
    ]
    assert [m.answer for m in moves if m.force == "concede"] == ["1", "3"]


def test_typed_moves_one_vote_per_round_by_hand():
    moves = ld.revisions_to_moves(HISTORY, ["a", "b", "c"], moves="typed", one_vote_per_round=True)
    assert _view(moves) == [
        ("r0.a", "propose", "1"), ("r0.b", "propose", "2"),
        ("r1.b", "concede", "r0.a"), ("r1.c", "propose", "3"),
        ("r2.a", "concede", "r1.c"), ("r2.b.retract", "retract", "r1.b"), ("r2.b", "propose", "4"),
        ("r3.b.retract", "retract", "r2.b"), ("r3.b", "propose", "1"),
    ]
    # a peer's dropped re-proposal: the concede targets its latest move holding the answer
    hist = [{"a": "1", "b": "2"}, {"a": "1", "b": "2"}, {"a": "1", "b": "1"}]
    assert _view(ld.revisions_to_moves(hist, moves="typed", one_vote_per_round=True)) == [
        ("r0.a", "propose", "1"), ("r0.b", "propose", "2"), ("r2.b", "concede", "r0.a")]
    assert _view(ld.revisions_to_moves(hist, moves="typed"))[-1] == ("r2.b", "concede", "r1.a")


def test_concede_never_targets_a_move_of_the_same_round():
    hist = [{"a": "1", "b": "2"}, {"a": "1", "b": "1"}]
    assert _view(ld.revisions_to_moves(hist, moves="typed"))[-1] == ("r1.b", "concede", "r0.a")


def test_proposals_mapping_by_hand():
    moves = ld.revisions_to_moves(HISTORY, ["a", "b", "c"])
    assert [(m.id, m.answer) for m in moves] == [
        ("r0.a", "1"), ("r0.b", "2"), ("r1.a", "1"), ("r1.b", "1"), ("r1.c", "3"), ("r2.a", "3"),
        ("r2.b", "4"), ("r3.a", "3"), ("r3.b", "1"), ("r3.c", "3")]
    assert {m.force for m in moves} == {"propose"}
    dropped = ld.revisions_to_moves(HISTORY, ["a", "b", "c"], one_vote_per_round=True)
    assert [m.id for m in dropped] == ["r0.a", "r0.b", "r1.b", "r1.c", "r2.a", "r2.b", "r3.b"]


def test_typed_counts_by_hand():
    """Tally of the hand history (candidates 1, 2, 3, 4), derived from the force table."""
    moves = ld.revisions_to_moves(HISTORY, ["a", "b", "c"], moves="typed")
    trace = bda.Trace("t", tuple(moves), ("1", "2", "3", "4"), gold="1")
    counts = bda.tally([trace], agents=["a", "b", "c"])
    # a: +1 (r0), +1 (r1), +3 (concede r2), +3 (r3)       -> N 4, e [2,0,2,0]
    # b: +2, +1 (concede), -1 (retract), +4, -4, +1       -> N 6, e [2,1,0,1], rejected {1, 4}
    # c: +3, +3                                           -> N 2, e [0,0,2,0]
    np.testing.assert_array_equal(counts.N[0], [4, 6, 2])
    np.testing.assert_array_equal(counts.e[0], [[2, 0, 2, 0], [2, 1, 0, 1], [0, 0, 2, 0]])
    np.testing.assert_array_equal(counts.c[0, 1], [2 + 1, 1 + 2, 0 + 2, 1 + 1])
    ovpr = bda.tally([trace], agents=["a", "b", "c"], one_move_per_round=True)
    np.testing.assert_array_equal(ovpr.N[0], [4, 4, 2])   # tally keeps b's propose, not retract


def test_revisions_reject_unknown_mapping():
    with pytest.raises(bda.DataError, match="moves must be one of"):
        ld.revisions_to_moves(HISTORY, moves="votes")


# =============================================================================== DASE fixtures
def test_dase_fixture_gold_recovery():
    aime = ld.recover_dase_gold(FIX_DASE, "aime")
    assert dict(aime) == {2: "164", 3: "20", 5: "728"} and aime.n_problems == 5
    assert aime.wrong[1] == ["-a x_2 - b y_2 + a^2 + b^2", "84"]
    gpqa = ld.recover_dase_gold([FIX_DASE], "gpqa")
    assert dict(gpqa) == {2: "A", 3: "A", 5: "B"} and gpqa.n_recovered == 3
    assert "gold recovered for 3 of 5" in gpqa.summary()
    with pytest.raises(bda.DataError, match="benchmark must be"):
        ld.recover_dase_gold(FIX_DASE, "math")


def test_dase_recovery_prefers_the_integer_and_reports_conflicts(tmp_path):
    rows = [{"idx": 1, "winner": "a + c = 11 + 78 = 89\\", "acc": 1},
            {"idx": 1, "winner": "89", "acc": 1},
            {"idx": 2, "winner": "$\\boxed{12}$", "acc": 1},
            {"idx": 2, "winner": "12", "acc": 0},
            {"idx": 3, "winner": "5", "acc": 1},
            {"idx": 3, "winner": "6", "acc": 1},
            {"idx": 4, "winner": "empty", "acc": 0}]
    path = tmp_path / "safe_SC70_Benchmark_Logs.jsonl"
    path.write_text("".join(json.dumps(dict(r, category="Frontier Math (AIME)")) + "\n"
                            for r in rows))
    gold = ld.recover_dase_gold(path)
    assert dict(gold) == {1: "89"} and gold.benchmark == "aime" and gold.n_problems == 4
    assert gold.conflicts == {2: ["12"]} and gold.ambiguous == {3: ["5", "6"]}


def test_dase_fixture_traces_both_mappings():
    gold = ld.recover_dase_gold(FIX_DASE, "aime")
    path = FIX_DASE / "safe_DASE_Bellman_History_8_alpha0_2.jsonl"
    for mapping in ld.MOVE_MAPPINGS:
        traces = ld.load_dase_history(path, gold, moves=mapping)
        counts = _strict_ok(traces)
        assert counts.shape[:2] == (3, 5) and counts.agents == tuple(f"slot{i}" for i in range(5))
    assert [t.task_id for t in traces] == ["aime-1", "aime-2", "aime-3"]
    assert [t.gold for t in traces] == [None, "164", "20"]
    assert traces.report["n_rounds"] == 8 + 15 + 8 and traces.report["n_gold"] == 2
    t2 = traces[1]
    assert t2.candidates == ("164",) and t2.cluster == "aime-2"
    assert ["slot2", 0] in t2.extra["empty"] and t2.extra["dase"]["idx"] == 2
    assert t2.extra["slot_models"]["slot3"] == "llama-3.3-70b-instruct"
    # every usable answer is one endorsing move; empties are not moves
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    usable = sum(n != "empty" for n in (x for step in raw[1]["history"] for x in step["norms"]))
    assert sum(m.force in ("propose", "concede") for m in t2.moves) == usable
    assert len(t2.extra["empty"]) == 5 * len(raw[1]["history"]) - usable


def test_dase_fixture_gpqa_candidates_and_off_candidate_answers():
    traces = ld.load_dase_history(FIX_DASE / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl",
                                  gold="recover", moves="typed")
    counts = _strict_ok(traces)
    assert counts.vocab == ("A", "B", "C", "D") and len(traces) == 5
    assert [t.gold for t in traces] == [None, "A", "A", None, "B"]
    t4 = traces[3]
    assert ["slot2", 0, "4.2.0"] in t4.extra["off_candidate"]
    assert all(m.answer in (None, "A", "B", "C", "D") for t in traces for m in t.moves)
    assert traces.report["off_candidate"] == sum(len(t.extra.get("off_candidate", []))
                                                 for t in traces)


def test_dase_all_empty_problem_is_skipped_and_reported():
    path = FIX_DASE / "safe_DASE_Bellman_History_8Bllama_8_L15_alpha0_2.jsonl"
    with pytest.warns(ld.ParseWarning, match="without any usable answer"):
        traces = ld.load_dase_history(path)
    assert [t.task_id for t in traces] == ["aime-5"] and traces.report["skipped"] == {
        6: "no usable answer in any round"}
    assert set(traces[0].extra["slot_models"].values()) == {"llama-3.1-8b-instruct"}
    with pytest.raises(bda.DataError, match="no slot gave a usable answer") as err:
        ld.load_dase_history(path, all_empty="error")
    assert err.value.line == 2 and err.value.task_id == 6


def test_dase_agent_names_and_slot_models_options():
    path = FIX_DASE / "safe_DASE_Bellman_History_8_alpha0_2.jsonl"
    traces = ld.load_dase_history(path, agent_names="slot+model", task_prefix="w8",
                                  slot_models=["m0", "m1", "m2", "m3", "m4"])
    assert traces[0].task_id == "w8-1" and traces[0].cluster == "aime-1"
    assert traces[0].moves[0].agent == "slot0:m0" and not traces[0].extra["slot_models_inferred"]


@pytest.mark.parametrize("name, models", [
    ("safe_DASE_Bellman_History_4_alpha0_2.jsonl", "QQQLL"),
    ("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl", "QQQLL"),
    ("safe_DASE_Bellman_History_NP_8_L15_alpha0_2.jsonl", "QQQLL"),
    ("safe_DASE_Bellman_History_qwen_8_alpha0_2.jsonl", "QQQQQ"),
    ("safe_DASE_Bellman_History_NP_qwen_8_L15_alpha0_2.jsonl", "QQQQQ"),
    ("safe_DASE_Bellman_History_8Bllama_8_L15_alpha0_2.jsonl", "88888"),
    ("safe_DASE_DDM_History_GPQA_qwll_k4_L15.jsonl", "QQQLL"),
    ("safe_DASE_DDM_History_k4_nopromptinj.jsonl", "QQQQQ"),
    ("safe_DASE_DDM_History_qwll_k8_L15_nopromptinj.jsonl", "QQQLL"),
    ("safe_DASE_Forensics_DDM_qw_8k_15L.jsonl", "QQQQQ"),
    ("safe_DASE_Forensics_DDM_qwll_8k_15L.jsonl", "QQQLL"),
])
def test_dase_slot_models(name, models):
    code = {"qwen3-next-80b-a3b-instruct": "Q", "llama-3.3-70b-instruct": "L",
            "llama-3.1-8b-instruct": "8"}
    assert "".join(code[m] for m in ld.dase_slot_models(name)) == models


def test_bundled_dase_excerpt_loads():
    folder = REPO / "bda_jax" / "data" / "dase_council_traces"
    files = sorted(folder.glob("*.jsonl"))
    assert len(files) == 2 and sum(f.stat().st_size for f in files) < 200_000
    gold = ld.recover_dase_gold(folder, "gpqa")          # from the history cert flags alone
    traces = ld.load_dase_history(folder / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.head50.jsonl",
                                  gold, moves="typed")
    assert len(traces) == 50 and 30 <= len(gold) <= 50
    _strict_ok(traces)
    from bda_jax.datasets import DASE_EXCERPTS          # the public names of the excerpts
    assert sorted(DASE_EXCERPTS.values()) == files


# =============================================================================== DASE errors
def _write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = json.dumps({"idx": 1, "category": "GPQA (Physics)", "cert": {"consensus": "A",
                   "final_acc": 1}, "history": [{"step": 1, "norms": ["A", "B", "A", "empty", "C"]}]})


@pytest.mark.parametrize("record, line, field, match", [
    ("{not json", 2, None, "invalid JSON"),
    ('["a list"]', 2, None, "must be a JSON object"),
    (json.dumps({"history": []}), 2, "idx", "no 'idx'"),
    (json.dumps({"idx": "x7", "history": []}), 2, "idx", "idx must be an integer"),
    (json.dumps({"idx": 1, "history": []}), 2, "idx", "repeats line 1"),
    (json.dumps({"idx": 2, "history": {}}), 2, "history", "non-empty list"),
    (json.dumps({"idx": 2, "history": [{"step": 1, "norms": ["A"]}]}), 2, "history[0].norms",
     "list of 5"),
    (json.dumps({"idx": 2, "history": [{"step": 1, "norms": ["A", 3, "B", "C", "D"]}]}), 2,
     "history[0].norms[1]", "must be a string"),
    (json.dumps({"idx": 2, "history": [{"step": 2, "norms": ["A"] * 5}]}), 2, "history[0].step",
     "steps must count"),
])
def test_dase_history_errors_name_file_line_task_field(tmp_path, record, line, field, match):
    path = _write(tmp_path, "safe_DASE_Bellman_History_GPQA_4_x.jsonl", [GOOD, record])
    # one reader validates the format for the traces and for the stopping replay
    for load in (ld.load_dase_history, lambda p: list(ld.read_dase_history(p)),
                 load_history_batch):
        with pytest.raises(bda.DataError, match=match) as err:
            load(path)
        assert err.value.file == str(path) and err.value.line == line
        assert err.value.field == field
        if field not in (None, "idx"):
            assert err.value.task_id == 2


def test_read_dase_history_records(tmp_path):
    second = json.dumps({"idx": "4", "history": [{"norms": ["B"] * 5}, {"norms": ["x"] * 5}]})
    path = _write(tmp_path, "safe_DASE_Bellman_History_4_x.jsonl", [GOOD, "", second])
    first, other = ld.read_dase_history(path)
    assert (first.line, first.idx, first.benchmark, first.cert["consensus"]) == (1, 1, "gpqa",
                                                                                 "A")
    assert first.rounds == (("A", "B", "A", "empty", "C"),)
    assert (other.line, other.idx, other.benchmark, other.cert) == (3, 4, "gpqa", {})
    assert other.rounds == (("B",) * 5, ("x",) * 5) and other.record["idx"] == "4"
    assert [r.benchmark for r in ld.read_dase_history(path, benchmark="aime")] == ["aime"] * 2
    empty = _write(tmp_path, "safe_DASE_Bellman_History_4_y.jsonl", [""])
    with pytest.raises(bda.DataError, match="holds no record"):
        list(ld.read_dase_history(empty))


def test_dase_flag_errors(tmp_path):
    bad = json.dumps({"idx": 3, "cert": {"consensus": "A", "final_acc": 2}, "history": []})
    path = _write(tmp_path, "safe_DASE_Bellman_History_GPQA_4_x.jsonl", [GOOD, bad])
    with pytest.raises(bda.DataError, match="flag must be 0 or 1") as err:
        ld.recover_dase_gold(path)
    assert (err.value.line, err.value.task_id, err.value.field) == (2, 3, "cert.final_acc")
    csv_path = _write(tmp_path, "safe_DASE_Bellman_Results_GPQA_4_x.csv", [
        "Category,Consensus_S1,DASE_Final,S1_Acc,DASE_Acc", "GPQA (Physics),A,A,1,1",
        "GPQA (Physics),B,B,0,yes"])
    with pytest.raises(bda.DataError, match="flag must be 0 or 1") as err:
        ld.recover_dase_gold(csv_path)
    assert (err.value.line, err.value.task_id, err.value.field) == (3, 2, "DASE_Acc")
    with pytest.raises(bda.DataError, match="no such file"):
        ld.recover_dase_gold(tmp_path / "missing.jsonl")
    with pytest.raises(bda.DataError, match="gold must be None"):
        ld.load_dase_history(path, gold="auto")


# =============================================================================== Du / SLM fixtures
def test_du_gsm_fixture_parse_and_typed_moves():
    with pytest.warns(ld.ParseWarning, match="parse rate below 0.9"):
        traces, report = ld.load_du_debate(FIX_GSM, moves="typed")
    _strict_ok(traces)
    by_q = {t.extra["question"].split(":")[1].split()[1]: t for t in traces}   # "a", "the", "1,000"
    eggs, temp, apples = by_q["stall"], by_q["temperature"], by_q["apples"]
    assert eggs.gold == "18" and temp.gold == "-7" and apples.gold == "1234"
    assert _view(eggs.moves) == [
        ("r0.agent0", "propose", "18"), ("r0.agent1", "propose", "20"),
        ("r0.agent2", "propose", "18"), ("r1.agent0", "propose", "18"),
        ("r1.agent1", "concede", "r0.agent0"), ("r1.agent2", "propose", "18")]
    assert _view(temp.moves) == [
        ("r0.agent0", "propose", "-7"), ("r0.agent2", "propose", "0.75"),
        ("r1.agent0", "propose", "-7"), ("r1.agent1", "concede", "r0.agent0"),
        ("r1.agent2.retract", "retract", "r0.agent2"), ("r1.agent2", "propose", "0.5")]
    assert temp.extra["unparsed"] == [["agent1", 0]] and temp.candidates == ("-7", "0.75", "0.5")
    assert {m.answer for m in apples.moves} == {"1234"}
    assert report.n_answers == 18 and report.n_parsed == 17
    assert report.parse_rate_by_agent == {"agent0": 1.0, "agent1": 5 / 6, "agent2": 1.0}
    assert report.parse_rate_by_round == {0: 8 / 9, 1: 1.0}
    assert report.parse_rate_by_agent_round[("agent1", 0)] == 2 / 3
    assert report.low_parse == ("agent1",) and report.below_chance == () and report.chance == 0
    assert report.accuracy_by_round == {0: 6 / 9, 1: 8 / 9}
    assert report.majority_accuracy_by_round == pytest.approx({0: (1 + 0.5 + 1) / 3, 1: 1.0})
    assert report.unparsed[0]["agent"] == "agent1" and "cannot tell" in report.unparsed[0]["tail"]
    assert report.rules["boxed"] >= 9 and report.rules["unparsed"] == 1


def test_du_arithmetic_fixture_temperatures_and_reference_flag():
    traces, report = ld.load_du_debate(FIX_ARITH)
    counts = _strict_ok(traces)
    assert [t.gold for t in traces] == ["2", "-13"] and counts.shape[:2] == (2, 3)
    assert traces[0].extra["agent_meta"] == {"agent0": {"temperature": 0.5},
                                             "agent1": {"temperature": 0.7},
                                             "agent2": {"temperature": 0.9}}
    assert [t.extra["reference_flag"] for t in traces] == [1, 0]
    answers = [[m.answer for m in t.moves] for t in traces]
    assert answers == [["2", "2", "22", "2", "2", "2"], ["-13", "-13", "13", "-13", "-13", "13"]]
    assert report.parse_rate == 1.0 and not report.flagged
    assert report.accuracy_by_agent == {"agent0": 1.0, "agent1": 1.0, "agent2": 0.25}


def test_slm_mmlu_fixture_letters_personas_and_tripwire():
    with pytest.warns(ld.ParseWarning):
        traces, report = ld.load_slm_debate(FIX_MMLU, moves="typed")
    counts = _strict_ok(traces)
    assert counts.vocab == ("A", "B", "C", "D") and report.chance == 0.25
    agents = ("TinyLM-1B/alpha", "TinyLM-1B/beta", "TinyLM-1B/gamma")
    assert counts.agents == agents and traces[0].extra["model"] == "TinyLM-1B"
    assert traces[0].extra["agent_meta"][agents[1]]["persona"] == "beta"
    planet = traces[0]
    assert [(m.agent[10:], m.round, m.force, m.answer, m.extra.get("rule")) for m in planet.moves] \
        == [("alpha", 0, "propose", "B", "final"), ("beta", 0, "propose", "A", "final"),
            ("gamma", 0, "propose", "C", "answer_is"), ("alpha", 1, "propose", "B", "bold"),
            ("beta", 1, "concede", "B", "answer_is"), ("gamma", 1, "concede", "B", "option_text")]
    assert report.parse_rate == 11 / 12 and report.low_parse == (agents[1],)
    assert report.accuracy_by_agent == {agents[0]: 1.0, agents[1]: 0.5, agents[2]: 0.25}


def _mmlu_file(tmp_path, answers, gold="A", n=4):
    q = "Which? A) one, B) two, C) three, D) four Put the answer in the form (X)."
    data = {f"{q} #{k}": [[[{"role": "user", "content": q},
                            {"role": "assistant", "content": a}] for a in answers], gold]
            for k in range(n)}
    path = tmp_path / "mmlu_Probe_persona_p+q_agents2_rounds1.json"
    path.write_text(json.dumps(data))
    return path


def test_below_chance_tripwire(tmp_path):
    # agent p always commits to a wrong option: below the 1/4 chance floor -> flagged
    path = _mmlu_file(tmp_path, ["Clearly (B)", "It is one. (A)"])
    with pytest.warns(ld.ParseWarning, match="below chance"):
        _, report = ld.load_slm_debate(path)
    assert report.below_chance == ("Probe/p",) and report.flagged
    assert report.parsed_accuracy_by_agent == {"Probe/p": 0.0, "Probe/q": 1.0}
    with pytest.raises(bda.DataError, match="tripwire"):
        ld.load_slm_debate(path, tripwire="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ld.load_slm_debate(path, tripwire="ignore")
    fine = _mmlu_file(tmp_path, ["(A)", "The answer is A."])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not ld.load_slm_debate(fine)[1].flagged


def test_task_without_any_parsed_answer_is_left_out_and_reported(tmp_path):
    path = _mmlu_file(tmp_path, ["no idea", "none"], n=1)
    q2 = {"Other? A) x, B) y #2": [[[{"role": "user", "content": "q"},
                                     {"role": "assistant", "content": "(A)"}]] * 2, "A"]}
    data = json.loads(path.read_text()) | q2
    path.write_text(json.dumps(data))
    traces, report = ld.load_slm_debate(path, tripwire="ignore")
    assert len(traces) == 1 and len(report.tasks_without_answer) == 1 and report.n_tasks == 2
    assert traces[0].candidates == ("A", "B")          # the question lists two options


def test_loaded_traces_round_trip_through_jsonl(tmp_path):
    dase = ld.load_dase_history(FIX_DASE / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl",
                                gold="recover", moves="typed")
    debate, _ = ld.load_du_debate(FIX_GSM, moves="typed", keep_text=True, tripwire="ignore")
    for name, traces in (("dase", dase), ("du", debate)):
        path = tmp_path / f"{name}.jsonl"
        bda.write_traces(traces, path)
        back = bda.read_traces(path)
        assert [t.to_json() for t in back] == [t.to_json() for t in traces]
        np.testing.assert_array_equal(bda.tally(back).c, bda.tally(traces).c)
    assert "boxed" in debate[0].moves[0].extra["text"]


def test_option_validation():
    with pytest.raises(bda.DataError, match="task must be"):
        ld.load_du_debate(FIX_GSM, task="math")
    with pytest.raises(bda.DataError, match="moves must be one of"):
        ld.load_slm_debate(FIX_MMLU, moves="votes")
    with pytest.raises(bda.DataError, match="agent_names must be"):
        ld.load_dase_history(FIX_DASE / "safe_DASE_Bellman_History_8_alpha0_2.jsonl",
                             agent_names="model")


# =============================================================================== Du / SLM errors
def _du_file(tmp_path, data, raw=None):
    path = tmp_path / "gsm_bad.json"
    path.write_text(raw if raw is not None else json.dumps(data, indent=1))
    return path


def _chat(*answers):
    out = []
    for a in answers:
        out += [{"role": "user", "content": "q"}, {"role": "assistant", "content": a}]
    return out


OK_RECORD = [[_chat("\\boxed{1}"), _chat("\\boxed{1}")], "#### 1"]


@pytest.mark.parametrize("record, field, match", [
    ("not a list", "record", "must be a list"),
    ([[_chat("1")]], "record", "must be a list"),
    ([[], "#### 1"], "agent_contexts", "non-empty list"),
    ([[_chat("1")], "#### 1"], "agent_contexts", "1 agents where earlier records have 2"),
    ([[_chat("1"), "chat"], "#### 1"], "agent_contexts[1]", "list of chat messages"),
    ([[_chat("1"), [{"role": "assistant"}]], "#### 1"], "agent_contexts[1][0]", "'role' and"),
    ([[_chat("1"), [{"role": "assistant", "content": 5}]], "#### 1"],
     "agent_contexts[1][0].content", "must be a string"),
    ([[_chat("1"), [{"role": "user", "content": "q"}]], "#### 1"], "agent_contexts[1]",
     "never answers"),
    ([[_chat("1"), _chat("2")], "#### lots"], "gold", "cannot read a number"),
    ([[_chat("1"), _chat("2")], ["#### 1"]], "gold", "must be a string"),
])
def test_du_errors_name_file_line_task_field(tmp_path, record, field, match):
    path = _du_file(tmp_path, {"first question": OK_RECORD, "second question": record})
    with pytest.raises(bda.DataError, match=match) as err:
        ld.load_du_debate(path, task="gsm" if field == "gold" else None)
    assert err.value.file == str(path) and err.value.field == field
    assert err.value.task_id.startswith("gsm-") or err.value.task_id == "second question"
    line = next(k for k, text in enumerate(path.read_text().splitlines(), 1)
                if text.startswith(' "second question":'))
    assert err.value.line == line


def test_du_file_level_errors(tmp_path):
    with pytest.raises(bda.DataError, match="invalid JSON") as err:
        ld.load_du_debate(_du_file(tmp_path, None, raw='{\n "q": [\n'))
    assert err.value.line == 3
    with pytest.raises(bda.DataError, match="non-empty JSON object"):
        ld.load_du_debate(_du_file(tmp_path, []))
    with pytest.raises(bda.DataError, match="letter"):
        ld.load_du_debate(_du_file(tmp_path, {"q": [[_chat("(A)")], "7"]}), task="mmlu")
    with pytest.raises(bda.DataError, match="tripwire must be"):
        ld.load_du_debate(FIX_GSM, tripwire="loud")
    with pytest.raises(bda.DataError, match="cannot read"):
        ld.load_du_debate(tmp_path / "missing.json")


# =============================================================================== real logs
@functools.lru_cache(maxsize=None)
def _real_gold(benchmark):
    return ld.recover_dase_gold(DASE, benchmark)


@_needs(DASE)
def test_real_dase_gold_recovery_counts():
    aime, gpqa = _real_gold("aime"), _real_gold("gpqa")
    assert aime.n_problems == 100 and gpqa.n_problems == 546
    assert 88 <= len(aime) <= 91 and 437 <= len(gpqa) <= 446      # docs/stopping.md
    assert (len(aime), len(gpqa)) == (91, 444)                     # measured here
    # two GPQA items were graded correct only for an answer text, never for a letter
    # NFKC reads the subscripts ₂ ₃ as 2 3 (their compatibility decompositions)
    assert gpqa.unmapped == {109: ["m(a,z) - a"], 311: ["–c(o)ch2ch3"]}
    assert not aime.conflicts and not gpqa.conflicts
    assert set(gpqa.values()) <= set("ABCD") and all(v.isdigit() for v in aime.values())
    assert aime[53] == "184" and aime[26] == "89"      # several accepted surface forms -> integer


@_needs(DASE)
@pytest.mark.parametrize("name, problems, traces, rounds", [
    ("safe_DASE_Bellman_History_8_alpha0_2.jsonl", 100, 100, 1169),      # SOURCE.md
    ("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl", 546, 546, 3194),  # SOURCE.md
    ("safe_DASE_DDM_History_GPQA_qwll_k4_L15.jsonl", 546, 546, 1828),     # SOURCE.md
    ("safe_DASE_Bellman_History_8Bllama_8_L15_alpha0_2.jsonl", 100, 64, 989),
])
def test_real_dase_problem_and_round_counts(name, problems, traces, rounds):
    loaded = _quiet(ld.load_dase_history, DASE / name)
    assert (loaded.report["n_problems"], len(loaded), loaded.report["n_rounds"]) == (
        problems, traces, rounds)
    assert loaded.report["answers"] + loaded.report["empty"] + loaded.report["off_candidate"] == \
        5 * rounds


@_needs(DASE)
def test_real_dase_aime_both_mappings_tally():
    gold = _real_gold("aime")
    path = DASE / "safe_DASE_Bellman_History_8_alpha0_2.jsonl"
    for mapping, ovpr in (("proposals", False), ("typed", False), ("typed", True)):
        traces = ld.load_dase_history(path, gold, moves=mapping, one_vote_per_round=ovpr)
        counts = _strict_ok(traces)
        assert counts.shape[:2] == (100, 5) and int((np.asarray(counts.gold) >= 0).sum()) == 90
        assert int(np.asarray(counts.gold_missing).sum()) == 1       # gold said by no slot
        forces = {m.force for t in traces for m in t.moves}
        assert forces == ({"propose"} if mapping == "proposals" else
                          {"propose", "concede", "retract"})
    assert traces.report["answers"] == 3284 and traces.report["empty"] == 2561


@_needs(DASE)
def test_real_dase_gpqa_typed_tally():
    traces = ld.load_dase_history(DASE / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl",
                                  _real_gold("gpqa"), moves="typed")
    counts = _strict_ok(traces)
    assert counts.vocab == ("A", "B", "C", "D") and counts.shape == (546, 5, 4)
    assert int((np.asarray(counts.gold) >= 0).sum()) == 444
    # typed: one endorsing move (propose or concede) per usable answer, no more
    assert sum(m.force != "retract" for t in traces for m in t.moves) == traces.report["answers"]


@_needs(DU_GSM)
def test_real_du_gsm_parse_rates_and_accuracy():
    traces, report = ld.load_du_debate(DU_GSM / "gsm_3_2_100.json")
    _strict_ok(traces)
    assert report.n_tasks == 100 and report.n_answers == 600 and len(traces) == 100
    assert report.parse_rate == 1.0 and min(report.parse_rate_by_agent.values()) >= 0.99
    # SOURCE.md (independent simple parser): agent accuracy .747 -> .793, MV .807 -> .800
    assert report.accuracy_by_round == pytest.approx({0: 0.747, 1: 0.793}, abs=0.0015)
    assert report.majority_accuracy_by_round == pytest.approx({0: 0.807, 1: 0.800}, abs=0.0015)
    assert not report.flagged
    typed, _ = ld.load_du_debate(DU_GSM / "gsm_3_2_100.json", moves="typed")
    _strict_ok(typed)
    roleplay = ld.load_du_debate(DU_GSM / "gsm_3_2_roleplay.json")[1]
    assert roleplay.n_tasks == 19 and roleplay.parse_rate >= 0.99
    assert roleplay.majority_accuracy_by_round == pytest.approx({0: 0.333, 1: 0.421}, abs=0.0015)


@_needs(DU_ARITH)
def test_real_du_arithmetic_against_the_repo_results():
    for path in sorted(DU_ARITH.glob("*.json")):
        traces, report = ld.load_du_debate(path)
        assert (report.n_tasks, report.n_answers, len(traces)) == (100, 600, 100)
        assert report.parse_rate >= 0.99 and not report.flagged       # measured: 1.000
        published = float(path.with_suffix(".txt").read_text().split(":")[1].split()[0])
        assert abs(report.majority_accuracy_by_round[1] - published) <= 0.03
        if "0.4_0.7_1_" in path.name:    # SOURCE.md: agent .830 -> .930, MV .873 -> .960
            assert report.accuracy_by_round == pytest.approx({0: 0.830, 1: 0.930}, abs=0.0015)
            assert report.majority_accuracy_by_round[1] == pytest.approx(0.96)
            assert traces[0].extra["agent_meta"]["agent2"] == {"temperature": 1.0}


@_needs(SLM)
def test_real_slm_parse_rates_and_tripwire():
    floors = {"gsm_Mistral": 0.99, "gsm_Qwen3-0.6B": 0.99, "gsm_Qwen3-14B": 0.99,
              "gsm_VibeThinker": 0.99, "mmlu_Qwen3-14B": 0.95, "mmlu_Mistral": 0.70}
    gsm_ids = []
    for path in sorted(SLM.glob("*.json")):
        floor = next(v for k, v in floors.items() if path.name.startswith(k))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            traces, report = ld.load_slm_debate(path)
        _strict_ok(traces)
        assert report.n_tasks == 20 and report.n_answers == 300, path.name
        assert report.parse_rate >= floor, (path.name, report.parse_rate)
        assert report.below_chance == (), path.name      # no parser artifact below 1/K
        if path.name.startswith("mmlu_Mistral"):
            # measured 0.730: prose-only answers stay unparsed, and the parse floor says so
            assert report.parse_rate < 0.9 and report.low_parse and caught
            assert report.majority_accuracy_by_round[2] == pytest.approx(0.55, abs=0.03)
        else:
            assert not report.low_parse and not caught, path.name
        if path.name.startswith("gsm"):
            gsm_ids.append({t.task_id for t in traces})
            assert len({m.agent.split("/")[0] for t in traces for m in t.moves}) == 1
    assert len(gsm_ids) == 4 and all(ids == gsm_ids[0] for ids in gsm_ids)   # poolable by id


@_needs(SLM)
def test_real_slm_typed_mapping_tallies():
    path = next(SLM.glob("gsm_Mistral*.json"))
    for ovpr in (False, True):
        traces, _ = ld.load_slm_debate(path, moves="typed", one_vote_per_round=ovpr)
        counts = _strict_ok(traces)
        assert counts.shape[:2] == (20, 5)
    assert {m.force for t in traces for m in t.moves} == {"propose", "concede", "retract"}
