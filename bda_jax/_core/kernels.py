"""Closed-form BDA posteriors ([BDA] §3, Eqs. 1, 2 and 4; Appendix B, Algorithm 1).

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
lgamma differences at counts ~1e6 are off by orders of magnitude). With concrete counts and
priors, float32 large counts first try :func:`_onecoin_exact`: host-built float64 tables split
into an exact int32 part and a small float remainder, evaluated on the device (the host path
remains for tables wider than ``_EXACT_TABLE_ENTRIES`` and for traced priors). The (K-1) term
enters through integer endorsement totals, so it is exact. The confusion kernel (Eq. 4) is one
multiply-add per (agent, cell) fused into a single pass over the counts; in float32 with counts
from ``_SPLIT_COUNTS`` up its weights come from the host in float64, split into an exact int32
part and a small float remainder (:func:`_confusion_split`), so large counts stay accurate.

Speed (benchmarks/bench_kernels.py, docs/performance.md). Both kernels read the counts in any
integer dtype (int8 counts are 4x less to read than int32) and are written for XLA:CPU's loop
fusion: per-agent (and per-cell) Python loops that XLA fuses into one loop over tasks, sums as
balanced trees of independent chains, the candidate normalization unrolled over the K columns
with log Z and the scores materialized (:func:`_normalize`), and the table / large-count choice
made on the host when the counts are concrete (no device reduction and ``lax.cond`` per call).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from .counts import Counts
from .errors import DataError
from .exported import persistent_jit
from .numerics import float_dtype

__all__ = ["onecoin_log_posterior", "confusion_log_posterior", "DEFAULT_TABLE_SIZE"]

DEFAULT_TABLE_SIZE = 64
_UNROLL_AGENTS = 32    # councils: per-agent Python loops (unrolled); crowds: vectorized sums
_UNROLL_CANDIDATES = 32   # K up to this: the log-sum-exp over candidates is unrolled by column
_UNROLL_CELLS = 256       # I * K up to this: the confusion contraction is unrolled by cell
_SPLIT_COUNTS = 64        # float32 confusion with counts from this up: exact integer part
_EXACT_TABLE_ENTRIES = 1 << 21   # I (max N + 1) up to this: one-coin large counts by exact tables


def _excess_table(par, table_size):
    """[I, S] table of lgamma(p + n) - lgamma(p) - n log p, n < S, accurate in float32.

    By the recurrence Γ(x + 1) = x Γ(x) the difference is a finite sum,
    lgamma(p + n) - lgamma(p) - n log p = Σ_{j<n} log1p(j / p): each term is accurate to float32
    rounding for any p > 0 (no large log-Gamma values cancel: at p = 1e3 a direct float32
    difference would be off by ~1e-3), and the cumulative sum over S <= 64 terms keeps the
    table within ~S ulp of its largest entry. It compiles in a fraction of the time of XLA's
    log-Gamma expansion (0.2 s against 0.6 s at S = 64 on CPU), which every new shape pays.
    """
    j = jnp.arange(table_size - 1, dtype=par.dtype)[None, :]
    steps = jnp.log1p(j / par[:, None])                                  # [I, S - 1]
    return jnp.concatenate([jnp.zeros_like(steps[:, :1]), jnp.cumsum(steps, axis=1)], axis=1)


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
    # int32 before the index arithmetic: int8 / int16 counts would overflow (i S + N) S + c.
    # No clip of N and c: callers take this path only when every N < S (and 0 <= c <= N);
    # mode="clip" keeps an index in bounds regardless (a discarded branch under vmap).
    N = N.astype(jnp.int32)
    c = c.astype(jnp.int32)
    if I > _UNROLL_AGENTS:
        index = (jnp.arange(I, dtype=jnp.int32)[None, :, None] * S + N[..., None]) * S + c
        return jnp.sum(jnp.take(table, index, mode="clip"), axis=1)
    # one fused gather per agent, summed pairwise: ~7x faster than a [T, I, K] sum
    return _tree_sum(jnp.take(table, (i * S + N[:, i, None]) * S + c[:, i, :], mode="clip")
                     for i in range(I))


def _tree_sum(terms):
    """Pairwise sum of a list of arrays: a balanced tree of adds instead of one long chain."""
    terms = list(terms)
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


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


def _normalize(score, mask):
    """Masked log-softmax over candidates: score - logsumexp(score, axis=-1) on the slots where
    ``mask`` [T, K] holds, -inf elsewhere; ``score`` [..., T, K] is not masked yet.

    Written for XLA:CPU, where it decides the speed of the kernels (2-3x):

    * the scores are materialized once (barrier) and the mask is applied here, in the two cheap
      passes, not in the loop that computes them: a select in that loop stops XLA from
      vectorizing it (1.4x at K = 10), and without the barrier XLA fuses that loop into both
      passes below and runs it twice;
    * a reduction over a short minor axis (``jnp.max(axis=-1)`` / ``log_softmax`` over K = 2..10)
      compiles into slow loops, so for small K the max and the sum of exponentials run over the
      K columns as elementwise ops;
    * log Z [T] (4 bytes a task) is materialized too: otherwise it gets fused into, and
      recomputed for, every one of the K output cells.
    """
    K = score.shape[-1]
    if K > _UNROLL_CANDIDATES:
        score = jnp.where(mask, score, -jnp.inf)
        top = jnp.max(score, axis=-1, keepdims=True)
        return score - top - jnp.log(jnp.sum(jnp.exp(score - top), axis=-1, keepdims=True))
    score = jax.lax.optimization_barrier(score)
    cols = [jnp.where(mask[..., k], score[..., k], -jnp.inf) for k in range(K)]
    top = cols[0]
    for col in cols[1:]:
        top = jnp.maximum(top, col)
    total = jnp.exp(cols[0] - top)
    for col in cols[1:]:
        total = total + jnp.exp(col - top)
    log_z = jax.lax.optimization_barrier(top + jnp.log(total))
    return jnp.where(mask, score - log_z[..., None], -jnp.inf)


def _finish(beta_part, e, mask, K, tau, log_prior, xp):
    """Add the (K - 1) term (via integer endorsement totals), temper, add the prior, normalize."""
    dt = beta_part.dtype
    E = _sum_agents(e.astype(np.int32) if xp is np else e.astype(jnp.int32), xp)   # [..., T, K]
    if xp is np:
        log_km1 = np.log(np.maximum(K - 1, 1).astype(dt))[..., None]
    else:   # log(K_t - 1) from a [K_max + 1] table: fuses into the per-cell loop, unlike a log
        lut = jnp.log(jnp.maximum(jnp.arange(e.shape[-1] + 1) - 1, 1).astype(dt))
        log_km1 = jnp.take(lut, K, mode="clip")[..., None]
    score = tau[..., None, None] * (beta_part + (E - E[..., :1]).astype(dt) * log_km1)
    if log_prior is not None:
        score = score + log_prior
    if xp is not np:
        return _normalize(score, mask)
    score = np.where(mask, score, -np.inf)
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
    log_prior = None if log_prior is None else f64(log_prior)
    out = _finish(beta_part, e, np.asarray(mask), np.asarray(K), f64(tau), log_prior, np)
    return out.astype(np.float32)


@partial(persistent_jit, static_argnames=("table_size", "path"))
def _onecoin(N, e, c, mask, K, alpha, beta, tau, log_prior, table_size, path="auto"):
    """``path``: "tables" / "large" when the caller knows max N (concrete counts), else "auto"
    (one ``lax.cond`` on max N, computed on the device)."""
    dt = alpha.dtype

    def tables():
        # The gathers in one loop, the (K - 1) term and the prior in the next: together, the
        # scalar gathers keep XLA from vectorizing the rest (1.15-1.2x).
        beta_part = jax.lax.optimization_barrier(_beta_part_tables(N, c, alpha, beta, table_size))
        return _finish(beta_part, e, mask, K, tau, log_prior, jnp)

    def large():
        if dt == jnp.float64:
            return _finish(_beta_part_direct(N, c, alpha, beta), e, mask, K, tau, log_prior, jnp)
        T, _, Kmax = e.shape
        shape = jax.ShapeDtypeStruct((T, Kmax), jnp.float32)
        return jax.pure_callback(_onecoin_host64, shape, N, e, c, mask, K, alpha, beta, tau,
                                 log_prior, vmap_method="expand_dims")

    if path == "tables":
        return tables()
    if path == "large":
        return large()
    return jax.lax.cond(jnp.max(N, initial=0) < table_size, tables, large)


def _exact_width(top: int) -> int:
    """Table width for counts up to ``top``: a power of two, so that the compiled kernel is
    shared by every max N in [width / 2, width)."""
    return 1 << max(int(top), 1).bit_length()


def _exact_tables(alpha, beta, top, k_max):
    """Host float64 tables for the one-coin kernel at large counts, each split as
    m / scale + lo with m int32 and lo float32 (every step exact in floating point):
    per agent lgamma(alpha + n) - lgamma(alpha) and lgamma(beta + n) - lgamma(beta) for
    n < :func:`_exact_width` (top) (flat [I width]), and log(K - 1) for K <= ``k_max``.
    ``scale`` (a power of two) keeps every task's integer score, summed over agents and cells,
    below 2^29."""
    from scipy.special import gammaln as gammaln64
    a = np.asarray(alpha, np.float64)[:, None]
    b = np.asarray(beta, np.float64)[:, None]
    n = np.arange(_exact_width(top), dtype=np.float64)[None, :]
    la = gammaln64(a + n) - gammaln64(a)                                       # [I, width]
    lb = gammaln64(b + n) - gammaln64(b)
    lk = np.log(np.maximum(np.arange(k_max + 1) - 1.0, 1.0))                   # [K_max + 1]
    I = a.shape[0]
    bound = (np.abs(la).max(1) + np.abs(lb).max(1)).sum() + I * n.size * lk.max() + 1.0
    scale = 2.0 ** np.floor(np.log2(2.0 ** 29 / bound))

    def split(x):
        m = np.round(x * scale)
        lo = ((x * scale - m) / scale).astype(np.float32)
        return m.astype(np.int32).reshape(-1), lo.reshape(-1)

    return (*split(la), *split(lb), *split(lk), np.float32(scale))


@jax.jit
def _onecoin_exact(N, e, c, mask, K, ma, la, mb, lb, mk, lk, scale, tau, log_prior):
    """One-coin posteriors (Eqs. 1-2) for large counts in float32, from :func:`_exact_tables`.

    score[t, g] = sum_i [A_i(c) + B_i(N - c)] + E log(K_t - 1), with A_i(n) = lgamma(alpha_i +
    n) - lgamma(alpha_i), B_i likewise, E = sum_i e_i(g) (terms constant in g dropped, the sign
    of the (K - 1) term folded into E: -(N - e) log(K - 1) = e log(K - 1) + const). Every
    table holds m / scale + lo: the m parts are gathered and summed exactly in int32 and
    differenced against the best unmasked candidate in int32, so float32 rounding touches only
    the small lo parts and candidates far behind the best one. Terms of size ~10^6 that cancel
    to O(1) stay exact: the job of the float64 host path, on the device and ~10x faster.
    """
    T, I, Kmax = e.shape
    width = ma.shape[0] // I
    dt = la.dtype
    Ni, ci, ei = N.astype(jnp.int32), c.astype(jnp.int32), e.astype(jnp.int32)
    exact, rest = [], []
    for i in range(I):
        ia = i * width + ci[:, i, :]
        ib = i * width + (Ni[:, i, None] - ci[:, i, :])
        exact.append(jnp.take(ma, ia, mode="clip") + jnp.take(mb, ib, mode="clip"))
        rest.append(jnp.take(la, ia, mode="clip") + jnp.take(lb, ib, mode="clip"))
    E = _tree_sum(ei[:, i, :] for i in range(I))
    Ki = K.astype(jnp.int32)[:, None]
    exact = _tree_sum(exact) + E * jnp.take(mk, Ki, mode="clip")
    # E - E[:, :1]: small for near-tied candidates, so its float product stays accurate
    rest = _tree_sum(rest) + (E - E[:, :1]).astype(dt) * jnp.take(lk, Ki, mode="clip")
    exact, rest = jax.lax.optimization_barrier((exact, rest))
    low = jnp.iinfo(jnp.int32).min
    best = jnp.where(mask[:, 0], exact[:, 0], low)
    for k in range(1, Kmax):
        best = jnp.maximum(best, jnp.where(mask[:, k], exact[:, k], low))
    score = tau * ((exact - best[:, None]).astype(dt) / scale + rest)
    return _normalize(score if log_prior is None else score + log_prior, mask)


_GRID_FEATURES_MAX = 4096        # I * S * S: one-hot width of the grid path
_GRID_CELLS_MAX = 50_000_000     # T * K * features: its dense one-hot size


@partial(jax.jit, static_argnames=("table_size", "small_counts"))
def onecoin_grid_log_posterior(N, e, c, mask, K, alphas, betas, taus, log_prior, table_size,
                               small_counts=False):
    """[M, T, K] one-coin posteriors for M prior rows (alphas, betas [M, I], taus [M]).

    Every (agent, N, c) cell is one feature, so all M posteriors come from one matrix product of
    the tasks' one-hot features [T, K, I S^2] with the M rows' tables [M, I S^2] — what makes a
    whole CV grid cost about one kernel call. Falls back to a vmap of the single-prior kernel
    when the tables are wide or counts exceed them. ``small_counts`` (static): the caller knows
    every N < ``table_size`` (from the host), so only the table path is traced and compiled,
    not the large-count branch of a ``lax.cond``.
    """
    T, I, Kmax = e.shape
    S = table_size
    F = I * S * S
    path = "tables" if small_counts else "auto"
    single = jax.vmap(lambda a, b, t: _onecoin(N, e, c, mask, K, a, b, t, log_prior, S, path))
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

    if small_counts:
        return tables()
    return jax.lax.cond(jnp.max(N, initial=0) < S, tables, lambda: single(alphas, betas, taus))


def _log_prior(log_prior, T, K, dt):
    if log_prior is None:
        return None          # uniform: nothing to add
    lp = jnp.asarray(log_prior, dt)
    if lp.ndim == 1:
        lp = lp[None, :]
    if lp.ndim != 2 or lp.shape[-1] != K or lp.shape[0] not in (1, T):
        raise DataError(f"log_prior must be [K] or [T, K] with K = {K}, got {lp.shape}",
                        field="log_prior")
    return lp


def _require(arr, name, ok, what):
    """Value check for concrete inputs (traced values inside a user's jit are not inspectable);
    run in NumPy on a host copy of the (small) parameter array: no device dispatch."""
    if not isinstance(arr, jax.core.Tracer) and not bool(np.all(ok(np.asarray(arr)))):
        raise DataError(f"{name} must be {what}", field=name)


def _finite_positive(x):
    return np.isfinite(x) & (x > 0)


def _finite_nonnegative(x):
    return np.isfinite(x) & (x >= 0)


def _max_count(counts: Counts) -> int | None:
    """max N over all tasks and agents (0 when empty), or None when traced: read once per
    collection (:attr:`Counts.max_count`), not per kernel call."""
    return counts.max_count


def _check_agents(counts: Counts, arr, name, ndim):
    I = counts.N.shape[1]
    if arr.ndim != ndim or arr.shape[0] != I:
        raise DataError(f"{name} must have {I} agents on its first axis (one per counts agent), "
                        f"got shape {arr.shape}", field=name)


def table_size_for(counts: Counts) -> int:
    """Smallest power of two in [8, DEFAULT_TABLE_SIZE] above every N (DEFAULT when traced or
    larger): small tables are cheap to build, which matters when a grid of priors is vmapped."""
    return _table_size_above(_max_count(counts), counts.N.size)


def _table_size_above(top: int | None, size_of_N: int) -> int:
    if top is None or size_of_N == 0:
        return DEFAULT_TABLE_SIZE
    top = top + 1
    size = 8
    while size < top and size < DEFAULT_TABLE_SIZE:
        size *= 2
    return size


def onecoin_log_posterior(counts: Counts, alpha, beta, tau=1.0, log_prior=None, *, dtype=None,
                          table_size: int | None = None,
                          counts_below: int | None = None) -> jax.Array:
    """One-coin BDA posterior, Eqs. (1)-(2) of [BDA] §3 (Algorithm 1), optionally tempered.

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
      counts_below: an upper bound the caller knows for every N (exclusive), for counts traced
        inside a jitted function of the caller's, where the largest N cannot be read: with
        ``counts_below <= table_size`` only the table path is compiled (no device-side branch).
        Checked against concrete counts (:class:`DataError` if some N reaches it); inside a
        transformation it is the caller's promise.

    Returns: normalized log-posteriors [T, K]; padding slots are -inf. A task with K_t = 1 gets
    probability 1 on its only candidate (the (K - 1) factor is taken as 1 there).

    >>> import numpy as np
    >>> counts = Counts.from_arrays(N=[[1]], e=[[[1, 0, 0]]], c=[[[1, 0, 0]]])
    >>> np.exp(onecoin_log_posterior(counts, [7.0], [3.0])).astype(float).round(3).tolist()
    [[0.7, 0.15, 0.15]]
    """
    dt = float_dtype(dtype)
    alpha_in, beta_in = alpha, beta         # the caller's values (float64 for the exact tables)
    alpha = jnp.asarray(alpha, dt)
    beta = jnp.asarray(beta, dt)
    _check_agents(counts, alpha, "alpha", 1)
    _check_agents(counts, beta, "beta", 1)
    for arr, name in ((alpha, "alpha"), (beta, "beta")):
        _require(arr, name, _finite_positive, "finite and > 0")
    tau = jnp.asarray(tau, dt)
    _require(tau, "tau", _finite_nonnegative, "finite and >= 0")
    T, _, K = counts.e.shape
    top = _max_count(counts)          # concrete counts: pick the path here, not on the device
    if counts_below is not None and top is not None and top >= counts_below:
        raise DataError(f"counts_below={counts_below} but the largest N is {top}",
                        field="counts_below")
    size = int(_table_size_above(top, counts.N.size) if table_size is None else table_size)
    path = "auto" if top is None else ("tables" if top < size else "large")
    if top is None and counts_below is not None and counts_below <= size:
        path = "tables"
    log_prior = _log_prior(log_prior, T, K, dt)
    I = counts.N.shape[1]
    # on the device once per collection, counts in their narrowest integer type (cached)
    arrays = counts.kernel_arrays("N", "e", "c", "mask", "K")
    if (path == "large" and dt == jnp.float32 and I <= _UNROLL_AGENTS
            and I * _exact_width(top) <= _EXACT_TABLE_ENTRIES
            and not any(isinstance(x, jax.core.Tracer) for x in (alpha, beta))):
        tables = _exact_tables(alpha_in, beta_in, top, K)
        return _onecoin_exact(*arrays, *tables, tau, log_prior)
    return _onecoin(*arrays, alpha, beta, tau, log_prior, size, path)


@persistent_jit
def _confusion(c, mask, conf, tau, log_prior):
    """Eq. (4) scores as one fused pass over the counts, then the normalization.

    Councils and small label sets (I K <= ``_UNROLL_CELLS``): score[t] = log pi0 +
    sum_(i, h) c[t, i, h] W[i, h, :] with W[i, h, g] = tau rel[i, g, h] laid out contiguous in g,
    one broadcast multiply-add per (agent, cell), all fused by XLA into a single loop over tasks
    that reads c once (any integer dtype) and writes [T, K]: no [T, I, K] float copy and no
    [T, I, K, K] product. (A ``dot`` needs the counts converted to a float [T, I K] array first,
    and XLA:CPU's dot is slow for an output width of K; both cost more than the fused loop.)
    Crowds (many agents): one einsum contraction over (agent, cell).

    Large counts in float32 go to :func:`_confusion_split` instead.
    """
    # log P_i(h | g) - log P_i(h | 0): the g-independent part cancels in the normalization and
    # the smaller magnitudes keep float32 accurate for large counts.
    dt = conf.dtype
    log_conf = jnp.log(jnp.clip(conf, jnp.finfo(dt).tiny, None))
    rel = log_conf - log_conf[:, :1, :]
    T, I, K = c.shape
    if I * K > _UNROLL_CELLS:
        score = tau * jnp.einsum("tih,igh->tg", c.astype(dt), rel)
        if log_prior is not None:
            score = score + log_prior
    else:
        # Materialized (tiny) and flat: keeps its producers out of the per-task loop, and a 1-D
        # buffer is laid out in logical order, so W[i, h] is contiguous in g (XLA would otherwise
        # give the transpose a strided layout, which costs 2x at K = 10).
        W = jax.lax.optimization_barrier((tau * jnp.swapaxes(rel, 1, 2)).reshape(-1))
        W = W.reshape(I, K, K)                                                # [I, h, g]
        per_agent = []
        for i in range(I):
            part = c[:, i, 0, None].astype(dt) * W[i, 0]
            for h in range(1, K):
                part = part + c[:, i, h, None].astype(dt) * W[i, h]
            per_agent.append(part)
        # one accumulator per agent, then a pairwise sum: independent chains (a single chain of
        # I K dependent adds is latency-bound; 1.4x slower at I K = 50)
        score = _tree_sum(per_agent)
        if log_prior is not None:
            score = score + log_prior
    return _normalize(score, mask)


def _split_weights(confusion, tau, top):
    """Host float64 weights W[i, h, g] = tau (log P_i(h | g) - log P_i(h | 0)) of the confusion
    kernel, split as W = m / scale + lo: m [I, K, K] int32, lo float32, scale a power of two
    such that sum |c m| < 2^29 whenever every count is at most ``top``."""
    P = np.asarray(confusion, np.float64)
    I, K = P.shape[0], P.shape[1]
    log_p = np.log(np.clip(P, np.finfo(np.float32).tiny, None))      # the float32 kernel's clip
    W = float(np.asarray(tau, np.float64)) * np.swapaxes(log_p - log_p[:, :1, :], 1, 2)
    bound = max(I * K * int(top), 1) * (float(np.abs(W).max()) + 1.0)
    scale = 2.0 ** np.floor(np.log2(2.0 ** 29 / bound))
    m = np.round(W * scale)
    return m.astype(np.int32), ((W * scale - m) / scale).astype(np.float32), np.float32(scale)


@jax.jit
def _confusion_split(c, mask, m, lo, scale, log_prior):
    """The confusion kernel for large counts in float32 (``_SPLIT_COUNTS`` and up).

    A float32 sum of terms c W of size ~10^4 loses ~10^-3 in log-odds, and so does W itself
    when log P is taken in float32. Here W comes from the host in float64, split as
    m / scale + lo (:func:`_split_weights`): sum c m is summed exactly in int32 and differenced
    against the best unmasked candidate in int32, so float32 rounding only touches the small
    remainder sum c lo and candidates far behind the best one.
    """
    T, I, K = c.shape
    dt = lo.dtype
    ci = c.astype(jnp.int32)
    exact = _tree_sum(_tree_sum(ci[:, i, h, None] * m[i, h] for h in range(K)) for i in range(I))
    rest = _tree_sum(_tree_sum(c[:, i, h, None].astype(dt) * lo[i, h] for h in range(K))
                     for i in range(I))
    exact = jax.lax.optimization_barrier(exact)
    low = jnp.iinfo(jnp.int32).min
    best = jnp.where(mask[:, 0], exact[:, 0], low)
    for k in range(1, K):
        best = jnp.maximum(best, jnp.where(mask[:, k], exact[:, k], low))
    score = (exact - best[:, None]).astype(dt) / scale + rest
    return _normalize(score if log_prior is None else score + log_prior, mask)


def confusion_log_posterior(counts: Counts, confusion, tau=1.0, log_prior=None, *,
                            dtype=None) -> jax.Array:
    """Tempered confusion-matrix BDA posterior, Eq. (4) of [BDA] §3 (Appendix C.5).

    log pi_tau(g | T) = log pi0(g) + tau * sum_i sum_h c_i(h) log P_i(h | g) + const,

    where c_i(h) are the consistent counts (Definition 1's pseudo-observations: a challenge of a
    adds one to every h != a) and ``confusion[i, g, h] = P_i(h | g)`` — rows indexed by agent, true
    answer, observed cell; e.g. the Dirichlet posterior means of docs/evaluation.md. Entries are clipped at
    the smallest normal float before the log, so a zero probability acts as a very large penalty.

    Args: counts; confusion [I, K, K]; tau scalar; log_prior [K] or [T, K]; dtype as for
    :func:`onecoin_log_posterior`. Returns normalized log-posteriors [T, K].

    >>> import numpy as np
    >>> counts = Counts.from_arrays(N=[[1]], e=[[[1, 0]]], c=[[[1, 0]]])
    >>> P = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    >>> np.exp(confusion_log_posterior(counts, P)).astype(float).round(4).tolist()
    [[0.7273, 0.2727]]
    """
    dt = float_dtype(dtype)
    conf = jnp.asarray(confusion, dt)
    _check_agents(counts, conf, "confusion", 3)
    T, _, K = counts.e.shape
    if conf.shape[1:] != (K, K):
        raise DataError(f"confusion must be [I, K, K] with K = {K}, got {conf.shape}",
                        field="confusion")
    _require(conf, "confusion", _finite_nonnegative, "finite and >= 0")
    tau_arr = jnp.asarray(tau, dt)
    _require(tau_arr, "tau", _finite_nonnegative, "finite and >= 0")
    log_prior = _log_prior(log_prior, T, K, dt)
    top = _max_count(counts)
    c, mask = counts.kernel_arrays("c", "mask")   # on the device once, narrowest integer type
    if (dt == jnp.float32 and top is not None and top >= _SPLIT_COUNTS
            and counts.N.shape[1] * K <= _UNROLL_CELLS
            and not any(isinstance(x, jax.core.Tracer) for x in (confusion, tau))):
        m, lo, scale = _split_weights(confusion, tau, top)
        return _confusion_split(c, mask, m, lo, scale, log_prior)
    return _confusion(c, mask, conf, tau_arr, log_prior)
