"""Disagreement among the agents of a task: the vote entropy of query-by-committee (Dagan and
Engelson 1995) with the council (or the crowd) as the committee (docs/active.md).

For task t with positive endorsements v_t(g) = sum_i e[t, i, g] (round 0: ``e0``; all rounds:
``e``), the score is the entropy of the vote shares v_t(g) / sum_g v_t(g) divided by
log K_t, in [0, 1]: 0 when every vote names one answer (or no vote was cast, or K_t = 1), 1 when
the votes split evenly over all K_t candidates. Reads no label and no model.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._core.counts import Counts
from .._core.errors import DataError

__all__ = ["vote_disagreement", "ROUNDS"]

#: which endorsements vote: ``"round0"`` (the independent opening answers, as plurality reads
#: them) or ``"all"`` (every positive endorsement of every round)
ROUNDS = ("round0", "all")


@jax.jit
def _entropy(votes, mask, K):
    v = jnp.where(mask, votes.astype(jnp.float32), 0.0)
    total = v.sum(-1, keepdims=True)
    share = v / jnp.where(total > 0, total, 1.0)
    h = -jnp.sum(jnp.where(share > 0, share * jnp.log(jnp.where(share > 0, share, 1.0)), 0.0),
                 axis=-1)
    norm = jnp.log(jnp.maximum(K, 2).astype(jnp.float32))
    return jnp.where((K > 1) & (total[:, 0] > 0), h / norm, 0.0)


def vote_disagreement(counts: Counts, rounds: str = "round0") -> np.ndarray:
    """[T] normalized vote entropy of each task's endorsements (module docstring), float64.

    >>> c = Counts.from_arrays(N=[[1, 1], [1, 1]], e=[[[1, 0], [1, 0]], [[1, 0], [0, 1]]],
    ...                        c=[[[1, 0], [1, 0]], [[1, 0], [0, 1]]])
    >>> vote_disagreement(c).round(3).tolist()
    [0.0, 1.0]
    """
    if rounds not in ROUNDS:
        raise DataError(f"rounds must be one of {list(ROUNDS)}, got {rounds!r}", field="rounds")
    votes = counts.e0 if rounds == "round0" else counts.e
    h = np.asarray(_entropy(jnp.asarray(votes).sum(1), jnp.asarray(counts.mask),
                            jnp.asarray(counts.K)), np.float64)
    return h + 0.0                                  # -0.0 (a unanimous task) reads as 0.0
