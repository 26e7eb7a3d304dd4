"""The sleeper study ([BDA] Appendix F.8) with the row-drift monitor (F.13).

The library's full ``sleeper`` preset (``bda_jax.adversarial.run_study``; ``bda study sleeper``
runs the same): the paper's binary regime, 3 seats at .74/.68/.68, K = 2, 3 rounds, 1,500
questions x 3 seeds per question, split by question into a clean reference window, a calibration
window contaminated at f and an attacked deployment window (1,500 traces each); persistent
coalition on seats A1 and A2 (compliance 0.6 per task, which puts deployment majority at the
paper's live ~0.37). The full f grid {0, .1, ..., 1} x 3 study seeds x arms (majority, BDA
per-agent, BDA confusion, plus the stacker and the gated vote of Figure 7), then a compliance
sensitivity (0.7 and the always-wrong 1.0) on seed 0. Records whether the acceptance criterion
for the sleeper holds.

Run: ``python -m benchmarks.study_sleeper [--cache PATH]`` (about a minute on 2 cores); writes
benchmarks/results/study_sleeper.json and docs/results-sleeper.md. ``--cache`` keeps each
finished study seed in an append-only JSON Lines file, so a killed run resumes.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bda_jax.adversarial import F_GRID, SleeperStudy, run_study

ROOT = Path(__file__).resolve().parents[1]
MONITOR = ("drift", "floor", "drift_ratio", "drift_paired", "drift_ratio_paired")
# [BDA] Appendix F.8 / F.13 (live binary council, three seeds): for comparison only
PAPER = {"bda-per-agent": {0.0: 0.17, 0.2: 0.45, 0.3: 0.56, 0.4: 0.63, 1.0: 0.72},
         "bda-confusion": {0.2: 0.26, 1.0: 0.90},
         "majority": {f: 0.37 for f in F_GRID},
         "drift": {0.1: 0.036, 0.2: 0.074, 0.3: 0.105, 1.0: 0.358}}
PAPER_FLOOR = 0.033


def curves(study):
    """arm -> column -> [F] array, and monitor column -> [F]."""
    out = {arm: {c: study.curve(arm, c) for c in ("accuracy", "ece_ew", "brier_mc")}
           for arm in study.config["arms"]}
    arm0 = study.config["arms"][0]
    out["monitor"] = {c: study.curve(arm0, c) for c in MONITOR}
    return out


def done_when(per_seed, f_grid):
    """The acceptance criterion for the sleeper on the seed-mean curves, plus per-seed detail."""
    f = list(f_grid)
    i0, i2, i1, i10 = f.index(0.0), f.index(0.2), f.index(0.1), f.index(1.0)
    mean = lambda arm, col: np.mean([c[arm][col] for c in per_seed], 0)
    per, maj = mean("bda-per-agent", "accuracy"), mean("majority", "accuracy")
    conf = mean("bda-confusion", "accuracy")
    ratio, paired = mean("monitor", "drift_ratio"), mean("monitor", "drift_ratio_paired")
    seed_per = [c["bda-per-agent"]["accuracy"] for c in per_seed]
    seed_maj = [c["majority"]["accuracy"] for c in per_seed]
    seed_ratio = [float(c["monitor"]["drift_ratio"][i2]) for c in per_seed]
    seed_paired = [float(c["monitor"]["drift_ratio_paired"][i2]) for c in per_seed]
    checks = {
        "per_agent_below_majority_at_f0": {
            "holds": bool(per[i0] < maj[i0]), "per_agent": float(per[i0]),
            "majority": float(maj[i0]),
            "per_seed": [bool(p[i0] < m[i0]) for p, m in zip(seed_per, seed_maj)]},
        "per_agent_recovers_as_f_grows": {
            "holds": bool(per[i10] >= per[i0] + 0.2 and np.all(np.diff(per) >= -0.02)),
            "f0": float(per[i0]), "f1": float(per[i10]),
            "max_step_down": float(max(0.0, -np.diff(per).min())),
            "first_f_above_majority": next((f[k] for k in range(len(f)) if per[k] > maj[k]),
                                           None)},
        "drift_alarm_exceeds_twice_floor_by_f02": {
            "holds": bool(ratio[i2] > 2.0), "ratio": float(ratio[i2]),
            "per_seed": seed_ratio, "paired_ratio": float(paired[i2]),
            "paired_per_seed": seed_paired,
            "paired_holds": bool(paired[i2] > 2.0)},
    }
    shapes = {   # F.8 / F.13 shape claims beyond the bullet (informational)
        "one_coin_recovers_faster_at_f02": bool(per[i2] > conf[i2]),
        "confusion_ends_highest_at_f1": bool(conf[i10] >= per[i10]),
        "confusion_overtakes_from_f": next((f[k] for k in range(len(f))
                                            if all(conf[j] >= per[j] for j in range(k, len(f)))),
                                           None),
        "drift_at_f01_near_floor_ratio": float(ratio[i1]),
        "drift_monotone_in_f": bool(np.all(np.diff(mean("monitor", "drift")) > 0)),
    }
    return checks, shapes


def fmt(x):
    return "—" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.3f}"


def main(cache_path=None):
    t0 = time.time()
    run = run_study("sleeper", seed=0, cache=cache_path,
                    progress=lambda what, done, total: print(f"{what} ({done}/{total})",
                                                             flush=True))
    seeds, arms = run.result["setup"]["seeds"], run.config["arms"]
    f_grid = run.config["f_grid"]
    runs = {s: SleeperStudy.from_json(run.result["per_seed"][str(s)]) for s in seeds}
    per_seed = [curves(runs[s]) for s in seeds]
    checks, shapes = done_when(per_seed, f_grid)
    sens = {}
    for compliance, js in run.result["compliance_sensitivity"].items():
        sens[compliance] = dict(js)
        sens[compliance]["done_when"] = done_when([curves(SleeperStudy.from_json(js))], f_grid)[0]
    elapsed = time.time() - t0

    mean = {arm: {col: np.mean([c[arm][col] for c in per_seed], 0).tolist()
                  for col in per_seed[0][arm]} for arm in list(arms) + ["monitor"]}
    out = {"schema_version": 1, "seeds": list(seeds), "f_grid": f_grid,
           "config": runs[seeds[0]].config, "mean_over_seeds": mean,
           "done_when": checks, "shapes": shapes,
           "per_seed": {str(s): run.result["per_seed"][str(s)] for s in seeds},
           "compliance_sensitivity_seed0": sens, "elapsed_s": elapsed}
    res = ROOT / "benchmarks" / "results" / "study_sleeper.json"
    tmp = res.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, allow_nan=False))
    os.replace(tmp, res)

    # ---------------------------------------------------------------- docs
    md = ["# Sleeper study and row-drift monitor ([BDA] Appendix F.8, F.13)", "",
          "Generated by `python -m benchmarks.study_sleeper` "
          f"({elapsed:.0f} s; numbers in `benchmarks/results/study_sleeper.json`).", "",
          "**Setup.** Binary council, seats A1/A2/A3 at .74/.68/.68, 3 rounds, 1,500 questions x 3 "
          "seeds per question, simulated clean and attacked with the same seed (the twins share "
          "questions, gold, difficulty and the honest seat's round-0 answers). Questions are split "
          "into three disjoint windows of 1,500 traces: a clean *reference* window, a "
          "*calibration* window in which each trace is the attacked twin with probability f, and "
          "the attacked *deployment* window. The coalition is persistent (A1 and A2 on every "
          "task), each complying on a task with probability 0.6 — the rate at which deployment "
          "majority lands at the paper's live ~0.37. Supervised arms are fitted (own CV) on the "
          "whole labeled calibration window and predict deployment. The monitor is "
          "`RowDriftMonitor(lam=10, factor=2)`: rows fitted at fixed λ = 10, noise floor = mean "
          "drift between 20 random cluster-grouped clean half-windows of the reference. `ratio` "
          "is drift against the disjoint clean reference (what a deployed monitor sees); "
          "`paired` is drift against the clean twins of the same calibration tasks (pure signal, "
          "the reading under which the paper's drift is linear in f). Mean over study seeds "
          f"{list(seeds)}.", "",
          "| f | majority | per-agent acc | per-agent ECE | confusion acc | confusion ECE | "
          "stacking | gated vote | drift | floor | ratio | paired drift | paired ratio |",
          "|---" * 13 + "|"]
    for k, f in enumerate(f_grid):
        m = lambda arm, col: mean[arm][col][k]
        md.append(f"| {f:.1f} | {fmt(m('majority', 'accuracy'))} | "
                  f"{fmt(m('bda-per-agent', 'accuracy'))} | {fmt(m('bda-per-agent', 'ece_ew'))} | "
                  f"{fmt(m('bda-confusion', 'accuracy'))} | {fmt(m('bda-confusion', 'ece_ew'))} | "
                  f"{fmt(m('stacking', 'accuracy'))} | {fmt(m('gated-vote', 'accuracy'))} | "
                  f"{fmt(m('monitor', 'drift'))} | {fmt(m('monitor', 'floor'))} | "
                  f"{m('monitor', 'drift_ratio'):.2f} | {fmt(m('monitor', 'drift_paired'))} | "
                  f"{m('monitor', 'drift_ratio_paired'):.2f} |")
    md += ["", "Paper (live council, F.8/F.13), for comparison: per-agent "
           + ", ".join(f"{v:.2f} at f={f}" for f, v in PAPER["bda-per-agent"].items())
           + "; confusion " + ", ".join(f"{v:.2f} at f={f}" for f, v in PAPER["bda-confusion"].items())
           + "; majority 0.37; drift " + ", ".join(f"{v:.3f} at f={f}" for f, v in PAPER["drift"].items())
           + f" against a floor of {PAPER_FLOOR}.", "",
           "## Acceptance (sleeper)", "",
           "| check | holds | numbers |", "|---|---|---|"]
    c = checks["per_agent_below_majority_at_f0"]
    md.append(f"| at f = 0 per-agent is below majority | {c['holds']} | per-agent "
              f"{c['per_agent']:.3f} vs majority {c['majority']:.3f}; per seed {c['per_seed']} |")
    c = checks["per_agent_recovers_as_f_grows"]
    md.append(f"| per-agent recovers as f grows | {c['holds']} | {c['f0']:.3f} at f=0 → "
              f"{c['f1']:.3f} at f=1; largest step down {c['max_step_down']:.3f}; above majority "
              f"from f = {c['first_f_above_majority']} |")
    c = checks["drift_alarm_exceeds_twice_floor_by_f02"]
    md.append(f"| drift alarm > 2 x floor by f = 0.2 | {c['holds']} (paired: {c['paired_holds']}) "
              f"| ratio {c['ratio']:.2f} (per seed "
              f"{', '.join(f'{x:.2f}' for x in c['per_seed'])}); paired {c['paired_ratio']:.2f} "
              f"(per seed {', '.join(f'{x:.2f}' for x in c['paired_per_seed'])}) |")
    md += ["", "Further shape claims of F.8/F.13: "
           + "; ".join(f"{k} = {v:.2f}" if isinstance(v, float) else f"{k} = {v}"
                       for k, v in shapes.items()) + ".", "",
           "## Compliance sensitivity (seed 0)", "",
           "| compliance | majority | per-agent f=0 | per-agent f=1 | confusion f=1 | "
           "ratio f=0.1 | ratio f=0.2 | Done-when (below / recovers / alarm) |",
           "|---|---|---|---|---|---|---|---|"]
    i1, i2 = f_grid.index(0.1), f_grid.index(0.2)
    rows0 = {"0.6": dict(run.result["per_seed"][str(seeds[0])])}
    rows0["0.6"]["done_when"] = done_when([per_seed[0]], f_grid)[0]
    for comp, js in {**rows0, **sens}.items():
        tab = js["table"]
        get = lambda arm, f, col="accuracy": next(r[col] for r in tab
                                                  if r["arm"] == arm and r["f"] == f)
        dw = js["done_when"]
        md.append(f"| {comp} | {fmt(get('majority', 0.0))} | {fmt(get('bda-per-agent', 0.0))} | "
                  f"{fmt(get('bda-per-agent', 1.0))} | {fmt(get('bda-confusion', 1.0))} | "
                  f"{get('majority', f_grid[i1], 'drift_ratio'):.2f} | "
                  f"{get('majority', f_grid[i2], 'drift_ratio'):.2f} | "
                  f"{dw['per_agent_below_majority_at_f0']['holds']} / "
                  f"{dw['per_agent_recovers_as_f_grows']['holds']} / "
                  f"{dw['drift_alarm_exceeds_twice_floor_by_f02']['holds']} |")
    md += ["", "At compliance 1 the K = 2 coalition is always wrong: majority and the pure "
           "sleeper are both at exactly 0 (\"below majority\" is a tie), and once the turn is "
           "in the calibration window the coalition is a perfect inverted oracle.", ""]
    (ROOT / "docs" / "results-sleeper.md").write_text("\n".join(md))
    print(json.dumps({"done_when": checks, "shapes": shapes, "elapsed_s": elapsed}, indent=1))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=None,
                    help="JSON Lines file of finished studies (an interrupted run resumes)")
    main(ap.parse_args().cache)
