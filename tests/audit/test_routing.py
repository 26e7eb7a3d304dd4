"""Routing audit ([Audit]; docs/audit.md): broadcast-log data model and loaders, routing metrics,
router counterfactuals, sanity checks and the cluster bootstrap."""
import dataclasses
import json
import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest

from bda_jax.audit import (
    METRICS, ROUTERS, BroadcastLog, audit_broadcast, cluster_bootstrap, commitment_inputs, cra,
    ctr, divergence_sources, effective_selection, from_frame, from_records, hrwp,
    learned_router_probabilities, load_confmad, mcr, metric_terms, noisy_oracle_check,
    noisy_oracle_scores, oracle_success, pcca, per_tier, permutation_null_pcca,
    permute_scores_within_blocks, ratio_bootstrap, read_broadcast_log, router_block_success,
    router_counterfactuals, routing_audit, runtime_argmax, runtime_success, score_pairs,
    selected_invalid_rate, simulate_broadcast, tier_stratified_folds, unselected_blocks,
    write_broadcast_log)
from bda_jax.audit._routing import _fit_logistic  # private: the learned router's Newton fit
from bda_jax import DataError, TraceError
from reference import SHARED_DATA

CONFMAD = SHARED_DATA / "broadcast_logs" / "ConfMAD"


def poll(problem, turn, agent, score, cand, correct, selected=False, outer=0, **extra):
    return {"kind": "poll", "problem": problem, "outer_round": outer, "turn": turn, "agent": agent,
            "score": score, "candidate": cand, "correct": correct, "selected": selected, **extra}


# Six hand-made blocks, agents listed a, b, c ("g"-style answers: x correct unless stated).
#   block  polls (score, answer, label)                     selected  classes
#   1      a .9 x C | b .5 y W | c .5 x C                   a         sel-valid correct, mixed
#   2      a .6 y W | b .6 x C | c .3 -                     a (tie)   sel-valid wrong, miss, mixed
#   3      a .8 -   | b .4 x C | c .7 y W                   a         sel invalid, mixed
#   4      a .7 y W | b .2 w W | c NaN y W                  a         sel-valid wrong, no correct
#   5      a .5 -   | b .5 -   | c NaN -                    a         nothing valid
#   6      a .3 -   | b .9 x C                              b         sel-valid correct, 1 valid
HAND = [
    poll("p1", 0, "a", .9, "x", True, True), poll("p1", 0, "b", .5, "y", False),
    poll("p1", 0, "c", .5, "x", True),
    poll("p1", 1, "a", .6, "y", False, True), poll("p1", 1, "b", .6, "x", True),
    poll("p1", 1, "c", .3, None, None),
    poll("p2", 0, "a", .8, None, None, True), poll("p2", 0, "b", .4, "x", True),
    poll("p2", 0, "c", .7, "y", False),
    poll("p2", 1, "a", .7, "y", False, True), poll("p2", 1, "b", .2, "w", False),
    poll("p2", 1, "c", None, "y", False),
    poll("p3", 0, "a", .5, None, None, True), poll("p3", 0, "b", .5, None, None),
    poll("p3", 0, "c", None, None, None),
    poll("p3", 1, "a", .3, None, None), poll("p3", 1, "b", .9, "x", True, True),
]


@pytest.fixture(scope="module")
def hand():
    return from_records(HAND)


@pytest.fixture(scope="module")
def sim():
    return simulate_broadcast(0, n_problems=600)


# ====================================================================== data model and loaders
def test_blocks_positions_and_validity(hand):
    assert hand.n_blocks == 6 and hand.n_polls == 17
    assert hand.block_size.tolist() == [3, 3, 3, 3, 3, 2]
    assert hand.position.tolist() == [0, 1, 2] * 5 + [0, 1]
    assert hand.block_problem.tolist() == ["p1", "p1", "p2", "p2", "p3", "p3"]
    assert hand.block_turn.tolist() == [0, 1, 0, 1, 0, 1]
    assert hand.valid.sum() == 11 and hand.correct.sum() == 5
    assert np.isnan(hand.score[11]) and not hand.valid[5] and not hand.correct[5]
    # one tier "", clusters default to chunks of 10 problems: all three problems in cluster "0"
    assert set(hand.tier) == {""} and set(hand.cluster) == {"0"}
    # the runtime rule replays the logged picks (block 2: tie .6/.6, first listed wins)
    assert np.array_equal(runtime_argmax(hand), hand.selected)


def test_listing_order_is_file_order_even_when_blocks_interleave():
    log = from_records([poll("p", 0, "b", .5, "x", True), poll("p", 1, "a", .5, "x", True),
                        poll("p", 0, "a", .5, "y", False)])
    assert log.agent.tolist() == ["b", "a", "a"] and log.position.tolist() == [0, 1, 0]
    assert runtime_argmax(log).tolist() == [True, False, True]   # b listed first in block 0


def test_default_clusters_chunk_ten_problems_within_each_tier():
    recs = [poll(f"q{i}", 0, "a", .5, "x", True, tier="A" if i < 12 else "B")
            for i in range(25)]
    log = from_records(recs)
    assert log.block_cluster.tolist() == ["A/0"] * 10 + ["A/1"] * 2 + ["B/0"] * 10 + ["B/1"] * 3
    assert from_records(recs, cluster_size=5).block_cluster.tolist()[:6] == ["A/0"] * 5 + ["A/1"]


def test_round_trip_with_speak_records(tmp_path):
    records = HAND[:6] + [
        {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 0, "speaker": "a",
         "spoken": " X ", "spoken_correct": True, "incumbent": None,
         "equivalence": "equivalent", "equivalence_source": "exact", "note": "ignored"},
        {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 1, "speaker": "a",
         "spoken": "z", "spoken_correct": False, "incumbent": "x",
         "earlier_public": ["q", {"agent": "b", "answer": "$\\boxed{Y}$"}],
         "equivalence": "divergent", "equivalence_source": "judge:gemma"}]
    log = from_records(records)
    assert log.spoken.tolist() == ["x", "z"]                 # normalized
    # absent earlier_public is derived from earlier speak records; given ones are normalized
    assert log.earlier_public.tolist() == [(), ((None, "q"), ("b", "y"))]
    assert log.speak_poll_row.tolist() == [0, 3]
    path = tmp_path / "log.jsonl"
    write_broadcast_log(log, path)
    assert read_broadcast_log(path) == log
    sim = simulate_broadcast(3, n_problems=12)
    write_broadcast_log(sim, path)
    assert read_broadcast_log(path) == sim
    assert read_broadcast_log(path) != simulate_broadcast(4, n_problems=12)


def test_from_frame_matches_from_records():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "kind"} for r in HAND])
    assert from_frame(frame) == from_records(HAND)


GOOD = poll("p1", 0, "a", .5, "x", True, True)


@pytest.mark.parametrize("lines, line, task, fld, words", [
    ([{**GOOD, "score": "0.5"}], 1, "p1", "score", "number"),
    ([GOOD, {**GOOD, "kind": "vote", "agent": "b"}], 2, "p1", "kind", "unknown kind"),
    ([{**GOOD, "score": 1.5}], 1, "p1", "score", "outside"),
    ([GOOD, {**GOOD, "selected": False}], 2, "p1", "agent", "polled twice"),
    ([GOOD, {**GOOD, "agent": "b"}], 2, "p1", "selected", "second selected"),
    ([GOOD, {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 7, "speaker": "a"}],
     2, "p1", "turn", "no poll"),
    ([GOOD, {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 0, "speaker": "b"}],
     2, "p1", "speaker", "not polled"),
    ([{**GOOD, "tier": "1"}, {**GOOD, "agent": "b", "selected": False, "tier": "3"}], 2, "p1",
     "tier", "differs"),
    ([{**GOOD, "candidate": None}], 1, "p1", "correct", "no candidate"),
    ([{**GOOD, "outer_round": -1}], 1, "p1", "outer_round", "non-negative"),
    ([{**GOOD, "problem": ""}], 1, None, "problem", "non-empty"),
    ([GOOD, {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 0, "speaker": "a",
             "equivalence": "same"}], 2, "p1", "equivalence", "equivalent"),
    # a JSON integer of 400 digits overflows a float: a typed error naming the score field
    ([{**GOOD, "score": 10**400}], 1, "p1", "score", "overflows"),
    # an earlier public answer with an empty author is refused like an empty agent
    ([GOOD, {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 0, "speaker": "a",
             "earlier_public": [{"agent": "", "answer": "x"}]}], 2, "p1", "earlier_public",
     "non-empty"),
    ([GOOD, {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": 0, "speaker": "a",
             "earlier_public": [{"agent": "  ", "answer": "x"}]}], 2, "p1", "earlier_public",
     "non-empty"),
])
def test_reader_errors_name_file_line_task_and_field(tmp_path, lines, line, task, fld, words):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(rec) for rec in lines) + "\n")
    with pytest.raises(TraceError) as info:
        read_broadcast_log(path)
    err = info.value
    assert (err.file, err.line, err.task_id, err.field) == (str(path), line, task, fld)
    message = str(err)
    assert str(path) in message and f"line {line}" in message and f"field {fld!r}" in message
    assert words in message


def test_reader_errors_for_bad_json_empty_file_and_records(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(TraceError, match="line 2"):
        read_broadcast_log(path)
    path.write_text("\n\n")
    with pytest.raises(TraceError, match="no poll record"):
        read_broadcast_log(path)
    with pytest.raises(TraceError, match="record #2.*polled twice"):
        from_records([GOOD, GOOD])
    assert read_broadcast_log  # raw 0-100 scores pass when the range check is widened
    path.write_text(json.dumps({**GOOD, "score": 87}) + "\n")
    assert read_broadcast_log(path, score_range=(0, 100)).score.tolist() == [87.0]


# ============================================================================ headline metrics
def test_block_metrics_by_hand(hand):
    # selected blocks 6; selected poll invalid in blocks 3 and 5
    assert selected_invalid_rate(hand) == (2 / 6, 2, 6)
    # selected-valid blocks 1, 2, 4, 6; correct in 1 and 6
    assert cra(hand) == (0.5, 2, 4)
    # possible-hit blocks 1, 2, 3, 6; selected correct in 1 and 6
    assert hrwp(hand) == (0.5, 2, 4)
    # all-routeable blocks 1, 2, 3, 4, 6 (block 5 has no valid candidate)
    assert runtime_success(hand) == (0.4, 2, 5)
    assert runtime_success(hand, over="all") == (2 / 6, 2, 6)
    assert oracle_success(hand) == (0.8, 4, 5)
    # the only miss (selected valid and wrong, another valid correct) is block 2; eligible:
    # contested = selected valid with >= 2 valid candidates: blocks 1, 2, 4 (6 has one valid)
    assert mcr(hand) == (1 / 3, 1, 3)
    assert mcr(hand, eligible="selected_valid") == (0.25, 1, 4)
    assert mcr(hand, eligible="routeable") == (0.2, 1, 5)


def test_pcca_and_ctr_by_hand(hand):
    # mixed blocks: 1 (pairs a>b win, c=b tie -> 0.75), 2 (b=a tie -> 0.5), 3 (b<c -> 0).
    # Block 4 has no correct candidate; c's missing score would form no pair anyway.
    assert pcca(hand) == pytest.approx((1.25 / 3, 1.25, 3))
    # pairs: 2 + 1 + 1 = 4, of which tied: block 1 (c, b) and block 2 (b, a)
    assert ctr(hand) == (0.5, 2, 4)
    assert score_pairs(hand) == (3, 4, 1, 1, 2)


def test_missing_scores_form_no_pair():
    log = from_records([poll("p", 0, "a", None, "x", True), poll("p", 0, "b", .3, "y", False),
                        poll("p", 0, "c", .5, "x", True)])
    assert score_pairs(log) == (1, 1, 1, 0, 0) and pcca(log).value == 1.0


def test_weights_repeat_blocks(hand):
    # weight 2 on block 2 (a miss) and 0 on block 6: CRA = (1 + 0 + 0) / (1 + 2 + 1)
    w = np.array([1, 2, 1, 1, 1, 0.0])
    assert cra(hand, weights=w) == (0.25, 1, 4)
    # PCCA: block values 0.75, 0.5 (twice), 0 over 4 mixed-block copies
    assert pcca(hand, weights=w).value == pytest.approx(1.75 / 4)
    with pytest.raises(DataError, match="weights"):
        cra(hand, weights=[1, 2])


def test_per_tier_splits_denominators():
    recs = [poll("p1", 0, "a", .9, "x", True, True, tier="1"),
            poll("p2", 0, "a", .9, "y", False, True, tier="2"),
            poll("p3", 0, "a", .9, "x", True, True, tier="2")]
    out = per_tier(from_records(recs), "cra")
    assert out == {"1": (1.0, 1, 1), "2": (0.5, 1, 2)}


@pytest.fixture(scope="module")
def paper_log():
    """Blocks built to the paper's counts: 11,122 selected blocks, 9,653 all-routeable, 9,467
    selected-valid, 5,295 possible-hit, 4,795 selected-correct, 7,970 contested."""
    kinds = {   # (n blocks, polls (score .9 selected, .5, .4) as (answer, label) or None)
        "hit, one valid": (1000, [("g", True), None, None]),
        "hit": (3795, [("g", True), ("w", False), ("g", True)]),
        "miss": (462, [("w", False), ("g", True), None]),
        "invalid pick, hit possible": (38, [None, ("g", True), ("w", False)]),
        "wrong, one valid": (497, [("w", False), None, None]),
        "wrong": (3713, [("w", False), ("v", False), None]),
        "invalid pick, no hit": (148, [None, ("w", False), None]),
        "nothing valid": (1469, [None, None, None]),
    }
    recs, b = [], 0
    for n, pattern in kinds.values():
        for _ in range(n):
            for agent, score, cand in zip("abc", (.9, .5, .4), pattern):
                recs.append(poll(f"q{b // 4}", b % 4, agent, score, cand and cand[0],
                                 cand and cand[1], agent == "a"))
            b += 1
    return from_records(recs)


def test_paper_arithmetic_reproduces_table_6_and_table_1(paper_log):
    log = paper_log
    assert log.n_blocks == 11_122

    def exact(r, num, den):
        return (r.numerator, r.denominator) == (num, den) and r.value == num / den

    assert exact(cra(log), 4795, 9467) and round(cra(log).value, 3) == 0.506
    assert exact(hrwp(log), 4795, 5295) and round(hrwp(log).value, 3) == 0.906
    assert exact(runtime_success(log), 4795, 9653) and round(runtime_success(log).value, 3) == .497
    assert exact(oracle_success(log), 5295, 9653) and round(oracle_success(log).value, 3) == .549
    assert exact(mcr(log), 462, 7970) and round(mcr(log).value, 3) == 0.058
    assert exact(selected_invalid_rate(log), 1655, 11_122)
    assert round(selected_invalid_rate(log).value, 3) == 0.149
    table = router_counterfactuals(log, routers=("runtime_argmax", "oracle"))
    assert Fraction(table["runtime_argmax"].numerator).limit_denominator() == 4795
    assert round(table["runtime_argmax"].gap_to_oracle, 3) == 0.052


def test_paper_counts_rule_out_the_wider_mcr_readings(paper_log):
    # A miss (selected valid and wrong, another valid candidate correct) lies in a possible-hit
    # block whose selected candidate is not correct: by Table 6's HRWP parts the MCR numerator
    # is at most 5,295 - 4,795 = 500, whatever the eligibility reading.
    bound = 5295 - 4795
    h = hrwp(paper_log)
    assert (h.numerator, h.denominator) == (4795, 5295)       # the layout has the paper's counts
    printed = 0.058
    for eligible, den, best in (("selected_valid", 9467, 0.053), ("routeable", 9653, 0.052)):
        r = mcr(paper_log, eligible=eligible)
        assert r.denominator == den and r.numerator <= bound
        # 500 / 9,467 = .0528 and 500 / 9,653 = .0518: no numerator in 0..500 prints .058
        assert round(bound / den, 3) == best
        assert max(round(n / den, 3) for n in range(bound + 1)) < printed
    # only a subset denominator (7,970 < 9,467) can reach it, e.g. the contested reading
    assert mcr(paper_log) == (462 / 7970, 462, 7970) and round(462 / 7970, 3) == printed


def test_table6_score_pairs_and_ctr():
    # Table 6: PCCA over "1,184 blocks / 2,079 pairs", CTR .327 of the 2,079 pairs. With three
    # agents a mixed block holds 2 pairs (one correct, two wrong) or 1 (one correct, one wrong,
    # one invalid): 895 + 289 = 1,184 blocks, 895 * 2 + 289 = 2,079 pairs. 680 tied pairs:
    # 680 / 2,079 = .3271 (679 would print .327 too; 680 is one consistent choice).
    #   kind          scores (c | w1, w2)   n    pairs  tied  c higher  block share
    #   one-pair tie  .5 | .5, invalid      289  1      1     0         .5
    #   tie + win     .5 | .5, .3           391  2      1     1         .75
    #   win + win     .9 | .5, .3           200  2      0     2         1
    #   win + loss    .5 | .3, .9            75  2      0     1         .5
    #   loss + loss   .3 | .5, .9           229  2      0     0         0
    # tied 289 + 391 = 680; correct higher 391 + 2 * 200 + 75 = 866; wrong higher 75 + 2 * 229
    # = 533; PCCA (289 * .5 + 391 * .75 + 200 + 75 * .5) / 1,184 = 675.25 / 1,184 = .5703
    kinds = [(289, (.5, .5, None)), (391, (.5, .5, .3)), (200, (.9, .5, .3)),
             (75, (.5, .3, .9)), (229, (.3, .5, .9))]
    recs, b = [], 0
    for n, (sc, s1, s2) in kinds:
        for _ in range(n):
            q, t = f"q{b // 8}", b % 8
            recs += [poll(q, t, "a", sc, "g", True, True), poll(q, t, "b", s1, "w", False),
                     poll(q, t, "c", s2 if s2 is not None else .1, "v" if s2 else None,
                          False if s2 else None)]
            b += 1
    log = from_records(recs)
    assert score_pairs(log) == (1184, 2079, 866, 533, 680)
    assert ctr(log) == (680 / 2079, 680, 2079) and round(680 / 2079, 3) == 0.327
    assert pcca(log) == pytest.approx((675.25 / 1184, 675.25, 1184))
    assert round(pcca(log).value, 3) == 0.570


# ========================================================================= selection source
def _without_selected(records, blocks=None):
    """The records with the ``selected`` key dropped (in the given (problem, turn) blocks, or
    everywhere)."""
    return [{k: v for k, v in r.items() if k != "selected"}
            if blocks is None or (r["problem"], r["turn"]) in blocks else r for r in records]


def test_log_without_selected_flags_replays_the_runtime_argmax(hand):
    # HAND's selections are the runtime argmax (first listed wins the .6/.6 tie of block 2), so
    # a log written without the flags must give the hand-counted metrics of the logged one
    bare = from_records(_without_selected(HAND))
    assert not bare.selected.any()
    sel, source = effective_selection(bare)
    assert source == "replayed" and sel.tolist() == hand.selected.tolist()
    assert effective_selection(hand)[1] == "logged"
    assert cra(bare) == (0.5, 2, 4) and hrwp(bare) == (0.5, 2, 4)
    assert runtime_success(bare) == (0.4, 2, 5) and mcr(bare) == (1 / 3, 1, 3)
    assert selected_invalid_rate(bare) == (2 / 6, 2, 6) and unselected_blocks(bare) == 0
    # (n_folds=4 > 3 problems: calibration is skipped, keeping the test fast)
    report = audit_broadcast(bare, n_boot=20, routers=("runtime_argmax",), n_folds=4)
    assert report.selection == "replayed" and "No poll of the log is selected" in report.card.notes
    by = {m.name: m for m in report.card.metrics}
    assert (by["HRWP"].numerator, by["HRWP"].denominator) == (2, 4)


def test_replayed_selection_follows_the_speaker():
    # block (p, 0): scores a .9, b .3, but b spoke: b held the floor, not the argmax a;
    # block (p, 1): no speak record: the argmax b (.8)
    recs = [poll("p", 0, "a", .9, "x", False), poll("p", 0, "b", .3, "y", True),
            {"kind": "speak", "problem": "p", "outer_round": 0, "turn": 0, "speaker": "b",
             "spoken": "y", "spoken_correct": True},
            poll("p", 1, "a", .2, "x", False), poll("p", 1, "b", .8, "y", True)]
    log = from_records(_without_selected(recs))
    assert effective_selection(log)[0].tolist() == [False, True, False, True]
    assert cra(log) == (1.0, 2, 2)


def test_blocks_without_a_selection_leave_the_denominators(hand):
    # HAND with the flags of blocks 1 (p1, turn 0) and 6 (p3, turn 1) dropped; blocks 2-5 keep
    # theirs. Selected blocks 2, 3, 4, 5 (invalid picks in 3 and 5): selected-invalid 2/4;
    # selected-valid 2 and 4, both wrong: CRA 0/2; possible-hit and selected: 2, 3: HRWP 0/2;
    # routeable and selected: 2, 3, 4: runtime success 0/3; oracle success keeps all five
    # routeable blocks (router-independent): 4/5; MCR contested: block 2 (a miss) and 4: 1/2.
    log = from_records(_without_selected(HAND, {("p1", 0), ("p3", 1)}))
    assert effective_selection(log)[1] == "logged" and unselected_blocks(log) == 2
    assert selected_invalid_rate(log) == (0.5, 2, 4)
    assert cra(log) == (0.0, 0, 2) and hrwp(log) == (0.0, 0, 2)
    assert runtime_success(log) == (0.0, 0, 3) and runtime_success(log, over="all") == (0, 0, 4)
    assert oracle_success(log) == (0.8, 4, 5)
    assert mcr(log) == (0.5, 1, 2) and mcr(log, eligible="routeable") == (1 / 3, 1, 3)
    notes = audit_broadcast(log, n_boot=20, routers=(), n_folds=4).card.notes
    assert "2 of 6 blocks have no selected poll" in notes


# ================================================================================== routers
def test_router_counterfactuals_by_hand(hand):
    # expected success per routeable block 1, 2, 3, 4, 6 (block 5: nothing valid, not counted)
    expected = {
        "runtime_argmax": [1, 0, 0, 0, 1],            # block 2 tie -> a (wrong); 3 -> invalid a
        "top_confidence_tie_random": [1, .5, 0, 0, 1],  # block 2: a or b at .6
        "random_valid": [2 / 3, .5, .5, 0, 1],
        "majority_vote": [1, .5, .5, 0, 1],           # x twice in block 1; 1-1 ties in 2 and 3
        "confidence_weighted_vote": [1, .5, 0, 0, 1],  # x 1.4 vs y .5; .6 vs .6; y .7 > x .4
        "oracle": [1, 1, 1, 0, 1],
    }
    routeable = [0, 1, 2, 3, 5]
    table = router_counterfactuals(hand, routers=list(expected))
    for name, per_block in expected.items():
        got = router_block_success(hand, name)
        assert got[4] == 0 and got[routeable] == pytest.approx(per_block), name
        assert table[name].denominator == 5
        assert table[name].value == pytest.approx(sum(per_block) / 5), name
        assert table[name].gap_to_oracle == pytest.approx(0.8 - sum(per_block) / 5), name


def test_vote_ties_count_each_answer_once():
    # answers x (twice, correct) and y, z (once each, wrong), all scores .5:
    # majority picks x; the weighted vote sums x 1.0 > y .5 = z .5 -> x
    log = from_records([poll("p", 0, "a", .5, "y", False), poll("p", 0, "b", .5, "x", True),
                        poll("p", 0, "c", .5, "x", True), poll("p", 0, "d", .5, "z", False)])
    assert router_block_success(log, "majority_vote").tolist() == [1.0]
    # x .2 + .2 = .4 ties y .4: two answers tied -> 1/2, not 2/3 (x has two members)
    log = from_records([poll("p", 0, "a", .4, "y", False), poll("p", 0, "b", .2, "x", True),
                        poll("p", 0, "c", .2, "x", True)])
    assert router_block_success(log, "confidence_weighted_vote").tolist() == [0.5]


def test_answer_clusters_change_the_vote_pick():
    # one block, gold 1/2: a "0.5" (correct, .4), b "1/2" (correct, .4), c "2" (wrong, .7).
    # Exact answers: three singleton answers, so the majority vote ties three ways (2 of 3
    # picks correct: 2/3) and the weighted vote picks "2" (.7 > .4): 0.
    # Clusters {"0.5", "1/2"} -> "half": majority 2 vs 1 picks half (1); weighted .8 > .7 (1).
    log = from_records([poll("p", 0, "a", .4, "0.5", True), poll("p", 0, "b", .4, "1/2", True),
                        poll("p", 0, "c", .7, "2", False)])
    assert router_block_success(log, "majority_vote").tolist() == [pytest.approx(2 / 3)]
    assert router_block_success(log, "confidence_weighted_vote").tolist() == [0.0]
    half = ["half", "half", "2"]
    assert router_block_success(log, "majority_vote", answer_cluster=half).tolist() == [1.0]
    assert router_block_success(log, "confidence_weighted_vote",
                                answer_cluster=half).tolist() == [1.0]
    table = router_counterfactuals(log, routers=("majority_vote",), answer_cluster=half)
    assert table["majority_vote"].value == 1.0
    # a mixed cluster scores its members' mean correctness: {"0.5", "2"} .4 + .7 = 1.1 > .4
    assert router_block_success(log, "confidence_weighted_vote",
                                answer_cluster=["k", "j", "k"]).tolist() == [0.5]
    with pytest.raises(DataError, match="answer_cluster"):
        router_block_success(log, "majority_vote", answer_cluster=["k", None, "k"])
    with pytest.raises(DataError, match="answer_cluster"):
        router_block_success(log, "majority_vote", answer_cluster=["k"])


def test_stratified_folds_balance_tiers_and_keep_problems_whole():
    problems = [f"p{i}" for i in range(40) for _ in range(3)]
    tiers = [str(i % 4) for i in range(40) for _ in range(3)]
    folds = tier_stratified_folds(problems, tiers, n_folds=2, seed=5)
    assert np.array_equal(folds, tier_stratified_folds(problems, tiers, n_folds=2, seed=5))
    per_problem = {p: set() for p in problems}
    for p, f in zip(problems, folds):
        per_problem[p].add(int(f))
    assert all(len(v) == 1 for v in per_problem.values())
    for t in "0123":
        in_tier = [per_problem[f"p{i}"].pop() for i in range(40) if str(i % 4) == t]
        assert sorted(np.bincount(in_tier)) == [5, 5]
    with pytest.raises(DataError, match="n_folds"):
        tier_stratified_folds(["a"], ["1"], n_folds=2)


def test_logistic_fit_matches_scipy_optimum():
    from scipy.optimize import minimize
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = (rng.random(200) < 1 / (1 + np.exp(-(X @ [1.0, -0.5, 0.0] + 0.3)))).astype(float)
    beta = _fit_logistic(X, y, l2=2.0)

    def loss(b):
        eta = b[0] + X @ b[1:]
        return np.sum(np.logaddexp(0, eta) - y * eta) + 0.5 * 2.0 * np.sum(b[1:] ** 2)
    ref = minimize(loss, np.zeros(4), method="BFGS", options={"gtol": 1e-10}).x
    assert beta == pytest.approx(ref, abs=1e-5)


def test_learned_router_is_cross_fitted_and_deterministic():
    log = simulate_broadcast(2, n_problems=120, link_strength=1.0)
    p = learned_router_probabilities(log, seed=3)
    assert np.array_equal(p, learned_router_probabilities(log, seed=3), equal_nan=True)
    assert np.isnan(p[~log.valid]).all() and np.isfinite(p[log.valid]).all()
    folds = tier_stratified_folds(log.problem, log.tier, n_folds=2, seed=3)
    # flipping the labels of fold 0 leaves fold 0's predictions unchanged (fit on fold 1 only)
    flipped = dataclasses.replace(log, correct=np.where(folds == 0, ~log.correct & log.valid,
                                                        log.correct))
    q = learned_router_probabilities(flipped, seed=3)
    assert np.array_equal(p[folds == 0], q[folds == 0], equal_nan=True)
    assert not np.allclose(p[folds == 1][log.valid[folds == 1]],
                           q[folds == 1][log.valid[folds == 1]])
    table = router_counterfactuals(log)
    assert table["random_valid"].value < table["learned"].value <= table["oracle"].value


# ============================================================================ sanity checks
def test_permutation_null_pcca_is_one_half(sim):
    null = permutation_null_pcca(sim, seed=0, n_perm=50)
    assert null.pcca.shape == (50,)
    assert abs(null.summary()["pcca"][0] - 0.5) < 0.02
    assert pcca(sim).value > 0.55       # the simulated scores carry a weak signal
    shuffled = permute_scores_within_blocks(sim, 1)
    for b in (0, 7, 99):
        rows = slice(sim.block_start[b], sim.block_start[b + 1])
        assert sorted(shuffled[rows]) == sorted(sim.score[rows])


def test_noisy_oracle_saturates_at_small_sigma(sim):
    check = noisy_oracle_check(sim, 0.05, seed=0, n_rep=5)
    assert (check.pcca == 1.0).all() and (check.ctr == 0.0).all() and (check.hrwp == 1.0).all()


def test_noisy_oracle_at_sigma_half_matches_table_15(sim):
    # A correct candidate scores clip(1 + e), a wrong one clip(e), e ~ N(0, .5^2). A pair ties
    # only when both clip to 1 (P(e_c >= 0) P(e_w >= 1) = 1/2 Phi(-2)) or both to 0 (Phi(-2) 1/2):
    # tie rate 2 Phi(-2) 1/2 = .0228 (Table 15: .023). PCCA: Table 15's .913.
    tie = 2 * NormalDist().cdf(-2) * 0.5
    assert round(tie, 4) == 0.0228 and round(tie, 3) == 0.023
    # ~4,200 pairs per replicate x 20 replicates: the mean CTR's sd is ~.0006 and PCCA's ~.001,
    # so the tolerances below are >= 6 sd (the expected PCCA of this design is .916)
    assert score_pairs(sim).n_pairs > 4000
    check = noisy_oracle_check(sim, 0.5, seed=0, n_rep=20).summary()
    assert check["ctr"][0] == pytest.approx(tie, abs=0.005)
    assert check["pcca"][0] == pytest.approx(0.913, abs=0.01)
    s = noisy_oracle_scores(sim, 0.5, 0)
    assert s.min() == 0.0 and s.max() == 1.0
    assert np.array_equal(s, noisy_oracle_scores(sim, 0.5, 0))


# ================================================================================ bootstrap
def test_cluster_bootstrap_matches_vectorized_ratio_bootstrap(sim):
    generic = cluster_bootstrap(lambda w: cra(sim, weights=w), sim.block_cluster, seed=4,
                                n_boot=300)
    fast = ratio_bootstrap(*metric_terms(sim, "cra"), sim.block_cluster, seed=4, n_boot=300)
    assert generic == pytest.approx(fast)
    assert generic.ci_low < generic.estimate < generic.ci_high
    assert generic.n_clusters == len(set(sim.block_cluster)) == 60
    # clusters of a cluster bootstrap are resampled whole: one cluster -> a degenerate CI
    one = ratio_bootstrap([1, 0, 1], [1, 1, 1], ["c", "c", "c"], n_boot=50)
    assert one.ci_low == one.ci_high == pytest.approx(2 / 3)


def test_routing_audit_rows_carry_denominators(hand):
    rows = routing_audit(hand, n_boot=100)
    assert list(rows) == list(METRICS)
    assert (rows["cra"].numerator, rows["cra"].denominator) == (2, 4)
    assert (rows["pcca"].estimate, rows["pcca"].denominator) == (pytest.approx(1.25 / 3), 3)
    assert rows["ctr"].n_clusters == 1


# ================================================================================ simulator
def test_simulator_is_seeded_overconfident_and_has_material():
    a = simulate_broadcast(7, n_problems=200)
    assert a == simulate_broadcast(7, n_problems=200)
    assert a != simulate_broadcast(8, n_problems=200)
    assert a.n_blocks == 200 * 2 * 4 and a.n_speaks == a.n_blocks
    accuracy = a.correct[a.valid].mean()
    assert a.score.mean() > accuracy + 0.15                    # over-confident
    assert 0.05 < 1 - a.valid.mean() < 0.15                    # invalid parses at ~10%
    assert np.array_equal(runtime_argmax(a), a.selected)
    assert np.array_equal(a.speaker, a.agent[a.speak_poll_row])
    diverged = (a.equivalence == "divergent").sum() / (a.equivalence != None).sum()  # noqa: E711
    assert 0.1 < diverged < 0.3
    assert score_pairs(a).tied > 0                             # rounding makes ties
    # clusters: at most 10 problems, all of one tier
    for c in set(a.cluster):
        rows = a.cluster == c
        assert len(set(a.problem[rows])) <= 10 and len(set(a.tier[rows])) == 1
    assert set(ROUTERS) == set(router_counterfactuals(a))


def test_simulated_self_reverts_return_to_earlier_spoken_answers():
    # only self-reverts: a divergent speaker returns to one of its own earlier *spoken* answers
    # (other than its poll candidate) when it has one, else says a novel answer; the audit's
    # self-revert flag (own earlier public answers) must then fire on every event with one
    log = simulate_broadcast(5, n_problems=60, divergence_rate=0.5,
                             divergence_mix=(1, 0, 0, 0))
    inputs = commitment_inputs(log)
    poll_answer = inputs["poll_answer"]
    n_with, n_without = 0, 0
    for e in range(log.n_speaks):
        if log.equivalence[e] != "divergent":
            continue
        own = {a for who, a in log.earlier_public[e] if who == log.speaker[e]}
        own.discard(poll_answer[e])
        if own:
            n_with += 1
            assert log.spoken[e] in own
        else:
            n_without += 1
    assert n_with > 50 and n_without > 10
    src = divergence_sources(**{k: inputs[k] for k in (
        "poll_answer", "spoken_answer", "poll_correct", "spoken_correct", "own_earlier",
        "incumbent", "peer_earlier")}, equivalent=inputs["equivalent"])
    self_revert = {r.name: r.share.numerator for r in src.primary_table}["self_revert"]
    assert self_revert >= n_with


def test_default_clusters_in_sorted_problem_order():
    # problems appear as p10, p2, p1, p11 (one tier); chunks of 2 consecutive problems:
    # appearance order -> {p10, p2}, {p1, p11}; sorted ids p1, p2, p10, p11 -> {p1, p2}, {p10, p11}
    recs = [poll(q, 0, "a", .5, "x", True) for q in ("p10", "p2", "p1", "p11")]
    log = from_records(recs, cluster_size=2)
    assert log.block_cluster.tolist() == ["0", "0", "1", "1"]
    log = from_records(recs, cluster_size=2, cluster_order="sorted")
    assert log.block_cluster.tolist() == ["1", "0", "0", "1"]
    with pytest.raises(DataError, match="cluster_order"):
        from_records(recs, cluster_order="random")


# ================================================================================= ConfMAD
needs_confmad = pytest.mark.skipif(not CONFMAD.is_dir(), reason=f"shared data folder {CONFMAD} "
                                   "is absent (ConfMAD real-log tests skipped)")


@needs_confmad
def test_confmad_counts_match_source_md():
    log, report = load_confmad(CONFMAD)
    assert (report.n_problems, report.n_turns, report.n_parsed, report.n_fallback) == (
        170, 1020, 985, 84)
    assert round(report.accuracy, 3) == 0.856
    assert isinstance(log, BroadcastLog) and log.n_blocks == 510 and log.n_speaks == 0
    assert log.block_size.tolist() == [2] * 510
    assert set(log.agent[log.position == 0]) == {"Bob"}
    # replayed routing: first listed (Bob) wins ties
    assert np.array_equal(log.selected, runtime_argmax(log))
    # SOURCE.md: 24 mixed pairs, correct higher 4, wrong higher 6, tied 14
    assert score_pairs(log) == (24, 24, 4, 6, 14)
    assert pcca(log).value == pytest.approx((4 + 0.5 * 14) / 24)
    assert ctr(log) == (14 / 24, 14, 24)
    _, lenient = load_confmad(CONFMAD, parser="lenient")
    assert lenient.n_parsed == 1013
    missing, _ = load_confmad(CONFMAD, fallback_as_missing=True)
    assert np.isnan(missing.score).sum() == 84


def test_confmad_errors_name_the_problem_and_field(tmp_path):
    turn = {"agent_name": "Bob", "response": "Answer: (1) x", "Confidence score": 90}
    data = [{"task": "MMLU", "debate_agents": {"Bob": "m", "James": "m"}},
            {"question": "q", "ground_truth": "(1) x",
             "debate_history": [turn, {**turn, "agent_name": "James"}]},
            {"question": "q", "ground_truth": "(0) y",
             "debate_history": [turn, {**turn, "agent_name": "James", "Confidence score": "90"}]}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError) as info:
        load_confmad(path)
    assert info.value.task_id == "mmlu-002"
    assert info.value.field == "debate_history[1].Confidence score"
    data[2]["debate_history"][1]["Confidence score"] = 90
    path.write_text(json.dumps(data))
    log, report = load_confmad(tmp_path)        # a folder holding one .json file
    assert (report.n_parsed, report.n_correct) == (4, 2) and log.n_blocks == 2
    assert math.isclose(log.score[0], 0.9)
    with pytest.raises(DataError, match="parser"):
        load_confmad(path, parser="loose")
