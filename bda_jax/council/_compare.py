"""The compute-matched comparison of [DASE] §4-5 (Figure 3, Table 2), live: SC-k, IM-SC,
Debate-Dense, Debate-Sparse and DASE on one question set, accuracy against inferences.

Every baseline is one run of the live ensemble (:func:`~bda_jax.council.run_ensemble`), read at
every budget by slicing its rounds — exact, because a round depends only on the rounds before
it:

* SC-k: ``max_rounds × n`` independent samples of the first seat in one round, the plurality of
  the first k (k = n, 2n, ...; Wang et al. 2023);
* IM-SC at R rounds: the n seats sampled independently R times, the plurality of all n R
  answers;
* Debate-Dense / Debate-Sparse at R rounds: the fixed-round ensemble with dense / sparse
  injection, the plurality of round R (Du et al. 2024; the sparse prompt is DASE's own, so
  Debate-Sparse differs from DASE only in the stopping);
* DASE: the spatial arena for each W in ``W`` (sparse injection, ``L`` rounds at most), one point
  per W at its mean inferences, with its commit partition and routing gap.

McNemar (exact) compares DASE at each W with every baseline at the budget nearest DASE's mean
inferences (``<baseline>@<inferences>``), Benjamini-Hochberg over all those pairs at once. One reply cache serves every run (DASE's calls are
Debate-Sparse's until it stops, so they are not paid twice); a killed comparison resumes.
Writes into the directory ``out``: one history per run, ``compare.json``, ``compare.md`` and
``compare.png``.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import jax
import numpy as np

from .._core.errors import DataError
from .._core.io import atomic_write
from .._core.normalize import default_normalizer
from .._core.version import __version__
from ..stopping import commit_partition, pairwise_mcnemar, replay_history, routing_gap
from ._config import CouncilConfig
from ._ensemble import EnsembleSettings, run_ensemble
from ._questions import Question

__all__ = ["COMPARE_KIND", "ComparisonResult", "run_comparison", "run_comparison_files",
           "comparison_table", "plot_comparison"]

COMPARE_KIND = "bda_jax.compute_matched_comparison"
BASELINES = ("sc", "imsc", "debate-dense", "debate-sparse")


def _plurality(answers) -> str | None:
    said = [a for a in answers if a is not None]
    return Counter(said).most_common(1)[0][0] if said else None


def _rounds(path) -> list[list[list[str | None]]]:
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    return [[[None if a == "empty" else a for a in h["norms"]] for h in r["history"]]
            for r in recs], recs


def _number(v):
    """A float (``None`` for NaN) or an int of a scalar result."""
    x = np.asarray(v).item()
    return None if isinstance(x, float) and x != x else x


def _tokens_upto(rec, R: int) -> int:
    return sum(h["tokens"] for h in rec["history"][:R])


@dataclass
class ComparisonResult:
    """``rows`` (method, budget, inferences (mean per problem), accuracy, tokens (mean per
    problem)), ``dase`` (per W: its row, commit partition and routing gap), ``mcnemar`` (DASE
    against each baseline at the matched budget, BH-adjusted), ``runs`` (each run's history file
    and ledger) and ``files``."""

    rows: list[dict]
    dase: dict
    mcnemar: list[dict]
    runs: dict
    files: dict

    def to_json(self) -> dict:
        return {"rows": self.rows, "dase": self.dase, "mcnemar": self.mcnemar,
                "runs": self.runs, "files": self.files}


def run_comparison(questions: Sequence[Question], config: CouncilConfig, out, *,
                   max_rounds: int = 6, W: Sequence[int] = (4,), L: int = 15,
                   dense_chars: int = 600, empty_g: float = 0.0, n_boot: int = 1000,
                   seed: int = 0, cache_path=None, cache_mode: str = "record",
                   progress: Callable[[str], None] | None = None,
                   question_file: str | None = None, config_file: str | None = None
                   ) -> ComparisonResult:
    """Run the comparison (module docstring) and write its files into the directory ``out``.
    ``max_rounds``: the largest baseline budget, in rounds of n inferences; ``W``: the DASE arena
    sizes; ``n_boot``, ``seed``: the routing gap's bootstrap. Every question needs a gold."""
    if not questions:
        raise DataError("the question set is empty", field="questions")
    for q in questions:
        if q.gold is None:
            raise DataError("the comparison scores every method: each question needs a gold",
                            task_id=q.task_id, field="gold")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise DataError(f"max_rounds must be an integer >= 1, got {max_rounds!r}",
                        field="max_rounds")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out} exists and is not a directory", file=str(out), field="out")
    for given, what in ((question_file, "questions"), (config_file, "config")):
        if given and Path(given).resolve().parent == out.resolve():
            raise DataError(f"the {what} file {given} lies in the comparison directory {out}: "
                            "keep inputs outside it", file=str(given), field="out")
    out.mkdir(parents=True, exist_ok=True)
    cache_path = os.fspath(out / "cache.sqlite") if cache_path is None and cache_mode != "off" \
        else cache_path
    n = len(config.seats)
    plans = {
        "sc": (EnsembleSettings(rule="none", bandwidth="none", rounds=1, temperatures=None),
               n * max_rounds),
        "imsc": (EnsembleSettings(rule="none", bandwidth="none", rounds=max_rounds,
                                  L=max(L, max_rounds), temperatures=None), None),
        "debate-dense": (EnsembleSettings(rule="fixed", bandwidth="dense", rounds=max_rounds,
                                          L=max(L, max_rounds), dense_chars=dense_chars), None),
        "debate-sparse": (EnsembleSettings(rule="fixed", bandwidth="sparse", rounds=max_rounds,
                                           L=max(L, max_rounds)), None),
        **{f"dase-W{w}": (EnsembleSettings(rule="spatial", W=int(w), L=L, empty_g=empty_g), None)
           for w in W},
    }
    kw = dict(cache_path=cache_path, cache_mode=cache_mode, question_file=question_file,
              config_file=config_file)
    runs, hist = {}, {}
    for name, (settings, workers) in plans.items():
        if progress is not None:
            progress(name)
        path = out / f"{name}.jsonl"
        summary = run_ensemble(questions, config, path, settings=settings, workers=workers, **kw)
        runs[name] = {"history": os.fspath(path), "ledger": summary.ledger,
                      "inferences": summary.inferences}
        hist[name] = _rounds(path)
    gold = [q.gold for q in questions]

    def ok(answers):
        return np.array([a is not None and default_normalizer(a) == default_normalizer(g)
                         for a, g in zip(answers, gold)])

    rows, outcomes = [], {}
    for R in range(1, max_rounds + 1):
        problems, recs = hist["sc"]
        k = n * R
        answers = [_plurality(p[0][:k]) for p in problems]
        outcomes["sc", R] = ok(answers)
        rows.append({"method": "sc", "budget": f"k={k}", "rounds": R, "inferences": float(k),
                     "accuracy": float(outcomes["sc", R].mean()),
                     "tokens": float(np.mean([sum(r["history"][0]["worker_tokens"][:k])
                                              for r in recs]))})
        for name, pick in (("imsc", lambda p: _plurality(a for rnd in p[:R] for a in rnd)),
                           ("debate-dense", lambda p: _plurality(p[R - 1])),
                           ("debate-sparse", lambda p: _plurality(p[R - 1]))):
            problems, recs = hist[name]
            outcomes[name, R] = ok([pick(p) for p in problems])
            rows.append({"method": name, "budget": f"R={R}", "rounds": R,
                         "inferences": float(n * R),
                         "accuracy": float(outcomes[name, R].mean()),
                         "tokens": float(np.mean([_tokens_upto(r, R) for r in recs]))})
    dase, tests, pairs = {}, {}, []
    idx_gold = {i: g for i, g in enumerate(gold)}
    for w in W:
        name = f"dase-W{w}"
        problems, recs = hist[name]
        answers = [None if r["cert"]["consensus"] == "empty" else r["cert"]["consensus"]
                   for r in recs]
        correct = ok(answers)
        inf = float(np.mean([r["cert"]["inferences"] for r in recs]))
        row = {"method": name, "budget": "adaptive", "rounds": inf / n, "inferences": inf,
               "accuracy": float(correct.mean()),
               "tokens": float(np.mean([r["cert"]["tokens"] for r in recs]))}
        rows.append(row)
        replay = replay_history(out / f"{name}.jsonl", rule="spatial", W=int(w), L=L,
                                empty_g=empty_g)
        partition = {k: {"n": int(v[0]), "correct": int(v[1]), "accuracy": _number(v[2])}
                     for k, v in commit_partition(replay, idx_gold).items()}
        gap = routing_gap(jax.random.key(seed), replay, idx_gold, n_boot=n_boot)
        dase[name] = {"row": row, "partition": partition,
                      "routing_gap": {k: _number(v) for k, v in gap.items()}}
        R_star = int(min(max_rounds, max(1, round(inf / n))))
        tests[name] = correct
        for b in BASELINES:
            label = f"{b}@{n * R_star}"
            tests[label] = outcomes[b, R_star]
            pairs.append((name, label))
    mcnemar = pairwise_mcnemar(tests, pairs)         # one BH family: every DASE-baseline pair
    result = ComparisonResult(rows, dase, mcnemar, runs, {
        "json": os.fspath(out / "compare.json"), "table": os.fspath(out / "compare.md"),
        "figure": os.fspath(out / "compare.png")})
    doc = {"schema_version": 1, "kind": COMPARE_KIND, "package_version": __version__,
           "config_fingerprint": config.fingerprint(), "questions_file": question_file,
           "config_file": config_file, "n_questions": len(questions), "workers": n,
           "max_rounds": max_rounds, "W": list(W), "L": L, "empty_g": empty_g,
           **result.to_json()}
    atomic_write(out / "compare.json",
                 lambda fh: fh.write(json.dumps(doc, indent=1, allow_nan=False) + "\n"))
    atomic_write(out / "compare.md", lambda fh: fh.write(comparison_table(result)))
    plot_comparison(rows, out / "compare.png")
    return result


def comparison_table(result: ComparisonResult) -> str:
    """The comparison as Markdown: accuracy by method and budget, DASE's partition and gap,
    the matched-budget McNemar tests."""
    lines = ["| method | budget | inferences / problem | accuracy | tokens / problem |",
             "|---|---|---|---|---|"]
    for r in result.rows:
        lines.append(f"| {r['method']} | {r['budget']} | {r['inferences']:.1f} | "
                     f"{r['accuracy']:.3f} | {r['tokens']:.0f} |")
    for name, d in result.dase.items():
        lines += ["", f"{name} commit partition:", "", "| commit | n | accuracy |", "|---|---|---|"]
        for kind, p in d["partition"].items():
            acc = "—" if p["accuracy"] is None else f"{p['accuracy']:.3f}"
            lines.append(f"| {kind} | {p['n']} | {acc} |")
        g = d["routing_gap"]
        lines.append("")
        lines.append("routing gap (dispatched − rest): " + (
            "undefined" if g["gap"] is None else
            f"{g['gap']:+.3f} [{g['low']:+.3f}, {g['high']:+.3f}]" if g["low"] is not None
            else f"{g['gap']:+.3f}"))
    if result.mcnemar:
        lines += ["", "| DASE | baseline (matched budget) | Δ accuracy | DASE only | baseline "
                      "only | p | p (BH) |", "|---|---|---|---|---|---|---|"]
        for m in result.mcnemar:
            lines.append(f"| {m['a']} | {m['b']} | {m['diff']:+.3f} | {m['a_only']} | "
                         f"{m['b_only']} | {m['p']:.3g} | {m['p_bh']:.3g} |")
    return "\n".join(lines) + "\n"


def plot_comparison(rows: Sequence[dict], path) -> str:
    """Accuracy against inferences per problem ([DASE] Figure 3 style): one line per baseline,
    one marker per DASE arena. Written atomically (PNG). Returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 3.8), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for method in BASELINES:
        pts = [(r["inferences"], r["accuracy"]) for r in rows if r["method"] == method]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", ms=3, label=method)
    for r in rows:
        if r["method"].startswith("dase"):
            ax.scatter([r["inferences"]], [r["accuracy"]], marker="*", s=120, zorder=5,
                       label=r["method"])
    ax.set_xlabel("inferences per problem")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.02)
    ax.set_title("Compute-matched comparison", fontsize=9)
    for text in ax.legend(fontsize=7).get_texts():
        text.set_parse_math(False)             # method names are user strings: never mathtext
    fig.tight_layout()
    path = os.fspath(path)
    atomic_write(path, lambda fh: fig.savefig(fh, format="png"), binary=True)
    return path


def run_comparison_files(questions, config, out, *, local: bool = False,
                         **kwargs) -> ComparisonResult:
    """``bda council compare``: read the inputs, start the local model when ``local``, and
    :func:`run_comparison`."""
    from ._config import read_config
    from ._questions import read_questions
    from ._runner import on_model
    qs = read_questions(questions)
    cfg = read_config(config)
    kwargs.update(question_file=os.fspath(questions), config_file=os.fspath(config))
    return on_model(cfg, local, lambda c: run_comparison(qs, c, out, **kwargs))
