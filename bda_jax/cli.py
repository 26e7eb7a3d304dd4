"""The ``bda`` command line. ``bda demo`` reads a trace file (default: the bundled example
council) and prints each task's one-coin posterior, decision and the plurality baseline."""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Bayesian Dialectical Argumentation: calibrated answers from deliberation traces.")


def example_traces_path() -> Path:
    """Path of the bundled example council trace file."""
    return Path(str(resources.files("bda_jax.data") / "example_council.jsonl"))


@app.command()
def demo(
    traces: Optional[Path] = typer.Option(None, help="JSON Lines trace file (default: bundled example)."),
    mean: float = typer.Option(0.6, help="Shared prior mean reliability b (Eq. 3 with kappa = 0)."),
    strength: float = typer.Option(4.0, help="Shared prior strength s: alpha = b s, beta = (1 - b) s."),
    seed: int = typer.Option(0, help="Seed of the random tie-break."),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves (and report them) instead of failing."),
) -> None:
    """Posterior over each task's candidates under the shared one-coin prior (seed 003, Eqs. 1-2)."""
    import jax
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from . import BdaError, decide, majority, onecoin_log_posterior, read_traces, tally

    import shutil
    console = Console(width=max(shutil.get_terminal_size((120, 24)).columns, 110))
    path = traces if traces is not None else example_traces_path()
    try:
        if not 0.0 < mean < 1.0 or strength <= 0:
            raise BdaError("need 0 < mean < 1 and strength > 0", field="mean/strength")
        counts = tally(read_traces(path, lenient=lenient))
    except BdaError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2)
    I = counts.N.shape[1]
    alpha = np.full(I, mean * strength)
    beta = np.full(I, (1.0 - mean) * strength)
    key_bda, key_maj = jax.random.split(jax.random.key(seed))
    post = decide(key_bda, onecoin_log_posterior(counts, alpha, beta), counts.mask)
    vote = majority(key_maj, counts)
    proba = np.asarray(post.proba)
    table = Table(title=f"BDA one-coin posterior, shared Beta({alpha[0]:g}, {beta[0]:g}) — {path.name}")
    for col in ("task", "posterior over candidates", "BDA answer", "conf.", "majority", "gold"):
        table.add_column(col)
    n_gold = n_bda = n_maj = 0
    for t, task_id in enumerate(counts.task_ids):
        cands = counts.candidates[t]
        dist = "  ".join(f"{c} {proba[t, k]:.3f}" for k, c in enumerate(cands))
        g = int(counts.gold[t])
        gold = cands[g] if g >= 0 else ("(not a candidate)" if counts.gold_missing[t] else "—")
        bda_ans, maj_ans = cands[int(post.index[t])], cands[int(vote.index[t])]
        if g >= 0 or counts.gold_missing[t]:
            n_gold += 1
            n_bda += int(post.index[t]) == g
            n_maj += int(vote.index[t]) == g
        table.add_row(task_id, dist, bda_ans, f"{float(post.confidence[t]):.3f}",
                      f"{maj_ans} ({float(vote.confidence[t]):.2f})", gold)
    console.print(table)
    if n_gold:
        console.print(f"accuracy on {n_gold} labeled tasks: BDA {n_bda}/{n_gold}, "
                      f"majority {n_maj}/{n_gold}")


@app.callback()
def _root() -> None:
    """bda_jax command line."""


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    main()
