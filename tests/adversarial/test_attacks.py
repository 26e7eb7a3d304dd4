"""Count-level adversary and dose-response study ([BDA] §7, Appendix F.1, F.3).

The shape assertions are the acceptance criteria, on grids small enough to be robust.
"""
import json

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.adversarial import DoseResponse, corrupt_traces, corruption_summary, dose_response
from bda_jax.simulate import simulate_council

RELS = [0.74, 0.68, 0.68]


@pytest.fixture(scope="module")
def binary():
    return simulate_council(0, 150, RELS, seeds_per_question=3)


@pytest.fixture(scope="module")
def multi():
    return simulate_council(3, 80, RELS + [0.6], n_candidates=(2, 5), contagion=0.2,
                            adversaries={1: 0.5})


def random_traces(seed, n=300):
    """Admissible traces with every force, chains, retracts, self-concedes, open candidate sets and
    golds outside the candidates (moves drawn at random, inadmissible ones dropped)."""
    rng = np.random.default_rng(seed)
    forces = ["propose", "vote", "concede", "challenge", "retract", "abstain"]
    out = []
    for t in range(n):
        K = int(rng.integers(2, 5))
        cands = [f"c{j}" for j in range(K)]
        agents = [f"a{j}" for j in range(int(rng.integers(2, 5)))]
        moves = []
        for j in range(int(rng.integers(2, 14))):
            f = forces[rng.choice(6, p=[.35, .1, .2, .2, .1, .05])]
            m = {"id": f"m{j}", "agent": agents[rng.integers(len(agents))],
                 "round": j // len(agents), "force": f}
            if f in ("propose", "vote"):
                m["answer"] = cands[rng.integers(K)]
            elif f in ("concede", "challenge") and j:
                m["target"] = f"m{rng.integers(j)}"
            elif f == "retract":
                if rng.random() < .5 and j:
                    m["target"] = f"m{rng.integers(j)}"
                else:
                    m["answer"] = cands[rng.integers(K)]
            if f == "concede" and rng.random() < .3:
                m["answer"] = cands[rng.integers(K)]
            if rng.random() < .5:
                m["confidence"] = 0.5
            moves.append(m)
        gold = cands[rng.integers(K)] if rng.random() < .9 else "zz"
        raw = {"task_id": f"t{t}", "gold": gold, "moves": moves}
        if rng.random() < .7:
            raw["candidates"] = cands
        tr = bda.parse_trace(raw, lenient=True)
        try:
            res = bda.resolve_trace(tr, lenient=True)
        except bda.TraceError:                    # no candidate at all
            continue
        if res.admissible:
            out.append(bda.Trace(tr.task_id, res.admissible, tr.candidates, tr.gold))
    return out


def check_meaning(orig, new):
    """Every output is admissible; moves not redirected keep their signed endorsement (or are
    dropped); redirected moves are inconsistent with the gold."""
    norm = bda.default_normalizer
    for a, b in zip(orig, new):
        assert [(m.id, m.agent, m.round) for m in a.moves] == \
            [(m.id, m.agent, m.round) for m in b.moves]
        ra, rb = bda.resolve_trace(a), bda.resolve_trace(b)          # strict: raises if not
        meta = b.extra["adversary"]
        before = {mid: (norm(ra.candidates[c]), s) for mid, c, s in zip(ra.moves, ra.cand, ra.sign)}
        after = {mid: (norm(rb.candidates[c]), s) for mid, c, s in zip(rb.moves, rb.cand, rb.sign)}
        gold = norm(a.gold)
        gold_in = ra.gold >= 0
        assert set(after) <= set(before)                              # nothing becomes informative
        assert set(before) - set(after) == set(meta["dropped"])
        for mid, (key, sign) in before.items():
            if mid in meta["dropped"]:
                assert mid not in meta["redirected"]
            elif mid in meta["redirected"]:
                k2, s2 = after[mid]
                if gold_in or meta["wrong"] is not None:
                    assert (s2 > 0 and k2 != gold) or (s2 < 0 and k2 == gold)
            else:
                assert after[mid] == (key, sign)
        moved = {m.agent for m in a.moves if m.id in meta["redirected"]}
        assert moved <= set(meta["seats"])


@pytest.mark.parametrize("mode,k,p,target", [("persistent", 1, 0.5, "fixed-wrong"),
                                             ("persistent", 2, 1.0, "random-wrong"),
                                             ("rotating", 2, 0.7, "fixed-wrong"),
                                             ("rotating", 1, 1.0, "random-wrong")])
def test_admissible_and_meaning_preserved(multi, mode, k, p, target):
    for traces in (multi, random_traces(k + int(10 * p))):
        new = corrupt_traces(traces, p, k=k, mode=mode, seed=4, target=target)
        check_meaning(traces, new)
        bda.tally(new)


def test_outputs_resolve_like_their_json():
    """Simulated traces and their corruptions skip the field re-parse when their fields are
    canonical: each resolves exactly as its JSON read back does (agent names that are not
    canonical, " A" and fullwidth "Ｃ", take the parse path and come out canonical too)."""
    sets = [simulate_council(3, 30, RELS + [0.6], n_candidates=(2, 5), adversaries={1: 0.5}),
            simulate_council(1, 20, RELS, agent_names=[" A", "B", "Ｃ"]), random_traces(3, 60)]
    for traces in sets:
        for t in list(traces) + corrupt_traces(traces, 0.7, k=2, seed=1, mode="rotating"):
            again = bda.parse_trace(json.loads(json.dumps(t.to_json())))
            assert bda.resolve_trace(t) == bda.resolve_trace(again)
    assert {m.agent for t in sets[1] for m in bda.resolve_trace(t).admissible} == {"A", "B", "C"}


def test_p_zero_is_identity_and_k_zero(binary):
    for kw in ({"p_wrong": 0.0, "k": 2}, {"p_wrong": 1.0, "k": 0}):
        new = corrupt_traces(binary, **kw)
        assert [t.moves for t in new] == [t.moves for t in binary]


def test_determinism_and_nested_doses(binary):
    a = corrupt_traces(binary, 0.4, k=2, mode="rotating", seed=3)
    b = corrupt_traces(binary, 0.4, k=2, mode="rotating", seed=3)
    c = corrupt_traces(binary, 0.4, k=2, mode="rotating", seed=4)
    assert [t.to_json() for t in a] == [t.to_json() for t in b]
    assert [t.to_json() for t in a] != [t.to_json() for t in c]
    # keyed per task: a subset (or a reordering) corrupts each task identically
    sub = corrupt_traces(binary[::-7], 0.4, k=2, mode="rotating", seed=3)
    assert [t.to_json() for t in sub] == [t.to_json() for t in a[::-7]]
    # common random numbers: doses are nested, k=1 rotating seats are among the k=2 ones
    hi = corrupt_traces(binary, 0.6, k=2, mode="rotating", seed=3)
    one = corrupt_traces(binary, 0.6, k=1, mode="rotating", seed=3)
    for x, y, z in zip(a, hi, one):
        assert set(x.extra["adversary"]["redirected"]) <= set(y.extra["adversary"]["redirected"])
        assert set(z.extra["adversary"]["seats"]) <= set(y.extra["adversary"]["seats"])


def test_rate_matches_p_wrong(binary):
    counts0 = bda.tally(binary)
    gold = np.asarray(counts0.gold)
    ar = np.arange(gold.size)
    clean_rate = np.asarray(counts0.c)[ar, :, gold].sum(0) / np.asarray(counts0.N).sum(0)
    for p in (0.2, 0.5, 1.0):
        new = corrupt_traces(binary, p, k=1, seed=1)
        s = corruption_summary(new)
        assert s["informative"] == int(np.asarray(counts0.N)[:, 0].sum())
        assert abs(s["redirect_rate"] - p) < 0.03
        assert s["dropped"] <= 0.01 * np.asarray(counts0.N).sum()
        counts = bda.tally(new, agents=counts0.agents)
        rate = np.asarray(counts.c)[ar, :, gold].sum(0) / np.asarray(counts.N).sum(0)
        assert abs(rate[0] - (1 - p) * clean_rate[0]) < 0.03          # corrupted seat
        assert np.allclose(rate[1:], clean_rate[1:], atol=0.01)        # honest seats untouched
    assert rate[0] == 0.0                                              # p = 1: always wrong


def test_persistent_and_rotating_seats(binary):
    pers = corrupt_traces(binary, 0.5, k=2, mode="persistent")
    assert all(t.extra["adversary"]["seats"] == ["A1", "A2"] for t in pers)
    named = corrupt_traces(binary, 0.5, mode="persistent", seats=["A3", 0])
    assert all(t.extra["adversary"]["seats"] == ["A1", "A3"] for t in named)
    rot = corrupt_traces(binary, 0.5, k=2, mode="rotating")
    seats = [tuple(t.extra["adversary"]["seats"]) for t in rot]
    assert all(len(s) == 2 for s in seats)
    assert len(set(seats)) == 3                                        # all pairs of 3 seats occur
    freq = {a: np.mean([a in s for s in seats]) for a in ("A1", "A2", "A3")}
    assert all(abs(f - 2 / 3) < 0.06 for f in freq.values())
    pool = corrupt_traces(binary, 0.5, k=1, mode="rotating", seats=["A2", "A3"])
    assert {t.extra["adversary"]["seats"][0] for t in pool} == {"A2", "A3"}


def test_wrong_answer_policies():
    traces = simulate_council(2, 100, RELS, n_candidates=4)
    fixed = corrupt_traces(traces, 1.0, k=2, target="fixed-wrong")
    rand = corrupt_traces(traces, 1.0, k=2, target="random-wrong")
    wrongs, spread = [], 0
    for t, f, r in zip(traces, fixed, rand):
        meta = f.extra["adversary"]
        assert meta["wrong"] != t.gold and meta["wrong"] in t.candidates
        wrongs.append(meta["wrong"])
        ans = {m.answer for m in f.moves if m.id in meta["redirected"] and m.force == "propose"}
        assert ans <= {meta["wrong"]}
        ans_r = {m.answer for m in r.moves if m.id in r.extra["adversary"]["redirected"]
                 and m.force == "propose"}
        assert t.gold not in ans_r
        spread += len(ans_r) > 1
    assert len(set(wrongs)) == 4 and spread > 20      # seeded uniform draw, fresh per move


def test_open_answer_space_fallback():
    t = bda.Trace("q", (bda.Move("m1", "a", 0, "propose", "yes"),
                        bda.Move("m2", "b", 0, "propose", "yes"),
                        bda.Move("m3", "b", 1, "concede", target="m1")), gold="yes")
    new = corrupt_traces([t], 1.0, k=1)
    assert [m.answer for m in new[0].moves[:2]] == ["(adversary)", "yes"]
    r = bda.resolve_trace(new[0])
    assert r.candidates == ("(adversary)", "yes")
    assert r.cand[2] == 1                                  # b's concede still endorses "yes"


def test_errors(binary):
    with pytest.raises(bda.DataError):
        corrupt_traces(binary, 1.5)
    with pytest.raises(bda.DataError):
        corrupt_traces(binary, 0.5, mode="sometimes")
    with pytest.raises(bda.DataError):
        corrupt_traces(binary, 0.5, target="gold")
    with pytest.raises(bda.DataError):
        corrupt_traces(binary, 0.5, seats=["nobody"])
    for bad in ("", " ", "$$", 3):
        with pytest.raises(bda.DataError, match="fallback_answer"):
            corrupt_traces(binary, 0.5, fallback_answer=bad)
    unlabeled = [bda.Trace("q", (bda.Move("m1", "a", 0, "propose", "x"),))]
    with pytest.raises(bda.DataError):
        corrupt_traces(unlabeled, 0.5)


@pytest.fixture(scope="module")
def study(binary, tmp_path_factory):
    cache = tmp_path_factory.mktemp("dose") / "cells.jsonl"
    dr = dose_response(binary, p_grid=(0, 0.5, 1), seed=0, cache=str(cache))
    return dr, cache


def test_dose_response_table(study):
    dr, _ = study
    assert isinstance(dr, DoseResponse)
    assert len(dr.rows) == 3 * 3 * 3
    assert {r["regime"] for r in dr.rows} == {"persistent k=1", "persistent k=2", "rotating k=2"}
    piv = dr.pivot()
    assert set(piv) == {"persistent k=1", "persistent k=2", "rotating k=2"}
    assert all(len(v) == 3 for s in piv.values() for v in s.values())
    # p = 0 is one clean cell shared by every regime
    assert len({piv[r]["bda-per-agent"][0] for r in piv}) == 1
    assert "| persistent k=2 | majority |" in dr.to_markdown()
    json.dumps(dr.to_json(), allow_nan=False)
    assert all(abs(r["redirect_rate"] - r["p_wrong"]) < 0.05 for r in dr.rows)


def test_dose_response_shapes(study):
    """Issue 4, Done when (small grid): the persistent coalition is inverted, majority collapses."""
    dr, _ = study
    piv = dr.pivot()
    k2 = piv["persistent k=2"]
    assert k2["majority"][-1] <= 0.25
    assert k2["bda-per-agent"][-1] >= 0.85 and k2["bda-confusion"][-1] >= 0.85
    assert k2["bda-per-agent"][-1] >= k2["majority"][-1] + 0.5
    for regime in piv:
        maj = piv[regime]["majority"]
        assert maj[0] > maj[1] > maj[2]
    rot = piv["rotating k=2"]
    assert rot["bda-per-agent"][0] > rot["bda-per-agent"][1] > rot["bda-per-agent"][2]
    assert rot["bda-confusion"][2] > rot["bda-confusion"][1]


def test_dose_response_resumes_from_cache(binary, study):
    dr, cache = study
    calls = []
    again = dose_response(binary, p_grid=(0, 0.5, 1), seed=0, cache=str(cache),
                          progress=lambda *a: calls.append(a))
    assert calls == [] and again.rows == dr.rows
    with pytest.raises(bda.ArtifactError):              # another study's cache is refused
        dose_response(binary, p_grid=(0, 0.5), seed=1, cache=str(cache))
