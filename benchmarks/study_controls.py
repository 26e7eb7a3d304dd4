"""The control studies on simulated councils ([BDA] Appendix F.5, F.9, F.11, F.12, F.14),
written to JSON and docs: the library's full ``controls`` preset
(``bda_jax.adversarial.run_study``; ``bda study controls`` runs the same).

The paper's binary regime: ``simulate_council(seed, 1500, [0.74, 0.68, 0.68],
seeds_per_question=3)`` (4,500 traces, clusters = questions). Attacked cells use the live
coalition's measured compliance (87-92 % anti-correct proposals on binary, F.2): seat A1
(k = 1) or seats A1, A2 (k = 2) comply on 90 % of the tasks; contagion 0.3 (genuine seats flip
to the coalition's answer when challenged; 0 = off).

1. Label permutation (F.11, Table 17): clean, k = 1 and k = 2 (contagion 0.3) binary cells;
   plus a K = 3 k = 2 cell with the label-systematic ``"shift"`` policy, where the confusion
   model has label identity to lose.
2. Round-0 truncation (F.5, Table 14): clean, and k = 1, 2 with contagion off and on, with
   adversaries that never relent and that relent at the live rate (`adversary_relent` 0.2).
3. Isotonic recalibration under attack (F.9, Table 15): clean and k = 2, 25-label budget.
4. Wrong-answer policy shift (F.12, Table 18): K = 3 (the policies coincide at K = 2), k = 2,
   contagion 0.3, policy A = distractor (random wrong slot), B = shift (gold + 1 mod K).
5. Weak-seat swap (F.14): seat A3 replaced by an honest near-chance seat (0.52) and by a
   partially adversarial seat at compliance 0.25 (about the same round-0 accuracy) and 0.5.

Run: ``python -m benchmarks.study_controls`` (7-10 minutes on 2 busy cores); writes
benchmarks/results/study_controls.json and docs/results-controls.md. ``--seed S`` changes the
simulation seed (default 0); ``--cache PATH`` keeps each finished study in an append-only JSON
Lines file, so a run killed midway resumes without recomputing them.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax

from bda_jax.adversarial import ControlStudy, run_study

ROOT = Path(__file__).resolve().parents[1]
CONTAGION = 0.3     # the attacked cells' contagion in the preset
RELENT = 0.2        # the preset's relenting adversaries, as the live full-trace r_i (G.1)


def f3(x):
    return "—" if x is None else f"{x:.3f}"


def s3(x):
    return "—" if x is None else f"{x:+.3f}"


def md_table(header, rows):
    return ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"] + \
        ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def main(seed: int = 0, cache_path=None):
    t0 = time.time()
    started = []                              # (cell, time) as each cell starts, then the end

    def progress(what, done, total):
        started.append((what.removeprefix("controls: "), time.time()))
        print(f"{what} ({done}/{total})", flush=True)

    run = run_study("controls", seed=seed, cache=cache_path, progress=progress)
    cfg = run.config
    seconds = {a[0]: b[1] - a[1] for a, b in zip(started, started[1:])}
    studies, timings = {}, {}                 # study -> {cell label: ControlStudy}, seconds
    for spec in cfg["cells"]:
        label = spec["council"]["label"] if "council" in spec else None
        studies.setdefault(spec["study"], {})[label] = ControlStudy.from_json(
            run.result["studies"][spec["name"]])
        timings[spec["study"]] = timings.get(spec["study"], 0.0) + seconds[spec["name"]]
    rel, n_questions, spq = cfg["reliabilities"], cfg["n_questions"], cfg["seeds_per_question"]
    compliance, arms = cfg["compliance"], tuple(cfg["arms"])
    out = {"schema_version": 1, "seed": seed, "regime": {
        "reliabilities": rel, "n_questions": n_questions, "seeds_per_question": spq,
        "compliance": compliance, "contagion": CONTAGION, "k=1": "seat A1", "k=2": "seats A1, A2"},
        "platform": {"python": platform.python_version(), "jax": jax.__version__,
                     "backend": jax.default_backend(), "cpus": os.cpu_count()}}
    md = []

    # ------------------------------------------------------------------ 1. label permutation
    perm = studies["label_permutation"]
    out["label_permutation"] = {c: s.to_json() for c, s in perm.items()}
    rows = []
    for cell, s in perm.items():
        for r in s.table:
            rows.append([cell, r["arm"], f3(r["accuracy_original"]), f3(r["accuracy_permuted"]),
                         s3(r["delta_accuracy"]), s3(r["delta_expected_accuracy"])])
    md += ["## Label permutation (F.11, Table 17)", "",
           "Per-task random relabeling of the candidate slots (`tally(permute_candidates=seed)`), "
           "same outer folds. Δ = permuted − original; Δ expected: accuracy with exact ties split "
           "instead of broken at random (isolates tie-break noise). Binary cells: contagion 0.3 "
           "when attacked. K = 3 cell: the coalition names candidate gold + 1 (a label-systematic "
           "policy), so the confusion model has label identity to lose.", "",
           *md_table(["cell", "arm", "original", "permuted", "Δ", "Δ expected"], rows), ""]

    # ------------------------------------------------------------------ 2. round-0 truncation
    trunc = studies["round0_truncation"]
    out["round0_truncation"] = {c: s.to_json() for c, s in trunc.items()}
    rows = []
    for cell, s in trunc.items():
        for r in s.table:
            rows.append([cell, r["arm"], f3(r["accuracy_round0"]), f3(r["accuracy_full"]),
                         s3(r["delta_accuracy"])])
    seat_rows = [[cell, s_["agent"], f3(s_["reliability_round0"]), f3(s_["reliability_full"])]
                 for cell, s in trunc.items() for s_ in s.tables["seats"]]
    md += ["## Round-0 truncation vs full traces (F.5, Table 14)", "",
           "Every arm refit leak-free on each basis (`tally(max_round=0)` vs all rounds), same "
           "outer folds. Δ = full − round 0 (negative: the rounds cost accuracy). Majority reads "
           "round-0 votes on both bases. `relent`: per later move, the probability that a "
           "complying adversary abandons the attack (`Behavior(adversary_relent=...)`); "
           f"{RELENT:g} matches the live adversaries' full-trace r_i (Appendix G.1: 0.21 / 0.29), "
           "0 keeps them wrong in every round.", "",
           *md_table(["cell", "arm", "round 0", "full", "Δ"], rows), "",
           "Move-level reliability r_i of each seat (all labeled tasks) on each basis — the "
           "footprint of persuasion and contagion in the rounds:", "",
           *md_table(["cell", "seat", "r_i round 0", "r_i full"], seat_rows), ""]

    # ------------------------------------------------------------------ 3. recalibration
    recal = studies["recalibration_under_attack"][None]
    out["recalibration_under_attack"] = recal.to_json()
    rows = [[r["council"], r["arm"], f3(r["accuracy"]), f3(r["accuracy_iso"]),
             f"{f3(r['ece_ew'])} → {f3(r['ece_ew_iso'])}",
             f"{f3(r['brier'])} → {f3(r['brier_iso'])}", f3(r["brier_mc_iso"])]
            for r in recal.table]
    md += ["## Isotonic recalibration under attack (F.9, Table 15)", "",
           "25 labeled training tasks per outer fold; `iso:<arm>` is leak-free 5-fold isotonic "
           "recalibration of the arm on those labels. k = 2 with contagion 0.3. Each decision "
           "of `iso:<arm>` is the arm's own (recalibration changes only the confidence), so it "
           "cannot restore a flipped vote's accuracy; ECE_ew and the top-label Brier (`brier`) "
           "of `iso:<arm>` read its calibrated top-label confidence unclipped (below 1/K where "
           "a confident vote is usually wrong); `brier_mc` reads its probability vector.", "",
           *md_table(["cell", "arm", "acc.", "acc. iso", "ECE_ew raw → iso",
                      "brier raw → iso", "brier_mc iso"], rows), ""]

    # ------------------------------------------------------------------ 4. policy shift
    shift = studies["policy_shift"][None]
    out["policy_shift"] = shift.to_json()
    pairs = ["A->A", "B->B", "A->B", "B->A"]
    rows = [[p.replace("->", " → ") + (" (shift)" if p[0] != p[-1] else "")]
            + [f3(shift.plot[a][p]) for a in arms] for p in pairs]
    md += ["## Wrong-answer policy shift (F.12, Table 18)", "",
           f"K = 3, k = 2 (compliance {compliance}), contagion {CONTAGION}; policy A: the "
           "coalition argues the question's distractor (a random wrong slot), B: candidate "
           "gold + 1 (label-systematic). Calibrate on half the questions under one policy, "
           "deploy on the other half under either; accuracy on the deployment half.", "",
           *md_table(["cal → dep", *arms], rows), ""]

    # ------------------------------------------------------------------ 5. weak seat
    weak = studies["weak_seat_swap"][None]
    out["weak_seat_swap"] = weak.to_json()
    rows = [[r["council"], r["arm"], f3(r["accuracy"]), s3(r["delta_accuracy"]), f3(r["ece_ew"])]
            for r in weak.table]
    seat_rows = [[s["council"], s["agent"], s["role"], f3(s["round0_accuracy"]),
                  f3(s["reliability"]), f3(s["mu"]), s3(s["weight"]),
                  s3(s.get("confusion_weight"))] for s in weak.tables["seats"]]
    md += ["## Weak-seat swap (F.14)", "",
           "Seat A3 (0.68) replaced by an honest near-chance seat (round-0 accuracy 0.52) or "
           "kept but made partially adversarial (complies on 25 % / 50 % of the tasks). Same "
           "questions in every council.", "",
           *md_table(["council", "arm", "accuracy", "Δ vs original", "ECE_ew"], rows), "",
           "Per-seat fits (mean over the 5 outer folds): one-coin reliability r_i, prior mean "
           "μ_i (Eq. 3, CV-selected b, κ, s) and weight log(μ/(1−μ)) per informative move; "
           "confusion weight: τ × diagonal log-odds of the fitted rows.", "",
           *md_table(["council", "seat", "role", "round-0 acc.", "r_i", "μ_i", "weight",
                      "confusion weight"], seat_rows), ""]

    # ------------------------------------------------------------------ acceptance
    checks = done_when(perm, trunc, shift, weak, arms)
    out["done_when"] = checks
    out["timings_s"] = timings
    out["elapsed_s"] = time.time() - t0
    md = ["## Acceptance (controls)", "",
          *md_table(["check", "holds", "detail"],
                    [[c["check"], "yes" if c["holds"] else "**no**", c["detail"]]
                     for c in checks]), "", *notes(trunc, recal), ""] + md

    res = ROOT / "benchmarks" / "results" / "study_controls.json"
    tmp = res.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, allow_nan=False))
    os.replace(tmp, res)
    doc = ROOT / "docs" / "results-controls.md"
    doc.write_text(
        "# Control studies on simulated councils\n\n"
        "Generated by `python -m benchmarks.study_controls` (simulation seed "
        f"{seed}, {out['elapsed_s']:.0f} s on {os.cpu_count()} CPU cores); numbers from "
        "`benchmarks/results/study_controls.json`. API: `bda_jax.adversarial` "
        "(`label_permutation_control`, `round0_truncation`, `recalibration_under_attack`, "
        "`policy_shift`, `weak_seat_swap`), each returning a tidy `table`, its `plot` data and "
        "`params`. Regime: the paper's binary council, 3 seats at .74/.68/.68, 3 rounds, "
        f"{n_questions:,} questions × {spq} seeds, 5 outer folds grouped by question, "
        "every training task labeled unless a budget is stated. Attacked cells: seat A1 (k = 1) "
        f"or A1, A2 (k = 2) comply on {compliance:.0%} of the tasks (the live coalition's "
        "measured 87–92 %). The simulator is not the paper's live council (docs/simulator.md); "
        "where its numbers differ from the paper's, the table says so.\n\n"
        + "\n".join(md) + "\n")
    print("\n".join(md))
    print(f"elapsed {out['elapsed_s']:.0f} s", {k: round(v) for k, v in timings.items()})


def notes(trunc, recal):
    """Reading the results where the simulator departs from the paper (numbers from this run)."""
    key = lambda k, relent: f"k={k} contagion {CONTAGION:g} relent {relent:g}"
    k1, k2, k2_live = trunc[key(1, 0)], trunc[key(2, 0)], trunc[key(2, RELENT)]
    r = lambda s, i, b: s.tables["seats"][i][f"reliability_{b}"]
    d = lambda s, arm="bda-per-agent": s.row(arm=arm)["delta_accuracy"]
    maj = recal.row(council="k=2", arm="majority")
    return [
        "**Round 0 and relenting adversaries.** The paper finds round 0 more accurate in 11 of "
        "12 live cells (binary k = 2 one-coin 0.933 vs 0.736). With adversaries that never "
        f"relent the simulator reproduces it at k = 1 (one-coin Δ {d(k1):+.3f}; the genuine "
        f"seats' r_i falls from {r(k1, 1, 'round0'):.2f} to {r(k1, 1, 'full'):.2f}) but not at "
        f"k = 2 (Δ {d(k2):+.3f}): adversaries wrong in every round (full-trace r_i "
        f"{r(k2, 0, 'full'):.2f} / {r(k2, 1, 'full'):.2f}) add inverted evidence that outweighs "
        f"the one genuine seat's contagion (r_i {r(k2, 2, 'round0'):.2f} → "
        f"{r(k2, 2, 'full'):.2f}). The live adversaries were not like that: their full-trace "
        "r_i was 0.21 / 0.29 (Appendix G.1). With relent "
        f"{RELENT:g} the simulated ones fit {r(k2_live, 0, 'full'):.2f} / "
        f"{r(k2_live, 1, 'full'):.2f}, and round 0 wins in every attacked cell and arm "
        f"(k = 2 one-coin {k2_live.row(arm='bda-per-agent')['accuracy_round0']:.3f} vs "
        f"{k2_live.row(arm='bda-per-agent')['accuracy_full']:.3f}). The Done-when checks read "
        "the relenting cells.",
        "",
        "**Recalibrated majority under attack.** Isotonic recalibration keeps each decision "
        "the arm's own, so the recalibrated coalition-majority's accuracy is unchanged "
        f"({maj['accuracy']:.3f} = {maj['accuracy_iso']:.3f}) while its calibration is "
        f"repaired: ECE_ew {maj['ece_ew']:.3f} → {maj['ece_ew_iso']:.3f}, top-label Brier "
        f"{maj['brier']:.3f} → {maj['brier_iso']:.3f} (paper: accuracy 0.37 at ECE_ew ≈ 0; "
        "the 25-label isotonic map leaves a little more error here). Calibrated and still far "
        "below every BDA arm, which is the claim.",
        "",
        "**Policy shift.** As in the paper, within-policy controls beat the shifts for the "
        "confusion model and the one-coin is policy-robust. Unlike the paper, the stacker is "
        "also robust here: the simulated policies differ only in which wrong slot the "
        "coalition names, which the stacker's per-seat count weights never see.",
    ]


def done_when(perm, trunc, shift, weak, arms):
    """The acceptance criteria (controls part) and the shapes the tests assert."""
    checks = []
    worst = max((abs(s.row(arm=a)["delta_accuracy"]), f"{cell}/{a}")
                for cell, s in perm.items() if not cell.startswith("K=3")
                for a in ("bda-per-agent", "stacking"))
    checks.append({"check": "label permutation moves one-coin and stacking by <= 0.01 "
                            "(binary cells)",
                   "holds": worst[0] <= 0.01,
                   "detail": f"largest abs(Δ) {worst[0]:.3f} ({worst[1]})"})
    k3 = perm["K=3 k=2 shift"]
    checks.append({"check": "confusion loses its label-identity gain under permutation "
                            "(K = 3, shift policy)",
                   "holds": k3.row(arm="bda-confusion")["delta_accuracy"] < -0.05,
                   "detail": f"Δ confusion {k3.row(arm='bda-confusion')['delta_accuracy']:+.3f}; "
                             f"expected-accuracy Δ one-coin "
                             f"{k3.row(arm='bda-per-agent')['delta_expected_accuracy']:+.3f}, "
                             f"stacking {k3.row(arm='stacking')['delta_expected_accuracy']:+.3f}"})
    cells = [c for c in trunc if c.endswith(f"contagion {CONTAGION:g} relent {RELENT:g}")]
    per_cell = {c: trunc[c].row(arm="bda-per-agent")["delta_accuracy"] for c in cells}
    checks.append({"check": "with contagion on, round-0 truncation is more accurate under "
                            "attack than the full trace (one-coin, every attacked cell, relenting "
                            "adversaries)",
                   "holds": all(d < 0 for d in per_cell.values()),
                   "detail": "; ".join(f"{c}: Δ(full−r0) {d:+.3f}" for c, d in per_cell.items())})
    all_pairs = [(c, a, trunc[c].row(arm=a)["delta_accuracy"]) for c in cells for a in arms]
    n_r0 = sum(d < 0 for _, _, d in all_pairs)
    checks.append({"check": "round 0 more accurate, contagion-on cells × arms (paper: 11 of 12)",
                   "holds": n_r0 == len(all_pairs),
                   "detail": f"{n_r0} of {len(all_pairs)}: "
                             + ", ".join(f"{c.split()[0]}/{a} {d:+.3f}"
                                         for c, a, d in all_pairs)})
    c = shift.plot["bda-confusion"]
    checks.append({"check": "policy shift: within-policy controls beat shifts for the confusion",
                   "holds": c["A->A"] > c["B->A"] and c["B->B"] > c["A->B"],
                   "detail": ", ".join(f"{k} {v:.3f}" for k, v in c.items())})
    w = {(s["council"], s["seat"]): s["weight"] for s in weak.tables["seats"]}
    ratio = abs(w["mediocre", 2]) / max(abs(w["mediocre", 0]), abs(w["mediocre", 1]))
    acc = {(r["council"], r["arm"]): r["accuracy"] for r in weak.table}
    checks.append({"check": "weak seat: mediocre seat shrunk toward zero weight, BDA still beats "
                            "plurality",
                   "holds": ratio < 0.5 and acc["mediocre", "bda-per-agent"]
                   > acc["mediocre", "majority"],
                   "detail": f"abs(w_mediocre) / max abs(w_genuine) = {ratio:.2f}; per-agent "
                             f"{acc['mediocre', 'bda-per-agent']:.3f} vs majority "
                             f"{acc['mediocre', 'majority']:.3f}"})
    return checks


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=None,
                    help="JSON Lines file of finished studies (an interrupted run resumes)")
    args = ap.parse_args()
    main(args.seed, args.cache)
