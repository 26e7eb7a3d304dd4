"""``bda fit``, ``bda predict``, ``bda evaluate`` and ``bda convert``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from ._files import expect_file_kind
from ._app import (
    DEFAULT_ARMS,
    app,
    check_out_path,
    check_outputs,
    data_error,
    dumps,
    emit_json,
    fmt3,
    handled,
    json_option,
    parse_arms,
    progress_bar,
    progress_option,
    read_trace_file,
    rich_table,
    strict_gold_option,
    seed_option,
    stdout_console,
    write_text,
)


def _model_arrays_path(model: Path) -> Path:
    """The ``.npz`` a model file keeps its large arrays in (``model.json`` -> ``model.npz``,
    any other name -> ``NAME.npz``: where ``bda_jax.aggregators.save_model`` puts it)."""
    root, ext = os.path.splitext(os.fspath(model))
    return Path((root if ext.lower() == ".json" else os.fspath(model)) + ".npz")


def _resolve_arm(arm: str) -> str:
    """``--arm`` with ``auto`` (alone or under an ``iso:`` / ``temp:`` wrapper) read as the
    ``bda-auto`` arm."""
    head, _, base = arm.rpartition(":")
    if base != "auto":
        return arm
    return f"{head}:bda-auto" if head else "bda-auto"


def _auto_lines(params: dict) -> list[str]:
    """What ``bda fit`` prints about a ``bda-auto`` fit: the winner, its inner-CV Brier and its
    margin over the runner-up, then the winner's hyperparameters."""
    variant = params["variant"]
    brier = params[f"brier.{variant}"]
    margin = params["margin"]
    line = f"chose {variant}: inner-CV Brier {brier:.4f}"
    if margin is not None:
        others = {k[len("brier."):]: v for k, v in params.items()
                  if k.startswith("brier.") and k != f"brier.{variant}"}
        runner = min(others, key=others.get)
        line += f", {margin:.4f} below {runner}"
    rest = {k: v for k, v in params.items()
            if k not in ("variant", "margin") and not k.startswith("brier.")}
    return [line] + ([_selected_line(rest)] if rest else [])


def _selected_line(params: dict) -> str:
    return "selected: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in params.items())


def _gold_mode(strict: bool) -> str:
    """``read_trace_file``'s gold check: a warning, or with ``--strict-gold`` an error."""
    return "strict" if strict else "warn"


@app.command()
@handled
def fit(
    traces: Path = typer.Argument(..., help="Labeled JSON Lines trace file."),
    arm: str = typer.Option("auto", "--arm",
                            help="Arm name: auto (the default: the BDA arm with the lowest "
                                 "inner-CV Brier, bda-auto) or any arm of `bda evaluate "
                                 "--help`; iso:/temp: wrappers too."),
    out: Path = typer.Option(..., "--out", help="Model file to write (JSON; large arrays go "
                                                "to an .npz beside it)."),
    seed: int = seed_option("Seed of the inner CV folds and of the tie-break."),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves instead of failing."),
    strict_gold: bool = strict_gold_option(),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Fit an aggregator on labeled traces and save it as a model artifact."""
    check_out_path(out, "--out", {"TRACES": traces}, writes=[_model_arrays_path(out)])
    from ..aggregators import fit_model_file

    arm = _resolve_arm(arm)
    tr = read_trace_file(traces, lenient, command="bda fit", gold=_gold_mode(strict_gold))
    with progress_bar(progress and not json_out, f"fitting {arm} on {len(tr)} tasks"):
        summary = fit_model_file(tr, arm, out, seed=seed, source=str(traces))
    if json_out:
        emit_json(summary)
        return
    typer.echo(f"fitted {arm} ({summary['estimator']}) on {summary['n_tasks']} tasks "
               f"({summary['n_labeled']} labeled), agents {', '.join(summary['agents'])}")
    params = summary["params"] or {}
    for line in (_auto_lines(params) if "variant" in params else
                 [_selected_line(params)] if params else []):
        typer.echo(line)
    typer.echo(f"model written to {out}")


@app.command()
@handled
def predict(
    model: Path = typer.Argument(..., help="Model file written by `bda fit`."),
    traces: Path = typer.Argument(..., help="JSON Lines trace file to predict."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write one JSON line per task here."),
    allow_missing_agents: bool = typer.Option(
        False, "--allow-missing-agents",
        help="Accept traces in which some of the model's agents never speak."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Tie-break seed (default: the "
                                                            "model's own)."),
    set_alpha: Optional[float] = typer.Option(
        None, "--set", metavar="ALPHA",
        help="Also each task's answer set with coverage 1 - ALPHA (split conformal), "
             "calibrated on the labeled tasks of --calibration (default: of TRACES), which the "
             "model must not have been fitted on."),
    set_method: str = typer.Option("lac", "--set-method",
                                   help="Answer-set score with --set: lac or aps."),
    calibration: Optional[Path] = typer.Option(
        None, "--calibration", help="Labeled JSON Lines traces the model was not fitted on: "
                                    "they calibrate --set."),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves instead of failing."),
    strict_gold: bool = strict_gold_option(),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Per-task posterior, decision and confidence (and answer set) from a saved model."""
    arrays = _model_arrays_path(model)
    check_out_path(out, "--out", {"MODEL": model, "TRACES": traces, "--calibration": calibration,
                                  "MODEL's arrays": arrays if arrays.exists() else None})
    if set_alpha is None and calibration is not None:
        raise data_error("--calibration calibrates answer sets: give --set ALPHA too",
                         "--calibration")
    if set_alpha is not None:
        if not 0.0 < set_alpha < 1.0:
            raise data_error(f"ALPHA must be in (0, 1), got {set_alpha:g}", "--set")
        if set_method not in ("lac", "aps"):
            raise data_error(f"must be lac or aps, got {set_method!r}", "--set-method")
    from ..aggregators import load_model, predict_tasks

    with expect_file_kind(model, "model", "MODEL", "bda predict"):
        art = load_model(model)
    gold = _gold_mode(strict_gold)
    tr = read_trace_file(traces, lenient, command="bda predict", gold=gold)
    cal = None if calibration is None else read_trace_file(calibration, lenient, "--calibration",
                                                           gold=gold)
    with progress_bar(progress and not json_out, f"predicting {len(tr)} tasks"):
        rows, result = predict_tasks(art, tr, seed=seed,
                                     allow_missing_agents=allow_missing_agents,
                                     source=str(traces), set_alpha=set_alpha,
                                     set_method=set_method, calibration=cal,
                                     calibration_source=None if calibration is None
                                     else str(calibration))
    summary = {"command": "predict", "model": str(model), "estimator": result["estimator"],
               "arm": result["arm"], "traces": str(traces), "n_tasks": result["n_tasks"],
               "n_labeled": result["n_labeled"], "accuracy": result["accuracy"],
               "training_data": result["training_data"], "out": None if out is None else str(out)}
    if "set" in result:
        summary["set"] = {**result["set"],
                          "calibration": str(calibration if calibration is not None else traces)}
    n_lab, in_sample = result["n_labeled"], result["training_data"]
    n_ok = sum(bool(r.get("correct")) for r in rows)
    if out is not None:
        write_text(out, "".join(dumps(r) + "\n" for r in rows))
    if json_out:
        emit_json({**summary, "predictions": rows})
        return
    if out is None:
        with_sets = "set" in summary
        table = [[r["task_id"], "  ".join(f"{c} {p:.3f}" for c, p in
                                         zip(r["candidates"], r["proba"])),
                  r["decision"], f"{r['confidence']:.3f}"]
                 + (["{" + ", ".join(r["set"]) + "}"] if with_sets else [])
                 + ["—" if "gold" not in r else (r["gold"] or "(not a candidate)")]
                 for r in rows]
        stdout_console().print(rich_table(
            f"{summary['arm'] or summary['estimator']} posterior — {traces.name}",
            ["task", "posterior over candidates", "decision", "conf."]
            + ([f"set ({1 - set_alpha:.0%})"] if with_sets else []) + ["gold"], table))
    else:
        typer.echo(f"{len(rows)} predictions written to {out}")
    if n_lab:
        typer.echo(f"accuracy on {n_lab} labeled tasks: {n_ok}/{n_lab} = {n_ok / n_lab:.3f}"
                   + (" (in-sample: these are the training traces)" if in_sample else ""))
    if "set" in summary:
        s = summary["set"]
        line = (f"answer sets ({s['method']}, alpha {s['alpha']:g}) calibrated on "
                f"{s['n_calibration']} labeled tasks of {Path(s['calibration']).name}: mean size "
                f"{s['mean_size']:.2f}, {s['empty']:.1%} empty")
        if s["coverage"] is not None:
            line += f", coverage {s['coverage']:.3f} on {s['n_labeled']} labeled tasks" + (
                " (the calibration tasks themselves: at least 1 - alpha by construction)"
                if s["calibrated_on_these_tasks"] else "")
        typer.echo(line)


@app.command()
@handled
def evaluate(
    traces: Path = typer.Argument(..., help="Labeled JSON Lines trace file."),
    arms: str = typer.Option(DEFAULT_ARMS, "--arms",
                             help="Comma-separated arms: majority, bda-shared, bda-per-agent, "
                                  "bda-confusion, bda-confusion-uniform, bda-tempered, bda-auto, "
                                  "stacking, "
                                  "gated-vote, ds-em, "
                                  "verbalized, best-member; iso:<arm> / temp:<arm> wrappers; "
                                  "with --config also the LLM methods moa, moa-lite, self-moa, "
                                  "argllms."),
    config: Optional[Path] = typer.Option(None, "--config",
                                          help="Council config (TOML) whose [methods] models "
                                               "the LLM-method arms call."),
    reply_cache: Optional[Path] = typer.Option(None, "--reply-cache",
                                               help="Reply cache of the LLM-method arms (SQLite; "
                                                    "default TRACES.methods.sqlite)."),
    replay_only: bool = typer.Option(False, "--replay-only",
                                     help="LLM-method arms never call a model: every reply "
                                          "must be in the reply cache."),
    method_runs: Optional[list[Path]] = typer.Option(None, "--method-run",
                                                     help="A stored method run (`bda council "
                                                          "method --out`) to score as an arm; "
                                                          "repeatable."),
    folds: int = typer.Option(5, "--folds", help="Outer folds (grouped by cluster)."),
    label_budget: Optional[int] = typer.Option(None, "--label-budget",
                                               help="Labeled training tasks per outer fold "
                                                    "(default: all)."),
    reference: str = typer.Option("majority", "--reference",
                                  help="Arm the paired bootstraps compare against."),
    n_resamples: int = typer.Option(2000, "--n-resamples", help="Bootstrap resamples."),
    set_alpha: Optional[float] = typer.Option(
        None, "--set", metavar="ALPHA",
        help="Also answer sets with coverage 1 - ALPHA per arm (split conformal, calibrated "
             "on each outer fold's training labels): coverage and mean set size columns."),
    set_method: str = typer.Option("lac", "--set-method",
                                   help="Answer-set score with --set: lac or aps."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Resumable cell cache (JSON "
                                                               "Lines): finished arms are kept."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the results JSON here "
                                                           "(input of `bda report`)."),
    seed: int = seed_option(),
    lenient: bool = typer.Option(False, help="Skip inadmissible moves instead of failing."),
    strict_gold: bool = strict_gold_option(),
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Nested cross-validated evaluation of arms: accuracy, ECE, Brier, paired bootstraps."""
    check_outputs({"--out": out, "--cache": cache, "--reply-cache": reply_cache},
                  {"TRACES": traces, "--config": config, "--method-run": method_runs})
    from .. import BdaError, make_arm
    from ..council import METHODS
    from ..report import evaluation_results

    method_names = [a.strip() for a in arms.split(",") if a.strip() in METHODS]
    if method_names and config is None:
        raise data_error(f"the LLM-method arms {', '.join(method_names)} need --config (the "
                         "models they call)", "--config")
    arm_list = parse_arms(",".join(a for a in arms.split(",") if a.strip() not in METHODS)
                          or reference)
    try:
        make_arm(reference)
    except BdaError as err:                # the arm check names --arms; this is --reference
        raise data_error(str(err.reason), "--reference") from None
    if folds < 2:
        raise data_error(f"need at least 2 folds, got {folds}", "--folds")
    if n_resamples < 1:
        raise data_error(f"must be an integer >= 1, got {n_resamples}", "--n-resamples")
    sets = {}
    if set_alpha is not None:
        if not 0.0 < set_alpha < 1.0:
            raise data_error(f"ALPHA must be in (0, 1), got {set_alpha:g}", "--set")
        if set_method not in ("lac", "aps"):
            raise data_error(f"must be lac or aps, got {set_method!r}", "--set-method")
        sets = {"set_alpha": set_alpha, "set_method": set_method}
    tr = read_trace_file(traces, lenient, command="bda evaluate", gold=_gold_mode(strict_gold))
    methods = []
    if method_names or method_runs:
        from ..council import Runtime, make_method, read_config, read_method_run
        methods = [read_method_run(p) for p in method_runs or ()]
        if method_names:
            cfg = read_config(config)
            runtime = Runtime.from_config(
                cfg, cache_path=reply_cache or f"{traces}.methods.sqlite",
                cache_mode="replay" if replay_only else "record")
            methods += [make_method(name, cfg, runtime) for name in dict.fromkeys(method_names)]
    with progress_bar(progress and not json_out, "evaluating", total=1) as bar:
        result = evaluation_results(tr, arm_list, folds=folds, label_budget=label_budget,
                                    reference=reference, n_resamples=n_resamples, seed=seed,
                                    cache=cache, progress=bar.report, source=str(traces),
                                    methods=methods, **sets)
    if out is not None:
        write_text(out, dumps(result, indent=1) + "\n")
    if json_out:
        emit_json(result)
        return
    rows = []
    for r in result["table"]:
        b = result["bootstrap"].get(r["arm"])
        ci = "" if b is None else (f"{b['accuracy']['delta']:+.3f} "
                                   f"[{b['accuracy']['ci_low']:+.3f}, "
                                   f"{b['accuracy']['ci_high']:+.3f}]")
        cover = [fmt3(r.get("coverage")), fmt3(r.get("mean_set_size"))] if sets else []
        rows.append([r["arm"], fmt3(r["accuracy"]), fmt3(r["ece_ew"]), fmt3(r["brier"]),
                     fmt3(r["brier_mc"]), *cover, r["n"], ci])
    stdout_console().print(rich_table(
        f"{traces.name}: {result['n_tasks']} tasks, {result['n_folds']} outer folds, seed {seed}"
        + (f", answer sets at 1 - {set_alpha:g} ({set_method})" if sets else ""),
        ["arm", "accuracy", "ECE_ew", "Brier", "Brier_mc",
         *(["coverage", "set size"] if sets else []), "n",
         f"Δacc vs {reference} [95% CI]"], rows))
    if out is not None:
        typer.echo(f"results written to {out}")


@app.command()
@handled
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
    progress: bool = progress_option(),
    json_out: bool = json_option(),
) -> None:
    """Convert a real data set (crowd labels, DASE histories) to a trace file."""
    from .. import write_traces
    from ..datasets import DASE_EXCERPTS, list_crowd, load_crowd, load_dase_history, to_traces

    source = None if dataset is None else Path(DASE_EXCERPTS.get(dataset, dataset))
    check_out_path(out, "--out", {"DATASET": source if source and source.is_file() else None})

    if list_:
        names = {"crowd": list(list_crowd()), "crowd_bundled": list(list_crowd(bundled=True)),
                 "dase_excerpts": list(DASE_EXCERPTS)}
        if json_out:
            emit_json(names)
        else:
            typer.echo("crowd sets: " + ", ".join(names["crowd"]))
            typer.echo("bundled crowd sets: " + ", ".join(names["crowd_bundled"]))
            typer.echo("DASE excerpts: " + ", ".join(names["dase_excerpts"]))
        return
    if dataset is None:
        raise data_error("name a data set (or pass --list)", "DATASET")
    if out is None:
        raise data_error("--out is required", "--out")
    crowd = {n.casefold(): n for n in list_crowd()}
    report: dict[str, Any] = {}
    bar = progress_bar(progress and not json_out, f"converting {dataset}")
    if dataset in DASE_EXCERPTS or dataset.endswith(".jsonl") or Path(dataset).is_file():
        path = Path(DASE_EXCERPTS.get(dataset, dataset))
        if not path.is_file():
            raise data_error("no such file", "DATASET", file=str(path))
        with expect_file_kind(path, "dase-history", "DATASET", "bda convert"), bar:
            traces = load_dase_history(path, gold="recover" if gold else None, moves=moves)
        kind = "dase"
        report = dict(traces.report)
    elif dataset.casefold() in crowd:
        with bar:
            data = load_crowd(crowd[dataset.casefold()], root)
            traces = to_traces(data)
        kind = "crowd"
        report = {"name": data.name, "candidates": list(data.candidates)}
    else:
        raise data_error(f"unknown data set {dataset!r}: not a crowd set "
                         f"({', '.join(list_crowd())}), a DASE excerpt "
                         f"({', '.join(DASE_EXCERPTS)}) or a file", "DATASET")
    write_traces(traces, out)
    n_gold = sum(t.gold is not None for t in traces)
    summary = {"command": "convert", "dataset": dataset, "kind": kind, "out": str(out),
               "n_traces": len(traces), "n_gold": n_gold, "report": report}
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"{len(traces)} traces ({n_gold} with gold) from {dataset} written to {out}")


