"""The ``bda`` command line (docs/cli.md).

Subcommands: ``demo``, ``fit``, ``predict``, ``evaluate``, ``simulate``, ``study``, ``stop``
(``replay``, ``live``), ``label`` (``next``), ``audit``, ``convert``, ``report``. Every command that computes something
takes ``--json`` (one JSON object on stdout; ``stop live`` writes one per round), and the long
ones show rich progress bars on stderr (``--no-progress`` turns them off).

Exit codes: 0 success; 2 a user or input error (a :class:`~bda_jax.BdaError` — malformed traces,
data, model files, options — or a file that cannot be opened or written; also a command-line
usage error), printed as one line ``error: FILE:LINE: FIELD: message``; 1 an internal error (a
bug: please report it with the output of ``bda --debug ...``); 130 interrupted. The global
``--debug`` option (also accepted after any command's name) prints the full traceback of any
error. An error names the flag or argument (``--questions``, ``TRACES``), never the library's
argument name (:func:`flag_for`); a wrong kind of input file is answered with what it looks
like and what to do (``_files.expect_file_kind``); a gold answer that is not a candidate is a
warning line, an error with ``--strict-gold`` (:func:`check_gold`). Every command uses JAX's persistent
compilation cache (:func:`bda_jax.enable_compilation_cache`; the global ``--no-compile-cache`` or
``BDA_JAX_COMPILATION_CACHE=0`` turns it off; docs/cli.md "Compilation cache").

Guarantees every command keeps (tests/cli/test_cli_hardening.py): an output (``--out``,
``--cache``, ``--reply-cache``, ``--card``, ``--markdown``, an output folder, and the files a
command writes beside its output) that is one of the command's inputs, by any name (a symlink, a
hard link, another spelling), is refused with exit 2 before anything is read or written
(:func:`check_out_path`, :func:`check_outputs`, :func:`check_out_dir`), and two outputs are
never one file; every user string (task ids, agent names, answers, file names) prints as itself,
never as Rich markup or an emoji code (:func:`rich_table`, :func:`stdout_console`, the progress
bars), and a lone surrogate in one never crashes the output (:func:`tolerant_output`, JSON
escapes in :func:`dumps`).
"""
from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import shutil
import sys
import traceback
import warnings
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterable, Optional, Union

import typer

EXIT_OK, EXIT_INTERNAL, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 130

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Bayesian Dialectical Argumentation: calibrated answers from "
                       "deliberation traces. Exit codes: 0 ok, 2 user/input error, "
                       "1 internal error.")
stop_app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                       help="DASE stopping rules: replay history logs or stop live.")
app.add_typer(stop_app, name="stop")
label_app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                        help="Active label acquisition: which tasks to label next.")
app.add_typer(label_app, name="label")

_STATE = {"debug": False}

DEFAULT_ARMS = "majority,bda-shared,bda-per-agent,bda-confusion"


def example_traces_path() -> Path:
    """Path of the bundled example council trace file."""
    return Path(str(resources.files("bda_jax.data") / "example_council.jsonl"))


# ============================================================================ plumbing

def stdout_console():
    """A rich console on stdout, at least 110 columns wide (tables stay readable in pipes).

    Markup and emoji codes are off: every string it prints (task ids, agent names, answers,
    file names) shows as itself, ``[/bold]`` and ``:smile:`` included."""
    from rich.console import Console
    return Console(file=sys.stdout, width=max(shutil.get_terminal_size((120, 24)).columns, 110),
                   highlight=False, markup=False, emoji=False)


def stderr_console():
    """A rich console on stderr (progress bars and notes); markup and emoji codes off."""
    from rich.console import Console
    return Console(file=sys.stderr, highlight=False, markup=False, emoji=False)


def tolerant_output() -> None:
    """Make stdout and stderr print any string: a character the stream cannot encode (a lone
    surrogate from a JSON ``"\\udcff"`` escape or an undecodable file name, or non-ASCII on an
    ASCII terminal) is written as a backslash escape instead of raising. Called by every
    command (:func:`handled`) before it prints anything."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or getattr(stream, "errors", None) == "backslashreplace":
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, TypeError, io.UnsupportedOperation):   # pragma: no cover
            pass


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every lone surrogate as a ``\\uXXXX`` escape: it encodes as UTF-8."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(obj, indent=None) -> str:
    """Strict JSON text (numpy values unpacked, tuples as lists, NaN/inf as null). Non-ASCII
    stays readable; a lone surrogate in a string is written as its JSON escape ``\\udcff``,
    so the text always encodes as UTF-8 and ``json.loads`` gives the same string back."""
    from ..report import strict_json
    return printable(json.dumps(strict_json(obj), allow_nan=False, indent=indent,
                                ensure_ascii=False))


def emit_json(obj) -> None:
    """Print ``obj`` as one line of strict JSON on stdout (``--json``)."""
    typer.echo(dumps(obj))


def write_text(path: Path, text: str) -> None:
    """Write an output file atomically (a reader never sees half a file); UTF-8, a lone
    surrogate as a ``\\uXXXX`` escape (:func:`printable`)."""
    from .. import atomic_write
    text = printable(text)
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
        emit_json({"error": {"message": line, "exit_code": code, **(detail or {})}})
    raise typer.Exit(code)


@contextmanager
def _package_warnings_as_lines():
    """The package's own warnings (e.g. ``ParseWarning``) as one ``warning: ...`` line each
    on stderr, without the source line Python would print; other warnings pass through."""
    def show(message, category, filename, lineno, file=None, line=None):
        if getattr(category, "__module__", "").startswith("bda_jax"):
            typer.echo(f"warning: {' '.join(str(message).split())}", err=True)
        else:
            previous(message, category, filename, lineno, file, line)
    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def _flags_of(fn) -> dict[str, str]:
    """``{python name: flag}`` of a command: each parameter's first option name (``--questions``)
    or its argument's metavar (``TRACES``)."""
    import inspect
    from typer.models import ArgumentInfo, OptionInfo
    flags = {}
    for name, param in inspect.signature(fn).parameters.items():
        info = param.default
        if isinstance(info, OptionInfo):
            decls = [d for d in (info.param_decls or ()) if d.startswith("-")]
            longs = [d.split("/")[0] for d in decls if d.startswith("--")]
            flags[name] = (longs or decls or ["--" + name.replace("_", "-")])[0]
        elif isinstance(info, ArgumentInfo):
            flags[name] = (info.metavar or name).upper()
    return flags


#: Library argument names whose CLI flag is not found by name (``n_questions`` is ``--questions``
#: of ``bda simulate``); the rest are mapped by :func:`flag_for` from the command's parameters.
LIBRARY_FIELDS = {"n_questions": "questions", "n_rounds": "rounds", "root": "root",
                  "n_boot": "n_boot", "label_budget": "label_budget"}


def flag_for(field, flags: dict[str, str]):
    """The CLI name of an error's ``field``: a library argument name (``n_questions``,
    ``root``, ``arms``, ``traces``) becomes the command's flag or argument (``--questions``,
    ``--root``, ``--arms``, ``TRACES``) when the command has a parameter by that name (by
    :data:`LIBRARY_FIELDS`, or by the name without ``n_``); any other field (a record key, a
    flag already) is kept. ``flags``: the command's ``{parameter: flag}``."""
    if not isinstance(field, str) or field.startswith("-"):
        return field
    for name in (field, LIBRARY_FIELDS.get(field), field[2:] if field.startswith("n_") else None):
        if name is not None and name in flags:
            return flags[name]
    return field


_KWARG = re.compile(r"(?<![\w-])([A-Za-z_]\w*)=(?![=\w])")


def _cli_error(err, flags: dict[str, str]):
    """``err`` with its field as the flag, and the Python spellings in its reason too: a leading
    ``n_questions`` (``"n_questions must be ..."`` -> ``"must be ..."``), the field's name where
    it holds an underscore, and a keyword argument (``"pass root="`` -> ``"pass --root"``).
    An error located in a file (a line, task or move; or a file and a field that is not one of
    :data:`LIBRARY_FIELDS`) names a field of the file's records and is kept as it is."""
    if err.line is not None or err.task_id is not None or err.move_id is not None:
        return err                   # a field of a record in a file (``gold``), not an option
    field = err.field
    flag = flag_for(field, flags) if err.file is None or field in LIBRARY_FIELDS else field
    reason = str(err.reason)
    if flag != field:
        if reason.startswith(field + " "):
            reason = reason[len(field) + 1:]
        if "_" in field:
            reason = re.sub(rf"(?<![\w-]){re.escape(field)}(?![\w-])", flag, reason)
    reason = _KWARG.sub(lambda m: (flag_for(m.group(1), flags) if flag_for(m.group(1), flags)
                                   != m.group(1) else m.group()), reason)
    if flag == field and reason == str(err.reason):
        return err
    new = type(err).__new__(type(err))
    new.__dict__.update(err.__dict__)
    new.field, new.reason = flag, reason
    return new


def handled(fn):
    """Run a command body: BdaError and OS errors -> one line and exit 2; a MemoryError -> one
    line naming the size, exit 2; anything else -> exit 1 (with the traceback under
    ``--debug``). An error's field that is a library argument name (``n_questions``) is printed
    as the command's flag (``--questions``, :func:`flag_for`)."""
    flags = _flags_of(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .. import BdaError
        json_mode = bool(kwargs.get("json_out", False))
        if kwargs.pop("debug_here", False):
            _STATE["debug"] = True
        tolerant_output()
        try:
            with _package_warnings_as_lines():
                return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except BdaError as err:
            err = _cli_error(err, flags)
            _fail(error_line(err), EXIT_USER, json_mode,
                  {"type": type(err).__name__, "reason": err.reason, "file": err.file,
                   "line": err.line, "task_id": err.task_id, "move_id": err.move_id,
                   "field": err.field})
        except OSError as err:
            name = err.filename if err.filename is not None else ""
            msg = err.strerror or str(err)
            _fail(" ".join(f"error: {name}: {msg}".split()) if name else f"error: {msg}",
                  EXIT_USER, json_mode, {"type": type(err).__name__, "file": name})
        except MemoryError as err:
            _fail(f"error: out of memory ({err or 'the input is too large'}): use smaller sizes",
                  EXIT_USER, json_mode, {"type": "MemoryError"})
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(EXIT_INTERRUPTED)
        except Exception as err:  # noqa: BLE001 - the whole point: one line, exit 1
            hint = "" if _STATE["debug"] else " (run `bda --debug ...` for the traceback)"
            _fail(f"internal error: {type(err).__name__}: {err}{hint}".replace("\n", " "),
                  EXIT_INTERNAL, json_mode, {"type": type(err).__name__})
    return _with_common_options(wrapper, fn)


def _with_common_options(wrapper, fn):
    """Give the command ``--debug`` (the global ``bda --debug``, also accepted after the
    command's name) in its signature, which Typer reads; the option is taken out of the
    arguments before the body runs."""
    import inspect
    sig = inspect.signature(fn)
    if "debug_here" not in sig.parameters:
        extra = inspect.Parameter(
            "debug_here", inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(False, "--debug", help="Print the full traceback of any error "
                                                       "(as `bda --debug COMMAND`)."),
            annotation=bool)
        params = list(sig.parameters.values())
        wrapper.__signature__ = sig.replace(parameters=[
            *(p for p in params if p.kind != p.VAR_KEYWORD), extra,
            *(p for p in params if p.kind == p.VAR_KEYWORD)])
    return wrapper


class _NoBar:
    def report(self, description: str, done: int, total: int) -> None:
        pass


class _Bar:
    def __init__(self, progress, task):
        self.progress, self.task = progress, task

    def report(self, description: str, done: int, total: int) -> None:
        """The library's progress callback ``(description, done, total)``."""
        self.progress.update(self.task, description=description, completed=done, total=total)


@contextmanager
def progress_bar(enabled: bool, description: str, total: int | None = None):
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
    columns = [SpinnerColumn(), TextColumn("{task.description}", markup=False)]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=stderr_console(), transient=False) as prog:
        task = prog.add_task(description, total=total)
        bar = _Bar(prog, task)
        yield bar
        if total is not None:
            prog.update(task, completed=prog.tasks[0].total)


def json_option():
    """The ``--json`` option of a command."""
    return typer.Option(False, "--json", help="Print one JSON object on stdout (machine output).")


def progress_option():
    """The ``--progress/--no-progress`` option of a command."""
    return typer.Option(True, "--progress/--no-progress", help="Show progress bars on stderr.")


def seed_option(help: str = "Random seed (folds, tie-breaks, simulation)."):
    """The ``--seed`` option of a command (default 0)."""
    return typer.Option(0, "--seed", help=help)


def data_error(reason: str, field: str, **kw):
    """A :class:`~bda_jax.DataError` naming the offending option or input ``field``."""
    from .. import DataError
    return DataError(reason, field=field, **kw)


PathLike = Union[str, "os.PathLike[str]"]


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether paths ``a`` and ``b`` name one file: :func:`os.path.samefile` when both exist (a
    hard link, a symlink or another spelling of the same file), else equal resolved paths."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):        # a symlink loop
        return os.path.abspath(a) == os.path.abspath(b)


def _named_paths(inputs) -> list[tuple[str, Path]]:
    """``{label: path | None | [paths]}`` as (label, path) pairs, Nones dropped."""
    out = []
    for label, given in (inputs or {}).items():
        if given is None:
            continue
        many = given if isinstance(given, (list, tuple)) else [given]
        out += [(label, Path(g)) for g in many if g is not None]
    return out


def check_out_path(path: Optional[Path], field: str, inputs=None, *,
                   writes: Iterable[PathLike] = ()) -> None:
    """An output file path must name a file in an existing folder and must not be any input of
    the command (checked first, before any input is read or anything written).

    ``inputs``: ``{label: path | None | [paths]}``, every file the command reads (``label`` as
    the error names it: ``TRACES``, ``--config``). ``writes``: the files the command writes
    beside ``path`` (a model's ``.npz``, a manifest, the default reply cache); none of them may
    be an input either. :func:`same_file` decides. Raises :class:`~bda_jax.DataError`
    naming ``field`` and the input (exit 2)."""
    if path is None:
        return
    if path.is_dir():
        raise data_error("is a folder, expected a file path", field, file=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise data_error(f"the folder {str(parent)!r} does not exist", field, file=str(path))
    named = _named_paths(inputs)
    for written in [path, *(Path(w) for w in writes)]:
        for label, given in named:
            if same_file(written, given):
                what = "is" if written == path else f"writes {str(written)!r}, which is"
                raise data_error(f"{what} the input {label} ({given}): an output never "
                                 "overwrites an input", field, file=str(path))


def check_outputs(outputs, inputs=None, *, writes=None) -> None:
    """:func:`check_out_path` for every output ``{field: path | None}``, and no two outputs
    (or the files they write beside them, ``writes`` ``{field: [paths]}``) are one file."""
    writes = writes or {}
    seen: list[tuple[str, Path]] = []
    for field, path in outputs.items():
        if path is None:
            continue
        check_out_path(path, field, inputs, writes=writes.get(field, ()))
        for p in [Path(path), *(Path(w) for w in writes.get(field, ()))]:
            for other_field, other in seen:
                if same_file(p, other):
                    raise data_error(f"{other_field} and {field} name the same file {str(p)!r}",
                                     field, file=str(path))
            seen.append((field, p))


def check_out_dir(path: Optional[Path], field: str, inputs=None, *,
                  writes: Optional[Iterable[str]] = None) -> None:
    """An output folder must not be an existing file, and no input of the command may be
    overwritten by what the command writes there: with ``writes`` (the names of the files it
    writes in the folder, e.g. ``["index.html"]``) none of those may be an input
    (:func:`same_file`); without, no input may lie anywhere inside the folder. ``inputs`` as for
    :func:`check_out_path`. Raises :class:`~bda_jax.DataError` naming ``field`` (exit 2)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise data_error("exists and is not a folder", field, file=str(path))
    named = _named_paths(inputs)
    if writes is not None:
        for name in writes:
            for label, given in named:
                if same_file(path / name, given):
                    raise data_error(f"writes {str(path / name)!r}, which is the input {label} "
                                     f"({given}): an output never overwrites an input", field,
                                     file=str(path))
        return
    try:
        folder = path.resolve()
    except (OSError, RuntimeError):
        folder = Path(os.path.abspath(path))
    for label, given in named:
        try:
            inside = given.resolve().is_relative_to(folder)
        except (OSError, RuntimeError):
            inside = Path(os.path.abspath(given)).is_relative_to(folder)
        if inside:
            raise data_error(f"the input {label} ({given}) lies inside the output folder: keep "
                             "inputs outside it, an output never overwrites an input", field,
                             file=str(path))


def check_fraction(value: float, field: str) -> None:
    """Option ``field`` must be a number in [0, 1] (NaN is not): DataError otherwise."""
    if not 0.0 <= value <= 1.0:
        raise data_error(f"must be a number in [0, 1], got {value!r}", field)


def parse_floats(text: str, field: str) -> list[float]:
    """Comma-separated numbers of option ``field``."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise data_error(f"expected comma-separated numbers, got {text!r}", field) from None
    if not values:
        raise data_error("expected at least one number", field)
    return values


def parse_arms(text: str) -> list[str]:
    """Comma-separated arm names (``--arms``), each checked, duplicates dropped."""
    from .. import make_arm
    arms = [a.strip() for a in text.split(",") if a.strip()]
    if not arms:
        raise data_error("no arm given", "--arms")
    for a in arms:
        make_arm(a)                     # DataError naming the known arms
    return list(dict.fromkeys(arms))


def read_trace_file(path: Path, lenient: bool, field: str = "TRACES", *,
                    command: str | None = None, gold: str | None = None):
    """The traces of a JSON Lines file; an empty file is an input error. A file the reader
    refuses that is another kind of file (a CSV, a JSON array, gzip, a model: the arguments
    swapped) is answered with what it looks like and what to do (:func:`expect_file_kind`).
    ``field``: the argument or option naming the file in errors.

    ``gold``: ``"warn"`` prints one warning line when some gold answers are not among their
    task's candidates (a typo? such a task is scored wrong), with their count and the first
    file:line; ``"strict"`` (``--strict-gold``) makes that an error (exit 2); None: no check."""
    from .. import read_traces
    from ._files import expect_file_kind
    with expect_file_kind(path, "traces", field, command):
        traces = read_traces(path, lenient=lenient)
    if not traces:
        raise data_error("the trace file holds no task", field, file=str(path))
    if gold is not None:
        check_gold(traces, path, strict=gold == "strict")
    return traces


def gold_not_candidates(traces) -> list[int]:
    """Positions of the traces whose gold answer is given but is not a candidate (the tally's
    ``gold_missing``: compared after the default answer normalizer)."""
    import numpy as np

    from .. import tally
    return np.flatnonzero(np.asarray(tally(traces).gold_missing)).tolist()


def check_gold(traces, path: Path, strict: bool) -> int:
    """Count the gold answers that are not candidates: one ``warning:`` line with the count and
    the first file:line (its task and gold), or with ``strict`` a DataError there (exit 2).
    Returns the count."""
    from .. import DataError
    missing = gold_not_candidates(traces)
    if not missing:
        return 0
    first = traces[missing[0]]
    source = getattr(first, "source", None) or (None, None)
    source = (source[0] or str(path), source[1])
    where = f"{source[0]}:{source[1]}" if source[1] is not None else str(source[0])
    what = (f"{len(missing)} of {len(traces)} task(s) have a gold answer that is not one of "
            f"their candidates (scored wrong: a typo?); first: task {first.task_id!r} gold "
            f"{first.gold!r}")
    if strict:
        raise DataError(what + " (refused by --strict-gold)", file=str(source[0]),
                        line=source[1], task_id=first.task_id, field="gold")
    typer.echo(f"warning: {where}: {printable(what)} (--strict-gold makes this an error)",
               err=True)
    return len(missing)


def strict_gold_option():
    """The ``--strict-gold`` option of a command that reads labeled traces."""
    return typer.Option(False, "--strict-gold",
                        help="A gold answer that is not one of its task's candidates is an "
                             "error (default: a warning with the count and the first line).")


def available_memory() -> int | None:
    """Bytes of memory this process can expect to get: ``MemAvailable`` of /proc/meminfo, else
    the physical memory (``SC_PHYS_PAGES * SC_PAGE_SIZE``); None when neither is known."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(estimate: int, field: str, what: str) -> None:
    """Refuse up front (DataError naming ``field``, exit 2) a size whose ``estimate`` (bytes)
    is beyond :func:`available_memory`, the estimate in the message, instead of letting the
    process be killed for memory half way."""
    have = available_memory()
    if have is not None and estimate > have:
        raise data_error(f"{what} needs about {_gib(estimate)} of memory, {_gib(have)} is "
                         "available: use a smaller size", field)


#: Peak bytes per simulated move: about 4.6 kB per question of 3 seats x 3 rounds (9 moves)
#: measured with tracemalloc for ``simulate_council`` at 2,000 and 8,000 questions (Python
#: objects and arrays), rounded up to leave room for writing the file.
SIMULATED_MOVE_BYTES = 600


def simulation_bytes(questions: int, seeds_per_question: int, n_seats: int,
                     n_rounds: int) -> int:
    """Estimated peak memory (bytes) of simulating ``questions x seeds_per_question`` councils
    of ``n_seats`` seats over ``n_rounds`` rounds (:data:`SIMULATED_MOVE_BYTES` per move), for
    :func:`check_memory` (``bda simulate --questions``)."""
    moves = max(questions, 0) * max(seeds_per_question, 1) * max(n_seats, 1) * max(n_rounds, 1)
    return SIMULATED_MOVE_BYTES * moves


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**28 else f"{n / 2**20:.0f} MiB"


def rich_table(title: str | None, columns: list[str], rows: list[list[str]]):
    """A rich table of string cells. Title, headers and cells are plain text (``rich.text.Text``),
    never markup: a task id ``[/bold]`` prints as itself on any console, a lone surrogate as its
    ``\\uXXXX`` escape (:func:`printable`)."""
    from rich.table import Table
    from rich.text import Text

    def text(x) -> Text:
        return Text(printable(str(x)))
    table = Table(title=None if title is None else text(title))
    for c in columns:
        table.add_column(text(c))
    for r in rows:
        table.add_row(*[text(x) for x in r])
    return table


def fmt3(x) -> str:
    """A number to three decimals; ``—`` for None or a non-finite value."""
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
    no_compile_cache: bool = typer.Option(
        False, "--no-compile-cache",
        help="Do not use JAX's persistent compilation cache (default: on, in "
             "$BDA_JAX_CACHE_DIR or ~/.cache/bda_jax/jax; BDA_JAX_COMPILATION_CACHE=0 also "
             "turns it off)."),
) -> None:
    """bda_jax command line. Exit codes: 0 ok, 2 user/input error, 1 internal error."""
    _STATE["debug"] = debug
    if not no_compile_cache:
        from .. import enable_compilation_cache
        with _package_warnings_as_lines():       # an unusable folder: one warning line, go on
            enable_compilation_cache()


def main() -> None:  # console-script entry point
    app()


# `bda label next` registers itself on label_app when imported; last, after every name it uses
from ._label import label_next_command  # noqa: E402,F401
