"""Summaries of DASE replays ([DASE] §5; docs/stopping.md): the commit partition with accuracy
per commit kind, the routing gap between dispatched and flagged commits with a bootstrap CI,
the accuracy-coverage curve of the dispatched bucket, and :func:`replay_summary`, all of it for
one history file (what ``bda stop replay`` prints).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import BdaError, DataError
from ..datasets import recover_dase_gold
from ._baselines import answers_correct
from ._replay import ReplayRecord, load_history_batch, replay_history
from ._rules import COMMITS, DISPATCHED

__all__ = ["ReplaySummary", "accuracy_coverage", "commit_partition", "replay_summary",
           "routing_gap"]


def _correct(records: Sequence[ReplayRecord], gold, benchmark: str) -> np.ndarray:
    """bool [B]: each record's answer is its problem's gold (:func:`answers_correct`)."""
    return answers_correct([r.answer for r in records], [r.idx for r in records], gold or {},
                           benchmark)


def commit_partition(records: Sequence[ReplayRecord], gold, benchmark: str = "aime") -> dict:
    """Count and accuracy per commit kind and overall: ``{kind: (n, n_correct, accuracy)}``.

    Accuracy is over *every* problem of the bucket: a problem whose gold could not be recovered
    (:func:`bda_jax.datasets.recover_dase_gold`) counts as wrong, as the logs' own 0/1 flags do
    (this is the denominator that gives the paper's GPQA W = 4 numbers: 308/380, 59/142, 15/24,
    382/546).
    Answers are compared after :func:`bda_jax.datasets.normalize_dase_answer`.
    """
    ok = _correct(records, gold, benchmark)
    kinds = np.asarray([r.commit for r in records])
    out = {}
    for kind in COMMITS[1:]:
        sel = kinds == kind
        if sel.any():
            out[kind] = (int(sel.sum()), int(ok[sel].sum()), float(ok[sel].mean()))
    out["overall"] = (len(records), int(ok.sum()), float(ok.mean()))
    return out


def routing_gap(key, records: Sequence[ReplayRecord], gold, benchmark: str = "aime", *,
                versus: str = "rest", n_boot: int = 2000, level: float = 0.95) -> dict:
    """Routing gap ([DASE] §5): accuracy of dispatched commits (right wall / consensus)
    minus accuracy of ``versus`` (``"rest"``: every flagged problem; ``"left_wall"``), with a
    percentile bootstrap CI over problems (``n_boot`` resamples from ``key``; a resample with an
    empty bucket is dropped; an empty bucket in the data gives NaN). Returns ``{"gap", "low",
    "high", "dispatched", "other", "coverage", "n_boot"}``.
    """
    if versus not in ("rest", "left_wall"):
        raise DataError(f"versus must be 'rest' or 'left_wall', got {versus!r}", field="versus")
    ok = jnp.asarray(_correct(records, gold, benchmark), jnp.float32)
    kinds = [r.commit for r in records]
    hi = jnp.asarray([c in DISPATCHED for c in kinds])
    lo = jnp.asarray([(c not in DISPATCHED) if versus == "rest" else c == "left_wall"
                      for c in kinds])

    def gap(w):
        a = (w * ok * hi).sum() / (w * hi).sum()
        b = (w * ok * lo).sum() / (w * lo).sum()
        return a - b, a, b

    point, a, b = gap(jnp.ones_like(ok))
    draws = jax.random.randint(key, (n_boot, len(records)), 0, len(records))
    weights = jax.vmap(lambda d: jnp.zeros_like(ok).at[d].add(1.0))(draws)
    boot = jax.vmap(lambda w: gap(w)[0])(weights)
    boot = np.asarray(boot)[np.isfinite(np.asarray(boot))]
    q = (1 - level) / 2
    low, high = (np.quantile(boot, [q, 1 - q]) if boot.size else (np.nan, np.nan))
    return {"gap": float(point), "low": float(low), "high": float(high),
            "dispatched": float(a), "other": float(b), "coverage": float(hi.mean()),
            "n_boot": int(boot.size)}


def accuracy_coverage(records: Sequence[ReplayRecord], gold, benchmark: str = "aime") -> dict:
    """Accuracy-coverage curve of the dispatched bucket by commit step: at cutoff s, dispatch
    the right-wall / consensus commits made within s rounds. Returns arrays ``step`` [S],
    ``coverage`` [S] (share of all problems dispatched) and ``accuracy`` [S] (NaN when none)."""
    ok = _correct(records, gold, benchmark)
    hi = np.asarray([r.commit in DISPATCHED for r in records])
    steps = np.asarray([r.steps for r in records])
    cut = np.arange(1, steps.max() + 1)
    sel = hi[None, :] & (steps[None, :] <= cut[:, None])
    n = sel.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n > 0, (sel & ok[None, :]).sum(1) / n, np.nan)
    return {"step": cut, "coverage": n / len(records), "accuracy": acc}


#: Order of the commit kinds in a summary's partition: dispatched first, then the flagged.
_PARTITION_ORDER = ("right_wall", "consensus", "left_wall", "fallback")


@dataclass(frozen=True)
class ReplaySummary:
    """What :func:`replay_summary` found on one DASE history file.

    ``file``, ``benchmark``; ``settings`` (``rule``, ``W``, ``k``, ``L`` as given, else as the
    file name states, and ``empty_g``); ``n_problems``; ``n_gold`` (problems with a recovered
    gold; None without gold); ``partition``: one row per commit kind (dispatched first) and
    ``overall``, each ``{commit, n, share, mean_stop_round, flagged}`` plus ``correct`` /
    ``accuracy`` with gold; ``routing_gap``: :func:`routing_gap` (None without gold or with one
    problem); ``problems``: per problem ``{idx, commit, answer, stop_round, flagged, truncated,
    correct}`` (``correct`` None where the gold is unknown); ``notes``: what gold recovery fell
    back to.
    """

    file: str
    benchmark: str
    settings: dict
    n_problems: int
    n_gold: int | None
    partition: list
    routing_gap: dict | None
    problems: list
    notes: list

    def to_json(self) -> dict:
        """The summary as a JSON-ready dict (the keys of ``bda stop replay --json``)."""
        return {"file": self.file, "benchmark": self.benchmark, "settings": self.settings,
                "n_problems": self.n_problems, "n_gold": self.n_gold,
                "partition": self.partition, "routing_gap": self.routing_gap,
                "problems": self.problems, "notes": self.notes}


def _summary_gold(path: Path, gold, benchmark: str, notes: list):
    """The gold mapping of a summary (None: no gold); what recovery fell back to goes to notes."""
    if gold is False or gold is None:
        return None
    if isinstance(gold, Mapping):
        return gold
    if gold is not True:                  # a file or folder of logs: recover from there
        found = recover_dase_gold(gold, benchmark=benchmark)
    else:
        try:        # every released file of the folder flags some answers (docs/datasets.md)
            found = recover_dase_gold(path.parent, benchmark=benchmark)
        except BdaError as err:
            notes.append(f"gold from the file alone ({err.reason})")
            try:
                found = recover_dase_gold(path, benchmark=benchmark)
            except BdaError as err2:
                notes.append(f"no gold: {err2.reason}")
                return None
    if not len(found):
        notes.append("no gold recovered from the file's flags")
        return None
    return found


def replay_summary(path, rule: str | None = None, W=None, k=None, L: int | None = None,
                   empty_g: float = 0.0, *, gold=True, n_boot: int = 1000,
                   seed: int = 0) -> ReplaySummary:
    """Replay a DASE history file (:func:`replay_history`) and summarize it: stop rounds, the
    commit partition with accuracy (:func:`commit_partition`) and the routing gap
    (:func:`routing_gap`, ``n_boot`` resamples from ``jax.random.key(seed)``).

    ``rule``, ``W`` / ``k``, ``L``, ``empty_g``: as :func:`replay_history`. ``gold``: ``True``
    recovers it (:func:`bda_jax.datasets.recover_dase_gold`) from the file's folder, falling back
    to the file alone when the folder cannot be read, with a note; a path (or list of paths)
    recovers from there (errors raise); a mapping ``{idx: answer}`` is used as is;
    ``False`` / ``None``: no gold (no accuracy, no gap). Returns a :class:`ReplaySummary`.

    >>> from bda_jax.datasets import DASE_EXCERPTS
    >>> s = replay_summary(DASE_EXCERPTS["gpqa_w4_head50"], empty_g=0.5, n_boot=10)
    >>> [(row["commit"], row["n"]) for row in s.partition]
    [('right_wall', 38), ('left_wall', 10), ('fallback', 2), ('overall', 50)]
    """
    path = Path(path)
    hb = load_history_batch(path)
    records = replay_history(path, rule=rule, W=W, k=k, empty_g=empty_g, L=L)
    notes: list[str] = []
    gold_map = _summary_gold(path, gold, hb.benchmark, notes)
    kinds = sorted({r.commit for r in records},
                   key=lambda c: _PARTITION_ORDER.index(c) if c in _PARTITION_ORDER else 9)
    part = commit_partition(records, gold_map, hb.benchmark) if gold_map is not None else None
    buckets = []
    for kind in kinds + ["overall"]:
        sel = [r for r in records if kind == "overall" or r.commit == kind]
        row = {"commit": kind, "n": len(sel), "share": len(sel) / len(records),
               "mean_stop_round": float(np.mean([r.steps for r in sel])),
               "flagged": kind != "overall" and sel[0].flagged}
        if part is not None and kind in part:
            row["correct"], row["accuracy"] = part[kind][1], part[kind][2]
        buckets.append(row)
    gap = None
    if gold_map is not None and len(records) > 1:
        gap = routing_gap(jax.random.key(seed), records, gold_map, hb.benchmark, n_boot=n_boot)
    correct = [None] * len(records)
    if gold_map is not None:
        correct = [bool(c) if r.idx in gold_map else None
                   for r, c in zip(records, _correct(records, gold_map, hb.benchmark))]
    problems = [{"idx": r.idx, "commit": r.commit, "answer": r.answer, "stop_round": r.steps,
                 "flagged": r.flagged, "truncated": r.truncated, "correct": c}
                for r, c in zip(records, correct)]
    settings = {"rule": rule or hb.settings.get("rule"), "W": W or hb.settings.get("W"),
                "k": k or hb.settings.get("k"), "L": L or hb.settings.get("L"),
                "empty_g": empty_g}
    return ReplaySummary(file=str(path), benchmark=hb.benchmark, settings=settings,
                         n_problems=len(records),
                         n_gold=None if gold_map is None else len(gold_map),
                         partition=buckets, routing_gap=gap, problems=problems, notes=notes)
