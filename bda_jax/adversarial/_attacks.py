"""Count-level adversaries and the dose-response study ([BDA] §7, Appendix F.1 and F.3).

:func:`corrupt_traces` rewrites the moves of *corrupted seats* so that each of their informative
moves, with probability ``p_wrong``, becomes inconsistent with the gold answer ("redirected to a
wrong answer"). Two temporal flavours (Appendix F.1):

* ``mode="persistent"``: the same ``k`` seats on every task — calibration folds included, which
  is the realistic, validation-exposable case in which BDA learns a negative weight for the seat;
* ``mode="rotating"``: ``k`` seats drawn afresh on every task.

:func:`dose_response` runs the Table 12 grid (p_wrong x regime x arm) through
:func:`bda_jax.evaluate` on identical outer folds and returns a tidy table.

How a redirected move is rewritten (the result always passes the strict protocol automaton):

==========================  ===============================================================
original move               redirected move
==========================  ===============================================================
propose / vote of a         the same force, answer = the wrong answer w
concede (+1 on a)           concede to the latest earlier move of another agent that stands for
                            w, else a propose of w
challenge / retract (-1)    a challenge of the latest earlier move that stands for the gold
                            (another agent's first; a retract of the seat's own gold
                            endorsement next), else a propose of w
==========================  ===============================================================

Moves that are *not* redirected (honest seats, and a corrupted seat's moves that escaped the
draw) keep their original signed endorsement exactly: where a concede or challenge targeted a
move that was rewritten, it is re-pointed at the latest earlier move (same agent as the original
target first) that still stands for the same answer; a concede with no such move becomes a
propose of that answer; a challenge or retract with no such move becomes an abstain ("dropped",
counted in ``Trace.extra["adversary"]``; rare). Rounds, agents, order and move ids never change.

The wrong answer: ``target="fixed-wrong"`` (default) draws one wrong candidate per task,
uniformly among the candidates other than the gold, from the task's seeded stream, and every
redirected move of that task names it (a coalition; at K = 2 it is *the* wrong answer);
``target="random-wrong"`` draws a fresh wrong candidate for every redirected move (F.1's
"random wrong answer"). Both are identical at K = 2.

Randomness is keyed per task: the generator of a task is seeded by ``(seed, hash(task_id))``
and draws, in order, a seat permutation, the fixed wrong answer and one uniform per move (and
one more per move for ``random-wrong``), whatever ``p_wrong``, ``k`` and ``mode`` are. So a
task's corruption does not depend on the other tasks, and the doses are *nested*: a move
redirected at p_wrong = 0.4 is also redirected at 0.6 (common random numbers), and the rotating
seats at k = 1 are among those at k = 2.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._core.counts import tally
from .._core.errors import DataError
from .._core.normalize import Normalizer, default_normalizer, memoized
from .._core.selection import make_folds
from .._core.traces import Move, Trace, field_checked, mark_field_checked, resolve_trace
from ..aggregators import evaluate
from ._cells import cell, open_cells

__all__ = ["corrupt_traces", "corruption_summary", "dose_response", "DoseResponse",
           "DEFAULT_P_GRID", "DEFAULT_REGIMES"]

DEFAULT_P_GRID = (0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0)
DEFAULT_REGIMES = (("persistent", 1), ("persistent", 2), ("rotating", 2))
_MODES = ("persistent", "rotating")
_TARGETS = ("fixed-wrong", "random-wrong")


# ----------------------------------------------------------------------------------- helpers
def _task_rng(seed: int, task_id: str) -> np.random.Generator:
    digest = hashlib.blake2b(task_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return np.random.default_rng([int(seed), int.from_bytes(digest, "little")])


def _agent_order(traces) -> list[str]:
    """Agents in first-seen order over the moves (tally's default agent order)."""
    return list(dict.fromkeys(m.agent for t in traces for m in t.moves))


def _check_p(p) -> float:
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise DataError(f"p_wrong must be a number in [0, 1], got {p!r}", field="p_wrong") from None
    if not 0.0 <= p <= 1.0:
        raise DataError(f"p_wrong must be in [0, 1], got {p}", field="p_wrong")
    return p


def _check_int(x, name, least=0) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < least:
        raise DataError(f"{name} must be an integer >= {least}, got {x!r}", field=name)
    return int(x)


def _resolve_seats(seats, agents: list[str]) -> list[str]:
    out = []
    for s in seats:
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            if not 0 <= s < len(agents):
                raise DataError(f"seat index {s} is outside [0, {len(agents)})", field="seats")
            out.append(agents[int(s)])
        elif isinstance(s, str) and s in agents:
            out.append(s)
        else:
            raise DataError(f"seat {s!r} is neither an agent name nor an index into {agents}",
                            field="seats")
    if len(set(out)) != len(out):
        raise DataError("seats has duplicates", field="seats")
    return out


# ----------------------------------------------------------------------------------- one task
def _corrupt_one(trace: Trace, p: float, bad: set[str], rng_draws, target: str,
                 normalizer: Normalizer, memo: Normalizer, fallback_answer: str,
                 meta_base: dict) -> Trace:
    """One task's corrupted trace. ``memo`` is ``normalizer`` memoized (the same answers);
    the new trace is marked field-checked when ``trace`` is: its moves are made of the checked
    trace's fields and candidates (and the checked ``fallback_answer``), so the guard
    :func:`resolve_trace` runs the automaton without re-parsing it."""
    resolved = resolve_trace(trace, normalizer=normalizer)
    display = list(resolved.candidates)
    keys = list(resolved.keys)                             # normalized display, same order
    gold = resolved.gold                                   # -1 when gold is not a candidate
    orig = {mid: (c, s) for mid, c, s in zip(resolved.moves, resolved.cand, resolved.sign)}
    moves = list(resolved.admissible)
    w_u, u, wr = rng_draws(len(moves))

    wrongs = [g for g in range(len(display)) if g != gold]
    if not wrongs and trace.candidates is None:          # open answer space, all said gold
        display.append(fallback_answer)
        keys.append(memo(fallback_answer))
        wrongs = [len(display) - 1]
    first: dict[str, int] = {}                             # key -> its first candidate
    for g, key in enumerate(keys):
        first.setdefault(key, g)
    fixed = wrongs[min(int(w_u * len(wrongs)), len(wrongs) - 1)] if wrongs else None

    new: list[Move] = []
    ans: dict[str, int | None] = {}                      # new move id -> answer it stands for
    agent_of: dict[str, str] = {}
    endorsed: dict[str, set[int]] = {}
    redirected, rewritten, dropped = [], [], []
    n_info = 0

    def latest(c: int, *, not_agent=None, prefer=None, only_agent=None):
        """Latest emitted move standing for c (prefer ``prefer``'s moves, skip ``not_agent``)."""
        best = None
        for mv in reversed(new):
            if ans.get(mv.id) != c:
                continue
            if not_agent is not None and mv.agent == not_agent:
                continue
            if only_agent is not None and mv.agent != only_agent:
                continue
            if prefer is None or mv.agent == prefer:
                return mv
            if best is None:
                best = mv
        return best

    def same(m: Move, **changes) -> Move:
        return Move(changes.get("id", m.id), m.agent, m.round, changes["force"],
                    changes.get("answer"), changes.get("target"), m.confidence, m.extra)

    def endorse(m: Move, c: int, prefer=None) -> Move:
        """A move of m's agent that endorses c (+1): keep m if it already does."""
        if m.force in ("propose", "vote"):
            if memo(m.answer) == keys[c]:
                return m
            return same(m, force=m.force, answer=display[c])
        if m.force == "concede":
            tgt = m.target
            if ans.get(tgt) == c and agent_of.get(tgt) != m.agent:
                if m.answer is None or memo(m.answer) == keys[c]:
                    return m
                return same(m, force="concede", answer=display[c], target=tgt)
            mv = latest(c, not_agent=m.agent, prefer=prefer)
            if mv is not None:
                return same(m, force="concede", target=mv.id,
                            answer=None if m.answer is None else display[c])
        return same(m, force="propose", answer=display[c])

    def reject(m: Move, c: int, prefer=None) -> Move | None:
        """A move of m's agent that rejects c (-1), or None when none is admissible."""
        if m.force == "challenge" and ans.get(m.target) == c:
            return m
        if m.force == "retract":
            if m.target is not None and ans.get(m.target) == c and agent_of[m.target] == m.agent:
                if m.answer is None or memo(m.answer) == keys[c]:
                    return m
                return same(m, force="retract", target=m.target, answer=display[c])
            if m.target is None and memo(m.answer) == keys[c] \
                    and c in endorsed.get(m.agent, ()):
                return m
        mv = latest(c, not_agent=m.agent, prefer=prefer)
        if mv is not None:
            return same(m, force="challenge", target=mv.id)
        if c in endorsed.get(m.agent, ()):
            return same(m, force="retract", answer=display[c])
        mv = latest(c, only_agent=m.agent)                 # a self-challenge is a retract too
        if mv is not None:
            return same(m, force="challenge", target=mv.id)
        return None

    for j, m in enumerate(moves):
        info = orig.get(m.id)
        if info is None:                                   # abstain or self-concede
            out = m
            if m.force == "concede":
                c = ans.get(m.target)
                if c is None:                              # its target was dropped
                    out = same(m, force="abstain")
                    dropped.append(m.id)
                elif m.answer is not None and memo(m.answer) != keys[c]:
                    out = same(m, force="concede", answer=display[c], target=m.target)
        else:
            c, sign = info
            orig_target_agent = agent_of.get(m.target) if m.target is not None else None
            if m.agent in bad:
                n_info += 1
            if m.agent in bad and u[j] < p:
                redirected.append(m.id)
                if target == "fixed-wrong" or not wrongs:
                    w = fixed
                else:
                    w = wrongs[min(int(wr[j] * len(wrongs)), len(wrongs) - 1)]
                out = None
                if sign < 0 and gold >= 0:
                    out = reject(m, gold)
                if out is None:
                    out = endorse(m, w) if w is not None else m   # no wrong answer: unchanged
            elif sign > 0:
                out = endorse(m, c, prefer=orig_target_agent)
            else:
                out = reject(m, c, prefer=orig_target_agent)
                if out is None:
                    out = same(m, force="abstain")
                    dropped.append(m.id)
            if out is not m and m.id not in redirected and m.id not in dropped:
                rewritten.append(m.id)
        # the automaton's view of the emitted move
        new.append(out)
        agent_of[out.id] = out.agent
        if out.force in ("propose", "vote"):
            g = first[memo(out.answer)]
            ans[out.id] = g
            endorsed.setdefault(out.agent, set()).add(g)
        elif out.force == "concede":
            ans[out.id] = ans[out.target]
            if agent_of[out.target] != out.agent:
                endorsed.setdefault(out.agent, set()).add(ans[out.target])
        else:
            ans[out.id] = None

    meta = dict(meta_base)
    meta.update(seats=sorted(bad & {m.agent for m in moves}, key=[m.agent for m in moves].index),
                wrong=None if target == "random-wrong" or fixed is None else display[fixed],
                informative=n_info, redirected=redirected, rewritten=rewritten, dropped=dropped)
    extra = dict(trace.extra)
    extra["adversary"] = meta
    out = Trace(trace.task_id, tuple(new), trace.candidates, trace.gold, trace.cluster,
                extra=extra)
    return mark_field_checked(out) if field_checked(trace) else out


def corrupt_traces(traces: Sequence[Trace], p_wrong: float, *, k: int = 1,
                   mode: str = "persistent", seats: Sequence[str | int] | None = None,
                   seed: int = 0, target: str = "fixed-wrong",
                   normalizer: Normalizer = default_normalizer,
                   fallback_answer: str = "(adversary)", check: bool = True) -> list[Trace]:
    """Count-level adversary ([BDA] Appendix F.1, F.3): redirect corrupted seats' moves.

    Each informative move of a corrupted seat becomes, with probability ``p_wrong``, a move
    inconsistent with the gold answer (the table in the module docstring); every other move keeps
    its signed endorsement. Works on any admissible trace set whose tasks all have a gold.

    Args:
      traces: admissible traces (strict automaton), every one with a ``gold``.
      p_wrong: redirection probability per informative move of a corrupted seat, in [0, 1].
      k: number of corrupted seats (``0``: none).
      mode: ``"persistent"``: the same seats on every task — ``seats`` (agent names or indices
        into the first-seen agent order, the order :func:`bda_jax.tally` uses; ``k`` is then
        ignored) or else the first ``k`` agents of that order. ``"rotating"``: ``k`` seats drawn
        afresh per task among the agents that move in it (restricted to ``seats`` if given).
      seed: seed of the per-task random streams (module docstring); equal seeds, equal output.
      target: ``"fixed-wrong"`` (one seeded wrong candidate per task, shared by every redirected
        move of the task) or ``"random-wrong"`` (a fresh wrong candidate per redirected move).
      normalizer: the answer normalizer the traces are read with.
      fallback_answer: the wrong answer used on a task with an open candidate set (no
        ``candidates``) whose every move named the gold; a task with a fixed candidate list and
        no wrong candidate is left unchanged.
      check: run the strict automaton over every output trace (a guard; cheap).

    Returns:
      New traces (same order, ids, agents, rounds). ``Trace.extra["adversary"]`` records the
      regime (``mode``, ``k``, ``p_wrong``, ``seed``, ``target``), the task's corrupted
      ``seats``, its fixed ``wrong`` answer, the number of ``informative`` moves of the corrupted
      seats and the ids of the moves ``redirected``, ``rewritten`` (re-pointed to keep their
      meaning) and ``dropped`` (made abstains: no admissible move kept their meaning).

    >>> from bda_jax.simulate import simulate_council
    >>> clean = simulate_council(0, 20, [0.74, 0.68, 0.68])
    >>> bad = corrupt_traces(clean, 1.0, k=2)
    >>> bad[0].extra["adversary"]["seats"], corruption_summary(bad)["redirect_rate"]
    (['A1', 'A2'], 1.0)
    """
    p = _check_p(p_wrong)
    k = _check_int(k, "k")
    seed = _check_int(seed, "seed")
    if mode not in _MODES:
        raise DataError(f"mode must be one of {_MODES}, got {mode!r}", field="mode")
    if target not in _TARGETS:
        raise DataError(f"target must be one of {_TARGETS}, got {target!r}", field="target")
    if not isinstance(fallback_answer, str) or not normalizer(fallback_answer):
        raise DataError(f"fallback_answer must be a string with an answer (not empty after "
                        f"normalization), got {fallback_answer!r}",
                        field="fallback_answer")
    traces = list(traces)
    if not traces:
        raise DataError("no traces to corrupt", field="traces")
    for t in traces:
        if t.gold is None:
            raise DataError("every task needs a gold answer to be corrupted (a wrong answer is "
                            "defined against it)", task_id=t.task_id, field="gold")
    agents = _agent_order(traces)
    if seats is not None:
        if isinstance(seats, (str, int)):
            seats = [seats]
        pool = _resolve_seats(seats, agents)
    else:
        pool = None
    if mode == "persistent":
        fixed_bad = set(pool) if pool is not None else set(agents[:k])
    memo = memoized(normalizer)
    meta_base = {"mode": mode, "k": len(fixed_bad) if mode == "persistent" else k,
                 "p_wrong": p, "seed": seed, "target": target}

    out = []
    for t in traces:
        rng = _task_rng(seed, t.task_id)
        present = list(dict.fromkeys(m.agent for m in t.moves))
        candidates_for_draw = present if pool is None else [a for a in present if a in pool]
        perm = rng.permutation(len(present))             # drawn in every mode (nested streams)
        if mode == "persistent":
            bad = fixed_bad
        else:
            order = [present[i] for i in perm if present[i] in candidates_for_draw]
            bad = set(order[:k])

        def draws(n, rng=rng):
            w_u = rng.random()
            u = rng.random(n)
            wr = rng.random(n)
            return w_u, u, wr

        out.append(_corrupt_one(t, p, bad, draws, target, normalizer, memo, fallback_answer,
                                meta_base))
    if check:
        for t in out:
            resolve_trace(t, normalizer=normalizer)
    return out


def corruption_summary(traces: Sequence[Trace]) -> dict:
    """Totals over ``Trace.extra["adversary"]``: informative moves of the corrupted seats, how many
    were redirected (``redirect_rate`` = redirected / informative), re-pointed and dropped."""
    tot = {"tasks": 0, "informative": 0, "redirected": 0, "rewritten": 0, "dropped": 0}
    for t in traces:
        meta = t.extra.get("adversary")
        if meta is None:
            continue
        tot["tasks"] += 1
        tot["informative"] += meta["informative"]
        for key in ("redirected", "rewritten", "dropped"):
            tot[key] += len(meta[key])
    tot["redirect_rate"] = tot["redirected"] / tot["informative"] if tot["informative"] else None
    return tot


# ----------------------------------------------------------------------------------- the study
_METRICS = ("accuracy", "ece_ew", "ece_em", "brier", "brier_mc", "nll", "auroc", "n")


def _regime_name(mode: str, k: int) -> str:
    return f"{mode} k={k}"


@dataclass
class DoseResponse:
    """Result of :func:`dose_response`.

    ``rows``: tidy, one per (regime, p_wrong, arm) with ``regime`` (e.g. ``"persistent k=2"``),
    ``mode``, ``k``, ``p_wrong``, ``arm`` and the metric columns of :func:`bda_jax.evaluate`
    (accuracy, ece_ew, ece_em, brier, brier_mc, nll, auroc, n) plus ``redirect_rate``.
    """

    rows: list[dict]
    arms: tuple[str, ...]
    p_grid: tuple[float, ...]
    regimes: tuple[tuple[str, int], ...]
    seed: int
    folds: np.ndarray = field(repr=False)
    label_budget: int | None = None
    target: str = "fixed-wrong"

    def value(self, regime: str, arm: str, p_wrong: float, metric: str = "accuracy"):
        for r in self.rows:
            if r["regime"] == regime and r["arm"] == arm and math.isclose(r["p_wrong"], p_wrong):
                return r[metric]
        raise KeyError((regime, arm, p_wrong))

    def pivot(self, metric: str = "accuracy") -> dict[str, dict[str, list[float]]]:
        """``{regime: {arm: [metric at each p in p_grid]}}`` — the series of each curve."""
        return {_regime_name(m, k): {a: [self.value(_regime_name(m, k), a, p, metric)
                                         for p in self.p_grid] for a in self.arms}
                for m, k in self.regimes}

    def to_json(self) -> dict:
        return {"schema_version": 1, "arms": list(self.arms), "p_grid": list(self.p_grid),
                "regimes": [list(r) for r in self.regimes], "seed": self.seed,
                "label_budget": self.label_budget, "target": self.target, "rows": self.rows,
                "folds": np.asarray(self.folds).tolist()}

    def to_markdown(self, metric: str = "accuracy", digits: int = 3) -> str:
        """Table 12's layout: one block per regime, arms as rows, p_wrong as columns."""
        piv = self.pivot(metric)
        head = "| regime | arm | " + " | ".join(f"{p:g}" for p in self.p_grid) + " |"
        lines = [head, "|---|---|" + "---|" * len(self.p_grid)]
        for regime, series in piv.items():
            for arm, vals in series.items():
                lines.append(f"| {regime} | {arm} | "
                             + " | ".join(f"{v:.{digits}f}" for v in vals) + " |")
        return "\n".join(lines)


def _fingerprint(traces, arms, folds, seed, label_budget, target, n_resamples) -> str:
    h = hashlib.sha256()
    for t in traces:
        h.update(json.dumps([t.task_id, t.gold, t.cluster, list(t.candidates or ()),
                             [m.to_json() for m in t.moves]], sort_keys=True,
                            default=str).encode())
    h.update(json.dumps([list(arms), np.asarray(folds).tolist(), seed, label_budget,
                         target, n_resamples]).encode())
    return h.hexdigest()


def dose_response(traces: Sequence[Trace],
                  arms: Sequence[str] = ("majority", "bda-per-agent", "bda-confusion"),
                  p_grid: Sequence[float] = DEFAULT_P_GRID,
                  regimes: Sequence[tuple[str, int]] = DEFAULT_REGIMES,
                  folds=5, seed: int = 0, *, target: str = "fixed-wrong",
                  label_budget: int | None = None, n_resamples: int = 1000,
                  cache=None, progress=None) -> DoseResponse:
    """The dose-response grid of [BDA] Appendix F.3 (Table 12) on any labeled trace set.

    For every regime ``(mode, k)`` and ``p_wrong`` in ``p_grid`` the traces are corrupted with
    :func:`corrupt_traces` (``seed``, ``target``) — the calibration folds see the corruption too
    (a persistent adversary is on every task) — and ``arms`` are evaluated with
    :func:`bda_jax.evaluate` on the same outer folds (``folds``: a number, made once from the
    clean traces with ``seed``, or explicit fold ids) and the same agent order. p_wrong = 0 is the
    clean council, evaluated once and shared by the regimes.

    ``cache``: where finished cells are kept so that an interrupted grid — even one killed by
    SIGKILL — resumes: ``None``, the path of a :class:`~bda_jax.report.CellCache` (append-only
    JSON Lines, fingerprinted by the traces, arms, folds and settings: a cache of another study
    is refused with :class:`ArtifactError`) or a cell store (an object with
    ``get_or_compute(key, compute)``; its keys are ``"clean"`` and ``"<mode>|<k>|<p_wrong>"``).
    ``progress``: optional callable receiving ``(regime, p_wrong, seconds)`` after each computed
    cell.
    """
    traces = list(traces)
    arms = tuple(dict.fromkeys(arms))
    if not arms:
        raise DataError("arms is empty", field="arms")
    p_grid = tuple(_check_p(p) for p in p_grid)
    regimes = tuple((str(m), _check_int(k, "k")) for m, k in regimes)
    for m, _ in regimes:
        if m not in _MODES:
            raise DataError(f"regime mode must be one of {_MODES}, got {m!r}", field="regimes")
    for t in traces:
        if t.gold is None:
            raise DataError("every task needs a gold answer", task_id=t.task_id, field="gold")
    clean = tally(traces)
    agents = clean.agents
    fold_ids = make_folds(clean, folds, seed) if isinstance(folds, int) else np.asarray(folds)
    store = open_cells(cache, lambda: _fingerprint(traces, arms, fold_ids, seed, label_budget,
                                                   target, n_resamples))

    def compute(key, mode, k, p, regime):
        t0 = time.perf_counter()
        bad = traces if key == "clean" else corrupt_traces(
            traces, p, k=k, mode=mode, seed=seed, target=target)
        ev = evaluate(bad, list(arms), folds=fold_ids, label_budget=label_budget,
                      seed=seed, n_resamples=n_resamples, agents=agents)
        summ = corruption_summary(bad) if key != "clean" else {"redirect_rate": 0.0}
        value = {"table": [{c: r[c] for c in ("arm",) + _METRICS}
                           for r in ev.table if r["arm"] in arms],
                 "redirect_rate": summ["redirect_rate"]}
        if progress is not None:
            progress(regime, p, time.perf_counter() - t0)
        return value

    cells, rows = {}, []
    for mode, k in regimes:
        regime = _regime_name(mode, k)
        for p in p_grid:
            key = "clean" if p == 0 or k == 0 else f"{mode}|{k}|{p!r}"
            if key not in cells:                # the clean cell is shared by the regimes
                cells[key] = cell(store, key, lambda key=key, mode=mode, k=k, p=p, regime=regime:
                                  compute(key, mode, k, p, regime))
            by_arm = {r["arm"]: r for r in cells[key]["table"]}
            for arm in arms:
                row = {"regime": regime, "mode": mode, "k": k, "p_wrong": p, "arm": arm}
                row.update({c: by_arm[arm][c] for c in _METRICS})
                row["redirect_rate"] = cells[key]["redirect_rate"]
                rows.append(row)
    return DoseResponse(rows, arms, p_grid, regimes, seed, fold_ids, label_budget, target)
