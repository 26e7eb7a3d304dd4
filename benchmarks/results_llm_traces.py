"""Results on real LLM ensemble and debate traces (docs/results-llm-traces.md): every BDA arm and
baseline ([BDA] Appendix B) under
5-fold cross-validation (grouped by problem), against the final-round vote fraction and, on the
DASE logs, DASE's own commit.

Data (read in place from ../shared/data or $BDA_SHARED_DATA; not bundled):
* DASE GPQA, W = 4 spatial run (546 problems, K = 4 letters; gold recovered for 444 from the
  logs' correctness flags), side by side on four bases: every answer a proposal, typed moves
  (concede / retract derived from answer revisions), typed with one vote per round (re-proposals
  dropped), and round 0 only;
* DASE AIME, W = 8 spatial run (100 problems, open numeric answers; gold recovered for 91);
* Du et al. GSM8K (100 problems) and the four arithmetic runs (4 x 100), 3 agents x 2 rounds.

Gold is known only where the logs flag some answer correct (DASE) — the labeled subset leans
toward solvable problems, and all metrics are on that subset. Open-answer tasks take the answers
said on the problem as candidates; a problem whose gold nobody said is scored wrong
(``gold_missing``), and the confusion arm, whose rows need a shared label list, runs on GPQA
only.

Run (from the repository root): ``python -m benchmarks.results_llm_traces`` (a few minutes on
2 cores); writes
benchmarks/results/llm_traces.json and docs/results-llm-traces.md.
"""
from __future__ import annotations

import glob
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

import jax

import bda_jax as bda
from bda_jax.datasets import load_dase_history, load_du_debate, recover_dase_gold, shared_data_root
from bda_jax.metrics import summary

ROOT = Path(__file__).resolve().parents[1]

ARMS = ["majority", "bda-shared", "bda-per-agent", "bda-tempered", "stacking", "gated-vote",
        "best-member", "ds-em"]
METRICS = ("accuracy", "ece_ew", "brier_mc", "nll")
# answer sets with coverage 1 - SET_ALPHA (split conformal, LAC), calibrated on each outer fold's
# training labels (docs/answer-sets.md): empirical coverage and mean set size per arm
SET_ALPHA = 0.1
SET_METRICS = ("coverage", "mean_set_size")


def final_round(traces):
    """Each trace cut to the proposals of its own last round (the "proposals" mapping)."""
    out = []
    for t in traces:
        last = max(m.round for m in t.moves)
        out.append(bda.Trace(t.task_id, tuple(m for m in t.moves if m.round == last),
                             t.candidates, t.gold, t.cluster))
    return out


def reference_rows(traces, counts, proposals):
    """Final-round vote fraction (read from the ``proposals`` mapping of the same logs), and
    DASE's commit where the traces carry it."""
    last = bda.tally(final_round(proposals), agents=counts.agents)      # same candidates
    rows = {"final-round vote": bda.majority(jax.random.key(0), last, rounds="all").proba}
    commits = [((t.extra.get("dase") or {}).get("cert") or {}).get("consensus") for t in traces]
    if all(c is not None for c in commits):
        onehot = np.zeros(np.shape(counts.mask), np.float32)
        for j, (c, cands) in enumerate(zip(commits, counts.candidates)):
            normalized = [bda.default_normalizer(x) for x in cands]
            key = bda.default_normalizer(str(c))
            if key in normalized:
                onehot[j, normalized.index(key)] = 1.0
            else:                                 # committed to an answer not on the list
                onehot[j, : len(cands)] = 1.0 / len(cands)
        rows["DASE commit"] = onehot
    return {name: summary(p, counts.gold, counts.gold_missing, counts.mask,
                          key=jax.random.key(0)) for name, p in rows.items()}


def run_set(name, traces, arms, proposals=None, **tally_options):
    """Evaluate ``arms`` on the labeled traces (tallied with ``tally_options``); ``proposals``:
    the same logs in the proposals mapping (default: ``traces``) for the final-round vote."""
    keep = [j for j, t in enumerate(traces) if t.gold is not None]
    proposals = [(proposals or traces)[j] for j in keep]
    traces = [traces[j] for j in keep]
    counts = bda.tally(traces, **tally_options)
    t0 = time.time()
    ev = bda.evaluate(counts, arms, folds=5, seed=0, n_resamples=1000, set_alpha=SET_ALPHA)
    rows = [{"arm": r["arm"], **{m: r[m] for m in METRICS + SET_METRICS}, "n": r["n"]}
            for r in ev.table]
    for arm, s in reference_rows(traces, counts, proposals).items():
        rows.append({"arm": arm, **{m: s[m] for m in METRICS}, "n": s["n"]})
    boot = {a: {k: ev.bootstrap[a][k] for k in ("accuracy", "brier_mc")}
            for a in ev.bootstrap}
    print(f"{name}: {len(traces)} labeled tasks, {time.time() - t0:.0f} s", flush=True)
    return {"n_tasks": len(traces), "agents": list(counts.agents), "rows": rows,
            "bootstrap_vs_majority": boot, "seconds": time.time() - t0}


def main():
    root = shared_data_root(None)
    t_start = time.time()
    dase = root / "dase_council_traces"
    out = {"schema_version": 1, "platform": {
        "python": platform.python_version(), "jax": jax.__version__,
        "backend": jax.default_backend(), "cpus": os.cpu_count()}, "sets": {}}
    warnings.simplefilter("ignore", bda.datasets.ParseWarning)
    gpqa_gold = recover_dase_gold(dase, "gpqa")
    aime_gold = recover_dase_gold(dase, "aime")
    gpqa = {moves: load_dase_history(dase / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl",
                                     gpqa_gold, moves=moves) for moves in ("proposals", "typed")}
    gpqa["typed, one vote per round"] = load_dase_history(
        dase / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl", gpqa_gold, moves="typed",
        one_vote_per_round=True)
    for moves, traces in gpqa.items():
        out["sets"][f"DASE GPQA W=4 ({moves})"] = run_set(
            f"gpqa {moves}", traces, ARMS + ["bda-confusion"], proposals=gpqa["proposals"])
    out["sets"]["DASE GPQA W=4 (round 0 only)"] = run_set(
        "gpqa round 0", gpqa["proposals"], ARMS + ["bda-confusion"], max_round=0)
    aime = load_dase_history(dase / "safe_DASE_Bellman_History_8_alpha0_2.jsonl", aime_gold)
    out["sets"]["DASE AIME W=8 (proposals)"] = run_set("aime", aime, ARMS)
    du = root / "du2023_debate_gsm_gpt35" / "gsm_3_2_100.json"
    out["sets"]["Du GSM8K (proposals)"] = run_set("du gsm", load_du_debate(du)[0], ARMS)
    arithmetic = []
    for path in sorted(glob.glob(str(root / "du2023_debate_arithmetic_gpt35" / "*.json"))):
        arithmetic += load_du_debate(path)[0]
    ids = [t.task_id for t in arithmetic]
    if len(set(ids)) != len(ids):                 # four runs of the same generator: keep apart
        arithmetic = [bda.Trace(f"run{j // 100}-{t.task_id}", t.moves, t.candidates, t.gold,
                                f"run{j // 100}-{t.cluster or t.task_id}")
                      for j, t in enumerate(arithmetic)]
    out["sets"]["Du arithmetic, 4 runs (proposals)"] = run_set("du arithmetic", arithmetic, ARMS)
    out["elapsed_s"] = time.time() - t_start

    gq = out["sets"]["DASE GPQA W=4 (proposals)"]["rows"]
    row = {r["arm"]: r for r in gq}
    out["done_when"] = {
        "tempered_ece_ew": row["bda-tempered"]["ece_ew"],
        "tempered_ece_ew_le_0.05": row["bda-tempered"]["ece_ew"] <= 0.05,
        "tempered_brier": row["bda-tempered"]["brier_mc"],
        "final_round_vote_brier": row["final-round vote"]["brier_mc"],
        "tempered_brier_beats_final_round_vote":
            row["bda-tempered"]["brier_mc"] < row["final-round vote"]["brier_mc"]}
    res = ROOT / "benchmarks" / "results" / "llm_traces.json"
    res.write_text(json.dumps(out, indent=1, allow_nan=False))

    f3 = lambda x: "—" if x is None else f"{x:.3f}"
    md = ["# Real LLM traces: BDA arms and baselines", "",
          f"Generated by `python -m benchmarks.results_llm_traces` ({out['elapsed_s']:.0f} s on "
          f"{os.cpu_count()} CPU cores); numbers in `benchmarks/results/llm_traces.json`. "
          "5 outer folds grouped by problem, every supervised arm fitted leak-free on the other "
          "folds' labeled problems; `majority` is the round-0 plurality, `final-round vote` the "
          "vote fraction of each problem's last round, `DASE commit` the answer DASE committed "
          "to (one-hot). ECE_ew: 10 equal-width bins; Brier: multiclass. Coverage and set size: "
          f"answer sets at 1 - {SET_ALPHA:g} (split conformal, LAC; docs/answer-sets.md), "
          "calibrated on each outer fold's training labels only (a supervised arm refitted "
          "without its calibration half); a reference row has none.", "",
          "**Gold is known only where some answer in the logs was flagged correct** (DASE: 444 "
          "of 546 GPQA, 91 of 100 AIME problems), so the labeled subset leans toward solvable "
          "problems; every number below is on that subset. On open-answer sets (AIME, GSM8K, "
          "arithmetic) the candidates are the answers said on the problem; a problem whose "
          "gold nobody said counts as wrong for every method.", "",
          "## Done when (DASE GPQA)", "",
          f"- bda-tempered ECE_ew {f3(out['done_when']['tempered_ece_ew'])} (≤ 0.05: "
          f"{out['done_when']['tempered_ece_ew_le_0.05']}); Brier "
          f"{f3(out['done_when']['tempered_brier'])} vs final-round vote "
          f"{f3(out['done_when']['final_round_vote_brier'])} (beats it: "
          f"{out['done_when']['tempered_brier_beats_final_round_vote']}).", "",
          "## The four GPQA bases side by side (bda-tempered / bda-confusion, accuracy and Brier)",
          "", "| basis | bda-tempered acc. | Brier | bda-confusion acc. | Brier |", "|---|---|---|---|---|"]
    for name, s in out["sets"].items():
        if name.startswith("DASE GPQA"):
            r = {row["arm"]: row for row in s["rows"]}
            md.append(f"| {name[len('DASE GPQA W=4 '):]} | {f3(r['bda-tempered']['accuracy'])} | "
                      f"{f3(r['bda-tempered']['brier_mc'])} | "
                      f"{f3(r['bda-confusion']['accuracy'])} | "
                      f"{f3(r['bda-confusion']['brier_mc'])} |")
    md += ["", "Unlike the simulated councils under attack (docs/results-controls.md), the real "
           "ensemble's later rounds carry information: every basis that reads them beats round 0 "
           "alone.", ""]
    for name, s in out["sets"].items():
        md += [f"## {name}", "", f"{s['n_tasks']} labeled problems, agents "
               f"{', '.join(s['agents'])}.", "",
               f"| arm | accuracy | ECE_ew | Brier | NLL | coverage ({1 - SET_ALPHA:.0%}) | "
               "mean set size |", "|---|---|---|---|---|---|---|"]
        md += [f"| {r['arm']} | {f3(r['accuracy'])} | {f3(r['ece_ew'])} | "
               f"{f3(r['brier_mc'])} | {f3(r['nll'])} | {f3(r.get('coverage'))} | "
               f"{f3(r.get('mean_set_size'))} |" for r in s["rows"]]
        md.append("")
    (ROOT / "docs" / "results-llm-traces.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
