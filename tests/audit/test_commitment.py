"""Routing audit, calibration and commitment axes ([Audit] Tables 2-4, 10-13, 16-17).

Expected values are worked out by hand in the comments, or are the paper's own published counts
rebuilt as arrays; simulated checks draw from generative models written here, never from the
code under test.
"""
import math

import numpy as np
import pytest

from bda_jax import DataError
from bda_jax import audit as A


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# =============================================================================== calibration

def test_calibration_row_hand_example():
    # scores .9, .9, .6, .6 with correctness 1, 0, 1, 0:
    # ECE: bin [.9, 1): acc .5, conf .9, |gap| .4, weight 2/4 -> .20; bin [.6, .7): gap .1 -> .05
    #      total .25
    # Brier: (.1^2 + .9^2 + .4^2 + .6^2) / 4 = (.01 + .81 + .16 + .36) / 4 = .335
    # AUROC: correct {.9, .6} vs wrong {.9, .6}: tie .5 + win 1 + loss 0 + tie .5 = 2 / 4 = .5
    # mean confidence .75, accuracy 2/4
    r = A.calibration_row("raw", [0.9, 0.9, 0.6, 0.6], [1, 0, 1, 0])
    assert r.ece == pytest.approx(0.25, abs=1e-6)
    assert r.brier == pytest.approx(0.335, abs=1e-6)
    assert r.auroc == pytest.approx(0.5)
    assert r.mean_confidence == pytest.approx(0.75)
    assert (r.accuracy, r.n, r.n_correct) == (0.5, 4, 2)
    # AUROC undefined when every candidate is right: None, not NaN (the row is strict JSON)
    assert A.calibration_row("raw", [0.9, 0.8], [1, 1]).auroc is None


def test_scores_on_0_100_scale_and_range_checks():
    a = A.calibration_row("raw", [0.9, 0.9, 0.6, 0.6], [1, 0, 1, 0])
    b = A.calibration_by_group([90, 90, 60, 60], [1, 0, 1, 0], [0, 0, 0, 0], scale=100)[0]
    assert a == b
    with pytest.raises(DataError) as e:
        A.calibration_report([90, 101], [1, 0], [1, 2], [1, 1], scale=100)
    assert e.value.field == "scores"
    with pytest.raises(DataError):
        A.fit_temperature([0.5, float("nan")], [1, 0])


def test_calibration_by_group_hand_example():
    # tier a: conf .9 twice, one right: |.5 - .9| = .4; tier b: conf .5, acc .5: 0
    out = A.calibration_by_group([0.9, 0.9, 0.5, 0.5], [1, 0, 1, 0], ["a", "a", "b", "b"])
    assert out["a"].ece == pytest.approx(0.4, abs=1e-6) and out["a"].n == 2
    assert out["b"].ece == pytest.approx(0.0, abs=1e-6)


def test_folds_grouped_by_problem_and_balanced_within_tier():
    rng = np.random.default_rng(1)
    problem = np.repeat(np.arange(41), rng.integers(1, 6, size=41))
    tier = problem % 3                       # tiers of 14, 14 and 13 problems
    f = A.tier_stratified_folds(problem, tier, n_folds=2, seed=3)
    for p in np.unique(problem):
        assert np.unique(f[problem == p]).size == 1            # a problem never straddles
    fold_of = {p: f[problem == p][0] for p in np.unique(problem)}
    for t in range(3):
        per_fold = np.bincount([fold_of[p] for p in fold_of if p % 3 == t], minlength=2)
        assert abs(per_fold[0] - per_fold[1]) <= 1             # balanced within the tier
    assert np.ptp(np.bincount(list(fold_of.values()))) <= 1
    assert (A.tier_stratified_folds(problem, tier, seed=3) == f).all()     # seeded
    assert not (A.tier_stratified_folds(problem, tier, seed=4) == f).all()
    with pytest.raises(DataError) as e:
        A.tier_stratified_folds([1, 1, 2], [1, 2, 2])          # problem 1 under two tiers
    assert e.value.field == "tier"


def test_temperature_hand_example():
    # every score .9, accuracy 3/4: the NLL optimum maps .9 to .75 exactly, so
    # T = logit(.9) / logit(.75) = log 9 / log 3 = 2
    assert A.fit_temperature([0.9] * 4, [1, 1, 1, 0]) == pytest.approx(2.0, rel=1e-6)
    # apply: logit(.9) / 2 = log 3 -> .75; .5 stays .5
    assert A.apply_temperature([0.5, 0.9], 2.0).tolist() == pytest.approx([0.5, 0.75])
    # exact 0 and 1 are clipped to [1e-6, 1 - 1e-6] before the logit: finite, order kept
    p = A.apply_temperature([0.0, 1.0], 4.0)
    assert np.isfinite(p).all() and 0 < p[0] < 0.5 < p[1] < 1


def test_temperature_recovers_a_known_temperature():
    # truth: P(correct) = sigmoid(z); the agent reports sigmoid(3 z): logits three times too large
    rng = np.random.default_rng(7)
    z = rng.normal(0.0, 1.5, size=20_000)
    y = (rng.random(z.size) < sigmoid(z)).astype(int)
    t = A.fit_temperature(sigmoid(3.0 * z), y)
    assert t == pytest.approx(3.0, rel=0.05)


def test_isotonic_hand_examples():
    # PAV: 0, 1, 0, 1 -> the violating middle pair pools to (1 + 0) / 2
    f = A.fit_isotonic([0.8, 0.2, 0.6, 0.4], [1, 0, 0, 1])
    assert f.x.tolist() == [0.2, 0.4, 0.6, 0.8] and f.y.tolist() == [0.0, 0.5, 0.5, 1.0]
    # ties pooled first: score .5 has mean 1/2 (weight 2), .7 has 0 -> violation -> weighted pool
    # (2 * 1/2 + 1 * 0) / 3 = 1/3 on both knots
    g = A.fit_isotonic([0.5, 0.5, 0.7], [1, 0, 0])
    assert g.y.tolist() == pytest.approx([1 / 3, 1 / 3])
    # linear interpolation between knots (.3 -> halfway between 0 and .5), clipped outside
    assert A.apply_isotonic(f, [0.1, 0.3, 0.9]).tolist() == pytest.approx([0.0, 0.25, 1.0])


def test_cross_fitted_isotonic_fixes_overconfidence_but_not_ranking():
    # 800 problems in 4 tiers; candidate correctness ~ Bernoulli(q), q from problem difficulty and
    # candidate skill; the stated score (integer 0-100, as in the audited logs) is q pushed
    # toward 1 (over-confident) plus noise: it ranks candidates but overstates them.
    rng = np.random.default_rng(11)
    n_prob, per = 800, 4
    problem = np.repeat(np.arange(n_prob), per)
    tier = problem % 4
    logit_q = 1.0 - 0.6 * tier + rng.normal(0, 1.0, problem.size)
    q = sigmoid(logit_q)
    correct = (rng.random(q.size) < q).astype(int)
    scores = np.clip(np.round(100 * sigmoid(logit_q + 2.0 + rng.normal(0, 0.5, q.size))), 0, 100)
    rep = A.calibration_report(scores, correct, problem, tier, scale=100, seed=0)
    raw, temp, iso = rep.row("raw"), rep.row("temperature"), rep.row("isotonic")
    assert raw.mean_confidence - raw.accuracy > 0.2          # over-confident by construction
    assert iso.ece < 0.03 < 0.2 < raw.ece
    assert temp.ece < raw.ece and temp.mean_confidence < raw.mean_confidence
    assert abs(iso.auroc - raw.auroc) < 0.01
    assert iso.brier < raw.brier
    assert len(rep.temperatures) == 2 and all(t > 1 for t in rep.temperatures)
    assert raw.n == iso.n == q.size
    # held-out means held out: each fold's predictions come from a map fit on the other fold
    k0 = rep.folds == 0
    own = A.apply_isotonic(A.fit_isotonic(scores[~k0], correct[~k0], scale=100), scores[k0],
                           scale=100)
    assert np.allclose(rep.calibrated["isotonic"][k0], own)


# =============================================================================== commitment

def test_commitment_metrics_hand_example():
    # pair  poll  spoken  poll_ok spoken_ok  notes
    #  0    "1"   "1"     1       1          same answer
    #  1    "2"   "9"     0       1          divergent, improves
    #  2    "3"   "8"     1       0          divergent, degrades
    #  3    "4"   "7"     0       0          divergent, stays wrong
    #  4    "5"   "6"     1       1          judge says equivalent (e.g. 5 == 5.0): not divergent
    #  5    "6"   None    1       nan        speak not parsed: invalid, left out
    #  6    "7"   "x"     0       1          divergent, improves
    # valid = {0,1,2,3,4,6} = 6; divergent = {1,2,3,6} = 4; improvements {1,6} = 2;
    # degradations {2} = 1
    # PSDR 4/6; PSIR 2/4; PSDRg 1/4; NPCS|D (2 - 1)/4 = .25; rates 2/6, 1/6;
    # unconditional shift: sum(spoken - poll) over valid = 0 + 1 - 1 + 0 + 0 + 1 = 1 -> 1/6
    m = A.commitment_metrics(["1", "2", "3", "4", "5", "6", "7"],
                             ["1", "9", "8", "7", "6", None, "x"],
                             [1, 0, 1, 0, 1, 1, 0], [1, 1, 0, 0, 1, np.nan, 1],
                             equivalent=[None, None, None, None, True, None, False])
    assert (m.n_pairs, m.n_valid, m.n_divergent) == (7, 6, 4)
    assert m.psdr == (4 / 6, 4, 6)
    assert m.psir == (0.5, 2, 4) and m.psdrg == (0.25, 1, 4)
    assert m.npcs_d == (0.25, 1, 4)
    assert m.improvement_rate == (2 / 6, 2, 6) and m.degradation_rate == (1 / 6, 1, 6)
    assert m.unconditional_shift == (1 / 6, 1, 6)
    assert m.poll_accuracy == (3 / 6, 3, 6) and m.spoken_accuracy == (4 / 6, 4, 6)
    assert m.n_nondivergent_discordant == 0
    # the identity behind the paper's -1.7 pp: unconditional shift = PSDR x NPCS|D
    assert m.unconditional_shift.value == pytest.approx(m.psdr.value * m.npcs_d.value)
    assert {e["name"] for e in m.entries()} >= {"psdr", "psir", "psdrg", "npcs_d"}


def test_divergence_rules():
    poll, spoken = ["5", "5", "a"], ["5.0", "5", "A"]
    eq = [True, False, None]
    # residual (default): string-equal never diverges; string-different unless judged equivalent
    assert A.divergence(poll, spoken, equivalent=eq).tolist() == [False, False, True]
    # string: the judge is ignored
    assert A.divergence(poll, spoken, equivalent=eq, rule="string").tolist() == [True, False, True]
    # label: a verdict overrides even string equality (pair 1)
    assert A.divergence(poll, spoken, equivalent=eq, rule="label").tolist() == [False, True, True]
    # a normalizer decides string equality ("a" == "A" after casefold)
    assert A.divergence(poll, spoken, normalize=str.casefold).tolist() == [True, False, False]
    with pytest.raises(DataError) as e:
        A.divergence(poll, spoken, rule="judge")
    assert e.value.field == "rule"


def test_valid_mask_is_checked():
    # an explicit valid mask can drop pairs, but cannot admit a pair without a label
    m = A.commitment_metrics(["1", "2"], ["1", "3"], [1, 0], [1, 1], valid=[True, False])
    assert m.psdr == (0.0, 0, 1)
    with pytest.raises(DataError) as e:
        A.commitment_metrics(["1", "2"], ["1", None], [1, 0], [1, 1], valid=[True, True])
    assert e.value.field == "valid"


def test_nondivergent_discordance_is_counted_not_hidden():
    # the judge calls "5" and "five" equivalent but the labels disagree: the literal
    # unconditional shift sees +1, the PSDR x NPCS|D identity does not
    m = A.commitment_metrics(["5"], ["five"], [0], [1], equivalent=[True])
    assert m.n_divergent == 0 and m.unconditional_shift == (1.0, 1, 1)
    assert m.n_nondivergent_discordant == 1


def test_commitment_by_tier_hand_example():
    # tier 1: pairs (a->a), (b->x: 1 -> 0): PSDR 1/2, PSDRg 1/1, NPCS|D -1/1
    # tier 2: pairs (c->c), (d->y: 0 -> 1), (e->z: 0 -> 0): PSDR 2/3, PSIR 1/2, NPCS|D +1/2
    out = A.commitment_by_group([1, 1, 2, 2, 2], ["a", "b", "c", "d", "e"],
                                ["a", "x", "c", "y", "z"], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0])
    assert out[1].psdr == (0.5, 1, 2) and out[1].psdrg == (1.0, 1, 1)
    assert out[1].npcs_d == (-1.0, -1, 1)
    assert out[2].psdr == (2 / 3, 2, 3) and out[2].psir == (0.5, 1, 2)
    assert out[2].npcs_d == (0.5, 1, 2)


def test_divergence_sources_hand_example():
    # event poll spoken own-earlier  incumbent peers-before  flags          primary
    #  0    "1"  "7"    ["7"]        "7"       ["7"]         self,inc,peer  self_revert
    #  1    "1"  "8"    []           "8"       ["8"]         inc,peer       incumbent_pull
    #  2    "1"  "9"    ["3"]        "2"       ["9"]         peer           peer_echo
    #  3    "1"  "6"    []           None      []            -              novel
    #  4    "1"  "1"    ["1"]        "1"       ["1"]         (not divergent)
    # correctness poll -> spoken: 1->0, 0->1, 0->0, 1->0, 1->1
    # primary Δ correct: self -1/1, incumbent +1/1, peer 0/1, novel -1/1
    s = A.divergence_sources(["1"] * 5, ["7", "8", "9", "6", "1"], [1, 0, 0, 1, 1],
                             [0, 1, 0, 0, 1], [["7"], [], ["3"], [], ["1"]],
                             ["7", "8", "2", None, "1"], [["7"], ["8"], ["9"], [], ["1"]])
    assert s.n_divergent == 4
    assert [s.classes[k] if k >= 0 else None for k in s.primary] == \
        ["self_revert", "incumbent_pull", "peer_echo", "novel", None]
    assert s.flags["self_revert"].tolist() == [True, False, False, False, False]
    assert s.flags["incumbent_pull"].tolist() == [True, True, False, False, False]
    assert s.flags["peer_echo"].tolist() == [True, True, True, False, False]
    prim = {r.name: r for r in s.primary_table}
    assert prim["self_revert"].share == (0.25, 1, 4)
    assert prim["self_revert"].delta_correct == (-1.0, -1, 1)
    assert prim["incumbent_pull"].delta_correct == (1.0, 1, 1)
    assert prim["peer_echo"].delta_correct == (0.0, 0, 1)
    assert prim["novel"].delta_correct == (-1.0, -1, 1)
    flag = {r.name: r.share for r in s.flag_table}       # overlapping: 1 + 2 + 3 + 1 > 4
    assert flag == {"self_revert": (0.25, 1, 4), "incumbent_pull": (0.5, 2, 4),
                    "peer_echo": (0.75, 3, 4), "novel": (0.25, 1, 4)}
    # another precedence re-attributes the overlap: peer-echo first takes events 0-2
    s2 = A.divergence_sources(["1"] * 5, ["7", "8", "9", "6", "1"], [1, 0, 0, 1, 1],
                              [0, 1, 0, 0, 1], [["7"], [], ["3"], [], ["1"]],
                              ["7", "8", "2", None, "1"], [["7"], ["8"], ["9"], [], ["1"]],
                              precedence=("peer_echo", "self_revert", "incumbent_pull"))
    assert [r.share.numerator for r in s2.primary_table] == [3, 0, 0, 1]
    with pytest.raises(DataError):
        A.divergence_sources(["1"], ["2"], [1], [0], [[]], [None], [[]],
                             precedence=("self_revert", "novel", "peer_echo"))


def _paper_cell():
    """The gpt-oss/math commitment cell rebuilt from the published counts.

    9,436 valid selected pairs, 1,927 divergent (PSDR .204, abstract and Table 6). Primary
    classes (Table 3): self-revert 367, incumbent-pull 120, peer-echo 238, novel 1,202, with
    correctness changes -11.4, +1.7, -5.0, -9.1 pp. Each printed change pins the class's net
    count N x delta: 367 x -.114 = -41.8 -> -42 (the only integer printing -11.4 over 367),
    120 x .017 -> +2, 238 x -.050 -> -12, 1,202 x -.091 -> -109; net -161 (-161 / 9,436 =
    -1.7 pp). Overlapping flags (Table 13): incumbent 224 = 120 + 104 self-reverts that also
    match the incumbent; peer 550 = 238 + 200 self-reverts + 112 incumbent-pulls that a peer
    also said. The split of each net into improvements and degradations is NOT published; the
    one used here, (20, 62), (12, 10), (30, 42), (273, 382), is a construction (any split with
    the same nets would do). Table 17's PSIR .174 / PSDRg .257 belong to another population
    (tiers 02-09) and are checked separately.
    """
    poll, spoken, pc, sc, own, inc, peers = [], [], [], [], [], [], []

    def add(n, spoken_kind, n_up, n_down, also_inc=0, also_peer=0):
        for k in range(n):
            i = len(poll)
            p, s = f"p{i}", f"s{i}"
            poll.append(p)
            spoken.append(s)
            if k < n_up:
                pc.append(0), sc.append(1)
            elif k < n_up + n_down:
                pc.append(1), sc.append(0)
            else:
                pc.append(0), sc.append(0)
            own.append([s] if spoken_kind == "self" else ["other"])
            inc_match = spoken_kind == "inc" or (spoken_kind == "self" and k < also_inc)
            inc.append(s if inc_match else "inc")
            peer_match = spoken_kind == "peer" or k >= n - also_peer
            peers.append([s, "q"] if peer_match else ["q"])

    add(367, "self", 20, 62, also_inc=104, also_peer=200)
    add(120, "inc", 12, 10, also_peer=112)
    add(238, "peer", 30, 42)
    add(1202, "novel", 273, 382)
    for i in range(9436 - 1927):                  # non-divergent: poll == spoken
        a = f"n{i}"
        poll.append(a), spoken.append(a)
        ok = int(i % 2 == 0)
        pc.append(ok), sc.append(ok)
        own.append([]), inc.append(None), peers.append([])
    return poll, spoken, pc, sc, own, inc, peers


def test_paper_arithmetic_psdr_npcs_and_sources():
    poll, spoken, pc, sc, own, inc, peers = _paper_cell()
    m = A.commitment_metrics(poll, spoken, pc, sc)
    assert (m.psdr.numerator, m.psdr.denominator) == (1927, 9436)
    assert round(m.psdr.value, 3) == 0.204
    # only the net is pinned by the paper (Table 3: -42 + 2 - 12 - 109 = -161); NPCS|D's
    # numerator is improvements - degradations, whatever the (constructed) split
    assert m.npcs_d.numerator == m.psir.numerator - m.psdrg.numerator == -161
    assert m.npcs_d.value == pytest.approx(m.psir.value - m.psdrg.value, abs=1e-15)
    # the abstract's unconditional shift: -161 / 9,436 = -1.7 pp
    assert m.unconditional_shift[1:] == (-161, 9436)
    assert round(100 * m.unconditional_shift.value, 1) == -1.7
    s = A.divergence_sources(poll, spoken, pc, sc, own, inc, peers)
    prim = {r.name: r for r in s.primary_table}
    # Table 3: N, % of divergent, Δ correct (pp)
    expect = {"self_revert": (367, 19.0, -11.4), "incumbent_pull": (120, 6.2, 1.7),
              "peer_echo": (238, 12.4, -5.0), "novel": (1202, 62.4, -9.1)}
    for name, (n, pct, dpp) in expect.items():
        r = prim[name]
        assert r.share.numerator == n and r.share.denominator == 1927
        assert round(100 * r.share.value, 1) == pct
        assert round(100 * r.delta_correct.value, 1) == dpp
    # Table 13: overlapping flags
    flags = {r.name: (r.share.numerator, round(100 * r.share.value, 1)) for r in s.flag_table}
    assert flags == {"self_revert": (367, 19.0), "incumbent_pull": (224, 11.6),
                     "peer_echo": (550, 28.5), "novel": (1202, 62.4)}


def _variant(n_valid, n_div, n_up, n_down):
    """n_valid valid pairs, n_div of them divergent: n_up improve (0 -> 1), n_down degrade
    (1 -> 0), the other divergent pairs stay wrong; non-divergent pairs say their poll answer."""
    poll, spoken, pc, sc = [], [], [], []
    for i in range(n_valid):
        poll.append(f"p{i}")
        spoken.append(f"s{i}" if i < n_div else f"p{i}")
        up, down = i < n_up, n_up <= i < n_up + n_down
        pc.append(1 if down or (i >= n_div and i % 2) else 0)
        sc.append(1 if up or (i >= n_div and i % 2) else 0)
    return A.commitment_metrics(poll, spoken, pc, sc)


@pytest.mark.parametrize("n_div, n_up, n_down, printed", [
    # Table 17, 9,263 valid pairs of tiers 02-09; (PSDR, PSIR, PSDRg, NPCS|D) as printed.
    # gpt-oss: 1,921 / 9,263 = .2074; 334 / 1,921 = .1739; 494 / 1,921 = .2572;
    # -160 / 1,921 = -.0833. (334, 493) and (335, 494) print the same three decimals too:
    # the table pins the decimals, not the integers; these are one consistent choice.
    (1921, 334, 494, (0.207, 0.174, 0.257, -0.083)),
    # gemma-4-31B-it: 2,418 / 9,263 = .2610; 318 / 2,418 = .1315; 465 / 2,418 = .1923;
    # -147 / 2,418 = -.0608 (the only integer pair printing all three)
    (2418, 318, 465, (0.261, 0.132, 0.192, -0.061)),
    # gemma-4-E4B-it: 2,537 / 9,263 = .2739; 319 / 2,537 = .1257; 472 / 2,537 = .1860;
    # -153 / 2,537 = -.0603 (one of five integer pairs printing all three)
    (2537, 319, 472, (0.274, 0.126, 0.186, -0.060)),
])
def test_table17_variants_through_commitment_metrics(n_div, n_up, n_down, printed):
    m = _variant(9263, n_div, n_up, n_down)
    assert m.psdr[1:] == (n_div, 9263)
    assert m.psir[1:] == (n_up, n_div) and m.psdrg[1:] == (n_down, n_div)
    assert m.npcs_d[1:] == (n_up - n_down, n_div)
    got = tuple(round(r.value, 3) for r in (m.psdr, m.psir, m.psdrg, m.npcs_d))
    assert got == printed
    # the identity behind the table's columns: NPCS|D = PSIR - PSDRg exactly
    assert m.npcs_d.value == pytest.approx(m.psir.value - m.psdrg.value, abs=1e-15)


# =============================================================================== regressions

def _clustered_logit_data(rng, G=300, m=10, rho=0.5, beta=(-0.5, 1.2)):
    """Binary outcomes with an exactly logistic margin and within-cluster correlation.

    x is a cluster-level predictor; with probability rho a unit copies its cluster's shared draw
    (Bernoulli(p(x))), else it draws its own: P(y = 1 | x) = p(x) either way, and two units of a
    cluster are correlated (rho^2 of them share a draw)."""
    x_g = rng.normal(size=G)
    p_g = sigmoid(beta[0] + beta[1] * x_g)
    shared = rng.random(G) < p_g
    cl = np.repeat(np.arange(G), m)
    own = rng.random(G * m) < p_g[cl]
    copy = rng.random(G * m) < rho
    y = np.where(copy, shared[cl], own).astype(int)
    return y, x_g[cl], cl


def test_cluster_logit_recovers_coefficient_and_widens_se():
    rng = np.random.default_rng(5)
    y, x, cl = _clustered_logit_data(rng)
    fit = A.cluster_logit(y, {"x": x}, cl)
    t = fit.term("x")
    assert (fit.n, fit.n_clusters, fit.n_events) == (3000, 300, int(y.sum()))
    assert abs(t.coef - 1.2) < 3 * t.se
    assert abs(fit.term("intercept").coef + 0.5) < 3 * fit.term("intercept").se
    assert t.se > 1.5 * t.naive_se                # correlated clusters: robust SE is wider
    assert t.ci_low < t.coef < t.ci_high and t.odds_ratio == pytest.approx(math.exp(t.coef))
    assert 0 < fit.pseudo_r2 < 1 and fit.converged
    # independent units (rho = 0): robust and naive SEs agree closely
    y0, x0, cl0 = _clustered_logit_data(np.random.default_rng(6), rho=0.0)
    t0 = A.cluster_logit(y0, {"x": x0}, cl0).term("x")
    assert t0.se == pytest.approx(t0.naive_se, rel=0.25)


def test_standardized_and_fixed_effect_designs():
    rng = np.random.default_rng(2)
    n = 600
    x = rng.normal(3.0, 2.0, n)
    agent = rng.choice(["a", "b", "c"], n)
    eta = -1 + 0.5 * x + np.where(agent == "b", 0.7, 0.0)
    y = (rng.random(n) < sigmoid(eta)).astype(int)
    cols = {"x": x, **A.fixed_effects(agent, prefix="agent=")}
    raw = A.cluster_logit(y, cols, np.arange(n) // 3)
    z = A.outcome_linkage(y, {"x": x}, np.arange(n) // 3)           # z-scored by default
    z2 = A.cluster_logit(y, {"x": x}, np.arange(n) // 3, standardize=["x"])
    assert z.standardized == ("x",) and z.term("x").coef == pytest.approx(z2.term("x").coef)
    per_sd = A.cluster_logit(y, {"x": x}, np.arange(n) // 3).term("x").coef * x.std()
    assert z.term("x").coef == pytest.approx(per_sd, rel=1e-6)       # OR per SD
    assert [t.name for t in raw.terms] == ["intercept", "x", "agent=b", "agent=c"]
    adopt = A.adoption_logit(y, cols, np.arange(n) // 3)             # raw coefficients
    assert adopt.term("x").coef == pytest.approx(raw.term("x").coef)
    with pytest.raises(DataError) as e:                              # all three dummies + const
        dummies = {f"agent={a}": (agent == a).astype(float) for a in "abc"}
        A.cluster_logit(y, {"x": x, **dummies}, np.arange(n))
    assert e.value.field == "X"
    with pytest.raises(DataError) as e:
        A.cluster_logit(y, {"x": x}, np.zeros(n))
    assert e.value.field == "clusters"


# =============================================================================== judges

def test_kappa_hand_example():
    # 10 pairs, confusion [[4, 1], [1, 4]] (rows judge 1 div/equ, columns judge 2):
    # p_o = 8/10; marginals 5/10 each, p_e = .5*.5 + .5*.5 = .5; kappa = (.8 - .5) / .5 = .6
    j1 = ["div"] * 5 + ["equ"] * 5 + [None]
    j2 = ["div"] * 4 + ["equ", "div"] + ["equ"] * 4 + ["div"]      # last pair undecided
    k = A.cohens_kappa(j1, j2, labels=("div", "equ"))
    assert k.n == 10 and k.agreement == (0.8, 8, 10)
    assert k.expected_agreement == pytest.approx(0.5)
    assert k.kappa == pytest.approx(0.6)
    assert k.confusion.tolist() == [[4, 1], [1, 4]]


@pytest.mark.parametrize("cells, kappa, agree", [((1776, 311, 62, 1899), 0.816, 0.908),
                                                 ((1670, 433, 68, 1774), 0.748, 0.873)])
def test_kappa_reproduces_table16(cells, kappa, agree):
    dd, de, ed, ee = cells
    j1 = [True] * (dd + de) + [False] * (ed + ee)
    j2 = [True] * dd + [False] * de + [True] * ed + [False] * ee
    k = A.cohens_kappa(j1, j2, labels=(True, False))
    assert tuple(k.confusion.ravel()) == cells and k.n == sum(cells)
    assert round(k.kappa, 3) == kappa and round(k.agreement.value, 3) == agree
