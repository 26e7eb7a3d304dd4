"""``bda demo`` (the main job) and ``bda report`` (re-render a report)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._app import (
    app,
    check_out_dir,
    data_error,
    emit_json,
    example_traces_path,
    handled,
    json_option,
    progress_bar,
    progress_option,
    read_trace_file,
    rich_table,
    seed_option,
    stdout_console,
)
from ._files import expect_file_kind


def _print_posterior_table(res: dict) -> None:
    console = stdout_console()
    rows = []
    for r in res["rows"]:
        dist = "  ".join(f"{c} {p:.3f}" for c, p in zip(r["candidates"], r["proba"]))
        rows.append([r["task_id"], dist, r["bda"], f"{r['confidence']:.3f}",
                     f"{r['majority']} ({r['majority_share']:.2f})",
                     r["gold"] if r["gold"] is not None else "—"])
    name = Path(res["traces"]).name
    console.print(rich_table(
        f"BDA one-coin posterior, shared Beta({res['alpha']:g}, {res['beta']:g}) — {name}",
        ["task", "posterior over candidates", "BDA answer", "conf.", "majority", "gold"], rows))
    labeled = [r for r in res["rows"] if r["labeled"]]
    if labeled:
        n = len(labeled)
        console.print(f"accuracy on {n} labeled tasks: BDA "
                      f"{sum(r['bda_correct'] for r in labeled)}/{n}, majority "
                      f"{sum(r['majority_correct'] for r in labeled)}/{n}")


@app.command()
@handled
def demo(
    out: Path = typer.Option(Path("bda-report"), "--out",
                             help="Folder of the demo report (one demo at a time per folder: a "
                                  "second is refused while the first runs)."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes (about 20 s)."),
    seed: int = seed_option(),
    progress: bool = progress_option(),
    resume: bool = typer.Option(True, "--resume/--no-resume",
                                help="Reuse finished steps of an interrupted demo run."),
    table_only: bool = typer.Option(False, "--table-only",
                                    help="Only print the posterior table; write no report."),
    traces: Optional[Path] = typer.Option(None, help="Trace file of the posterior table "
                                                     "(default: the bundled example council)."),
    mean: float = typer.Option(0.6, help="Shared prior mean reliability b (Eq. 3, kappa = 0)."),
    strength: float = typer.Option(4.0, help="Shared prior strength s: alpha = b s, "
                                             "beta = (1 - b) s."),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves (and report them) "
                                             "instead of failing."),
    json_out: bool = json_option(),
) -> None:
    """The main job end to end: the one-coin posterior table of a trace file (default: the
    bundled example council), then the full demo report in --out (skipped with --table-only).
    results.json keeps what varies between runs (time, environment, timings, cache counts) in
    its last section, "run"; the rest is the same for the same inputs and seed."""
    from ..report import posterior_table, run_demo

    if not 0.0 < mean < 1.0 or strength <= 0:
        raise data_error("need 0 < mean < 1 and strength > 0", "--mean/--strength")
    path = traces if traces is not None else example_traces_path()
    if not table_only:
        check_out_dir(out, "--out", {"--traces": path},
                      writes=["results.json", "index.html", "demo-cache.jsonl",
                              "demo-cache.jsonl.lock"])
    table = posterior_table(read_trace_file(path, lenient, "--traces", command="bda demo"), mean,
                            strength, seed, source=str(path))
    if not json_out:
        _print_posterior_table(table)
    result = None
    if not table_only:
        result = run_demo(str(out), seed=seed, quick=quick, progress=progress and not json_out,
                          resume=resume)
        if not json_out:
            where = out / "index.html"
            if isinstance(result, dict) and isinstance(result.get("report"), str):
                where = result["report"]
            typer.echo(f"demo report written to {where if Path(where).exists() else out}")
    if json_out:
        emit_json({"command": "demo", "table": table, "report": result,
                   "out": None if table_only else str(out)})


@app.command()
@handled
def report(
    results: Path = typer.Argument(..., help="Results JSON (`bda demo`'s results.json or "
                                             "`bda evaluate --out`)."),
    out: Path = typer.Option(Path("bda-report"), "--out", help="Report folder."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Render a results JSON as a report folder."""
    from ..report import load_results, render_report

    check_out_dir(out, "--out", {"RESULTS": results}, writes=["index.html"])
    with expect_file_kind(results, "results", "RESULTS", "bda report"):
        loaded = load_results(results)
    with progress_bar(progress and not json_out, f"rendering {results.name}"):
        where = render_report(loaded, out)
    if json_out:
        emit_json({"command": "report", "results": str(results), "report": str(where)})
    else:
        typer.echo(f"report written to {where}")
