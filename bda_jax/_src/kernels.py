"""Closed-form BDA posteriors (seed 003 §3, Eqs. 1, 2 and 4; Appendix B, Algorithm 1).

All kernels are pure, jitted, batched over tasks, and vmappable over a leading grid axis of the
prior arrays (``jax.vmap(lambda a, b: onecoin_log_posterior(counts, a, b))(A, B)``). They return
normalized log-posteriors [T, K]; masked (padding) candidates get ``-inf``.

Numerics. The one-coin factor only needs log-Beta *differences across candidates*, so the kernel
drops every term constant in g (log B(alpha, beta) and lgamma(alpha + beta + N)). Small counts (the
common case: every N < ``table_size``) read exact per-agent tables of
``lgamma(alpha + n) - lgamma(alpha) - n log(alpha)``, n < table_size, folded into one
[I, table_size, table_size] table indexed by (N, c), so each cell costs one gather. Larger counts
switch (one ``lax.cond`` on ``max N``, not a per-element select) to a float64 evaluation: in x64
mode on the device; in float32 mode on the host through ``jax.pure_callback``, because float32
cannot represent the answer when per-candidate terms of size ~1e6 cancel to O(1) (naive float32
lgamma differences at counts ~1e6 are off by orders of magnitude). The (K-1) term enters through
integer endorsement totals, so it is exact.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from .counts import Counts
from .errors import DataError

__all__ = ["onecoin_log_posterior", "confusion_log_posterior", "DEFAULT_TABLE_SIZE"]

DEFAULT_TABLE_SIZE = 64
_UNROLL_AGENTS = 32    # councils: per-agent Python loops (unrolled); crowds: vectorized sums


def _float_dtype(dtype):
    dt = jnp.dtype(jnp.float32 if dtype is None else dtype)
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise DataError(f"dtype must be float32 or float64, got {dt}", field="dtype")
    if dt == jnp.float64 and not jax.config.read("jax_enable_x64"):
        raise DataError("float64 needs JAX's x64 mode: call "
                        "jax.config.update('jax_enable_x64', True) first", field="dtype")
    return dt


def _excess_table(par, table_size):
    """[I, S] table of lgamma(p + n) - lgamma(p) - n log p, n < S, accurate in float32.

    Removing n log p leaves O(n log n) values at most; for p >= 10 Stirling's series gives the
    difference as (p + n - 1/2) log1p(n / p) - n + tail(p + n) - tail(p) without forming the large
    log-Gamma values (at p = 1e3 a direct float32 difference would be off by ~1e-3).
    """
    n = jnp.arange(table_size, dtype=par.dtype)[None, :]
    p = par[:, None]
    big = p >= 10.0
    ps = jnp.where(big, p, 10.0)

    def tail(x):                      # lgamma(x) - Stirling's main part, x >= 10
        inv = 1.0 / x
        inv2 = inv * inv
        return inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0)))

    stirling = (ps + n - 0.5) * jnp.log1p(n / ps) - n + (tail(ps + n) - tail(ps))
    pd = jnp.where(big, 1.0, p)
    direct = gammaln(pd + n) - gammaln(pd) - n * jnp.log(pd)
    return jnp.where(big, stirling, direct)


def _pair_table(alpha, beta, S):
    """[I, S, S] per-agent table indexed by (N, c): excess_a[c] + excess_b[N - c] + c log(a / b)."""
    ex_a = _excess_table(alpha, S)                                   # [I, S]
    ex_b = _excess_table(beta, S)
    n = jnp.arange(S)
    d_index = jnp.clip(n[:, None] - n[None, :], 0, S - 1)            # [S(N), S(c)]
    log_ratio = (jnp.log(alpha) - jnp.log(beta))[:, None, None]
    return ex_a[:, None, :] + ex_b[:, d_index] + n.astype(alpha.dtype)[None, None, :] * log_ratio


def _beta_part_tables(N, c, alpha, beta, table_size):
    """sum_i [lgamma(a_i + c) + lgamma(b_i + d)] up to a per-task constant, [T, K], by lookup.

    With n log p taken out of the excess tables, the linear remainder is
    c log a + (N - c) log b = N log b + c log(a / b), and N log b is constant in g. One table per
    agent indexed by (N, c) holds excess_a[c] + excess_b[N - c] + c log(a / b), so each cell costs
    a single gather. Requires N < table_size.
    """
    I = alpha.shape[0]
    S = table_size
    # Materialize the small table: otherwise XLA fuses its log-Gamma producers into the gather
    # and recomputes them for every one of the T*I*K cells (10x slower).
    table = jax.lax.optimization_barrier(_pair_table(alpha, beta, S))
    table = table.reshape(-1)
    N, c = jnp.clip(N, 0, S - 1), jnp.clip(c, 0, S - 1)
    if I > _UNROLL_AGENTS:
        index = (jnp.arange(I, dtype=jnp.int32)[None, :, None] * S + N[..., None]) * S + c
        return jnp.sum(jnp.take(table, index, mode="clip"), axis=1)
    out = 0.0
    for i in range(I):   # one fused gather-and-add per agent: ~7x faster than a [T, I, K] sum
        out = out + jnp.take(table, (i * S + N[:, i, None]) * S + c[:, i, :], mode="clip")
    return out


def _beta_part_direct(N, c, alpha, beta):
    """The same sum by direct log-Gamma: used in float64, where it is exact to ~1e-8 at 1e7."""
    dt = alpha.dtype
    a = alpha[None, :, None]
    b = beta[None, :, None]
    return jnp.sum(gammaln(a + c.astype(dt)) + gammaln(b + (N[..., None] - c).astype(dt)), axis=1)


def _sum_agents(x, xp):
    """Sum over the agent axis (-2); unrolled for councils, which XLA:CPU fuses far better."""
    if xp is np or x.shape[-2] > _UNROLL_AGENTS:
        return x.sum(axis=-2)
    out = x[..., 0, :]
    for i in range(1, x.shape[-2]):
        out = out + x[..., i, :]
    return out


def _finish(beta_part, e, mask, K, tau, log_prior, xp):
    """Add the (K - 1) term (via integer endorsement totals), temper, add the prior, normalize."""
    E = _sum_agents(e, xp)                                   # [..., T, K]
    log_km1 = xp.log(xp.maximum(K - 1, 1).astype(beta_part.dtype))[..., None]
    score = tau[..., None, None] * (beta_part + (E - E[..., :1]).astype(beta_part.dtype) * log_km1)
    score = xp.where(mask, score + log_prior, -xp.inf)
    top = xp.max(score, axis=-1, keepdims=True)
    return score - top - xp.log(xp.sum(xp.exp(score - top), axis=-1, keepdims=True))


def _onecoin_host64(N, e, c, mask, K, alpha, beta, tau, log_prior):
    """Large counts in float32 mode: the whole posterior in float64 on the host (NumPy/SciPy).

    float32 cannot hold the answer when per-candidate terms of size ~1e6 cancel to O(1), so this
    path evaluates Eq. (1)-(2) with float64 log-Gamma and returns the normalized float32 result.
    Broadcasts over leading (vmapped) axes.
    """
    from scipy.special import gammaln as gammaln64
    f64 = lambda x: np.asarray(x, np.float64)
    N, e, c = np.asarray(N), np.asarray(e), np.asarray(c)
    a, b = f64(alpha)[..., None, :, None], f64(beta)[..., None, :, None]
    d = N[..., None] - c
    beta_part = (gammaln64(a + c) + gammaln64(b + d)).sum(axis=-2)
    out = _finish(beta_part, e, np.asarray(mask), np.asarray(K), f64(tau), f64(log_prior), np)
    return out.astype(np.float32)


@partial(jax.jit, static_argnames=("table_size",))
def _onecoin(N, e, c, mask, K, alpha, beta, tau, log_prior, table_size):
    dt = alpha.dtype
    small = jnp.max(N, initial=0) < table_size

    def tables():
        return _finish(_beta_part_tables(N, c, alpha, beta, table_size), e, mask, K, tau,
                       log_prior, jnp)

    def large():
        if dt == jnp.float64:
            return _finish(_beta_part_direct(N, c, alpha, beta), e, mask, K, tau, log_prior, jnp)
        T, _, Kmax = e.shape
        shape = jax.ShapeDtypeStruct((T, Kmax), jnp.float32)
        return jax.pure_callback(_onecoin_host64, shape, N, e, c, mask, K, alpha, beta, tau,
                                 log_prior, vmap_method="expand_dims")

    return jax.lax.cond(small, tables, large)


_GRID_FEATURES_MAX = 4096        # I * S * S: one-hot width of the grid path
_GRID_CELLS_MAX = 50_000_000     # T * K * features: its dense one-hot size


@partial(jax.jit, static_argnames=("table_size",))
def _onecoin_grid(N, e, c, mask, K, alphas, betas, taus, log_prior, table_size):
    """[M, T, K] one-coin posteriors for M prior rows (alphas, betas [M, I], taus [M]).

    Every (agent, N, c) cell is one feature, so all M posteriors come from one matrix product of
    the tasks' one-hot features [T, K, I S^2] with the M rows' tables [M, I S^2] — what makes a
    whole CV grid cost about one kernel call. Falls back to a vmap of the single-prior kernel
    when the tables are wide or counts exceed them.
    """
    T, I, Kmax = e.shape
    S = table_size
    F = I * S * S
    single = jax.vmap(lambda a, b, t: _onecoin(N, e, c, mask, K, a, b, t, log_prior, S))
    if F > _GRID_FEATURES_MAX or T * Kmax * F > _GRID_CELLS_MAX:
        return single(alphas, betas, taus)
    dt = alphas.dtype

    def tables():
        tabs = jax.vmap(lambda a, b: _pair_table(a, b, S).reshape(-1))(alphas, betas)   # [M, F]
        index = ((jnp.arange(I)[None, :, None] * S + jnp.clip(N, 0, S - 1)[..., None]) * S
                 + jnp.clip(c, 0, S - 1))                                               # [T, I, K]
        onehot = jax.nn.one_hot(index, F, dtype=dt).sum(axis=1)                         # [T, K, F]
        beta_part = jnp.einsum("tkf,mf->mtk", onehot, tabs)
        return jax.vmap(lambda bp, t: _finish(bp, e, mask, K, t, log_prior, jnp))(beta_part, taus)

    return jax.lax.cond(jnp.max(N, initial=0) < S, tables, lambda: single(alphas, betas, taus))


def _log_prior(log_prior, T, K, dt):
    if log_prior is None:
        return jnp.zeros((1, K), dt)
    lp = jnp.asarray(log_prior, dt)
    if lp.ndim == 1:
        lp = lp[None, :]
    if lp.ndim != 2 or lp.shape[-1] != K or lp.shape[0] not in (1, T):
        raise DataError(f"log_prior must be [K] or [T, K] with K = {K}, got {lp.shape}",
                        field="log_prior")
    return lp


def _require(arr, name, ok, what):
    """Value check for concrete inputs (traced values inside a user's jit are not inspectable)."""
    if not isinstance(arr, jax.core.Tracer) and not bool(jnp.all(ok(arr))):
        raise DataError(f"{name} must be {what}", field=name)


def _check_agents(counts: Counts, arr, name, ndim):
    I = counts.N.shape[1]
    if arr.ndim != ndim or arr.shape[0] != I:
        raise DataError(f"{name} must have {I} agents on its first axis (one per counts agent), "
                        f"got shape {arr.shape}", field=name)


def table_size_for(counts: Counts) -> int:
    """Smallest power of two in [8, DEFAULT_TABLE_SIZE] above every N (DEFAULT when traced or
    larger): small tables are cheap to build, which matters when a grid of priors is vmapped."""
    N = counts.N
    if isinstance(N, jax.core.Tracer) or N.size == 0:
        return DEFAULT_TABLE_SIZE
    top = int(np.max(np.asarray(N))) + 1
    size = 8
    while size < top and size < DEFAULT_TABLE_SIZE:
        size *= 2
    return size


def onecoin_log_posterior(counts: Counts, alpha, beta, tau=1.0, log_prior=None, *, dtype=None,
                          table_size: int | None = None) -> jax.Array:
    """One-coin BDA posterior, Eqs. (1)-(2) of seed 003 §3 (Algorithm 1), optionally tempered.

    log pi(g | T) = log pi0(g) + tau * sum_i [log B(alpha_i + c_i(g), beta_i + d_i(g))
                    - log B(alpha_i, beta_i) - (N_i - e_i(g)) log(K_t - 1)] + const.

    Args:
      counts: :class:`Counts` with N [T, I], e and c [T, I, K].
      alpha, beta: per-agent Beta prior shapes, [I] (e.g. ``mu * s`` and ``(1 - mu) * s``).
      tau: temperature multiplying every agent's log-factor (1: the untempered Eq. 2).
      log_prior: log pi0, [K] or [T, K]; default uniform.
      dtype: float32 (default) or float64 (needs JAX x64 mode).
      table_size: counts below it use exact lookup tables; otherwise the large-count path.
        Default: :func:`table_size_for` (a power of two just above the largest N).

    Returns: normalized log-posteriors [T, K]; padding slots are -inf. A task with K_t = 1 gets
    probability 1 on its only candidate (the (K - 1) factor is taken as 1 there).

    >>> import numpy as np
    >>> counts = Counts.from_arrays(N=[[1]], e=[[[1, 0, 0]]], c=[[[1, 0, 0]]])
    >>> np.exp(onecoin_log_posterior(counts, [7.0], [3.0])).astype(float).round(3).tolist()
    [[0.7, 0.15, 0.15]]
    """
    dt = _float_dtype(dtype)
    alpha = jnp.asarray(alpha, dt)
    beta = jnp.asarray(beta, dt)
    _check_agents(counts, alpha, "alpha", 1)
    _check_agents(counts, beta, "beta", 1)
    for arr, name in ((alpha, "alpha"), (beta, "beta")):
        _require(arr, name, lambda x: jnp.isfinite(x) & (x > 0), "finite and > 0")
    tau = jnp.asarray(tau, dt)
    _require(tau, "tau", lambda x: jnp.isfinite(x) & (x >= 0), "finite and >= 0")
    T, _, K = counts.e.shape
    return _onecoin(counts.N, counts.e, counts.c, counts.mask, counts.K, alpha, beta, tau,
                    _log_prior(log_prior, T, K, dt),
                    int(table_size_for(counts) if table_size is None else table_size))


@jax.jit
def _confusion(c, mask, log_conf, tau, log_prior):
    # log P_i(h | g) - log P_i(h | 0): the g-independent part cancels in the normalization and
    # the smaller magnitudes keep float32 accurate for large counts.
    rel = log_conf - log_conf[:, :1, :]
    score = tau * jnp.einsum("tih,igh->tg", c.astype(log_conf.dtype), rel) + log_prior
    score = jnp.where(mask, score, -jnp.inf)
    return jax.nn.log_softmax(score, axis=-1)


def confusion_log_posterior(counts: Counts, confusion, tau=1.0, log_prior=None, *,
                            dtype=None) -> jax.Array:
    """Tempered confusion-matrix BDA posterior, Eq. (4) of seed 003 §3 (Appendix C.5).

    log pi_tau(g | T) = log pi0(g) + tau * sum_i sum_h c_i(h) log P_i(h | g) + const,

    where c_i(h) are the consistent counts (Definition 1's pseudo-observations: a challenge of a
    adds one to every h != a) and ``confusion[i, g, h] = P_i(h | g)`` — rows indexed by agent, true
    answer, observed cell; e.g. the Dirichlet posterior means of DESIGN §6. Entries are clipped at
    the smallest normal float before the log, so a zero probability acts as a very large penalty.

    Args: counts; confusion [I, K, K]; tau scalar; log_prior [K] or [T, K]; dtype as for
    :func:`onecoin_log_posterior`. Returns normalized log-posteriors [T, K].

    >>> import numpy as np
    >>> counts = Counts.from_arrays(N=[[1]], e=[[[1, 0]]], c=[[[1, 0]]])
    >>> P = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    >>> np.exp(confusion_log_posterior(counts, P)).astype(float).round(4).tolist()
    [[0.7273, 0.2727]]
    """
    dt = _float_dtype(dtype)
    conf = jnp.asarray(confusion, dt)
    _check_agents(counts, conf, "confusion", 3)
    T, _, K = counts.e.shape
    if conf.shape[1:] != (K, K):
        raise DataError(f"confusion must be [I, K, K] with K = {K}, got {conf.shape}",
                        field="confusion")
    _require(conf, "confusion", lambda x: jnp.isfinite(x) & (x >= 0), "finite and >= 0")
    tau = jnp.asarray(tau, dt)
    _require(tau, "tau", lambda x: jnp.isfinite(x) & (x >= 0), "finite and >= 0")
    log_conf = jnp.log(jnp.clip(conf, jnp.finfo(dt).tiny, None))
    return _confusion(counts.c, counts.mask, log_conf, tau, _log_prior(log_prior, T, K, dt))
