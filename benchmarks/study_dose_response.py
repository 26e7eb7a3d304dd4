"""The dose-response study: the count-level adversary of [BDA] Appendix F.3 (Table 12).

The library's full ``dose-response`` preset (``bda_jax.adversarial.run_study``; ``bda study
dose-response`` runs the same): the paper's binary regime, 3 seats at .74/.68/.68, 3 rounds,
1,500 questions x 3 seeds (simulate_council(0, 1500, [0.74, 0.68, 0.68], seeds_per_question=3)).
For p_wrong in {0, .2, .4, .5, .6, .8, 1} and the regimes persistent k=1 (seat A1), persistent
k=2 (A1, A2) and rotating k=2 (two seats drawn per task), the traces are corrupted with
``corrupt_traces(..., seed=0)`` (fixed wrong answer per task; at K = 2 the wrong answer) and the
arms are evaluated with ``bda_jax.evaluate`` on the same 5 outer folds, every training task
labeled (the calibration folds see the corruption). Then the acceptance thresholds are checked.

Run: ``python -m benchmarks.study_dose_response [--cache PATH]`` (about a minute on 2 cores);
writes benchmarks/results/study_dose_response.json and docs/results-adversarial-dose.md.
``--cache`` makes an interrupted run resumable (finished cells are kept in that JSON Lines file).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bda_jax.adversarial import run_study

ROOT = Path(__file__).resolve().parents[1]

# [BDA] Table 12 (real binary pool, three seeds), for side-by-side reading only
PAPER = {
    "persistent k=1": {"majority": [.734, .705, .671, .657, .640, .611, .581],
                       "bda-shared": [.730, .712, .693, .686, .676, .660, .638],
                       "bda-per-agent": [.751, .710, .717, .722, .755, .824, .923],
                       "bda-confusion": [.758, .732, .718, .719, .723, .748, .792]},
    "persistent k=2": {"majority": [.734, .680, .596, .554, .480, .344, .163],
                       "bda-shared": [.730, .695, .656, .639, .616, .568, .515],
                       "bda-per-agent": [.751, .691, .684, .687, .694, .806, .915],
                       "bda-confusion": [.758, .714, .691, .702, .697, .803, .947]},
    "rotating k=2": {"majority": [.734, .674, .562, .495, .410, .232, .055],
                     "bda-shared": [.730, .651, .537, .482, .419, .289, .182],
                     "bda-per-agent": [.751, .664, .557, .507, .469, .402, .304],
                     "bda-confusion": [.758, .656, .554, .565, .599, .716, .811]},
}


def decreasing(xs):
    return all(a > b for a, b in zip(xs, xs[1:]))


def dips_then_rises(xs):
    """Minimum strictly inside the grid, below the clean value, and the dose-1 value above it."""
    j = min(range(len(xs)), key=xs.__getitem__)
    return 0 < j < len(xs) - 1 and xs[j] < xs[0] and xs[-1] > xs[j]


def checks(piv, p_grid):
    p = list(p_grid)
    k2, rot = piv["persistent k=2"], piv["rotating k=2"]
    out = [
        ("persistent k=2, p=1: per-agent >= 0.85", k2["bda-per-agent"][-1] >= 0.85,
         k2["bda-per-agent"][-1]),
        ("persistent k=2, p=1: confusion >= 0.88", k2["bda-confusion"][-1] >= 0.88,
         k2["bda-confusion"][-1]),
        ("persistent k=2, p=1: majority <= 0.25", k2["majority"][-1] <= 0.25, k2["majority"][-1]),
    ]
    for regime in piv:
        out.append((f"{regime}: majority strictly decreasing in p_wrong",
                    decreasing(piv[regime]["majority"]), None))
    for regime in ("persistent k=1", "persistent k=2"):
        xs = piv[regime]["bda-per-agent"]
        j = min(range(len(xs)), key=xs.__getitem__)
        out.append((f"{regime}: per-agent dips at an intermediate dose, then rises",
                    dips_then_rises(xs), f"min {xs[j]:.3f} at p={p[j]:g}"))
    out.append(("rotating k=2: per-agent strictly decreasing", decreasing(rot["bda-per-agent"]),
                None))
    c = rot["bda-confusion"]
    out.append(("rotating k=2: confusion at p=1 above its p=.4 value", c[-1] > c[p.index(0.4)],
                f"{c[p.index(0.4)]:.3f} -> {c[-1]:.3f}"))
    return [{"check": name, "holds": bool(ok), "value": val} for name, ok, val in out]


def block(piv, p_grid, paper=False):
    lines = ["| regime | arm | " + " | ".join(f"{p:g}" for p in p_grid) + " |",
             "|---|---|" + "---|" * len(p_grid)]
    for regime, series in piv.items():
        for arm, vals in series.items():
            cells = []
            for j, v in enumerate(vals):
                cell = f"{v:.3f}"
                if paper and arm in PAPER.get(regime, {}):
                    cell += f" ({PAPER[regime][arm][j]:.3f})"
                cells.append(cell)
            lines.append(f"| {regime} | {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=None, help="JSON Lines file of finished cells (an interrupted run resumes)")
    args = ap.parse_args()
    t0 = time.time()
    run = run_study("dose-response", seed=0, cache=args.cache,
                    progress=lambda what, done, total: print(f"{what} ({done}/{total})",
                                                             flush=True))
    cfg, study = run.config, run.result["result"]
    p_grid = cfg["p_grid"]
    acc, ece = run.result["accuracy"], run.result["ece_ew"]
    result = checks(acc, p_grid)
    elapsed = time.time() - t0
    out = {"schema_version": 1,
           "setup": {"simulate_council": {"seed": 0, "n_questions": cfg["n_questions"],
                                          "reliabilities": cfg["reliabilities"],
                                          "seeds_per_question": cfg["seeds_per_question"]},
                     "corrupt_traces": {"seed": 0, "target": "fixed-wrong",
                                        "persistent_seats": {"1": ["A1"], "2": ["A1", "A2"]}},
                     "evaluate": {"folds": cfg["folds"], "seed": 0, "label_budget": None}},
           "study": study, "accuracy": acc, "ece_ew": ece, "checks": result,
           "elapsed_s": elapsed}
    res = ROOT / "benchmarks" / "results" / "study_dose_response.json"
    tmp = res.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, allow_nan=False))
    os.replace(tmp, res)

    summ = {r["regime"]: r["redirect_rate"] for r in study["rows"] if r["p_wrong"] == 1.0}
    md = ["# Adversarial dose-response ([BDA] Appendix F.3, Table 12)", "",
          "Generated by `python -m benchmarks.study_dose_response`; numbers from "
          "`benchmarks/results/study_dose_response.json`.", "",
          "Council: `simulate_council(0, 1500, [0.74, 0.68, 0.68], seeds_per_question=3)` "
          "(4,500 binary traces, 3 rounds; docs/simulator.md). Attack: "
          "`corrupt_traces(traces, p_wrong, k=k, mode=mode, seed=0)` — each informative move "
          "of a corrupted seat is, with probability p_wrong, rewritten to be inconsistent with "
          "the gold (a propose/vote/concede endorses the wrong answer, a challenge targets a "
          "move standing for the gold); all other moves keep their signed endorsement. "
          "Persistent: seat A1 (k=1) or A1, A2 (k=2) on every task, calibration folds "
          "included; rotating: two seats drawn per task. Every arm on the same 5 outer folds "
          "(grouped by question), every training task labeled; p_wrong = 0 is the clean "
          "council (one cell shared by the regimes).", "",
          "## Accuracy (the paper's Table 12 in parentheses: a real binary LLM pool, not "
          "this simulator)", "", block(acc, p_grid, paper=True), "",
          "## ECE_ew (10 equal-width bins)", "", block(ece, p_grid), "",
          "## Acceptance thresholds", "", "| check | holds | value |", "|---|---|---|"]
    for c in result:
        val = c["value"]
        val = "" if val is None else (f"{val:.3f}" if isinstance(val, float) else str(val))
        md.append(f"| {c['check']} | {'yes' if c['holds'] else 'NO'} | {val} |")
    md += ["", "## Reading", "",
           "At K = 2 a seat whose every informative move is wrong (p_wrong = 1) is a perfect "
           "inverted oracle, so in this construction the persistent cells at p_wrong = 1 "
           "saturate (the BDA arms reach 1.000, majority at k = 2 reaches 0.000) and the "
           "rotating one-coin, whose centred prior cannot single out seats, follows majority "
           "down to 0.000 while the confusion rows (absolute, anti-diagonal at high dose) "
           "invert the whole council. The paper's pool stops short of that (per-agent .915, "
           "majority .163 at persistent k = 2), so its p_wrong = 1 corruption evidently leaves "
           "some correct evidence in the corrupted seats; its exact mechanism is not specified "
           "beyond 'redirect to a random wrong answer'. The thresholds at p_wrong = 1 therefore "
           "hold with room to spare here; the informative parts of the grid are the "
           "intermediate doses. Measured redirect rate at p_wrong = 1: "
           + ", ".join(f"{k} {v:.3f}" for k, v in summ.items()) + ".",
           "", f"Run time: {elapsed:.0f} s on this machine (CPU)."]
    doc = ROOT / "docs" / "results-adversarial-dose.md"
    doc.write_text("\n".join(md) + "\n")
    print(block(acc, p_grid, paper=True))
    for c in result:
        print(("HOLDS " if c["holds"] else "FAILS ") + c["check"],
              "" if c["value"] is None else c["value"])
    print(f"elapsed {elapsed:.0f} s")


if __name__ == "__main__":
    main()
