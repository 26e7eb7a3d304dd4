"""Label efficiency of the supervised family ([BDA] Appendix E.6, Table 11; §4, Figure 3).

:func:`label_efficiency` evaluates each supervised arm with :func:`bda_jax.evaluate` on a grid
of label budgets n: in every outer fold the arm is fitted on n labeled tasks drawn (seeded)
from the other folds and scored on the held-out fold, so calibration and holdout tasks are
disjoint ("disjoint calibrate/holdout", Table 11). ``None`` in the grid is "all available
labels" (every labeled training task: Figure 3's tick). Each (council, n) cell is repeated over
``seeds`` (the paper's three seeds): the seed draws the outer folds, the labeled tasks and the
tie-breaks. The reference arm (majority) reads no label and is the figure's dotted line.

Reading of the paper: "three seeds" is taken as three repetitions of the fold and label draw
on one trace set (a simulated council's generation seeds live inside the trace set, as the
paper's 4,500 binary trials hold three generation seeds); pass other trace sets as other
councils to vary the generation too.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import numpy as np

from .._core.cache import fingerprint
from .._core.counts import tally
from .._core.errors import DataError
from ..aggregators import evaluate, fold_weights, is_supervised, make_arm
from ._cells import cell, fingerprint_traces, open_cells
from ._result import StudyResult, markdown_table, mean_sd, new_figure, write_png

__all__ = ["LabelEfficiency", "label_efficiency", "TABLE11_BUDGETS"]

#: Table 11's budgets per pool (binary, PubMedQA K = 3, MMLU K = 4) plus Figure 3's n = 10 and
#: "all" (``None``).
TABLE11_BUDGETS = {2: (10, 25, 100, 500, None), 3: (10, 25, 100, 200, None),
                   4: (10, 25, 100, 400, None)}
_METRICS = ("accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "nll")


def _budget_label(b) -> int | str:
    return "all" if b is None else int(b)


class LabelEfficiency(StudyResult):
    """Result of :func:`label_efficiency`.

    ``table``: one row per (council, budget, seed, arm): ``budget`` (an int, or ``"all"``),
    ``n_labels`` (labeled training tasks per outer fold, mean over folds: the budget, or the
    pool when the pool is smaller), ``seed``, ``arm``, ``supervised`` and the metric row of
    :func:`bda_jax.evaluate` (accuracy, ece_ew, ece_em, brier, brier_mc, nll, n).
    ``tables["mean"]``: per (council, budget, arm) the mean over seeds of each metric and its
    sample SD (``<metric>_sd``). ``plot``: per council, the budgets, ``n_labels`` and, per arm,
    the mean accuracy and ECE_ew at each budget.
    """

    STUDY = "label_efficiency"

    def value(self, council: str, budget, arm: str, metric: str = "accuracy"):
        """The seed-mean ``metric`` of ``arm`` at ``budget`` (an int, ``None`` or ``"all"``)."""
        budget = "all" if budget is None else budget
        return self.row("mean", council=council, budget=budget, arm=arm)[metric]

    def to_markdown(self, digits: int = 3) -> str:
        """Table 11's layout: per council and budget, accuracy and ECE_ew of each arm (mean over
        seeds), the unlabeled reference last."""
        arms = self.params["arms"] + [self.params["reference"]]
        out = []
        for council in self.params["councils"]:
            rows = []
            for b in self.params["budgets"][council]:
                row = {"n": b}
                for arm in arms:
                    r = self.row("mean", council=council, budget=b, arm=arm)
                    row[f"{arm} acc"], row[f"{arm} ECE_ew"] = r["accuracy"], r["ece_ew"]
                row["labels / fold"] = self.row("mean", council=council, budget=b,
                                                arm=arms[0])["n_labels"]
                rows.append(row)
            out += [f"### {council}", "", markdown_table(rows, digits=digits), ""]
        return "\n".join(out).rstrip() + "\n"

    def plot_png(self, path, operating_budget: int = 25) -> str:
        """[BDA] Figure 3 as curves: per council, seed-mean accuracy (top) and ECE_ew (bottom)
        against the labels per fold (log axis; the "all" point marked with a tick), the
        ``operating_budget`` as a vertical line and the unlabeled reference dotted."""
        from matplotlib.ticker import NullLocator

        councils = self.params["councils"]
        fig, axes = new_figure(len(councils), 2)
        ref = self.params["reference"]
        for j, council in enumerate(councils):
            p = self.plot[council]
            for i, metric in enumerate(("accuracy", "ece_ew")):
                ax = axes[i, j]
                for arm, series in p["arms"].items():
                    x, y = p["n_labels"], series[metric]
                    if arm == ref:
                        ax.axhline(y[-1], ls=":", color="0.3", lw=1.2, label=f"{arm} (no labels)")
                        continue
                    line, = ax.plot(x, y, marker="o", ms=3.5, lw=1.2, label=arm)
                    if p["budgets"][-1] == "all":
                        ax.plot([x[-1]], [y[-1]], marker="|", ms=14, color=line.get_color())
                ax.axvline(operating_budget, ls="--", color="0.6", lw=0.8)
                ax.set_xscale("log")
                ax.set_xticks(p["n_labels"])
                ax.set_xticklabels([f"all\n({n:.0f})" if b == "all" else str(b)
                                    for b, n in zip(p["budgets"], p["n_labels"])])
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xlabel("labeled tasks per fold")
                ax.set_ylabel("accuracy" if metric == "accuracy" else "ECE_ew")
                if i == 0:
                    ax.set_title(council, fontsize=9)
                ax.tick_params(labelsize=7)
        for text in axes[0, 0].legend(fontsize=6, loc="lower right").get_texts():
            text.set_parse_math(False)
        fig.suptitle("Label efficiency (mean over seeds; dashed: the operating budget)",
                     fontsize=9)
        fig.tight_layout()
        return write_png(fig, path)


def label_efficiency(councils: Mapping[str, Sequence],
                     arms: Sequence[str] = ("bda-per-agent", "bda-confusion", "stacking",
                                            "gated-vote"),
                     budgets: Sequence[int | None] | Mapping[str, Sequence[int | None]] = (
                         10, 25, 100, None),
                     seeds: Sequence[int] = (0, 1, 2), folds: int = 5, *,
                     reference: str = "majority", n_resamples: int = 200, cache=None,
                     progress: Callable[[str, int, int], None] | None = None
                     ) -> LabelEfficiency:
    """Each supervised arm on a grid of label budgets ([BDA] Table 11, Figure 3).

    Args:
      councils: name -> traces (each a labeled trace set, e.g. a simulated council at K = 2,
        3, 4).
      arms: the supervised arms (an unsupervised one other than the ``reference`` is a
        :class:`~bda_jax.DataError`: it reads no label, so it has no budget; the ``reference``
        is evaluated in every cell and dropped from ``arms``).
      budgets: the budgets n (ints >= 2; ``None``: all labeled training tasks), one list for
        every council or a mapping council -> list (e.g. :data:`TABLE11_BUDGETS` by K).
      seeds: one evaluation per seed (outer folds, label draw and tie-breaks).
      folds: outer folds (grouped by cluster; :func:`bda_jax.evaluate`).
      reference: the unlabeled reference arm.
      n_resamples: bootstrap resamples of each evaluation (not reported; kept small).
      cache: ``None``, a path (a resumable :class:`~bda_jax.report.CellCache`, fingerprinted by
        the traces and every setting) or a cell store; keys ``"<council>|n=<n>|seed=<s>"``.
      progress: optional ``(description, done, total)``, called as cells start and at the end.

    Returns:
      :class:`LabelEfficiency`.
    """
    if not isinstance(councils, Mapping) or not councils:
        raise DataError("councils must be a non-empty mapping name -> traces", field="councils")
    arms = list(dict.fromkeys([arms] if isinstance(arms, str) else arms))
    if not arms:
        raise DataError("at least one arm is needed", field="arms")
    for arm in arms + [reference]:
        make_arm(arm)
    arms = [a for a in arms if a != reference]           # evaluated in every cell anyway
    if not arms:
        raise DataError("at least one supervised arm other than the reference is needed",
                        field="arms")
    for arm in arms:
        if not is_supervised(arm):
            raise DataError(f"arm {arm!r} reads no label: it has no label budget", field="arms")
    names = [str(c) for c in councils]
    grid = {}
    for name in names:
        raw = budgets.get(name) if isinstance(budgets, Mapping) else budgets
        if raw is None or isinstance(raw, (str, int)):
            raise DataError(f"budgets of {name!r} must be a list of ints >= 2 or None",
                            field="budgets")
        grid[name] = []
        for b in raw:
            if b is not None and (isinstance(b, bool) or not isinstance(b, (int, np.integer))
                                  or b < 2):
                raise DataError(f"a label budget is an integer >= 2 or None, got {b!r}",
                                field="budgets")
            grid[name].append(None if b is None else int(b))
        if not grid[name] or len(set(grid[name])) != len(grid[name]):
            raise DataError(f"budgets of {name!r} must be non-empty and distinct",
                            field="budgets")
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise DataError("seeds must be non-empty and distinct", field="seeds")
    traces = {name: list(councils[c]) for name, c in zip(names, councils)}
    store = open_cells(cache, lambda: fingerprint(
        "label_efficiency", {n: fingerprint_traces(t) for n, t in traces.items()}, arms,
        {n: grid[n] for n in names}, seeds, folds, reference, n_resamples))
    counts_of: dict[str, object] = {}
    report = progress if progress is not None else (lambda description, done, total: None)
    jobs = [(name, b, s) for name in names for b in grid[name] for s in seeds]

    def compute(name, b, s):
        if name not in counts_of:
            counts_of[name] = tally(traces[name])
        counts = counts_of[name]
        t0 = time.perf_counter()
        ev = evaluate(counts, arms + [reference], folds=folds, label_budget=b, seed=s,
                      reference=reference, n_resamples=n_resamples)
        n_labels = [float(w.sum()) for w in fold_weights(counts, ev.folds, b, s)]
        return {"rows": [{"arm": r["arm"], **{m: r[m] for m in _METRICS}, "n": r["n"]}
                         for r in ev.table],
                "n_labels": float(np.mean(n_labels)), "seconds": time.perf_counter() - t0}

    table = []
    for done, (name, b, s) in enumerate(jobs):
        report(f"label efficiency: {name} n={_budget_label(b)} seed={s}", done, len(jobs))
        value = cell(store, f"{name}|n={_budget_label(b)}|seed={s}",
                     lambda name=name, b=b, s=s: compute(name, b, s))
        for r in value["rows"]:
            table.append({"council": name, "budget": _budget_label(b),
                          "n_labels": value["n_labels"], "seed": s, "arm": r["arm"],
                          "supervised": r["arm"] != reference,
                          **{m: r[m] for m in _METRICS}, "n": r["n"]})
    report("label efficiency", len(jobs), len(jobs))

    mean_rows, plot = [], {}
    for name in names:
        p = {"budgets": [_budget_label(b) for b in grid[name]], "n_labels": [], "arms": {}}
        for b in grid[name]:
            label = _budget_label(b)
            for arm in arms + [reference]:
                rs = [r for r in table if r["council"] == name and r["budget"] == label
                      and r["arm"] == arm]
                row = {"council": name, "budget": label,
                       "n_labels": float(np.mean([r["n_labels"] for r in rs])), "arm": arm}
                for m in _METRICS:
                    row[m], row[f"{m}_sd"] = mean_sd([r[m] for r in rs])
                row["n_seeds"] = len(rs)
                mean_rows.append(row)
                series = p["arms"].setdefault(arm, {"accuracy": [], "ece_ew": []})
                series["accuracy"].append(row["accuracy"])
                series["ece_ew"].append(row["ece_ew"])
            p["n_labels"].append(mean_rows[-1]["n_labels"])
        plot[name] = p
    params = {"councils": names, "arms": arms, "reference": reference,
              "budgets": {n: [_budget_label(b) for b in grid[n]] for n in names},
              "seeds": seeds, "folds": folds, "n_resamples": n_resamples,
              "n_tasks": {n: len(traces[n]) for n in names}}
    return LabelEfficiency(table, params, {"mean": mean_rows}, plot)
