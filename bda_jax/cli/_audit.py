"""``bda audit``: the Trace-Audit Card of a broadcast log (``bda_jax.audit.audit_file``)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import DataError
from ._app import (
    app,
    check_out_path,
    emit_json,
    handled,
    json_option,
    progress_bar,
    progress_option,
    seed_option,
)


@app.command()
@handled
def audit(
    log: Path = typer.Argument(..., help="Broadcast log (JSON Lines, docs/audit.md)."),
    card: Optional[Path] = typer.Option(None, "--card", help="Write the Trace-Audit Card here "
                                                             "(.json or .md)."),
    n_boot: int = typer.Option(2000, "--n-boot", help="Cluster-bootstrap resamples."),
    score_scale: float = typer.Option(1.0, "--score-scale",
                                      help="Top of the confidence scale (100 for 0-100)."),
    protocol_name: Optional[str] = typer.Option(None, "--protocol-name",
                                                help="Card field protocol_name."),
    seed: int = seed_option("Seed of the bootstrap, folds and learned router."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Routing / calibration / commitment audit of a broadcast log; prints the card."""
    check_out_path(card, "--card", {"LOG": log})
    if card is not None and card.suffix.lower() not in (".json", ".md"):
        raise DataError(f"the card path must end in .json or .md, got {card.name!r}",
                        field="--card")
    if not score_scale > 0:
        raise DataError("score scale must be > 0", field="--score-scale")
    from ..audit import audit_file

    fields = {} if protocol_name is None else {"protocol_name": protocol_name}
    with progress_bar(progress and not json_out, "auditing"):
        report = audit_file(log, score_scale=score_scale, seed=seed, n_boot=n_boot, **fields)
    if card is not None:
        report.card.write(card)
    if json_out:
        emit_json({"command": "audit", "log": str(log),
                    "card_path": None if card is None else str(card), **report.to_dict()})
        return
    typer.echo(report.to_markdown())
    if card is not None:
        typer.echo(f"card written to {card}")


@app.command("simulate-broadcast")
@handled
def simulate_broadcast(
    out: Path = typer.Option(..., "--out", help="Broadcast log to write (JSON Lines)."),
    problems: int = typer.Option(300, "--problems", help="Number of problems."),
    agents: int = typer.Option(3, "--agents", help="Agents polled per block."),
    seed: int = seed_option("Simulation seed (equal seeds give identical logs)."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Simulate a confidence-routed broadcast run with known truth ([Audit] Fig. 1): a log for
    `bda audit` to try on."""
    check_out_path(out, "--out")
    from ..audit import simulate_broadcast as simulate, write_broadcast_log

    with progress_bar(progress and not json_out, f"simulating {problems} problems"):
        log = simulate(seed, n_problems=problems, n_agents=agents)
        write_broadcast_log(log, out)
    summary = {"command": "simulate-broadcast", "out": str(out), "n_problems": problems,
               "n_agents": agents, "n_blocks": log.n_blocks, "seed": seed}
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"{log.n_blocks} blocks ({problems} problems, {agents} agents) written to "
                   f"{out}; audit it with: bda audit {out}")
