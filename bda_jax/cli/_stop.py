"""``bda stop replay`` and ``bda stop live`` (DASE stopping rules)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._app import (
    _data_error,
    _emit_json,
    _f3,
    _handled,
    _json_option,
    _rich_table,
    _seed_option,
    _stdout_console,
    stop_app,
)


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
