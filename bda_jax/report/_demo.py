"""``bda demo``: the whole package on embedded data, written up as one self-contained HTML report.

:func:`run_demo` runs, on data shipped with bda_jax (nothing is downloaded):

* **Bluebirds** (a real crowd set, Welinder et al. 2010, bundled under CUBAM's BSD licence):
  every arm of :data:`bda_jax.ARMS` on identical outer folds, with bootstrap CIs, reliability
  diagrams and per-worker reliabilities / evidence weights;
* a **simulated council with a persistent adversarial coalition** (two of five seats argue one
  wrong answer on 90 % of the tasks; :func:`bda_jax.simulate.simulate_council`): the same, plus
  the coalition's compliance and contagion (:func:`bda_jax.adversarial.coalition_report`);
* a small **dose-response** grid (count-level corruption of a clean council; [BDA] Table 12) and
  a small **sleeper** curve with the row-drift monitor ([BDA] Appendix F.8, F.13): the studies
  of :func:`bda_jax.adversarial.run_study` at the demo's sizes;
* a **DASE replay** of the bundled excerpts of the released DASE logs (spatial arena; evidence
  trajectories, commit partition, routing gap; :mod:`bda_jax.stopping`).

Each unit of work is a *cell* keyed by ``dataset|condition|seed|row|arm`` and appended, once
finished, to the resumable :class:`~bda_jax.report.CellCache` ``demo-cache.jsonl`` in the
output directory: a demo killed at any point (SIGKILL included) resumes without recomputing the
finished cells. The results go to ``results.json`` (``schema_version`` 1) and
:func:`~bda_jax.report.render_report` turns them into ``index.html``.

Integrity of an output folder:

* one demo at a time writes it: the run holds the cache's lock (``demo-cache.jsonl.lock``) from
  before it reads anything until ``results.json`` is written; a second demo on the same folder
  is refused at once with a one-line :class:`~bda_jax.DataError` naming the folder, and changes
  nothing there. The lock dies with its process (``kill -9`` leaves none behind).
* the cache's fingerprint covers the whole configuration (:func:`demo_config`: quick or full,
  seed, sizes, arms), the arms' hyperparameter grids, the bda_jax version and the data (the
  tallied Bluebirds and council counts, the bytes of the DASE excerpts): a cache of other
  settings or data, or one whose cells fail their checksums (edited, duplicated, copied in), is
  started afresh and every cell recomputed (``run.cache.reset`` says why); it is never reused.
* ``results.json`` is a pure function of the inputs: everything that varies between two runs of
  the same inputs and seed (creation time, environment, timings, how many cells came from the
  cache) lives in its last section, ``run``; the rest is byte-identical between such runs.
"""
from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .._core.errors import DataError
from .._core.version import __version__
from .._core.fitting import labeled_count
from ._evaluation import confidence_flags
from ._html import RESULTS_KIND, SCHEMA_VERSION
from ._json import strict_json

__all__ = ["run_demo", "demo_config", "SCHEMA_VERSION", "RESULTS_KIND", "CACHE_NAME"]

CACHE_NAME = "demo-cache.jsonl"
_CACHE_VERSION = 3          # bump when a cell's value changes meaning: old caches are reset

_BLUEBIRDS_ARMS_QUICK = ("majority", "bda-confusion")
_COUNCIL_ARMS_QUICK = ("majority", "bda-per-agent", "bda-confusion")
_DOSE_ARMS = ("majority", "bda-per-agent", "bda-confusion")
_DASE_EXCERPT_INFO = {
    "gpqa_w4_head50": {"benchmark": "gpqa", "title": "GPQA, spatial arena W = 4 (problems 1-50)"},
    "aime_w8_head20": {"benchmark": "aime", "title": "AIME, spatial arena W = 8 (problems 1-20)"},
}


def demo_config(seed: int = 0, quick: bool = False) -> dict:
    """The demo's settings (plain JSON): what is run, at which size.

    ``quick`` is the test size: it skips the sleeper study and the arms whose compilation
    dominates a cold start, and sizes the council (54 questions x 2 seeds = 108 traces) like
    Bluebirds (108 tasks) so the two share the compiled metric kernels.
    """
    from ..aggregators import ARMS

    council = {"n_questions": 54 if quick else 150, "seeds_per_question": 2,
               "reliabilities": [0.74, 0.70, 0.68, 0.68, 0.66],
               "adversaries": {"0": 0.9, "1": 0.9}, "adversary_target": "distractor"}
    return {
        "seed": int(seed),
        "quick": bool(quick),
        "folds": 5,
        "n_resamples": 200 if quick else 2000,
        "arms": {"bluebirds": list(_BLUEBIRDS_ARMS_QUICK if quick else ARMS),
                 "council": list(_COUNCIL_ARMS_QUICK if quick else ARMS)},
        "reference": "majority",
        "bluebirds": {"name": "bluebirds"},
        "council": council,
        "dose": {"arms": list(_DOSE_ARMS),
                 "p_grid": [0.0, 0.5, 1.0] if quick else [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
                 "regimes": ([["persistent", 2]] if quick else
                             [["persistent", 1], ["persistent", 2], ["rotating", 2]]),
                 "n_resamples": 100},
        "sleeper": None if quick else {
            "arms": list(_DOSE_ARMS), "f_grid": [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0],
            "n_questions": 450, "seeds_per_question": 2, "compliance": 0.6, "n_splits": 20},
        "dase": {"excerpts": ["gpqa_w4_head50"] if quick else ["gpqa_w4_head50", "aime_w8_head20"],
                 "empty_g": [0.5] if quick else [0.5, 0.0],
                 "resimulate": {} if quick else {"aime_w8_head20": [2, 4, 8]},
                 "n_boot": 500 if quick else 2000,
                 "trajectories": 6},
    }


# --------------------------------------------------------------------------- formatting

def _round(values, digits: int = 4):
    return [None if v is None or not math.isfinite(float(v)) else round(float(v), digits)
            for v in np.asarray(values, np.float64).ravel()]


# --------------------------------------------------------------------------- cells

class _Cells:
    """Cells of the demo in one :class:`CellCache`, counting loaded against computed."""

    def __init__(self, cache, progress, task):
        self.cache, self.progress, self.task = cache, progress, task
        self.loaded = self.computed = 0

    def __call__(self, key: str, compute: Callable[[], Any]):
        if key in self.cache:
            self.loaded += 1
            value = self.cache[key]
        else:
            if self.progress is not None:
                self.progress.update(self.task, description=_short(key))
            value = strict_json(compute())
            self.cache.put(key, value)          # appended and fsynced: resumable from here
            self.computed += 1
            value = self.cache[key]
        if self.progress is not None:
            self.progress.advance(self.task)
        return value

    def store(self, dataset: str, condition: str, seed: int) -> "_Store":
        """A cell store (``get_or_compute``) over these cells for a library study, its keys
        as the row of ``dataset|condition|seed=S|<key>|*``."""
        return _Store(self, lambda key: _key(dataset, condition, seed, key, "*"))


class _Store:
    def __init__(self, cells: _Cells, key: Callable[[str], str]):
        self.cells, self.key = cells, key

    def get_or_compute(self, key: str, compute: Callable[[], Any]):
        return self.cells(self.key(key), compute)


def _short(key: str, width: int = 46) -> str:
    return key if len(key) <= width else key[: width - 1] + "…"


def _key(dataset: str, condition: str, seed: int, row: str, arm: str) -> str:
    return "|".join((dataset, condition, f"seed={seed}", row, arm))


def _n_cells(cfg: dict) -> int:
    main = sum(len(a) + 1 for a in cfg["arms"].values()) + 1   # arms + weights, + coalition
    dose = 1 + sum(1 for _, k in cfg["dose"]["regimes"]       # the shared clean cell + the
                   for p in cfg["dose"]["p_grid"] if p != 0 and k != 0)   # corrupted ones
    sleeper = 1 if cfg.get("sleeper") else 0
    dase = len(cfg["dase"]["excerpts"]) * len(cfg["dase"]["empty_g"])
    dase += len(cfg["dase"]["resimulate"])
    return main + dose + sleeper + dase


def _open_cache(out: Path, cfg: dict, inputs: dict, resume: bool):
    """The demo's :class:`CellCache` in ``out``, locked; ``inputs`` is filled (under the lock)
    with the data of :func:`_inputs`, whose fingerprint is part of the cache's."""
    from .._core.cache import CellCache

    def fp():
        inputs.update(_inputs(cfg))
        return _fingerprint(cfg, inputs)

    try:
        # the demo owns this file: a cache of other settings or data, or a damaged or edited
        # one, is started afresh (under the lock, never deleted under another writer)
        cache = CellCache(out / CACHE_NAME, fp, fresh=not resume, on_mismatch="reset")
    except DataError as err:
        if err.field != "lock":
            raise
        pid = getattr(err, "holder", None)
        who = "another bda demo" if pid is None else f"another bda demo (process {pid})"
        raise DataError(f"{who} is writing this folder (it holds {CACHE_NAME}.lock); wait for "
                        "it to finish or pass another --out", file=out, field="out") from None
    reset = {"fresh": "resume=False"}.get(cache.reset, cache.reset)
    return cache, reset


def _inputs(cfg: dict) -> dict:
    """The demo's data, loaded once: Bluebirds (labels and counts), the simulated council
    (traces and counts) and the SHA-256 of each DASE excerpt file."""
    import hashlib

    from .._core.counts import tally
    from ..datasets import DASE_EXCERPTS, load_crowd, to_traces
    from ..simulate import simulate_council

    data = load_crowd(cfg["bluebirds"]["name"])
    c = cfg["council"]
    traces = simulate_council(cfg["seed"], c["n_questions"], c["reliabilities"],
                              seeds_per_question=c["seeds_per_question"],
                              adversaries={int(k): float(v) for k, v in c["adversaries"].items()},
                              adversary_target=c["adversary_target"])
    dase = {name: hashlib.sha256(Path(DASE_EXCERPTS[name]).read_bytes()).hexdigest()
            for name in cfg["dase"]["excerpts"]}
    return {"bluebirds": (data, tally(to_traces(data))), "council": (traces, tally(traces)),
            "dase": dase}


def _fingerprint(cfg: dict, inputs: dict) -> str:
    """The demo cache's fingerprint: the configuration, the arms' hyperparameter grids, the
    bda_jax version and the data (counts fingerprints, excerpt hashes)."""
    from .._core.cache import fingerprint
    from .._core.selection import GRID_COLUMNS, GRIDS
    from ..aggregators import fingerprint_counts

    arms = set(cfg["arms"]["bluebirds"]) | set(cfg["arms"]["council"]) | set(cfg["dose"]["arms"])
    arms |= set((cfg.get("sleeper") or {}).get("arms", ()))
    grids = {a: [list(GRID_COLUMNS[a]), GRIDS[a]] for a in sorted(arms) if a in GRIDS}
    data = {"bluebirds": fingerprint_counts(inputs["bluebirds"][1]),
            "council": fingerprint_counts(inputs["council"][1]), "dase": inputs["dase"]}
    return fingerprint("bda_jax.demo", _CACHE_VERSION, __version__, cfg, grids, data)


# --------------------------------------------------------------------------- one dataset

#: the bootstrap interval of each metric in an arm's ``ci`` (see paired_bootstrap's ``interval``)
_CI_METHOD = {"accuracy": "percentile", "brier_mc": "percentile",
              "ece_ew": "centred percentile (clipped to [0, 1])"}


def _ece_ew_stat(data, w):
    from ..metrics import ece
    return ece(data[0], data[1], weights=w)


def _arm_cell(counts, arm: str, folds, cfg: dict) -> dict:
    """Evaluate one arm out of fold: metric row, CIs, paired deltas, reliability bins."""
    import jax

    from ..aggregators import evaluate
    from ..metrics import (brier_mc, correctness, paired_bootstrap, paired_bootstrap_stat,
                           reliability_bins)

    seed, n_res, ref = cfg["seed"], cfg["n_resamples"], cfg["reference"]
    ev = evaluate(counts, [arm], folds=folds, seed=seed, reference=ref, n_resamples=n_res)
    row = next(r for r in ev.table if r["arm"] == arm)
    proba = ev.proba[arm]
    gold, gm, mask = (np.asarray(counts.gold), np.asarray(counts.gold_missing),
                      np.asarray(counts.mask))
    key = jax.random.key(seed)
    s = correctness(proba, gold, gm, mask, key=key)
    lab = np.asarray(s.labeled)
    conf = np.asarray(s.confidence, np.float64)[lab]
    corr = np.asarray(s.correct, np.float64)[lab]
    bm = np.asarray(brier_mc(proba, gold, gm, mask, reduce=False), np.float64)[lab]
    clusters = np.asarray(counts.cluster)[lab]
    zeros = np.zeros_like(corr)
    acc = paired_bootstrap(key, corr, zeros, n_res, clusters)
    bri = paired_bootstrap(key, bm, zeros, n_res, clusters, higher_is_better=False)
    # ECE is biased upwards (|.| per bin): its percentile interval can lie wholly above the
    # estimate (a well-calibrated or constant-confidence arm), so it gets the centred interval,
    # which always holds it; accuracy and Brier are means, whose percentile interval is kept
    ece = paired_bootstrap_stat(key, _ece_ew_stat, (conf, corr), (corr, corr), n_res, clusters,
                                higher_is_better=False, interval="centred")
    bins = reliability_bins(conf, corr)
    return {
        "row": row,
        "ci": {"accuracy": [acc.ci_low, acc.ci_high], "brier_mc": [bri.ci_low, bri.ci_high],
               "ece_ew": [max(0.0, ece.ci_low), min(1.0, ece.ci_high)], "n_resamples": n_res,
               "n_units": acc.n_units, "method": dict(_CI_METHOD)},
        "calibration": confidence_flags(conf),
        "vs_reference": ev.bootstrap.get(arm),
        "selected": ev.selected.get(arm),
        "bins": {"count": _round(bins.count, 3), "confidence": _round(bins.confidence),
                 "accuracy": _round(bins.accuracy)},
    }


def _weights_cell(counts, selected, adversaries=()) -> dict:
    """Per-agent reliabilities and one-coin evidence weights under the modal selected prior."""
    from .._core.fitting import prior_from_reliability, reliability

    rows = [tuple(sorted(s.items())) for s in (selected or []) if s]
    modal = dict(max(rows, key=rows.count)) if rows else {}    # first of ties: deterministic
    b, kappa, s_ = modal.get("b", 0.6), modal.get("kappa", 1.0), modal.get("s", 8.0)
    r = np.asarray(reliability(counts), np.float64)
    prior = prior_from_reliability(r, b, kappa, s_)
    alpha, beta = np.asarray(prior.alpha, np.float64), np.asarray(prior.beta, np.float64)
    mu = alpha / (alpha + beta)
    K = int(np.asarray(counts.mask).sum(1).max())
    weight = np.log(mu * (K - 1) / (1.0 - mu))       # log-odds per consistent move vs chance
    n_moves = np.asarray(counts.N, np.float64).sum(0)
    return {"agents": list(counts.agents), "reliability": _round(r), "prior_mean": _round(mu),
            "weight": _round(weight), "n_moves": _round(n_moves, 0), "K": K,
            "hyperparameters": {"b": b, "kappa": kappa, "s": s_},
            "hyperparameters_from": ("bda-per-agent's nested CV (the row selected most often "
                                     "across outer folds)" if modal else
                                     "defaults (bda-per-agent was not run)"),
            "adversaries": list(adversaries), "chance": 1.0 / K}


def _dataset_block(name: str, title: str, counts, cells: _Cells, cfg: dict, *,
                   adversaries=(), extra: dict | None = None) -> dict:
    from .._core.selection import make_folds

    seed = cfg["seed"]
    folds = make_folds(counts, cfg["folds"], seed)
    arms = []
    for arm in cfg["arms"][name]:
        arms.append({"arm": arm, **cells(_key(name, "main", seed, "-", arm),
                                          lambda arm=arm: _arm_cell(counts, arm, folds, cfg))})
    per_agent = next((a for a in arms if a["arm"] == "bda-per-agent"), None)
    weights = cells(_key(name, "main", seed, "weights", "bda-per-agent"),
                    lambda: _weights_cell(counts, per_agent["selected"] if per_agent else None,
                                          adversaries))
    T, I, K = (int(d) for d in np.asarray(counts.e).shape)
    labeled = labeled_count(counts)
    stated = int(np.isfinite(np.asarray(counts.conf0)).sum())
    for a in arms:
        if a["arm"] == "verbalized" and stated == 0:
            a["not_ranked"] = ("the data states no confidences, so the verbalized vote has no "
                               "input: every task gets the uniform distribution and a random "
                               "answer")
    block = {"name": name, "title": title, "n_tasks": T, "n_agents": I, "K": K,
             "n_labeled": labeled, "stated_confidences": stated,
             "reference": cfg["reference"], "folds": cfg["folds"],
             "arms": arms, "weights": weights}
    block.update(extra or {})
    return block


def _bluebirds(cells: _Cells, cfg: dict, inputs: dict) -> dict:
    data, counts = inputs["bluebirds"]
    return _dataset_block(
        "bluebirds", "Bluebirds (real crowd labels)", counts, cells, cfg,
        extra={"source": "Welinder, Branson, Belongie & Perona (2010), 'The multidimensional "
                         "wisdom of crowds' (CUBAM); bundled under its BSD licence",
               "n_labels": int(len(data.labels))})


def _council(cells: _Cells, cfg: dict, inputs: dict) -> dict:
    from ..adversarial import coalition_report

    c = cfg["council"]
    traces, counts = inputs["council"]
    seats = [counts.agents[int(k)] for k in cfg["council"]["adversaries"]]
    coalition = cells(_key("council", "main", cfg["seed"], "coalition", "-"),
                      lambda: coalition_report(traces, seats))
    title = "Simulated council with a persistent adversarial coalition"
    return _dataset_block("council", title, counts, cells, cfg, adversaries=seats,
                          extra={"coalition": coalition,
                                 "setup": {"reliabilities": c["reliabilities"],
                                           "adversaries": {counts.agents[int(k)]: v for k, v in
                                                           c["adversaries"].items()},
                                           "n_questions": c["n_questions"],
                                           "seeds_per_question": c["seeds_per_question"]}})


# --------------------------------------------------------------------------- attacks

def _dose(cells: _Cells, cfg: dict, inputs: dict) -> dict:
    """[BDA] Table 12 in small: the dose-response study on the clean council."""
    from ..adversarial import run_study

    d, c, seed = cfg["dose"], cfg["council"], cfg["seed"]
    run = run_study("dose-response", seed=seed, cache=cells.store("council-clean", "dose", seed),
                    n_questions=c["n_questions"], seeds_per_question=c["seeds_per_question"],
                    reliabilities=c["reliabilities"], arms=d["arms"], p_grid=d["p_grid"],
                    regimes=d["regimes"], folds=cfg["folds"], n_resamples=d["n_resamples"])
    keep = ("regime", "mode", "k", "p_wrong", "arm", "accuracy", "ece_ew", "brier_mc", "n",
            "redirect_rate")
    return {"arms": d["arms"], "p_grid": d["p_grid"],
            "regimes": [f"{m} k={k}" for m, k in d["regimes"]],
            "rows": [{k: r[k] for k in keep} for r in run.result["result"]["rows"]],
            "n_tasks": c["n_questions"] * c["seeds_per_question"],
            "setup": "count-level corruption (corrupt_traces) of the clean council: each "
                     "informative move of a corrupted seat is redirected to a wrong answer "
                     "with probability p_wrong; persistent = the same seats on every task, "
                     "rotating = seats drawn per task"}


def _sleeper(cells: _Cells, cfg: dict, inputs: dict) -> dict | None:
    from ..adversarial import run_study

    s, seed = cfg.get("sleeper"), cfg["seed"]
    if not s:
        return None
    rel = cfg["council"]["reliabilities"][:3]
    run = run_study("sleeper", seed=seed, cache=cells.store("council-sleeper", "sleeper", seed),
                    n_seeds=1, f_grid=s["f_grid"], n_questions=s["n_questions"],
                    seeds_per_question=s["seeds_per_question"], reliabilities=rel,
                    arms=s["arms"], compliance=s["compliance"], n_splits=s["n_splits"],
                    compliance_sensitivity=[])
    study = run.result["per_seed"][str(seed)]
    keep = ("f", "arm", "accuracy", "ece_ew", "brier_mc", "drift", "floor", "drift_ratio",
            "alarm")
    seats = [{"f": m["f"], "agents": list(m["agents"]),
              "ratio": _round(m["ratio"]), "alarm": [bool(a) for a in m["alarm"]]}
             for m in study["monitor"]]
    return {"arms": s["arms"], "f_grid": s["f_grid"],
            "table": [{k: r[k] for k in keep} for r in study["table"]],
            "monitor": seats,
            "n_tasks": study["config"]["n_tasks"],
            "reliabilities": rel, "compliance": s["compliance"], "factor": 2.0,
            "setup": "a persistent two-seat coalition (A1, A2) that turns adversarial; a "
                     "fraction f of the calibration window is already attacked; supervised "
                     "arms are fitted on the calibration window and deployed on attacked "
                     "traces; the row-drift monitor compares calibration rows with a clean "
                     "reference window"}


# --------------------------------------------------------------------------- DASE

def _dase_records(records, gold, benchmark) -> list[dict]:
    from ..datasets import normalize_dase_answer

    out = []
    for r in records:
        g = gold.get(r.idx)
        ans = None if r.answer is None else normalize_dase_answer(r.answer, benchmark)
        ok = g is not None and ans is not None and ans == normalize_dase_answer(str(g), benchmark)
        out.append({"idx": int(r.idx), "commit": r.commit, "answer": r.answer,
                    "gold": None if g is None else str(g), "correct": bool(ok),
                    "steps": int(r.steps), "final_x": r.final_x,
                    "g": _round(r.g), "x": None if r.x is None else [int(v) for v in r.x],
                    "winner": [None if w is None else str(w) for w in r.winner],
                    "flagged": bool(r.flagged), "truncated": bool(r.truncated)})
    return out


def _partition_and_gap(records, gold, benchmark, seed, n_boot) -> dict:
    import jax

    from ..stopping import commit_partition, routing_gap

    part = commit_partition(records, gold, benchmark)
    try:
        gap = routing_gap(jax.random.key(seed), records, gold, benchmark, n_boot=n_boot)
    except Exception as err:                 # an empty bucket: report, do not fail the demo
        gap = {"error": str(err)}
    return {"partition": {k: {"n": v[0], "correct": v[1], "accuracy": v[2]}
                          for k, v in part.items()},
            "routing_gap": {k: v for k, v in gap.items() if not isinstance(v, (list, tuple))}}


def _dase(cells: _Cells, cfg: dict, inputs: dict) -> dict:
    from ..datasets import DASE_EXCERPTS, dase_file_settings, recover_dase_gold
    from ..stopping import replay_history, resimulate

    d, seed = cfg["dase"], cfg["seed"]
    out = []
    for name in d["excerpts"]:
        info = _DASE_EXCERPT_INFO[name]
        path = DASE_EXCERPTS[name]
        benchmark = info["benchmark"]
        gold = recover_dase_gold([path], benchmark)
        replays = []
        for empty_g in d["empty_g"]:
            def compute(empty_g=empty_g):
                records = replay_history(path, empty_g=empty_g)
                return {"empty_g": empty_g,
                        "records": _dase_records(records, gold, benchmark),
                        **_partition_and_gap(records, gold, benchmark, seed, d["n_boot"])}
            replays.append(cells(_key(f"dase:{name}", "replay", seed, f"empty_g={empty_g!r}",
                                      "spatial"), compute))
        resim = None
        if name in d["resimulate"]:
            grid = d["resimulate"][name]

            def compute_resim(grid=grid):
                res = resimulate(path, grid, empty_g=0.5)
                rows = []
                for W, records in res.items():
                    pg = _partition_and_gap(records, gold, benchmark, seed, d["n_boot"])
                    rows.append({"W": int(W),
                                 "mean_steps": float(np.mean([r.steps for r in records])),
                                 **pg})
                return {"empty_g": 0.5, "rows": rows}
            resim = cells(_key(f"dase:{name}", "resimulate", seed,
                               "W=" + ",".join(map(str, grid)), "spatial"), compute_resim)
        settings = dase_file_settings(path)
        out.append({"name": name, "title": info["title"], "benchmark": benchmark,
                    "file": Path(path).name, "n_gold": len(gold),
                    "settings": strict_json(settings) if isinstance(settings, dict) else None,
                    "replays": replays, "resimulate": resim})
    return {"excerpts": out, "trajectories": d["trajectories"],
            "source": "bundled excerpts of the released DASE council logs (Apache-2.0; see "
                      "NOTICE); gold recovered from the logs' own correctness flags"}


# --------------------------------------------------------------------------- driver

def _progress(enabled: bool):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    return Progress(TextColumn("[bold]bda demo[/] {task.description:<46}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), disable=not enabled,
                    transient=False)


def run_demo(out_dir="bda-report", *, seed: int = 0, quick: bool = False,
             progress: bool = True, resume: bool = True) -> dict:
    """Run the demo into ``out_dir`` and return the results written to ``results.json``.

    Writes ``out_dir/results.json`` (schema_version 1), ``out_dir/index.html`` (self-contained:
    every figure is an embedded PNG) and the cell cache ``out_dir/demo-cache.jsonl`` (with its
    lock file ``demo-cache.jsonl.lock``). With ``resume`` (default) finished cells are read back
    from that cache (an interrupted demo resumes); ``resume=False`` starts afresh. ``quick``
    runs a reduced grid (a few seconds of compute, for tests). ``progress`` shows a rich progress
    bar on stderr.

    The results' last section, ``run``, holds what differs between two runs of the same inputs:
    ``created``, ``environment``, ``cache`` (cells ``loaded`` / ``computed`` / ``total``, and
    ``reset``: why the cache was started afresh, or ``None``) and ``timings_s``. Everything
    before it is a pure function of the bda_jax version, the configuration, the bundled data and
    the seed: byte-identical between two such runs, resumed or not.

    Raises :class:`~bda_jax.DataError` (field ``"out"``, naming the folder) at once, without
    touching the folder, while another process runs a demo into the same ``out_dir``.
    """
    t_start = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError("the demo's output folder is a file", file=out, field="out")
    out.mkdir(parents=True, exist_ok=True)
    cfg = demo_config(seed, quick)
    inputs: dict = {}
    cache, reset = _open_cache(out, cfg, inputs, resume)
    try:
        return _run(out, cfg, inputs, cache, reset, progress, t_start)
    finally:
        cache.close()                        # the folder is free for the next demo


def _run(out: Path, cfg: dict, inputs: dict, cache, reset, progress: bool,
         t_start: float) -> dict:
    """The demo's sections over the open ``cache``, then ``index.html`` and ``results.json``,
    with figure workers for the report (:class:`~bda_jax.report.FigureRenderer`)."""
    from ._figures import FigureRenderer

    timings = {"inputs": round(time.perf_counter() - t_start, 2)}
    with FigureRenderer() as figures:
        return _sections(out, cfg, inputs, cache, reset, progress, t_start, timings, figures)


#: demo section -> the key of ``results`` that holds it (the data sets under "datasets")
_RESULTS_KEY = {"bluebirds": "datasets", "council": "datasets", "dose": "dose_response",
                "sleeper": "sleeper", "dase": "dase"}


def _sections(out: Path, cfg: dict, inputs: dict, cache, reset, progress: bool,
              t_start: float, timings: dict, figures) -> dict:
    """The demo's sections, each section's figures handed to ``figures``' workers as soon as
    it is computed (drawn while the next sections compute), then the report and the results."""
    import json

    import jax

    from .._core.io import atomic_write
    from ._html import queue_figures, render_report

    with _progress(progress) as bar:
        task = bar.add_task("starting", total=_n_cells(cfg))
        cells = _Cells(cache, bar, task)
        sections = {}
        for name, fn in (("bluebirds", _bluebirds), ("council", _council), ("dose", _dose),
                         ("sleeper", _sleeper), ("dase", _dase)):
            t0 = time.perf_counter()
            part = sections[name] = strict_json(fn(cells, cfg, inputs))
            timings[name] = round(time.perf_counter() - t0, 2)
            key = _RESULTS_KEY[name]
            queue_figures({"datasets": {name: part}} if key == "datasets" else {key: part},
                          figures)
        bar.update(task, description="done")

    results = {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULTS_KIND,
        "bda_jax_version": __version__,
        "config": cfg,
        "datasets": {"bluebirds": sections["bluebirds"], "council": sections["council"]},
        "dose_response": sections["dose"],
        "sleeper": sections["sleeper"],
        "dase": sections["dase"],
        # everything that may differ between two runs of the same inputs, kept apart (last)
        "run": {
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "environment": {"python": platform.python_version(), "jax": jax.__version__,
                            "platform": platform.platform(), "cpus": os.cpu_count(),
                            "backend": jax.default_backend()},
            "cache": {"file": CACHE_NAME, "loaded": cells.loaded, "computed": cells.computed,
                      "total": cells.loaded + cells.computed, "reset": reset},
            "timings_s": timings,
        },
    }
    timings["compute"] = round(time.perf_counter() - t_start, 2)
    results = strict_json(results)
    run = results["run"]
    t_render = time.perf_counter()
    # the page's header shows the run's metadata: render a view with it at the top level too
    render_report({**results, **{k: run[k] for k in ("created", "environment", "cache",
                                                     "timings_s")}},
                  out, figures=figures)      # validates the results before anything is written
    run["timings_s"]["render"] = round(time.perf_counter() - t_render, 2)
    run["timings_s"]["total"] = round(time.perf_counter() - t_start, 2)
    atomic_write(out / "results.json",
                 lambda h: h.write(json.dumps(results, indent=1, allow_nan=False) + "\n"),
                 suffix=".json")
    return results
