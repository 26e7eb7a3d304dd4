"""``bda council broadcast``: the confidence-routed broadcast protocol of [Audit] run live
against OpenAI-compatible endpoints, writing the broadcast log ``bda audit`` reads
(``bda_jax.council.run_broadcast_files``; docs/broadcast.md)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from .. import DataError
from ._app import check_outputs, emit_json, handled, json_option, progress_bar, progress_option
from ._council import beside, council_app


def _cache_mode(replay_only: bool, no_cache: bool) -> str:
    if replay_only and no_cache:
        raise DataError("--replay-only needs the cache; drop --no-cache", field="--no-cache")
    return "off" if no_cache else "replay" if replay_only else "record"


def _ledger_text(led: dict) -> str:
    cost = led.get("cost")
    cost_text = led.get("cost_note") if led.get("cost_unknown_models") else \
        None if cost is None else f"cost {cost:.4f}"
    return (f"calls {led['calls']} (cached {led['cached']}), tokens {led['prompt_tokens']} "
            f"prompt + {led['completion_tokens']} completion"
            + ("" if cost_text is None else f", {cost_text}"))


@council_app.command("broadcast")
@handled
def council_broadcast(
    questions: Path = typer.Argument(..., help="Question set (JSON Lines: task_id, question, "
                                               "optional candidates, gold, cluster, tier)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Council config (TOML, "
                                                                 "docs/council.md): the seats "
                                                                 "are the agents."),
    out: Path = typer.Option(..., "--out", help="Broadcast log to write (JSON Lines, "
                                                "docs/audit.md); the manifest goes beside it."),
    router: str = typer.Option("runtime_argmax", "--router",
                               help="Who gets the floor: runtime_argmax, "
                                    "top_confidence_tie_random, random_valid, majority_vote or "
                                    "confidence_weighted_vote."),
    scale: str = typer.Option("0-100", "--scale", help="Confidence scale LOW-HIGH (0-100: "
                                                       "integers; 0-1: any number)."),
    outer_rounds: int = typer.Option(2, "--outer-rounds", help="Most outer (evaluator) rounds."),
    turns: int = typer.Option(4, "--turns", help="Discussion turns per outer round."),
    evaluator: Optional[str] = typer.Option(None, "--evaluator",
                                            help="A seat name, or 'exact' (gold comparison, no "
                                                 "call); default: the first seat at "
                                                 "temperature 0."),
    note_threshold: Optional[float] = typer.Option(None, "--note-threshold",
                                                   help="Stated score from which a non-selected "
                                                        "agent keeps a private note (default "
                                                        "65% of the scale)."),
    recent_window: int = typer.Option(5, "--recent-window",
                                      help="Public messages shown in full (older ones as "
                                           "one-line summaries)."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Reply cache (SQLite; default "
                                                               "OUT.cache.sqlite)."),
    replay_only: bool = typer.Option(False, "--replay-only",
                                     help="Never call a model: every reply must be cached."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write a cache."),
    local: bool = typer.Option(False, "--local",
                               help="Start the bundled small local model on 127.0.0.1 and point "
                                    "every endpoint at it (plumbing only)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Run the confidence-routed broadcast protocol and write its log (read it with bda audit)."""
    check_outputs({"--out": out, "--cache": cache}, {"QUESTIONS": questions, "--config": config},
                  writes={"--out": beside(out, (".manifest.json", ".partial"), cache, no_cache)})
    mode = _cache_mode(replay_only, no_cache)
    if config is None and not local:
        raise DataError("give --config (or --local for three agents of the local model)",
                        field="--config")
    from ..council import run_broadcast_files

    with contextlib.ExitStack() as stack:
        bar = None

        def report(done, total, ledger):       # the bar starts once the inputs are validated
            nonlocal bar
            if bar is None:
                bar = stack.enter_context(progress_bar(progress and not json_out,
                                                       "broadcasting", total=total))
            bar.report(f"problems {done}/{total} · calls {ledger['calls']} · cached "
                       f"{ledger['cached']} · tokens {ledger['tokens']}", done, total)

        summary = run_broadcast_files(questions, config, out, local=local, cache_path=cache,
                                      cache_mode=mode, progress=report, router=router,
                                      confidence_scale=scale, max_outer_rounds=outer_rounds,
                                      turns=turns, evaluator=evaluator,
                                      note_threshold=note_threshold, recent_window=recent_window)
    if json_out:
        emit_json({"command": "council broadcast", **summary.to_json()})
        return
    typer.echo(f"{summary.n_problems} problems ({summary.n_blocks} poll blocks) written to "
               f"{summary.out} (manifest {summary.manifest}); evaluator PASS on "
               f"{summary.passed}")
    typer.echo(_ledger_text(summary.ledger) + f"; re-asks {summary.reasks}, parse failures "
                                              f"{len(summary.parse_failures)}")
    typer.echo(f"audit it with: bda audit {summary.out}")
