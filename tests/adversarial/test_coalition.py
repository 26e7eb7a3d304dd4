from collections import Counter

import pytest

import bda_jax as bda
from bda_jax.adversarial import coalition_report
from bda_jax.simulate import simulate_council

GOLD_KEYS = ("labeled_tasks", "attacked_tasks", "n_adversary_moves", "compliance",
             "round0_compliance", "final_compliance", "genuine_flip_rate",
             "effective_corrupted_fraction", "nominal_fraction", "targeting")


def test_hand_made_coalition():
    moves = (bda.Move("1", "A1", 0, "propose", "False"), bda.Move("2", "A2", 0, "propose", "True"),
             bda.Move("3", "A3", 0, "propose", "True"), bda.Move("4", "A2", 1, "concede", target="1"))
    t = bda.Trace("q", moves, ("True", "False"), "True", extra={"sim": {"coalition": "False",
                                                                         "active": ["A1"]}})
    rep = coalition_report([t])
    assert rep["attacked_tasks"] == 1 and rep["compliance"] == 1.0
    assert rep["genuine_flip_rate"] == 0.5                 # A2 flipped, A3 held
    assert rep["effective_corrupted_fraction"] == pytest.approx(2 / 3)
    assert rep["nominal_fraction"] == pytest.approx(1 / 3)
    assert rep["sim"] == {"compliance": 1.0, "attacked_tasks": 1, "coalition_agreement": 1.0}
    with pytest.raises(bda.DataError, match="adversaries"):
        coalition_report([bda.Trace("x", moves, ("True", "False"))])
    with pytest.raises(bda.DataError, match="adversaries"):
        coalition_report([t], adversaries="A1")


def test_targeting_and_compliance_by_hand():
    # gold B; A1 and A2 are the coalition. A1 proposes A (wrong), A2 proposes B (honest opening),
    # A3 proposes B. Round 1: A1 challenges A3's B (genuine, truth), A2 concedes to A1's A (ally,
    # wrong), A3 challenges A1's A. Round 2: A2 challenges A1's move 1 (ally, wrong: not
    # compliant), A1 retracts its A (rejects a wrong answer: not compliant), A2 challenges its
    # own B (a retract of the gold: compliant, and no one's move is targeted).
    moves = (bda.Move("1", "A1", 0, "propose", "A"), bda.Move("2", "A2", 0, "propose", "B"),
             bda.Move("3", "A3", 0, "propose", "B"), bda.Move("4", "A1", 1, "challenge", target="3"),
             bda.Move("5", "A2", 1, "concede", target="1"),
             bda.Move("6", "A3", 1, "challenge", target="1"),
             bda.Move("7", "A2", 2, "challenge", target="1"),
             bda.Move("8", "A1", 2, "retract", answer="A"),
             bda.Move("9", "A2", 2, "challenge", target="2"))
    t = bda.Trace("q", moves, ("A", "B", "C"), "B")
    unlabeled = bda.Trace("u", moves[:3], ("A", "B", "C"))
    rep = coalition_report([t, unlabeled], adversaries=["A1", "A2"])
    # adversary moves: 1 (wrong: yes), 2 (gold: no), 4 (rejects gold: yes), 5 (wrong: yes),
    # 7 (rejects A: no), 8 (rejects A: no), 9 (rejects gold: yes) -> 4 of 7
    assert rep["n_adversary_moves"] == 7 and rep["compliance"] == pytest.approx(4 / 7)
    assert rep["round0_compliance"] == pytest.approx(0.5)     # move 1 wrong, move 2 right
    # last endorsements: A1's proposal A (a retract is no endorsement), A2's concede to A
    assert rep["final_compliance"] == 1.0
    assert rep["labeled_tasks"] == 1 and rep["unlabeled_tasks"] == 1
    assert rep["targeting"]["challenge"] == {"genuine_truth": 1, "genuine_wrong": 0,
                                             "ally_truth": 0, "ally_wrong": 1}
    assert rep["targeting"]["concede"] == {"genuine_truth": 0, "genuine_wrong": 0,
                                           "ally_truth": 0, "ally_wrong": 1}
    assert rep["targeting"]["challenged_seats"] == {"A1": 1, "A3": 1}
    assert rep["sim"] is None and rep["attacked_tasks"] == 1
    assert rep["genuine_flip_rate"] == 0.0                   # A3 opened with B and stayed
    assert rep["effective_corrupted_fraction"] == pytest.approx(2 / 3)


def _answer(by_id, move):
    """The answer a move stands for (propose/vote: its own; concede: its target's, followed)."""
    while move.force == "concede":
        move = by_id[move.target]
    return move.answer


def _independent(traces, adversaries):
    """Compliance and targeting counted straight off the raw moves (no automaton)."""
    moves = compliant = r0 = r0_wrong = final = final_wrong = 0
    cells, seats = Counter(), Counter()
    for t in traces:
        by_id = {m.id: m for m in t.moves}
        last = {}
        for m in t.moves:
            if m.force in ("propose", "vote", "concede"):
                a = _answer(by_id, m)
                if m.force == "concede" and by_id[m.target].agent == m.agent:
                    continue                                        # self-concede: no move
                last[m.agent] = a
                if m.agent in adversaries:
                    moves += 1
                    compliant += a != t.gold
                    if m.round == 0 and m.force == "propose":
                        r0 += 1
                        r0_wrong += a != t.gold
                    if m.force == "concede":
                        whom = by_id[m.target].agent
                        cells["concede", whom in adversaries, a == t.gold] += 1
            elif m.force == "challenge" and m.agent in adversaries:
                a = _answer(by_id, by_id[m.target])
                whom = by_id[m.target].agent
                moves += 1
                compliant += a == t.gold
                cells["challenge", whom in adversaries, a == t.gold] += 1
                seats[whom] += 1
        for seat in adversaries:
            if seat in last:
                final += 1
                final_wrong += last[seat] != t.gold
    return moves, compliant / moves, r0_wrong / r0, final_wrong / final, cells, seats


@pytest.fixture(scope="module")
def council_file(tmp_path_factory):
    """A K = 3 council with a two-seat coalition and contagion, written without the simulator's
    record and read back from the file."""
    traces = simulate_council(2, 60, [0.75, 0.7, 0.7], n_candidates=3, adversaries={0: 0.8, 1: 1.0},
                              contagion=0.3, metadata=False)
    path = tmp_path_factory.mktemp("coal") / "council.jsonl"
    bda.write_traces(traces, path)
    return bda.read_traces(path)


def test_report_on_traces_from_a_file(council_file):
    assert all(not t.extra for t in council_file)
    adv = ["A1", "A2"]
    rep = coalition_report(council_file, adv)
    moves, comp, r0, fin, cells, seats = _independent(council_file, set(adv))
    assert rep["n_adversary_moves"] == moves
    assert rep["compliance"] == pytest.approx(comp)
    assert rep["round0_compliance"] == pytest.approx(r0)
    assert rep["final_compliance"] == pytest.approx(fin)
    for force in ("challenge", "concede"):
        for ally in (False, True):
            for truth in (False, True):
                cell = ("ally" if ally else "genuine") + ("_truth" if truth else "_wrong")
                assert rep["targeting"][force][cell] == cells[force, ally, truth], (force, cell)
    assert rep["targeting"]["challenged_seats"] == dict(seats)
    # the stealth coalition's challenges go to the genuine seat defending the truth
    ch = rep["targeting"]["challenge"]
    assert ch["genuine_truth"] > ch["ally_truth"] + ch["ally_wrong"]
    assert rep["sim"] is None and rep["labeled_tasks"] == 60
    with pytest.raises(bda.DataError, match="adversaries"):
        coalition_report(council_file)


def test_the_record_is_an_extra_not_an_input(council_file):
    with_record = simulate_council(2, 60, [0.75, 0.7, 0.7], n_candidates=3,
                                   adversaries={0: 0.8, 1: 1.0}, contagion=0.3)
    a = coalition_report(with_record, ["A1", "A2"])
    b = coalition_report(council_file, ["A1", "A2"])
    assert {k: a[k] for k in GOLD_KEYS} == {k: b[k] for k in GOLD_KEYS}
    active = sum(len(t.extra["sim"]["active"]) for t in with_record)
    assert a["sim"]["compliance"] == pytest.approx(active / (2 * 60))
    # the answer read from the moves is the record's, but where a non-complying A1 is wrong
    # on its own answer as often as A2 argues the coalition's (here 1 task in 60)
    assert 0.95 < a["sim"]["coalition_agreement"] <= 1.0
    assert coalition_report(with_record) == a            # default seats: the record's


def test_contagion_raises_the_effective_fraction():
    quiet = coalition_report(simulate_council(0, 200, [0.75, 0.7, 0.7], adversaries=[0, 1]),
                             adversaries=["A1", "A2"])
    loud = coalition_report(simulate_council(0, 200, [0.75, 0.7, 0.7], adversaries=[0, 1],
                                             contagion=0.4), adversaries=["A1", "A2"])
    assert quiet["compliance"] == 1.0 and quiet["nominal_fraction"] == pytest.approx(2 / 3)
    assert loud["genuine_flip_rate"] > quiet["genuine_flip_rate"]
    assert loud["effective_corrupted_fraction"] > quiet["effective_corrupted_fraction"] >= 2 / 3 - 0.05
    partial = coalition_report(simulate_council(1, 400, [0.75, 0.7, 0.7], adversaries={0: 0.5}),
                               adversaries=["A1"])
    assert 0.4 < partial["sim"]["compliance"] < 0.6
    # measured from gold, the honest half adds the seat's own errors (reliability 0.75)
    assert partial["sim"]["compliance"] < partial["compliance"] < partial["sim"]["compliance"] + 0.2
