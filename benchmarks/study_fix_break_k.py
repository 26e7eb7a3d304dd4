"""The fix/break ratio of deliberation as a function of K ([BDA] Appendix E.4, Figure 6),
written to JSON, docs and a figure: the library's full ``fix-break-k`` preset
(``bda_jax.adversarial.run_study``; ``bda study fix-break-k`` runs the same) plus the real
councils.

1. Simulated councils of the paper's seats (.74/.68/.68, 3 rounds), 1,500 questions x 3
   generation seeds at each K in 2..6: BDA per-agent and the confusion model refitted
   leak-free on round 0 and on the full trace (same folds and ties); fix = wrong on round 0,
   right on the full trace; break = the reverse; a cluster-bootstrap interval of fix / break.
2. Real councils (read in place from ../shared/data or $BDA_SHARED_DATA; skipped, and said so,
   when absent): DASE GPQA (K = 4) and AIME (open answers), Du et al. GSM8K and arithmetic
   (open answers); BDA per-agent and the tempered one-coin.

Run: ``python -m benchmarks.study_fix_break_k [--seed S] [--cache PATH]`` (under a CPU-minute);
writes benchmarks/results/study_fix_break_k.json, docs/results-fix-break-k.md and
docs/figures/results-fix-break-k.png.
"""
from __future__ import annotations


from bda_jax.adversarial import PAPER_FIX_BREAK, fix_break_by_k, run_study
from benchmarks import study_pages as pages

NAME, PAGE = "fix_break_k", "fix-break-k"
REAL_ARMS = ["bda-per-agent", "bda-tempered"]
PAPER_NAMES = {2: "binary", 3: "PubMedQA", 4: "MMLU"}


def claims(sim, real) -> list[dict]:
    rows = sim.rows(arm="bda-per-agent")
    ratios = [(r["k_max"], r["fix_per_break"]) for r in rows]
    rising = all(b[1] is not None and a[1] is not None and b[1] >= a[1]
                 for a, b in zip(ratios, ratios[1:4]))
    out = [{"claim": "the fix/break ratio rises with K (paper: 1.10, 1.20, 1.61 at K = 2, 3, 4)",
            "holds": rising,
            "detail": "simulated, BDA per-agent: " + ", ".join(
                f"K={k} {'—' if v is None else f'{v:.2f}'}" for k, v in ratios)}]
    if real is not None:
        gp = real.rows(council="DASE GPQA", arm="bda-per-agent")
        if gp:
            r = gp[0]
            out.append({"claim": "... on a real K = 4 council the rounds fix more than they "
                                 "break (paper MMLU: 82:51, 1.61)",
                        "holds": r["ci_low"] is not None and r["ci_low"] > 1,
                        "detail": f"DASE GPQA {r['fix']}:{r['break']}, "
                                  f"{r['fix_per_break']:.2f} [{r['ci_low']:.2f}, "
                                  f"{r['ci_high']:.2f}]"})
    return out


def main(seed: int = 0, cache=None, *, root=pages.ROOT, quick: bool = False, real: bool = True,
         **overrides):
    clock = pages.Clock()
    run = run_study(PAGE, quick=quick, seed=seed, cache=cache, progress=pages.progress,
                    **overrides)
    sim, cfg = run.study, run.config
    files = pages.paths(root, NAME, PAGE)
    councils = pages.real_councils() if real else {}
    live = None
    if councils:
        live = fix_break_by_k({"DASE GPQA": councils["dase"]["GPQA"],
                               "DASE AIME": councils["dase"]["AIME"],
                               "Du GSM8K": councils["du"]["GSM8K"],
                               "Du arithmetic": councils["du"]["arithmetic"]}, REAL_ARMS,
                              folds=cfg["folds"], seed=seed, n_resamples=cfg["n_resamples"],
                              cache=None if cache is None else f"{cache}.real",
                              progress=pages.progress)
    sim.plot_png(files["figure"], others=[] if live is None else [live])
    checks = claims(sim, live)
    doc = pages.document(NAME, seed, cfg, clock, quick=quick, result=sim.to_json(),
                         real=None if live is None else live.to_json(),
                         paper=[{"k": k, "dataset": PAPER_NAMES[k], "fix": f, "break": b,
                                 "fix_per_break": round(f / b, 2)}
                                for k, f, b in PAPER_FIX_BREAK], claims=checks)
    regime = (f"Regime: simulated councils of the paper's seats .74/.68/.68, 3 rounds, "
              f"{cfg['n_questions']:,} questions x {cfg['seeds_per_question']} seeds at K = "
              + ", ".join(map(str, cfg["k_grid"])) + f"; {cfg['folds']} outer folds grouped by "
              "question, every training task labeled; each arm refitted on round 0 and on the "
              "full trace; interval: cluster bootstrap over questions, "
              f"{cfg['n_resamples']:,} resamples.")
    md = pages.header("Fix/break of deliberation as a function of K ([BDA] Appendix E.4, "
                      "Figure 6)", "study_fix_break_k", doc, files, root,
                      "`bda_jax.adversarial.fix_break_by_k` (`bda study fix-break-k` runs the "
                      "simulated part)", regime)
    side = []
    for k, f, b in PAPER_FIX_BREAK:
        ours = sim.rows(council=f"K={k}", arm="bda-per-agent")
        side.append([k, PAPER_NAMES[k], f"{f}:{b} ({f / b:.2f})",
                     f"{ours[0]['fix']}:{ours[0]['break']} ({pages.f3(ours[0]['fix_per_break'], 2)})"
                     if ours else "—"])
    md += ["## The paper's claim", "",
           *pages.md_table(["claim", "holds here", "ours"],
                           [[c["claim"], "yes" if c["holds"] else "**no**", c["detail"]]
                            for c in checks]), "",
           "## Side by side: fix:break (ratio), BDA per-agent", "",
           *pages.md_table(["K", "paper dataset", "paper (live)", "ours (simulated)"], side), "",
           "## Simulated councils", "", sim.to_markdown()]
    if live is not None:
        md += ["## Real councils", "", pages.REAL_SOURCES + " On open-answer sets K varies per "
               "task (the answers said), so they appear in the table, not on the K axis.", "",
               live.to_markdown()]
    else:
        md += ["Real councils: the shared data folder was not found, so only the simulated "
               "councils ran.", ""]
    md += ["## Reading", "",
           "The simulator does not reproduce the rise: past K = 2 its rounds break more "
           "decisions than they fix, for both arms. Its later rounds are conformity-driven (a "
           "seat flips toward the strongest rival with a probability set by its belief and the "
           "head count, docs/simulator.md), with nothing that makes a wrong seat likelier to "
           "be corrected at larger K; and at K > 2 a challenge counts once in every rival cell "
           "(the pseudo-observations of [BDA] §3, Eq. 4) — a likely reason, not isolated "
           "here, why the full-trace fit reads the rounds' evidence worse than the round-0 "
           "vote. The real "
           "K = 4 council (DASE GPQA) fixes far more than it breaks, as the paper's MMLU "
           "council does" + ("" if live is None else " (real councils, BDA per-agent: " + ", ".join(
               f"{r['council']} {r['fix']}:{r['break']}" for r in live.rows(arm="bda-per-agent"))
               + ")") + ": the paper's trend is a property of real deliberation that the "
           "simulator does not model. The diagnostic itself (`decision_flips`, "
           "`fix_break_by_k`) is what carries over.", ""]
    pages.write(files, doc, "\n".join(md))
    print("\n".join(md))
    return doc


if __name__ == "__main__":
    pages.run_cli(main, __doc__)
