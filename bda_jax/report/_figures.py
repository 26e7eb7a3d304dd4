"""The report's figures: pure functions from results data (strict JSON) to a PNG ``data:`` URI,
and :class:`FigureRenderer`, which draws them in background processes while the caller goes
on (``bda demo`` hands each section's figures over as soon as the section is computed).

Each figure function (the kinds of :data:`FIGURES`) takes JSON values only and draws with
matplotlib off-screen (Agg) under matplotlib's default settings, so a figure is the same bytes
whichever process draws it: a worker, or the caller when no worker is running, a worker
failed, or the caller takes a queued figure itself while it waits. Every text that can hold a
user string is drawn with ``parse_math=False``.

A worker is ``python -c`` with matplotlib and this module only (no JAX: the ``bda_jax``
packages are set up without running their ``__init__``); a request is one JSON line
``[id, kind, args]`` on its stdin, a reply one JSON line ``[id, uri, error]`` on its stdout,
never a pickle. A worker ends at the end of its stdin, so it never outlives its caller.
"""
from __future__ import annotations

import base64
import collections
import io
import json
import math
import os
import signal
import subprocess
import sys
import threading
from typing import Sequence

from .._core.workers import WORKER_THREADS, env_count, usable_cpus, worker_command
from ._format import as_float, constant_confidence, is_number, num

__all__ = ["FIGURES", "FigureRenderer", "render_figure", "seat_ratios", "auto_figure_workers",
           "MAX_FIGURE_WORKERS", "WORKERS_ENV"]

# --------------------------------------------------------------------------- figures

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=96)
    return fig


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _label(name) -> str:
    """A user string as a legend label: matplotlib hides labels that start with ``_``, so those
    get a zero-width space in front (shown as typed, never dropped)."""
    text = str(name)
    return "\u200b" + text if text.startswith("_") else text


def _legend(ax, **kwargs):
    """``ax.legend(**kwargs)`` with every label drawn as plain text (``parse_math=False``): a
    legend label is an arm, a seat or a record id, a user string."""
    legend = ax.legend(**kwargs)
    for text in legend.get_texts():
        text.set_parse_math(False)
    return legend


def reliability_figure(arm: dict) -> str:
    bins = arm.get("bins") or {}
    conf = [as_float(v) for v in bins.get("confidence") or []]
    acc = [as_float(v) for v in bins.get("accuracy") or []]
    count = [as_float(v) for v in bins.get("count") or []]
    M = len(acc) or 10
    fig = _figure(2.7, 2.7)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], ls="--", lw=1, color="#888")
    centers = [(m + 0.5) / M for m in range(M)]
    total = sum(c for c in count if math.isfinite(c)) or 1.0
    for m in range(min(M, len(acc))):
        if not math.isfinite(acc[m]):
            continue
        share = count[m] / total if m < len(count) and math.isfinite(count[m]) else 0.0
        ax.bar(centers[m], acc[m], width=1.0 / M, color="#1f77b4",
               alpha=0.35 + 0.65 * min(1.0, 3 * share), edgecolor="white", lw=0.5)
        if m < len(count) and math.isfinite(count[m]):
            ax.text(centers[m], min(acc[m], 0.9) + 0.02, f"{count[m]:.0f}", ha="center",
                    va="bottom", fontsize=6, color="#333", parse_math=False)
        if m < len(conf) and math.isfinite(conf[m]):
            ax.plot([conf[m]], [acc[m]], "o", ms=3, color="#d62728")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence", fontsize=8)
    ax.set_ylabel("accuracy", fontsize=8)
    row = arm.get("row") or {}
    flag = "  (constant conf.)" if constant_confidence(arm) else ""
    ax.set_title(f"{arm.get('arm')}  ECE {num(row.get('ece_ew'))}{flag}", fontsize=9,
                 parse_math=False)
    ax.tick_params(labelsize=7)
    return _png(fig)


def weights_figure(weights: dict, sort: bool) -> str:
    agents = [str(a) for a in weights.get("agents") or []]
    w = [as_float(v) for v in weights.get("weight") or []]
    r = [as_float(v) for v in weights.get("reliability") or []]
    adv = set(map(str, weights.get("adversaries") or []))
    chance = as_float(weights.get("chance"))
    order = list(range(len(agents)))
    if sort:
        order.sort(key=lambda i: (-w[i] if math.isfinite(w[i]) else math.inf))
    n = len(order)
    fig = _figure(max(5.5, 0.17 * n + 2.5), 4.6)
    ax1, ax2 = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    xs = range(n)
    colors = ["#d62728" if agents[i] in adv else ("#ff7f0e" if w[i] < 0 else "#1f77b4")
              for i in order]
    ax1.bar(xs, [w[i] if math.isfinite(w[i]) else 0 for i in order], color=colors)
    ax1.axhline(0, color="black", lw=0.8)
    ax1.set_ylabel("evidence weight\n(log-odds per move)", fontsize=8)
    ax2.bar(xs, [r[i] if math.isfinite(r[i]) else 0 for i in order], color=colors)
    mu = [as_float(v) for v in weights.get("prior_mean") or []]
    if len(mu) == len(agents):
        ax2.plot(list(xs), [mu[i] for i in order], "o", ms=3, color="black", label="prior mean μ_i")
        _legend(ax2, fontsize=7, loc="upper right")
    if math.isfinite(chance):
        ax2.axhline(chance, color="black", lw=0.8, ls="--")
        ax2.text(-0.5, chance, " chance", va="bottom", ha="left", fontsize=7, parse_math=False)
    ax2.set_ylim(0, 1)
    ax2.set_ylabel("reliability r_i", fontsize=8)
    for ax in (ax1, ax2):
        ax.set_xticks(list(xs))
        ax.set_xticklabels([agents[i] for i in order], rotation=90 if n > 8 else 0, fontsize=7,
                           parse_math=False)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlim(-0.6, n - 0.4)
    from matplotlib.patches import Patch
    handles = [Patch(color="#1f77b4", label="weight > 0"), Patch(color="#ff7f0e", label="weight < 0")]
    if adv:
        handles.append(Patch(color="#d62728", label="coalition seat"))
    _legend(ax1, handles=handles, fontsize=7, loc="best")
    fig.tight_layout()
    return _png(fig)


def dose_figure(dose: dict) -> str:
    regimes = list(dose.get("regimes") or dict.fromkeys(r["regime"] for r in dose["rows"]))
    arms = list(dose.get("arms") or dict.fromkeys(r["arm"] for r in dose["rows"]))
    fig = _figure(3.2 * max(1, len(regimes)), 3.0)
    for j, regime in enumerate(regimes):
        ax = fig.add_subplot(1, len(regimes), j + 1)
        for a, arm in enumerate(arms):
            pts = sorted((as_float(r["p_wrong"]), as_float(r.get("accuracy"))) for r in dose["rows"]
                         if r["regime"] == regime and r["arm"] == arm)
            ax.plot([p for p, _ in pts], [v for _, v in pts], "o-", ms=3, lw=1.4,
                    color=_COLORS[a % len(_COLORS)], label=_label(arm))
        ax.set_title(regime, fontsize=9, parse_math=False)
        ax.set_xlabel("p_wrong (dose)", fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.tick_params(labelsize=7)
        if j == 0:
            ax.set_ylabel("accuracy", fontsize=8)
            _legend(ax, fontsize=7)
    fig.tight_layout()
    return _png(fig)


def sleeper_figure(sl: dict) -> str:
    arms = list(sl.get("arms") or dict.fromkeys(r["arm"] for r in sl["table"]))
    fig = _figure(7.0, 3.0)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for a, arm in enumerate(arms):
        pts = sorted((as_float(r["f"]), as_float(r.get("accuracy"))) for r in sl["table"] if r["arm"] == arm)
        ax1.plot([p for p, _ in pts], [v for _, v in pts], "o-", ms=3, lw=1.4,
                 color=_COLORS[a % len(_COLORS)], label=_label(arm))
    ax1.set_xlabel("f (attacked share of the calibration window)", fontsize=8)
    ax1.set_ylabel("deployment accuracy", fontsize=8)
    ax1.set_ylim(-0.02, 1.02)
    _legend(ax1, fontsize=7)
    factor = as_float(sl.get("factor", 2.0))
    seats = seat_ratios(sl)
    if seats:
        # the alarm fires per seat (drift_i > factor * floor_i): plot each seat's ratio and the
        # largest, the statistic the alarm compares with the factor
        fs = sorted(seats)
        agents = list(dict.fromkeys(a for f in fs for a in seats[f]))
        for j, agent in enumerate(agents):
            ax2.plot(fs, [seats[f].get(agent, (math.nan, False))[0] for f in fs], "-", lw=0.9,
                     color=_COLORS[(j + 3) % len(_COLORS)], alpha=0.8,
                     label=_label(f"seat {agent}"))
        top = [max((v for v, _ in seats[f].values() if math.isfinite(v)), default=math.nan)
               for f in fs]
        ax2.plot(fs, top, "o-", ms=3.5, lw=1.6, color="#222", label="largest seat ratio")
        fired = [(f, t) for f, t in zip(fs, top)
                 if any(a for _, a in seats[f].values())]
        if fired:
            ax2.plot([f for f, _ in fired], [t for _, t in fired], "s", ms=6, mfc="none",
                     color="#d62728", label="alarm raised")
        ylabel = "drift / noise floor, per seat"
    else:                                   # an older results file: the mean is all there is
        first = {}
        for r in sl["table"]:
            first.setdefault(as_float(r["f"]), r)
        fs = sorted(first)
        ax2.plot(fs, [as_float(first[f].get("drift_ratio")) for f in fs], "o-", ms=3, color="#444",
                 label="mean over seats (the alarm is per seat)")
        ylabel = "row-drift ratio (mean)"
    if math.isfinite(factor):
        ax2.axhline(factor, color="#d62728", ls="--", lw=1, label=f"alarm at {factor:g}x")
    ax2.set_xlabel("f", fontsize=8)
    ax2.set_ylabel(ylabel, fontsize=8)
    _legend(ax2, fontsize=6.5, loc="upper left")
    for ax in (ax1, ax2):
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return _png(fig)


def seat_ratios(sl: dict) -> dict:
    """f -> {seat: (drift ratio, alarm)} from the sleeper section's ``monitor`` ({} if none)."""
    out = {}
    for m in sl.get("monitor") or []:
        agents = [str(a) for a in m.get("agents") or []]
        ratio = [as_float(v) for v in m.get("ratio") or []]
        alarm = [bool(v) for v in m.get("alarm") or []]
        out[as_float(m["f"])] = {a: (ratio[i] if i < len(ratio) else math.nan,
                               alarm[i] if i < len(alarm) else False)
                           for i, a in enumerate(agents)}
    return out


def trajectories_figure(records: Sequence[dict], W) -> str:
    n_rows = -(-len(records) // 3) if records else 0
    fig = _figure(7.0, 3.1 + 0.2 * n_rows)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for i, r in enumerate(records):
        g = [as_float(v) for v in r.get("g") or []]
        rounds = list(range(1, len(g) + 1))
        mark = "✓" if r.get("correct") else "✗"
        label = f"#{r.get('idx')} {r.get('commit')} {mark}"
        color = _COLORS[i % len(_COLORS)]
        ax1.plot(rounds, g, "o-", ms=3, lw=1.2, color=color, label=_label(label))
        x = r.get("x")
        if x:
            ax2.step([0] + list(range(1, len(x) + 1)), [0] + [as_float(v) for v in x], where="post",
                     lw=1.4, color=color)
    ax1.axhline(0.5, color="#888", ls=":", lw=1)
    ax1.set_ylim(0, 1.02)
    ax1.set_xlabel("round", fontsize=8)
    ax1.set_ylabel("evidence score g", fontsize=8)
    from matplotlib.ticker import MaxNLocator
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if records:                 # below both panels: inside, it covers the trajectories
        handles, labels = ax1.get_legend_handles_labels()
        legend = fig.legend(handles, labels, fontsize=7, loc="lower center", frameon=False,
                            ncol=min(3, len(labels)), bbox_to_anchor=(0.5, 0.0))
        for text in legend.get_texts():
            text.set_parse_math(False)
    if is_number(W):
        for y, name in ((W, "right wall: dispatch"), (-W, "left wall: flag")):
            ax2.axhline(y, color="#d62728" if y < 0 else "#2ca02c", lw=1, ls="--")
            ax2.text(0.1, y, name, fontsize=7, va="bottom" if y < 0 else "top", parse_math=False)
        ax2.set_ylim(-W - 0.8, W + 0.8)
    ax2.set_xlabel("round", fontsize=8)
    ax2.set_ylabel("arena position x", fontsize=8)
    for ax in (ax1, ax2):
        ax.tick_params(labelsize=7)
    fig.tight_layout(rect=(0, (0.22 * n_rows + 0.1) / (3.1 + 0.2 * n_rows), 1, 1))
    return _png(fig)


_KINDS = ("right_wall", "consensus", "left_wall", "fallback", "running")


_KIND_COLORS = {"right_wall": "#2ca02c", "consensus": "#17becf", "left_wall": "#d62728",
                "fallback": "#ff7f0e", "running": "#7f7f7f"}
_KIND_NAMES = {"right_wall": "right wall (dispatched)", "consensus": "consensus",
               "left_wall": "left wall (flagged)", "fallback": "fallback (flagged)",
               "running": "still running"}


def partition_figure(excerpt: dict) -> str:
    """One stacked bar per replay: problems per commit kind, correct (solid) then wrong
    (hatched); the kinds are named in a legend below the bars, the bars carry counts only (a
    kind name inside a thin bar is unreadable at the report's width)."""
    from matplotlib.patches import Patch

    replays = excerpt.get("replays") or []
    height = 1.6 + 0.55 * max(1, len(replays))
    fig = _figure(7.0, height)
    ax = fig.add_subplot(1, 1, 1)
    labels, present = [], []
    for y, rep in enumerate(replays):
        recs = rep.get("records") or []
        total = max(1, len(recs))
        left = 0
        for kind in _KINDS:
            ok = sum(1 for r in recs if r.get("commit") == kind and r.get("correct"))
            bad = sum(1 for r in recs if r.get("commit") == kind and not r.get("correct"))
            if (ok or bad) and kind not in present:
                present.append(kind)
            for n, wrong in ((ok, False), (bad, True)):
                if not n:
                    continue
                ax.barh(y, n, left=left, height=0.6, color=_KIND_COLORS[kind],
                        alpha=0.45 if wrong else 1.0, edgecolor="white",
                        hatch="//" if wrong else None)
                if n / total >= 0.04:
                    ax.text(left + n / 2, y, f"{'✗' if wrong else '✓'}{n}", ha="center",
                            va="center", fontsize=7.5, parse_math=False)
                left += n
        labels.append(f"empty_g = {rep.get('empty_g')}")
    ax.set_yticks(list(range(len(replays))))
    ax.set_yticklabels(labels, fontsize=8, parse_math=False)
    ax.set_xlabel("problems (✓ solid: correct, ✗ hatched: wrong)", fontsize=8)
    ax.tick_params(labelsize=7.5)
    ax.invert_yaxis()
    handles = [Patch(color=_KIND_COLORS[k], label=_KIND_NAMES[k]) for k in present]
    if handles:                 # below the axes, apart from the x label
        legend = fig.legend(handles=handles, fontsize=7.5, loc="lower center", frameon=False,
                            ncol=min(len(handles), 4), bbox_to_anchor=(0.5, 0.0))
        for text in legend.get_texts():
            text.set_parse_math(False)
    fig.tight_layout(rect=(0, 0.32 / height if handles else 0, 1, 1))
    return _png(fig)



#: figure kind -> function (JSON arguments -> PNG data URI)
FIGURES = {"reliability": reliability_figure, "weights": weights_figure, "dose": dose_figure,
           "sleeper": sleeper_figure, "trajectories": trajectories_figure,
           "partition": partition_figure}


def render_figure(kind: str, args: Sequence) -> str:
    """The PNG data URI of figure ``kind`` (a key of :data:`FIGURES`) drawn from ``args``, in
    this process, under matplotlib's default settings (a user's style or ``rcParams`` never
    changes a report)."""
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        return FIGURES[kind](*args)


# --------------------------------------------------------------------------- workers

#: the automatic number of figure workers is at most this many (one per CPU beyond the first)
MAX_FIGURE_WORKERS = 3
#: a non-negative integer here replaces the automatic number (``0``: no worker; use it when the
#: cores are busy, e.g. under ``pytest -n``)
WORKERS_ENV = "BDA_JAX_FIGURE_WORKERS"

#: While it waits for a worker, the caller draws a queued figure itself once matplotlib is
#: loaded here, or when at least this many wait: loading matplotlib costs about as much as
#: drawing a few figures (the demo's last one or two are left to the worker).
_STEAL_QUEUED = 4
_WORKER_ENV = {**WORKER_THREADS, "MPLBACKEND": "Agg"}


def auto_figure_workers() -> int:
    """``$BDA_JAX_FIGURE_WORKERS`` if set (a non-negative integer, else
    :class:`~bda_jax.DataError` naming it), else one worker per CPU this process may run on
    beyond the first (``os.sched_getaffinity``), at most :data:`MAX_FIGURE_WORKERS`: 0 on one
    CPU, where the caller draws every figure."""
    n = env_count(WORKERS_ENV, 0)
    return max(0, min(MAX_FIGURE_WORKERS, usable_cpus() - 1)) if n is None else n


def serve() -> None:
    """A figure worker's loop: one reply line per request line, until the end of stdin."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the caller stops its workers itself
    out, sys.stdout = sys.stdout, sys.stderr           # stdout carries the replies only
    for line in sys.stdin:
        ident, kind, args = json.loads(line)
        try:
            reply = [ident, render_figure(kind, args), None]
        except Exception as err:                       # the caller draws it again and raises
            reply = [ident, None, f"{type(err).__name__}: {err}"]
        try:
            out.write(json.dumps(reply) + "\n")
            out.flush()
        except BrokenPipeError:                        # the caller has stopped reading
            break
    sys.stderr.flush()
    os._exit(0)


class _Worker:
    """One worker process and the figure it is drawing (``busy``: a job key, or None)."""

    def __init__(self, renderer: "FigureRenderer"):
        self.proc = subprocess.Popen(worker_command(__name__, "serve"),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **_WORKER_ENV))
        self.busy: str | None = None
        self.alive = True
        self.thread = threading.Thread(target=renderer._read, args=(self,), daemon=True)
        self.thread.start()


class FigureRenderer:
    """Draws report figures in ``workers`` background processes (``None``:
    :func:`auto_figure_workers`; 0: every figure is drawn by the caller).

    :meth:`submit` queues a figure and returns at once; calling the renderer,
    ``renderer(kind, *args)``, returns its data URI: the worker's, once drawn, else drawn here
    (a figure never submitted, or one whose worker failed or stopped). While it waits for a
    worker, the caller draws the figures queued last itself, so a report is drawn by every
    process at once -- once matplotlib is loaded in the caller, or when enough figures wait
    (:data:`_STEAL_QUEUED`); else the figure it waits for goes first in the queue. Use it as a
    context manager (or :meth:`close` it): the workers end with it.
    """

    def __init__(self, workers: int | None = None):
        n = auto_figure_workers() if workers is None else workers
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            from .._core.errors import DataError
            raise DataError(f"workers must be an integer >= 0 or None, got {workers!r}",
                            field="workers")
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()   # (key, kind, args), not sent
        self._sent: dict[str, tuple] = {}                        # key -> (kind, args)
        self._done: dict[str, str | None] = {}                   # key -> uri (None: failed)
        self._jobs: set[str] = set()
        self._workers: list[_Worker] = []
        for _ in range(n):
            try:
                self._workers.append(_Worker(self))
            except (OSError, ValueError):   # no process can start: this one draws them all
                break

    def __enter__(self) -> "FigureRenderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def _key(kind: str, args: Sequence) -> str:
        return json.dumps([kind, list(args)], sort_keys=True, allow_nan=False)

    def submit(self, kind: str, *args) -> None:
        """Queue figure ``kind`` of ``args`` (JSON values) for a worker; a figure already
        submitted is not queued again. Without a live worker, nothing is queued."""
        if kind not in FIGURES:
            raise KeyError(f"unknown figure kind {kind!r}")
        key = self._key(kind, args)
        with self._cond:
            if key in self._jobs or not any(w.alive for w in self._workers):
                return
            self._jobs.add(key)
            self._queue.append((key, kind, args))
            self._dispatch()

    def _dispatch(self) -> None:
        """Send the next queued figure to every idle live worker (holding the lock)."""
        for w in self._workers:
            if w.alive and w.busy is None and self._queue:
                key, kind, args = self._queue.popleft()
                try:
                    w.proc.stdin.write(json.dumps([key, kind, list(args)]) + "\n")
                    w.proc.stdin.flush()
                except (OSError, ValueError):          # it has stopped: drawn by the caller
                    w.alive = False
                    self._done[key] = None
                    continue
                w.busy = key
                self._sent[key] = (kind, args)

    def _read(self, w: _Worker) -> None:
        """A worker's replies, until its stdout ends (the thread of each :class:`_Worker`)."""
        for line in w.proc.stdout:
            try:
                key, uri, _error = json.loads(line)
            except ValueError:
                break
            with self._cond:
                self._done[key] = uri if isinstance(uri, str) else None
                w.busy = None
                self._dispatch()
                self._cond.notify_all()
        with self._cond:
            w.alive = False
            if w.busy is not None:
                self._done[w.busy] = None
                w.busy = None
            self._cond.notify_all()

    def __call__(self, kind: str, *args) -> str:
        """The data URI of figure ``kind`` drawn from ``args``."""
        key = self._key(kind, args)
        while True:
            with self._cond:
                uri = self._done.get(key)
                if uri is not None:
                    return uri
                queued = next((j for j in self._queue if j[0] == key), None)
                if key in self._done or (queued is None and key not in self._sent) \
                        or not any(w.alive for w in self._workers):
                    break                           # failed, never handed over, or no worker
                steal = "matplotlib.figure" in sys.modules or len(self._queue) >= _STEAL_QUEUED
                if queued is not None:
                    self._queue.remove(queued)
                    if steal:
                        break                       # draw it here
                    self._queue.appendleft(queued)  # the next figure a worker takes
                if not (steal and self._queue):
                    self._cond.wait()
                    continue
                other, o_kind, o_args = self._queue.pop()   # draw the last one meanwhile
            uri = render_figure(o_kind, o_args)
            with self._cond:
                self._done[other] = uri
        return render_figure(kind, args)

    def close(self) -> None:
        """End the workers (an idle one at the end of its stdin; a drawing one is killed)."""
        with self._cond:
            self._queue.clear()
        for w in self._workers:
            try:
                w.proc.stdin.close()
            except OSError:
                pass
        for w in self._workers:
            if w.busy is not None and w.proc.poll() is None:
                w.proc.kill()
            try:
                w.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
            w.thread.join()
            w.proc.stdout.close()
        self._workers = []
