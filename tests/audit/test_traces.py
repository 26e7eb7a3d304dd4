"""Regression inputs of the routing audit ([Audit] Tables 4, 12, 18): per-trace
summaries for the outcome linkage and (divergent speak event, visible candidate) rows for the
adoption logit. Expected rows are written out by hand."""
import math

import numpy as np
import pytest

from bda_jax import DataError
from bda_jax.audit import (ADOPTION_COVARIATES, TRACE_PREDICTORS, adoption_logit, adoption_rows,
                           commitment_inputs, divergence_sources, from_records, outcome_linkage,
                           simulate_broadcast, trace_summaries)

nan = math.nan


def poll(problem, turn, agent, score, cand, correct, selected=False, tier=None):
    return {"kind": "poll", "problem": problem, "outer_round": 0, "turn": turn, "agent": agent,
            "score": score, "candidate": cand, "correct": correct, "selected": selected,
            "tier": tier}


def speak(problem, turn, speaker, spoken, ok, incumbent=None, **extra):
    return {"kind": "speak", "problem": problem, "outer_round": 0, "turn": turn,
            "speaker": speaker, "spoken": spoken, "spoken_correct": ok, "incumbent": incumbent,
            **extra}


# Problem "p" (tier "2", gold g), agents a, b; problem "r" (tier "1", one block, no speak).
#   turn  polls (score answer label), * = selected     speak               divergent
#   0     a* .9 g C | b .5 w W                         a: g (C)            no
#   1     a  .4 g C | b* .8 w W                        b: w (W)            no
#   2     a* .7 v W | b .3 g C                         a: g (C), inc w     yes, improves
#   3     a  .2 g C | b* .6 g C                        b: w (W), inc g     yes, degrades
#         turn 3 gives earlier_public explicitly: ["g" (author unknown), b: "w", a: "q"]
#   r/0   a* .5 -   | b .4 g C
HAND = [
    poll("p", 0, "a", .9, "g", True, True, "2"), poll("p", 0, "b", .5, "w", False, tier="2"),
    speak("p", 0, "a", "g", True),
    poll("p", 1, "a", .4, "g", True, tier="2"), poll("p", 1, "b", .8, "w", False, True, "2"),
    speak("p", 1, "b", "w", False),
    poll("p", 2, "a", .7, "v", False, True, "2"), poll("p", 2, "b", .3, "g", True, tier="2"),
    speak("p", 2, "a", "g", True, incumbent="w"),
    poll("p", 3, "a", .2, "g", True, tier="2"), poll("p", 3, "b", .6, "g", True, True, "2"),
    speak("p", 3, "b", "w", False, incumbent="g",
          earlier_public=["g", {"agent": "b", "answer": "w"}, {"agent": "a", "answer": "q"}]),
    poll("r", 0, "a", .5, None, None, True, "1"), poll("r", 0, "b", .4, "g", True, tier="1"),
]


def test_trace_summaries_by_hand():
    ts = trace_summaries(from_records(HAND))
    assert ts.problem.tolist() == ["p", "r"] and ts.tier.tolist() == ["2", "1"]
    assert ts.tier_rank.tolist() == [2, 1]
    assert ts.n_blocks.tolist() == [4, 1] and ts.n_selected_blocks.tolist() == [4, 1]
    # p: a correct valid candidate in all 4 blocks; selected correct in turns 0 and 3: 2/4;
    #    no invalid pick; selected scores .9, .8, .7, .6 -> .75; 4 valid pairs, 2 divergent,
    #    1 improvement (turn 2), 1 degradation (turn 3); the last spoken answer (turn 3) wrong
    # r: one block, b's g is correct but a (invalid) is selected; no speak record
    expect = {"pool_solvable_rate": [1.0, 1.0], "selected_correct_rate": [0.5, 0.0],
              "routing_slack": [0.5, 1.0], "selected_invalid_rate": [0.0, 1.0],
              "mean_selected_confidence": [0.75, 0.5], "psdr": [0.5, nan],
              "improvement_rate": [0.25, nan], "degradation_rate": [0.25, nan],
              "last_spoken_correct": [0.0, nan]}
    for name, values in expect.items():
        assert getattr(ts, name).tolist() == pytest.approx(values, nan_ok=True), name
    assert ts.n_valid_pairs.tolist() == [4, 0]
    assert ts.complete(["psdr"]).tolist() == [True, False]
    assert list(ts.predictors(["psdr", "tier_rank"], rows=[0]).values()) == [[0.5], [2.0]]
    with pytest.raises(DataError):
        ts.predictors(["outcome"])


def test_adoption_rows_by_hand():
    rows = adoption_rows(from_records(HAND))
    # Speak events 2 and 3 (speak rows) are the divergent ones; each earlier public entry is a
    # candidate, then the incumbent. Blocks of p in order: turns 0-3 = positions 0-3.
    # event 2 (a says g; earlier_public derived: a:g at turn 0, b:w at turn 1; incumbent w):
    #   a:g  own       adopted 1  lag 2  conf .9 (a's poll, turn 0)  correct 1  most recent 0
    #   b:w  peer      adopted 0  lag 1  conf .8 (b's poll, turn 1)  correct 0  most recent 1
    #   w    incumbent adopted 0  lag 1  (newest earlier w: turn 1)  .8  0       0
    # event 3 (b says w; earlier_public ["g", b:"w", a:"q"], matched newest first: a:q has no
    # earlier speak record, b:w is turn 1, "g" (any author) the newest earlier g before turn 1,
    # i.e. turn 0; incumbent g: newest earlier g, turn 2, a's poll .7):
    #   g    peer      adopted 0  lag 3  conf .9  correct 1  most recent 0
    #   b:w  own       adopted 1  lag 2  conf .8  correct 0  most recent 0
    #   a:q  peer      adopted 0  lag -  conf -   correct -  most recent 1
    #   g    incumbent adopted 0  lag 1  conf .7  correct 1  most recent 0
    assert rows.n_rows == 7
    assert rows.event.tolist() == [2, 2, 2, 3, 3, 3, 3]
    assert rows.answer.tolist() == ["g", "w", "w", "g", "w", "q", "g"]
    assert rows.role.tolist() == ["own", "peer", "incumbent", "peer", "own", "peer", "incumbent"]
    assert rows.adopted.tolist() == [1, 0, 0, 0, 1, 0, 0]
    assert rows.lag.tolist() == pytest.approx([2, 1, 1, 3, 2, nan, 1], nan_ok=True)
    assert rows.source_confidence.tolist() == pytest.approx([.9, .8, .8, .9, .8, nan, .7],
                                                            nan_ok=True)
    assert rows.source_correct.tolist() == pytest.approx([1, 0, 0, 1, 0, nan, 1], nan_ok=True)
    assert rows.most_recent.tolist() == [0, 1, 0, 0, 0, 1, 0]
    assert rows.problem.tolist() == ["p"] * 7
    assert rows.complete().tolist() == [True] * 5 + [False, True]
    cov = rows.covariates()
    assert tuple(cov) == ADOPTION_COVARIATES
    assert cov["role=own"].tolist() == [1, 0, 0, 0, 1, 0, 0]
    assert cov["role=incumbent"].tolist() == [0, 0, 1, 0, 0, 0, 1]


@pytest.fixture(scope="module")
def sim():
    return simulate_broadcast(0, n_problems=200)


def test_outcome_linkage_on_simulated_trace_summaries(sim):
    ts = trace_summaries(sim)
    T = len(sim.problems)
    assert all(getattr(ts, c).shape == (T,) for c in ts._fields)
    assert (ts.n_blocks == 8).all() and (ts.routing_slack >= -1e-12).all()
    # the pooled trace rates add back up to the log-wide counts
    assert int(round((ts.psdr * ts.n_valid_pairs).sum())) == int(
        (sim.equivalence == "divergent").sum())
    names = ["pool_solvable_rate", "improvement_rate", "degradation_rate",
             "selected_invalid_rate", "psdr", "tier_rank"]
    assert set(names) <= set(TRACE_PREDICTORS)
    keep = ts.complete(names + ["last_spoken_correct"])
    assert keep.sum() > 0.9 * T
    fit = outcome_linkage(ts.last_spoken_correct[keep], ts.predictors(names, keep),
                          ts.cluster[keep])
    assert fit.n == keep.sum() and fit.n_clusters == len(set(sim.cluster))
    assert [t.name for t in fit.terms] == ["intercept"] + names
    assert fit.term("pool_solvable_rate").coef > 0       # more solvable, more often right


def test_adoption_logit_on_simulated_rows(sim):
    rows = adoption_rows(sim)
    inputs = commitment_inputs(sim)
    src = divergence_sources(**{k: inputs[k] for k in (
        "poll_answer", "spoken_answer", "poll_correct", "spoken_correct", "own_earlier",
        "incumbent", "peer_earlier")}, equivalent=inputs["equivalent"])
    # one row per visible candidate of each divergent event
    expected = sum(len(sim.earlier_public[e]) + (sim.incumbent[e] is not None)
                   for e in np.flatnonzero(src.divergent))
    assert rows.n_rows == expected and all(getattr(rows, c).shape == (expected,)
                                           for c in rows._fields)
    assert set(rows.role) == {"own", "peer", "incumbent"}
    # an event adopts some candidate exactly when a source flag fires on it
    adopted_any = np.zeros(sim.n_speaks, bool)
    np.logical_or.at(adopted_any, rows.event, rows.adopted == 1)
    flagged = np.zeros(sim.n_speaks, bool)
    for f in src.flags.values():
        flagged |= f
    assert np.array_equal(adopted_any, flagged)
    keep = rows.complete()
    assert keep.all()                 # simulated logs derive earlier_public from speak records
    fit = adoption_logit(rows.adopted[keep], rows.covariates(keep), rows.cluster[keep])
    assert fit.n == keep.sum() and fit.n_clusters == len(set(rows.cluster))
    assert fit.n_clusters == len(set(sim.cluster))
    assert [t.name for t in fit.terms] == ["intercept", *ADOPTION_COVARIATES]
