"""Leave-one-dataset-out transfer ([BDA] Appendix E.2, "Transfer"), written to JSON, docs and
figures: the library's full ``transfer`` preset (``bda_jax.adversarial.run_study``; ``bda study
transfer`` runs the same) plus the real councils that have several datasets.

1. Simulated claim datasets: three binary trace sets of one council (seats within .04 of
   .74/.68/.68 on each, different question-difficulty spreads), 500 questions x 3 generation
   seeds each; every arm fitted on two, scored on the third, against in-domain 5-fold CV.
2. Real councils (read in place from ../shared/data or $BDA_SHARED_DATA; skipped, and said so,
   when absent): the DASE council (Qwen3-Next-80B x 3 + Llama-3.3-70B x 2) on GPQA and AIME, and
   Du et al.'s three gpt-3.5-turbo agents on GSM8K and the arithmetic task — fit on one dataset,
   score on the other. Seats are matched by name (slot0..slot4, agent0..agent2).

Run: ``python -m benchmarks.study_transfer [--seed S] [--cache PATH]`` (under a CPU-minute);
writes benchmarks/results/study_transfer.json, docs/results-transfer.md and
docs/figures/results-transfer*.png.
"""
from __future__ import annotations


from bda_jax.adversarial import run_study, transfer_study
from benchmarks import study_pages as pages

NAME, PAGE = "transfer", "transfer"
ARM = "bda-per-agent"                      # the paper's comparison: per-agent vs majority
#: [BDA] E.2: the held-out TruthfulClaim example (per-agent, majority).
PAPER_EXAMPLE = {"accuracy": (0.791, 0.779), "ece_ew": (0.096, 0.131)}


def tally_wins(study, arm: str = ARM) -> dict:
    """On how many held-out datasets ``arm`` beats the reference on accuracy, ECE_ew and
    Brier, out of how many."""
    rows = study.rows("vs_reference", arm=arm)
    return {"n": len(rows), **{m: sum(r[f"beats_on_{m}"] for r in rows)
                               for m in ("accuracy", "ece_ew", "brier")}}


def group_section(title: str, study, figure: str, note: str) -> list[str]:
    w = tally_wins(study)
    return [f"## {title}", "", note, "",
            f"Per-agent beats majority on ECE_ew on {w['ece_ew']} of {w['n']} held-out "
            f"datasets, on Brier on {w['brier']} of {w['n']}, on accuracy on {w['accuracy']} "
            f"of {w['n']} (paper, three claim datasets: 3, 3 and 2 of 3).", "",
            f"![{title}](figures/{figure})", "", study.to_markdown()]


def reading(groups) -> list[str]:
    """What carries over, with this run's numbers."""
    sim = groups["simulated claims"]
    w = tally_wins(sim)
    text = [f"On the simulated claim datasets the pattern is the paper's: per-agent beats "
            f"majority on ECE_ew on {w['ece_ew']} of {w['n']} held-out datasets and on accuracy "
            f"on {w['accuracy']}, and its transferred calibration is close to its in-domain "
            "one: the fitted profile is the seats'."]
    real = [(g, s) for g, s in groups.items() if g != "simulated claims"]
    if real:
        cells, n_acc, n_ece, n = [], 0, 0, 0
        for g, s in real:
            w = tally_wins(s)
            n_acc, n_ece, n = n_acc + w["accuracy"], n_ece + w["ece_ew"], n + w["n"]
            for d in s.params["datasets"]:
                t = s.row(dataset=d, protocol="transfer", arm=ARM)
                m = s.row(dataset=d, protocol="transfer", arm="majority")
                inn = s.rows(dataset=d, protocol="in-domain", arm="bda-tempered")
                cells.append(f"{d}: accuracy {t['accuracy']:.3f} vs {m['accuracy']:.3f}, "
                             f"ECE_ew {t['ece_ew']:.3f} vs {m['ece_ew']:.3f}"
                             + (f" (bda-tempered in-domain {inn[0]['ece_ew']:.3f})" if inn
                                else ""))
        text.append(f"On the real councils a profile fitted on one task type keeps its "
                    f"accuracy edge over the round-0 plurality on {n_acc} of {n} held-out "
                    f"datasets, its calibration edge on only {n_ece}: the datasets differ in "
                    "answer space (GPQA's four letters against AIME's open numbers; GSM8K "
                    "against arithmetic), a seat's moves carry a different weight of evidence "
                    "on each, and an in-domain fit with a temperature (bda-tempered) recovers "
                    "most of the calibration — the paper's cross-domain remark seen the other "
                    "way round (on PubMedQA the calibration ordering held and the accuracy edge "
                    "did not). Per-agent transferred vs majority: " + "; ".join(cells) + ".")
    return [" ".join(text[:1]), "", *(text[1:])]


def main(seed: int = 0, cache=None, *, root=pages.ROOT, quick: bool = False, real: bool = True,
         **overrides):
    clock = pages.Clock()
    run = run_study(PAGE, quick=quick, seed=seed, cache=cache, progress=pages.progress,
                    **overrides)
    sim, cfg = run.study, run.config
    files = pages.paths(root, NAME, PAGE)
    sim.plot_png(files["figure"], title="Simulated claim datasets: leave one out")
    groups = {"simulated claims": sim}
    councils = pages.real_councils() if real else {}
    for key, label in (("dase", "DASE council"), ("du", "Du et al. gpt-3.5 council")):
        if key in councils:
            study = transfer_study(councils[key], cfg["arms"], seed=seed, folds=cfg["folds"],
                                   n_resamples=cfg["n_resamples"], progress=pages.progress,
                                   cache=None if cache is None else f"{cache}.{key}")
            study.plot_png(files["figure"].with_name(f"results-transfer-{key}.png"),
                           title=f"{label}: fit on one dataset, score on the other")
            groups[label] = study
    wins = {g: tally_wins(s) for g, s in groups.items()}
    ex = sim.row(dataset="claims-A", protocol="transfer", arm=ARM)
    ref = sim.row(dataset="claims-A", protocol="transfer", arm="majority")
    doc = pages.document(
        NAME, seed, cfg, clock, quick=quick,
        result={g: s.to_json() for g, s in groups.items()},
        wins=wins, paper={"wins": {"n": 3, "accuracy": 2, "ece_ew": 3, "brier": 3},
                          "example": PAPER_EXAMPLE},
        real_data="found" if len(groups) > 1 else "not found: real councils skipped")
    regime = (f"Regime: simulated claim datasets of {cfg['n_questions']:,} questions x "
              f"{cfg['seeds_per_question']} generation seeds each; every supervised arm fitted "
              "on all labeled tasks of the other datasets (hyperparameters by inner CV inside "
              f"them), scored on the held-out one; in-domain: {cfg['folds']}-fold CV within "
              "the dataset; Δ: paired cluster bootstrap against majority, "
              f"{cfg['n_resamples']:,} resamples.")
    md = pages.header("Leave-one-dataset-out transfer ([BDA] Appendix E.2)", "study_transfer",
                      doc, files, root, "`bda_jax.adversarial.transfer_study` "
                      "(`bda study transfer` runs the simulated part)", regime)
    rows = [[g, f"{w['ece_ew']}/{w['n']}", f"{w['brier']}/{w['n']}", f"{w['accuracy']}/{w['n']}"]
            for g, w in wins.items()]
    md += ["## The paper's claim", "",
           "[BDA]: under leave-one-dataset-out (fit reliabilities on two claim datasets, test on "
           "the third) per-agent beats majority on ECE and Brier on all three held-out datasets "
           "and on accuracy on two of three — e.g. TruthfulClaim 0.791 vs 0.779 accuracy, "
           "0.096 vs 0.131 ECE: the reliability profile is a property of the agents. "
           "Cross-domain transfer to PubMedQA keeps the calibration ordering, not the accuracy "
           "edge.", "",
           *pages.md_table(["datasets", "per-agent beats majority: ECE_ew", "Brier", "accuracy"],
                           [["[BDA] claim datasets", "3/3", "3/3", "2/3"]] + rows), "",
           f"Our held-out claims-A, beside the paper's TruthfulClaim: accuracy "
           f"{ex['accuracy']:.3f} vs {ref['accuracy']:.3f} (paper 0.791 vs 0.779), ECE_ew "
           f"{ex['ece_ew']:.3f} vs {ref['ece_ew']:.3f} (paper 0.096 vs 0.131).", ""]
    md += group_section("Simulated claim datasets", sim, files["figure"].name,
                        "Three binary trace sets of one council: claims-A .74/.68/.68 "
                        "(difficulty sd 1.0), claims-B .70/.72/.66 (0.7), claims-C .78/.66/.70 "
                        "(1.3). A seat's accuracy moves by at most .04 between datasets.")
    for g in groups:
        if g == "simulated claims":
            continue
        key = "dase" if g.startswith("DASE") else "du"
        md += ["", *group_section(f"Real: {g}", groups[g], f"results-transfer-{key}.png",
                                  pages.REAL_SOURCES)]
    if len(groups) == 1:
        md += ["", "Real councils: the shared data folder was not found, so only the simulated "
               "datasets ran."]
    md += ["", "## Reading", "", *reading(groups), ""]
    pages.write(files, doc, "\n".join(md))
    print("\n".join(md))
    return doc


if __name__ == "__main__":
    pages.run_cli(main, __doc__)
