"""``bda simulate`` and ``bda study``."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._app import (
    app,
    check_memory,
    check_out_path,
    check_outputs,
    simulation_bytes,
    data_error,
    dumps,
    emit_json,
    handled,
    json_option,
    parse_arms,
    parse_floats,
    progress_bar,
    progress_option,
    seed_option,
    write_text,
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
            raise data_error(f"expected SEAT or SEAT:RATE items, got {part!r}",
                             "--adversaries") from None
    return out


def _parse_candidates(text: str):
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return (lo, hi)
        return int(text)
    except ValueError:
        raise data_error(f"expected K or MIN-MAX, got {text!r}", "--candidates") from None


@app.command()
@handled
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
    seed: int = seed_option("Simulation seed (equal seeds give identical traces)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Simulate a deliberating council (correlated errors, contagion, adversaries) to traces."""
    check_out_path(out, "--out")
    from .. import write_traces
    from ..simulate import simulate_council

    reliabilities = parse_floats(seats, "--seats")
    check_memory(simulation_bytes(questions, seeds_per_question, len(reliabilities), rounds),
                 "--questions", f"simulating {questions} questions")
    with progress_bar(progress and not json_out, f"simulating {questions} questions"):
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
        emit_json(summary)
    else:
        typer.echo(f"{len(traces)} traces ({questions} questions x {seeds_per_question} seeds, "
                   f"seats {', '.join(agents)}) written to {out}")


# ============================================================================ study

@app.command()
@handled
def study(
    name: str = typer.Argument(..., help="dose-response, sleeper, controls, simulated, "
                                         "label-efficiency, transfer, round-window, seeds or "
                                         "fix-break-k."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes (minutes, not hours)."),
    questions: Optional[int] = typer.Option(None, "--questions",
                                            help="Override the number of simulated questions."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Resumable cell cache (JSON "
                                                               "Lines); rerun to resume."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the study JSON here."),
    markdown: Optional[Path] = typer.Option(None, "--markdown",
                                            help="Write the study's Markdown tables here."),
    figure: Optional[Path] = typer.Option(None, "--figure",
                                          help="Write the study's figure here (PNG; the "
                                               "clean-data studies label-efficiency ... "
                                               "fix-break-k)."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Comma-separated arms instead of "
                                                            "the study's own."),
    seed: int = seed_option(),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Adversarial ([BDA] Appendix F) and clean-data ([BDA] Appendix E) studies on simulated
    councils."""
    check_outputs({"--out": out, "--markdown": markdown, "--cache": cache, "--figure": figure})
    from ..adversarial import FIGURE_STUDIES, STUDIES, run_study

    key = name.strip().lower().replace("_", "-")
    if key not in STUDIES:
        raise data_error(f"unknown study {name!r}; expected one of {', '.join(STUDIES)}",
                         "NAME")
    if figure is not None and key not in FIGURE_STUDIES:
        raise data_error(f"the {key} study has no figure; these have one: "
                         f"{', '.join(FIGURE_STUDIES)}", "--figure")
    if questions is not None and questions < 6:
        raise data_error("--questions must be at least 6", "--questions")
    arm_list = None if arms is None else parse_arms(arms)
    with progress_bar(progress and not json_out, key, total=1) as bar:
        run = run_study(key, quick=quick, seed=seed, cache=cache, progress=bar.report,
                        n_questions=questions, arms=arm_list)
    res = run.to_json()
    if out is not None:
        write_text(out, dumps(res, indent=1) + "\n")
    if markdown is not None:
        write_text(markdown, f"# bda study {key}\n\n{run.markdown}\n")
    if figure is not None:
        run.plot_png(figure)
    if json_out:
        emit_json(res)
        return
    typer.echo(run.markdown)
    if out is not None:
        typer.echo(f"study written to {out}")
    if figure is not None:
        typer.echo(f"figure written to {figure}")
