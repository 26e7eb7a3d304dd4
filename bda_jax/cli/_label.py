"""``bda label next``: the tasks to label next (``bda_jax.active.label_next``; docs/active.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._app import (
    data_error,
    emit_json,
    handled,
    json_option,
    label_app,
    progress_bar,
    progress_option,
    rich_table,
    seed_option,
    stdout_console,
)
from ._files import expect_file_kind


def _score(x) -> str:
    """A score to three significant digits (they are small: a Brier reduction); ``—`` for none."""
    return "—" if x is None else f"{x:.3g}"


@label_app.command("next")
@handled
def label_next_command(
    traces: Path = typer.Argument(..., help="Trace file (JSON Lines) of the pool."),
    gold: Optional[Path] = typer.Option(None, "--gold",
                                        help="Partial gold file: CSV with the header "
                                             "task_id,answer (docs/active.md)."),
    budget: int = typer.Option(..., "--budget", "-b", help="How many tasks to choose."),
    strategy: str = typer.Option("expected-brier", "--strategy",
                                 help="expected-brier, uncertainty, disagreement or random."),
    arm: str = typer.Option("bda-per-agent", "--arm",
                            help="BDA arm the model-based strategies refit: bda-shared, "
                                 "bda-per-agent, bda-tempered or bda-confusion."),
    batch: str = typer.Option("greedy", "--batch",
                              help="greedy (condition on each pick's expected label) or top "
                                   "(the best scores of one pass)."),
    n_candidates: int = typer.Option(256, "--n-candidates",
                                     help="expected-brier scores at most this many unlabeled "
                                          "tasks (a seeded subsample)."),
    seed: int = seed_option("Seed of the subsamples, the random strategy and tie-breaks."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Print the tasks to label next, best first, from a pool of traces and the labels so far."""
    from ..active import ARMS, BATCH_MODES, STRATEGIES, label_next

    if budget < 1:
        raise data_error(f"must be an integer >= 1, got {budget}", "--budget")
    if strategy not in STRATEGIES:
        raise data_error(f"unknown strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}", "--strategy")
    if arm not in ARMS:
        raise data_error(f"unknown arm {arm!r}; expected one of {', '.join(ARMS)}", "--arm")
    if batch not in BATCH_MODES:
        raise data_error(f"expected one of {', '.join(BATCH_MODES)}, got {batch!r}", "--batch")
    if n_candidates < 1:
        raise data_error(f"must be an integer >= 1, got {n_candidates}", "--n-candidates")
    if seed < 0:
        raise data_error(f"must be a non-negative integer, got {seed}", "--seed")
    with expect_file_kind(traces, "traces", "TRACES", "bda label next"), \
            progress_bar(progress and not json_out, f"scoring the pool of {traces.name}"):
        plan = label_next(traces, gold, budget=budget, strategy=strategy, seed=seed, arm=arm,
                          batch=batch, n_candidates=n_candidates)
    result = plan.to_dict()
    if json_out:
        emit_json({"command": "label next", "traces": str(traces),
                   "gold": None if gold is None else str(gold), **result})
        return
    typer.echo(f"{traces}: {result['n_tasks']} tasks, {result['n_labeled']} labeled; "
               f"strategy {strategy}" + ("" if result["params"] is None else
                                          f" ({arm}, {result['params_source']} hyperparameters)"))
    stdout_console().print(rich_table(None, ["rank", "task_id", "score"],
                                      [[r["rank"], r["task_id"], _score(r["score"])]
                                       for r in result["tasks"]]))
    if len(result["tasks"]) < budget:
        typer.echo(f"note: only {len(result['tasks'])} unlabeled tasks were left")
