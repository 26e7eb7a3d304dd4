"""Evidence windows over deliberation rounds ([BDA] Appendix E.2, "Deliberation rounds",
Table 8), written to JSON, docs and a figure: the library's full ``round-window`` preset
(``bda_jax.adversarial.run_study``; ``bda study round-window`` runs the same).

The paper's binary regime (seats .74/.68/.68, 3 rounds, 1,500 questions x 3 generation seeds):
the traces truncated to <= round 0, <= round 1 and the full trace (<= round 2), every arm
(majority, BDA per-agent, BDA confusion) refit leak-free on each window with the same outer
folds and ties; the decisions each window changes against round 0 (fixed, broken, net, with a
cluster-bootstrap interval of fix / break); and the full-trace fit applied to the truncated
windows, the comparison the paper warns reports "a spurious threefold calibration gain".

Run: ``python -m benchmarks.study_round_window [--seed S] [--cache PATH]`` (well under a CPU-
minute); writes benchmarks/results/study_round_window.json, docs/results-round-window.md and
docs/figures/results-round-window.png.
"""
from __future__ import annotations


from bda_jax.adversarial import run_study
from benchmarks import study_pages as pages

NAME, PAGE = "round_window", "round-window"
ARM = "bda-per-agent"
#: [BDA] Table 8 (BDA per-agent, binary pool of 4,500 trials): window -> (accuracy, ECE_em).
PAPER = {"<= round 0": (0.748, 0.044), "<= round 1": (0.754, 0.035), "full": (0.751, 0.044)}
PAPER_FLIPS = {"changed": 353, "fix": 185, "break": 168, "net": 17, "n": 4500}


def claims(study) -> list[dict]:
    refit = {w: study.row(window=w, protocol="refit", arm=ARM) for w in study.params["windows"]}
    acc = [r["accuracy"] for r in refit.values()]
    ece = [r["ece_em"] for r in refit.values()]
    full = refit["full"]
    out = [{"claim": "leak-free per-window refitting leaves accuracy flat (paper: 0.748, 0.754, "
                     "0.751)",
            "holds": max(acc) - min(acc) <= 0.01,
            "detail": "accuracy " + ", ".join(f"{a:.3f}" for a in acc)},
           {"claim": "... and calibration flat (paper ECE_em: 0.044, 0.035, 0.044)",
            "holds": max(ece) - min(ece) <= 0.02,
            "detail": "ECE_em " + ", ".join(f"{e:.3f}" for e in ece)},
           {"claim": "binary deliberation is roughly decision-neutral: the fix/break interval "
                     "holds 1 (paper: 185:168, net +17 of 353 changed)",
            "holds": full["ci_low"] is not None and full["ci_low"] <= 1 <= full["ci_high"],
            "detail": f"{full['changed']} changed: {full['fix']} fixed, {full['break']} broken, "
                      f"net {full['net']:+d}/{full['n']}, fix/break "
                      f"{pages.f3(full['fix_per_break'], 2)} [{pages.f3(full['ci_low'], 2)}, "
                      f"{pages.f3(full['ci_high'], 2)}]"}]
    fit0 = study.rows(window="<= round 0", protocol="full-trace fit", arm=ARM)
    if fit0:
        spurious = fit0[0]["ece_em"] / full["ece_em"]
        honest = refit["<= round 0"]["ece_em"] / full["ece_em"]
        out.append({"claim": "a full-trace-fitted prior applied to truncated traces reports a "
                             "spurious (about threefold) calibration gain from the rounds",
                    "holds": spurious >= 2.5 and fit0[0]["ece_em"] > refit["<= round 0"]["ece_em"],
                    "detail": f"round-0 ECE_em {fit0[0]['ece_em']:.3f} with the full-trace fit "
                              f"vs {full['ece_em']:.3f} on the full trace ({spurious:.1f}x); "
                              f"refit leak-free, round 0 is {refit['<= round 0']['ece_em']:.3f} "
                              f"({honest:.1f}x)"})
    return out


def reading(study) -> list[str]:
    """Where the simulator departs from the paper, with this run's numbers."""
    r0 = study.row(window="<= round 0", protocol="refit", arm=ARM)
    full = study.row(window="full", protocol="refit", arm=ARM)
    fit0 = study.rows(window="<= round 0", protocol="full-trace fit", arm=ARM)
    text = ("The simulator's later rounds carry more information than the live binary "
            "council's: contagion is off in this clean regime and a seat's later moves follow "
            "its own reliability, so the leak-free refit gains accuracy from the rounds "
            f"({r0['accuracy']:.3f} → {full['accuracy']:.3f}) where the paper's was flat "
            "(docs/results-controls.md shows the reverse under a coalition with contagion), "
            f"and calibration too (ECE_em {r0['ece_em']:.3f} → {full['ece_em']:.3f}, "
            f"{r0['ece_em'] / full['ece_em']:.1f}x).")
    if fit0:
        text += (" The leak the paper warns about reproduces on top of that: a prior fitted on "
                 "the full traces expects the full trace's evidence, so round 0 read with it "
                 f"has ECE_em {fit0[0]['ece_em']:.3f}, and the rounds seem to buy a "
                 f"{fit0[0]['ece_em'] / full['ece_em']:.1f}x calibration gain, "
                 f"{fit0[0]['ece_em'] / r0['ece_em']:.1f} times the real one.")
    return [text, ""]


def main(seed: int = 0, cache=None, *, root=pages.ROOT, quick: bool = False, **overrides):
    clock = pages.Clock()
    run = run_study(PAGE, quick=quick, seed=seed, cache=cache, progress=pages.progress,
                    **overrides)
    study, cfg = run.study, run.config
    files = pages.paths(root, NAME, PAGE)
    study.plot_png(files["figure"])
    checks = claims(study)
    doc = pages.document(NAME, seed, cfg, clock, quick=quick, result=study.to_json(),
                         paper={"windows": PAPER, "flips": PAPER_FLIPS}, claims=checks)
    regime = (f"Regime: the paper's binary council, seats .74/.68/.68, 3 rounds, "
              f"{cfg['n_questions']:,} questions x {cfg['seeds_per_question']} seeds "
              f"({study.params['n_labeled']:,} labeled tasks), {cfg['folds']} outer folds "
              "grouped by question, every training task labeled; fix / break interval: "
              f"cluster bootstrap over questions, {cfg['n_resamples']:,} resamples.")
    md = pages.header("Evidence windows over deliberation rounds ([BDA] Table 8)",
                      "study_round_window", doc, files, root,
                      "`bda_jax.adversarial.round_windows` (`bda study round-window`)", regime)
    rows = []
    for w, (pa, pe) in PAPER.items():
        r = study.row(window=w, protocol="refit", arm=ARM)
        changed = "—" if r["changed"] is None else (
            f"{r['changed']}: {r['fix']} fixed, {r['break']} broken, net {r['net']:+d}/{r['n']}"
            + ("" if r["fix_per_break"] is None else
               f" (fix/break {r['fix_per_break']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}])"))
        paper_changed = "—" if w == "<= round 0" else (
            "net +17/4500 (353: 185 fixed, 168 broken)" if w == "full" else "vs. round 0: +")
        rows.append([w if w != "full" else "<= round 2 (full)", f"{r['accuracy']:.3f} ({pa:.3f})",
                     f"{r['ece_em']:.3f} ({pe:.3f})", changed, paper_changed])
    md += ["## The paper's claims", "",
           *pages.md_table(["claim", "holds here", "ours"],
                           [[c["claim"], "yes" if c["holds"] else "**no**", c["detail"]]
                            for c in checks]), "",
           "## Table 8 side by side: BDA per-agent, ours (paper)", "",
           "(The paper's ≤ round 1 cell of the last column is cut off in its text.)", "",
           *pages.md_table(["evidence window", "acc.", "ECE_em", "decisions changed vs round 0",
                            "paper"], rows), "",
           "## Every arm and protocol", "",
           "`refit`: every arm fitted leak-free on the window; `full-trace fit`: fitted on the "
           "full traces of the training folds, applied to the held-out fold's truncated "
           "traces. Majority reads round-0 votes on every window.", "",
           study.to_markdown(),
           "## Reading", "",
           *reading(study)]
    pages.write(files, doc, "\n".join(md))
    print("\n".join(md))
    return doc


if __name__ == "__main__":
    pages.run_cli(main, __doc__)
