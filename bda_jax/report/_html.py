"""Self-contained HTML report of a ``bda demo`` run (``results.json`` -> ``index.html``).

:func:`render_report` draws every figure with matplotlib (off-screen, Agg), embeds each as a
base64 PNG ``data:`` URI and writes one HTML file with inline CSS: no JavaScript, no external
file, no network, so the page can be mailed or archived as is. Every string taken from the
results (arm names, agent ids, answers, file names) is HTML-escaped, and every figure text that
can hold one is drawn with ``parse_math=False``: a ``$`` or a ``\\frac`` in a name is shown as
typed, never typeset as mathtext (nor able to make the render fail). :func:`load_results` reads
a ``results.json`` back and checks its whole schema first (``validate_results``: a typed
:class:`~bda_jax.ArtifactError` names the offending field), so ``bda report results.json --out
DIR`` re-renders a report without rerunning anything; it also reads the results of ``bda
evaluate --out``, shown as one data-set section (:func:`evaluation_as_report`).
"""
from __future__ import annotations

import html
import json
import math
import os
import stat
from pathlib import Path
from typing import Callable, Sequence

from .._core.errors import ArtifactError
from .._core.io import atomic_write, read_json_file
from ._evaluation import EVALUATION_KIND
from ._figures import FigureRenderer, seat_ratios
from ._format import as_float, constant_confidence, is_number, num
from ._validate import RESULTS_KIND, SCHEMA_VERSION, validate_evaluation, validate_results

__all__ = ["render_report", "queue_figures", "load_results", "validate_results", "evaluation_as_report",
           "SCHEMA_VERSION", "RESULTS_KIND", "RESULTS_MAX_BYTES"]

#: ``figure(kind, *args) -> data URI``: how the page builders get each figure (a
#: :class:`~bda_jax.report.FigureRenderer`, or the collector of :func:`queue_figures`)
Figure = Callable[..., str]

#: the largest results file :func:`load_results` reads (bytes)
RESULTS_MAX_BYTES = 256 * 2 ** 20


def load_results(path) -> dict:
    """Read and validate a results file for :func:`render_report`: the ``results.json`` of
    ``bda demo``, or the results of ``bda evaluate --out`` (kind ``"bda_jax.evaluation"``,
    validated whole by :func:`~bda_jax.report.validate_evaluation`, then converted by
    :func:`evaluation_as_report`). The file must be a regular file (a FIFO or a device is never
    opened) of at most :data:`RESULTS_MAX_BYTES` bytes. An :class:`~bda_jax.ArtifactError` names
    the file and field if it cannot be opened, is not JSON, or does not match its schema
    (:func:`~bda_jax.report.validate_results`); a results file that loads renders."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError:
        st = None                                  # read_json_file names the error
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ArtifactError("cannot open results: not a regular file", file=path)
    if st is not None and st.st_size > RESULTS_MAX_BYTES:
        raise ArtifactError(f"results file of {st.st_size} bytes is over the limit of "
                            f"{RESULTS_MAX_BYTES} bytes", file=path)
    results = read_json_file(path, ArtifactError, "results")
    if isinstance(results, dict) and results.get("kind") == EVALUATION_KIND:
        results = evaluation_as_report(results, path)
    return validate_results(results, file=path)


def evaluation_as_report(ev: dict, path=None) -> dict:
    """An :func:`~bda_jax.report.evaluation_results` document in the demo report's schema (one
    data-set section of the arms), for :func:`render_report`; ``path``: the file it was read
    from (named by errors). The document is validated whole first
    (:func:`~bda_jax.report.validate_evaluation`): a bad field is an
    :class:`~bda_jax.ArtifactError` naming it, e.g. ``table[1].accuracy``."""
    file = None if path is None else str(path)
    validate_evaluation(ev, file)
    table = ev["table"]
    boot = ev.get("bootstrap") or {}
    sel = ev.get("selected") or {}
    stem = Path(file).stem if file is not None else "evaluation"
    name = Path(str(ev.get("traces") or stem)).name
    cal = ev.get("calibration") or {}
    arms = [{"arm": r["arm"], "row": r, "vs_reference": boot.get(r["arm"]),
             "selected": sel.get(r["arm"]), "calibration": cal.get(r["arm"])} for r in table]
    block = {"title": f"bda evaluate — {name}", "name": name, "n_tasks": ev.get("n_tasks"),
             "n_labeled": ev.get("n_labeled"), "n_agents": len(ev.get("agents") or []) or None,
             "K": ev.get("K_max"), "folds": ev.get("n_folds"), "source": ev.get("traces"),
             "reference": ev.get("reference", "majority"), "arms": arms}
    cells = ev.get("cells") if isinstance(ev.get("cells"), dict) else {}
    return {"schema_version": SCHEMA_VERSION, "kind": RESULTS_KIND,
            "bda_jax_version": ev.get("package_version"),
            "config": {"seed": ev.get("seed"), "quick": False, "source": "bda evaluate",
                       "label_budget": ev.get("label_budget")},
            "cache": {"file": cells.get("cache") or "", "loaded": cells.get("loaded"),
                      "computed": cells.get("computed")},
            "datasets": {name: block}}


# --------------------------------------------------------------------------- formatting





def _pct(x, digits: int = 1) -> str:
    return "—" if not is_number(x) else f"{100 * float(x):.{digits}f} %"


def _ci(pair, digits: int = 3) -> str:
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return ""
    if not all(is_number(v) for v in pair):
        return ""
    return f"[{num(pair[0], digits)}, {num(pair[1], digits)}]"


def _e(x) -> str:
    """HTML-escaped text of anything."""
    return html.escape("" if x is None else str(x), quote=True)




def _img(uri: str, alt: str, cls: str = "") -> str:
    c = f' class="{_e(cls)}"' if cls else ""
    return f'<img{c} src="{uri}" alt="{_e(alt)}">'


def _bin_counts(bins: dict) -> str:
    """The tasks per non-empty confidence bin of a reliability diagram, as caption HTML."""
    count = [as_float(v) for v in bins.get("count") or []]
    M = len(count)
    parts = [f"[{m / M:.1f}, {(m + 1) / M:.1f}{']' if m == M - 1 else ')'}: {c:.0f}"
             for m, c in enumerate(count) if math.isfinite(c) and c > 0]
    total = sum(c for c in count if math.isfinite(c))
    return _e(f"tasks per bin ({total:.0f} in all): " + ("; ".join(parts) or "none"))


def pick_trajectories(records: Sequence[dict], n: int) -> list[dict]:
    """Up to ``n`` problems for the trajectory figure, covering every commit kind present.

    >>> recs = [{"commit": c, "idx": i} for i, c in enumerate(["right_wall"] * 4 + ["left_wall"])]
    >>> [r["idx"] for r in pick_trajectories(recs, 3)]
    [0, 4, 1]
    """
    by_kind: dict[str, list] = {}
    for r in records:
        by_kind.setdefault(str(r.get("commit")), []).append(r)
    chosen, depth = [], 0
    while len(chosen) < n and any(depth < len(v) for v in by_kind.values()):
        for kind in by_kind:
            if depth < len(by_kind[kind]) and len(chosen) < n:
                chosen.append(by_kind[kind][depth])
        depth += 1
    return chosen


# --------------------------------------------------------------------------- HTML pieces

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1b1b;
background:#fafafa;line-height:1.45}
main{max-width:1120px;margin:0 auto;padding:1.5rem 1.5rem 3rem;background:#fff}
h1{font-size:1.7rem;margin:.2rem 0}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;
margin-top:2.2rem}h3{margin-top:1.4rem}
.meta{color:#555;font-size:.9rem}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.86rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f1f3f6}td.l,th.l{text-align:left}
td.best{font-weight:700;background:#eef8ee}
.ci{color:#666;font-size:.78rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:.4rem}
.grid figure{margin:0}img{max-width:100%;height:auto}
figure{margin:.6rem 0}figcaption{font-size:.82rem;color:#555}
.note{background:#f6f8fa;border-left:4px solid #8aa;padding:.4rem .8rem;font-size:.88rem}
nav ul{columns:2;font-size:.9rem}code{background:#f1f1f1;padding:0 .2rem;border-radius:3px}
.neg{color:#b00}.small{font-size:.82rem}
.flag{display:inline-block;font-size:.72rem;color:#7a4a00;background:#fff3d6;
border:1px solid #e8c77a;border-radius:3px;padding:0 .25rem;margin-left:.3rem}
.warn{color:#b00;font-weight:700}ul.notes{font-size:.86rem;color:#333}
"""


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """``head`` escaped here; ``rows`` are cell HTML (already escaped by the caller)."""
    th = "".join(f'<th class="l">{_e(h)}</th>' if i < left else f"<th>{_e(h)}</th>"
                 for i, h in enumerate(head))
    body = []
    for row in rows:
        tds = []
        for i, cell in enumerate(row):
            cls = []
            if i < left:
                cls.append("l")
            if isinstance(cell, tuple):          # (html, "best")
                cell, flag = cell
                cls.append(flag)
            c = f' class="{" ".join(cls)}"' if cls else ""
            tds.append(f"<td{c}>{cell}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _with_ci(value, ci, digits=3) -> str:
    c = _ci(ci, digits)
    return _e(num(value, digits)) + (f' <span class="ci">{_e(c)}</span>' if c else "")


def _inside(value, pair) -> bool | None:
    """Whether ``value`` lies in the interval ``pair`` (None when either is missing)."""
    if not is_number(value) or not isinstance(pair, (list, tuple)) or len(pair) != 2 \
            or not all(is_number(v) for v in pair):
        return None
    lo, hi = (float(v) for v in pair)
    return lo - 1e-9 <= float(value) <= hi + 1e-9


def _degenerate(arm: dict) -> bool:
    """An accuracy of exactly 0 or 1 whose interval has zero width: every labeled task scored
    the same, so every resample does too."""
    acc = (arm.get("row") or {}).get("accuracy")
    pair = (arm.get("ci") or {}).get("accuracy")
    return (is_number(acc) and float(acc) in (0.0, 1.0) and _inside(acc, pair) is True
            and float(pair[0]) == float(pair[1]))


def _metrics_table(block: dict) -> tuple[str, list[str]]:
    """The metric table of a data-set block and the notes its markers refer to (HTML)."""
    arms = block["arms"]
    ref = block.get("reference", "majority")
    ranked = [not a.get("not_ranked") for a in arms]
    on_calibration = [r and not constant_confidence(a) for r, a in zip(ranked, arms)]
    cols = {m: [as_float(a["row"].get(m)) for a in arms] for m in ("accuracy", "ece_ew", "brier_mc")}
    outside = set()                          # (arm index, metric) with the point outside its CI
    for i, a in enumerate(arms):
        for m in cols:
            if _inside(a["row"].get(m), (a.get("ci") or {}).get(m)) is False:
                outside.add((i, m))

    def best(metric, i, lower, eligible):
        vals = cols[metric]
        pool = [v for j, v in enumerate(vals) if eligible[j] and math.isfinite(v)
                and (j, metric) not in outside]
        if not pool or not eligible[i] or not math.isfinite(vals[i]) or (i, metric) in outside:
            return False
        return vals[i] == (min(pool) if lower else max(pool))

    def cell(a, i, metric, lower, eligible, mark=""):
        ci = (a.get("ci") or {}).get(metric)
        text = _with_ci(a["row"].get(metric), ci) + mark
        if (i, metric) in outside:
            text += ' <span class="warn" title="point estimate outside its interval">†</span>'
        return (text, "best") if best(metric, i, lower, eligible) else text

    rows, notes = [], []
    for i, a in enumerate(arms):
        row = a["row"]
        vs = (a.get("vs_reference") or {}).get("accuracy") or {}
        delta = "—" if a["arm"] == ref or not vs else (
            _e(f"{100 * as_float(vs.get('delta')):+.1f} pp") + (
                f' <span class="ci">{_e("[%+.1f, %+.1f]" % (100 * as_float(vs.get("ci_low")), 100 * as_float(vs.get("ci_high"))))}</span>'
                if is_number(vs.get("ci_low")) and is_number(vs.get("ci_high")) else ""))
        sel = a.get("selected")
        sel_txt = ""
        if isinstance(sel, list) and sel and isinstance(sel[0], dict):
            sel_txt = ", ".join(f"{k}={v:g}" if is_number(v) else f"{k}={v}"
                                for k, v in sel[0].items())
        name = _e(a["arm"])
        if a.get("not_ranked"):
            name += ' <span class="flag">not ranked</span>'
            notes.append(f"<b>{_e(a['arm'])}</b> is not ranked: {_e(a['not_ranked'])}.")
        if constant_confidence(a):
            cal = a.get("calibration") or {}
            name += ' <span class="flag">constant confidence</span>'
            notes.append(
                f"<b>{_e(a['arm'])}</b> states (nearly) one confidence for every task "
                f"({_e(num(cal.get('min')))} to {_e(num(cal.get('max')))}): all its tasks "
                "fall in one bin, so its ECE is |confidence − accuracy|, a statement about its "
                "accuracy level rather than its calibration; it is not ranked on ECE.")
        acc_mark = ""
        if _degenerate(a):
            acc_mark = ' <span class="warn" title="degenerate: see the note">‡</span>'
            v = num(row.get("accuracy"))
            text = (f"‡ <b>{_e(a['arm'])}</b>: accuracy {_e(v)} with a zero-width interval: "
                    f"every labeled task scores the same, so every resample gives {_e(v)} too; "
                    "the interval shows no sampling spread, not certainty.")
            if block.get("coalition") and block.get("K") == 2:
                text += (" Here it holds by construction: K = 2, and the coalition argues the "
                         "one wrong candidate on most tasks, so an arm that learns to read the "
                         "coalition's seats as evidence against their answer picks the other "
                         "candidate, the gold, on every task. A property of this simulated "
                         "council, not an accuracy to expect elsewhere.")
            notes.append(text)
        cells = [
            name,
            cell(a, i, "accuracy", False, ranked, acc_mark),
            delta,
            cell(a, i, "ece_ew", True, on_calibration),
            cell(a, i, "brier_mc", True, ranked),
            _e(num(row.get("nll"))),
            _e(num(row.get("auroc"))),
            f'<span class="small">{_e(sel_txt)}</span>',
        ]
        rows.append(cells)
    if outside:
        notes.append("† The point estimate lies outside its interval: a percentile interval of "
                     "a biased statistic (read from an older results file); it is not ranked.")
    head = ["arm", "accuracy [95% CI]", f"Δ accuracy vs {ref} [95% CI]", "ECE (10 bins) [95% CI]",
            "Brier (multiclass) [95% CI]", "NLL", "AUROC", "selected (outer fold 1)"]
    return _table(head, rows), notes


def _interval_note(block: dict) -> str:
    ci = next((a.get("ci") for a in block["arms"] if a.get("ci")), None)
    if not ci:
        return ""
    method = ci.get("method") or {}
    text = (f"Intervals: {_e(ci.get('n_resamples'))} cluster-bootstrap resamples over "
            f"{_e(ci.get('n_units'))} units, 95 %. ")
    if str(method.get("ece_ew", "")).startswith("centred"):
        text += ("Accuracy and Brier: percentile intervals (means, unbiased under resampling). "
                 "ECE: the percentile interval centred on the estimate (moved so the resampled "
                 "ECEs' median sits on it), clipped to [0, 1]. ECE is biased upwards (an "
                 "absolute value per bin): for a well-calibrated or constant-confidence arm "
                 "every resample can exceed the estimate, which would leave it outside its own "
                 "percentile interval, and outside the BCa and basic intervals too, whose ends "
                 "are quantiles of the same resamples. ")
    else:
        text += "Percentile intervals. "
    text += ("Δ is the paired bootstrap against the reference arm. Bold: best in column among "
             "the ranked arms (a constant-confidence arm is not ranked on ECE).")
    return f'<p class="note">{text}</p>'


def _weights_table(weights: dict) -> str:
    agents = weights.get("agents") or []
    adv = set(map(str, weights.get("adversaries") or []))
    rows = []
    for i, a in enumerate(agents):
        w = (weights.get("weight") or [None] * len(agents))[i]
        neg = is_number(w) and w < 0
        wtxt = _e(num(w))
        rows.append([_e(a) + (" <b>(coalition)</b>" if str(a) in adv else ""),
                     _e(num((weights.get("reliability") or [None] * len(agents))[i])),
                     _e(num((weights.get("prior_mean") or [None] * len(agents))[i])),
                     f'<span class="neg">{wtxt}</span>' if neg else wtxt,
                     _e(num((weights.get("n_moves") or [None] * len(agents))[i], 0))])
    return _table(["agent", "reliability r_i", "prior mean μ_i", "weight", "moves"], rows)


def _dataset_section(block: dict, anchor: str, figure: Figure) -> str:
    parts = [f'<section id="{_e(anchor)}"><h2>{_e(block.get("title", block.get("name")))}</h2>']
    facts = (f"{block.get('n_tasks')} tasks ({block.get('n_labeled')} with gold), "
             f"{block.get('n_agents')} agents, K = {block.get('K')} candidates; every arm on the "
             f"same {block.get('folds')} outer folds (out-of-fold predictions; supervised arms "
             "fitted on the labeled tasks of the other folds).")
    parts.append(f'<p class="meta">{_e(facts)}</p>')
    if block.get("source"):
        parts.append(f'<p class="meta">Source: {_e(block["source"])}</p>')
    setup = block.get("setup")
    if isinstance(setup, dict):
        adv = setup.get("adversaries") or {}
        text = (f"simulate_council: {setup.get('n_questions')} questions × "
                f"{setup.get('seeds_per_question')} seeds, seat reliabilities "
                f"{', '.join(num(v, 2) for v in setup.get('reliabilities') or [])}; coalition "
                + ", ".join(f"{a} (complies on {_pct(p, 0)} of tasks)" for a, p in adv.items())
                + ", arguing one shared wrong answer (the question's distractor), with contagion "
                  "of the honest seats.")
        parts.append(f'<p class="meta">Setup: {_e(text)}</p>')
    coal = block.get("coalition")
    if isinstance(coal, dict):
        parts.append("<h3>The coalition</h3>")
        parts.append(_table(["compliance", "genuine-seat flip rate", "effective corrupted share",
                             "nominal share", "attacked tasks"],
                            [[_e(num(coal.get("compliance"))),
                              _e(num(coal.get("genuine_flip_rate"))),
                              _e(num(coal.get("effective_corrupted_fraction"))),
                              _e(num(coal.get("nominal_fraction"))),
                              _e(coal.get("attacked_tasks"))]], left=0))
    parts.append("<h3>Accuracy, calibration and Brier score per arm</h3>")
    table, notes = _metrics_table(block)
    parts.append(table)
    parts.append(_interval_note(block))
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{n}</li>" for n in notes) + "</ul>")
    parts.append("<h3>Reliability diagrams</h3><div class=\"grid\">")
    for a in block["arms"]:
        if a.get("bins"):
            parts.append(f"<figure>{_img(figure("reliability", a), 'reliability diagram of ' + a['arm'])}"
                         f"<figcaption>{_bin_counts(a['bins'])}</figcaption></figure>")
    parts.append("</div><p class=\"meta\">Bars: accuracy per equal-width confidence bin, the "
                 "number above each bar its task count (darker = more tasks); red dots: mean "
                 "confidence in the bin; dashed: perfect calibration.</p>")
    weights = block.get("weights")
    if isinstance(weights, dict) and weights.get("agents"):
        hp = weights.get("hyperparameters") or {}
        parts.append("<h3>Per-agent reliabilities and evidence weights</h3>")
        parts.append(f"<figure>{_img(figure("weights", weights, len(weights['agents']) > 8), 'per-agent weights')}"
                     "<figcaption>BDA per-agent (Eq. 3) fitted on every labeled task; prior "
                     f"hyperparameters {_e(', '.join(f'{k}={v}' for k, v in hp.items()))} from "
                     f"{_e(weights.get('hyperparameters_from', 'the fit'))}. "
                     "Weight = log(μ_i (K−1) / (1 − μ_i)), the log-odds one consistent move adds over "
                     "chance, with prior mean μ_i = b + κ (r_i − r̄) (black dots). An agent whose "
                     "μ_i falls below chance 1/K gets a <b>negative</b> weight: BDA reads its "
                     "endorsements as evidence <i>against</i> the answer (with κ &gt; 0 the prior "
                     "is centred on the pool, so an agent far below the pool's mean reliability "
                     "is inverted).</figcaption></figure>")
        n_neg = sum(1 for v in weights.get("weight") or [] if is_number(v) and v < 0)
        parts.append(f'<p class="meta">{_e(n_neg)} of {_e(len(weights["agents"]))} agents have a '
                     "negative weight.</p>")
        if len(weights["agents"]) <= 12:
            parts.append(_weights_table(weights))
    parts.append("</section>")
    return "".join(parts)


def _dose_section(dose: dict, figure: Figure) -> str:
    parts = ['<section id="dose"><h2>Dose–response under count-level corruption</h2>',
             f'<p class="meta">{_e(dose.get("setup", ""))}. {_e(dose.get("n_tasks"))} traces; '
             "[BDA] Appendix F.3, Table 12 (small grid).</p>",
             f"<figure>{_img(figure("dose", dose), 'dose-response curves')}</figure>"]
    p_grid = list(dose.get("p_grid") or sorted({r["p_wrong"] for r in dose["rows"]}))
    rows = []
    seen = []
    for r in dose["rows"]:
        k = (r["regime"], r["arm"])
        if k not in seen:
            seen.append(k)
    for regime, arm in seen:
        vals = {r["p_wrong"]: r.get("accuracy") for r in dose["rows"]
                if r["regime"] == regime and r["arm"] == arm}
        rows.append([_e(regime), _e(arm)] + [_e(num(vals.get(p))) for p in p_grid])
    parts.append("<h3>Accuracy</h3>")
    parts.append(_table(["regime", "arm"] + [f"p={p:g}" for p in p_grid], rows, left=2))
    parts.append("</section>")
    return "".join(parts)


def _sleeper_section(sl: dict, figure: Figure) -> str:
    parts = ['<section id="sleeper"><h2>Sleeper coalition and the row-drift monitor</h2>',
             f'<p class="meta">{_e(sl.get("setup", ""))}. Reliabilities '
             f'{_e(sl.get("reliabilities"))}, compliance {_e(sl.get("compliance"))}; windows '
             f'{_e(json.dumps(sl.get("n_tasks")))}. [BDA] Appendix F.8, F.13.</p>',
             f"<figure>{_img(figure("sleeper", sl), 'sleeper curves and drift ratio')}</figure>"]
    arms = list(sl.get("arms") or dict.fromkeys(r["arm"] for r in sl["table"]))
    fs = sorted({r["f"] for r in sl["table"]})
    seats = seat_ratios(sl)
    rows = []
    for f in fs:
        rs = {r["arm"]: r for r in sl["table"] if r["f"] == f}
        any_r = next(iter(rs.values()))
        per_seat = seats.get(as_float(f), {})
        top = max(per_seat.items(), key=lambda kv: kv[1][0] if math.isfinite(kv[1][0])
                  else -math.inf, default=None)
        rows.append([_e(f"{f:g}")] + [_e(num(rs[a].get("accuracy"))) if a in rs else "—"
                                      for a in arms]
                    + [_e(num(any_r.get("drift"))), _e(num(any_r.get("floor"))),
                       _e(num(any_r.get("drift_ratio"), 2))]
                    + ([_e(f"{num(top[1][0], 2)} ({top[0]})") if top else "—"] if seats else [])
                    + ["yes" if any_r.get("alarm") else "no"])
    head = (["f"] + [f"{a} acc" for a in arms] + ["mean drift", "mean noise floor", "mean ratio"]
            + (["largest seat ratio (seat)"] if seats else []) + ["alarm (any seat)"])
    parts.append(_table(head, rows))
    parts.append(f'<p class="meta">The alarm fires when any seat\'s drift exceeds '
                 f'{_e(num(sl.get("factor", 2.0), 1))} × its own noise floor, i.e. when the '
                 "largest seat ratio crosses the dashed line in the figure; the mean columns "
                 "average over seats ([BDA] Appendix F.13's single monitoring number) and can "
                 "stay below the line while one seat alarms.</p>")
    parts.append("</section>")
    return "".join(parts)


def _partition_rows(rep: dict) -> list:
    rows = []
    part = rep.get("partition") or {}
    for kind, v in part.items():
        if isinstance(v, dict):
            rows.append([_e(kind), _e(v.get("n")), _e(v.get("correct")), _e(_pct(v.get("accuracy")))])
    return rows


def _gap_text(gap: dict) -> str:
    if not isinstance(gap, dict) or "gap" not in gap:
        return "—"
    return (f"{100 * as_float(gap.get('gap')):+.1f} pp [{100 * as_float(gap.get('low')):+.1f}, "
            f"{100 * as_float(gap.get('high')):+.1f}]")


def _dase_section(dase: dict, figure: Figure) -> str:
    parts = ['<section id="dase"><h2>DASE stopping: replay of the released logs</h2>',
             f'<p class="meta">{_e(dase.get("source", ""))}. [DASE]\'s spatial arena walks x by the '
             "round's evidence score g; the right wall (+W) dispatches the round's plurality, the "
             "left wall (−W) and the fallback flag the problem for review. empty_g = 0.5 "
             "reproduces the logs; 0.0 is the paper's correction for all-empty rounds.</p>"]
    n_traj = int(dase.get("trajectories") or 6)
    for ex in dase["excerpts"]:
        settings = ex.get("settings") or {}
        W = settings.get("W")
        parts.append(f'<h3>{_e(ex.get("title", ex.get("name")))}</h3>')
        parts.append(f'<p class="meta">File <code>{_e(ex.get("file"))}</code>; gold recovered for '
                     f'{_e(ex.get("n_gold"))} problems (an unrecovered one counts as wrong).</p>')
        rows = []
        for rep in ex["replays"]:
            for r in _partition_rows(rep):
                rows.append([_e(f"empty_g = {rep.get('empty_g')}")] + r)
        parts.append(_table(["replay", "commit", "problems", "correct", "accuracy"], rows, left=2))
        gaps = [[_e(f"empty_g = {rep.get('empty_g')}"), _e(_gap_text(rep.get("routing_gap"))),
                 _e(_pct((rep.get("routing_gap") or {}).get("coverage")))]
                for rep in ex["replays"]]
        parts.append(_table(["replay", "routing gap: dispatched − rest [95% CI]",
                             "coverage"], gaps))
        parts.append(f"<figure>{_img(figure("partition", ex), 'stop partition of ' + str(ex.get('name')))}"
                     "<figcaption>Stop partition: where each problem committed, and whether the "
                     "committed answer is right.</figcaption></figure>")
        rep0 = ex["replays"][0] if ex["replays"] else None
        if rep0 and rep0.get("records"):
            picks = pick_trajectories(rep0["records"], n_traj)
            parts.append(f"<figure>{_img(figure("trajectories", picks, W), 'evidence trajectories')}"
                         "<figcaption>Evidence score g per round (left) and arena position x "
                         f"(right) for {len(picks)} problems (replay with empty_g = "
                         f"{_e(rep0.get('empty_g'))}); ✓ correct, ✗ wrong commit.</figcaption>"
                         "</figure>")
            trows = [[_e(r.get("idx")), _e(r.get("commit")), _e(r.get("answer")),
                      _e(r.get("gold")), "✓" if r.get("correct") else "✗", _e(r.get("steps")),
                      _e(" ".join(num(v, 2) for v in r.get("g") or []))] for r in picks]
            parts.append(_table(["problem", "commit", "answer", "gold", "", "rounds",
                                 "g per round"], [r[:-1] + [(r[-1], "l")] for r in trows],
                                left=1))
        resim = ex.get("resimulate")
        if isinstance(resim, dict) and resim.get("rows"):
            rrows = []
            for r in resim["rows"]:
                part = r.get("partition") or {}
                disp = part.get("right_wall") or {}
                overall = part.get("overall") or {}
                rrows.append([_e(f"W = {r.get('W')}"), _e(num(r.get("mean_steps"), 1)),
                              _e(f"{disp.get('n', 0)} ({_pct(disp.get('accuracy'))})"),
                              _e(_pct(overall.get("accuracy"))),
                              _e(_gap_text(r.get("routing_gap")))])
            parts.append("<p>Offline re-simulation with smaller arenas (valid: a smaller W "
                         "follows the same path and stops sooner):</p>")
            parts.append(_table(["arena", "mean rounds", "dispatched n (acc)", "overall",
                                 "routing gap [95% CI]"], rrows))
    parts.append("</section>")
    return "".join(parts)


def _header(results: dict) -> str:
    cfg = results.get("config") or {}
    cache = results.get("cache") or {}
    timings = results.get("timings_s") or {}
    env = results.get("environment") or {}
    mode = "quick" if cfg.get("quick") else "full"
    meta = (f"bda_jax {results.get('bda_jax_version', '?')} · {mode} run · seed "
            f"{cfg.get('seed', '?')} · created {results.get('created', '?')} · "
            f"computed in {timings.get('compute', timings.get('total', '?'))} s")
    cells = (f"cells: {cache.get('computed', '?')} computed, {cache.get('loaded', '?')} loaded "
             f"from the cache {cache.get('file', '')}")
    if cache.get("reset"):
        cells += f" (cache {cache['reset']})"
    envs = ", ".join(f"{k} {v}" for k, v in env.items())
    return (f"<header><h1>bda_jax demo report</h1><p class=\"meta\">{_e(meta)}<br>{_e(cells)}"
            f"<br>{_e(envs)}</p></header>")


def _html(results: dict, figure: Figure) -> str:
    """The page of ``results``; ``figure(kind, *args)`` gives each figure's data URI."""
    sections, toc = [], []
    for name, block in (results.get("datasets") or {}).items():
        anchor = f"ds-{name}"
        toc.append((anchor, block.get("title", name)))
        sections.append(_dataset_section(block, anchor, figure))
    if results.get("dose_response"):
        toc.append(("dose", "Dose–response"))
        sections.append(_dose_section(results["dose_response"], figure))
    if results.get("sleeper"):
        toc.append(("sleeper", "Sleeper coalition and drift monitor"))
        sections.append(_sleeper_section(results["sleeper"], figure))
    if results.get("dase"):
        toc.append(("dase", "DASE stopping replay"))
        sections.append(_dase_section(results["dase"], figure))
    nav = "<nav><ul>" + "".join(f'<li><a href="#{_e(a)}">{_e(t)}</a></li>' for a, t in toc) \
          + "</ul></nav>"
    intro = ("<p>Calibrated probabilities from multi-agent deliberation records (Bayesian "
             "Dialectical Argumentation), on data shipped with the package: a real crowd set, a "
             "simulated council under attack, and excerpts of the DASE ensemble logs. "
             "Regenerate with <code>bda demo</code>; re-render from the JSON with "
             "<code>bda report results.json --out DIR</code>.</p>")
    footer = ("<footer><p class=\"meta\">Data: Bluebirds (CUBAM, BSD licence), DASE council log "
              "excerpts (Apache-2.0); see the package NOTICE. All numbers are in "
              "<code>results.json</code> beside this file (schema_version "
              f"{_e(results.get('schema_version'))}).</p></footer>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>bda_jax demo report</title>"
            f"<style>{_CSS}</style></head><body><main>{_header(results)}{intro}{nav}"
            f"{''.join(sections)}{footer}</main></body></html>\n")


def queue_figures(results: dict, figures: FigureRenderer) -> None:
    """Hand every figure of ``results`` -- a whole results dict, or part of one (say
    ``{"dose_response": ...}``, in its strict-JSON form) -- to ``figures``' workers, so that a
    later :func:`render_report` with the same ``figures`` finds them drawn."""
    def submit(kind, *args) -> str:
        figures.submit(kind, *args)
        return ""

    _html(results, submit)


def render_report(results: dict, out_dir, *, figures: FigureRenderer | None = None) -> Path:
    """Write ``out_dir/index.html`` (atomically) from demo results; return its path.

    ``results``: the dict :func:`~bda_jax.report.run_demo` returns (or
    :func:`load_results` reads). It is validated first (:class:`~bda_jax.ArtifactError`).
    ``figures``: a :class:`~bda_jax.report.FigureRenderer` that may already hold the figures
    (:func:`queue_figures`); without one, the figures are drawn by this process and
    :func:`~bda_jax.report.auto_figure_workers` background processes together. The page is the
    same bytes either way.
    """
    validate_results(results)
    if figures is None:
        with FigureRenderer() as own:
            queue_figures(results, own)
            page = _html(results, own)
    else:
        page = _html(results, figures)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    atomic_write(path, lambda h: h.write(page), suffix=".html")
    return path
