"""The fair attack study ([BDA] §7, Eq. 8, Table 4, Figure 2, Appendix F.7): every arm clean and
under the one adversary role rho, on the same questions, in one resumable command.

Two councils deliberate the question set: the clean one (every seat honest) and the attacked
one (the last ``k`` seats play rho: the council adversary of Appendix F). The count-based arms
and MoA / MoA-Lite read those traces (rho reaches them through the seats, gamma = the adversary
seats' share of what they read); Self-MoA and ArgLLMs never read a council and are attacked
inside their own ``Gen`` (rho on the sampled model, on the argument generator routed by gold;
gamma = 1). Every aggregation rule, the synthesizer and the evaluator stay clean.

Everything goes through one reply cache (``<out>/cache.sqlite`` unless given): a killed study
rerun with the same inputs repeats no call. Writes into ``out`` (a directory):
``clean.traces.jsonl`` / ``attacked.traces.jsonl`` (with their manifests), ``methods/<name>.
<condition>.json`` (every method run, :class:`~bda_jax.council.MethodRun`), ``attack.json``
(the study: rows, council ledgers, the evaluations), ``attack.md`` (the table) and
``attack.png`` (the Figure 2 style plot).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .._core.errors import DataError
from .._core.io import atomic_write
from .._core.traces import read_traces
from .._core.version import __version__
from ..aggregators import ARMS, evaluate, is_supervised
from ._catalog import METHODS, make_method
from ._config import CouncilConfig
from ._methods import Runtime
from ._questions import Question
from ._runner import run_council

__all__ = ["ATTACK_KIND", "DEFAULT_ATTACK_ARMS", "AttackStudy", "run_attack", "run_attack_files",
           "attack_table", "plot_attack"]

ATTACK_KIND = "bda_jax.attack_study"
ATTACK_SCHEMA_VERSION = 1
#: the arms of [BDA] Table 4, in its order
DEFAULT_ATTACK_ARMS = ("majority", "stacking", "gated-vote", "ds-em", "moa", "moa-lite",
                       "self-moa", "argllms", "bda-per-agent", "bda-confusion")
CONDITIONS = ("clean", "attacked")


@dataclass
class AttackStudy:
    """What :func:`run_attack` wrote: ``rows`` (one per arm and condition: accuracy, ece_ew,
    ece_em, brier, gamma, reads_council, calibration_applicable, calls, cached, tokens, cost),
    ``council`` (each council run's ledger), ``adversaries``, ``k`` and the ``files``."""

    rows: list[dict]
    council: dict
    adversaries: list[str]
    k: int
    files: dict

    def to_json(self) -> dict:
        return {"rows": self.rows, "council": self.council, "adversaries": self.adversaries,
                "k": self.k, "files": self.files}


def _check(questions: Sequence[Question], config: CouncilConfig, k: int, arms: Sequence[str]):
    if not questions:
        raise DataError("the question set is empty", field="questions")
    for q in questions:
        if q.candidates is None or q.gold is None:
            raise DataError("the attack study needs every question's candidates and gold "
                            "(rho is gold-aware and the study scores every arm)",
                            task_id=q.task_id, field="candidates" if q.candidates is None
                            else "gold")
    n = len(config.seats)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise DataError(f"k must be an integer in [1, {n}] (the council has {n} seats), got {k!r}",
                        field="k")
    for arm in arms:
        if arm not in METHODS and arm not in ARMS:
            raise DataError(f"unknown arm {arm!r}; expected one of {sorted(ARMS)} or "
                            f"{list(METHODS)}", field="arms")


def _council(config: CouncilConfig, adversaries: set[str]) -> CouncilConfig:
    seats = tuple(replace(s, role="adversary" if s.name in adversaries else "honest")
                  for s in config.seats)
    return replace(config, seats=seats)


def _count_gamma(condition: str, k: int, n: int) -> float:
    return k / n if condition == "attacked" else 0.0


def run_attack(questions: Sequence[Question], config: CouncilConfig, out, *, k: int = 2,
               arms: Sequence[str] = DEFAULT_ATTACK_ARMS, folds: int = 5,
               label_budget: int | None = None, seed: int = 0, n_resamples: int = 2000,
               cache_path=None, cache_mode: str = "record",
               progress: Callable[[str], None] | None = None,
               question_file: str | None = None, config_file: str | None = None) -> AttackStudy:
    """Run the fair attack study (module docstring) and write its files into the directory
    ``out``. ``k``: adversary seats (the last ``k`` of the config); ``arms``: count-based arm
    names and method names (``moa``, ``moa-lite``, ``self-moa``, ``argllms``); ``folds``,
    ``label_budget``, ``seed``, ``n_resamples``: the evaluation harness' (supervised arms are
    fitted out of fold, every arm scored on the same tasks). ``progress(stage)`` is called as
    each stage starts. Inputs inside ``out`` are refused, never overwritten."""
    arms = list(dict.fromkeys(arms))
    _check(questions, config, k, arms)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out} exists and is not a directory", file=str(out), field="out")
    names = {"clean": out / "clean.traces.jsonl", "attacked": out / "attacked.traces.jsonl",
             "json": out / "attack.json", "table": out / "attack.md", "figure": out / "attack.png"}
    for given, what in ((question_file, "questions"), (config_file, "config")):
        if given and Path(given).resolve().parent == out.resolve():
            raise DataError(f"the {what} file {given} lies in the study directory {out}: keep "
                            "inputs outside it", file=str(given), field="out")
    (out / "methods").mkdir(parents=True, exist_ok=True)
    cache_path = os.fspath(out / "cache.sqlite") if cache_path is None and cache_mode != "off" \
        else cache_path
    adversaries = [s.name for s in config.seats[len(config.seats) - k:]]
    runtime = Runtime.from_config(config, cache_path=cache_path, cache_mode=cache_mode)
    n_seats = len(config.seats)
    rows, council, evaluations = [], {}, {}
    count_arms = [a for a in arms if a not in METHODS]
    reference = count_arms[0] if count_arms else "majority"
    for condition in CONDITIONS:
        bad = set(adversaries) if condition == "attacked" else set()
        if progress is not None:
            progress(f"{condition} council")
        summary = run_council(questions, _council(config, bad), names[condition],
                              cache_path=cache_path, cache_mode=cache_mode,
                              question_file=question_file, config_file=config_file)
        council[condition] = summary.ledger
        traces = read_traces(names[condition])
        methods = [make_method(a, config, runtime, attack=condition == "attacked",
                               adversaries=sorted(bad)) for a in arms if a in METHODS]
        if progress is not None:
            progress(f"{condition} arms")
        ev = evaluate(traces, count_arms + methods, folds=folds, label_budget=label_budget,
                      seed=seed, reference=reference, n_resamples=n_resamples)
        evaluations[condition] = ev.to_json()
        by_arm = {r["arm"]: r for r in ev.table}
        for m in methods:
            m.run_.write(out / "methods" / f"{m.name}.{condition}.json")
        for arm in arms:
            r = by_arm[arm]
            row = {"arm": arm, "condition": condition,
                   **{key: r[key] for key in ("accuracy", "ece_ew", "ece_em", "brier", "n")}}
            if arm in METHODS:
                m = next(x for x in methods if x.name == arm)
                run, led = m.run_, m.run_.ledger
                row.update(gamma=run.gamma, reads_council=m.reads_council,
                           calibration_applicable=run.calibration["applicable"],
                           calls=led["calls"], cached=led["cached"],
                           tokens=led["prompt_tokens"] + led["completion_tokens"],
                           cost=None if led["cost_unknown_models"] else led["cost"])
            else:       # arithmetic on counts: no call of its own
                row.update(gamma=_count_gamma(condition, k, n_seats), reads_council=True,
                           calibration_applicable=True, calls=0, cached=0, tokens=0, cost=0.0,
                           supervised=is_supervised(arm))
            rows.append(row)
    study = AttackStudy(rows, council, adversaries, k,
                        {key: os.fspath(p) for key, p in names.items()})
    doc = {"schema_version": ATTACK_SCHEMA_VERSION, "kind": ATTACK_KIND,
           "package_version": __version__, "config_fingerprint": config.fingerprint(),
           "questions_file": question_file, "config_file": config_file,
           "n_questions": len(questions), "seed": seed, "folds": folds,
           "label_budget": label_budget, **study.to_json(), "evaluations": evaluations}
    atomic_write(names["json"], lambda fh: fh.write(json.dumps(doc, indent=1, allow_nan=False)
                                                    + "\n"))
    table = attack_table(rows)
    atomic_write(names["table"], lambda fh: fh.write(table))
    plot_attack(rows, names["figure"], chance=float(np.mean([1 / len(q.candidates)
                                                             for q in questions])))
    return study


def _fmt(x, spec=".3f") -> str:
    return "—" if x is None else format(x, spec)


def attack_table(rows: Sequence[dict]) -> str:
    """The study's table as Markdown: one line per arm, clean and attacked side by side
    (accuracy, ECE_ew, ECE_em, Brier; gamma; calls, tokens and cost of both conditions).
    An arm whose confidences are near-constant shows its ECE as "n/a"."""
    by = {(r["arm"], r["condition"]): r for r in rows}
    arms = list(dict.fromkeys(r["arm"] for r in rows))
    head = ("| arm | reads T | acc clean | acc attacked | ECE_ew clean | ECE_ew attacked | "
            "ECE_em clean | ECE_em attacked | Brier clean | Brier attacked | γ | calls | tokens | "
            "cost |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for arm in arms:
        c, a = by[(arm, "clean")], by[(arm, "attacked")]

        def ece(r, key):
            return _fmt(r[key]) if r["calibration_applicable"] else "n/a"
        cost = None if c["cost"] is None or a["cost"] is None else c["cost"] + a["cost"]
        lines.append("| " + " | ".join([
            arm, "yes" if c["reads_council"] else "no", _fmt(c["accuracy"]), _fmt(a["accuracy"]),
            ece(c, "ece_ew"), ece(a, "ece_ew"), ece(c, "ece_em"), ece(a, "ece_em"),
            _fmt(c["brier"]), _fmt(a["brier"]), _fmt(a["gamma"], ".2f"),
            str(c["calls"] + a["calls"]), str(c["tokens"] + a["tokens"]),
            _fmt(cost, ".4f")]) + " |")
    return "\n".join(lines) + "\n"


def plot_attack(rows: Sequence[dict], path, *, chance: float | None = None) -> str:
    """The [BDA] Figure 2 style plot: accuracy of every arm clean and under the fair attack,
    side by side, gamma over each attacked bar, chance as a dashed line. Written atomically
    (PNG). Returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by = {(r["arm"], r["condition"]): r for r in rows}
    arms = list(dict.fromkeys(r["arm"] for r in rows))
    x = np.arange(len(arms))
    fig = Figure(figsize=(max(5.0, 0.9 * len(arms) + 2), 3.6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for j, (cond, color) in enumerate((("clean", "#4c72b0"), ("attacked", "#c44e52"))):
        acc = [by[(a, cond)]["accuracy"] or 0.0 for a in arms]
        bars = ax.bar(x + (j - 0.5) * 0.38, acc, 0.38, label=cond, color=color)
        if cond == "attacked":
            for b, a in zip(bars, arms):
                ax.annotate(f"γ={by[(a, cond)]['gamma']:.2f}", (b.get_x() + b.get_width() / 2,
                                                                 b.get_height()),
                            ha="center", va="bottom", fontsize=7, parse_math=False)
    if chance is not None:
        ax.axhline(chance, ls="--", color="0.4", lw=1, label="chance")
    ax.set_xticks(x)
    ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=8, parse_math=False)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("accuracy")
    ax.set_title("Fair attack: one adversary role in each method's own channel", fontsize=9)
    for text in ax.legend(fontsize=7, loc="upper right").get_texts():
        text.set_parse_math(False)             # plain text, like the arm names on the axis
    fig.tight_layout()
    path = os.fspath(path)
    atomic_write(path, lambda fh: fig.savefig(fh, format="png"), binary=True)
    return path


def run_attack_files(questions, config, out, *, local: bool = False, **kwargs) -> AttackStudy:
    """``bda council attack``: read the question set and the config, start the bundled local
    model when ``local`` (every endpoint then points at it), and :func:`run_attack`."""
    from ._config import read_config
    from ._questions import read_questions
    from ._runner import on_model
    qs = read_questions(questions)
    cfg = read_config(config)
    kwargs.update(question_file=os.fspath(questions), config_file=os.fspath(config))
    return on_model(cfg, local, lambda c: run_attack(qs, c, out, **kwargs))
