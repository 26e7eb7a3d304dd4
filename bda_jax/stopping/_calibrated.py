"""Calibrated stopping for re-answering LLM ensembles: stop when the BDA posterior over the
answers seen so far is confident, with per-slot priors cross-fitted on labeled problems.

Evidence ([BDA] Eqs. 1-2, the one-coin kernel, tempered): at round t, every non-empty answer
of slot s in rounds <= t is one proposal; with N_s proposals of which E_sk name candidate k,

    log pi(k | rounds <= t) = tau * sum_s [log B(alpha_s + E_sk, beta_s + N_s - E_sk)
                              - log B(alpha_s, beta_s) - (N_s - E_sk) log(K_t - 1)] + const.

Candidates: GPQA the four letters (other answers count as empty); AIME the normalized answers
seen by round t plus one "unseen answer" slot (so a unanimous round is not certainty by
construction). Stop at the first round whose max posterior over *seen* answers reaches the
threshold; otherwise commit the argmax at the last recorded round ("fallback"). The stop round
never exceeds the problem's recorded last round (truncation-valid on DASE logs, [DASE] §4).

Fitting (cross-fitted by problem, K folds): for round t, slot means mu_s(t) are the Laplace
smoothed share of correct proposals in rounds <= min(t, last) over the *other* folds' problems
with a recovered gold; (strength, tau) minimize those problems' mean log loss at round t over a
small grid. A problem's own gold never enters the parameters used to score it.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
from scipy.special import betaln, logsumexp

from .._core.errors import DataError
from ..datasets import GPQA_LETTERS, normalize_dase_answer

__all__ = ["StopOutcome", "VoteTensor", "build_votes", "crossfit_log_posterior",
           "match_coverage", "stop_at_threshold", "summarize_stops", "vote_log_posterior"]

STRENGTHS = (2.0, 6.0, 20.0)
TAUS = (0.1, 0.2, 0.35, 0.5, 0.75, 1.0)


class VoteTensor(NamedTuple):
    """Cumulative proposal counts of a batch: ``E`` int [B, R, S, V] (slot s's proposals of
    candidate v in rounds <= t), ``N`` int [B, R, S], ``K`` int [B, R] candidates at round t
    (incl. the AIME "unseen" slot), ``seen`` bool [B, R, V] candidates said by round t,
    ``mask`` bool [B, R] recorded rounds, ``gold`` int [B] (-1 unknown; V-1 = unseen slot for
    AIME), ``vocab`` per-problem candidate strings, ``open_set`` (AIME: last slot = unseen)."""

    E: np.ndarray
    N: np.ndarray
    K: np.ndarray
    seen: np.ndarray
    mask: np.ndarray
    gold: np.ndarray
    vocab: list
    open_set: bool


def build_votes(problems: Sequence[Sequence[Sequence[str | None]]], gold=None,
                benchmark: str = "aime") -> VoteTensor:
    """Encode B problems (lists of rounds of S answers; ``None``/``"empty"`` = no answer).

    gold: sequence [B] of gold strings (``None`` = unknown). Answers are normalized with
    :func:`normalize_dase_answer`. Returns a :class:`VoteTensor`.
    """
    B = len(problems)
    R = max(len(p) for p in problems)
    S = max(len(r) for p in problems for r in p)
    open_set = benchmark != "gpqa"
    ids = np.full((B, R, S), -1, np.int64)
    mask = np.zeros((B, R), bool)
    vocabs = []
    for b, p in enumerate(problems):
        vocab: dict[str, int] = {} if open_set else {x: i for i, x in enumerate(GPQA_LETTERS)}
        for t, rnd in enumerate(p):
            mask[b, t] = True
            for s, a in enumerate(rnd):
                key = normalize_dase_answer(a, benchmark) if isinstance(a, str) else None
                if key is None or (not open_set and key not in vocab):
                    continue
                ids[b, t, s] = vocab.setdefault(key, len(vocab))
        vocabs.append(list(vocab))
    V = max(len(v) for v in vocabs) + (1 if open_set else 0)
    onehot = ids[..., None] == np.arange(V)                             # [B, R, S, V]
    E = np.cumsum(onehot, axis=1).astype(np.int32)
    N = E.sum(-1)
    said = np.cumsum(onehot.any(2), axis=1) > 0                          # [B, R, V]
    if open_set:
        K = said.sum(-1) + 1
        seen = said
    else:
        K = np.full((B, R), len(GPQA_LETTERS))
        seen = np.broadcast_to(np.arange(V) < len(GPQA_LETTERS), (B, R, V)).copy()
    g = np.full(B, -1, np.int64)
    if gold is not None:
        for b, x in enumerate(gold):
            key = None if x is None else normalize_dase_answer(str(x), benchmark)
            if key is None:
                continue
            if key in vocabs[b]:
                g[b] = vocabs[b].index(key)
            elif open_set:
                g[b] = V - 1                     # gold nobody said: the "unseen" slot
    return VoteTensor(E, N, K, seen, mask, g, vocabs, open_set)


def _cand_mask(vt: VoteTensor) -> np.ndarray:
    """Candidates scored at each round, bool [B, R, V]: seen answers (+ the unseen slot)."""
    cand = vt.seen.copy()
    if vt.open_set:
        cand[..., -1] = True
    return cand


def vote_log_posterior(vt: VoteTensor, alpha, beta, tau) -> np.ndarray:
    """Tempered one-coin log-posteriors [B, R, V] (-inf off the candidate set).

    alpha, beta: per-slot Beta shapes [S] or per-round [R, S]; tau scalar or [R]."""
    R, S = vt.N.shape[1:]
    alpha = np.broadcast_to(np.asarray(alpha, float), (R, S))
    beta = np.broadcast_to(np.asarray(beta, float), (R, S))
    tau = np.broadcast_to(np.asarray(tau, float), (R,))
    E = vt.E.astype(float)
    N = vt.N[..., None].astype(float)
    a, b_ = alpha[None, :, :, None], beta[None, :, :, None]
    logk1 = np.log(np.maximum(vt.K - 1, 1))[:, :, None, None]
    per = betaln(a + E, b_ + N - E) - betaln(a, b_) - (N - E) * logk1
    score = tau[None, :, None] * per.sum(2)
    cand = _cand_mask(vt)
    score = np.where(cand, score, -np.inf)
    return score - logsumexp(score, axis=-1, keepdims=True)


def _fit_round(vt: VoteTensor, rows: np.ndarray, t: int, strengths, taus):
    """Slot Beta priors and tau for round index t from the problems ``rows`` (gold known)."""
    last = vt.mask.sum(1) - 1
    tt = np.minimum(t, last[rows])                                       # truncate at t
    E = vt.E[rows, tt]                                                   # [n, S, V]
    N = vt.N[rows, tt]                                                   # [n, S]
    g = vt.gold[rows]
    hit = E[np.arange(len(rows)), :, g]                                  # [n, S]
    mu = (hit.sum(0) + 1.0) / (N.sum(0) + 2.0)                           # [S]
    sub = VoteTensor(E[:, None], N[:, None], vt.K[rows, tt][:, None],
                     vt.seen[rows, tt][:, None], np.ones((len(rows), 1), bool), g, [],
                     vt.open_set)
    best = None
    for s in strengths:
        for tau in taus:
            lp = vote_log_posterior(sub, mu * s, (1 - mu) * s, tau)[:, 0]
            loss = -lp[np.arange(len(rows)), g].mean()
            if best is None or loss < best[0]:
                best = (loss, s, tau)
    _, s, tau = best
    return mu * s, (1 - mu) * s, tau


def crossfit_log_posterior(vt: VoteTensor, folds: int = 5, seed: int = 0,
                           strengths=STRENGTHS, taus=TAUS):
    """Cross-fitted log-posteriors [B, R, V]: problem b at round t is scored with priors fitted
    on the other folds' labeled problems truncated at t. Returns ``(log_post, fold)`` with
    ``fold`` int [B]. Problems without gold are scored but never fitted on."""
    B, R, S, _ = vt.E.shape
    rng = np.random.default_rng(seed)
    fold = rng.permutation(np.arange(B) % folds)
    out = np.full(vt.E.shape[:2] + vt.E.shape[3:], -np.inf)
    for f in range(folds):
        train = np.flatnonzero((fold != f) & (vt.gold >= 0))
        test = np.flatnonzero(fold == f)
        if len(train) == 0:
            raise DataError(f"fold {f} has no labeled training problem", field="gold")
        alpha = np.zeros((R, S))
        beta = np.zeros((R, S))
        tau = np.zeros(R)
        for t in range(R):
            alpha[t], beta[t], tau[t] = _fit_round(vt, train, t, strengths, taus)
        sub = VoteTensor(vt.E[test], vt.N[test], vt.K[test], vt.seen[test], vt.mask[test],
                         vt.gold[test], [], vt.open_set)
        out[test] = vote_log_posterior(sub, alpha, beta, tau)
    return out, fold


class StopOutcome(NamedTuple):
    """Per-problem stopping: ``stopped`` bool [B] (confident stop, not fallback), ``round``
    int [B] (1-based round used), ``answer`` int [B] (candidate id; -1 = the unseen slot),
    ``confidence`` [B] (max posterior over seen answers at that round)."""

    stopped: np.ndarray
    round: np.ndarray
    answer: np.ndarray
    confidence: np.ndarray


def stop_at_threshold(vt: VoteTensor, log_post: np.ndarray, threshold: float) -> StopOutcome:
    """First recorded round with max posterior over seen answers >= threshold, else the last
    recorded round (fallback). log_post: [B, R, V]."""
    p = np.where(vt.seen, np.exp(log_post), -1.0)
    conf = p.max(-1)                                                    # [B, R]
    arg = p.argmax(-1)
    hit = (conf >= threshold) & vt.mask
    last = vt.mask.sum(1) - 1
    stopped = hit.any(1)
    t = np.where(stopped, hit.argmax(1), last)
    B = np.arange(len(t))
    answer = np.where(conf[B, t] >= 0, arg[B, t], -1)
    return StopOutcome(stopped, t + 1, answer, conf[B, t])


def summarize_stops(vt: VoteTensor, out: StopOutcome,
                    gold_known: np.ndarray | None = None) -> dict:
    """Coverage (share stopped confidently), accuracy of the stopped set and overall (every
    problem; unknown gold counted wrong), mean rounds used."""
    ok = (out.answer == vt.gold) & (vt.gold >= 0)
    if vt.open_set:
        ok &= out.answer != vt.E.shape[-1] - 1
    n_stop = int(out.stopped.sum())
    res = {"n": int(len(ok)), "stopped": n_stop, "coverage": float(out.stopped.mean()),
           "acc_stopped": float(ok[out.stopped].mean()) if n_stop else float("nan"),
           "acc_rest": float(ok[~out.stopped].mean()) if n_stop < len(ok) else float("nan"),
           "acc_overall": float(ok.mean()), "mean_rounds": float(out.round.mean()),
           "mean_rounds_stopped": float(out.round[out.stopped].mean()) if n_stop else
           float("nan")}
    if gold_known is not None and out.stopped.any():
        sel = out.stopped & gold_known
        res["acc_stopped_recovered"] = float(ok[sel].mean()) if sel.any() else float("nan")
    return res


def match_coverage(vt: VoteTensor, log_post, target: float, thresholds=None):
    """Sweep thresholds [M] and return ``(rows, best)``: rows of summaries per threshold and the
    threshold whose coverage is closest to ``target`` (ties: the higher threshold)."""
    if thresholds is None:
        thresholds = np.unique(np.concatenate([np.round(np.arange(0.5, 0.99, 0.005), 4),
                                               1 - 10.0 ** -np.arange(2, 8.01, 0.125)]))
    rows = []
    for th in thresholds:
        r = summarize_stops(vt, stop_at_threshold(vt, log_post, float(th)))
        r["threshold"] = float(th)
        rows.append(r)
    best = min(rows, key=lambda r: (abs(r["coverage"] - target), -r["threshold"]))
    return rows, best
