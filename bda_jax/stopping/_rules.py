"""DASE stopping rules ([DASE]: §3 "DASE-Spatial", Appendix H.1-H.2; docs/stopping.md) in pure JAX.

Two rules decide, round by round, when an ensemble of ``n`` workers has deliberated enough:

* **spatial arena** (DASE-Spatial): an evidence score g_t (Eq. 1, Appendix H.1) drives the
  terminal values V_R = g - cx (W - x), V_L = (1 - g) - cx (x + W) (Appendix H.2); the position x
  moves one step toward the larger value (waits when both are <= 0, a tie goes right). Touching
  +W commits the plurality of this round's answers (``right_wall``), touching -W the plurality of
  every answer so far (``left_wall``); after L rounds the plurality of every answer so far is
  committed as a ``fallback`` and flagged for review.
* **heuristic** (DASE Neuro, streak k): the round winner is the plurality of the round's answers
  and g its share; stop at round 1 on unanimity, or once the same winner has won k rounds in a
  row with g >= 0.35 + 0.4 exp(-0.5 t) (``consensus``); else the plurality of every answer at L.

Batch encoding: a batch of problems is an int32 array ``ids`` [B, R, n] of per-problem answer ids
(-1 = empty / no answer), with ids given in first-seen order (round by round, slot by slot) so
that "ties go to the first seen" is "ties go to the smallest id", and a bool ``mask`` [B, R]
marking the recorded rounds (a prefix; the rest is padding). Each rule is one per-round function
over a small NamedTuple state; ``jax.lax.scan`` runs it over rounds, ``jax.vmap`` over problems
and over a grid of W (or k), all in one jitted call. The live :class:`Stopper` calls the same
per-round function. Plain helpers replay the released logs (:func:`replay_history`) and
summarize them (:func:`commit_partition`, :func:`routing_gap`, :func:`accuracy_coverage`).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc

from .._core.errors import DataError
from ..datasets._llm import _benchmark_of, _idx, _jsonl_records, normalize_dase_answer

__all__ = [
    "COMMITS", "RULES", "EncodedBatch", "HistoryBatch", "ReplayRecord", "StopDecision",
    "StopResult", "Stopper", "accuracy_coverage", "commit_partition", "encode_answers",
    "evidence_score", "file_settings", "heuristic_rule", "load_history_batch", "replay_history",
    "resimulate", "round_plurality", "routing_gap", "spatial_rule",
]

#: Commit codes in the result arrays: 0 still running, then the commit kinds.
COMMITS = ("running", "right_wall", "left_wall", "fallback", "consensus")
RUNNING, RIGHT, LEFT, FALLBACK, CONSENSUS = range(5)
RULES = ("spatial", "heuristic")
#: Commits that a router dispatches without review (the paper's high-confidence bucket).
DISPATCHED = ("right_wall", "consensus")

_TRACES = Counter()          # how often each batched rule was traced (tests check compile-once)


# ----------------------------------------------------------------------------- per-round pieces
@partial(jax.jit, static_argnames="n")
def evidence_score(r, n_valid, n: int = 5, w: float = 0.2, empty_g: float = 0.0):
    """Evidence score g_t of Eq. (1) ([DASE] Appendix H.1), elementwise.

    g = [I_{1-a}(r+1, n-r+1) - I_{1/2}(r+1, n-r+1)] / [I_{1-a}(r+1, n-r+1) - I_a(r+1, n-r+1)]
    with a = w * eps / n, eps = n - n_valid empty workers and r the count of the round's most
    common answer; I is the regularized incomplete beta function. A round where every worker is
    empty scores ``empty_g`` (0.0: the paper's correction, §3; the released logs used 0.5).
    ``r``, ``n_valid``: integer arrays of any (broadcastable) shape; returns float32 of that shape.

    At eps = 0 and n = 5, g = 1 - I_{1/2}(r+1, 6-r) is exactly 22/64, 42/64, 57/64, 63/64 for
    r = 2..5 (logged as .3438, .6562, .8906, .9844; float32 lands within 1e-7):

    >>> [round(float(v) * 64, 4) for v in evidence_score(jnp.arange(2, 6), 5)]
    [22.0, 42.0, 57.0, 63.0]
    """
    r = jnp.asarray(r, jnp.float32)
    n_valid = jnp.asarray(n_valid)
    a = w * (n - n_valid).astype(jnp.float32) / n
    r, a = jnp.broadcast_arrays(r, a)
    p, q = r + 1.0, n - r + 1.0
    at = jnp.stack(jnp.broadcast_arrays(1.0 - a, jnp.full_like(a, 0.5), a))   # one betainc
    hi, mid, lo = betainc(p[None], q[None], at)
    g = (hi - mid) / (hi - lo)
    return jnp.where(n_valid == 0, jnp.asarray(empty_g, jnp.float32), g)


def round_plurality(ids_t):
    """Plurality of one round: ``ids_t`` [..., n] int answer ids (-1 empty) ->
    (winner id [...] (-1 if the round is empty), its count r [...], non-empty count [...]).

    Ties go to the answer said first in slot order (Python's ``Counter.most_common``).

    >>> [int(v) for v in round_plurality(jnp.array([3, 1, 1, 3, -1]))]
    [3, 2, 4]
    """
    valid = ids_t >= 0
    same = (ids_t[..., :, None] == ids_t[..., None, :]) & valid[..., None, :]
    count = jnp.where(valid, same.sum(-1), 0)                       # [..., n]
    j = jnp.argmax(count, axis=-1)                                  # first slot with the max
    r = jnp.take_along_axis(count, j[..., None], -1)[..., 0]
    winner = jnp.where(r > 0, jnp.take_along_axis(ids_t, j[..., None], -1)[..., 0], -1)
    return winner, r, valid.sum(-1)


def _all_plurality(counts):
    """Plurality of every answer so far from per-id counts [V]; ties to the smallest id."""
    return jnp.where(counts.max() > 0, jnp.argmax(counts), -1).astype(jnp.int32)


class ArenaParams(NamedTuple):
    W: jax.Array              # [] int32 wall position
    empty_g: jax.Array        # [] float32
    w: jax.Array              # [] float32
    cx: jax.Array             # [] float32


class HeuristicParams(NamedTuple):
    k: jax.Array              # [] int32 streak length


class State(NamedTuple):
    """Per-problem state carried over rounds (a pytree; add a leading [B] axis for batches)."""

    t: jax.Array              # [] int32 rounds consumed
    x: jax.Array              # [] int32 arena position (spatial)
    streak: jax.Array         # [] int32 consecutive equal winners (heuristic)
    prev: jax.Array           # [] int32 last round winner (heuristic; -1 none)
    counts: jax.Array         # [V] int32 every non-empty answer so far, by id
    commit: jax.Array         # [] int32 index into COMMITS
    answer: jax.Array         # [] int32 committed answer id (-1 none)


def init_state(n_vocab: int) -> State:
    z = jnp.zeros((), jnp.int32)
    return State(z, z, z, z - 1, jnp.zeros((n_vocab,), jnp.int32), z, z - 1)


def _tally(state: State, ids_t, live):
    hits = (ids_t[:, None] == jnp.arange(state.counts.shape[0])[None, :]).sum(0)
    return state.counts + jnp.where(live, hits, 0).astype(jnp.int32)


def spatial_step(params: ArenaParams, state: State, ids_t, active, last):
    """One round of the spatial arena ([DASE] §3, Appendix H.2) for one problem.

    ``ids_t`` [n] answer ids (-1 empty); ``active`` [] bool: the round exists and t < L; ``last``
    [] bool: no round follows it (commit the fallback if still running). A committed or inactive
    problem keeps its state. Returns (state, (g, x, winner)) with g NaN on skipped rounds.
    """
    live = active & (state.commit == RUNNING)
    n = ids_t.shape[-1]
    t = state.t + live.astype(jnp.int32)
    winner, r, n_valid = round_plurality(ids_t)
    counts = _tally(state, ids_t, live)
    g = evidence_score(r, n_valid, n, params.w, params.empty_g)
    x0 = state.x
    vr = g - params.cx * (params.W - x0)
    vl = (1.0 - g) - params.cx * (x0 + params.W)
    move = jnp.where(jnp.maximum(vr, vl) <= 0, 0, jnp.where(vr >= vl, 1, -1))
    x = x0 + jnp.where(live, move, 0)
    right = live & (x >= params.W)
    left = live & ~right & (x <= -params.W)
    fall = live & last & ~right & ~left
    everyone = _all_plurality(counts)
    commit = jnp.select([right, left, fall], [RIGHT, LEFT, FALLBACK], state.commit)
    answer = jnp.select([right, left | fall], [winner, everyone], state.answer)
    new = state._replace(t=t, x=x, counts=counts, commit=commit.astype(jnp.int32),
                         answer=answer.astype(jnp.int32))
    return new, (jnp.where(live, g, jnp.nan), x, jnp.where(live, winner, -1))


def heuristic_step(params: HeuristicParams, state: State, ids_t, active, last):
    """One round of the heuristic (neuro) rule with streak k (docs/stopping.md) for one problem.

    Winner = plurality of the round's answers, g = its share of the non-empty answers; an empty
    round has winner -1, g = 0 and resets the streak to 0. Stop (``consensus``) if t == 1 and
    g == 1, or streak >= k and g >= 0.35 + 0.4 exp(-0.5 t); a running problem commits the
    plurality of every answer at its last round (``fallback``). Shapes as in :func:`spatial_step`;
    returns (state, (g, streak, winner)).
    """
    live = active & (state.commit == RUNNING)
    t = state.t + live.astype(jnp.int32)
    winner, r, n_valid = round_plurality(ids_t)
    counts = _tally(state, ids_t, live)
    g = jnp.where(n_valid > 0, r / jnp.maximum(n_valid, 1).astype(jnp.float32), 0.0)
    streak = jnp.where(n_valid == 0, 0, jnp.where(winner == state.prev, state.streak + 1, 1))
    threshold = 0.35 + 0.4 * jnp.exp(-0.5 * t.astype(jnp.float32))
    stop = live & (((t == 1) & (n_valid > 0) & (r == n_valid))
                   | ((streak >= params.k) & (g >= threshold)))
    fall = live & last & ~stop
    commit = jnp.select([stop, fall], [CONSENSUS, FALLBACK], state.commit)
    answer = jnp.select([stop, fall], [winner, _all_plurality(counts)], state.answer)
    new = state._replace(t=t, streak=jnp.where(live, streak, state.streak).astype(jnp.int32),
                         prev=jnp.where(live, winner, state.prev).astype(jnp.int32),
                         counts=counts, commit=commit.astype(jnp.int32),
                         answer=answer.astype(jnp.int32))
    return new, (jnp.where(live, g, jnp.nan), new.streak, jnp.where(live, winner, -1))


# ----------------------------------------------------------------------------- batched rules
class StopResult(NamedTuple):
    """Outcome of a rule over a batch ([G] leads every field when a grid was given).

    ``commit`` [B] index into :data:`COMMITS`; ``answer`` [B] committed id (-1 none); ``steps``
    [B] rounds consumed; ``final_x`` [B] last arena position (0 for the heuristic); ``g`` [B, R]
    per-round score (NaN after the commit); ``x`` [B, R] position (spatial) or streak
    (heuristic) after each round; ``winner`` [B, R] round plurality id (-1 empty / not run).
    """

    commit: jax.Array
    answer: jax.Array
    steps: jax.Array
    final_x: jax.Array
    g: jax.Array
    x: jax.Array
    winner: jax.Array


def _run_one(step, params, ids, mask, L):
    """scan ``step`` over the rounds of one problem: ids [R, n], mask [R] -> StopResult."""
    R, n = ids.shape
    active = mask & (jnp.arange(R) < L)
    last = active & ~jnp.concatenate([active[1:], jnp.zeros((1,), bool)])

    def body(state, xs):
        return step(params, state, *xs)

    state, (g, x, winner) = jax.lax.scan(body, init_state(R * n), (ids, active, last))
    return StopResult(state.commit, state.answer, state.t, state.x, g, x, winner)


@jax.jit
def _spatial_grid(ids, mask, W, L, empty_g, w, cx):
    _TRACES["spatial"] += 1
    one = lambda p, i, m: _run_one(spatial_step, p, i, m, L)     # noqa: E731
    over_b = jax.vmap(one, in_axes=(None, 0, 0))
    params = ArenaParams(W, jnp.broadcast_to(empty_g, W.shape), jnp.broadcast_to(w, W.shape),
                         jnp.broadcast_to(cx, W.shape))
    return jax.vmap(over_b, in_axes=(0, None, None))(params, ids, mask)


@jax.jit
def _heuristic_grid(ids, mask, k, L):
    _TRACES["heuristic"] += 1
    one = lambda p, i, m: _run_one(heuristic_step, p, i, m, L)   # noqa: E731
    over_b = jax.vmap(one, in_axes=(None, 0, 0))
    return jax.vmap(over_b, in_axes=(0, None, None))(HeuristicParams(k), ids, mask)


def _check_batch(ids, mask):
    ids = jnp.asarray(ids, jnp.int32)
    if ids.ndim != 3:
        raise DataError(f"ids must be [B, R, n], got shape {ids.shape}", field="ids")
    mask = (jnp.ones(ids.shape[:2], bool) if mask is None else jnp.asarray(mask, bool))
    if mask.shape != ids.shape[:2]:
        raise DataError(f"mask must be [B, R] = {ids.shape[:2]}, got {mask.shape}",
                        field="mask")
    return ids, mask


def _grid(value, name):
    arr = np.asarray(value)
    if arr.ndim > 1 or not np.issubdtype(arr.dtype, np.integer) or (arr < 1).any():
        raise DataError(f"{name} must be a positive integer or a 1-D list of them, got {value!r}",
                        field=name)
    return jnp.asarray(np.atleast_1d(arr), jnp.int32), arr.ndim == 0


def _padded(ids, mask, values):
    """Pad B to a power of two >= 128, R to >= 15 rounds and the grid to a multiple of 4 values,
    so that batches of varied sizes (and single values vs small grids) share one compilation;
    padding problems are all-empty and unmasked, padding grid values repeat the first."""
    B, R, _ = ids.shape
    Bp, Rp = max(128, 1 << (B - 1).bit_length()), max(R, 15)
    ids = jnp.pad(ids, ((0, Bp - B), (0, Rp - R), (0, 0)), constant_values=-1)
    mask = jnp.pad(mask, ((0, Bp - B), (0, Rp - R)))
    values = jnp.concatenate([values, jnp.repeat(values[:1], -len(values) % 4)])
    return ids, mask, values


def _unpad(res: StopResult, G: int, B: int, R: int, scalar: bool) -> StopResult:
    out = StopResult(*(f[:G, :B] if f.ndim == 2 else f[:G, :B, :R] for f in res))
    return StopResult(*(f[0] for f in out)) if scalar else out


def spatial_rule(ids, mask=None, W=4, *, L: int = 15, empty_g: float = 0.0, w: float = 0.2,
                 cx: float = 0.01) -> StopResult:
    """DASE-Spatial over a batch ([DASE] §3, Eq. 1, Appendix H.2), one compiled call.

    ``ids`` [B, R, n] int answer ids (-1 empty; see :func:`encode_answers`), ``mask`` [B, R]
    recorded rounds (default all). ``W``: an int, or a 1-D grid [G] of ints, which puts a leading
    [G] axis on every result field (the grid is vmapped, not looped: one compilation for any grid
    of the same length). Rounds after ``L`` are ignored; a problem still running at its last
    round (L, or its last recorded round) commits the fallback.

    >>> ids = jnp.array([[[0, 0, 0, 0, 0]] * 3])             # unanimous for 3 rounds
    >>> res = spatial_rule(ids, W=2)
    >>> COMMITS[int(res.commit[0])], int(res.steps[0]), int(res.answer[0])
    ('right_wall', 2, 0)
    """
    ids, mask = _check_batch(ids, mask)
    Ws, scalar = _grid(W, "W")
    shape = (len(Ws),) + ids.shape[:2]
    ids, mask, Ws = _padded(ids, mask, Ws)
    res = _spatial_grid(ids, mask, Ws, jnp.int32(L), jnp.float32(empty_g), jnp.float32(w),
                        jnp.float32(cx))
    return _unpad(res, *shape, scalar)


def heuristic_rule(ids, mask=None, k=4, *, L: int = 15) -> StopResult:
    """DASE Neuro / heuristic streak rule (docs/stopping.md) over a batch, one compiled call.

    Shapes as :func:`spatial_rule`; ``k`` an int or a 1-D grid [G]. ``x`` holds the streak.

    >>> ids = jnp.array([[[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]]])
    >>> res = heuristic_rule(ids, k=2)
    >>> COMMITS[int(res.commit[0])], int(res.steps[0])
    ('consensus', 2)
    """
    ids, mask = _check_batch(ids, mask)
    ks, scalar = _grid(k, "k")
    shape = (len(ks),) + ids.shape[:2]
    ids, mask, ks = _padded(ids, mask, ks)
    return _unpad(_heuristic_grid(ids, mask, ks, jnp.int32(L)), *shape, scalar)


# ----------------------------------------------------------------------------- encoding
def _answer_key(answer, normalize: bool, benchmark: str):
    """The identity of one answer: None if empty; else the raw string (what the DASE runtime
    compared) or its :func:`normalize_dase_answer` form."""
    if answer is None:
        return None
    if not isinstance(answer, str):
        raise DataError(f"an answer must be a string or None, got {type(answer).__name__}",
                        field="answers")
    key = normalize_dase_answer(answer, benchmark)
    if key is None or normalize:
        return key
    return answer


class EncodedBatch(NamedTuple):
    """``ids`` [B, R, n] int32 (-1 empty), ``mask`` [B, R] bool recorded rounds, ``vocab`` one
    tuple of answer strings per problem (id j is ``vocab[b][j]``, first seen first)."""

    ids: jax.Array
    mask: jax.Array
    vocab: tuple


def encode_answers(problems: Sequence[Sequence[Sequence[str | None]]], *, n: int | None = None,
                   rounds: int | None = None, normalize: bool = False,
                   benchmark: str = "aime") -> EncodedBatch:
    """Encode problems (each a list of rounds, each a list of n answers) as :class:`EncodedBatch`.

    ``None``, ``"empty"`` and ``""`` (anything :func:`normalize_dase_answer` maps to None) are
    empty. Answers are compared as given (the DASE runtime's string identity) unless
    ``normalize=True`` merges surface forms (``625`` = ``$\\boxed{625}$``, ``A`` = ``(A)``).
    ``rounds`` pads R (default: the longest problem).

    >>> enc = encode_answers([[["7", "7", None, "3", "7"], ["3", "3", "3", "3", "empty"]]])
    >>> enc.ids.tolist(), enc.vocab
    ([[[0, 0, -1, 1, 0], [1, 1, 1, 1, -1]]], (('7', '3'),))
    """
    if not problems:
        raise DataError("no problem to encode", field="problems")
    n = n or max(len(r) for p in problems for r in p)
    R = max(rounds or 0, max(len(p) for p in problems))
    ids = np.full((len(problems), R, n), -1, np.int32)
    mask = np.zeros((len(problems), R), bool)
    vocab = []
    for b, problem in enumerate(problems):
        seen: dict[str, int] = {}
        for t, answers in enumerate(problem):
            if len(answers) != n:
                raise DataError(f"problem {b} round {t + 1} has {len(answers)} answers, "
                                f"expected {n}", field="answers")
            for s, ans in enumerate(answers):
                key = _answer_key(ans, normalize, benchmark)
                if key is not None:
                    ids[b, t, s] = seen.setdefault(key, len(seen))
            mask[b, t] = True
        vocab.append(tuple(seen))
    return EncodedBatch(jnp.asarray(ids), jnp.asarray(mask), tuple(vocab))


# ----------------------------------------------------------------------------- live stopper
class StopDecision(NamedTuple):
    """One round's verdict: ``stop``; ``commit`` (a :data:`COMMITS` kind, None while running);
    ``answer`` (None while running or when nobody answered); ``x`` the arena position (streak
    for the heuristic); ``g`` this round's score; ``step`` rounds seen."""

    stop: bool
    commit: str | None
    answer: str | None
    x: int
    g: float
    step: int


_spatial_step_jit = jax.jit(spatial_step)
_heuristic_step_jit = jax.jit(heuristic_step)


class Stopper:
    """Live DASE stopping: feed each round's answers, read whether to stop.

    ``Stopper(rule="spatial", W=4, L=15, empty_g=0.0)`` or ``Stopper(rule="heuristic", k=4)``;
    ``update(answers)`` takes the round's n answers (str, or None / "empty" / "" for none) and
    returns a :class:`StopDecision`. It runs the same per-round function as the batched rules.

    >>> s = Stopper("spatial", W=2)
    >>> s.update(["5", "5", "5", "5", "5"]).stop, s.update(["5", "5", "5", "5", "2"])[:3]
    (False, (True, 'right_wall', '5'))
    """

    def __init__(self, rule: str = "spatial", *, W: int = 4, k: int = 4, L: int = 15, n: int = 5,
                 empty_g: float = 0.0, w: float = 0.2, cx: float = 0.01,
                 normalize: bool = False, benchmark: str = "aime"):
        if rule not in RULES:
            raise DataError(f"rule must be one of {RULES}, got {rule!r}", field="rule")
        for name, v in (("W", W), ("k", k), ("L", L), ("n", n)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise DataError(f"{name} must be a positive integer, got {v!r}", field=name)
        self.rule, self.L, self.n = rule, int(L), int(n)
        self.normalize, self.benchmark = normalize, benchmark
        if rule == "spatial":
            self._params = ArenaParams(jnp.int32(W), jnp.float32(empty_g), jnp.float32(w),
                                       jnp.float32(cx))
            self._step = _spatial_step_jit
        else:
            self._params = HeuristicParams(jnp.int32(k))
            self._step = _heuristic_step_jit
        self.reset()

    def reset(self) -> None:
        self._vocab: dict[str, int] = {}
        self._state = init_state(self.n * self.L)
        self.decision: StopDecision | None = None

    def update(self, answers: Sequence[str | None]) -> StopDecision:
        if self.decision is not None and self.decision.stop:
            raise DataError("the stopper has already committed; call reset()", field="answers")
        if len(answers) != self.n:
            raise DataError(f"expected {self.n} answers, got {len(answers)}", field="answers")
        ids = [-1 if (key := _answer_key(a, self.normalize, self.benchmark)) is None
               else self._vocab.setdefault(key, len(self._vocab)) for a in answers]
        last = int(self._state.t) + 1 >= self.L
        self._state, (g, x, _) = self._step(self._params, self._state,
                                            jnp.asarray(ids, jnp.int32), jnp.bool_(True),
                                            jnp.bool_(last))
        commit = int(self._state.commit)
        names = list(self._vocab)
        answer = int(self._state.answer)
        self.decision = StopDecision(commit != RUNNING, None if commit == RUNNING
                                     else COMMITS[commit],
                                     names[answer] if answer >= 0 else None, int(x), float(g),
                                     int(self._state.t))
        return self.decision


# ----------------------------------------------------------------------------- log replay
def _from_name(pattern_a: str, pattern_b: str, stem: str):
    m = re.search(pattern_a, stem) or re.search(pattern_b, stem)
    return int(m.group(1)) if m else None


def file_settings(path) -> dict:
    """Rule, W, k and L that a DASE history file name states (None where it says nothing).

    >>> file_settings("safe_DASE_Bellman_History_8Bllama_8_L15_alpha0_2.jsonl")
    {'rule': 'spatial', 'W': 8, 'k': None, 'L': 15}
    >>> file_settings("safe_DASE_Forensics_DDM_qw_8k_15L.jsonl")
    {'rule': 'heuristic', 'W': None, 'k': 8, 'L': 15}
    """
    stem = Path(str(path)).stem
    rule = "spatial" if "Bellman" in stem else "heuristic" if "DDM" in stem else None
    W = k = None
    if rule == "spatial":
        nums = re.findall(r"(?<=_)(\d+)(?=_)", stem.split("History", 1)[-1])
        W = int(nums[0]) if nums else None
    elif rule == "heuristic":
        k = _from_name(r"k(\d+)", r"(\d+)k", stem)
    return {"rule": rule, "W": W, "k": k, "L": _from_name(r"L(\d+)", r"_(\d+)L", stem)}


class HistoryBatch(NamedTuple):
    """A DASE history file as arrays: ``batch`` (:class:`EncodedBatch`), ``idx`` [B] problem
    ids, ``benchmark``, ``settings`` (:func:`file_settings`), ``logged`` the records' dicts."""

    batch: EncodedBatch
    idx: tuple
    benchmark: str
    settings: dict
    logged: tuple


def load_history_batch(path, *, normalize: bool = False, n: int = 5) -> HistoryBatch:
    """Read a ``safe_DASE_*_History_*.jsonl`` / ``*_Forensics_*`` file into one batch.

    Each line's ``history[t]["norms"]`` (n answers) is round t+1; answers are encoded by
    :func:`encode_answers`. Malformed records raise :class:`DataError` naming file, line, idx.
    """
    path = Path(path)
    problems, idxs, logged = [], [], []
    bench = None
    for lineno, rec in _jsonl_records(path):
        where = dict(file=path, line=lineno, task_id=rec.get("idx"))
        if "idx" not in rec:
            raise DataError("the record has no 'idx'", field="idx", **where)
        idxs.append(_idx(rec["idx"], where))
        bench = bench or _benchmark_of(path, rec.get("category"))
        history = rec.get("history")
        if not isinstance(history, list) or not history:
            raise DataError("'history' must be a non-empty list of rounds", field="history",
                            **where)
        rounds = []
        for t, step in enumerate(history):
            norms = step.get("norms") if isinstance(step, dict) else None
            if (not isinstance(norms, list) or len(norms) != n
                    or not all(isinstance(a, str) for a in norms)):
                raise DataError(f"'norms' must be a list of {n} strings",
                                field=f"history[{t}].norms", **where)
            rounds.append(norms)
        problems.append(rounds)
        logged.append(rec)
    if not problems:
        raise DataError("the file holds no record", file=path)
    batch = encode_answers(problems, n=n, normalize=normalize, benchmark=bench)
    return HistoryBatch(batch, tuple(idxs), bench, file_settings(path), tuple(logged))


@dataclass(frozen=True)
class ReplayRecord:
    """One problem's replay: ``commit`` kind, ``answer`` (None: nobody answered), ``steps``,
    ``final_x`` (None for the heuristic), per-round ``g``, ``x`` (spatial position) or
    ``streak`` (heuristic) and ``winner`` (round plurality); ``flagged`` = not dispatched
    (anything but right_wall / consensus); ``truncated`` = the record ran out of recorded rounds
    before a commit or L (a re-simulation that would need rounds nobody ran)."""

    idx: int
    commit: str
    answer: str | None
    steps: int
    final_x: int | None
    g: tuple
    x: tuple | None
    streak: tuple | None
    winner: tuple
    flagged: bool
    truncated: bool


def _records(hb: HistoryBatch, res: StopResult, rule: str, L: int) -> list[ReplayRecord]:
    res = jax.tree.map(np.asarray, res)
    lengths = np.asarray(hb.batch.mask).sum(1)
    out = []
    for b, idx in enumerate(hb.idx):
        vocab = hb.batch.vocab[b]
        s = int(res.steps[b])
        kind = COMMITS[int(res.commit[b])]
        a = int(res.answer[b])
        traj = tuple(int(v) for v in res.x[b, :s])
        out.append(ReplayRecord(
            idx=idx, commit=kind, answer=vocab[a] if a >= 0 else None, steps=s,
            final_x=int(res.final_x[b]) if rule == "spatial" else None,
            g=tuple(float(v) for v in res.g[b, :s]),
            x=traj if rule == "spatial" else None, streak=traj if rule == "heuristic" else None,
            winner=tuple(vocab[w] if w >= 0 else None for w in res.winner[b, :s]),
            flagged=kind not in DISPATCHED,
            truncated=kind == "fallback" and s < L and s == int(lengths[b])))
    return out


def _run_history(hb: HistoryBatch, rule, grid, L, empty_g) -> StopResult:
    """A file's batch under ``rule`` for every value of ``grid``: [G, B, ...] fields."""
    ids, mask = hb.batch.ids, hb.batch.mask
    if rule == "spatial":
        return spatial_rule(ids, mask, list(grid), L=L, empty_g=empty_g)
    return heuristic_rule(ids, mask, list(grid), L=L)


def _resolve(hb: HistoryBatch, rule, W, k, L):
    rule = rule or hb.settings["rule"]
    if rule not in RULES:
        raise DataError(f"rule must be one of {RULES}, got {rule!r}", field="rule")
    param = W if rule == "spatial" else k
    param = param if param is not None else hb.settings["W" if rule == "spatial" else "k"]
    if param is None:
        raise DataError(f"the file name does not state {'W' if rule == 'spatial' else 'k'}; "
                        "pass it", field="W" if rule == "spatial" else "k")
    if L is None:
        L = hb.settings["L"] or int(np.asarray(hb.batch.mask).sum(1).max())
    return rule, param, int(L)


def replay_history(path, rule: str | None = None, W=None, k=None, empty_g: float = 0.0,
                   L: int | None = None, *, normalize: bool = False) -> list[ReplayRecord]:
    """Replay a DASE history file under a stopping rule: one :class:`ReplayRecord` per problem.

    ``rule``, ``W`` / ``k`` and ``L`` default to what the file name says (``Bellman`` ->
    spatial, ``DDM`` -> heuristic; ``_4_``, ``_8_``, ``k4``, ``8k``; ``L15`` / ``15L``; without
    an L in the name, the longest recorded history). ``empty_g=0.5`` and ``normalize=False``
    reproduce the released logs (docs/stopping.md); ``empty_g=0.0`` is the paper's correction. The
    whole file runs as one batched, compiled call.
    """
    hb = load_history_batch(path, normalize=normalize)
    rule, param, L = _resolve(hb, rule, W, k, L)
    res = _run_history(hb, rule, [int(param)], L, empty_g)
    return _records(hb, jax.tree.map(lambda a: a[0], res), rule, L)


def resimulate(path, grid: Sequence[int], rule: str | None = None, empty_g: float = 0.0,
               L: int | None = None, *, normalize: bool = False) -> dict[int, list[ReplayRecord]]:
    """Offline re-simulation of other arena sizes W (or streaks k) on a recorded history.

    Valid only for variants that stop no later than the recorded run (docs/stopping.md): the x path
    does not depend on W (V_R - V_L = 2g - 1 + 2 cx x) and a smaller k only relaxes the stop,
    so W or k at most the recorded one is accepted and anything larger raises. All grid values
    run in one compiled call; returns ``{value: records}``. Records whose variant would need
    rounds that were never run are marked ``truncated`` (none for a valid grid on a log run
    with the same empty_g; empty_g = 0.0 on a 0.5 log changes the path and can truncate).
    """
    hb = load_history_batch(path, normalize=normalize)
    rule, recorded, L = _resolve(hb, rule, None, None, L)
    grid = [int(v) for v in grid]
    name = "W" if rule == "spatial" else "k"
    if any(v > recorded for v in grid):
        raise DataError(f"{name} = {max(grid)} exceeds the recorded {name} = {recorded}: the "
                        "variant could need rounds that were never run", field=name)
    res = _run_history(hb, rule, grid, L, empty_g)
    return {v: _records(hb, jax.tree.map(lambda a, i=i: a[i], res), rule, L)
            for i, v in enumerate(grid)}


# ----------------------------------------------------------------------------- summaries
def _correct(records, gold, benchmark):
    out = []
    for r in records:
        g = gold.get(r.idx) if gold is not None else None
        a = None if r.answer is None else normalize_dase_answer(r.answer, benchmark)
        out.append(g is not None and a is not None and a == normalize_dase_answer(str(g),
                                                                                 benchmark))
    return np.asarray(out, bool)


def commit_partition(records: Sequence[ReplayRecord], gold, benchmark: str = "aime") -> dict:
    """Count and accuracy per commit kind and overall: ``{kind: (n, n_correct, accuracy)}``.

    Accuracy is over *every* problem of the bucket: a problem whose gold could not be recovered
    (:func:`recover_dase_gold`) counts as wrong, as the logs' own 0/1 flags do (this is the
    denominator that gives the paper's GPQA W = 4 numbers: 308/380, 59/142, 15/24, 382/546).
    Answers are compared after :func:`normalize_dase_answer`.
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
    empty bucket is dropped; an empty bucket in the data gives NaN). Returns ``{"gap", "low", "high", "dispatched", "other",
    "coverage", "n_boot"}``.
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
    return {"gap": float(point), "low": float(low), "high": float(high), "dispatched": float(a), "other": float(b),
            "coverage": float(hi.mean()), "n_boot": int(boot.size)}


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
