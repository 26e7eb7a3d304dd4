"""Leave-one-dataset-out transfer of the reliability profile ([BDA] Appendix E.2, "Transfer").

:func:`transfer_study` fits every supervised arm on all labeled tasks of the other datasets and
scores it on the held-out one — the paper fits reliabilities on two claim datasets and tests on
the third — against the same arm cross-validated within the held-out dataset (``in_domain``:
5 outer folds on that dataset alone, the harness's usual protocol) and against the unlabeled
reference (majority). The datasets are one council's traces on different task sets: seats are
matched by agent name, so a seat's profile learned on one task set is applied to another. The
one-coin arms read no label identity, so datasets of different answer spaces (K = 2 claims,
K = 4 letters, open answers) pool; the confusion arm needs one shared label list.

Everything goes through :func:`bda_jax.evaluate`: the transfer protocol is one evaluation of the
pooled tally with the dataset as the outer fold (each fold's fit reads only the other datasets'
labels; the inner cross-validation that selects hyperparameters runs inside them), scored per
held-out dataset.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping, Sequence

import jax
import numpy as np

from .._core.cache import fingerprint
from .._core.counts import tally
from .._core.errors import DataError
from ..aggregators import evaluate, make_arm
from ..metrics import brier_mc, correctness, paired_bootstrap, summary
from ._cells import fingerprint_traces, open_cells, run_cells
from ._result import StudyResult, markdown_table, new_figure, write_png

__all__ = ["TransferStudy", "transfer_study", "prefix_traces"]

_METRICS = ("accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "nll")


def prefix_traces(name: str, traces: Sequence) -> list:
    """``traces`` with task ids ``f"{name}/{task_id}"`` and clusters ``f"{name}/{cluster}"``
    (a trace without a cluster is its own: ``f"{name}/{task_id}"``), so that trace sets of
    several datasets pool without two tasks or clusters sharing an id."""
    return [dataclasses.replace(t, task_id=f"{name}/{t.task_id}",
                                cluster=f"{name}/{t.cluster or t.task_id}") for t in traces]


class TransferStudy(StudyResult):
    """Result of :func:`transfer_study`.

    ``table``: one row per (held-out dataset, protocol, arm); ``protocol`` ``"transfer"``
    (fitted on the other datasets) or ``"in-domain"`` (cross-validated within the dataset);
    metrics of :func:`bda_jax.summary` on the dataset's labeled tasks. ``tables["vs_reference"]``:
    per (dataset, arm) under transfer, the paired cluster bootstrap against the reference of
    accuracy (``delta_accuracy``, ``ci_low``, ``ci_high``, ``p_win``) and of the multiclass
    Brier (``delta_brier_mc``, ``brier_ci_low``, ``brier_ci_high``), ``delta_ece_ew``, and
    whether the arm beats the reference on accuracy, ECE_ew and Brier (``beats_*``).
    ``tables["datasets"]``: per dataset, tasks, labeled tasks, K range and agents. ``plot``: per
    arm, accuracy and ECE_ew per held-out dataset under each protocol.
    """

    STUDY = "transfer"

    def to_markdown(self, digits: int = 3) -> str:
        """Per held-out dataset: each arm under transfer and in-domain, and its accuracy delta
        against the reference with the bootstrap CI."""
        out = []
        ref = self.params["reference"]
        for d in self.params["datasets"]:
            rows = []
            for arm in self.params["arms"]:
                t = self.row(dataset=d, protocol="transfer", arm=arm)
                row = {"arm": arm, "acc. transfer": t["accuracy"], "ECE_ew transfer": t["ece_ew"],
                       "Brier transfer": t["brier"]}
                inn = self.rows(dataset=d, protocol="in-domain", arm=arm)
                if inn:
                    row.update({"acc. in-domain": inn[0]["accuracy"],
                                "ECE_ew in-domain": inn[0]["ece_ew"],
                                "Brier in-domain": inn[0]["brier"]})
                if arm != ref:
                    v = self.row("vs_reference", dataset=d, arm=arm)
                    row[f"Δacc vs {ref} [95% CI]"] = (f"{v['delta_accuracy']:+.3f} "
                                                      f"[{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]")
                rows.append(row)
            info = self.row("datasets", dataset=d)
            out += [f"### held out: {d}", "",
                    f"{info['n_labeled']} labeled tasks; fitted on "
                    f"{', '.join(x for x in self.params['datasets'] if x != d)}.", "",
                    markdown_table(rows, list(dict.fromkeys(k for r in rows for k in r)),
                                   digits=digits), ""]
        return "\n".join(out).rstrip() + "\n"

    def plot_png(self, path, title: str | None = None) -> str:
        """Accuracy and ECE_ew per held-out dataset: a bar per arm under transfer, a black tick
        at the arm's in-domain value."""
        datasets, arms = self.params["datasets"], self.params["arms"]
        fig, axes = new_figure(2, 1, width=max(3.4, 1.2 * len(datasets) + 1.5))
        width = 0.8 / len(arms)
        x = np.arange(len(datasets))
        for ax, metric, label in ((axes[0, 0], "accuracy", "accuracy"),
                                  (axes[0, 1], "ece_ew", "ECE_ew")):
            for i, arm in enumerate(arms):
                series = self.plot[arm]
                xs = x + (i - (len(arms) - 1) / 2) * width
                ax.bar(xs, [v or 0.0 for v in series[f"{metric}_transfer"]], width, label=arm)
                inn = series.get(f"{metric}_in_domain")
                if inn:
                    ax.scatter(xs, [v if v is not None else np.nan for v in inn], marker="_",
                               s=120, color="black", zorder=3)
            ax.set_xticks(x)
            ax.set_xticklabels(datasets, fontsize=7, rotation=20, ha="right")
            ax.set_ylabel(label)
            ax.tick_params(labelsize=7)
            for t in ax.get_xticklabels():
                t.set_parse_math(False)
        for text in axes[0, 0].legend(fontsize=6, loc="lower left").get_texts():
            text.set_parse_math(False)
        fig.suptitle(title or "Leave-one-dataset-out (bars: transfer; ticks: in-domain CV)",
                     fontsize=9)
        fig.tight_layout()
        return write_png(fig, path)


def _k_range(counts) -> tuple[int, int]:
    k = np.asarray(counts.K)
    return int(k.min()), int(k.max())


def transfer_study(datasets: Mapping[str, Sequence],
                   arms: Sequence[str] = ("majority", "bda-shared", "bda-per-agent",
                                          "bda-tempered"),
                   *, seed: int = 0, folds: int = 5, in_domain: bool = True,
                   reference: str = "majority", n_resamples: int = 1000, cache=None,
                   progress: Callable[[str, int, int], None] | None = None,
                   **tally_options) -> TransferStudy:
    """Leave-one-dataset-out transfer ([BDA] Appendix E.2, "Transfer").

    Args:
      datasets: name -> traces of one council (at least two; seats matched by agent name).
        Task ids and clusters are prefixed with the dataset's name (:func:`prefix_traces`).
      arms: the arms; the ``reference`` is evaluated and compared against too.
      seed: folds (in-domain), tie-breaks and bootstrap key.
      folds: outer folds of the in-domain protocol.
      in_domain: also cross-validate each arm within each dataset.
      n_resamples: paired cluster bootstrap resamples (clusters: the dataset's clusters).
      cache: ``None``, a path (a resumable :class:`~bda_jax.report.CellCache`, fingerprinted by
        the traces and every setting) or a cell store; keys ``"transfer"`` and
        ``"in-domain|<dataset>"``.
      progress: optional ``(description, done, total)``.
      tally_options: passed to :func:`bda_jax.tally` (e.g. ``lenient=True``).

    Returns:
      :class:`TransferStudy`.
    """
    if not isinstance(datasets, Mapping) or len(datasets) < 2:
        raise DataError("transfer needs a mapping of at least two datasets name -> traces",
                        field="datasets")
    names = [str(d) for d in datasets]
    if len(set(names)) != len(names) or not all(names):
        raise DataError("dataset names must be distinct and non-empty", field="datasets")
    arms = list(dict.fromkeys([arms] if isinstance(arms, str) else arms))
    for arm in arms + [reference]:
        make_arm(arm)
    arms = [reference] + [a for a in arms if a != reference]
    traces = {n: prefix_traces(n, list(datasets[d])) for n, d in zip(names, datasets)}
    for n, t in traces.items():
        if not any(x.gold is not None for x in t):
            raise DataError(f"dataset {n!r} has no labeled task", field="datasets")
    store = open_cells(cache, lambda: fingerprint(
        "transfer", {n: fingerprint_traces(t) for n, t in traces.items()}, arms, seed, folds,
        in_domain, reference, n_resamples, sorted(tally_options.items())))
    report = progress if progress is not None else (lambda description, done, total: None)
    key = jax.random.key(seed)

    def transfer():
        pooled = [t for n in names for t in traces[n]]
        fold_of = np.concatenate([np.full(len(traces[n]), j, np.int32)
                                  for j, n in enumerate(names)])
        counts = tally(pooled, **tally_options)
        t0 = time.perf_counter()
        ev = evaluate(counts, arms, folds=fold_of, seed=seed, reference=reference,
                      n_resamples=n_resamples)
        gold, gm = np.asarray(counts.gold), np.asarray(counts.gold_missing)
        mask = np.asarray(counts.mask)
        labeled = (gold >= 0) | gm
        clusters = np.asarray(counts.cluster)
        scored = {a: (np.asarray(correctness(ev.proba[a], gold, gm, mask, key=key).correct),
                      np.asarray(brier_mc(ev.proba[a], gold, gm, mask, reduce=False)))
                  for a in arms}
        rows, versus, info = [], [], []
        for j, n in enumerate(names):
            idx = np.flatnonzero(fold_of == j)
            lab = idx[labeled[idx]]
            k_lo, k_hi = _k_range(counts.take(idx))
            present = np.asarray(counts.N)[idx].sum(0) > 0
            info.append({"dataset": n, "n_tasks": int(idx.size), "n_labeled": int(lab.size),
                         "k_min": k_lo, "k_max": k_hi,
                         "agents": [a for a, p in zip(counts.agents, present) if p]})
            by_arm = {}
            for a in arms:
                s = summary(ev.proba[a][idx], gold[idx], gm[idx], mask[idx], key=key)
                by_arm[a] = s
                rows.append({"dataset": n, "protocol": "transfer", "arm": a,
                             **{m: s[m] for m in _METRICS}, "n": s["n"]})
            for a in arms:
                if a == reference:
                    continue
                acc = paired_bootstrap(key, scored[a][0][lab], scored[reference][0][lab],
                                       n_resamples, clusters[lab])
                bri = paired_bootstrap(key, scored[a][1][lab], scored[reference][1][lab],
                                       n_resamples, clusters[lab], higher_is_better=False)
                s, r = by_arm[a], by_arm[reference]
                d_ece = None if s["ece_ew"] is None or r["ece_ew"] is None \
                    else s["ece_ew"] - r["ece_ew"]
                versus.append({
                    "dataset": n, "arm": a, "delta_accuracy": float(acc.delta),
                    "ci_low": float(acc.ci_low), "ci_high": float(acc.ci_high),
                    "p_win": float(acc.p_win), "delta_brier_mc": float(bri.delta),
                    "brier_ci_low": float(bri.ci_low), "brier_ci_high": float(bri.ci_high),
                    "delta_ece_ew": d_ece,
                    "beats_on_accuracy": bool(s["accuracy"] > r["accuracy"]),
                    "beats_on_ece_ew": bool(d_ece is not None and d_ece < 0),
                    "beats_on_brier": bool(s["brier"] < r["brier"])})
        return {"rows": rows, "vs_reference": versus, "datasets": info,
                "seconds": time.perf_counter() - t0}

    def domain(n):
        ev = evaluate(traces[n], arms, folds=folds, seed=seed, reference=reference,
                      n_resamples=n_resamples, **tally_options)
        return [{"dataset": n, "protocol": "in-domain", "arm": r["arm"],
                 **{m: r[m] for m in _METRICS}, "n": r["n"]} for r in ev.table]

    steps = [("transfer", transfer)]
    if in_domain:
        steps += [(f"in-domain|{n}", lambda n=n: domain(n)) for n in names]
    values = run_cells(store, steps, report, "transfer")

    table = []
    for n in names:
        table += [r for r in values["transfer"]["rows"] if r["dataset"] == n]
        if in_domain:
            table += values[f"in-domain|{n}"]
    plot = {}
    for a in arms:
        plot[a] = {f"{m}_transfer": [next(r[m] for r in values["transfer"]["rows"]
                                          if r["dataset"] == n and r["arm"] == a)
                                     for n in names] for m in ("accuracy", "ece_ew")}
        if in_domain:
            for m in ("accuracy", "ece_ew"):
                plot[a][f"{m}_in_domain"] = [next(r[m] for r in values[f"in-domain|{n}"]
                                                  if r["arm"] == a) for n in names]
    params = {"datasets": names, "arms": arms, "reference": reference, "seed": seed,
              "folds": folds, "in_domain": bool(in_domain), "n_resamples": n_resamples,
              "tally_options": {k: v for k, v in sorted(tally_options.items())}}
    return TransferStudy(table, params, {"vs_reference": values["transfer"]["vs_reference"],
                                         "datasets": values["transfer"]["datasets"]}, plot)
