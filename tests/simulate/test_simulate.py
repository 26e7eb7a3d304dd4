"""The council simulator (docs/simulator.md; docs/evaluation.md: simulators must not be their own oracle)."""
import collections
import time

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.simulate import Behavior, default_labels, seat_intercepts, simulate_council

PAPER = [0.738, 0.684, 0.678]          # [BDA] Appendix D.7


def stances(trace):
    """Replay a trace: per move, the agent's answer before and after, and others' stances."""
    answer_of, stance, events = {}, {}, []
    for m in trace.moves:
        a = m.answer if m.force == "propose" else answer_of.get(m.target) \
            if m.force == "concede" else None
        before = stance.get(m.agent)
        others = collections.Counter(v for k, v in stance.items() if k != m.agent)
        if a is not None:
            answer_of[m.id] = a
            stance[m.agent] = a
        events.append((m, before, stance.get(m.agent), others))
    return stance, events


def round0_correct(traces):
    return np.array([[m.answer == t.gold for m in t.moves if m.round == 0] for t in traces])


@pytest.fixture(scope="module")
def paper_council():
    return simulate_council(11, 1500, PAPER, seeds_per_question=3)


def test_determinism():
    a = simulate_council(5, 60, PAPER, n_candidates=(2, 5), seeds_per_question=2,
                         contagion=0.2, adversaries={1: 0.5})
    b = simulate_council(5, 60, PAPER, n_candidates=(2, 5), seeds_per_question=2,
                         contagion=0.2, adversaries={1: 0.5})
    c = simulate_council(6, 60, PAPER, n_candidates=(2, 5), seeds_per_question=2,
                         contagion=0.2, adversaries={1: 0.5})
    assert [t.to_json() for t in a] == [t.to_json() for t in b]
    assert a == b
    assert [t.to_json() for t in a] != [t.to_json() for t in c]


def test_shape_names_and_ids(paper_council):
    traces = paper_council
    assert len(traces) == 4500
    assert len({t.task_id for t in traces}) == 4500
    assert traces[0].task_id == "q0-s0" and traces[4].task_id == "q1-s1"
    assert traces[4].cluster == "q1"
    for t in traces[:50]:
        assert t.candidates == ("True", "False") and t.gold in t.candidates
        assert [m.id for m in t.moves] == [f"m{j + 1}" for j in range(9)]
        assert [m.round for m in t.moves] == [0] * 3 + [1] * 3 + [2] * 3
        assert [m.agent for m in t.moves[:3]] == ["A1", "A2", "A3"]      # round 0 in seat order
        for r in range(3):                                                # one move per seat
            assert sorted(m.agent for m in t.moves if m.round == r) == ["A1", "A2", "A3"]


def test_valid_through_files_and_tally(tmp_path):
    traces = (simulate_council(1, 200, PAPER, seeds_per_question=3)
              + simulate_council(2, 200, PAPER, n_candidates=4, n_rounds=4, contagion=0.3,
                                 adversaries=[0])
              + simulate_council(3, 200, [0.7] * 5, n_candidates=(2, 6), adversaries={0: .5,
                                 4: 1.0}, adversary_target="shift", agent_names=list("vwxyz")))
    traces = [bda.Trace(f"{k}-{t.task_id}", t.moves, t.candidates, t.gold, t.cluster)
              for k, t in enumerate(traces)]
    path = tmp_path / "sim.jsonl"
    bda.write_traces(traces, path)
    back = bda.read_traces(path)              # strict mode
    assert [t.to_json() for t in back] == [t.to_json() for t in traces]
    assert not bda.skipped_summary(back)
    counts = bda.tally(back)
    assert (np.asarray(counts.gold) >= 0).all()
    # every move is informative: no self-concede, no self-challenge
    assert int(np.asarray(counts.N).sum()) == sum(len(t.moves) for t in traces)
    for t in traces:
        ids = {m.id: m for m in t.moves}
        for m in t.moves:
            if m.target is not None:
                assert ids[m.target].agent != m.agent


def test_binary_vocab_and_metadata(paper_council, tmp_path):
    counts = bda.tally(paper_council[:30])
    assert counts.vocab == ("True", "False")
    sim = paper_council[0].extra["sim"]
    assert set(sim) == {"difficulty", "distractor", "coalition", "active"}
    bda.write_traces(paper_council[:30], tmp_path / "meta.jsonl")
    back = bda.read_traces(tmp_path / "meta.jsonl")
    assert [t.extra for t in back] == [t.extra for t in paper_council[:30]]
    plain = simulate_council(11, 3, PAPER, metadata=False)
    assert all(not t.extra for t in plain)


def test_round0_accuracy_matches_reliabilities():
    traces = simulate_council(21, 2000, PAPER, n_rounds=1)
    acc = round0_correct(traces).mean(0)
    np.testing.assert_allclose(acc, PAPER, atol=0.03)        # SE ~ 0.010 per seat
    traces = simulate_council(22, 2000, [0.9, 0.5, 0.3], n_candidates=4, n_rounds=1)
    np.testing.assert_allclose(round0_correct(traces).mean(0), [0.9, 0.5, 0.3], atol=0.03)


def test_intercepts_calibrate_the_mean_accuracy():
    rel = np.array([0.3, 0.55, 0.738, 0.95])
    for scale in (0.0, 0.7, 1.5):
        a = seat_intercepts(rel, scale)
        z = np.random.default_rng(0).standard_normal(400_000)
        mc = (1 / (1 + np.exp(-(a[:, None] + scale * z)))).mean(1)
        np.testing.assert_allclose(mc, rel, atol=2e-3)
    np.testing.assert_allclose(seat_intercepts(rel, 0.0), np.log(rel / (1 - rel)), atol=1e-9)


def test_errors_are_correlated():
    traces = simulate_council(23, 2000, PAPER, n_rounds=1)
    wrong = ~round0_correct(traces)
    independent = np.prod(1 - np.array(PAPER))               # 0.027
    assert wrong.all(1).mean() > 1.5 * independent           # ~2.1x expected
    # pairwise error correlation is clearly positive
    c = np.corrcoef(wrong.T.astype(float))
    assert c[np.triu_indices(3, 1)].min() > 0.1
    # without the shared difficulty, errors are (nearly) independent
    flat = simulate_council(23, 2000, PAPER, n_rounds=1, difficulty_sd=0.0, seat_question_sd=0.0)
    flat_wrong = ~round0_correct(flat)
    assert abs(flat_wrong.all(1).mean() - independent) < 0.015


def test_distractor_attracts_wrong_seats():
    traces = simulate_council(24, 1500, PAPER, n_candidates=4, n_rounds=1)
    hits = [m.answer == t.extra["sim"]["distractor"] for t in traces for m in t.moves
            if m.answer != t.gold]
    assert np.mean(hits) > 0.55           # 0.5 + 0.5/3 = 0.67 expected; uniform would be 1/3


def test_clusters_share_question(paper_council):
    by_cluster = collections.defaultdict(list)
    for t in paper_council:
        by_cluster[t.cluster].append(t)
    assert len(by_cluster) == 1500 and {len(v) for v in by_cluster.values()} == {3}
    for ts in by_cluster.values():
        assert len({t.gold for t in ts}) == 1
        assert len({t.extra["sim"]["difficulty"] for t in ts}) == 1
        assert len({t.extra["sim"]["distractor"] for t in ts}) == 1
    # seeds differ in their moves, yet a seat's correctness is correlated across seeds
    right = np.array([[[m.answer == t.gold for m in t.moves[:3]] for t in ts]
                      for ts in by_cluster.values()])                  # [Q, S, I]
    for i in range(3):
        assert np.corrcoef(right[:, 0, i], right[:, 1, i])[0, 1] > 0.4
        assert abs(right[:, 2, i].mean() - PAPER[i]) < 0.05     # marginals unchanged
    loose = simulate_council(11, 1500, PAPER, seeds_per_question=2, seed_persistence=0.0)
    loose_right = round0_correct(loose).reshape(1500, 2, 3)
    assert np.corrcoef(loose_right[:, 0, 0], loose_right[:, 1, 0])[0, 1] < 0.3
    assert any(ts[0].moves != ts[1].moves for ts in by_cluster.values())
    # harder questions (positive difficulty) have lower round-0 accuracy
    d = np.array([t.extra["sim"]["difficulty"] for t in paper_council])
    acc = round0_correct(paper_council).mean(1)
    assert acc[d > 0.5].mean() < acc[d < -0.5].mean() - 0.2


def test_per_task_k_and_labels():
    traces = simulate_council(25, 400, PAPER, n_candidates=(3, 5), seeds_per_question=2)
    ks = collections.Counter(len(t.candidates) for t in traces)
    assert set(ks) == {3, 4, 5}
    for t in traces:
        assert t.candidates == tuple("ABCDE"[:len(t.candidates)]) and t.gold in t.candidates
        assert all(m.answer is None or m.answer in t.candidates for m in t.moves)
    pairs = collections.defaultdict(set)
    for t in traces:
        pairs[t.cluster].add(t.candidates)
    assert all(len(v) == 1 for v in pairs.values())
    counts = bda.tally(traces)
    assert counts.vocab is None and set(np.asarray(counts.K).tolist()) == {3, 4, 5}
    four = simulate_council(25, 5, PAPER, n_candidates=4)
    assert four[0].candidates == ("A", "B", "C", "D")
    named = simulate_council(25, 5, PAPER, n_candidates=3, candidate_labels=["yes", "no", "maybe"])
    assert named[0].candidates == ("yes", "no", "maybe")
    assert default_labels(28, binary=False)[-3:] == ["Z", "AA", "AB"]


def test_move_inventory(paper_council):
    later = collections.Counter(m.force for t in paper_council for m in t.moves if m.round > 0)
    assert set(later) == {"propose", "concede", "challenge"}
    first = collections.Counter(m.force for t in paper_council for m in t.moves if m.round == 0)
    assert set(first) == {"propose"}
    share = {k: v / sum(later.values()) for k, v in later.items()}
    # roughly the paper's clean inventory (D.7: 43% / 51% / 6% of rounds >= 1)
    assert 0.3 < share["propose"] < 0.6 and 0.3 < share["concede"] < 0.65
    assert 0.02 < share["challenge"] < 0.15


def test_confidences_are_overconfident(paper_council):
    conf = np.array([[m.confidence for m in t.moves if m.round == 0] for t in paper_council])
    assert ((conf >= 0.5) & (conf <= 0.99)).all()
    assert conf.mean() > round0_correct(paper_council).mean() + 0.05
    assert all(m.confidence is not None for t in paper_council[:20] for m in t.moves)


def plurality_flip_rate(traces):
    """Among round >= 1 moves of a seat outnumbered by another answer (more other seats hold it
    than hold the seat's own answer), the share that switch to such an answer."""
    flips = n = 0
    for t in traces:
        for m, before, after, others in stances(t)[1]:
            if m.round == 0 or not any(c > others[before] for c in others.values()):
                continue
            n += 1
            flips += after != before and others[after] > others[before]
    return flips / n


def test_contagion_increases_plurality_flips():
    base = simulate_council(26, 800, PAPER, n_candidates=3)
    hot = simulate_council(26, 800, PAPER, n_candidates=3, contagion=0.5)
    assert plurality_flip_rate(hot) > plurality_flip_rate(base) + 0.15
    # final unanimity rises too
    unanimous = lambda ts: np.mean([len(set(stances(t)[0].values())) == 1 for t in ts])
    assert unanimous(hot) > unanimous(base) + 0.03


def test_contagion_toward_a_coalition():
    def genuine_flip(traces):
        hit = []
        for t in traces:
            coalition, active = t.extra["sim"]["coalition"], t.extra["sim"]["active"]
            final, events = stances(t)
            for agent in ("A3",):
                assert agent not in active
                hit.append(any(m.agent == agent and after == coalition != before
                               for m, before, after, _ in events))
        return np.mean(hit)
    base = simulate_council(27, 600, PAPER, adversaries=[0, 1])
    hot = simulate_council(27, 600, PAPER, adversaries=[0, 1], contagion=0.3)
    assert 0.1 < genuine_flip(base) < genuine_flip(hot) - 0.05


def test_adversaries():
    traces = simulate_council(28, 1000, PAPER, adversaries=[0, 1])
    acc = round0_correct(traces).mean(0)
    assert acc[0] == 0 and acc[1] == 0 and abs(acc[2] - PAPER[2]) < 0.04
    # adversaries hold their answer through every round and challenge the truth
    for t in traces[:200]:
        coalition = t.extra["sim"]["coalition"]
        assert t.extra["sim"]["active"] == ["A1", "A2"]
        final, events = stances(t)
        assert final["A1"] == final["A2"] == coalition != t.gold
    forces = collections.Counter(m.force for t in traces for m in t.moves if m.agent == "A1")
    assert forces["challenge"] > 0.2 * 1000
    partial = simulate_council(29, 2000, PAPER, adversaries={0: 0.5}, n_rounds=1)
    assert abs(round0_correct(partial).mean(0)[0] - 0.5 * PAPER[0]) < 0.04
    k4 = simulate_council(30, 300, PAPER, n_candidates=4, adversaries=[2],
                          adversary_target="shift")
    for t in k4:
        shift = t.candidates[(t.candidates.index(t.gold) + 1) % 4]
        assert t.moves[2].answer == shift == t.extra["sim"]["coalition"]


def test_relenting_adversaries():
    """``adversary_relent``: 0 reproduces the default stream bit for bit; 1 makes every complying
    adversary move to gold at its first later move (a concede to a gold holder, or a proposal
    of gold when nobody holds it) and stay there; intermediate rates raise the adversaries'
    full-trace accuracy toward the live council's (Appendix G.1: 0.21 / 0.29) while round 0 and
    the compliance metadata are unchanged."""
    kw = dict(adversaries={0: 0.9, 1: 0.9}, contagion=0.3)
    assert simulate_council(33, 50, PAPER, **kw) == \
        simulate_council(33, 50, PAPER, behavior=Behavior(adversary_relent=0.0), **kw)
    always = simulate_council(33, 300, PAPER, behavior=Behavior(adversary_relent=1.0), **kw)
    never = simulate_council(33, 300, PAPER, **kw)
    for t, n in zip(always, never):
        assert t.extra == n.extra and t.moves[:3] == n.moves[:3]     # round 0, compliance
        events = stances(t)[1]
        for agent in t.extra["sim"]["active"]:
            first = next(m for m in t.moves if m.agent == agent and m.round == 1)
            assert first.force in ("concede", "propose")
            after = [a for m, _, a, _ in events if m.agent == agent and m.round >= 1]
            assert after[0] == t.gold
    tally = bda.tally(always)              # every move is admissible
    assert tally.shape == (300, 3, 2)

    def full_accuracy(traces, agent):
        ok = [after == t.gold for t in traces for m, _, after, _ in stances(t)[1]
              if m.agent == agent and agent in t.extra["sim"]["active"]]
        return np.mean(ok)
    some = simulate_council(33, 600, PAPER, behavior=Behavior(adversary_relent=0.2), **kw)
    base = simulate_council(33, 600, PAPER, **kw)
    assert full_accuracy(base, "A1") < 0.02
    assert 0.1 < full_accuracy(some, "A1") < 0.4


def test_one_round_and_many_seats():
    traces = simulate_council(31, 10, [0.6] * 7, n_rounds=1, n_candidates=3)
    assert all(len(t.moves) == 7 and {m.force for m in t.moves} == {"propose"} for t in traces)
    assert bda.tally(traces).shape == (10, 7, 3)


@pytest.mark.parametrize("kwargs, field", [
    (dict(reliabilities=[0.7, 1.0]), "reliabilities"),
    (dict(reliabilities=[]), "reliabilities"),
    (dict(n_candidates=1), "n_candidates"),
    (dict(n_candidates=(4, 3)), "n_candidates"),
    (dict(n_candidates="abc"), "n_candidates"),
    (dict(n_rounds=0), "n_rounds"),
    (dict(seeds_per_question=0), "seeds_per_question"),
    (dict(contagion=1.5), "contagion"),
    (dict(adversaries=[3]), "adversaries"),
    (dict(adversaries={0: 2.0}), "adversaries"),
    (dict(adversary_target="worst"), "adversary_target"),
    (dict(candidate_labels=["a", "A"]), "candidate_labels"),
    (dict(n_candidates=3, candidate_labels=["x", "y"]), "candidate_labels"),
    (dict(agent_names=["a", "a", "b"]), "agent_names"),
    (dict(difficulty_sd=-1.0), "difficulty_sd"),
    (dict(behavior=Behavior(adversary_relent=1.2)), "behavior.adversary_relent"),
])
def test_bad_options(kwargs, field):
    args = dict(seed=0, n_questions=3, reliabilities=PAPER)
    args.update(kwargs)
    with pytest.raises(bda.DataError) as err:
        simulate_council(**args)
    assert err.value.field == field


def test_speed():
    start = time.perf_counter()
    traces = simulate_council(0, 1500, PAPER, seeds_per_question=3)
    assert len(traces) == 4500 and time.perf_counter() - start < 5.0


def test_behavior_is_a_knob():
    stubborn = simulate_council(32, 400, PAPER, behavior=Behavior(flip_bias=-20.0,
                                                                  agree_rate=0.0,
                                                                  challenge_bias=-20.0))
    later = {m.force for t in stubborn for m in t.moves if m.round > 0}
    assert later == {"propose"}
    for t in stubborn:
        r0 = {m.agent: m.answer for m in t.moves if m.round == 0}
        assert all(m.answer == r0[m.agent] for m in t.moves)
