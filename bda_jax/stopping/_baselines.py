"""DASE baselines and comparisons ([DASE] §4-§5, Appendix F): self-consistency of the SC70 /
IMSC70 vote logs (read by :func:`bda_jax.datasets.load_dase_vote_log`) sliced to k samples,
accuracy-versus-inferences curves, paired McNemar tests with Benjamini-Hochberg correction, and
cost accounting from the logged fields.

The baseline logs (``safe_SC70_*_Logs.jsonl``, ``safe_IMSC70_*_Logs.jsonl``) hold, per problem,
70 sampled answers (``votes``) in the order they were drawn, the logged ``winner`` and its 0/1
``acc`` flag, and the run's ``cost`` (``cost_total`` in the first AIME SC70 run). The paper's SC-k
is "offline-sliced from a single k = 70 run" (§4): SC-k is the plurality of the first k votes.
The logged winners fix the plurality convention: empty votes (``"empty"`` / ``""``) are skipped,
answers are compared as raw strings, and a tie goes to the answer seen first -- this reproduces
every logged ``winner`` and ``confidence`` (= winner count / non-empty votes); a problem with no
non-empty vote logs ``"no_consensus"`` (here: answer ``None``).
"""
from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .._core.errors import DataError
from ..datasets import DaseVoteLog, normalize_dase_answer, read_dase_history

__all__ = ["accuracy_both", "align", "answers_correct", "benjamini_hochberg", "cost_summary",
           "dase_history_outcomes", "mcnemar_exact", "pairwise_mcnemar",
           "sc_curve", "sc_k_winners"]


def _encode_votes(votes: Sequence[Sequence[str | None]], k_max: int | None = None):
    """Answer ids in first-seen order: ``ids`` int [B, k_max] (-1 = empty/padding) and per-row
    vocabularies. Ids ascend with first appearance, so "ties to the first seen" = smallest id."""
    k_max = k_max or max(len(v) for v in votes)
    ids = np.full((len(votes), k_max), -1, np.int64)
    vocabs = []
    for b, row in enumerate(votes):
        vocab: dict[str, int] = {}
        for j, a in enumerate(row[:k_max]):
            if a is not None:
                ids[b, j] = vocab.setdefault(a, len(vocab))
        vocabs.append(list(vocab))
    return ids, vocabs


def sc_k_winners(votes: Sequence[Sequence[str | None]], ks: Sequence[int] | None = None):
    """SC-k answers ([DASE] §4): plurality of each problem's first k votes, empties skipped,
    ties to the first seen; ``None`` where the first k votes are all empty.

    votes: B lists of raw answers (``None`` = empty). Returns ``(ks [S], answers)`` with
    ``answers[s][b]`` the SC-ks[s] answer of problem b.
    """
    ids, vocabs = _encode_votes(votes)
    B, K = ids.shape
    ks = np.arange(1, K + 1) if ks is None else np.asarray(list(ks))
    if (ks < 1).any() or (ks > K).any():
        raise DataError(f"k must lie in 1..{K}", field="k")
    V = max(1, max(len(v) for v in vocabs))
    onehot = (ids[:, :, None] == np.arange(V)[None, None, :])        # [B, K, V]
    cum = np.cumsum(onehot, axis=1)                                  # [B, K, V]
    at_k = cum[:, ks - 1, :]                                         # [B, S, V]
    win = at_k.argmax(-1)                                            # first max = smallest id
    has = at_k.max(-1) > 0
    answers = [[vocabs[b][win[b, s]] if has[b, s] else None for b in range(B)]
               for s in range(len(ks))]
    return ks, answers


def answers_correct(answers: Sequence[str | None], idx: Sequence[int], gold: Mapping,
                    benchmark: str) -> np.ndarray:
    """bool [B]: the answer equals its problem's gold (``gold[idx]``), both compared after
    :func:`bda_jax.datasets.normalize_dase_answer`; no gold, no answer or an empty one ->
    ``False``."""
    out = np.zeros(len(answers), bool)
    for b, (a, i) in enumerate(zip(answers, idx)):
        g = gold.get(int(i))
        if g is None or a is None:
            continue
        key = normalize_dase_answer(a, benchmark)
        out[b] = key is not None and key == normalize_dase_answer(str(g), benchmark)
    return out


def accuracy_both(ok: np.ndarray, idx: Sequence[int], gold: Mapping) -> dict:
    """Accuracy under both denominators: ``all`` (every problem, unrecovered gold counted wrong,
    as the logs' own flags and the DASE partition numbers) and ``recovered`` (problems with a
    recovered gold only). ok: bool [B]."""
    has = np.asarray([int(i) in gold for i in idx])
    return {"n": int(len(ok)), "correct": int(ok.sum()), "all": float(ok.mean()),
            "n_recovered": int(has.sum()),
            "recovered": float(ok[has].mean()) if has.any() else float("nan")}


def sc_curve(log: DaseVoteLog, gold: Mapping) -> dict:
    """Accuracy versus inferences for SC-k / IMSC-k, k = 1..70 ([DASE] Figure 3 / 14).

    Inferences = k + the log's pool inferences (IMSC's 5 seeding calls; 0 for SC). Returns lists
    ``k``, ``inferences``, ``acc_all``, ``acc_recovered`` and ``correct`` (counts)."""
    ks, answers = sc_k_winners(log.votes)
    pool = float(np.mean(log.pool_inferences))
    rows = [accuracy_both(answers_correct(a, log.idx, gold, log.benchmark), log.idx, gold)
            for a in answers]
    return {"k": ks.tolist(), "inferences": (ks + pool).tolist(),
            "correct": [r["correct"] for r in rows], "acc_all": [r["all"] for r in rows],
            "acc_recovered": [r["recovered"] for r in rows]}


# ----------------------------------------------------------------------------- tests
def mcnemar_exact(a_ok, b_ok) -> dict:
    """Exact McNemar test on paired 0/1 outcomes [B] ([DASE] §5, Figures 15-16): two-sided
    binomial test of the discordant pairs, n10 ~ Bin(n10 + n01, 1/2)
    (``scipy.stats.binomtest``); p = 1 when there is no discordant pair."""
    from scipy.stats import binomtest

    a_ok, b_ok = np.asarray(a_ok, bool), np.asarray(b_ok, bool)
    if a_ok.shape != b_ok.shape:
        raise DataError(f"paired outcomes differ in shape: {a_ok.shape} vs {b_ok.shape}",
                        field="b_ok")
    n10 = int((a_ok & ~b_ok).sum())
    n01 = int((~a_ok & b_ok).sum())
    p = 1.0 if n10 + n01 == 0 else float(binomtest(n10, n10 + n01, 0.5).pvalue)
    return {"n": int(a_ok.size), "a_only": n10, "b_only": n01,
            "diff": float(a_ok.mean() - b_ok.mean()), "p": p}


def benjamini_hochberg(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (FDR step-up), same order as ``p`` [m]:
    adj_(i) = min_{j >= i} min(1, m p_(j) / j) over the ascending order."""
    p = np.asarray(p, float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(scaled[::-1])[::-1].clip(max=1.0)
    out = np.empty(m)
    out[order] = adj
    return out


def pairwise_mcnemar(outcomes: Mapping[str, np.ndarray], pairs=None) -> list[dict]:
    """McNemar for every pair of methods (or the given ``pairs``) on the same problems, with
    BH-adjusted p-values over that family (``p_bh``). outcomes: {method: bool [B]}."""
    names = list(outcomes)
    pairs = list(combinations(names, 2)) if pairs is None else list(pairs)
    rows = [{"a": a, "b": b, **mcnemar_exact(outcomes[a], outcomes[b])} for a, b in pairs]
    adj = benjamini_hochberg([r["p"] for r in rows])
    for r, q in zip(rows, adj):
        r["p_bh"] = float(q)
    return rows


# ----------------------------------------------------------------------------- DASE logs
def dase_history_outcomes(path, gold: Mapping) -> dict:
    """A DASE history file's committed answers, correctness and accounting: ``idx`` [B],
    ``answer`` [B] (``cert.consensus``; ``None`` when empty), ``ok`` bool [B], logged ``flag``
    [B] (``final_acc``), ``steps`` [B], ``inferences`` [B] = 5 x steps ([DASE] §4), ``tokens``
    [B], ``cost`` [B]. The file is read by :func:`bda_jax.datasets.read_dase_history`."""
    out = {k: [] for k in ("idx", "answer", "flag", "steps", "tokens", "cost", "n_slots")}
    bench = None
    for rec in read_dase_history(path):
        cert = rec.cert
        if "consensus" not in cert:
            raise DataError("the record has no cert.consensus", file=Path(path), line=rec.line,
                            field="cert")
        bench = rec.benchmark
        out["idx"].append(rec.idx)
        a = cert["consensus"]
        out["answer"].append(a if isinstance(a, str) and normalize_dase_answer(a, bench)
                             is not None else None)
        out["flag"].append(int(cert.get("final_acc", 0)))
        out["steps"].append(int(cert.get("steps", len(rec.rounds))))
        out["n_slots"].append(len(rec.rounds[0]))
        out["tokens"].append(float(cert.get("tokens", np.nan)))
        out["cost"].append(float(cert.get("cost", np.nan)))
    res = {k: np.asarray(v) if k != "answer" else v for k, v in out.items()}
    res["benchmark"] = bench
    res["inferences"] = res["n_slots"] * res["steps"]
    res["ok"] = answers_correct(res["answer"], res["idx"], gold, bench)
    return res


def cost_summary(cost, tokens=None, inferences=None) -> dict:
    """Totals and per-problem means of the logged cost [B] (dollars), tokens [B] (None where
    the log has no token field) and inferences [B]."""
    cost = np.asarray(cost, float)
    out = {"total_cost": float(np.nansum(cost)), "mean_cost": float(np.nanmean(cost)),
           "cost_logged": int(np.isfinite(cost).sum())}
    if tokens is not None:
        tokens = np.asarray(tokens, float)
        out.update(total_tokens=float(np.nansum(tokens)), mean_tokens=float(np.nanmean(tokens)))
    else:
        out.update(total_tokens=None, mean_tokens=None)
    if inferences is not None:
        inf = np.asarray(inferences, float)
        out.update(total_inferences=float(inf.sum()), mean_inferences=float(inf.mean()))
    return out


def align(idx_a, idx_b):
    """Positions of the common problem ids: (ia, ib) with idx_a[ia] == idx_b[ib], sorted."""
    common = np.intersect1d(idx_a, idx_b)
    pa = {int(i): n for n, i in enumerate(idx_a)}
    pb = {int(i): n for n, i in enumerate(idx_b)}
    return (np.asarray([pa[int(i)] for i in common], int),
            np.asarray([pb[int(i)] for i in common], int))
