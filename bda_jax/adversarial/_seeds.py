"""Headline metrics as mean ± SD across generation seeds ([BDA] Appendix E.1, Table 6).

The paper's clean binary pool holds three generation seeds of every question; Table 6 reports
each aggregator's accuracy, ECE_ew, ECE_em and Brier as mean ± standard deviation across the
seeds, with the per-agent-versus-majority paired bootstrap on the whole pool.
:func:`seed_spread` takes the replicates (seed -> traces of the same questions) and:

* ``protocol="separate"`` (default): evaluates each replicate on its own (5 outer folds over
  its questions, every arm fitted on that replicate's labels) — a seed is a full replicate of
  the experiment, so the SD is the replicate-to-replicate spread;
* ``protocol="pooled"``: evaluates the pooled replicates once (folds grouped by question, so a
  question's seeds stay together) and scores each replicate's tasks of that one evaluation.

Reading of the paper: it does not say which; "separate" is the reading under which the SD
measures what a rerun would change, and is the default. The pooled evaluation is always run
too: its table is the pooled headline and its bootstrap the paper's Δ row. SD: the sample SD
(``ddof=1``) unless ``ddof=0``.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import jax
import numpy as np

from .._core.cache import fingerprint
from .._core.counts import tally
from .._core.errors import DataError
from ..aggregators import evaluate, make_arm
from ..metrics import summary
from ._cells import fingerprint_traces, open_cells, run_cells
from ._result import StudyResult, markdown_table, mean_sd, new_figure, write_png

__all__ = ["SeedSpread", "seed_spread", "PROTOCOLS"]

#: How :func:`seed_spread` scores a replicate.
PROTOCOLS = ("separate", "pooled")
_METRICS = ("accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "nll")


class SeedSpread(StudyResult):
    """Result of :func:`seed_spread`.

    ``table``: one row per (replicate, arm) with the metric row of :func:`bda_jax.summary`.
    ``tables["spread"]``: per arm, ``<metric>`` (mean over replicates) and ``<metric>_sd``.
    ``tables["pooled"]``: the pooled evaluation's table. ``tables["bootstrap"]``: per arm, the
    pooled paired cluster bootstrap against the reference (``delta``, ``ci_low``, ``ci_high``,
    ``p_win`` of accuracy and of the multiclass Brier). ``plot``: per arm, each replicate's
    accuracy and ECE_ew.
    """

    STUDY = "seed_spread"

    def to_markdown(self, digits: int = 3) -> str:
        """Table 6's layout: mean ± SD per arm, then the pooled Δ rows."""
        rows = []
        for r in self.tables["spread"]:
            row = {"arm": r["arm"]}
            for m, name in (("accuracy", "Acc."), ("ece_ew", "ECE_ew"), ("ece_em", "ECE_em"),
                            ("brier", "Brier")):
                mu, sd = r[m], r[f"{m}_sd"]
                row[name] = "—" if mu is None else (
                    f"{mu:.{digits}f}" + ("" if sd is None else f" ± {sd:.{digits}f}"))
            rows.append(row)
        boot = [{"arm": b["arm"], "Δacc vs " + self.params["reference"]:
                 f"{b['accuracy_delta']:+.4f} [{b['accuracy_ci_low']:+.4f}, "
                 f"{b['accuracy_ci_high']:+.4f}]", "p_win": b["accuracy_p_win"]}
                for b in self.tables["bootstrap"]]
        return (markdown_table(rows) + "\n\nPooled paired cluster bootstrap:\n\n"
                + markdown_table(boot, digits=3) + "\n")

    def plot_png(self, path) -> str:
        """Per arm, each replicate's accuracy and ECE_ew (dots) and the mean ± SD (bar)."""
        arms = self.params["arms"]
        fig, axes = new_figure(2, 1, width=max(3.4, 0.55 * len(arms) + 1.5))
        x = np.arange(len(arms))
        for ax, metric, name in ((axes[0, 0], "accuracy", "accuracy"),
                                 (axes[0, 1], "ece_ew", "ECE_ew")):
            spread = {r["arm"]: r for r in self.tables["spread"]}
            mu = [spread[a][metric] for a in arms]
            sd = [spread[a][f"{metric}_sd"] or 0.0 for a in arms]
            ax.bar(x, mu, 0.6, yerr=sd, capsize=3, color="#9ecae1")
            for i, a in enumerate(arms):
                ys = self.plot[a][metric]
                ax.scatter(np.full(len(ys), i), ys, s=10, color="black", zorder=3)
            ax.set_xticks(x)
            ax.set_xticklabels(arms, rotation=30, ha="right", fontsize=7)
            for t in ax.get_xticklabels():
                t.set_parse_math(False)
            ax.set_ylabel(name)
            ax.tick_params(labelsize=7)
        fig.suptitle(f"Across {len(self.params['replicates'])} generation seeds "
                     f"({self.params['protocol']} protocol)", fontsize=9)
        fig.tight_layout()
        return write_png(fig, path)


def seed_spread(replicates: Mapping[str, Sequence],
                arms: Sequence[str] = ("majority", "verbalized", "best-member", "bda-shared",
                                       "bda-per-agent"),
                folds: int = 5, seed: int = 0, *, protocol: str = "separate", ddof: int = 1,
                reference: str = "majority", n_resamples: int = 10_000, cache=None,
                progress: Callable[[str, int, int], None] | None = None) -> SeedSpread:
    """Mean ± SD of each arm's metrics across replicates ([BDA] Table 6).

    Args:
      replicates: seed name -> traces (each the same questions, another generation seed; a
        question's traces share a ``cluster`` across replicates). Task ids must be distinct
        across replicates.
      arms: the arms (the ``reference`` is evaluated too).
      folds: outer folds of every evaluation (grouped by cluster).
      seed: folds, label draws, tie-breaks and the bootstrap key.
      protocol: ``"separate"`` or ``"pooled"`` (module docstring).
      ddof: 1 (sample SD) or 0 (population SD).
      n_resamples: paired cluster bootstrap resamples of the pooled evaluation.
      cache: ``None``, a path (a resumable :class:`~bda_jax.report.CellCache`) or a cell store;
        keys ``"pooled"`` and ``"seed|<replicate>"``.
      progress: optional ``(description, done, total)``.

    Returns:
      :class:`SeedSpread`.
    """
    if protocol not in PROTOCOLS:
        raise DataError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}",
                        field="protocol")
    if ddof not in (0, 1) or isinstance(ddof, bool):
        raise DataError(f"ddof must be 0 or 1, got {ddof!r}", field="ddof")
    if not isinstance(replicates, Mapping) or len(replicates) < 2:
        raise DataError("seed spread needs a mapping of at least two replicates name -> traces",
                        field="replicates")
    names = [str(r) for r in replicates]
    traces = {n: list(replicates[r]) for n, r in zip(names, replicates)}
    ids = [t.task_id for n in names for t in traces[n]]
    if len(set(ids)) != len(ids):
        raise DataError("task ids must be distinct across replicates", field="replicates")
    arms = list(dict.fromkeys([arms] if isinstance(arms, str) else arms))
    for arm in arms + [reference]:
        make_arm(arm)
    arms = list(dict.fromkeys([reference] + arms))
    store = open_cells(cache, lambda: fingerprint(
        "seed_spread", {n: fingerprint_traces(t) for n, t in traces.items()}, arms, folds,
        seed, protocol, reference, n_resamples))
    report = progress if progress is not None else (lambda description, done, total: None)
    key = jax.random.key(seed)

    def metrics(r):
        return {m: r[m] for m in _METRICS} | {"n": r["n"]}

    def pooled():
        t0 = time.perf_counter()
        pool = [t for n in names for t in traces[n]]
        counts = tally(pool)
        ev = evaluate(counts, arms, folds=folds, seed=seed, reference=reference,
                      n_resamples=n_resamples)
        of = np.concatenate([np.full(len(traces[n]), j) for j, n in enumerate(names)])
        gold, gm = np.asarray(counts.gold), np.asarray(counts.gold_missing)
        mask = np.asarray(counts.mask)
        per = {n: {a: metrics(summary(ev.proba[a][of == j], gold[of == j], gm[of == j],
                                      mask[of == j], key=key)) for a in arms}
               for j, n in enumerate(names)}
        boot = [{"arm": a, **{f"{m}_{k}": ev.bootstrap[a][m][k]
                              for m in ("accuracy", "brier_mc")
                              for k in ("delta", "ci_low", "ci_high", "p_win")}}
                for a in arms if a != reference]
        return {"table": [{"arm": r["arm"], **metrics(r)} for r in ev.table],
                "per_replicate": per, "bootstrap": boot, "seconds": time.perf_counter() - t0}

    def separate(n):
        ev = evaluate(traces[n], arms, folds=folds, seed=seed, reference=reference,
                      n_resamples=1)
        return {r["arm"]: metrics(r) for r in ev.table}

    steps = [("pooled", pooled)]
    if protocol == "separate":
        steps += [(f"seed|{n}", lambda n=n: separate(n)) for n in names]
    values = run_cells(store, steps, report, "seed spread")

    per = values["pooled"]["per_replicate"] if protocol == "pooled" else \
        {n: values[f"seed|{n}"] for n in names}
    table = [{"replicate": n, "arm": a, **per[n][a]} for n in names for a in arms]
    spread, plot = [], {}
    for a in arms:
        row = {"arm": a}
        for m in _METRICS:
            row[m], row[f"{m}_sd"] = mean_sd([per[n][a][m] for n in names], ddof)
        spread.append(row)
        plot[a] = {m: [per[n][a][m] for n in names] for m in ("accuracy", "ece_ew")}
    params = {"replicates": names, "arms": arms, "reference": reference, "folds": folds,
              "seed": seed, "protocol": protocol, "ddof": ddof, "n_resamples": n_resamples,
              "n_tasks": {n: len(t) for n, t in traces.items()}}
    return SeedSpread(table, params, {"spread": spread, "pooled": values["pooled"]["table"],
                                      "bootstrap": values["pooled"]["bootstrap"]}, plot)
