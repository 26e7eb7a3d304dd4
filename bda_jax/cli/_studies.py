"""``bda simulate`` and ``bda study``."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Optional

import typer

from ._app import (
    STUDIES,
    _check_out,
    _data_error,
    _dumps,
    _emit_json,
    _handled,
    _json_option,
    _jsonable,
    _md_table,
    _parse_arms,
    _parse_floats,
    _progress,
    _progress_option,
    _seed_option,
    _write_text,
    app,
)


def _parse_adversaries(text: Optional[str]):
    if text is None or not text.strip():
        return None
    out = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        seat, _, rate = part.partition(":")
        try:
            out[int(seat)] = float(rate) if rate else 1.0
        except ValueError:
            raise _data_error(f"expected SEAT or SEAT:RATE items, got {part!r}",
                              "--adversaries") from None
    return out


def _parse_candidates(text: str):
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return (lo, hi)
        return int(text)
    except ValueError:
        raise _data_error(f"expected K or MIN-MAX, got {text!r}", "--candidates") from None


@app.command()
@_handled
def simulate(
    questions: int = typer.Option(..., "--questions", help="Number of questions Q."),
    out: Path = typer.Option(..., "--out", help="Trace file to write (JSON Lines)."),
    seats: str = typer.Option("0.74,0.68,0.68", "--seats",
                              help="Comma-separated round-0 accuracy of each seat."),
    adversaries: Optional[str] = typer.Option(
        None, "--adversaries", help="Adversarial seats: '0,1' (always comply) or "
                                    "'0:0.6,1:0.6' (compliance per task)."),
    candidates: str = typer.Option("2", "--candidates", help="K, or MIN-MAX per question."),
    rounds: int = typer.Option(3, "--rounds", help="Deliberation rounds R."),
    seeds_per_question: int = typer.Option(1, "--seeds-per-question",
                                           help="Runs per question (one cluster)."),
    contagion: float = typer.Option(0.0, "--contagion", help="Per-move contagion rate."),
    target: str = typer.Option("distractor", "--target",
                               help="Coalition answer: distractor or shift."),
    seed: int = _seed_option("Simulation seed (equal seeds give identical traces)."),
    progress: bool = _progress_option(),
    json_out: bool = _json_option(),
) -> None:
    """Simulate a deliberating council (correlated errors, contagion, adversaries) to traces."""
    _check_out(out, "--out")
    from .. import write_traces
    from ..simulate import simulate_council

    reliabilities = _parse_floats(seats, "--seats")
    with _progress(progress and not json_out, f"simulating {questions} questions"):
        traces = simulate_council(seed, questions, reliabilities,
                                  n_candidates=_parse_candidates(candidates), n_rounds=rounds,
                                  seeds_per_question=seeds_per_question, contagion=contagion,
                                  adversaries=_parse_adversaries(adversaries),
                                  adversary_target=target)
        write_traces(traces, out)
    agents = list(dict.fromkeys(m.agent for t in traces[:1] for m in t.moves))
    summary = {"command": "simulate", "out": str(out), "n_traces": len(traces),
               "n_questions": questions, "agents": agents, "reliabilities": reliabilities,
               "adversaries": _parse_adversaries(adversaries), "seed": seed}
    if json_out:
        _emit_json(summary)
    else:
        typer.echo(f"{len(traces)} traces ({questions} questions x {seeds_per_question} seeds, "
                   f"seats {', '.join(agents)}) written to {out}")


# ============================================================================ study

_PAPER_R = [0.74, 0.68, 0.68]


def _study_dose_response(seed, quick, questions, cache, bar, arm_override=None):
    from ..adversarial import dose_response
    from ..simulate import simulate_council
    if quick:
        n, spq = questions or 150, 1
        arms = ("majority", "bda-per-agent", "bda-confusion")
        p_grid, regimes = (0.0, 0.5, 1.0), (("persistent", 1), ("persistent", 2))
    else:
        n, spq = questions or 1500, 3
        arms = ("majority", "bda-shared", "bda-per-agent", "bda-confusion")
        p_grid = (0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0)
        regimes = (("persistent", 1), ("persistent", 2), ("rotating", 2))
    arms = tuple(arm_override or arms)
    cells = 1 + sum(1 for _ in regimes for p in p_grid if p != 0)
    bar.update(description="dose-response", total=cells)
    traces = simulate_council(seed, n, _PAPER_R, seeds_per_question=spq)
    dr = dose_response(traces, arms, p_grid, regimes, folds=5, seed=seed,
                       cache=None if cache is None else str(cache),
                       progress=lambda r, p, s: bar.advance(description=f"{r} p={p:g}"))
    res = {"study": "dose-response", "setup": {"n_questions": n, "seeds_per_question": spq,
                                               "reliabilities": _PAPER_R, "seed": seed},
           "result": dr.to_json(), "accuracy": dr.pivot("accuracy"),
           "ece_ew": dr.pivot("ece_ew")}
    md = ("## Accuracy\n\n" + dr.to_markdown("accuracy") + "\n\n## ECE_ew\n\n"
          + dr.to_markdown("ece_ew"))
    return res, md


def _study_cache(cache, name, *parts):
    from .. import __version__
    from .._core.cache import CellCache, fingerprint
    if cache is None:
        return None
    return CellCache(cache, fingerprint("bda study", name, *parts, __version__))


def _cell(store, key, compute):
    return compute() if store is None else store.get_or_compute(key, compute)


def _study_sleeper(seed, quick, questions, cache, bar, arm_override=None):
    from ..adversarial import F_GRID, sleeper_study
    if quick:
        seeds, f_grid, n = (seed,), (0.0, 0.2, 0.5, 1.0), questions or 60
        arms = ("majority", "bda-per-agent", "bda-confusion")
    else:
        seeds, f_grid, n = (seed, seed + 1, seed + 2), tuple(F_GRID), questions or 1500
        arms = ("majority", "bda-per-agent", "bda-confusion", "stacking", "gated-vote")
    arms = tuple(arm_override or arms)
    store = _study_cache(cache, "sleeper", seeds, f_grid, n, arms)
    bar.update(description="sleeper", total=len(seeds))
    runs = {}
    for s in seeds:
        bar.update(description=f"sleeper seed {s}")
        runs[str(s)] = _cell(store, f"seed={s}", lambda s=s: _jsonable(sleeper_study(
            seed=s, f_grid=f_grid, n_questions=n, arms=arms).to_json()))
        bar.advance()
    rows = []
    for f in f_grid:
        row = {"f": f}
        for arm in arms:
            vals = [r["accuracy"] for run in runs.values() for r in run["table"]
                    if r["arm"] == arm and math.isclose(r["f"], f)]
            vals = [v for v in vals if v is not None]
            row[arm] = sum(vals) / len(vals) if vals else None
        ratios = [r["drift_ratio"] for run in runs.values() for r in run["table"]
                  if r["arm"] == arms[0] and math.isclose(r["f"], f)]
        ratios = [v for v in ratios if v is not None]
        row["drift_ratio"] = sum(ratios) / len(ratios) if ratios else None
        rows.append(row)
    res = {"study": "sleeper", "setup": {"seeds": list(seeds), "f_grid": list(f_grid),
                                         "n_questions": n, "arms": list(arms)},
           "mean_accuracy": rows, "per_seed": runs}
    md = ("Deployment accuracy (mean over study seeds) by calibration contamination f, and the "
          "row-drift monitor's ratio to its noise floor:\n\n" + _md_table(rows))
    return res, md


def _study_controls(seed, quick, questions, cache, bar, arm_override=None):
    from ..adversarial import (
        label_permutation_control,
        policy_shift,
        recalibration_under_attack,
        round0_truncation,
        weak_seat_swap,
    )
    from ..simulate import Behavior, simulate_council
    n, spq = (questions or 100, 1) if quick else (questions or 1500, 3)
    arms = ("bda-per-agent", "bda-confusion") if quick else \
        ("bda-per-agent", "bda-confusion", "stacking")
    arms = tuple(a for a in (arm_override or arms) if a != "majority")
    if not arms:
        raise _data_error("the control studies need an arm other than majority", "--arms")
    adv = {0: 0.9, 1: 0.9}

    def council(attacked, contagion=0.0, **kw):
        return simulate_council(seed, n, _PAPER_R, seeds_per_question=spq,
                                adversaries=adv if attacked else None, contagion=contagion, **kw)

    steps = {
        "label_permutation k=2": lambda: label_permutation_control(
            council(True, 0.3), arms, seed=seed),
        "round0_truncation k=2 contagion 0.3": lambda: round0_truncation(
            council(True, 0.3, behavior=Behavior(adversary_relent=0.2)), arms, seed=seed),
        "recalibration_under_attack": lambda: recalibration_under_attack(
            {"clean": council(False), "k=2": council(True, 0.3)}, ("majority",) + arms,
            label_budget=25, seed=seed),
        "policy_shift": lambda: policy_shift(
            seed=seed, n_questions=n, reliabilities=_PAPER_R, n_candidates=3, adversaries=adv,
            seeds_per_question=spq, contagion=0.3, arms=arms),
        "weak_seat_swap": lambda: weak_seat_swap(
            seed, n, _PAPER_R, seat=2, mediocre=0.52, adversary_rate=(0.25, 0.5),
            seeds_per_question=spq, arms=("majority",) + arms),
    }
    if not quick:
        steps = {"label_permutation clean": lambda: label_permutation_control(
            council(False), arms, seed=seed), **steps}
    store = _study_cache(cache, "controls", seed, n, spq, arms)
    bar.update(description="controls", total=len(steps))
    out, md = {}, []
    for name, compute in steps.items():
        bar.update(description=f"controls: {name}")
        out[name] = _cell(store, name, lambda c=compute: _jsonable(c().to_json()))
        md += [f"## {name}", "", _md_table(out[name]["table"]), ""]
        bar.advance()
    res = {"study": "controls", "setup": {"n_questions": n, "seeds_per_question": spq,
                                          "arms": list(arms), "seed": seed}, "studies": out}
    return res, "\n".join(md)


def _study_simulated(seed, quick, questions, cache, bar, arm_override=None):
    import numpy as np

    from .. import evaluate, tally
    from ..aggregators import CouncilDawidSkene
    from ..simulate import simulate_council
    n, spq = (questions or 150, 1) if quick else (questions or 1500, 3)
    arms = ["majority", "bda-per-agent", "bda-confusion", "ds-em", "iso:majority"] if quick \
        else ["majority", "bda-shared", "bda-per-agent", "bda-tempered", "bda-confusion",
              "stacking", "gated-vote", "ds-em", "verbalized", "best-member", "iso:majority"]
    arms = list(arm_override or arms)
    cols = ("arm", "accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "auroc", "n")

    def binary(budget):
        traces = simulate_council(seed, n, _PAPER_R, seeds_per_question=spq)
        ev = evaluate(traces, arms, folds=5, label_budget=budget, seed=seed, n_resamples=1000)
        return _jsonable(ev.to_json())

    def k4():
        traces = simulate_council(seed + 1, n, _PAPER_R, n_candidates=4, seeds_per_question=spq)
        return _jsonable(evaluate(traces, ["bda-per-agent", "bda-tempered", "bda-confusion"],
                                  folds=5, seed=seed, n_resamples=1000).to_json())

    def coalition():
        counts = tally(simulate_council(seed + 2, n, [0.75, 0.75, 0.75], adversaries=[0, 1]))
        gold = np.asarray(counts.gold)
        return {init: float(np.mean(CouncilDawidSkene(init=init).fit(counts).predict(counts) == gold))
                for init in ("majority", "spectral", "anti")}

    steps = {"binary_full_labels": lambda: binary(None),
             "binary_label_budget_25": lambda: binary(25),
             "k4_tempering": k4, "ds_em_coalition_k2": coalition}
    store = _study_cache(cache, "simulated", seed, n, spq, arms)
    bar.update(description="simulated", total=len(steps))
    out, md = {}, []
    for name, compute in steps.items():
        bar.update(description=f"simulated: {name}")
        out[name] = _cell(store, name, compute)
        if name == "ds_em_coalition_k2":
            md += [f"## {name}", "", _md_table([{"init": k, "accuracy": v}
                                                for k, v in out[name].items()]), ""]
        else:
            md += [f"## {name}", "", _md_table(out[name]["table"], list(cols)), ""]
        bar.advance()
    res = {"study": "simulated", "setup": {"n_questions": n, "seeds_per_question": spq,
                                           "arms": arms, "seed": seed}, "studies": out}
    return res, "\n".join(md)


_STUDY_FUNCS = {"dose-response": _study_dose_response, "sleeper": _study_sleeper,
                "controls": _study_controls, "simulated": _study_simulated}


@app.command()
@_handled
def study(
    name: str = typer.Argument(..., help="dose-response, sleeper, controls or simulated."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes (minutes, not hours)."),
    questions: Optional[int] = typer.Option(None, "--questions",
                                            help="Override the number of simulated questions."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Resumable cell cache (JSON "
                                                               "Lines); rerun to resume."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the study JSON here."),
    markdown: Optional[Path] = typer.Option(None, "--markdown",
                                            help="Write the study's Markdown tables here."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Comma-separated arms instead of "
                                                            "the study's own."),
    seed: int = _seed_option(),
    progress: bool = _progress_option(),
    json_out: bool = _json_option(),
) -> None:
    """Adversarial and simulated-council studies ([BDA] Appendix F) on simulated councils."""
    for path, flag in ((out, "--out"), (markdown, "--markdown"), (cache, "--cache")):
        _check_out(path, flag)
    key = name.strip().lower().replace("_", "-")
    if key not in _STUDY_FUNCS:
        raise _data_error(f"unknown study {name!r}; expected one of {', '.join(STUDIES)}",
                          "NAME")
    if questions is not None and questions < 6:
        raise _data_error("--questions must be at least 6", "--questions")
    arm_override = None if arms is None else _parse_arms(arms)
    t0 = time.perf_counter()
    with _progress(progress and not json_out, key, total=1) as bar:
        res, md = _STUDY_FUNCS[key](seed, quick, questions, cache, bar, arm_override)
    res = {"schema_version": 1, "kind": "bda_jax.study", "quick": quick, **res,
           "seconds": time.perf_counter() - t0}
    if out is not None:
        _write_text(out, _dumps(res, indent=1) + "\n")
    if markdown is not None:
        _write_text(markdown, f"# bda study {key}\n\n{md}\n")
    if json_out:
        _emit_json(res)
        return
    typer.echo(md)
    if out is not None:
        typer.echo(f"study written to {out}")


# ============================================================================ stop
