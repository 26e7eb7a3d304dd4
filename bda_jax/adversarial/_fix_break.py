"""The fix/break ratio of deliberation as a function of K ([BDA] Appendix E.4, "Deliberation
rounds scale with K", Figure 6).

:func:`fix_break_by_k` runs :func:`round_windows` with the windows round 0 and the full trace on
each council (one per answer-space size K) and collects, per arm, the decisions the rounds >= 1
repair (``fix``) and damage (``break``), their ratio and its cluster-bootstrap interval. The paper
reports binary 185:168 (1.10), PubMedQA (K = 3) 48:40 (1.20) and MMLU (K = 4) 82:51 (1.61): the
net value of deliberation rises with the answer space.

Reading of the paper: the diagnostic is "round 0 against the full trace under a neutral prior".
With the Beta-integrated one-coin factor a prior that is neutral in the strict sense (base 1/2,
the same for every seat) cannot decide a K = 2 task at all, so the neutral prior is read as the
arm's own leak-free fit, refitted on each basis — the definition of
:func:`bda_jax.aggregators.decision_flips`; ``arms`` chooses the arms (``"bda-shared"``, one
prior for every seat, is the nearest to a neutral one).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from .._core.cache import fingerprint
from .._core.counts import tally
from .._core.errors import DataError
from ._cells import fingerprint_traces, open_cells, scoped
from ._result import StudyResult, markdown_table, new_figure, write_png
from ._rounds import REFIT, round_windows

__all__ = ["FixBreakByK", "fix_break_by_k", "PAPER_FIX_BREAK"]

#: [BDA] Appendix E.4: (K, fix, break) of the binary pool, PubMedQA and MMLU.
PAPER_FIX_BREAK = ((2, 185, 168), (3, 48, 40), (4, 82, 51))


class FixBreakByK(StudyResult):
    """Result of :func:`fix_break_by_k`.

    ``table``: one row per (council, arm): ``k_min`` / ``k_max`` (the council's answer-space
    sizes; equal for a fixed K), ``n`` (labeled tasks), ``changed``, ``fix``, ``break``,
    ``net``, ``fix_per_break``, ``ci_low`` / ``ci_high`` (cluster bootstrap), and the arm's
    ``accuracy_round0`` / ``accuracy_full``. ``plot``: per arm, K and the ratio with its
    interval.
    """

    STUDY = "fix_break_by_k"

    def to_markdown(self, digits: int = 2) -> str:
        rows = [{"council": r["council"], "K": r["k_max"] if r["k_min"] == r["k_max"]
                 else f"{r['k_min']}-{r['k_max']}", "arm": r["arm"],
                 "fix:break": f"{r['fix']}:{r['break']}",
                 "fix/break [95% CI]": "—" if r["fix_per_break"] is None else
                 f"{r['fix_per_break']:.{digits}f} [{r['ci_low']:.{digits}f}, "
                 f"{r['ci_high']:.{digits}f}]",
                 "net": f"{r['net']:+d}/{r['n']}", "changed": r["changed"],
                 "acc. round 0": r["accuracy_round0"], "acc. full": r["accuracy_full"]}
                for r in self.table]
        return markdown_table(rows, digits=3) + "\n"

    def plot_png(self, path, paper: Sequence[tuple[int, int, int]] | None = PAPER_FIX_BREAK,
                 others: Sequence["FixBreakByK"] = ()) -> str:
        """[BDA] Figure 6: fix/break ratio against K per arm with its interval, joined over
        this study's fixed-K councils; the fixed-K councils of each study in ``others`` (e.g.
        real councils) as unjoined points labeled by council; ``paper`` (K, fix, break) points
        drawn as open squares (``None``: none)."""
        fig, axes = new_figure(1, 1, width=4.6, height=3.3)
        ax = axes[0, 0]
        arms = self.params["arms"]
        ks = set()

        def series(p, i, n_arms, **style):
            xs = np.asarray(p["k"], np.float64) + (i - (n_arms - 1) / 2) * 0.08
            y = np.asarray([np.nan if v is None else v for v in p["ratio"]], np.float64)
            lo = np.asarray([np.nan if v is None else v for v in p["ci_low"]], np.float64)
            hi = np.asarray([np.nan if v is None else v for v in p["ci_high"]], np.float64)
            ax.errorbar(xs, y, yerr=[y - lo, hi - y], capsize=3, ms=4, **style)
            ks.update(p["k"])

        for i, arm in enumerate(arms):
            series(self.plot[arm], i, len(arms), marker="o", lw=1.2, label=arm)
        markers = iter("^vD<>ph*")
        extra = [row for other in others for row in other.table if row["k_min"] == row["k_max"]]
        for j, row in enumerate(extra):             # beside the joined series, side by side
            one = {"k": [row["k_max"] + 0.15 + 0.1 * j], "ratio": [row["fix_per_break"]],
                   "ci_low": [row["ci_low"]], "ci_high": [row["ci_high"]]}
            series(one, 0, 1, marker=next(markers, "o"), ls="none",
                   label=f"{row['council']} ({row['arm']})")
            ks.discard(one["k"][0])
            ks.add(row["k_max"])
        if paper:
            ax.plot([k for k, _, _ in paper], [f / b for _, f, b in paper], "s", mfc="none",
                    color="black", ms=6, label="[BDA] (live councils)")
        ax.axhline(1.0, ls=":", color="0.5", lw=0.8)
        ax.set_xlabel("K (candidate answers)")
        ax.set_ylabel("fix / break (rounds >= 1 vs round 0)")
        ax.set_xticks(sorted(ks | ({k for k, _, _ in paper} if paper else set())))
        ax.tick_params(labelsize=7)
        for text in ax.legend(fontsize=6).get_texts():
            text.set_parse_math(False)
        fig.tight_layout()
        return write_png(fig, path)


def fix_break_by_k(councils: Mapping[str, Sequence], arms: Sequence[str] = ("bda-per-agent",),
                   folds: int = 5, seed: int = 0, *, label_budget: int | None = None,
                   n_resamples: int = 1000, cache=None,
                   progress: Callable[[str, int, int], None] | None = None) -> FixBreakByK:
    """Fix/break of rounds >= 1 against round 0 on each council ([BDA] Appendix E.4).

    Args:
      councils: name -> labeled traces (e.g. one simulated council per K).
      arms: the arms, each refitted leak-free on round 0 and on the full trace.
      folds, seed, label_budget, n_resamples: as in :func:`round_windows`.
      cache: ``None``, a path (a resumable :class:`~bda_jax.report.CellCache`) or a cell store;
        keys ``"<council>/refit|<window>"``.
      progress: optional ``(description, done, total)``, once per council.

    Returns:
      :class:`FixBreakByK`, rows in the order of ``councils``.
    """
    if not isinstance(councils, Mapping) or not councils:
        raise DataError("councils must be a non-empty mapping name -> traces", field="councils")
    names = [str(c) for c in councils]
    traces = {n: list(councils[c]) for n, c in zip(names, councils)}
    arms = list(dict.fromkeys([arms] if isinstance(arms, str) else arms))
    store = open_cells(cache, lambda: fingerprint(
        "fix_break_by_k", {n: fingerprint_traces(t) for n, t in traces.items()}, arms, folds,
        seed, label_budget, n_resamples))
    report = progress if progress is not None else (lambda description, done, total: None)
    table, plot = [], {a: {"k": [], "ratio": [], "ci_low": [], "ci_high": []} for a in arms}
    for done, n in enumerate(names):
        report(f"fix/break: {n}", done, len(names))
        k = np.asarray(tally(traces[n]).K)
        rw = round_windows(traces[n], arms, windows=(0, None), folds=folds, seed=seed,
                           label_budget=label_budget, full_trace_fit=False,
                           n_resamples=n_resamples, cache=scoped(store, n))
        for a in arms:
            r0 = rw.row(window="<= round 0", protocol=REFIT, arm=a)
            full = rw.row(window="full", protocol=REFIT, arm=a)
            row = {"council": n, "k_min": int(k.min()), "k_max": int(k.max()), "arm": a,
                   "n": full["n"], **{f: full[f] for f in (
                       "changed", "fix", "break", "net", "fix_per_break", "ci_low", "ci_high")},
                   "accuracy_round0": r0["accuracy"], "accuracy_full": full["accuracy"]}
            table.append(row)
            if row["k_min"] == row["k_max"]:
                p = plot[a]
                p["k"].append(row["k_max"])
                for f, src in (("ratio", "fix_per_break"), ("ci_low", "ci_low"),
                               ("ci_high", "ci_high")):
                    p[f].append(row[src])
    report("fix/break", len(names), len(names))
    params = {"councils": names, "arms": arms, "folds": folds, "seed": seed,
              "label_budget": label_budget, "n_resamples": n_resamples,
              "n_tasks": {n: len(t) for n, t in traces.items()}}
    return FixBreakByK(table, params, {}, plot)
