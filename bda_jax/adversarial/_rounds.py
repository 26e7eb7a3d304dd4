"""Evidence windows over deliberation rounds ([BDA] Appendix E.2, "Deliberation rounds", Table 8).

:func:`round_windows` truncates the traces to at most round r for each window (``tally(
max_round=r)``; ``None`` is the full trace) and refits every arm leak-free on each window with
the same outer folds, label draws and tie-breaks (:func:`bda_jax.evaluate`), so a difference
between two windows is never a difference between two fold draws. Against the first window
(round 0) it counts the decisions each later window changes on the labeled tasks: ``fix`` (wrong
on round 0, right on the window), ``break`` (the reverse), ``net`` = fix - break and
``fix_per_break``, with a cluster-bootstrap interval of that ratio. The full-window counts are
:func:`bda_jax.aggregators.decision_flips` (same folds, weights and ties).

``full_trace_fit`` adds the comparison the paper warns against: each supervised arm fitted on
the full traces of the training folds and applied to the truncated traces of the held-out fold.
The prior then expects the full trace's evidence, so a truncated window looks badly calibrated
and the rounds seem to buy calibration ("a spurious threefold calibration gain"); the leak-free
per-window refit removes it.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import jax
import numpy as np

from .._core.cache import fingerprint
from .._core.counts import tally
from .._core.errors import DataError
from .._core.selection import make_folds
from ..aggregators import evaluate, fold_weights, is_supervised, make_arm
from ..metrics import correctness, summary
from ._cells import cell, fingerprint_traces, open_cells
from ._result import StudyResult, markdown_table, new_figure, write_png

__all__ = ["RoundWindows", "round_windows", "flip_counts", "window_label"]

_METRICS = ("accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "nll")
REFIT, FULL_FIT = "refit", "full-trace fit"


def window_label(max_round: int | None) -> str:
    """``"<= round r"``, or ``"full"`` for ``None``."""
    return "full" if max_round is None else f"<= round {max_round}"


def flip_counts(pred_base, pred, correct_base, correct, clusters=None, *,
                n_resamples: int = 0, seed: int = 0, level: float = 0.95) -> dict:
    """Decisions a window changes against a base window, on the same labeled tasks.

    ``pred_base``, ``pred`` [T] decided slots; ``correct_base``, ``correct`` [T] 0/1;
    ``clusters`` [T] (any labels) for the bootstrap. Returns ``changed`` (decisions that differ),
    ``fix`` (wrong -> right), ``break`` (right -> wrong), ``net`` = fix - break,
    ``fix_per_break`` (``None`` when nothing broke) and, with ``n_resamples`` > 0, the
    ``level`` percentile interval ``ci_low`` / ``ci_high`` of fix / break over cluster
    resamples (``numpy.random.default_rng(seed)``; resamples without a break are dropped,
    ``n_valid`` counts the rest).
    """
    pb, p = np.asarray(pred_base), np.asarray(pred)
    cb, c = np.asarray(correct_base) > 0, np.asarray(correct) > 0
    if not (pb.shape == p.shape == cb.shape == c.shape) or pb.ndim != 1:
        raise DataError("pred_base, pred, correct_base and correct must be [T] arrays of one "
                        "shape", field="pred")
    fix, brk = ~cb & c, cb & ~c
    out = {"changed": int(np.sum(pb != p)), "fix": int(fix.sum()), "break": int(brk.sum()),
           "net": int(fix.sum()) - int(brk.sum()),
           "fix_per_break": float(fix.sum() / brk.sum()) if brk.any() else None}
    if n_resamples > 0:
        groups = np.arange(pb.size) if clusters is None else \
            np.unique(np.asarray(clusters), return_inverse=True)[1].ravel()
        n_groups = int(groups.max()) + 1 if groups.size else 0
        f_of = np.bincount(groups, fix, minlength=n_groups)
        b_of = np.bincount(groups, brk, minlength=n_groups)
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, n_groups, size=(n_resamples, n_groups)) if n_groups else \
            np.zeros((n_resamples, 0), np.int64)
        f, b = f_of[draws].sum(1), b_of[draws].sum(1)
        ok = b > 0
        ratio = f[ok] / b[ok]
        alpha = (1.0 - level) / 2
        out.update(n_valid=int(ok.sum()),
                   ci_low=float(np.quantile(ratio, alpha)) if ratio.size else None,
                   ci_high=float(np.quantile(ratio, 1 - alpha)) if ratio.size else None)
    return out


class RoundWindows(StudyResult):
    """Result of :func:`round_windows`.

    ``table``: one row per (window, protocol, arm): ``window`` (:func:`window_label`),
    ``max_round``, ``protocol`` (``"refit"``: leak-free per window; ``"full-trace fit"``: fitted
    on the full traces, applied to the window), the metric row of :func:`bda_jax.summary`, and
    against the first window's refit of the same arm :func:`flip_counts`' ``changed``, ``fix``,
    ``break``, ``net``, ``fix_per_break``, ``ci_low``, ``ci_high`` (``None`` on the first
    window). ``plot``: per protocol and arm, accuracy and ECE_em per window.
    """

    STUDY = "round_windows"

    def to_markdown(self, digits: int = 3) -> str:
        """Table 8's layout: per arm, accuracy, ECE_em and the decisions changed against round
        0, leak-free refit first, then the full-trace fit."""
        rows = []
        for r in self.table:
            changed = "—" if r["changed"] is None else (
                f"{r['changed']} ({r['fix']} fixed, {r['break']} broken, net {r['net']:+d}"
                f"/{r['n']})")
            rows.append({"arm": r["arm"], "protocol": r["protocol"], "window": r["window"],
                         "accuracy": r["accuracy"], "ECE_ew": r["ece_ew"],
                         "ECE_em": r["ece_em"], "Brier": r["brier"],
                         "decisions changed vs first window": changed})
        return markdown_table(rows, digits=digits) + "\n"

    def plot_png(self, path) -> str:
        """ECE_em and accuracy per window and arm: leak-free refit solid, full-trace fit
        dashed."""
        fig, axes = new_figure(2, 1)
        labels = self.params["windows"]
        x = np.arange(len(labels))
        for ax, metric, name in ((axes[0, 0], "ece_em", "ECE_em"),
                                 (axes[0, 1], "accuracy", "accuracy")):
            colors = {}
            for protocol, style in ((REFIT, "-"), (FULL_FIT, "--")):
                for arm, series in self.plot.get(protocol, {}).items():
                    ys = [np.nan if v is None else v for v in series[metric]]
                    line, = ax.plot(x, ys, style, marker="o", ms=3.5, lw=1.2,
                                    color=colors.get(arm),
                                    label=f"{arm} ({protocol})")
                    colors.setdefault(arm, line.get_color())
            ax.set_xticks(x)
            ax.set_xticklabels(labels, fontsize=7)
            ax.set_ylabel(name)
            ax.tick_params(labelsize=7)
        for text in axes[0, 0].legend(fontsize=6).get_texts():
            text.set_parse_math(False)
        fig.suptitle("Evidence windows: leak-free refit (solid) vs full-trace fit (dashed)",
                     fontsize=9)
        fig.tight_layout()
        return write_png(fig, path)


def _check_windows(windows) -> list[int | None]:
    out = []
    for w in windows:
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, np.integer))
                              or w < 0):
            raise DataError(f"a window is a round r >= 0 or None (the full trace), got {w!r}",
                            field="windows")
        out.append(None if w is None else int(w))
    if len(out) < 2 or len(set(out)) != len(out):
        raise DataError("at least two distinct windows are needed", field="windows")
    return out


def round_windows(traces, arms: Sequence[str] = ("majority", "bda-per-agent", "bda-confusion"),
                  windows: Sequence[int | None] = (0, 1, None), folds=5, seed: int = 0, *,
                  label_budget: int | None = None, full_trace_fit: bool = True,
                  n_resamples: int = 1000, cache=None,
                  progress: Callable[[str, int, int], None] | None = None) -> RoundWindows:
    """Every arm on each evidence window, refit leak-free ([BDA] Table 8).

    Args:
      traces: labeled traces.
      arms: the arms (majority reads round-0 votes on every window).
      windows: rounds r (keep moves of rounds <= r) or ``None`` (the full trace); the first is
        the base the decision changes are counted against (the paper's round 0).
      folds: outer folds (a number, made from the full tally with ``seed``, or [T] fold ids).
      seed: folds, label draws, tie-breaks and the bootstrap.
      label_budget: labeled training tasks per outer fold (``None``: all).
      full_trace_fit: also apply full-trace fits to each truncated window.
      n_resamples: cluster-bootstrap resamples of fix / break (0: none).
      cache: ``None``, a path (a resumable :class:`~bda_jax.report.CellCache`) or a cell store;
        keys ``"refit|<window>"`` and ``"full-fit|<window>"``.
      progress: optional ``(description, done, total)``.

    Returns:
      :class:`RoundWindows`.
    """
    traces = list(traces)
    windows = _check_windows(windows)
    arms = list(dict.fromkeys([arms] if isinstance(arms, str) else arms))
    if not arms:
        raise DataError("at least one arm is needed", field="arms")
    for arm in arms:
        make_arm(arm)
    full = tally(traces)
    outer = make_folds(full, folds, seed) if isinstance(folds, (int, np.integer)) \
        and not isinstance(folds, bool) else np.asarray(folds)
    if outer.shape != (len(traces),) or not np.issubdtype(outer.dtype, np.integer):
        raise DataError("folds must be an int or [T] integer fold ids", field="folds")
    store = open_cells(cache, lambda: fingerprint(
        "round_windows", fingerprint_traces(traces), arms, windows, outer, seed, label_budget,
        full_trace_fit, n_resamples))
    gold, gm, mask = np.asarray(full.gold), np.asarray(full.gold_missing), np.asarray(full.mask)
    labeled = (gold >= 0) | gm
    key = jax.random.key(seed)
    last_round = max((m.round for t in traces for m in t.moves), default=0)
    truncated = [w for w in windows if w is not None and w < last_round]
    supervised = [a for a in arms if is_supervised(a)]

    def counts_of(w):
        return full if w is None else tally(traces, agents=full.agents, max_round=w)

    def scored(proba):
        s = correctness(proba, gold, gm, mask, key=key)
        return {"summary": summary(proba, gold, gm, mask, key=key),
                "pred": np.asarray(s.pred)[labeled].tolist(),
                "correct": np.asarray(s.correct)[labeled].astype(int).tolist()}

    def refit(w):
        t0 = time.perf_counter()
        ev = evaluate(counts_of(w), arms, folds=outer, label_budget=label_budget, seed=seed,
                      n_resamples=max(n_resamples, 1))
        return {"arms": {a: scored(ev.proba[a]) for a in arms},
                "seconds": time.perf_counter() - t0}

    def full_fit(w):
        t0 = time.perf_counter()
        window = counts_of(w)
        weights = fold_weights(full, outer, label_budget, seed)
        out = {}
        for a in supervised:
            proba = np.zeros(mask.shape, np.float64)
            for f, wf in enumerate(weights):
                test = np.flatnonzero(outer == f)
                model = make_arm(a, seed).fit(full, wf)
                proba[test] = np.asarray(model.predict_proba(window), np.float64)[test]
            out[a] = scored(proba)
        return {"arms": out, "seconds": time.perf_counter() - t0}

    steps = [(f"refit|{window_label(w)}", w, refit) for w in windows]
    if full_trace_fit and supervised:
        steps += [(f"full-fit|{window_label(w)}", w, full_fit) for w in truncated]
    report = progress if progress is not None else (lambda description, done, total: None)
    values = {}
    for done, (name, w, compute) in enumerate(steps):
        report(f"round windows: {name}", done, len(steps))
        values[name] = cell(store, name, lambda w=w, compute=compute: compute(w))
    report("round windows", len(steps), len(steps))

    clusters = np.asarray(full.cluster)[labeled]
    base = values[f"refit|{window_label(windows[0])}"]["arms"]
    table, plot = [], {}
    for name, w, _ in steps:
        protocol = REFIT if name.startswith("refit|") else FULL_FIT
        for a, v in values[name]["arms"].items():
            row = {"window": window_label(w), "max_round": w, "protocol": protocol, "arm": a,
                   **{m: v["summary"][m] for m in _METRICS}, "n": v["summary"]["n"]}
            flips = dict.fromkeys(("changed", "fix", "break", "net", "fix_per_break",
                                   "ci_low", "ci_high"))
            if not (protocol == REFIT and w == windows[0]):
                flips.update(flip_counts(base[a]["pred"], v["pred"], base[a]["correct"],
                                         v["correct"], clusters, n_resamples=n_resamples,
                                         seed=seed))
                flips.pop("n_valid", None)
            row.update(flips)
            table.append(row)
            series = plot.setdefault(protocol, {}).setdefault(
                a, {"accuracy": [None] * len(windows), "ece_em": [None] * len(windows)})
            series["accuracy"][windows.index(w)] = row["accuracy"]
            series["ece_em"][windows.index(w)] = row["ece_em"]
    for a, series in plot.get(FULL_FIT, {}).items():    # untruncated: the fit is the refit
        for j, w in enumerate(windows):
            if w not in truncated:
                series["accuracy"][j] = plot[REFIT][a]["accuracy"][j]
                series["ece_em"][j] = plot[REFIT][a]["ece_em"][j]
    params = {"arms": arms, "windows": [window_label(w) for w in windows],
              "max_rounds": windows, "last_round": last_round, "seed": seed,
              "folds": folds if isinstance(folds, int) else "explicit",
              "label_budget": label_budget, "full_trace_fit": bool(full_trace_fit),
              "n_resamples": n_resamples, "n_tasks": len(traces), "n_labeled": int(labeled.sum())}
    return RoundWindows(table, params, {}, plot)
