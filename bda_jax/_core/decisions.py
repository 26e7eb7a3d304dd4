"""Decisions from posteriors or votes: argmax with a seeded random tie-break ([BDA] D.6).

A lexicographic tie-break correlates with attacks (Appendix D.6), so ties are broken uniformly at
random among the tied candidates, from an explicit key.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .counts import Counts
from .errors import DataError
from .exported import persistent_jit

__all__ = ["Decision", "decide", "majority"]


class Decision(NamedTuple):
    """``index`` [T] int32 chosen candidate slot, ``confidence`` [T] its probability,
    ``proba`` [T, K] the distribution it was read from (0 on padding slots)."""

    index: jax.Array
    confidence: jax.Array
    proba: jax.Array


@persistent_jit
def argmax_random_ties(key, scores, mask):
    scores = jnp.where(mask, scores, -jnp.inf)
    best = jnp.max(scores, axis=-1, keepdims=True)
    tied = mask & (scores == best)
    u = jax.random.uniform(key, scores.shape)
    return jnp.argmax(jnp.where(tied, u, -1.0), axis=-1).astype(jnp.int32)


def decide(key, log_proba, mask=None) -> Decision:
    """Decision = argmax of ``log_proba`` [T, K] (random among exact ties), confidence = max prob."""
    log_proba = jnp.asarray(log_proba)
    if mask is None:
        mask = jnp.isfinite(log_proba)
    index = argmax_random_ties(key, log_proba, mask)
    proba = jnp.where(mask, jnp.exp(log_proba), 0.0)
    return Decision(index, jnp.take_along_axis(proba, index[:, None], axis=-1)[:, 0], proba)


@jax.jit
def vote_shares(votes, mask):
    """[T, K] shares of non-negative scores over each task's valid slots (uniform where every
    score is 0); float dtype kept, integers become float32."""
    dt = votes.dtype if jnp.issubdtype(votes.dtype, jnp.floating) else jnp.float32
    votes = jnp.where(mask, votes, 0).astype(dt)
    total = votes.sum(-1, keepdims=True)
    uniform = (mask / mask.sum(-1, keepdims=True)).astype(dt)
    return jnp.where(total > 0, votes / jnp.where(total > 0, total, 1), uniform)


def majority(key, counts: Counts, *, rounds: str = "round0") -> Decision:
    """Plurality majority ([BDA] Appendix B.1): the most-endorsed candidate, random ties.

    ``rounds="round0"`` (the paper's baseline) counts round-0 positive endorsements ``e0``;
    ``"all"`` counts every positive endorsement ``e``. Confidence is the winner's vote share; a
    task without any vote gets the uniform distribution over its candidates.
    """
    if rounds not in ("round0", "all"):
        raise DataError(f"rounds must be 'round0' or 'all', got {rounds!r}", field="rounds")
    votes = jnp.sum(counts.e0 if rounds == "round0" else counts.e, axis=1)
    shares = vote_shares(votes, counts.mask)
    index = argmax_random_ties(key, votes.astype(jnp.float32), counts.mask)
    return Decision(index, jnp.take_along_axis(shares, index[:, None], axis=-1)[:, 0], shares)
