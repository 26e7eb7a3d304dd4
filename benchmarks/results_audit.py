"""Results of the routing audit ([Audit]) run end to end with ``bda_jax.audit.audit_broadcast``
on (a) a seeded simulated confidence-routed broadcast run and (b) the one real log at hand, the
ConfMAD MMLU debate (two qwen3:8b agents, 170 problems), read as an offline replay.

Data: ../shared/data/broadcast_logs/ConfMAD (or $BDA_SHARED_DATA/broadcast_logs/ConfMAD), read in
place, never copied (the file has no license; see its SOURCE.md). When it is absent, part (b) is
skipped with a printed reason; the ConfMAD card of an earlier run, if any, is kept and
docs/results-audit-confmad.md is left as it is.

Run: ``python -m benchmarks.results_audit`` (about half a minute on 2 cores); writes
benchmarks/results/audit_confmad.json and docs/results-audit-confmad.md.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import jax

from bda_jax.audit import audit_broadcast, load_confmad, simulate_broadcast

ROOT = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("BDA_SHARED_DATA", ROOT.parent / "shared" / "data"))
CONFMAD = SHARED / "broadcast_logs" / "ConfMAD"
OUT_JSON = ROOT / "benchmarks" / "results" / "audit_confmad.json"
OUT_MD = ROOT / "docs" / "results-audit-confmad.md"
SEED, N_BOOT = 0, 2000
SIM = dict(seed=0, n_problems=300)          # simulate_broadcast defaults otherwise

CONFMAD_CARD = dict(
    protocol_name="ConfMAD debate, offline replay as confidence routing",
    protocol_version="xiaoyujian/ConfMAD c1325e5 (MMLU run of 2026-03-16)",
    paper_of_record="Lin & Hooi, Enhancing Multi-Agent Debate System Performance via Confidence "
                    "Expression, arXiv 2509.14034",
    agent_model=["qwen3:8b (Ollama)"],
    routing_rule="none at run time (fixed order Bob, James, three rounds); replayed here as "
                 "confidence argmax over each (Bob, James) round",
    tie_rule="first listed agent (Bob) wins",
    confidence_scale="integer 0-100 (length-normalized answer-token probability x 100, "
                     "fallback 50), divided by 100",
    evaluator="option index equals the gold option index",
    extraction_method="strict regex Answer:\\s*\\((\\d)\\) on the response",
    notes="Offline replay of result/MMLU/2026_03_16/23_26_30.json: no routing happened (fixed "
          "speaking order), James saw Bob's message before answering, and the poll and the "
          "public answer are one message, so commitment is not measured. Scores are "
          "length-normalized answer-token probabilities (fallback 50), not stated confidences.",
)


def _demote(markdown: str) -> str:
    """Card Markdown one heading level down, to sit inside this page."""
    return "\n".join("#" + line if line.startswith("#") else line
                     for line in markdown.splitlines())


def _metric(card: dict, name: str) -> dict:
    return next(m for m in card["metrics"] if m["name"] == name)


def _fmt(m: dict) -> str:
    """"estimate [CI] (numerator / denominator unit)", or "(over denominator unit)" when the
    numerator is not a count."""
    lo, hi = m["ci_low"], m["ci_high"]
    ci = "" if lo is None else f" [{lo:.3f}, {hi:.3f}]"
    num = m["numerator"]
    parts = (f"{num:,} / " if isinstance(num, int) else "over ") + \
        f"{m['denominator']:,} {m['unit']}"
    return f"{m['value']:.3f}{ci} ({parts})"


def run_simulated():
    log = simulate_broadcast(**SIM)
    t0 = time.time()
    report = audit_broadcast(log, seed=SEED, n_boot=N_BOOT,
                             protocol_name="simulated confidence-routed broadcast",
                             protocol_version=f"simulate_broadcast(seed={SIM['seed']}, "
                                              f"n_problems={SIM['n_problems']})",
                             agent_model=["simulated"],
                             notes="Synthetic log with known ground truth "
                                   "(bda_jax.audit.simulate_broadcast defaults).")
    return {"log": repr(log), "settings": SIM, "card": report.card.to_dict(),
            "per_tier": report.to_dict()["per_tier"], "seconds": round(time.time() - t0, 1)}


def run_confmad():
    log, rep = load_confmad(CONFMAD, parser="strict")
    t0 = time.time()
    report = audit_broadcast(log, seed=SEED, n_boot=N_BOOT, **CONFMAD_CARD)
    seconds = round(time.time() - t0, 1)
    # sensitivity: the fallback score 50 (answer tokens not located) read as "not stated"
    missing, _ = load_confmad(CONFMAD, parser="strict", fallback_as_missing=True)
    alt = audit_broadcast(missing, seed=SEED, n_boot=N_BOOT, routers=(), **CONFMAD_CARD)
    file = Path(rep.file)
    loader = rep._asdict() | {"file": str(file.relative_to(SHARED)
                                          if file.is_relative_to(SHARED) else file.name),
                              "n_clusters": len(set(log.block_cluster.tolist())),
                              "n_score_100": int((log.score == 1.0).sum())}
    return {"log": repr(log), "loader": loader, "card": report.card.to_dict(),
            "per_tier": report.to_dict()["per_tier"],
            "fallback_as_missing_card": alt.card.to_dict(), "seconds": seconds}, report


def write_doc(entry: dict, report, total: float):
    card = entry["card"]
    alt = entry["fallback_as_missing_card"]
    loader = entry["loader"]
    m = {n: _metric(card, n) for n in ("CRA", "HRWP", "PCCA (tie-aware)", "CTR", "ECE (raw)",
                                        "ECE (isotonic)", "AUROC (raw)", "AUROC (isotonic)",
                                        "router: runtime_argmax", "router: random_valid",
                                        "router: majority_vote", "router: oracle",
                                        "gap to oracle: runtime_argmax")}
    head = {n: _fmt(v) for n, v in m.items()}
    routers = ", ".join(f"{n.split(': ')[1]} {m[n]['value']:.3f}" for n in m
                        if n.startswith("router: "))
    lines = [
        "# Routing audit of the ConfMAD MMLU log",
        "",
        "Generated by `python -m benchmarks.results_audit` with `bda_jax.audit.audit_broadcast` "
        f"(seed {SEED}, {N_BOOT:,} problem-cluster bootstrap resamples) from the one real log "
        "at hand, `shared/data/broadcast_logs/ConfMAD` (read in place; it has no license, so it "
        "is neither copied nor redistributed — see its `SOURCE.md`). Numbers, the card of a "
        "simulated run and the per-tier tables are in `benchmarks/results/audit_confmad.json`. "
        f"Run time {total:.0f} s.",
        "",
        "## What the offline replay can and cannot show",
        "",
        f"The log holds {loader['n_problems']} MMLU problems debated by two `qwen3:8b` agents, "
        f"Bob and James, in a fixed order (Bob, James, three rounds): {loader['n_turns']:,} "
        f"turns, {loader['n_parsed']:,} with an option the strict parser finds "
        f"(per-turn accuracy {loader['n_correct'] / loader['n_parsed']:.3f}). Each (Bob, James) "
        "round is read as one two-candidate block and the runtime rule (argmax score, first "
        "listed wins ties) is replayed on it.",
        "",
        "* **No routing happened.** ConfMAD lets both agents speak in turn; nobody was given or "
        "denied the floor. The routing rows say what a confidence router *would* have picked "
        "from these scores, not what a router did.",
        "* **The two candidates of a block are not simultaneous.** James answers after reading "
        "Bob's message (and its confidence), so his answer and score depend on Bob's; the "
        "within-block ranking (PCCA, CTR) compares a first speaker with a respondent, not two "
        "independent polls.",
        "* **No commitment metrics.** The confidence is attached to the same message that states "
        "the answer: poll and speech are one event, so there is no poll-to-speak divergence to "
        "measure (PSDR, PSIR, PSDRg, NPCS|D and the divergence sources are absent from the "
        "card). Only answer revisions across turns could be counted, which is another question.",
        "* **The scores are not stated confidences.** They are length-normalized probabilities "
        "of the answer tokens, `round(exp(mean logprob) x 100)`, and 50 is the code's fallback "
        f"when the answer tokens were not found ({loader['n_fallback']} of "
        f"{loader['n_turns']:,} turns are exactly 50). Calibration here is calibration of a "
        f"token probability; most scores sit at 100 ({loader['n_score_100']:,} of "
        f"{loader['n_turns']:,} turns), so ties are common: CTR {head['CTR']}.",
        f"* **Small.** Only {m['PCCA (tie-aware)']['denominator']} blocks are mixed (one agent "
        "right, one wrong), so PCCA and CTR rest on those few pairs, and "
        f"{loader['n_clusters']} bootstrap clusters of 10 problems make every interval coarse.",
        "",
        "What the replay does show: the scores barely separate right from wrong answers "
        f"(AUROC {head['AUROC (raw)']}; PCCA {head['PCCA (tie-aware)']}, where 0.5 is no "
        f"signal) and overstate accuracy (raw ECE {head['ECE (raw)']}). Cross-fitted isotonic "
        f"recalibration lowers ECE to {head['ECE (isotonic)']} but cannot add ranking signal "
        f"(held-out AUROC {m['AUROC (isotonic)']['value']:.3f}: pooled over two folds whose "
        "maps differ, it need not equal the raw AUROC). The replayed argmax picks a correct "
        f"answer in most blocks (CRA {head['CRA']}; HRWP {head['HRWP']}) mainly because both "
        f"agents are usually right; expected success per block: {routers}; the replayed "
        f"argmax's gap to the oracle, with its paired interval: "
        f"{head['gap to oracle: runtime_argmax']}.",
        "",
        "Sensitivity: reading the fallback 50 as \"no score\" (those candidates leave the "
        f"calibration rows) gives raw ECE {_fmt(_metric(alt, 'ECE (raw)'))} and AUROC "
        f"{_fmt(_metric(alt, 'AUROC (raw)'))}.",
        "",
        _demote(report.to_markdown()),
        "",
    ]
    OUT_MD.write_text("\n".join(lines), encoding="utf-8")


def main():
    t_start = time.time()
    previous = json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else {}
    out = {"schema_version": 1,
           "platform": {"python": platform.python_version(), "jax": jax.__version__,
                        "backend": jax.default_backend(), "cpus": os.cpu_count()},
           "settings": {"seed": SEED, "n_boot": N_BOOT}, "cards": {}, "per_tier": {},
           "runs": {}}
    sim = run_simulated()
    out["cards"]["simulated"] = sim.pop("card")
    out["per_tier"]["simulated"] = sim.pop("per_tier")
    out["runs"]["simulated"] = sim
    print(f"simulated run audited in {sim['seconds']} s")
    entry = report = None
    if CONFMAD.is_dir():
        entry, report = run_confmad()
        out["cards"]["confmad"] = entry["card"]
        out["per_tier"]["confmad"] = entry["per_tier"]
        out["cards"]["confmad_fallback_as_missing"] = entry["fallback_as_missing_card"]
        out["runs"]["confmad"] = {k: entry[k] for k in ("log", "loader", "seconds")}
        print(f"ConfMAD audited in {entry['seconds']} s")
    else:
        reason = f"{CONFMAD} is absent (shared data not mounted); ConfMAD part skipped"
        print(reason)
        for key in ("confmad", "confmad_fallback_as_missing"):
            if key in previous.get("cards", {}):
                out["cards"][key] = previous["cards"][key]
        if "confmad" in previous.get("per_tier", {}):
            out["per_tier"]["confmad"] = previous["per_tier"]["confmad"]
        if "confmad" in previous.get("runs", {}):
            out["runs"]["confmad"] = previous["runs"]["confmad"] | {"kept_from_previous_run":
                                                                     True}
        else:
            out["runs"]["confmad"] = {"skipped": reason}
    total = time.time() - t_start
    out["seconds"] = round(total, 1)
    OUT_JSON.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    if report is not None:
        write_doc(entry, report, total)
        print(f"wrote {OUT_MD.relative_to(ROOT)}")
    print(f"wrote {OUT_JSON.relative_to(ROOT)} in {total:.0f} s")


if __name__ == "__main__":
    main()
