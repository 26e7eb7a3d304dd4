"""DASE stopping rules ([DASE] §3, Appendix H; docs/stopping.md): evidence score, spatial arena,
heuristic streak rule, live Stopper, and replay of the released history logs."""
import json
from collections import Counter
from math import exp

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import betainc as sp_betainc

from bda_jax import DataError
from bda_jax.datasets import dase_file_settings
from bda_jax.stopping import _rules as impl  # private: the trace counter of the compiled grids
from bda_jax.stopping import (COMMITS, ArenaParams, HeuristicParams, RuleState, Stopper,
                              accuracy_coverage, commit_partition, encode_answers,
                              evidence_score, heuristic_rule, heuristic_step, init_rule_state,
                              replay_history, replay_summary, resimulate, round_plurality,
                              routing_gap, spatial_rule, spatial_step)
from reference import REPO, SHARED_DATA

DASE = SHARED_DATA / "dase_council_traces"
BUNDLED = REPO / "bda_jax" / "data" / "dase_council_traces"
needs_dase = pytest.mark.skipif(not DASE.is_dir(), reason=f"shared data folder {DASE} is absent "
                                "(the DASE replay tests need the released logs)")
G_TOL = 5e-5 + 1e-6        # "g to 4 decimals": half a unit of the 4th decimal, plus float32 slack

# Rounds the replay cannot reproduce, each listed with its cause: a norm equal to "" that the
# original runtime counted as an answer (docs/stopping.md). The first is the single miss among the
# 9,523 spatial rounds; the second is the same runtime quirk in a DDM forensics file (its streak,
# winner and outcome still match; only that round's g differs).
EXCEPTIONS = {
    ("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl", 454, 12),
    ("safe_DASE_Forensics_DDM_qwll_8k_15L.jsonl", 94, 3),
}


# ----------------------------------------------------------------------------- references
def plurality(values):
    """Most common, ties to the first seen (Counter.most_common keeps insertion order)."""
    return Counter(values).most_common(1)[0][0] if values else None


def g_reference(valid, n=5, w=0.2, empty_g=0.0):
    if not valid:
        return empty_g
    r = Counter(valid).most_common(1)[0][1]
    a = w * (n - len(valid)) / n
    hi, mid, lo = (sp_betainc(r + 1, n - r + 1, x) for x in (1 - a, 0.5, a))
    return (hi - mid) / (hi - lo)


def spatial_reference(rounds, W, L=15, empty_g=0.0, cx=0.01):
    """Plain-Python docs/stopping.md arena: (commit, answer, steps, xs)."""
    x, every, xs = 0, [], []
    for t, answers in enumerate(rounds[:L], 1):
        valid = [a for a in answers if a is not None]
        every += valid
        g = g_reference(valid, len(answers), empty_g=empty_g)
        vr, vl = g - cx * (W - x), (1 - g) - cx * (x + W)
        if max(vr, vl) > 0:
            x += 1 if vr >= vl else -1
        xs.append(x)
        if x == W:
            return "right_wall", plurality(valid), t, xs
        if x == -W:
            return "left_wall", plurality(every), t, xs
    return "fallback", plurality(every), len(xs), xs


def heuristic_reference(rounds, k, L=15):
    every, streak, prev, streaks = [], 0, None, []
    for t, answers in enumerate(rounds[:L], 1):
        valid = [a for a in answers if a is not None]
        every += valid
        if valid:
            win = plurality(valid)
            g = valid.count(win) / len(valid)
            streak = streak + 1 if win == prev else 1
        else:
            win, g, streak = None, 0.0, 0
        prev = win
        streaks.append(streak)
        if (t == 1 and g == 1) or (streak >= k and g >= 0.35 + 0.4 * exp(-0.5 * t)):
            return "consensus", win, t, streaks
    return "fallback", plurality(every), len(streaks), streaks


def random_problems(rng, B, R=15, n=5, vocab=3, p_empty=0.15, ragged=True):
    out = []
    for _ in range(B):
        length = int(rng.integers(1, R + 1)) if ragged else R
        skew = rng.dirichlet(np.ones(vocab) * 0.7)
        out.append([[None if rng.random() < p_empty else str(rng.choice(vocab, p=skew))
                     for _ in range(n)] for _ in range(length)])
    return out


# ----------------------------------------------------------------------------- score and pieces
def test_evidence_score_reference_values():
    g = np.asarray(evidence_score(jnp.arange(2, 6), 5))
    assert np.all(np.abs(g - np.array([0.3438, 0.6562, 0.8906, 0.9844])) <= G_TOL)
    assert float(evidence_score(0, 0)) == 0.0
    assert float(evidence_score(0, 0, empty_g=0.5)) == 0.5


def test_evidence_score_matches_scipy_with_empties():
    r, nv = np.meshgrid(np.arange(1, 6), np.arange(1, 6), indexing="ij")
    ok = r <= nv
    got = np.asarray(evidence_score(r[ok], nv[ok], 5))
    ref = [g_reference(["a"] * a + [str(i) for i in range(b - a)]) for a, b in zip(r[ok], nv[ok])]
    np.testing.assert_allclose(got, ref, atol=2e-6)


def test_round_plurality_ties_first_seen_and_empties():
    w, r, nv = round_plurality(jnp.array([[2, 1, 1, 2, -1], [-1] * 5, [4, 0, 1, 3, 2]]))
    assert w.tolist() == [2, -1, 4] and r.tolist() == [2, 0, 1] and nv.tolist() == [4, 0, 5]


def test_encode_first_seen_ids_and_empty_forms():
    enc = encode_answers([[["x", "", "empty", None, "y"], ["y", "x", "x", "z", "z"]],
                          [["A", "(A)", "A", "a", "B"]]])
    assert enc.ids[0].tolist() == [[0, -1, -1, -1, 1], [1, 0, 0, 2, 2]]
    assert enc.mask.tolist() == [[True, True], [True, False]]
    assert enc.vocab[1] == ("A", "(A)", "a", "B")           # raw identity, as the runtime did
    norm = encode_answers([[["A", "(A)", "A", "a", "B"]]], normalize=True, benchmark="gpqa")
    assert norm.vocab == (("A", "B"),) and norm.ids[0, 0].tolist() == [0, 0, 0, 0, 1]
    with pytest.raises(DataError):
        encode_answers([[["x", "y"]], [["x"]]])


# ----------------------------------------------------------------------------- rule semantics
def test_spatial_commits_and_answers():
    right = [["1", "1", "2", "2", "2"], ["1", "1", "1", "1", "2"]]    # W=2: right at t=2
    left = [["1", "2", "3", "4", "5"], ["5", "6", "5", None, None]]   # spread -> left at t=2
    slow = [["1", "1", "1", "2", "2"], ["1", "1", "2", "2", "3"], ["1", "1", "1", "2", "2"]]
    enc = encode_answers([right, left, slow])
    res = jax.tree.map(np.asarray, spatial_rule(enc.ids, enc.mask, 2, L=3))
    kinds = [COMMITS[c] for c in res.commit]
    assert kinds == ["right_wall", "left_wall", "fallback"]
    answers = [enc.vocab[b][a] for b, a in enumerate(res.answer)]
    assert answers == ["1", "5", "1"]         # this round's plurality; every answer so far
    assert res.steps.tolist() == [2, 2, 3]
    for b, problem in enumerate([right, left, slow]):
        assert spatial_reference(problem, 2, L=3)[:3] == (kinds[b], answers[b], res.steps[b])


def test_spatial_tie_goes_right_wait_and_wall_before_runway():
    empty = [[None] * 5]
    enc = encode_answers([empty * 3])
    res = spatial_rule(enc.ids, enc.mask, 2, empty_g=0.5)    # VR == VL at x=0: move right
    assert np.asarray(res.x)[0, :2].tolist() == [1, 2] and COMMITS[int(res.commit[0])] == "right_wall"
    assert int(res.answer[0]) == -1                          # nobody answered: no answer
    res = spatial_rule(enc.ids, enc.mask, 8, empty_g=0.5, cx=0.1)   # both values <= 0: wait
    assert np.asarray(res.x)[0].tolist() == [0, 0, 0] and COMMITS[int(res.commit[0])] == "fallback"
    unanimous = encode_answers([[["7"] * 5] * 2])           # reaches +2 exactly at L = 2
    res = spatial_rule(unanimous.ids, unanimous.mask, 2, L=2)
    assert COMMITS[int(res.commit[0])] == "right_wall"
    corrected = spatial_rule(enc.ids, enc.mask, 2, empty_g=0.0)   # g = 0 drives left
    assert COMMITS[int(corrected.commit[0])] == "left_wall"


def test_heuristic_rule_semantics():
    first = [["3"] * 5]
    streak = [["1", "1", "2", "2", "2"], ["2", "2", "2", None, "1"], ["2", "2", "2", "2", "1"]]
    reset = [["1", "1", "1", "2", "2"], [None] * 5, ["1", "1", "1", "1", "2"]]
    enc = encode_answers([first, streak, reset])
    res = jax.tree.map(np.asarray, heuristic_rule(enc.ids, enc.mask, 2, L=3))
    assert [COMMITS[c] for c in res.commit] == ["consensus", "consensus", "fallback"]
    assert res.steps.tolist() == [1, 2, 3]
    assert res.x[2].tolist() == [1, 0, 1]                    # the empty round resets the streak
    assert enc.vocab[2][res.answer[2]] == "1"


def test_rules_match_plain_python_on_random_batches(rng):
    problems = random_problems(rng, 60)
    enc = encode_answers(problems)
    for W, empty_g in ((2, 0.0), (4, 0.5), (8, 0.0)):
        res = jax.tree.map(np.asarray, spatial_rule(enc.ids, enc.mask, W, empty_g=empty_g))
        for b, p in enumerate(problems):
            kind, ans, steps, xs = spatial_reference(p, W, empty_g=empty_g)
            a = res.answer[b]
            assert (COMMITS[res.commit[b]], enc.vocab[b][a] if a >= 0 else None,
                    res.steps[b]) == (kind, ans, steps)
            assert res.x[b, :steps].tolist() == xs
    for k in (1, 2, 4):
        res = jax.tree.map(np.asarray, heuristic_rule(enc.ids, enc.mask, k))
        for b, p in enumerate(problems):
            kind, ans, steps, streaks = heuristic_reference(p, k)
            a = res.answer[b]
            assert (COMMITS[res.commit[b]], enc.vocab[b][a] if a >= 0 else None,
                    res.steps[b]) == (kind, ans, steps)
            assert res.x[b, :steps].tolist() == streaks


def test_grid_is_one_compiled_call(rng):
    enc = encode_answers(random_problems(rng, 37, R=11))
    impl._spatial_grid.clear_cache()          # count from a cold cache
    before = impl._TRACES["spatial"]
    grid = spatial_rule(enc.ids, enc.mask, [2, 4, 8])
    again = spatial_rule(enc.ids, enc.mask, [3, 5, 7])          # new values, same shapes
    assert impl._TRACES["spatial"] - before == 1
    assert grid.commit.shape == (3, 37) and grid.g.shape == (3, 37, 11)
    assert again.commit.shape == (3, 37)
    one = spatial_rule(enc.ids, enc.mask, 4)
    for field in ("commit", "answer", "steps", "final_x", "x"):
        np.testing.assert_array_equal(getattr(grid, field)[1], getattr(one, field))


def test_k_grid_is_one_compiled_call(rng):
    enc = encode_answers(random_problems(rng, 37, R=11))
    impl._heuristic_grid.clear_cache()
    before = impl._TRACES["heuristic"]
    heuristic_rule(enc.ids, enc.mask, [2, 4, 8])
    heuristic_rule(enc.ids, enc.mask, [1, 3, 5])
    assert impl._TRACES["heuristic"] - before == 1


def test_stopper_matches_batch(rng):
    problems = random_problems(rng, 12, ragged=False)
    enc = encode_answers(problems)
    for rule, kw in (("spatial", dict(W=4, empty_g=0.5)), ("heuristic", dict(k=2))):
        if rule == "spatial":
            res = spatial_rule(enc.ids, enc.mask, 4, empty_g=0.5)
        else:
            res = heuristic_rule(enc.ids, enc.mask, 2)
        res = jax.tree.map(np.asarray, res)
        for b, p in enumerate(problems):
            stopper = Stopper(rule, L=15, **kw)
            for t, answers in enumerate(p):
                d = stopper.update(answers)
                assert d.step == t + 1 and d.x == res.x[b, t]
                if d.stop:
                    break
            assert d.stop and d.step == res.steps[b] and COMMITS[res.commit[b]] == d.commit
            a = res.answer[b]
            assert d.answer == (enc.vocab[b][a] if a >= 0 else None)
    s = Stopper("spatial", W=2)
    s.update(["5"] * 5)
    assert s.update(["5"] * 5).commit == "right_wall"
    with pytest.raises(DataError):
        s.update(["5"] * 5)
    with pytest.raises(DataError):
        Stopper("bellman")


def test_file_settings_from_names():
    assert dase_file_settings("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl")["W"] == 4
    assert dase_file_settings("safe_DASE_Bellman_History_NP_qwen_8_L15_alpha0_2.jsonl")["W"] == 8
    assert dase_file_settings("safe_DASE_DDM_History_k4_nopromptinj.jsonl") == {
        "rule": "heuristic", "W": None, "k": 4, "L": None}
    assert dase_file_settings("safe_DASE_DDM_History_GPQA_qwll_k4_L15.jsonl")["L"] == 15


# ----------------------------------------------------------------------------- log replay
def check_replay(path):
    """Compare a replay (empty_g = 0.5) with every logged round; return (rounds, misses)."""
    settings = dase_file_settings(path)
    records = replay_history(path, empty_g=0.5)
    logged = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert [r.idx for r in records] == [rec["idx"] for rec in logged]
    rounds, misses = 0, set()
    for r, rec in zip(records, logged):
        cert, history = rec["cert"], rec["history"]
        assert r.steps == len(history) == cert["steps"]
        assert (r.answer or "empty") == cert["consensus"]
        if settings["rule"] == "spatial":
            assert (r.commit, r.final_x) == (cert["commit_reason"], cert["final_x"])
        for t, step in enumerate(history):
            rounds += 1
            ok = abs(r.g[t] - step["g"]) <= G_TOL
            if settings["rule"] == "spatial":
                ok &= r.x[t] == step["x"]
            else:
                ok &= r.streak[t] == step["streak"] and (r.winner[t] or "empty") == step["winner"]
            if not ok:
                assert "" in step["norms"]
                misses.add((path.name, r.idx, t + 1))
    return rounds, misses


def test_replay_bundled_excerpts():
    paths = sorted(BUNDLED.glob("safe_DASE_*History*.jsonl"))
    assert len(paths) == 2
    for path in paths:
        assert check_replay(path)[1] == set()


@needs_dase
def test_replay_reproduces_every_spatial_round():
    total, misses = 0, set()
    for path in sorted(DASE.glob("safe_DASE_Bellman_History_*.jsonl")):
        rounds, miss = check_replay(path)
        total += rounds
        misses |= miss
    assert total == 9523
    assert misses == {e for e in EXCEPTIONS if "Bellman" in e[0]}


@needs_dase
def test_replay_reproduces_every_heuristic_round():
    paths = sorted(DASE.glob("safe_DASE_DDM_History_*.jsonl")) + sorted(
        DASE.glob("safe_DASE_Forensics_DDM_*.jsonl"))
    assert len(paths) == 6
    total, misses = 0, set()
    for path in paths:
        rounds, miss = check_replay(path)
        total += rounds
        misses |= miss
    assert total == 3510 + 1207
    assert misses == {e for e in EXCEPTIONS if "DDM" in e[0]}


@needs_dase
def test_gpqa_w4_partition_and_routing_gap():
    from bda_jax.datasets import recover_dase_gold
    gold = recover_dase_gold(DASE, "gpqa")
    records = replay_history(DASE / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl",
                             empty_g=0.5)
    part = commit_partition(records, gold, "gpqa")
    # denominator: every problem of the bucket (unrecovered gold counts as wrong)
    assert part["right_wall"][:2] == (380, 308) and round(100 * part["right_wall"][2], 1) == 81.1
    assert part["left_wall"][:2] == (142, 59) and round(100 * part["left_wall"][2], 1) == 41.5
    assert part["fallback"][:2] == (24, 15) and round(100 * part["fallback"][2], 1) == 62.5
    assert part["overall"][:2] == (546, 382) and round(100 * part["overall"][2], 1) == 70.0
    gap = routing_gap(jax.random.key(0), records, gold, "gpqa", versus="left_wall", n_boot=500)
    assert round(100 * gap["gap"], 1) == 39.5 and gap["low"] < gap["gap"] < gap["high"]
    assert gap["coverage"] == pytest.approx(380 / 546)
    curve = accuracy_coverage(records, gold, "gpqa")
    assert curve["coverage"][-1] == pytest.approx(380 / 546)
    assert curve["accuracy"][-1] == pytest.approx(308 / 380)
    assert np.all(np.diff(curve["coverage"]) >= 0)


@needs_dase
def test_resimulation_smaller_arena_from_w8():
    path = DASE / "safe_DASE_Bellman_History_8_alpha0_2.jsonl"
    recorded = replay_history(path, empty_g=0.5)
    sims = resimulate(path, [2, 4, 8], empty_g=0.5)
    assert [r.commit for r in sims[8]] == [r.commit for r in recorded]
    for W in (2, 4):
        assert not any(r.truncated for r in sims[W])
        assert all(s.steps <= r.steps for s, r in zip(sims[W], recorded))
    with pytest.raises(DataError, match="exceeds the recorded"):
        resimulate(DASE / "safe_DASE_Bellman_History_4_alpha0_2.jsonl", [8])


# ----------------------------------------------------------------------------- functional layer
def test_step_functions_scanned_by_hand_match_the_batched_rules(rng):
    """The public per-round steps, scanned over one problem, are what the batched rules run."""
    problems = random_problems(rng, 6, ragged=False)
    enc = encode_answers(problems)
    R, n = enc.ids.shape[1:]
    active = jnp.ones(R, bool)
    last = jnp.arange(R) == R - 1
    cases = [(spatial_step, ArenaParams(jnp.int32(3), jnp.float32(0.5), jnp.float32(0.2),
                                        jnp.float32(0.01)), spatial_rule(enc.ids, enc.mask, 3,
                                                                         empty_g=0.5)),
             (heuristic_step, HeuristicParams(jnp.int32(2)), heuristic_rule(enc.ids, enc.mask, 2))]
    for step, params, batched in cases:
        for b in range(len(problems)):
            state, (g, x, winner) = jax.lax.scan(
                lambda s, xs, step=step, params=params: step(params, s, *xs),
                init_rule_state(R * n), (enc.ids[b], active, last))
            assert isinstance(state, RuleState)
            assert (int(state.commit), int(state.answer), int(state.t)) == (
                int(batched.commit[b]), int(batched.answer[b]), int(batched.steps[b]))
            np.testing.assert_array_equal(np.asarray(x), np.asarray(batched.x[b]))


def test_replay_summary_of_a_bundled_excerpt(tmp_path):
    path = BUNDLED / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.head50.jsonl"
    s = replay_summary(path, empty_g=0.5, n_boot=50)
    assert [(row["commit"], row["n"]) for row in s.partition] == [
        ("right_wall", 38), ("left_wall", 10), ("fallback", 2), ("overall", 50)]
    assert s.settings == {"rule": "spatial", "W": 4, "k": None, "L": None, "empty_g": 0.5}
    assert s.n_problems == len(s.problems) == 50 and s.notes == [] and s.n_gold > 0
    assert all("accuracy" in row for row in s.partition)
    assert s.routing_gap["n_boot"] <= 50
    known = [p for p in s.problems if p["correct"] is not None]
    assert len(known) <= s.n_gold and all(isinstance(p["correct"], bool) for p in known)
    assert list(s.to_json()) == ["file", "benchmark", "settings", "n_problems", "n_gold",
                                 "partition", "routing_gap", "problems", "notes"]
    # no gold: no accuracy, no gap; a mapping is used as given
    bare = replay_summary(path, empty_g=0.5, gold=False)
    assert bare.n_gold is None and bare.routing_gap is None
    assert all("accuracy" not in row for row in bare.partition)
    assert {p["correct"] for p in bare.problems} == {None}
    one = replay_summary(path, empty_g=0.5, gold={1: "C"}, n_boot=20)
    assert one.n_gold == 1 and [p["correct"] for p in one.problems if p["idx"] == 1] == [True]
    # an unreadable sibling file: gold from the file alone, with a note
    (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "broken.jsonl").write_text("not json\n")
    alone = replay_summary(tmp_path / path.name, empty_g=0.5, n_boot=20)
    assert alone.notes[0].startswith("gold from the file alone") and alone.n_gold > 0
    with pytest.raises(DataError):
        replay_summary(tmp_path / path.name, gold=tmp_path / "broken.jsonl")
