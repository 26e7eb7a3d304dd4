"""``bda demo`` (the main job) and ``bda report`` (re-render a report)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._app import (
    _emit_json,
    _handled,
    _json_option,
    _posterior_table,
    _print_posterior_table,
    _progress_option,
    _seed_option,
    app,
    example_traces_path,
)


@app.command()
@_handled
def demo(
    out: Path = typer.Option(Path("bda-report"), "--out", help="Folder of the demo report."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes (about 20 s)."),
    seed: int = _seed_option(),
    progress: bool = _progress_option(),
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
    json_out: bool = _json_option(),
) -> None:
    """The main job end to end: the one-coin posterior table of a trace file (default: the
    bundled example council), then the full demo report in --out (skipped with --table-only)."""
    path = traces if traces is not None else example_traces_path()
    table = _posterior_table(path, mean, strength, seed, lenient)
    if not json_out:
        _print_posterior_table(table)
    result = None
    if not table_only:
        from ..report._demo import run_demo
        result = run_demo(str(out), seed=seed, quick=quick, progress=progress and not json_out,
                          resume=resume)
        if not json_out:
            where = out / "index.html"
            if isinstance(result, dict) and isinstance(result.get("report"), str):
                where = result["report"]
            typer.echo(f"demo report written to {where if Path(where).exists() else out}")
    if json_out:
        _emit_json({"command": "demo", "table": table, "report": result,
                    "out": None if table_only else str(out)})


# ============================================================================ fit / predict


@app.command()
@_handled
def report(
    results: Path = typer.Argument(..., help="Results JSON (e.g. `bda evaluate --out`)."),
    out: Path = typer.Option(Path("bda-report"), "--out", help="Report folder."),
    json_out: bool = _json_option(),
) -> None:
    """Render a results JSON as a report folder."""
    from .._core.errors import ArtifactError
    try:
        raw = results.read_bytes()
    except OSError as err:
        raise ArtifactError(f"cannot open the results file: {err.strerror}",
                            file=str(results)) from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ArtifactError("not UTF-8 text; not a results file", file=str(results)) from None
    except json.JSONDecodeError as err:
        raise ArtifactError(f"not valid JSON: {err.msg} (column {err.colno})",
                            file=str(results), line=err.lineno) from None
    if not isinstance(data, dict):
        raise ArtifactError("a results file must hold a JSON object", file=str(results))
    from ..report._html import load_results, render_report
    if data.get("kind") == "bda_jax.evaluation":       # `bda evaluate --out`
        loaded = _evaluation_as_report(data, results)
    else:
        loaded = load_results(results)
    where = render_report(loaded, out)
    if json_out:
        _emit_json({"command": "report", "results": str(results), "report": str(where)})
    else:
        typer.echo(f"report written to {where}")


def _evaluation_as_report(ev: dict, path: Path) -> dict:
    """`bda evaluate` results in the demo report's schema: one data-set section."""
    from .._core.errors import ArtifactError
    table = ev.get("table")
    if not isinstance(table, list) or not table or \
            not all(isinstance(r, dict) and isinstance(r.get("arm"), str) for r in table):
        raise ArtifactError("table must be a non-empty list of rows with an 'arm'",
                            file=str(path), field="table")
    boot = ev.get("bootstrap") if isinstance(ev.get("bootstrap"), dict) else {}
    sel = ev.get("selected") if isinstance(ev.get("selected"), dict) else {}
    name = Path(str(ev.get("traces", path.stem))).name
    arms = [{"arm": r["arm"], "row": r, "vs_reference": boot.get(r["arm"]),
             "selected": sel.get(r["arm"])} for r in table]
    block = {"title": f"bda evaluate — {name}", "name": name, "n_tasks": ev.get("n_tasks"),
             "n_labeled": ev.get("n_labeled"), "n_agents": len(ev.get("agents") or []) or None,
             "K": ev.get("K_max"), "folds": ev.get("n_folds"), "source": ev.get("traces"),
             "reference": ev.get("reference", "majority"), "arms": arms}
    cells = ev.get("cells") if isinstance(ev.get("cells"), dict) else {}
    return {"schema_version": 1, "kind": "bda_jax.demo_results",
            "bda_jax_version": ev.get("package_version"),
            "config": {"seed": ev.get("seed"), "quick": False, "source": "bda evaluate",
                       "label_budget": ev.get("label_budget")},
            "cache": {"file": cells.get("cache") or "", "loaded": cells.get("loaded"),
                      "computed": cells.get("computed")},
            "datasets": {name: block}}
