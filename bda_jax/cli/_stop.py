"""``bda stop replay`` and ``bda stop live`` (DASE stopping rules)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from ._app import (
    check_fraction,
    data_error,
    emit_json,
    fmt3,
    handled,
    json_option,
    progress_bar,
    progress_option,
    rich_table,
    seed_option,
    stdout_console,
    stop_app,
)
from ._files import expect_file_kind


def _dase_path(log: Optional[Path], bundled: Optional[str]) -> Path:
    from ..datasets import DASE_EXCERPTS
    if (log is None) == (bundled is None):
        raise data_error("give a history file or --bundled NAME (one of "
                          f"{', '.join(DASE_EXCERPTS)})", "LOG")
    if bundled is not None:
        if bundled not in DASE_EXCERPTS:
            raise data_error(f"unknown bundled excerpt {bundled!r}; expected one of "
                              f"{', '.join(DASE_EXCERPTS)}", "--bundled")
        return Path(DASE_EXCERPTS[bundled])
    return log


@stop_app.command("replay")
@handled
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
    seed: int = seed_option("Seed of the routing-gap bootstrap."),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Replay a DASE history under a stopping rule: stop rounds and the commit partition."""
    from ..stopping import replay_summary

    check_fraction(empty_g, "--empty-g")
    path = _dase_path(log, bundled)
    if rule is not None and rule not in ("spatial", "heuristic"):
        raise data_error(f"rule must be spatial or heuristic, got {rule!r}", "--rule")
    gold_source = False if not gold else gold_from if gold_from is not None else True
    with expect_file_kind(log, "dase-history", "LOG", "bda stop replay"), \
            progress_bar(progress and not json_out, f"replaying {path.name}"):
        summary = replay_summary(path, rule=rule, W=W, k=k, L=L, empty_g=empty_g,
                                 gold=gold_source, n_boot=n_boot, seed=seed)
    result = {"command": "stop replay", **summary.to_json()}
    if json_out:
        emit_json(result)
        return
    settings, buckets, gap = summary.settings, summary.partition, summary.routing_gap
    console = stdout_console()
    typer.echo(f"{path.name}: {summary.n_problems} problems ({summary.benchmark}), rule "
               f"{settings['rule']} " + ", ".join(f"{k_}={v}" for k_, v in settings.items()
                                                  if k_ != "rule" and v is not None))
    console.print(rich_table("commit partition", ["commit", "n", "share", "mean stop round",
                                                   "correct", "accuracy"],
                              [[b["commit"], b["n"], f"{b['share']:.2f}",
                                f"{b['mean_stop_round']:.2f}", b.get("correct", "—"),
                                fmt3(b.get("accuracy"))] for b in buckets]))
    if gap is not None:
        typer.echo(f"routing gap (dispatched minus the rest): {100 * gap['gap']:+.1f} pp "
                   f"[{100 * gap['low']:+.1f}, {100 * gap['high']:+.1f}]")
    for note in summary.notes:
        typer.echo(f"note: {note}")
    if per_problem:
        mark = {True: "yes", False: "no", None: "—"}
        console.print(rich_table("stop rounds", ["idx", "commit", "answer", "stop round",
                                                  "correct"],
                                  [[p["idx"], p["commit"], p["answer"] or "—", p["stop_round"],
                                    mark[p["correct"]]] for p in summary.problems]))


@stop_app.command("live")
@handled
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
    and print the stop decision after each. After a stop, the next line starts a new problem.

    Stdin must be UTF-8; a line that is not, is not a JSON list of answers, holds a non-finite
    number (NaN, Infinity, 1e999) or a string that is not valid Unicode (a lone surrogate
    escape ``"\\udcff"``) is an input error naming ``<stdin>:LINE`` (exit 2); the options are
    checked before the first line is read."""
    from .. import BdaError
    from ..stopping import Stopper

    def settings_error(err):
        field = {"empty_g": "--empty-g"}.get(err.field, f"--{err.field}" if err.field else None)
        return data_error(err.reason, field)

    check_fraction(empty_g, "--empty-g")
    try:                                  # every option, before any input is read
        Stopper(rule, W=W, k=k, L=L, n=n if n is not None else 1, empty_g=empty_g)
    except BdaError as err:
        raise settings_error(err) from None
    stream = typer.get_binary_stream("stdin")
    stopper, problem, lineno, running = None, 1, 0, False
    for raw_bytes in stream:
        lineno += 1
        answers = _read_round(raw_bytes, lineno)
        if answers is None:
            continue
        if stopper is None:
            stopper = Stopper(rule, W=W, k=k, L=L, n=n if n is not None else max(len(answers), 1),
                              empty_g=empty_g)
        try:
            d = stopper.update(answers)
        except BdaError as err:
            raise data_error(err.reason, err.field or "answers", file="<stdin>",
                              line=lineno) from None
        running = not d.stop
        if json_out:
            emit_json({"problem": problem, "round": d.step, "stop": d.stop,
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


def _read_round(raw_bytes: bytes, lineno: int) -> Optional[list]:
    """One stdin line of ``bda stop live`` as its answers (str or None); None for a blank line.
    Anything else than UTF-8 text holding a JSON list of strings, finite numbers and nulls is a
    DataError naming ``<stdin>:lineno``."""
    where = dict(file="<stdin>", line=lineno)
    try:
        raw = raw_bytes.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as err:
        raise data_error(f"not UTF-8 text: byte 0x{raw_bytes[err.start]:02x} at column "
                          f"{err.start + 1}", "answers", **where) from None
    if not raw.strip():
        return None
    try:
        answers = json.loads(raw)
    except json.JSONDecodeError as err:
        raise data_error(f"invalid JSON: {err.msg} (column {err.colno})", "answers",
                          **where) from None
    except (ValueError, RecursionError) as err:   # an integer too long, nesting too deep
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise data_error(f"invalid JSON: {reason}", "answers", **where) from None
    if not isinstance(answers, list) or not all(
            a is None or isinstance(a, (str, int, float)) and not isinstance(a, bool)
            for a in answers):
        raise data_error("each line must be a JSON list of answers (strings, numbers or "
                          "null)", "answers", **where)
    for i, a in enumerate(answers):
        if isinstance(a, float) and not math.isfinite(a):
            raise data_error(f"answer {a!r} is not a finite number", f"answers[{i}]", **where)
        if isinstance(a, str):
            try:
                a.encode("utf-8")
            except UnicodeEncodeError:
                raise data_error(f"answer {a!r} is not valid Unicode text (a lone surrogate)",
                                  f"answers[{i}]", **where) from None
    return [None if a is None else str(a) for a in answers]


# ============================================================================ audit
