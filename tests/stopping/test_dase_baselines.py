"""SC-k slicing, McNemar + Benjamini-Hochberg and cost accounting for the DASE baselines."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from bda_jax.datasets import load_dase_vote_log
from bda_jax.stopping import (benjamini_hochberg, cost_summary, mcnemar_exact, pairwise_mcnemar,
                              sc_k_winners)
from reference import SHARED_DATA

DASE = SHARED_DATA / "dase_council_traces"


def test_sc_k_slicing_ties_first_seen_and_empties_skipped():
    votes = [["B", None, "A", "A", "B", "C"],
             [None, None, "X", "Y", "Y", "X"],
             [None] * 6]
    ks, ans = sc_k_winners(votes)
    assert ks.tolist() == [1, 2, 3, 4, 5, 6]
    assert [a[0] for a in ans] == ["B", "B", "B", "A", "B", "B"]   # k=3: B,A tie -> B (first)
    assert [a[1] for a in ans] == [None, None, "X", "X", "Y", "X"]  # k=4: X,Y tie -> X
    assert [a[2] for a in ans] == [None] * 6


def test_mcnemar_hand_counts_and_binomtest():
    a = np.array([1, 1, 1, 1, 0, 0, 1, 0], bool)
    b = np.array([0, 0, 0, 1, 1, 0, 1, 0], bool)
    r = mcnemar_exact(a, b)
    assert (r["a_only"], r["b_only"]) == (3, 1)
    # two-sided exact: P(X<=1)+P(X>=3), X~Bin(4,1/2) = (1+4+4+1)/16
    assert r["p"] == pytest.approx(10 / 16)
    assert r["p"] == pytest.approx(binomtest(3, 4, 0.5).pvalue)
    assert mcnemar_exact(a, a)["p"] == 1.0


def _bh_by_hand(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adj = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p[i] * m / rank)
        adj[i] = running
    return adj


def test_benjamini_hochberg_hand_example():
    p = [0.01, 0.04, 0.03, 0.20]
    # sorted .01,.03,.04,.20 -> .04, .06, .0533, .20 -> monotone: .04, .0533, .0533, .20
    expect = [0.04, 0.16 / 3, 0.16 / 3, 0.20]
    np.testing.assert_allclose(benjamini_hochberg(p), expect)
    np.testing.assert_allclose(benjamini_hochberg(p), _bh_by_hand(p))
    rng = np.random.default_rng(0)
    q = rng.uniform(size=17) ** 3
    np.testing.assert_allclose(benjamini_hochberg(q), _bh_by_hand(list(q)))
    rows = pairwise_mcnemar({"x": np.ones(5, bool), "y": np.zeros(5, bool),
                             "z": np.ones(5, bool)})
    assert [(r["a"], r["b"]) for r in rows] == [("x", "y"), ("x", "z"), ("y", "z")]
    np.testing.assert_allclose([r["p_bh"] for r in rows],
                               _bh_by_hand([r["p"] for r in rows]))


def test_cost_accounting_sums(tmp_path: Path):
    recs = [{"idx": 1, "category": "GPQA (x)", "winner": "A", "acc": 1, "votes": ["A", "empty"],
             "cost": 0.25, "pool_inferences": 5},
            {"idx": 2, "category": "GPQA (x)", "winner": "no_consensus", "acc": 0,
             "votes": ["empty", ""], "cost": 0.5, "pool_inferences": 5}]
    path = tmp_path / "safe_IMSC70_Benchmark_GPQA_Logs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    log = load_dase_vote_log(path)
    assert log.benchmark == "gpqa" and log.winner == ["A", None]
    assert log.votes[1] == [None, None]
    s = cost_summary(log.cost, None, 2 + log.pool_inferences)
    assert s["total_cost"] == pytest.approx(0.75) and s["mean_cost"] == pytest.approx(0.375)
    assert s["total_tokens"] is None and s["total_inferences"] == 14
    s = cost_summary([1.0, np.nan, 2.0], tokens=[10, 20, 30])
    assert s["total_cost"] == 3.0 and s["cost_logged"] == 2 and s["total_tokens"] == 60


@pytest.mark.skipif(not DASE.is_dir(), reason=f"DASE logs not found at {DASE}")
def test_sc70_slice_reproduces_logged_winners():
    log = load_dase_vote_log(DASE / "safe_SC70_Benchmark__qwll_Logs.jsonl")
    _, ans = sc_k_winners(log.votes, [70])
    assert ans[0] == log.winner
