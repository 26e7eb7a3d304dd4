"""DF-QuAD gradual semantics over argument trees (Rago et al. 2016), the strength ArgLLMs reports
as its confidence ([BDA] Appendix B.1, "ArgLLMs"; Freedman et al. 2025).

A tree of n arguments is three arrays: ``base`` [n] base scores in [0, 1], ``parent`` [n] the
index of the argument each one bears on (-1 for a root, -2 for a padding slot) and ``relation``
[n] (+1 supports its parent, -1 attacks it). The final strength of an argument with base score
v0 is ``C(v0, F(attackers), F(supporters))`` where

* ``F(v_1 .. v_k) = 1 - prod_i (1 - v_i)`` is the probabilistic sum of the children's final
  strengths (0 without children), and
* ``C(v0, va, vs) = v0 - v0 (va - vs)`` if ``va >= vs``, else ``v0 + (1 - v0) (vs - va)``
  (equal aggregates leave the base score unchanged).

The strengths are the fixed point of that map, reached bottom-up: iteration d makes every
argument of height < d exact, so ``n`` iterations are enough for any tree of n arguments (one
``lax.fori_loop``, fixed shapes, jit- and vmap-friendly; a leading batch axis is vmapped).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.errors import DataError

__all__ = ["dfquad_strengths"]

ROOT, PADDING = -1, -2


def _combine(v0, va, vs):
    """DF-QuAD's combination C(v0, va, vs)."""
    return jnp.where(va >= vs, v0 - v0 * (va - vs), v0 + (1.0 - v0) * (vs - va))


@jax.jit
def _strengths(base, parent, relation):
    n = base.shape[0]
    valid = parent != PADDING
    has_parent = valid & (parent >= 0)
    seg = jnp.where(has_parent, parent, n)                       # children of no one -> slot n
    attack = has_parent & (relation < 0)
    support = has_parent & (relation > 0)

    def step(_, s):
        # 1 - F = prod over a parent's children (of one kind) of (1 - s_child)
        def aggregate(mask):
            one_minus = jnp.where(mask, 1.0 - s, 1.0)
            prod = jax.ops.segment_prod(one_minus, seg, num_segments=n + 1)[:n]
            return 1.0 - prod
        new = _combine(base, aggregate(attack), aggregate(support))
        return jnp.where(valid, new, 0.0)

    return jax.lax.fori_loop(0, n, step, jnp.where(valid, base, 0.0))


def _check(base, parent, relation):
    base = jnp.asarray(base)
    parent = jnp.asarray(parent)
    relation = jnp.asarray(relation)
    if base.ndim not in (1, 2) or parent.shape != base.shape or relation.shape != base.shape:
        raise DataError(f"base, parent and relation must share one shape [n] or [B, n]; got "
                        f"{base.shape}, {parent.shape}, {relation.shape}", field="base")
    if not jnp.issubdtype(parent.dtype, jnp.integer) or \
            not jnp.issubdtype(relation.dtype, jnp.integer):
        raise DataError("parent and relation must be integer arrays", field="parent")
    if not jnp.issubdtype(base.dtype, jnp.floating):
        base = base.astype(jnp.float32)
    n = base.shape[-1]
    valid = parent != PADDING
    if bool(jnp.any(valid & ((base < 0) | (base > 1) | ~jnp.isfinite(base)))):
        raise DataError("base scores must lie in [0, 1]", field="base")
    if bool(jnp.any((parent < PADDING) | (parent >= n))):
        raise DataError(f"parent must be -2 (padding), -1 (root) or an index < {n}",
                        field="parent")
    if bool(jnp.any(valid & (parent >= 0) & (relation != 1) & (relation != -1))):
        raise DataError("relation must be +1 (support) or -1 (attack) for every non-root",
                        field="relation")
    idx = jnp.arange(n)
    if bool(jnp.any(valid & (parent == idx))):
        raise DataError("an argument cannot bear on itself", field="parent")
    safe = jnp.where(valid & (parent >= 0), parent, 0)
    points_at_padding = valid & (parent >= 0) & (jnp.take_along_axis(
        parent, safe, axis=-1) == PADDING)
    if bool(jnp.any(points_at_padding)):
        raise DataError("an argument bears on a padding slot", field="parent")
    return base, parent, relation


def dfquad_strengths(base, parent, relation) -> jax.Array:
    """Final DF-QuAD strengths of every argument (module docstring), ``[n]`` or ``[B, n]``.

    ``base`` [n] (or [B, n]) base scores in [0, 1]; ``parent`` the index each argument bears on
    (-1 root, -2 padding; padding slots get strength 0); ``relation`` +1 support / -1 attack.
    Raises :class:`~bda_jax.DataError` naming the argument for a shape, range or index problem.
    A cycle is not a tree: its strengths are whatever ``n`` iterations of the map give.

    >>> import jax.numpy as jnp
    >>> s = dfquad_strengths(jnp.array([0.5, 0.8, 0.4]), jnp.array([-1, 0, 0]),
    ...                      jnp.array([0, -1, 1]))                  # one attacker, one supporter
    >>> [round(float(x), 4) for x in s]                               # 0.5 - 0.5 (0.8 - 0.4)
    [0.3, 0.8, 0.4]
    """
    base, parent, relation = _check(base, parent, relation)
    if base.ndim == 2:
        return jax.vmap(_strengths)(base, parent, relation)
    return _strengths(base, parent, relation)
