"""The named studies on simulated councils: presets and their resumable runners.

One definition of each study, run by ``bda study``, by ``bda demo`` (at its own sizes) and by
``benchmarks/study_*.py`` (which add the paper's thresholds and write ``docs/results-*.md``):

======================  ==========================================================================
``dose-response``       :func:`dose_response` on a clean council ([BDA] Appendix F.3, Table 12)
``sleeper``             :func:`sleeper_study` over study seeds, and a compliance sensitivity on
                        the first seed ([BDA] Appendix F.8, F.13)
``controls``            label permutation, round-0 truncation, isotonic recalibration under
                        attack, policy shift and weak-seat swap ([BDA] Appendix F.5, F.9, F.11,
                        F.12, F.14)
``simulated``           every arm with full labels and on a 25-label budget, K = 4 tempering,
                        DS-EM under a coalition, abstention as an explicit candidate ([BDA] §6,
                        Tables 11 and 16)
``label-efficiency``    :func:`label_efficiency`: the supervised family on a grid of label
                        budgets at K = 2, 3, 4 over study seeds ([BDA] Appendix E.6, Table 11,
                        Figure 3)
``transfer``            :func:`transfer_study`: leave-one-dataset-out over three simulated claim
                        datasets of one council ([BDA] Appendix E.2, "Transfer")
``round-window``        :func:`round_windows`: evidence windows <= round 0, <= round 1 and the
                        full trace, refit leak-free, and the full-trace fit it replaces ([BDA]
                        Table 8)
``seeds``               :func:`seed_spread`: the headline arms as mean ± SD across generation
                        seeds ([BDA] Appendix E.1, Table 6)
``fix-break-k``         :func:`fix_break_by_k`: fix/break of the rounds against round 0 at each
                        K ([BDA] Appendix E.4, Figure 6)
======================  ==========================================================================

:data:`STUDY_PRESETS` holds each study's ``"quick"`` and ``"full"`` configuration as plain JSON
(council sizes, arms, grids; ``"full"`` is the paper's binary regime, seats .74/.68/.68 and 1,500
questions x 3 seeds, as reported in the docs). :func:`study_config` returns a preset with
overrides, :func:`run_study` runs one and returns a :class:`StudyRun`: the study as JSON and as
Markdown tables; the clean-data studies (``label-efficiency`` ... ``fix-break-k``) also draw
their figure (:meth:`StudyRun.plot_png`). Every study is a grid of *cells* (a dose-response
grid point, a study seed, a control study, an evaluation); with ``cache`` each finished cell is
kept (a path: an append-only :class:`~bda_jax.report.CellCache` fingerprinted by the study's
name, configuration, seed and the bda_jax version; or a cell store, see
:func:`~bda_jax.adversarial.open_cells`), so an interrupted study resumes.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .._core.abstention import risk_coverage
from .._core.cache import fingerprint
from .._core.counts import tally
from .._core.errors import DataError
from .._core.traces import Move, Trace
from .._core.version import __version__
from ..aggregators import CouncilDawidSkene, evaluate, make_arm
from ..simulate import Behavior, simulate_council
from ._attacks import DEFAULT_P_GRID, DEFAULT_REGIMES, dose_response
from ._cells import cell, open_cells
from ._controls import (PAPER_RELIABILITIES, ControlStudy, label_permutation_control,
                        policy_shift, recalibration_under_attack, round0_truncation,
                        weak_seat_swap)
from ._drift import F_GRID, sleeper_study
from ._fix_break import fix_break_by_k
from ._label_efficiency import label_efficiency
from ._result import markdown_table
from ._rounds import round_windows
from ._seeds import seed_spread
from ._transfer import transfer_study

__all__ = ["STUDIES", "FIGURE_STUDIES", "STUDY_PRESETS", "StudyRun", "study_config", "run_study",
           "abstain_unsure"]

#: The names of the studies, in the order ``bda study --help`` lists them.
STUDIES = ("dose-response", "sleeper", "controls", "simulated", "label-efficiency", "transfer",
           "round-window", "seeds", "fix-break-k")
#: The studies that draw a figure (:meth:`StudyRun.plot_png`): the clean-data studies.
FIGURE_STUDIES = ("label-efficiency", "transfer", "round-window", "seeds", "fix-break-k")

_R = list(PAPER_RELIABILITIES)
_TRIO = ["majority", "bda-per-agent", "bda-confusion"]


def _council(label: str, adversaries: int = 0, contagion: float = 0.0, **options) -> dict:
    """A control-study council: ``adversaries`` coalition seats (A1, A2, ... complying at the
    preset's ``compliance``), ``contagion``, optional ``relent`` (``Behavior(adversary_relent)``),
    ``n_candidates`` and ``adversary_target``."""
    return {"label": label, "adversaries": adversaries, "contagion": contagion, **options}


def _controls_cells(full: bool) -> list[dict]:
    """The control studies of a preset: each a cell named ``name`` running ``study``."""
    k2 = _council("k=2", 2, 0.3)
    recal = {"name": "recalibration_under_attack", "study": "recalibration_under_attack",
             "councils": [_council("clean"), k2], "label_budget": 25}
    shift = {"name": "policy_shift", "study": "policy_shift", "n_candidates": 3,
             "adversaries": 2, "contagion": 0.3}
    weak = {"name": "weak_seat_swap", "study": "weak_seat_swap", "seat": 2, "mediocre": 0.52,
            "adversary_rate": [0.25, 0.5]}
    if not full:
        return [{"name": "label_permutation k=2", "study": "label_permutation", "council": k2},
                {"name": "round0_truncation k=2 contagion 0.3", "study": "round0_truncation",
                 "council": _council("k=2 contagion 0.3 relent 0.2", 2, 0.3, relent=0.2)},
                recal, shift, weak]
    perm = [_council("clean"), _council("k=1", 1, 0.3), k2,
            _council("K=3 k=2 shift", 2, 0.3, n_candidates=3, adversary_target="shift")]
    trunc = [_council("clean")] + [
        _council(f"k={k} contagion {c:g} relent {r:g}", k, c, relent=r)
        for r in (0.0, 0.2) for k in (1, 2) for c in (0.0, 0.3)]
    return ([{"name": f"label_permutation {c['label']}", "study": "label_permutation",
              "council": c} for c in perm]
            + [{"name": f"round0_truncation {c['label']}", "study": "round0_truncation",
                "council": c} for c in trunc]
            + [recal, shift, weak])


def _efficiency_councils(full: bool) -> list[dict]:
    """The councils of the label-efficiency study: the binary regime and K = 3, 4 (the paper's
    PubMedQA and MMLU pools), each with Table 11's budgets plus Figure 3's n = 10 and all."""
    if not full:
        return [{"label": "binary", "n_candidates": 2, "budgets": [10, 25, None]},
                {"label": "K=3", "n_candidates": 3, "budgets": [10, 25, None]}]
    return [{"label": "binary", "n_candidates": 2, "budgets": [10, 25, 100, 500, None]},
            {"label": "K=3", "n_candidates": 3, "budgets": [10, 25, 100, 200, None]},
            {"label": "K=4", "n_candidates": 4, "budgets": [10, 25, 100, 400, None]}]


#: Three simulated "claim datasets" of one binary council: the same seats, each a little more
#: or less accurate on each dataset (by at most .04), and questions of different difficulty
#: spread — the reliability profile is the agents', not quite the same on every task set.
_CLAIM_DATASETS = [
    {"label": "claims-A", "reliabilities": [0.74, 0.68, 0.68], "difficulty_sd": 1.0},
    {"label": "claims-B", "reliabilities": [0.70, 0.72, 0.66], "difficulty_sd": 0.7},
    {"label": "claims-C", "reliabilities": [0.78, 0.66, 0.70], "difficulty_sd": 1.3},
]
_CLEAN = ["majority", "bda-shared", "bda-per-agent", "bda-tempered"]

#: ``{study: {"quick": config, "full": config}}``, plain JSON; :func:`study_config` copies one.
STUDY_PRESETS: dict[str, dict[str, dict]] = {
    "dose-response": {
        "quick": {"n_questions": 150, "seeds_per_question": 1, "reliabilities": _R,
                  "arms": _TRIO, "p_grid": [0.0, 0.5, 1.0],
                  "regimes": [["persistent", 1], ["persistent", 2]], "folds": 5,
                  "n_resamples": 1000},
        "full": {"n_questions": 1500, "seeds_per_question": 3, "reliabilities": _R,
                 "arms": ["majority", "bda-shared", "bda-per-agent", "bda-confusion"],
                 "p_grid": list(DEFAULT_P_GRID), "regimes": [list(r) for r in DEFAULT_REGIMES],
                 "folds": 5, "n_resamples": 1000},
    },
    "sleeper": {
        "quick": {"n_seeds": 1, "f_grid": [0.0, 0.2, 0.5, 1.0], "n_questions": 60,
                  "seeds_per_question": 3, "reliabilities": _R, "arms": _TRIO,
                  "compliance": 0.6, "n_splits": 20, "compliance_sensitivity": [],
                  "sensitivity_arms": _TRIO},
        "full": {"n_seeds": 3, "f_grid": list(F_GRID), "n_questions": 1500,
                 "seeds_per_question": 3, "reliabilities": _R,
                 "arms": _TRIO + ["stacking", "gated-vote"], "compliance": 0.6, "n_splits": 20,
                 "compliance_sensitivity": [0.7, 1.0], "sensitivity_arms": _TRIO},
    },
    "controls": {
        "quick": {"n_questions": 100, "seeds_per_question": 1, "reliabilities": _R,
                  "arms": ["bda-per-agent", "bda-confusion"], "compliance": 0.9,
                  "cells": _controls_cells(full=False)},
        "full": {"n_questions": 1500, "seeds_per_question": 3, "reliabilities": _R,
                 "arms": ["bda-per-agent", "bda-confusion", "stacking"], "compliance": 0.9,
                 "cells": _controls_cells(full=True)},
    },
    "simulated": {
        "quick": {"n_questions": 150, "seeds_per_question": 1, "reliabilities": _R,
                  "arms": ["majority", "bda-per-agent", "bda-confusion", "ds-em",
                           "iso:majority"],
                  "k4_arms": ["bda-per-agent", "bda-tempered", "bda-confusion"],
                  "coalition_reliabilities": [0.75, 0.75, 0.75], "label_budget": 25,
                  "folds": 5, "n_resamples": 1000, "abstain_below": None},
        "full": {"n_questions": 1500, "seeds_per_question": 3, "reliabilities": _R,
                 "arms": ["majority", "bda-shared", "bda-per-agent", "bda-tempered",
                          "bda-confusion", "stacking", "gated-vote", "ds-em", "verbalized",
                          "best-member", "iso:majority"],
                 "k4_arms": ["bda-per-agent", "bda-tempered", "bda-confusion"],
                 "coalition_reliabilities": [0.75, 0.75, 0.75], "label_budget": 25,
                 "folds": 5, "n_resamples": 10_000, "abstain_below": 0.6},
    },
    "label-efficiency": {
        "quick": {"n_questions": 100, "seeds_per_question": 1, "reliabilities": _R,
                  "councils": _efficiency_councils(full=False),
                  "arms": ["bda-per-agent", "bda-confusion"], "n_seeds": 1, "folds": 5,
                  "n_resamples": 100},
        "full": {"n_questions": 500, "seeds_per_question": 3, "reliabilities": _R,
                 "councils": _efficiency_councils(full=True),
                 "arms": ["bda-per-agent", "bda-confusion", "stacking", "gated-vote"],
                 "n_seeds": 3, "folds": 5, "n_resamples": 200},
    },
    "transfer": {
        "quick": {"n_questions": 60, "seeds_per_question": 1, "datasets": _CLAIM_DATASETS,
                  "arms": ["majority", "bda-per-agent"], "folds": 5, "in_domain": True,
                  "n_resamples": 200},
        "full": {"n_questions": 500, "seeds_per_question": 3, "datasets": _CLAIM_DATASETS,
                 "arms": _CLEAN, "folds": 5, "in_domain": True, "n_resamples": 2000},
    },
    "round-window": {
        "quick": {"n_questions": 100, "seeds_per_question": 1, "reliabilities": _R,
                  "n_candidates": 2, "windows": [0, 1, None],
                  "arms": ["majority", "bda-per-agent"], "folds": 5, "label_budget": None,
                  "full_trace_fit": True, "n_resamples": 200},
        "full": {"n_questions": 1500, "seeds_per_question": 3, "reliabilities": _R,
                 "n_candidates": 2, "windows": [0, 1, None], "arms": _TRIO, "folds": 5,
                 "label_budget": None, "full_trace_fit": True, "n_resamples": 2000},
    },
    "seeds": {
        "quick": {"n_questions": 100, "seeds_per_question": 3, "reliabilities": _R,
                  "arms": ["majority", "bda-shared", "bda-per-agent"], "folds": 5,
                  "protocol": "separate", "ddof": 1, "n_resamples": 200},
        "full": {"n_questions": 1500, "seeds_per_question": 3, "reliabilities": _R,
                 "arms": ["majority", "verbalized", "best-member", "bda-shared",
                          "bda-per-agent"], "folds": 5, "protocol": "separate", "ddof": 1,
                 "n_resamples": 10_000},
    },
    "fix-break-k": {
        "quick": {"n_questions": 100, "seeds_per_question": 1, "reliabilities": _R,
                  "k_grid": [2, 3], "arms": ["bda-per-agent"], "folds": 5, "n_resamples": 200},
        "full": {"n_questions": 1500, "seeds_per_question": 3, "reliabilities": _R,
                 "k_grid": [2, 3, 4, 5, 6], "arms": ["bda-per-agent", "bda-confusion"],
                 "folds": 5, "n_resamples": 2000},
    },
}


def _study_name(name: str) -> str:
    key = str(name).strip().lower().replace("_", "-")
    if key not in STUDY_PRESETS:
        raise DataError(f"unknown study {name!r}; expected one of {', '.join(STUDIES)}",
                        field="name")
    return key


def study_config(name: str, quick: bool = False, **overrides) -> dict:
    """A fresh copy of study ``name``'s ``"quick"`` or ``"full"`` preset with ``overrides``
    (keys of the preset, e.g. ``n_questions=300``, ``arms=[...]``; ``None`` keeps the preset's
    value). Unknown studies, unknown keys, fewer than 6 questions and unknown arms are
    :class:`~bda_jax.DataError`.

    >>> cfg = study_config("dose-response", quick=True, n_questions=40)
    >>> cfg["n_questions"], cfg["p_grid"], cfg["arms"]
    (40, [0.0, 0.5, 1.0], ['majority', 'bda-per-agent', 'bda-confusion'])
    """
    key = _study_name(name)
    cfg = copy.deepcopy(STUDY_PRESETS[key]["quick" if quick else "full"])
    for option, value in overrides.items():
        if option not in cfg:
            raise DataError(f"study {key!r} has no setting {option!r}; it has "
                            f"{', '.join(cfg)}", field=option)
        if value is not None:
            cfg[option] = copy.deepcopy(list(value) if isinstance(value, tuple) else value)
    n = cfg["n_questions"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 6:
        raise DataError(f"n_questions must be an integer >= 6, got {n!r}", field="n_questions")
    arms = [a.strip() for a in ([cfg["arms"]] if isinstance(cfg["arms"], str) else cfg["arms"])]
    for arm in arms:
        make_arm(arm)                                   # a DataError naming the known arms
    cfg["arms"] = list(dict.fromkeys(arms))
    if key in ("controls", "label-efficiency"):
        cfg["arms"] = [a for a in cfg["arms"] if a != "majority"]     # always compared with
        if not cfg["arms"]:
            raise DataError(f"the {key} study needs an arm other than majority",
                            field="arms")
    if key == "seeds" and (not isinstance(cfg["seeds_per_question"], int)
                           or cfg["seeds_per_question"] < 2):
        raise DataError("the seeds study needs seeds_per_question >= 2",
                        field="seeds_per_question")
    return cfg


@dataclass
class StudyRun:
    """Result of :func:`run_study`.

    ``name``: the study; ``config``: the configuration it ran (:func:`study_config`); ``seed``;
    ``quick``: whether ``config`` came from the quick preset; ``result``: the study as JSON
    (``"study"``, ``"setup"`` and the study's own sections: the dose-response grid and its
    accuracy / ECE pivots, the sleeper's per-seed studies and seed-mean accuracies, the control
    studies or evaluations by cell name; for the clean-data studies ``"result"``, the
    :class:`~bda_jax.adversarial.StudyResult` as JSON); ``markdown``: its tables; ``seconds``:
    wall time; ``study``: the clean-data study's :class:`~bda_jax.adversarial.StudyResult`
    (``None`` for the others).
    """

    name: str
    config: dict
    seed: int
    quick: bool
    result: dict
    markdown: str
    seconds: float = field(default=0.0)
    study: Any = field(default=None, repr=False)

    def to_json(self) -> dict:
        """The study document of ``bda study --out`` (``kind`` ``"bda_jax.study"``)."""
        return {"schema_version": 1, "kind": "bda_jax.study", "quick": self.quick,
                **self.result, "seconds": self.seconds}

    def plot_png(self, path) -> str:
        """Write the study's figure to ``path`` (PNG); a study without one (dose-response,
        sleeper, controls, simulated) is a :class:`~bda_jax.DataError` (field ``"figure"``)."""
        if self.study is None:
            raise DataError(f"the {self.name} study has no figure", field="figure")
        return self.study.plot_png(path)


def run_study(name: str, *, quick: bool = False, seed: int = 0, cache=None,
              progress: Callable[[str, int, int], None] | None = None,
              **overrides) -> StudyRun:
    """Run study ``name`` (one of :data:`STUDIES`) at its quick or full size.

    Args:
      name: the study.
      quick: start from the ``"quick"`` preset instead of ``"full"``.
      seed: simulation, fold and tie-break seed (study seeds ``seed, seed + 1, ...``).
      cache: ``None``, a path (a resumable cell cache; a cache of another configuration is
        refused with :class:`~bda_jax.ArtifactError`) or a cell store
        (``get_or_compute(key, compute)``).
      progress: optional callable ``(description, done, total)`` called as cells start and once
        at the end (``done == total``).
      overrides: preset settings to change (:func:`study_config`).

    >>> run = run_study("dose-response", quick=True, n_questions=12, arms=["majority"],
    ...                 p_grid=[0.0, 1.0], regimes=[["persistent", 2]], n_resamples=10)
    >>> run.result["accuracy"]["persistent k=2"]["majority"][1]     # the coalition wins
    0.0
    """

    key = _study_name(name)
    cfg = study_config(key, quick, **overrides)
    seed = int(seed)
    store = open_cells(cache, lambda: fingerprint("bda_jax.study", key, cfg, seed, __version__))
    report = progress if progress is not None else (lambda description, done, total: None)
    t0 = time.perf_counter()
    result, markdown, *study = _RUNNERS[key](cfg, seed, store, report)
    return StudyRun(key, cfg, seed, bool(quick), {"study": key, **result}, markdown,
                    time.perf_counter() - t0, study[0] if study else None)


# --------------------------------------------------------------------------- cells

def _cells_run(store, steps: dict[str, Callable[[], Any]], label: str, report):
    """Run named cells in order; their values by name."""
    out = {}
    for done, (step, compute) in enumerate(steps.items()):
        report(f"{label}: {step}", done, len(steps))
        out[step] = cell(store, step, compute)
    report(label, len(steps), len(steps))
    return out


# --------------------------------------------------------------------------- dose-response

def _dose_response(cfg, seed, store, report):
    regimes = [tuple(r) for r in cfg["regimes"]]
    total = 1 + len({(m, k, p) for m, k in regimes for p in cfg["p_grid"] if p != 0 and k != 0})
    done = [0]

    def computed(regime, p, seconds):
        done[0] += 1
        report(f"{regime} p={p:g}", done[0], total)

    report("dose-response", 0, total)
    traces = simulate_council(seed, cfg["n_questions"], cfg["reliabilities"],
                              seeds_per_question=cfg["seeds_per_question"])
    dr = dose_response(traces, cfg["arms"], cfg["p_grid"], regimes, folds=cfg["folds"],
                       seed=seed, n_resamples=cfg["n_resamples"], cache=store,
                       progress=computed)
    report("dose-response", total, total)
    result = {"setup": {"n_questions": cfg["n_questions"],
                        "seeds_per_question": cfg["seeds_per_question"],
                        "reliabilities": cfg["reliabilities"], "seed": seed},
              "result": dr.to_json(), "accuracy": dr.pivot("accuracy"),
              "ece_ew": dr.pivot("ece_ew")}
    md = ("## Accuracy\n\n" + dr.to_markdown("accuracy") + "\n\n## ECE_ew\n\n"
          + dr.to_markdown("ece_ew"))
    return result, md


# --------------------------------------------------------------------------- sleeper

def _sleeper(cfg, seed, store, report):
    seeds = [seed + j for j in range(cfg["n_seeds"])]
    common = dict(f_grid=cfg["f_grid"], n_questions=cfg["n_questions"],
                  reliabilities=cfg["reliabilities"], compliance=cfg["compliance"],
                  seeds_per_question=cfg["seeds_per_question"], n_splits=cfg["n_splits"])
    steps = {f"seed={s}": (lambda s=s: sleeper_study(seed=s, arms=cfg["arms"], **common)
                           .to_json()) for s in seeds}
    for c in cfg["compliance_sensitivity"]:
        steps[f"compliance={c!r}"] = lambda c=c: sleeper_study(
            seed=seeds[0], arms=cfg["sensitivity_arms"], **{**common, "compliance": c}).to_json()
    values = _cells_run(store, steps, "sleeper", report)
    runs = {str(s): values[f"seed={s}"] for s in seeds}
    arms = cfg["arms"]
    rows = []
    for f in cfg["f_grid"]:
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
    result = {"setup": {"seeds": seeds, "f_grid": cfg["f_grid"],
                        "n_questions": cfg["n_questions"], "arms": arms},
              "mean_accuracy": rows, "per_seed": runs}
    if cfg["compliance_sensitivity"]:
        result["compliance_sensitivity"] = {
            str(c): values[f"compliance={c!r}"] for c in cfg["compliance_sensitivity"]}
    md = ("Deployment accuracy (mean over study seeds) by calibration contamination f, and the "
          "row-drift monitor's ratio to its noise floor:\n\n" + markdown_table(rows))
    return result, md


# --------------------------------------------------------------------------- controls

def _controls(cfg, seed, store, report):
    arms = cfg["arms"]

    def coalition(k):
        return {j: cfg["compliance"] for j in range(k)} if k else None

    def council(spec):
        kw = {key: spec[key] for key in ("n_candidates", "adversary_target") if key in spec}
        if "relent" in spec:
            kw["behavior"] = Behavior(adversary_relent=spec["relent"])
        return simulate_council(seed, cfg["n_questions"], cfg["reliabilities"],
                                seeds_per_question=cfg["seeds_per_question"],
                                adversaries=coalition(spec["adversaries"]),
                                contagion=spec["contagion"], **kw)

    def run(spec) -> ControlStudy:
        study = spec["study"]
        if study == "label_permutation":
            return label_permutation_control(council(spec["council"]), arms, seed=seed)
        if study == "round0_truncation":
            return round0_truncation(council(spec["council"]), arms, seed=seed)
        if study == "recalibration_under_attack":
            return recalibration_under_attack(
                {c["label"]: council(c) for c in spec["councils"]}, ["majority"] + arms,
                label_budget=spec["label_budget"], seed=seed)
        if study == "policy_shift":
            return policy_shift(seed=seed, n_questions=cfg["n_questions"],
                                reliabilities=cfg["reliabilities"],
                                n_candidates=spec["n_candidates"],
                                adversaries=coalition(spec["adversaries"]),
                                seeds_per_question=cfg["seeds_per_question"],
                                contagion=spec["contagion"], arms=arms)
        if study == "weak_seat_swap":
            return weak_seat_swap(seed, cfg["n_questions"], cfg["reliabilities"],
                                  seat=spec["seat"], mediocre=spec["mediocre"],
                                  adversary_rate=spec["adversary_rate"],
                                  seeds_per_question=cfg["seeds_per_question"],
                                  arms=["majority"] + arms)
        raise DataError(f"unknown control study {study!r}", field="cells")

    steps = {spec["name"]: (lambda spec=spec: run(spec).to_json()) for spec in cfg["cells"]}
    out = _cells_run(store, steps, "controls", report)
    md = []
    for name, value in out.items():
        md += [f"## {name}", "", markdown_table(value["table"]), ""]
    result = {"setup": {"n_questions": cfg["n_questions"],
                        "seeds_per_question": cfg["seeds_per_question"], "arms": arms,
                        "seed": seed}, "studies": out}
    return result, "\n".join(md)


# --------------------------------------------------------------------------- simulated

def abstain_unsure(trace: Trace, threshold: float) -> Trace:
    """The same trace with every round >= 1 move stated with confidence below ``threshold``
    made an abstain (moves that targeted it become inadmissible: tally it with
    ``lenient=True``)."""
    moves = tuple(
        Move(m.id, m.agent, m.round, "abstain", confidence=m.confidence)
        if m.round >= 1 and m.confidence is not None and m.confidence < threshold else m
        for m in trace.moves)
    return Trace(trace.task_id, moves, trace.candidates, trace.gold, trace.cluster)


_SIMULATED_COLUMNS = ["arm", "accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "auroc",
                      "coverage", "mean_set_size", "n"]
# the evaluations of the simulated study also give each arm's 90 % answer sets (split
# conformal, calibrated inside the outer folds; docs/answer-sets.md): coverage and set size
_SIMULATED_SET_ALPHA = 0.1


def _simulated(cfg, seed, store, report):
    n, spq, folds, n_res = (cfg["n_questions"], cfg["seeds_per_question"], cfg["folds"],
                            cfg["n_resamples"])

    def binary():
        return simulate_council(seed, n, cfg["reliabilities"], seeds_per_question=spq)

    def protocol(budget):
        return evaluate(binary(), cfg["arms"], folds=folds, label_budget=budget, seed=seed,
                        n_resamples=n_res, set_alpha=_SIMULATED_SET_ALPHA).to_json()

    def k4():
        traces = simulate_council(seed + 1, n, cfg["reliabilities"], n_candidates=4,
                                  seeds_per_question=spq)
        return evaluate(traces, cfg["k4_arms"], folds=folds, seed=seed,
                        n_resamples=n_res, set_alpha=_SIMULATED_SET_ALPHA).to_json()

    def coalition():
        counts = tally(simulate_council(seed + 2, n, cfg["coalition_reliabilities"],
                                        adversaries=[0, 1]))
        gold = np.asarray(counts.gold)
        return {init: float(np.mean(CouncilDawidSkene(init=init).fit(counts).predict(counts)
                                    == gold))
                for init in ("majority", "spectral", "anti")}

    def abstention():
        traces = [abstain_unsure(t, cfg["abstain_below"]) for t in binary()]
        rows = {}
        for label, options in (("abstain ignored", {}),
                               ("'unknown' candidate", {"abstain_candidate": "unknown"})):
            ev = evaluate(traces, ["bda-per-agent"], folds=folds, seed=seed,
                          n_resamples=n_res, lenient=True, **options)
            row = dict(next(r for r in ev.table if r["arm"] == "bda-per-agent"))
            p = ev.proba["bda-per-agent"]
            counts = tally(traces, lenient=True, **options)
            correct = p.argmax(1) == np.asarray(counts.gold)
            row["aurc"] = float(risk_coverage(p.max(1), correct).aurc)
            row["mass_on_unknown"] = float(p[:, 2].mean()) if p.shape[1] > 2 else 0.0
            rows[label] = row
        return {"abstain_moves": sum(m.force == "abstain" for t in traces for m in t.moves),
                "rows": rows}

    budget = cfg["label_budget"]
    steps = {"binary_full_labels": lambda: protocol(None),
             f"binary_label_budget_{budget}": lambda: protocol(budget),
             "k4_tempering": k4, "ds_em_coalition_k2": coalition}
    if cfg["abstain_below"] is not None:
        steps["abstention"] = abstention
    out = _cells_run(store, steps, "simulated", report)
    md = []
    for name, value in out.items():
        if name == "ds_em_coalition_k2":
            table = markdown_table([{"init": k, "accuracy": v} for k, v in value.items()])
        elif name == "abstention":
            table = markdown_table([{"abstain handling": k, **{c: v.get(c) for c in (
                "accuracy", "ece_ew", "brier", "aurc", "mass_on_unknown")}}
                for k, v in value["rows"].items()])
        else:
            table = markdown_table(value["table"], _SIMULATED_COLUMNS)
        md += [f"## {name}", "", table, ""]
    result = {"setup": {"n_questions": n, "seeds_per_question": spq, "arms": cfg["arms"],
                        "seed": seed}, "studies": out}
    return result, "\n".join(md)


# --------------------------------------------------------------------------- clean-data studies

_COUNCIL_OPTIONS = ("n_candidates", "reliabilities", "difficulty_sd", "seat_question_sd",
                    "distractor_pull", "contagion", "n_rounds")


def _simulated_council(cfg, spec: dict, seed: int):
    """A council of ``cfg``'s size and reliabilities, with ``spec``'s simulator options."""
    options = {"reliabilities": cfg.get("reliabilities")}
    unknown = set(spec) - set(_COUNCIL_OPTIONS) - {"label", "budgets"}
    if unknown:
        raise DataError(f"council {spec.get('label')!r} has unknown settings "
                        f"{', '.join(sorted(unknown))}", field="councils")
    options.update({k: v for k, v in spec.items() if k in _COUNCIL_OPTIONS})
    rel = options.pop("reliabilities")
    return simulate_council(seed, cfg["n_questions"], rel,
                            seeds_per_question=cfg["seeds_per_question"], **options)


def _setup(cfg, seed, **more) -> dict:
    return {"n_questions": cfg["n_questions"], "seeds_per_question": cfg["seeds_per_question"],
            "seed": seed, **more}


def _label_efficiency(cfg, seed, store, report):
    councils = {c["label"]: _simulated_council(cfg, c, seed) for c in cfg["councils"]}
    study = label_efficiency(councils, cfg["arms"],
                             {c["label"]: c["budgets"] for c in cfg["councils"]},
                             seeds=[seed + j for j in range(cfg["n_seeds"])], folds=cfg["folds"],
                             n_resamples=cfg["n_resamples"], cache=store, progress=report)
    setup = _setup(cfg, seed, reliabilities=cfg["reliabilities"],
                   councils=[c["label"] for c in cfg["councils"]])
    return {"setup": setup, "result": study.to_json()}, study.to_markdown(), study


def _transfer(cfg, seed, store, report):
    datasets = {d["label"]: _simulated_council(cfg, d, seed + j)
                for j, d in enumerate(cfg["datasets"])}
    study = transfer_study(datasets, cfg["arms"], seed=seed, folds=cfg["folds"],
                           in_domain=cfg["in_domain"], n_resamples=cfg["n_resamples"],
                           cache=store, progress=report)
    setup = _setup(cfg, seed, datasets=cfg["datasets"])
    return {"setup": setup, "result": study.to_json()}, study.to_markdown(), study


def _round_window(cfg, seed, store, report):
    traces = _simulated_council(cfg, {"n_candidates": cfg["n_candidates"]}, seed)
    study = round_windows(traces, cfg["arms"], cfg["windows"], folds=cfg["folds"], seed=seed,
                          label_budget=cfg["label_budget"],
                          full_trace_fit=cfg["full_trace_fit"],
                          n_resamples=cfg["n_resamples"], cache=store, progress=report)
    setup = _setup(cfg, seed, reliabilities=cfg["reliabilities"],
                   n_candidates=cfg["n_candidates"])
    return {"setup": setup, "result": study.to_json()}, study.to_markdown(), study


def _seeds(cfg, seed, store, report):
    traces = _simulated_council(cfg, {}, seed)
    s = cfg["seeds_per_question"]               # ordered by question, then generation seed
    replicates = {f"seed {j}": traces[j::s] for j in range(s)}
    study = seed_spread(replicates, cfg["arms"], folds=cfg["folds"], seed=seed,
                        protocol=cfg["protocol"], ddof=cfg["ddof"],
                        n_resamples=cfg["n_resamples"], cache=store, progress=report)
    setup = _setup(cfg, seed, reliabilities=cfg["reliabilities"])
    return {"setup": setup, "result": study.to_json()}, study.to_markdown(), study


def _fix_break_k(cfg, seed, store, report):
    councils = {f"K={k}": _simulated_council(cfg, {"n_candidates": k}, seed)
                for k in cfg["k_grid"]}
    study = fix_break_by_k(councils, cfg["arms"], folds=cfg["folds"], seed=seed,
                           n_resamples=cfg["n_resamples"], cache=store, progress=report)
    setup = _setup(cfg, seed, reliabilities=cfg["reliabilities"], k_grid=cfg["k_grid"])
    return {"setup": setup, "result": study.to_json()}, study.to_markdown(), study


_RUNNERS = {"dose-response": _dose_response, "sleeper": _sleeper, "controls": _controls,
            "simulated": _simulated, "label-efficiency": _label_efficiency,
            "transfer": _transfer, "round-window": _round_window, "seeds": _seeds,
            "fix-break-k": _fix_break_k}
