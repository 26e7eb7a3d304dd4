"""Baselines and calibrated stopping on the released DASE logs ([DASE] §4-§5; docs/stopping.md):
SC-k / IMSC-k accuracy-versus-inferences curves, DASE runs at 5 x steps inferences, pairwise
exact McNemar tests with Benjamini-Hochberg correction, cost/token accounting, and calibrated
(cross-fitted BDA-posterior) stopping against DASE's right wall at matched coverage.

Data: ../shared/data/dase_council_traces (or $BDA_SHARED_DATA/dase_council_traces), read in
place. Run (from the repository root): ``python -m benchmarks.results_dase`` (about a minute on
2 cores); writes benchmarks/results/dase.json and docs/results-dase.md.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from bda_jax.datasets import load_dase_vote_log, recover_dase_gold
from bda_jax.stopping import (accuracy_both, align, answers_correct, build_votes, commit_partition,
                              cost_summary, crossfit_log_posterior, dase_history_outcomes,
                              load_history_batch, match_coverage, pairwise_mcnemar,
                              replay_history, sc_curve, stop_at_threshold)

ROOT = Path(__file__).resolve().parents[1]

DATA = Path(os.environ.get("BDA_SHARED_DATA", ROOT.parent / "shared" / "data")) / \
    "dase_council_traces"
BASELINES = {"aime": ["safe_SC70_Benchmark_Logs.jsonl", "safe_SC70_Benchmark__qwll_Logs.jsonl",
                      "safe_IMSC70_Benchmark_Logs.jsonl", "safe_IMSC70_Benchmark_8B_Logs.jsonl"],
             "gpqa": ["safe_SC70_Benchmark__qwll_GPQA_Logs.jsonl",
                      "safe_IMSC70_Benchmark_GPQA_Logs.jsonl"]}
STOPPING = [("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl", "gpqa"),
            ("safe_DASE_Bellman_History_8_alpha0_2.jsonl", "aime"),
            ("safe_DASE_Bellman_History_4_alpha0_2.jsonl", "aime")]


def short(name: str) -> str:
    return name.replace("safe_", "").replace("_alpha0_2", "").replace(".jsonl", "")


def methods(bench, gold):
    out = {}
    for f in BASELINES[bench]:
        log = load_dase_vote_log(DATA / f)
        curve = sc_curve(log, gold)
        ok = answers_correct(log.winner, log.idx, gold, bench)
        out[short(f)] = {"idx": log.idx, "ok": ok, "curve": curve,
                         "cost": cost_summary(log.cost, None, 70 + log.pool_inferences),
                         "logged_correct": int(log.acc.sum())}
    hist = sorted(p.name for p in DATA.glob("safe_DASE_*.jsonl")
                  if ("GPQA" in p.name) == (bench == "gpqa"))
    for f in hist:
        o = dase_history_outcomes(DATA / f, gold)
        out[short(f)] = {"idx": o["idx"], "ok": o["ok"], "mean_inferences":
                         float(o["inferences"].mean()),
                         "cost": cost_summary(o["cost"], o["tokens"], o["inferences"]),
                         "logged_correct": int(o["flag"].sum())}
    return out


def item4():
    res = {}
    for bench in ("aime", "gpqa"):
        gold = recover_dase_gold(DATA, bench)
        ms = methods(bench, gold)
        table = {}
        for name, m in ms.items():
            row = accuracy_both(m["ok"], m["idx"], gold)
            row.update(logged_correct=m["logged_correct"], cost=m["cost"],
                       mean_inferences=m.get("mean_inferences", m["cost"]["mean_inferences"]))
            if "curve" in m:
                row["curve"] = m["curve"]
            table[name] = row
        ref = next(iter(ms.values()))["idx"]
        same = {n: m for n, m in ms.items() if len(m["idx"]) == len(ref)
                and set(m["idx"].tolist()) == set(ref.tolist())}
        outcomes = {}
        for n, m in same.items():
            ia, ib = align(ref, m["idx"])
            ok = np.zeros(len(ref), bool)
            ok[ia] = m["ok"][ib]
            outcomes[n] = ok
        res[bench] = {"gold": gold.summary(), "n_gold": len(gold), "methods": table,
                      "mcnemar": pairwise_mcnemar(outcomes)}
    return res


def item5():
    res = {}
    for f, bench in STOPPING:
        gold = recover_dase_gold(DATA, bench)
        hb = load_history_batch(DATA / f)
        probs = [[st["norms"] for st in r["history"]] for r in hb.logged]
        vt = build_votes(probs, [gold.get(i) for i in hb.idx], bench)
        lp, _ = crossfit_log_posterior(vt, folds=5, seed=0)
        rec = replay_history(DATA / f, empty_g=0.5)
        part = commit_partition(rec, gold, bench)
        right = np.asarray([r.commit == "right_wall" for r in rec])
        steps = np.asarray([r.steps for r in rec])
        rw = part["right_wall"]
        dase = {"coverage": float(right.mean()), "stopped": int(right.sum()),
                "acc_stopped": rw[2], "acc_overall": part["overall"][2],
                "mean_rounds": float(steps.mean()),
                "mean_rounds_stopped": float(steps[right].mean()),
                "acc_rest": float((part["overall"][1] - rw[1]) / max(1, len(rec) - rw[0]))}
        rows, best = match_coverage(vt, lp, dase["coverage"])
        assert (stop_at_threshold(vt, lp, best["threshold"]).round
                <= vt.mask.sum(1)).all()
        res[short(f)] = {"benchmark": bench, "dase_right_wall": dase, "calibrated": best,
                         "sweep": [r for r in rows if r["threshold"] in
                                   (0.6, 0.7, 0.8, 0.9, 0.95) or r is best]}
    return res


def pct(x):
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.1f} %"


def markdown(r4, r5, secs):
    L = ["# DASE baselines, paired tests, cost, and calibrated stopping ([DASE] §4-§5)", "",
         "Generated by `python -m benchmarks.results_dase` from the released DASE logs "
         "(`shared/data/dase_council_traces`); numbers in `benchmarks/results/dase.json`. "
         f"Run time {secs:.0f} s.", "",
         "**Denominators.** `acc (all)` counts a problem whose gold could not be recovered "
         "(`recover_dase_gold`) as wrong — the logs' own 0/1 flags and the DASE partition "
         "numbers use this; `acc (recovered)` is over recovered-gold problems only. McNemar "
         "tests are identical under both: an unrecovered problem is wrong for every method "
         "(concordant). SC-k = plurality of the first k of the 70 logged votes, empties "
         "skipped, raw-string comparison, ties to the first seen (this reproduces every logged "
         "`winner`); IMSC-k is charged k + 5 inferences (its 5 pool calls). DASE runs sit at "
         "their mean 5 × steps. The SC/IMSC logs carry cost but no token counts.", ""]
    for bench, r in r4.items():
        L += [f"## {bench.upper()} — {r['gold']}", "",
              "| method | acc (all) | acc (recovered) | logged flags | mean inferences | "
              "cost $ total (mean/problem) | tokens total (mean) |", "|---|---|---|---|---|---|---|"]
        for n, m in r["methods"].items():
            c = m["cost"]
            tok = "—" if c["total_tokens"] is None else \
                f"{c['total_tokens'] / 1e6:.2f} M ({c['mean_tokens']:.0f})"
            L.append(f"| {n} | {m['correct']}/{m['n']} = {pct(m['all'])} | {pct(m['recovered'])} "
                     f"| {m['logged_correct']} | {m['mean_inferences']:.1f} | "
                     f"{c['total_cost']:.2f} ({c['mean_cost']:.3f}) | {tok} |")
        L += ["", "Accuracy (all) versus k for the sampled baselines:", "",
              "| method | k=1 | 5 | 10 | 15 | 20 | 30 | 40 | 50 | 60 | 70 |",
              "|---|" + "---|" * 10]
        for n, m in r["methods"].items():
            if "curve" in m:
                a = m["curve"]["acc_all"]
                L.append(f"| {n} | " + " | ".join(pct(a[k - 1]) for k in
                                                  (1, 5, 10, 15, 20, 30, 40, 50, 60, 70)) + " |")
        sig = sorted(r["mcnemar"], key=lambda x: x["p"])
        L += ["", f"Pairwise exact McNemar, BH over the {len(sig)} pairs of this benchmark "
              "(10 smallest p shown; all in the JSON):", "",
              "| A | B | A only | B only | Δacc | p | p (BH) |", "|---|---|---|---|---|---|---|"]
        for x in sig[:10]:
            L.append(f"| {x['a']} | {x['b']} | {x['a_only']} | {x['b_only']} | "
                     f"{100 * x['diff']:+.1f} pp | {x['p']:.3g} | {x['p_bh']:.3g} |")
        L.append("")
    L += ["## Calibrated stopping versus DASE at matched coverage", "",
          "Per-slot one-coin BDA posterior over the answers seen so far (tempered; slot Beta "
          "priors and τ fitted per round on the other 4 folds' labeled problems truncated at "
          "that round; 5-fold by problem). Stop at the first round whose max posterior over seen "
          "answers reaches the threshold, else fall back at the last logged round. The threshold "
          "is swept to match DASE's right-wall coverage; every stop is within the recorded "
          "rounds of that problem (truncation-valid — the calibrated rule never sees a round "
          "DASE did not run; note this caps it at DASE's own stop). DASE numbers: replay with "
          "the logs' empty_g = 0.5 (identical to the logged commits). Accuracy over all "
          "problems of the set (unrecovered gold = wrong).", "",
          "| log | method | threshold | coverage | acc stopped | acc rest | overall | "
          "mean rounds (all) | mean rounds (stopped) |", "|---|---|---|---|---|---|---|---|---|"]
    for f, r in r5.items():
        d, c = r["dase_right_wall"], r["calibrated"]
        L.append(f"| {f} | DASE right wall | — | {d['stopped']} ({pct(d['coverage'])}) | "
                 f"{pct(d['acc_stopped'])} | {pct(d['acc_rest'])} | {pct(d['acc_overall'])} | "
                 f"{d['mean_rounds']:.2f} | {d['mean_rounds_stopped']:.2f} |")
        L.append(f"| | calibrated BDA | {c['threshold']:.6g} | {c['stopped']} "
                 f"({pct(c['coverage'])}) | {pct(c['acc_stopped'])} | {pct(c['acc_rest'])} | "
                 f"{pct(c['acc_overall'])} | {c['mean_rounds']:.2f} | "
                 f"{c['mean_rounds_stopped']:.2f} |")
    L += ["", "Coverage can only be matched to the nearest achievable value (thresholds move "
          "coverage in steps). The AIME sample is 100 problems (35–39 dispatched): differences "
          "of a few problems are within noise; no significance test is made here.", ""]
    return "\n".join(L)


def main():
    t0 = time.time()
    r4 = item4()
    r5 = item5()
    secs = time.time() - t0
    out = {"item4": r4, "item5": r5, "seconds": secs}
    path = ROOT / "benchmarks" / "results" / "dase.json"
    path.write_text(json.dumps(out, indent=1, default=lambda o: o.tolist()
                               if hasattr(o, "tolist") else str(o)))
    (ROOT / "docs" / "results-dase.md").write_text(markdown(r4, r5, secs))
    print(f"wrote {path} and docs/results-dase.md in {secs:.0f} s")


if __name__ == "__main__":
    main()
