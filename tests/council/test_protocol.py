"""The protocol automaton ([BDA] §5, Appendix D.7): schedule, legality, labels, traces; a
hypothesis property test drives random legal sequences through it and shows illegal replies
refused."""
import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bda_jax import TraceError, read_traces, write_traces
from bda_jax.council import (IllegalMove, LegalMoves, MoveReply, Question, apply_move,
                             legal_moves, new_task_state, next_round, record_abstain, to_trace)

Q = Question("q1", "2 + 3?", ("4", "5", "6"), "5", None, {"source": "hand"})


def reply(force, answer=None, target=None, argument="because"):
    return MoveReply(force, answer, target, argument)


def played_round0(question=Q, seats=("alice", "bob", "carol")):
    s = new_task_state(question, seats, seed=3)
    for seat, ans in zip(seats, ("4", "5", "5")):
        apply_move(s, seat, reply("propose", ans))
    next_round(s)
    return s


def test_labels_are_a_seeded_permutation_per_task_and_sample():
    seats = ("a", "b", "c", "d")
    s = new_task_state(Q, seats, seed=7, sample=2)
    # the documented recipe, recomputed here: sha256 of the JSON text [seed, task_id, sample]
    digest = hashlib.sha256(b'[7,"q1",2]').digest()
    perm = np.random.default_rng(int.from_bytes(digest[:8], "big")).permutation(4)
    assert s.labels == {seat: f"Agent {p + 1}" for seat, p in zip(seats, perm)}
    assert sorted(s.labels.values()) == ["Agent 1", "Agent 2", "Agent 3", "Agent 4"]
    assert new_task_state(Q, seats, seed=7, sample=2).labels == s.labels
    draws = {tuple(new_task_state(Q, seats, seed=7, sample=k).labels.values())
             for k in range(12)}
    assert len(draws) > 1
    assert (s.round, s.moves, s.sample, s.seats) == (0, [], 2, seats)


def test_new_task_state_refuses_bad_seats():
    for seats in ((), ("a", "a"), ("a", "")):
        with pytest.raises(IllegalMove):
            new_task_state(Q, seats, seed=0)


def test_round_zero_is_propose_only():
    s = new_task_state(Q, ("alice", "bob"), seed=0)
    assert legal_moves(s, "alice", extra_forces=("vote", "abstain", "retract")) == \
        LegalMoves(("propose",), ("4", "5", "6"), ())
    m = apply_move(s, "alice", reply("propose", "5", argument="2 + 3 = 5"))
    assert (m.id, m.agent, m.round, m.force, m.answer, m.target) == ("m1", "alice", 0,
                                                                      "propose", "5", None)
    assert m.extra == {"argument": "2 + 3 = 5"}
    assert legal_moves(s, "alice").forces == ()
    with pytest.raises(IllegalMove, match="already moved"):
        apply_move(s, "alice", reply("propose", "4"))
    with pytest.raises(IllegalMove, match="not legal now"):
        apply_move(s, "bob", reply("concede", target="m1"))
    with pytest.raises(IllegalMove, match="not complete: no move yet from bob"):
        next_round(s)
    assert len(s.moves) == 1


def test_later_rounds_targets_and_extra_forces():
    s = played_round0()
    legal = legal_moves(s, "alice")
    assert legal == LegalMoves(("propose", "concede", "challenge"), ("4", "5", "6"),
                               ("m2", "m3"))
    full = legal_moves(s, "alice", extra_forces=("retract", "vote", "abstain"))
    assert full.forces == ("propose", "vote", "concede", "challenge", "retract", "abstain")
    assert full.targets == ("m1", "m2", "m3") and full.own_targets == ("m1",)
    # moves of the current round are simultaneous: not targets yet
    apply_move(s, "bob", reply("challenge", target="m1"))
    assert legal_moves(s, "carol").targets == ("m1", "m2")
    # a challenge does not resolve to an answer: not a target in the next round
    apply_move(s, "alice", reply("concede", target="m2"))
    apply_move(s, "carol", reply("propose", "6"))
    next_round(s)
    assert legal_moves(s, "carol").targets == ("m1", "m2", "m5")


@pytest.mark.parametrize("bad, words", [
    (reply("vote", "5"), "not legal now"),
    (reply("propose", "7"), "not one of the candidates"),
    (reply("propose", None), "non-empty string"),
    (reply("propose", "5", target="m2"), "takes no target"),
    (reply("concede", target="m9"), "not a legal target"),
    (reply("concede", target="m1"), "not a legal target"),
    (reply("challenge"), "needs a target"),
    (reply("concede", "5", target="m2"), "takes no answer"),
])
def test_illegal_replies_are_refused(bad, words):
    s = played_round0()
    with pytest.raises(IllegalMove, match=words) as info:
        apply_move(s, "alice", bad)
    assert info.value.task_id == "q1"
    assert len(s.moves) == 3
    with pytest.raises(IllegalMove, match="not a seat"):
        apply_move(s, "dave", reply("propose", "5"))
    with pytest.raises(IllegalMove, match="must be a MoveReply"):
        apply_move(s, "alice", {"force": "propose", "answer": "5"})


def test_own_and_foreign_targets_with_retract():
    s = played_round0()
    ex = ("retract",)
    with pytest.raises(IllegalMove, match="another seat's move"):
        apply_move(s, "alice", reply("concede", target="m1"), extra_forces=ex)
    with pytest.raises(IllegalMove, match="another seat's move"):
        apply_move(s, "alice", reply("challenge", target="m1"), extra_forces=ex)
    with pytest.raises(IllegalMove, match="one's own move"):
        apply_move(s, "alice", reply("retract", target="m2"), extra_forces=ex)
    m = apply_move(s, "alice", reply("retract", target="m1"), extra_forces=ex)
    assert (m.force, m.target) == ("retract", "m1")
    with pytest.raises(IllegalMove, match="unknown extra force"):
        legal_moves(s, "bob", extra_forces=("shout",))


def test_answers_match_candidates_through_the_normalizer():
    q = Question("q", "pick", ("A", "B"), "B", None)
    s = new_task_state(q, ("x",), seed=0)
    assert apply_move(s, "x", reply("propose", "(b)")).answer == "B"


def test_to_trace_round_trips_through_strict_reading(tmp_path):
    s = played_round0()
    apply_move(s, "alice", reply("concede", target="m2", argument="fair point"))
    apply_move(s, "bob", reply("challenge", target="m1", argument="4 is off by one"))
    record_abstain(s, "carol", "not JSON")
    trace = to_trace(s)
    assert trace.task_id == "q1" and trace.cluster == "q1"
    assert trace.candidates == ("4", "5", "6") and trace.gold == "5"
    assert trace.extra == {"source": "hand", "question": "2 + 3?", "sample": 0,
                           "labels": s.labels}
    path = tmp_path / "t.jsonl"
    write_traces([trace], path)
    [back] = read_traces(path)
    assert back == trace
    assert [m.extra for m in back.moves] == [
        {"argument": "because"}, {"argument": "because"}, {"argument": "because"},
        {"argument": "fair point"}, {"argument": "4 is off by one"},
        {"argument": "", "error": "not JSON"}]
    line = json.loads(path.read_text(encoding="utf-8"))
    assert line["moves"][3] == {"id": "m4", "agent": "alice", "round": 1, "force": "concede",
                                "target": "m2", "argument": "fair point"}


def test_samples_get_their_own_task_id_and_share_the_cluster():
    s = new_task_state(Q, ("a",), seed=0, sample=2)
    apply_move(s, "a", reply("propose", "5"))
    t = to_trace(s)
    assert (t.task_id, t.cluster, t.extra["sample"]) == ("q1#s2", "q1", 2)
    q = Question("q2", "x", None, None, "grp")
    s = new_task_state(q, ("a",), seed=0)
    apply_move(s, "a", reply("propose", "Paris"))
    assert to_trace(s).cluster == "grp"


def test_open_questions_take_any_non_empty_answer():
    q = Question("open", "Capital of France?", None, "Paris", None)
    s = new_task_state(q, ("a", "b"), seed=0)
    assert legal_moves(s, "a") == LegalMoves(("propose",), (), (), (), True)
    apply_move(s, "a", reply("propose", " Paris "))
    with pytest.raises(IllegalMove, match="non-empty"):
        apply_move(s, "b", reply("propose", "  "))
    apply_move(s, "b", reply("propose", "Lyon"))
    t = to_trace(s)
    assert t.candidates is None and [m.answer for m in t.moves] == ["Paris", "Lyon"]


def test_to_trace_refuses_what_strict_reading_would():
    s = new_task_state(Q, ("a",), seed=0)
    with pytest.raises(TraceError, match="moves is empty"):
        to_trace(s)
    s = new_task_state(Question("o", "x", None, None, None), ("a",), seed=0)
    record_abstain(s, "a", "timeout")
    with pytest.raises(TraceError, match="no candidates"):
        to_trace(s)


def test_record_abstain_once_per_round():
    s = new_task_state(Q, ("a",), seed=0)
    m = record_abstain(s, "a", "off schema")
    assert (m.force, m.round, m.extra) == ("abstain", 0, {"argument": "", "error": "off schema"})
    with pytest.raises(IllegalMove, match="already moved"):
        record_abstain(s, "a", "again")


# ------------------------------------------------------------------------- property test
EXTRA = ("retract", "vote", "abstain")


def own_ids(state, seat):
    return {m.id for m in state.moves if m.agent == seat}


def illegal_replies(state, seat, legal, extra):
    """Replies the protocol must refuse now, each built from first principles."""
    out = []
    not_legal = [f for f in ("propose", "vote", "concede", "challenge", "retract", "abstain")
                 if f not in legal.forces]
    for f in not_legal:
        out.append(reply(f, "5" if f in ("propose", "vote") else None,
                         "m1" if f in ("concede", "challenge", "retract") else None))
    out.append(reply("propose" if "propose" in legal.forces else legal.forces[0],
                     "no such answer" if state.question.candidates else "  "))
    if "concede" in legal.forces:
        out.append(reply("concede", target="m999"))
        own = sorted(own_ids(state, seat))
        if own:
            out.append(reply("concede", target=own[0]))
    return out


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_legal_sequences_make_valid_traces(tmp_path_factory, data):
    n_seats = data.draw(st.integers(1, 4), label="seats")
    seats = tuple(f"seat{i}" for i in range(n_seats))
    open_q = data.draw(st.booleans(), label="open")
    cands = None if open_q else tuple(data.draw(st.lists(
        st.sampled_from(["A", "B", "C", "D", "7", "x y"]), min_size=1, max_size=4,
        unique=True), label="cands"))
    q = Question("t", "q?", cands, None if open_q else cands[0], None)
    extra = tuple(data.draw(st.lists(st.sampled_from(EXTRA), unique=True), label="extra"))
    rounds = data.draw(st.integers(1, 4), label="rounds")
    state = new_task_state(q, seats, seed=data.draw(st.integers(0, 2**40)), sample=0)
    for r in range(rounds):
        for seat in seats:
            legal = legal_moves(state, seat, extra_forces=extra)
            assert legal.forces and set(legal.forces) <= set(
                ("propose",) if r == 0 else ("propose", "concede", "challenge") + extra)
            assert set(legal.own_targets) <= set(legal.targets)
            if data.draw(st.booleans(), label="try illegal"):
                for bad in illegal_replies(state, seat, legal, extra):
                    n = len(state.moves)
                    with pytest.raises(IllegalMove):
                        apply_move(state, seat, bad, extra_forces=extra)
                    assert len(state.moves) == n
            force = data.draw(st.sampled_from(legal.forces), label="force")
            answer = target = None
            if force in ("propose", "vote"):
                answer = data.draw(st.sampled_from(cands) if cands else st.sampled_from(
                    ["Paris", "paris ", "42", "$42$"]), label="answer")
            elif force == "retract":
                target = data.draw(st.sampled_from(legal.own_targets), label="target")
            elif force in ("concede", "challenge"):
                others = [t for t in legal.targets if t not in legal.own_targets]
                target = data.draw(st.sampled_from(others), label="target")
            move = apply_move(state, seat, reply(force, answer, target, f"arg {r}"),
                              extra_forces=extra)
            assert (move.agent, move.round, move.force) == (seat, r, force)
            with pytest.raises(IllegalMove, match="already moved"):
                apply_move(state, seat, reply("propose", answer or "A"), extra_forces=extra)
        next_round(state)
    assert len(state.moves) == rounds * n_seats
    assert [m.id for m in state.moves] == [f"m{k + 1}" for k in range(rounds * n_seats)]
    trace = to_trace(state)
    path = tmp_path_factory.mktemp("prop") / "t.jsonl"
    write_traces([trace], path)
    [back] = read_traces(path)
    assert back.to_json() == trace.to_json()
    assert all(m.extra["argument"].startswith("arg ") for m in back.moves)


def test_state_carries_its_default_extra_forces():
    s = new_task_state(Q, ("a", "b"), seed=0, extra_forces=("vote",))
    apply_move(s, "a", reply("propose", "4"))
    apply_move(s, "b", reply("propose", "5"))
    next_round(s)
    assert "vote" in legal_moves(s, "a").forces
    assert "vote" not in legal_moves(s, "a", extra_forces=()).forces
    assert apply_move(s, "a", reply("vote", "5")).force == "vote"
    with pytest.raises(IllegalMove, match="not legal now"):
        apply_move(s, "b", reply("vote", "5"), extra_forces=())
    with pytest.raises(IllegalMove, match="unknown extra force"):
        new_task_state(Q, ("a",), seed=0, extra_forces=("shout",))
