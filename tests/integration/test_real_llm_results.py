"""Issue-5 claim on the real DASE GPQA logs (about 15 s; skipped where ../shared/data is absent).

The final-round vote fraction is computed here from the raw history file with the standard
library, independently of the importer and the tally."""
import collections
import json
import warnings

import numpy as np
import pytest
from reference import SHARED_DATA

import bda_jax as bda
from bda_jax.datasets import load_dase_history, recover_dase_gold

DASE = SHARED_DATA / "dase_council_traces"
GPQA = DASE / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl"

pytestmark = pytest.mark.skipif(not GPQA.exists(), reason=f"shared data absent: {GPQA}")


def final_round_brier(gold):
    """Multiclass Brier of the last logged round's A-D vote fractions, from the raw file."""
    scores = []
    with open(GPQA, encoding="utf-8") as handle:
        for line in handle:
            rec = json.loads(line)
            if rec["idx"] not in gold:
                continue
            letters = [[str(a).strip().upper() for a in step["norms"]
                        if str(a).strip().upper() in ("A", "B", "C", "D")]
                       for step in rec["history"]]
            votes = collections.Counter([v for v in letters if v][-1])
            n = sum(votes.values())
            p = np.array([votes[c] / n for c in "ABCD"])
            y = np.array([c == gold[rec["idx"]] for c in "ABCD"], float)
            scores.append(((p - y) ** 2).sum())
    return float(np.mean(scores)), len(scores)


def test_tempered_bda_is_calibrated_and_beats_the_final_round_vote():
    gold = recover_dase_gold(DASE, "gpqa")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traces = [t for t in load_dase_history(GPQA, gold) if t.gold is not None]
    ev = bda.evaluate(traces, ["bda-tempered"], folds=5, seed=0, n_resamples=200)
    row = {r["arm"]: r for r in ev.table}["bda-tempered"]
    vote_brier, n = final_round_brier(gold)
    assert n == len(traces) == 444
    assert row["ece_ew"] <= 0.05
    assert row["brier_mc"] < vote_brier - 0.02        # 0.220 against 0.266 when written
