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

Batch encoding (:func:`bda_jax.stopping.encode_answers`): a batch of problems is an int32 array
``ids`` [B, R, n] of per-problem answer ids (-1 = empty / no answer), with ids given in
first-seen order (round by round, slot by slot) so that "ties go to the first seen" is "ties go
to the smallest id", and a bool ``mask`` [B, R] marking the recorded rounds (a prefix; the rest
is padding). Each rule is one per-round step function (:func:`spatial_step`,
:func:`heuristic_step`) over a :class:`RuleState`; ``jax.lax.scan`` runs it over rounds,
``jax.vmap`` over problems and over a grid of W (or k), all in one jitted call
(:func:`spatial_rule`, :func:`heuristic_rule`). The live :class:`bda_jax.stopping.Stopper` calls
the same step functions one round at a time.
"""
from __future__ import annotations

from collections import Counter
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc

from .._core.errors import DataError
from .._core.exported import persistent_jit, serializable

__all__ = [
    "COMMITS", "DISPATCHED", "RULES", "ArenaParams", "HeuristicParams", "RuleState",
    "StopResult", "evidence_score", "heuristic_rule", "heuristic_step", "init_rule_state",
    "round_plurality", "spatial_rule", "spatial_step",
]

#: Commit codes in the result arrays: 0 still running, then the commit kinds.
COMMITS = ("running", "right_wall", "left_wall", "fallback", "consensus")
RUNNING, RIGHT, LEFT, FALLBACK, CONSENSUS = range(5)
#: The two stopping rules: the spatial arena and the heuristic streak rule.
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
    """Parameters of :func:`spatial_step` (scalars; a leading [G] axis for a grid)."""

    W: jax.Array              # [] int32 wall position
    empty_g: jax.Array        # [] float32
    w: jax.Array              # [] float32
    cx: jax.Array             # [] float32


class HeuristicParams(NamedTuple):
    """Parameters of :func:`heuristic_step` (a scalar; a leading [G] axis for a grid)."""

    k: jax.Array              # [] int32 streak length


class RuleState(NamedTuple):
    """Per-problem state carried over rounds by both step functions (a pytree; add a leading
    [B] axis for batches). ``counts`` has one slot per answer id the problem can use (V)."""

    t: jax.Array              # [] int32 rounds consumed
    x: jax.Array              # [] int32 arena position (spatial)
    streak: jax.Array         # [] int32 consecutive equal winners (heuristic)
    prev: jax.Array           # [] int32 last round winner (heuristic; -1 none)
    counts: jax.Array         # [V] int32 every non-empty answer so far, by id
    commit: jax.Array         # [] int32 index into COMMITS
    answer: jax.Array         # [] int32 committed answer id (-1 none)


def init_rule_state(n_vocab: int) -> RuleState:
    """The state before round 1: nothing consumed, x = 0, no streak, no answer, running;
    ``n_vocab`` (V) bounds the answer ids (R * n covers every id of an [R, n] problem)."""
    z = jnp.zeros((), jnp.int32)
    return RuleState(z, z, z, z - 1, jnp.zeros((n_vocab,), jnp.int32), z, z - 1)


def _tally(state: RuleState, ids_t, live):
    hits = (ids_t[:, None] == jnp.arange(state.counts.shape[0])[None, :]).sum(0)
    return state.counts + jnp.where(live, hits, 0).astype(jnp.int32)


def spatial_step(params: ArenaParams, state: RuleState, ids_t, active, last):
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


def heuristic_step(params: HeuristicParams, state: RuleState, ids_t, active, last):
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
@serializable
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

    state, (g, x, winner) = jax.lax.scan(body, init_rule_state(R * n), (ids, active, last))
    return StopResult(state.commit, state.answer, state.t, state.x, g, x, winner)


@persistent_jit
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
