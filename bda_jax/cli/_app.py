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
import traceback
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Optional

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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
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


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    main()
