"""The ``bda`` command line (docs/cli.md).

Subcommands: ``demo``, ``fit``, ``predict``, ``evaluate``, ``simulate``, ``study``, ``stop``
(``replay``, ``live``), ``audit``, ``convert``, ``report``. Every command that computes something
takes ``--json`` (one JSON object on stdout; ``stop live`` writes one per round), and the long
ones show rich progress bars on stderr (``--no-progress`` turns them off).

Exit codes: 0 success; 2 a user or input error (a :class:`~bda_jax.BdaError` — malformed traces,
data, model files, options — or a file that cannot be opened or written; also a command-line
usage error), printed as one line ``error: FILE:LINE: FIELD: message``; 1 an internal error (a
bug: please report it with the output of ``bda --debug ...``); 130 interrupted. The global
``--debug`` option prints the full traceback of any error.
"""
from __future__ import annotations

import functools
import json
import math
import shutil
import sys
import time
import traceback
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import typer

EXIT_OK, EXIT_INTERNAL, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Bayesian Dialectical Argumentation: calibrated answers from "
                       "deliberation traces. Exit codes: 0 ok, 2 user/input error, "
                       "1 internal error.")
stop_app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                       help="DASE stopping rules: replay history logs or stop live.")
app.add_typer(stop_app, name="stop")

_STATE = {"debug": False}

DEFAULT_ARMS = "majority,bda-shared,bda-per-agent,bda-confusion"
STUDIES = ("dose-response", "sleeper", "controls", "simulated")


def example_traces_path() -> Path:
    """Path of the bundled example council trace file."""
    return Path(str(resources.files("bda_jax.data") / "example_council.jsonl"))


# ============================================================================ plumbing

def _stdout_console():
    from rich.console import Console
    return Console(file=sys.stdout, width=max(shutil.get_terminal_size((120, 24)).columns, 110),
                   highlight=False)


def _stderr_console():
    from rich.console import Console
    return Console(file=sys.stderr, highlight=False)


def _jsonable(obj):
    """Plain JSON values: numpy scalars and arrays unpacked, tuples as lists, NaN/inf as null."""
    import numpy as np
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray) or type(obj).__module__.startswith("jax"):
        return _jsonable(np.asarray(obj).tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if hasattr(obj, "_asdict"):
        return _jsonable(obj._asdict())
    return str(obj)


def _dumps(obj, indent=None) -> str:
    return json.dumps(_jsonable(obj), allow_nan=False, indent=indent, ensure_ascii=False)


def _emit_json(obj) -> None:
    typer.echo(_dumps(obj))


def _write_text(path: Path, text: str) -> None:
    from .._core.io import atomic_write
    atomic_write(path, lambda h: h.write(text))


def error_line(err) -> str:
    """One line ``error: FILE:LINE: task 'T' move 'M': FIELD: message`` for a BdaError."""
    parts = []
    if err.file is not None:
        parts.append(err.file + (f":{err.line}" if err.line is not None else ""))
    elif err.line is not None:
        parts.append(f"line {err.line}")
    where = []
    if err.task_id is not None:
        where.append(f"task {err.task_id!r}")
    if err.move_id is not None:
        where.append(f"move {err.move_id!r}")
    if where:
        parts.append(" ".join(where))
    if err.field is not None:
        parts.append(str(err.field))
    parts.append(str(err.reason))
    return " ".join(("error: " + ": ".join(parts)).split())


def _fail(line: str, code: int, json_mode: bool, detail: dict | None = None):
    if _STATE["debug"]:
        traceback.print_exc(file=sys.stderr)
    typer.echo(line, err=True)
    if json_mode:
        _emit_json({"error": {"message": line, "exit_code": code, **(detail or {})}})
    raise typer.Exit(code)


def _handled(fn):
    """Run a command body: BdaError and OS errors -> one line and exit 2; anything else ->
    exit 1 (with the traceback under ``--debug``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .._core.errors import BdaError
        json_mode = bool(kwargs.get("json_out", False))
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except BdaError as err:
            _fail(error_line(err), EXIT_USER, json_mode,
                  {"type": type(err).__name__, "reason": err.reason, "file": err.file,
                   "line": err.line, "task_id": err.task_id, "move_id": err.move_id,
                   "field": err.field})
        except OSError as err:
            name = err.filename if err.filename is not None else ""
            msg = err.strerror or str(err)
            _fail(" ".join(f"error: {name}: {msg}".split()) if name else f"error: {msg}",
                  EXIT_USER, json_mode, {"type": type(err).__name__, "file": name})
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(EXIT_INTERRUPTED)
        except Exception as err:  # noqa: BLE001 - the whole point: one line, exit 1
            hint = "" if _STATE["debug"] else " (run `bda --debug ...` for the traceback)"
            _fail(f"internal error: {type(err).__name__}: {err}{hint}".replace("\n", " "),
                  EXIT_INTERNAL, json_mode, {"type": type(err).__name__})
    return wrapper


class _NoBar:
    def advance(self, n: int = 1, description: str | None = None) -> None:
        pass

    def update(self, description: str | None = None, total: int | None = None) -> None:
        pass


class _Bar:
    def __init__(self, progress, task):
        self.progress, self.task = progress, task

    def advance(self, n: int = 1, description: str | None = None) -> None:
        kw = {} if description is None else {"description": description}
        self.progress.update(self.task, advance=n, **kw)

    def update(self, description: str | None = None, total: int | None = None) -> None:
        kw = {}
        if description is not None:
            kw["description"] = description
        if total is not None:
            kw["total"] = total
        self.progress.update(self.task, **kw)


@contextmanager
def _progress(enabled: bool, description: str, total: int | None = None):
    """A rich progress bar on stderr (a spinner when ``total`` is None), or a no-op."""
    if not enabled:
        yield _NoBar()
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                               TextColumn, TimeElapsedColumn)
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=_stderr_console(), transient=False) as prog:
        task = prog.add_task(description, total=total)
        bar = _Bar(prog, task)
        yield bar
        if total is not None:
            prog.update(task, completed=prog.tasks[0].total)


def _json_option():
    return typer.Option(False, "--json", help="Print one JSON object on stdout (machine output).")


def _progress_option():
    return typer.Option(True, "--progress/--no-progress", help="Show progress bars on stderr.")


def _seed_option(help: str = "Random seed (folds, tie-breaks, simulation)."):
    return typer.Option(0, "--seed", help=help)


def _data_error(reason: str, field: str, **kw):
    from .._core.errors import DataError
    return DataError(reason, field=field, **kw)


def _check_out(path: Optional[Path], field: str) -> None:
    """An output file path must name a file in an existing folder (checked before any work)."""
    if path is None:
        return
    if path.is_dir():
        raise _data_error("is a folder, expected a file path", field, file=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise _data_error(f"the folder {str(parent)!r} does not exist", field, file=str(path))


def _parse_floats(text: str, field: str) -> list[float]:
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise _data_error(f"expected comma-separated numbers, got {text!r}", field) from None
    if not values:
        raise _data_error("expected at least one number", field)
    return values


def _parse_arms(text: str) -> list[str]:
    from .. import make_arm
    arms = [a.strip() for a in text.split(",") if a.strip()]
    if not arms:
        raise _data_error("no arm given", "--arms")
    for a in arms:
        make_arm(a)                     # DataError naming the known arms
    return list(dict.fromkeys(arms))


def _read_traces(path: Path, lenient: bool):
    from .. import read_traces
    traces = read_traces(path, lenient=lenient)
    if not traces:
        raise _data_error("the trace file holds no task", "traces", file=str(path))
    return traces


def _labeled(counts):
    import numpy as np
    return int(np.sum((np.asarray(counts.gold) >= 0) | np.asarray(counts.gold_missing)))


def _is_supervised(arm: str) -> bool:
    from .. import ARMS
    return ARMS[arm.split(":")[-1]][1] or ":" in arm


def _md_table(rows: list[dict], columns: list[str] | None = None, digits: int = 3) -> str:
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def cell(v):
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        return "—" if v is None else str(v)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _rich_table(title: str | None, columns: list[str], rows: list[list[str]]):
    from rich.table import Table
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*[str(x) for x in r])
    return table


def _f3(x) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3f}"


# ============================================================================ root

def _version_callback(value: bool):
    if value:
        from .. import __version__
        typer.echo(f"bda_jax {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Print the full traceback of any error."),
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """bda_jax command line. Exit codes: 0 ok, 2 user/input error, 1 internal error."""
    _STATE["debug"] = debug


# ============================================================================ demo

def _posterior_table(path: Path, mean: float, strength: float, seed: int, lenient: bool):
    """The one-coin posterior of every task of a trace file under a shared Beta prior."""
    import jax
    import numpy as np

    from .. import decide, majority, onecoin_log_posterior, tally
    if not 0.0 < mean < 1.0 or strength <= 0:
        raise _data_error("need 0 < mean < 1 and strength > 0", "--mean/--strength")
    counts = tally(_read_traces(path, lenient))
    I = counts.N.shape[1]
    alpha = np.full(I, mean * strength)
    beta = np.full(I, (1.0 - mean) * strength)
    key_bda, key_maj = jax.random.split(jax.random.key(seed))
    post = decide(key_bda, onecoin_log_posterior(counts, alpha, beta), counts.mask)
    vote = majority(key_maj, counts)
    proba = np.asarray(post.proba)
    rows = []
    for t, task_id in enumerate(counts.task_ids):
        cands = counts.candidates[t]
        g = int(counts.gold[t])
        rows.append({
            "task_id": task_id, "candidates": list(cands),
            "proba": [float(proba[t, k]) for k in range(len(cands))],
            "bda": cands[int(post.index[t])], "confidence": float(post.confidence[t]),
            "majority": cands[int(vote.index[t])],
            "majority_share": float(vote.confidence[t]),
            "gold": cands[g] if g >= 0 else (None if not counts.gold_missing[t]
                                             else "(not a candidate)"),
            "labeled": bool(g >= 0 or counts.gold_missing[t]),
            "bda_correct": bool(int(post.index[t]) == g),
            "majority_correct": bool(int(vote.index[t]) == g)})
    return {"traces": str(path), "alpha": float(alpha[0]), "beta": float(beta[0]), "rows": rows}


def _print_posterior_table(res: dict) -> None:
    console = _stdout_console()
    rows = []
    for r in res["rows"]:
        dist = "  ".join(f"{c} {p:.3f}" for c, p in zip(r["candidates"], r["proba"]))
        rows.append([r["task_id"], dist, r["bda"], f"{r['confidence']:.3f}",
                     f"{r['majority']} ({r['majority_share']:.2f})",
                     r["gold"] if r["gold"] is not None else "—"])
    name = Path(res["traces"]).name
    console.print(_rich_table(
        f"BDA one-coin posterior, shared Beta({res['alpha']:g}, {res['beta']:g}) — {name}",
        ["task", "posterior over candidates", "BDA answer", "conf.", "majority", "gold"], rows))
    labeled = [r for r in res["rows"] if r["labeled"]]
    if labeled:
        n = len(labeled)
        console.print(f"accuracy on {n} labeled tasks: BDA "
                      f"{sum(r['bda_correct'] for r in labeled)}/{n}, majority "
                      f"{sum(r['majority_correct'] for r in labeled)}/{n}")


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
def fit(
    traces: Path = typer.Argument(..., help="Labeled JSON Lines trace file."),
    arm: str = typer.Option("bda-per-agent", "--arm",
                            help="Arm name (see `bda evaluate --help`; iso:/temp: wrappers too)."),
    out: Path = typer.Option(..., "--out", help="Model file to write (JSON; large arrays go "
                                                "to an .npz beside it)."),
    seed: int = _seed_option("Seed of the inner CV folds and of the tie-break."),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves instead of failing."),
    progress: bool = _progress_option(),
    json_out: bool = _json_option(),
) -> None:
    """Fit an aggregator on labeled traces and save it as a model artifact."""
    _check_out(out, "--out")
    from .. import make_arm, tally
    from ..aggregators._artifacts import fingerprint_counts, save_model
    from ..aggregators._evaluation import fitted_hyperparameters

    model = make_arm(arm, seed)
    tr = _read_traces(traces, lenient)
    counts = tally(tr)
    n_labeled = _labeled(counts)
    if _is_supervised(arm) and n_labeled < 2:
        raise _data_error(f"arm {arm!r} is supervised: it needs at least 2 labeled tasks, the "
                          f"file has {n_labeled}", "gold", file=str(traces))
    t0 = time.perf_counter()
    with _progress(progress and not json_out, f"fitting {arm} on {len(tr)} tasks"):
        model.fit(counts)
    elapsed = time.perf_counter() - t0
    fp = fingerprint_counts(counts)
    meta = {"arm": arm, "seed": seed, "traces": str(traces), "n_tasks": len(tr),
            "n_labeled": n_labeled}
    save_model(out, model, counts_fingerprint=fp, meta=meta)
    summary = {"command": "fit", "model": str(out), "arm": arm,
               "estimator": type(model).__name__, "agents": list(counts.agents),
               "n_tasks": len(tr), "n_labeled": n_labeled, "params": fitted_hyperparameters(model),
               "counts_fingerprint": fp, "seconds": elapsed}
    if json_out:
        _emit_json(summary)
        return
    typer.echo(f"fitted {arm} ({type(model).__name__}) on {len(tr)} tasks "
               f"({n_labeled} labeled), agents {', '.join(counts.agents)}")
    if summary["params"]:
        typer.echo("selected: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in summary["params"].items()))
    typer.echo(f"model written to {out}")


@app.command()
@_handled
def predict(
    model: Path = typer.Argument(..., help="Model file written by `bda fit`."),
    traces: Path = typer.Argument(..., help="JSON Lines trace file to predict."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write one JSON line per task here."),
    allow_missing_agents: bool = typer.Option(
        False, "--allow-missing-agents",
        help="Accept traces in which some of the model's agents never speak."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Tie-break seed (default: the "
                                                            "model's own)."),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves instead of failing."),
    json_out: bool = _json_option(),
) -> None:
    """Per-task posterior, decision and confidence from a saved model."""
    _check_out(out, "--out")
    import jax
    import numpy as np

    from .. import tally
    from ..aggregators._artifacts import check_agents, fingerprint_counts, load_model

    art = load_model(model)
    tr = _read_traces(traces, lenient)
    agents = [m.agent for t in tr for m in t.moves]
    check_agents(art, agents, file=str(traces), allow_missing=allow_missing_agents)
    counts = tally(tr, agents=art.agents)
    est = art.estimator
    proba = np.asarray(est.predict_proba(counts), np.float64)
    key = None if seed is None else jax.random.key(seed)
    index = np.asarray(est.predict(counts, key))
    rows, n_lab, n_ok = [], 0, 0
    for t, task_id in enumerate(counts.task_ids):
        cands = counts.candidates[t]
        k = int(index[t])
        g = int(counts.gold[t])
        row = {"task_id": task_id, "candidates": list(cands),
               "proba": [float(proba[t, j]) for j in range(len(cands))],
               "decision": cands[k], "index": k, "confidence": float(proba[t, k])}
        if g >= 0 or counts.gold_missing[t]:
            row["gold"] = cands[g] if g >= 0 else None
            row["correct"] = k == g
            n_lab += 1
            n_ok += k == g
        rows.append(row)
    in_sample = art.counts_fingerprint is not None and \
        art.counts_fingerprint == fingerprint_counts(counts)
    summary = {"command": "predict", "model": str(model), "estimator": art.name,
               "arm": art.meta.get("arm"), "traces": str(traces), "n_tasks": len(rows),
               "n_labeled": n_lab, "accuracy": (n_ok / n_lab) if n_lab else None,
               "training_data": in_sample, "out": None if out is None else str(out)}
    if out is not None:
        _write_text(out, "".join(_dumps(r) + "\n" for r in rows))
    if json_out:
        _emit_json({**summary, "predictions": rows})
        return
    if out is None:
        table = [[r["task_id"], "  ".join(f"{c} {p:.3f}" for c, p in
                                         zip(r["candidates"], r["proba"])),
                  r["decision"], f"{r['confidence']:.3f}",
                  "—" if "gold" not in r else (r["gold"] or "(not a candidate)")]
                 for r in rows]
        _stdout_console().print(_rich_table(
            f"{summary['arm'] or art.name} posterior — {traces.name}",
            ["task", "posterior over candidates", "decision", "conf.", "gold"], table))
    else:
        typer.echo(f"{len(rows)} predictions written to {out}")
    if n_lab:
        typer.echo(f"accuracy on {n_lab} labeled tasks: {n_ok}/{n_lab} = {n_ok / n_lab:.3f}"
                   + (" (in-sample: these are the training traces)" if in_sample else ""))


# ============================================================================ evaluate

def _evaluate_cells(counts, arms, reference, outer, label_budget, seed, n_resamples, cache,
                    bar):
    """Every arm evaluated on its own (reference included) with the same outer folds; the
    metrics of an arm do not depend on the other arms, so this equals one joint evaluate."""
    from .. import evaluate

    cells = {}
    for arm in arms:
        bar.update(description=f"evaluating {arm}")

        def compute(arm=arm):
            ev = evaluate(counts, [arm], folds=outer, label_budget=label_budget, seed=seed,
                          reference=reference, n_resamples=n_resamples)
            row = next(r for r in ev.table if r["arm"] == arm)
            return _jsonable({"row": row, "bootstrap": ev.bootstrap.get(arm),
                              "selected": ev.selected.get(arm)})
        cells[arm] = compute() if cache is None else cache.get_or_compute(arm, compute)
        bar.advance()
    return cells


@app.command()
@_handled
def evaluate(
    traces: Path = typer.Argument(..., help="Labeled JSON Lines trace file."),
    arms: str = typer.Option(DEFAULT_ARMS, "--arms",
                             help="Comma-separated arms: majority, bda-shared, bda-per-agent, "
                                  "bda-confusion, bda-tempered, stacking, gated-vote, ds-em, "
                                  "verbalized, best-member; iso:<arm> / temp:<arm> wrappers."),
    folds: int = typer.Option(5, "--folds", help="Outer folds (grouped by cluster)."),
    label_budget: Optional[int] = typer.Option(None, "--label-budget",
                                               help="Labeled training tasks per outer fold "
                                                    "(default: all)."),
    reference: str = typer.Option("majority", "--reference",
                                  help="Arm the paired bootstraps compare against."),
    n_resamples: int = typer.Option(2000, "--n-resamples", help="Bootstrap resamples."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Resumable cell cache (JSON "
                                                               "Lines): finished arms are kept."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the results JSON here "
                                                           "(input of `bda report`)."),
    seed: int = _seed_option(),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves instead of failing."),
    progress: bool = _progress_option(),
    json_out: bool = _json_option(),
) -> None:
    """Nested cross-validated evaluation of arms: accuracy, ECE, Brier, paired bootstraps."""
    _check_out(out, "--out")
    _check_out(cache, "--cache")
    from .. import __version__, make_arm, make_folds, tally
    from ..aggregators._artifacts import fingerprint_counts
    from .._core.cache import CellCache, fingerprint

    arm_list = _parse_arms(arms)
    make_arm(reference)
    if folds < 2:
        raise _data_error(f"need at least 2 folds, got {folds}", "--folds")
    if n_resamples < 1:
        raise _data_error("n_resamples must be >= 1", "--n-resamples")
    tr = _read_traces(traces, lenient)
    counts = tally(tr)
    n_labeled = _labeled(counts)
    if n_labeled < 2:
        raise _data_error(f"evaluation needs labeled tasks; the file has {n_labeled}", "gold",
                          file=str(traces))
    outer = make_folds(counts, folds, seed)
    all_arms = list(dict.fromkeys(arm_list + [reference]))
    store = None
    if cache is not None:
        store = CellCache(cache, fingerprint(
            "bda evaluate", fingerprint_counts(counts), outer.tolist(), label_budget, reference,
            n_resamples, seed, __version__))
    cached = 0 if store is None else sum(a in store for a in all_arms)
    with _progress(progress and not json_out, "evaluating", total=len(all_arms)) as bar:
        cells = _evaluate_cells(counts, all_arms, reference, outer, label_budget, seed,
                                n_resamples, store, bar)
    result = {"schema_version": 1, "kind": "bda_jax.evaluation", "package_version": __version__,
              "traces": str(traces), "n_tasks": int(counts.N.shape[0]), "n_labeled": n_labeled,
              "agents": list(counts.agents), "K_max": int(counts.e.shape[2]),
              "arms": all_arms, "reference": reference,
              "label_budget": label_budget, "seed": seed, "n_folds": int(outer.max()) + 1,
              "n_resamples": n_resamples,
              "table": [cells[a]["row"] for a in all_arms],
              "bootstrap": {a: cells[a]["bootstrap"] for a in all_arms
                            if cells[a]["bootstrap"] is not None},
              "selected": {a: cells[a]["selected"] for a in all_arms
                           if cells[a]["selected"] is not None},
              "folds": outer.tolist(),
              "cells": {"cache": None if cache is None else str(cache), "loaded": cached,
                        "computed": len(all_arms) - cached}}
    if out is not None:
        _write_text(out, _dumps(result, indent=1) + "\n")
    if json_out:
        _emit_json(result)
        return
    rows = []
    for r in result["table"]:
        b = result["bootstrap"].get(r["arm"])
        ci = "" if b is None else (f"{b['accuracy']['delta']:+.3f} "
                                   f"[{b['accuracy']['ci_low']:+.3f}, "
                                   f"{b['accuracy']['ci_high']:+.3f}]")
        rows.append([r["arm"], _f3(r["accuracy"]), _f3(r["ece_ew"]), _f3(r["brier"]),
                     _f3(r["brier_mc"]), r["n"], ci])
    _stdout_console().print(_rich_table(
        f"{traces.name}: {result['n_tasks']} tasks, {result['n_folds']} outer folds, seed {seed}",
        ["arm", "accuracy", "ECE_ew", "Brier", "Brier_mc", "n",
         f"Δacc vs {reference} [95% CI]"], rows))
    if out is not None:
        typer.echo(f"results written to {out}")


# ============================================================================ simulate

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
    from ..adversarial import (label_permutation_control, policy_shift,
                              recalibration_under_attack, round0_truncation, weak_seat_swap)
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

def _dase_path(log: Optional[Path], bundled: Optional[str]) -> Path:
    from ..datasets import DASE_EXCERPTS
    if (log is None) == (bundled is None):
        raise _data_error("give a history file or --bundled NAME (one of "
                          f"{', '.join(DASE_EXCERPTS)})", "LOG")
    if bundled is not None:
        if bundled not in DASE_EXCERPTS:
            raise _data_error(f"unknown bundled excerpt {bundled!r}; expected one of "
                              f"{', '.join(DASE_EXCERPTS)}", "--bundled")
        return Path(DASE_EXCERPTS[bundled])
    return log


@stop_app.command("replay")
@_handled
def stop_replay(
    log: Optional[Path] = typer.Argument(None, help="DASE history file (safe_DASE_*.jsonl)."),
    bundled: Optional[str] = typer.Option(None, "--bundled",
                                          help="Bundled excerpt: gpqa_w4_head50 or "
                                               "aime_w8_head20."),
    rule: Optional[str] = typer.Option(None, "--rule", help="spatial or heuristic "
                                                            "(default: from the file name)."),
    W: Optional[int] = typer.Option(None, "--W", help="Arena half-width (spatial)."),
    k: Optional[int] = typer.Option(None, "--k", help="Streak length (heuristic)."),
    L: Optional[int] = typer.Option(None, "--L", help="Round limit."),
    empty_g: float = typer.Option(0.0, "--empty-g",
                                  help="Score of an all-empty round (0 = the paper's "
                                       "correction; 0.5 reproduces the released logs)."),
    gold: bool = typer.Option(True, "--gold/--no-gold",
                              help="Recover gold from the logs' correctness flags."),
    gold_from: Optional[Path] = typer.Option(None, "--gold-from",
                                             help="File or folder of DASE logs to recover gold "
                                                  "from (default: the log's folder)."),
    per_problem: bool = typer.Option(False, "--per-problem",
                                     help="Also print every problem's stop round."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples of the gap."),
    seed: int = _seed_option("Seed of the routing-gap bootstrap."),
    json_out: bool = _json_option(),
) -> None:
    """Replay a DASE history under a stopping rule: stop rounds and the commit partition."""
    import jax
    import numpy as np

    from ..datasets import recover_dase_gold
    from ..stopping import commit_partition, load_history_batch, replay_history, routing_gap

    path = _dase_path(log, bundled)
    if rule is not None and rule not in ("spatial", "heuristic"):
        raise _data_error(f"rule must be spatial or heuristic, got {rule!r}", "--rule")
    hb = load_history_batch(path)
    records = replay_history(path, rule=rule, W=W, k=k, empty_g=empty_g, L=L)
    gold_map, notes = None, []
    if gold:
        from .._core.errors import BdaError
        source = gold_from if gold_from is not None else path.parent
        try:        # every released file of the folder flags some answers (docs/stopping.md)
            gold_map = recover_dase_gold(source, benchmark=hb.benchmark)
        except BdaError as err:
            if gold_from is not None:
                raise
            notes.append(f"gold from the file alone ({err.reason})")
            try:
                gold_map = recover_dase_gold(path, benchmark=hb.benchmark)
            except BdaError as err2:
                notes.append(f"no gold: {err2.reason}")
        if gold_map is not None and not len(gold_map):
            notes.append("no gold recovered from the file's flags")
            gold_map = None
    kinds = sorted({r.commit for r in records}, key=lambda c: ["right_wall", "consensus",
                                                                "left_wall", "fallback"].index(c)
                   if c in ("right_wall", "consensus", "left_wall", "fallback") else 9)
    part = commit_partition(records, gold_map, hb.benchmark) if gold_map is not None else None
    buckets = []
    for kind in kinds + ["overall"]:
        sel = [r for r in records if kind == "overall" or r.commit == kind]
        row = {"commit": kind, "n": len(sel), "share": len(sel) / len(records),
               "mean_stop_round": float(np.mean([r.steps for r in sel])),
               "flagged": kind != "overall" and sel[0].flagged}
        if part is not None and kind in part:
            row["correct"], row["accuracy"] = part[kind][1], part[kind][2]
        buckets.append(row)
    gap = None
    if gold_map is not None and len(records) > 1:
        gap = routing_gap(jax.random.key(seed), records, gold_map, hb.benchmark, n_boot=n_boot)
    correct = [None] * len(records)
    if gold_map is not None:
        from ..stopping._rules import _correct
        correct = [bool(c) if r.idx in gold_map else None
                   for r, c in zip(records, _correct(records, gold_map, hb.benchmark))]
    problems = [{"idx": r.idx, "commit": r.commit, "answer": r.answer, "stop_round": r.steps,
                 "flagged": r.flagged, "truncated": r.truncated, "correct": c}
                for r, c in zip(records, correct)]
    settings = {"rule": rule or hb.settings.get("rule"), "W": W or hb.settings.get("W"),
                "k": k or hb.settings.get("k"), "L": L or hb.settings.get("L"),
                "empty_g": empty_g}
    result = {"command": "stop replay", "file": str(path), "benchmark": hb.benchmark,
              "settings": settings, "n_problems": len(records),
              "n_gold": None if gold_map is None else len(gold_map), "partition": buckets,
              "routing_gap": gap, "problems": problems, "notes": notes}
    if json_out:
        _emit_json(result)
        return
    console = _stdout_console()
    typer.echo(f"{path.name}: {len(records)} problems ({hb.benchmark}), rule "
               f"{settings['rule']} " + ", ".join(f"{k_}={v}" for k_, v in settings.items()
                                                  if k_ != "rule" and v is not None))
    console.print(_rich_table("commit partition", ["commit", "n", "share", "mean stop round",
                                                   "correct", "accuracy"],
                              [[b["commit"], b["n"], f"{b['share']:.2f}",
                                f"{b['mean_stop_round']:.2f}", b.get("correct", "—"),
                                _f3(b.get("accuracy"))] for b in buckets]))
    if gap is not None:
        typer.echo(f"routing gap (dispatched minus the rest): {100 * gap['gap']:+.1f} pp "
                   f"[{100 * gap['low']:+.1f}, {100 * gap['high']:+.1f}]")
    for note in notes:
        typer.echo(f"note: {note}")
    if per_problem:
        mark = {True: "yes", False: "no", None: "—"}
        console.print(_rich_table("stop rounds", ["idx", "commit", "answer", "stop round",
                                                  "correct"],
                                  [[p["idx"], p["commit"], p["answer"] or "—", p["stop_round"],
                                    mark[p["correct"]]] for p in problems]))


@stop_app.command("live")
@_handled
def stop_live(
    rule: str = typer.Option("spatial", "--rule", help="spatial or heuristic."),
    W: int = typer.Option(4, "--W", help="Arena half-width (spatial)."),
    k: int = typer.Option(4, "--k", help="Streak length (heuristic)."),
    L: int = typer.Option(15, "--L", help="Round limit: commit the fallback there."),
    n: Optional[int] = typer.Option(None, "--n", help="Workers per round (default: the length "
                                                      "of the first round)."),
    empty_g: float = typer.Option(0.0, "--empty-g", help="Score of an all-empty round."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per round (JSON "
                                                        "Lines) on stdout."),
) -> None:
    """Stop live: read rounds from stdin, one JSON list of answers per line (null = empty),
    and print the stop decision after each. After a stop, the next line starts a new problem."""
    from .._core.errors import BdaError
    from ..stopping import Stopper

    stream = typer.get_text_stream("stdin")
    stopper, problem, lineno, running = None, 1, 0, False
    for raw in stream:
        lineno += 1
        if not raw.strip():
            continue
        try:
            answers = json.loads(raw)
        except json.JSONDecodeError as err:
            raise _data_error(f"invalid JSON: {err.msg} (column {err.colno})", "answers",
                              file="<stdin>", line=lineno) from None
        if not isinstance(answers, list) or not all(
                a is None or isinstance(a, (str, int, float)) and not isinstance(a, bool)
                for a in answers):
            raise _data_error("each line must be a JSON list of answers (strings, numbers or "
                              "null)", "answers", file="<stdin>", line=lineno)
        answers = [None if a is None else str(a) for a in answers]
        if stopper is None:
            stopper = Stopper(rule, W=W, k=k, L=L, n=n if n is not None else max(len(answers), 1),
                              empty_g=empty_g)
        try:
            d = stopper.update(answers)
        except BdaError as err:
            raise _data_error(err.reason, err.field or "answers", file="<stdin>",
                              line=lineno) from None
        running = not d.stop
        if json_out:
            _emit_json({"problem": problem, "round": d.step, "stop": d.stop,
                        "commit": d.commit, "answer": d.answer, "x": d.x, "g": d.g})
        elif d.stop:
            typer.echo(f"problem {problem} round {d.step}: STOP {d.commit} answer "
                       f"{d.answer if d.answer is not None else '(none)'}")
        else:
            label = "x" if rule == "spatial" else "streak"
            typer.echo(f"problem {problem} round {d.step}: continue (g={d.g:.4f}, "
                       f"{label}={d.x})")
        if d.stop:
            stopper.reset()
            problem += 1
    if running and not json_out:
        typer.echo(f"input ended: problem {problem} still running")
    if stopper is None and not json_out:
        typer.echo("no rounds read")


# ============================================================================ audit

@app.command()
@_handled
def audit(
    log: Path = typer.Argument(..., help="Broadcast log (JSON Lines, docs/audit.md)."),
    card: Optional[Path] = typer.Option(None, "--card", help="Write the Trace-Audit Card here "
                                                             "(.json or .md)."),
    n_boot: int = typer.Option(2000, "--n-boot", help="Cluster-bootstrap resamples."),
    score_scale: float = typer.Option(1.0, "--score-scale",
                                      help="Top of the confidence scale (100 for 0-100)."),
    protocol_name: Optional[str] = typer.Option(None, "--protocol-name",
                                                help="Card field protocol_name."),
    seed: int = _seed_option("Seed of the bootstrap, folds and learned router."),
    progress: bool = _progress_option(),
    json_out: bool = _json_option(),
) -> None:
    """Routing / calibration / commitment audit of a broadcast log; prints the card."""
    _check_out(card, "--card")
    from ..audit import audit_broadcast, read_broadcast_log

    if card is not None and card.suffix.lower() not in (".json", ".md"):
        raise _data_error(f"the card path must end in .json or .md, got {card.name!r}",
                          "--card")
    if not score_scale > 0:
        raise _data_error("score scale must be > 0", "--score-scale")
    blog = read_broadcast_log(log, score_range=(0.0, score_scale))
    fields = {} if protocol_name is None else {"protocol_name": protocol_name}
    with _progress(progress and not json_out, "auditing"):
        report = audit_broadcast(blog, seed=seed, n_boot=n_boot, score_scale=score_scale,
                                 **fields)
    if card is not None:
        report.card.write(card)
    if json_out:
        _emit_json({"command": "audit", "log": str(log),
                    "card_path": None if card is None else str(card), **report.to_dict()})
        return
    typer.echo(report.to_markdown())
    if card is not None:
        typer.echo(f"card written to {card}")


# ============================================================================ convert

@app.command()
@_handled
def convert(
    dataset: Optional[str] = typer.Argument(
        None, help="A crowd set name (bluebirds, act_CF, ...), a bundled DASE excerpt "
                   "(gpqa_w4_head50, aime_w8_head20) or a DASE history file."),
    out: Optional[Path] = typer.Option(None, "--out", help="Trace file to write (JSON Lines)."),
    root: Optional[Path] = typer.Option(None, "--root",
                                        help="Shared data folder for non-bundled crowd sets."),
    gold: bool = typer.Option(True, "--gold/--no-gold",
                              help="DASE: recover gold from the logs' correctness flags."),
    moves: str = typer.Option("proposals", "--moves",
                              help="DASE move mapping: proposals or typed."),
    list_: bool = typer.Option(False, "--list", help="List the known data set names."),
    json_out: bool = _json_option(),
) -> None:
    """Convert a real data set (crowd labels, DASE histories) to a trace file."""
    _check_out(out, "--out")
    from .. import write_traces
    from ..datasets import DASE_EXCERPTS, list_crowd, load_crowd, load_dase_history, to_traces

    if list_:
        names = {"crowd": list(list_crowd()), "crowd_bundled": list(list_crowd(bundled=True)),
                 "dase_excerpts": list(DASE_EXCERPTS)}
        if json_out:
            _emit_json(names)
        else:
            typer.echo("crowd sets: " + ", ".join(names["crowd"]))
            typer.echo("bundled crowd sets: " + ", ".join(names["crowd_bundled"]))
            typer.echo("DASE excerpts: " + ", ".join(names["dase_excerpts"]))
        return
    if dataset is None:
        raise _data_error("name a data set (or pass --list)", "DATASET")
    if out is None:
        raise _data_error("--out is required", "--out")
    crowd = {n.casefold(): n for n in list_crowd()}
    report: dict[str, Any] = {}
    if dataset in DASE_EXCERPTS or dataset.endswith(".jsonl") or Path(dataset).is_file():
        path = Path(DASE_EXCERPTS.get(dataset, dataset))
        if not path.is_file():
            raise _data_error("no such file", "DATASET", file=str(path))
        traces = load_dase_history(path, gold="recover" if gold else None, moves=moves)
        kind = "dase"
        report = dict(traces.report)
    elif dataset.casefold() in crowd:
        data = load_crowd(crowd[dataset.casefold()], root)
        traces = to_traces(data)
        kind = "crowd"
        report = {"name": data.name, "candidates": list(data.candidates)}
    else:
        raise _data_error(f"unknown data set {dataset!r}: not a crowd set "
                          f"({', '.join(list_crowd())}), a DASE excerpt "
                          f"({', '.join(DASE_EXCERPTS)}) or a file", "DATASET")
    write_traces(traces, out)
    n_gold = sum(t.gold is not None for t in traces)
    summary = {"command": "convert", "dataset": dataset, "kind": kind, "out": str(out),
               "n_traces": len(traces), "n_gold": n_gold, "report": report}
    if json_out:
        _emit_json(summary)
    else:
        typer.echo(f"{len(traces)} traces ({n_gold} with gold) from {dataset} written to {out}")


# ============================================================================ report

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


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    main()
