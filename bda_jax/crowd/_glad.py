"""GLAD over sparse crowd labels (Whitehill et al. 2009), matching crowd-kit 1.4.2's ``GLAD``.

Data layout (shared with :mod:`bda_jax.crowd._mace`): one row per label, ``task`` [P], ``worker``
[P], ``label`` [P] (int32; duplicates allowed), ``mask`` [T, K] of each task's valid classes and
``gold`` [T] (-1 = unknown). No dense tasks x workers matrix is ever formed: per-task and
per-worker sums are ``jax.ops.segment_sum`` with static segment counts.

Model (Whitehill et al. 2009, Eqs. 1-2; crowd-kit's parameterization). Worker ability
``alpha_j`` in R, task inverse difficulty ``beta_t = exp(lb_t) > 0``. A label of worker j on task
t whose truth is c equals c with probability ``s = sigmoid(alpha_j * beta_t)`` and each of the
task's other ``K_t - 1`` valid classes with probability ``(1 - s) / (K_t - 1)``. The truth has a
fixed class prior (uniform over the task's valid classes unless ``class_prior`` is given; not
re-estimated, as in crowd-kit). Priors: ``alpha_j ~ N(mu_alpha, 1)``, ``lb_t ~ N(mu_lb, 1)``
(crowd-kit puts its beta prior on the log-parameter: its ``betas_`` are our ``log_beta``);
``mu_alpha = mu_lb = 1`` by default.

EM, exactly crowd-kit 1.4.2 ``GLAD.fit`` (crowdkit/aggregation/classification/glad.py):

* init ``alpha = 1``, ``lb = 1`` (crowd-kit ``_init``); E-step; ``Q_0`` = the *unnormalized* Q.
* each iteration: E-step ``log q[t, c] = log pi_c + sum_rows log P(y | c)`` (softmax over the
  task's valid classes; gold tasks clamped one-hot); M-step = scipy ``minimize(-Q,
  method="CG", jac=..., tol=m_step_tol, options={"maxiter": m_step_max_iter})`` from the current
  point, with ``Q(q, params) = sum_rows [r log s + (1 - r)(log(1 - s) - log(K_t - 1))] +
  sum_j log N(alpha_j - mu_alpha) + sum_t log N(lb_t - mu_lb)``, ``r = q[t, y]``. Then
  ``Q_k = Q(q, new params) / (P K)`` (crowd-kit divides by ``len(data)`` of its melted
  [P * K]-row frame) and the loop stops when ``Q_k - Q_{k-1} < tol`` (a *decrease* stops it too;
  at k = 1 the comparison is against the unnormalized ``Q_0``, so it never stops there).
* The M-step is a JAX port of SciPy's ``_minimize_cg``: Polak-Ribiere+ conjugate gradient,
  ``gtol = m_step_tol`` on the max-norm of the gradient, at most ``m_step_max_iter`` iterations,
  initial step ``min(1, 2.02 (f_k - f_{k-1}) / g.p)`` (``f_{-1} = f_0 + |g_0|_2 / 2``), MINPACK
  DCSRCH line search (Moré-Thuente; ``c1 = 1e-4``, ``c2 = 0.4``, ``xtol = 1e-14``, 100 steps),
  and the sufficient-descent check ``p_{k+1}.g_{k+1} <= -0.01 |g_{k+1}|^2``; where DCSRCH fails
  or the check rejects its step, SciPy's fallback ``line_search_wolfe2`` (doubling bracket +
  cubic/quadratic ``_zoom``, same c1, c2) runs, and if that fails too the M-step stops at the
  current point (SciPy's ``pr_loss`` exit). In float64 the port reproduces SciPy's iterates to
  ~1e-10. The line search runs on differences ``f(x + a p) - f(x)`` summed row by row
  (``_evaluate``), which keeps float32 able to resolve the small decreases it compares.
* crowd-kit's K in ``log(K - 1)`` is the number of distinct labels in its frame: pass that as
  ``n_classes`` (with a ``mask``, ``K_t`` is each task's number of valid classes).
* Returned like crowd-kit: ``log_posterior`` is the last E-step's (the one the final M-step
  used), the parameters are those after the final M-step.

Monotonicity: every accepted CG step increases Q (Armijo), so this is a generalized EM for the
MAP objective ``log p(labels | alpha, beta) + log N(alpha) + log N(lb)``; ``objective_history``
records it at each E-step and is non-decreasing. crowd-kit's loss ``Q_k`` (``loss_history``) is
not an EM bound and need not increase.

>>> rng = np.random.RandomState(0)                       # 60 tasks, each labeled by 6 workers
>>> task, worker = np.repeat(np.arange(60), 6), np.tile(np.arange(6), 60)
>>> truth = rng.randint(0, 3, 60)
>>> label = np.where(rng.rand(360) < 0.7, truth[task], rng.randint(0, 3, 360))
>>> r = glad_em(task, worker, label, n_tasks=60, n_workers=6, n_classes=3)
>>> r.log_posterior.shape, r.params.alpha.shape, r.params.beta.shape
((60, 3), (6,), (60,))
>>> bool((np.argmax(r.log_posterior, 1) == truth).mean() > 0.9)
True
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import DataError
from .._core.numerics import float_dtype

__all__ = ["CrowdLabels", "GLADParams", "GLADResult", "crowd_labels", "glad_e_step", "glad_em",
           "glad_m_step", "glad_objective"]

_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))
# scipy.optimize._minimize_cg / line_search_wolfe1 / DCSRCH constants.
_C1, _C2, _XTOL, _SIGMA3, _LS_MAXITER = 1e-4, 0.4, 1e-14, 0.01, 100


class CrowdLabels(NamedTuple):
    """Validated sparse crowd labels (a pytree; sizes are static through the shapes).

    ``task``, ``worker``, ``label`` [P] int32 (one row per label), ``mask`` [T, K] bool valid
    classes, ``gold`` [T] int32 (-1 = unknown), ``worker_count`` [W] int32 labels per worker
    (carries ``n_workers`` as a shape), ``n_valid`` [T] int32 valid classes per task."""

    task: jax.Array
    worker: jax.Array
    label: jax.Array
    mask: jax.Array
    gold: jax.Array
    worker_count: jax.Array
    n_valid: jax.Array

    @property
    def shape(self):
        """``(T, W, K)``."""
        return self.mask.shape[0], self.worker_count.shape[0], self.mask.shape[1]


def _positive_int(x, name, least):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < least:
        raise DataError(f"{name} must be an integer >= {least}, got {x!r}", field=name)
    return int(x)


def _index_array(x, name, n=None):
    a = np.asarray(x)
    if a.ndim != 1:
        raise DataError(f"{name} must be a 1-D array, got shape {a.shape}", field=name)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise DataError(f"{name} must hold integers, got dtype {a.dtype}", field=name)
    a = a.astype(np.int64)
    if n is not None and a.size and (a.min() < 0 or a.max() >= n):
        row = int(np.flatnonzero((a < 0) | (a >= n))[0])
        raise DataError(f"{name} must lie in [0, {n}); row {row} holds {a[row]}", field=name)
    return a


def crowd_labels(task, worker, label, n_tasks, n_workers, n_classes, *, mask=None,
                 gold=None) -> CrowdLabels:
    """Validate sparse labels in NumPy and return a :class:`CrowdLabels` (``DataError`` names
    the offending field and row)."""
    T = _positive_int(n_tasks, "n_tasks", 1)
    W = _positive_int(n_workers, "n_workers", 1)
    K = _positive_int(n_classes, "n_classes", 2)
    task = _index_array(task, "task", T)
    worker = _index_array(worker, "worker", W)
    label = _index_array(label, "label", K)
    for name, a in (("worker", worker), ("label", label)):
        if a.shape != task.shape:
            raise DataError(f"{name} has {a.shape[0]} rows but task has {task.shape[0]}",
                            field=name)
    if mask is None:
        mask = np.ones((T, K), bool)
    mask = np.asarray(mask)
    if mask.shape != (T, K):
        raise DataError(f"mask must be [n_tasks, n_classes] = {(T, K)}, got {mask.shape}",
                        field="mask")
    mask = mask.astype(bool)
    if not mask.any(-1).all():
        raise DataError(f"task {int(np.flatnonzero(~mask.any(-1))[0])} has no valid class",
                        field="mask")
    bad = ~mask[task, label]
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"row {row}: label {label[row]} is not a valid class of task "
                        f"{task[row]}", field="label")
    if gold is None:
        gold = np.full(T, -1)
    gold = np.asarray(gold)
    if gold.shape != (T,) or (gold.size and not np.issubdtype(gold.dtype, np.integer)):
        raise DataError(f"gold must be [n_tasks] = ({T},) integers, got {gold.shape} "
                        f"{gold.dtype}", field="gold")
    gold = gold.astype(np.int64)
    known = gold >= 0
    if (gold < -1).any() or (gold >= K).any() or not mask[known, gold[known]].all():
        t = int(np.flatnonzero((gold < -1) | (gold >= K)
                               | (known & ~mask[np.arange(T), np.clip(gold, 0, K - 1)]))[0])
        raise DataError(f"gold[{t}] = {gold[t]} is neither -1 nor a valid class of the task",
                        field="gold")
    count = np.bincount(worker, minlength=W)
    i32 = lambda a: jnp.asarray(a.astype(np.int32))
    return CrowdLabels(i32(task), i32(worker), i32(label), jnp.asarray(mask), i32(gold),
                       i32(count), i32(mask.sum(-1)))


class GLADParams(NamedTuple):
    """GLAD parameters (a pytree): ``alpha`` [W] worker abilities, ``log_beta`` [T] log inverse
    task difficulties (crowd-kit's ``betas_``), ``log_prior`` [K] fixed log class prior."""

    alpha: jax.Array
    log_beta: jax.Array
    log_prior: jax.Array

    @property
    def beta(self):
        """Inverse difficulty ``exp(log_beta)`` [T]; ``1 / beta`` is the difficulty."""
        return jnp.exp(self.log_beta)


class GLADResult(NamedTuple):
    """``log_posterior`` [T, K] (-inf on invalid classes; from the last E-step, as crowd-kit's
    ``probas_``), ``params`` (:class:`GLADParams` after the last M-step), ``log_likelihood``
    (observed-data marginal ``sum_t log p(labels_t)`` at the parameters of that E-step; gold tasks
    contribute the joint with their gold class), ``objective`` (crowd-kit's final loss ``Q / (P
    K)``, what the stopping rule compares), ``n_iter`` (EM iterations run), ``converged`` (the
    ``tol`` test stopped the loop), ``loss_history`` [n_iter] (crowd-kit's ``loss_history_``, NaN
    after the stop), ``objective_history`` [n_iter] (MAP objective at each E-step, NaN after the
    stop; non-decreasing), ``m_step_iters`` [n_iter] (CG iterations per M-step, -1 after the
    stop)."""

    log_posterior: jax.Array
    params: GLADParams
    log_likelihood: jax.Array
    objective: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    loss_history: jax.Array
    objective_history: jax.Array
    m_step_iters: jax.Array


# ---------------------------------------------------------------- pieces


def _seg(x, ids, n):
    return jax.ops.segment_sum(x, ids, num_segments=n)


def _log_k1(data, dt):
    """``log(K_t - 1)`` per task [T] (0 where K_t = 1)."""
    return jnp.log(jnp.maximum(data.n_valid.astype(dt) - 1.0, 1.0))


def _softplus(x):
    return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def _barrier(*xs):
    """Materialize gathered per-row arrays: fused into transcendental loops, XLA:CPU recomputes
    each gather per use and runs the loop ~10-40x slower."""
    return jax.lax.optimization_barrier(xs)


def _rows(data, params):
    """Per-row ``x = alpha_j beta_t`` and ``sp = softplus(-x) = -log sigmoid(x)`` [P]."""
    (eb,) = _barrier(jnp.exp(params.log_beta))
    (x,) = _barrier(params.alpha[data.worker] * eb[data.task])
    return x, _softplus(-x)


def _flat(data):
    """Row index into a flattened [T, K] array: ``task * K + label`` [P]."""
    return data.task * data.mask.shape[1] + data.label


def _lse(score):
    """``logsumexp`` over the K classes of a [T, K] score, unrolled over the (static, small)
    class axis: XLA:CPU's reduction over a short minor axis is ~3x slower. -inf rows give -inf."""
    cols = [score[:, k] for k in range(score.shape[1])]
    m = cols[0]
    for c in cols[1:]:
        m = jnp.maximum(m, c)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    z = jnp.exp(cols[0] - m)
    for c in cols[1:]:
        z = z + jnp.exp(c - m)
    return m + jnp.log(z)


def _support(data):
    """[T, K] classes a task's truth may take: its valid classes, or only its gold class.
    Masking the score with it clamps gold tasks: their log-normalizer is then the joint
    ``log p(gold, labels_t)`` and their posterior one-hot, with no extra pass."""
    K = data.mask.shape[1]
    onehot = jnp.arange(K)[None, :] == data.gold[:, None]
    return data.mask & ((data.gold < 0)[:, None] | onehot)


def _clamp(data, score):
    """Gold-clamped log posterior [T, K] and per-task log-likelihood [T] from a score [T, K]
    (``-inf`` outside :func:`_support`)."""
    ll = _lse(score)
    return score - ll[:, None], ll


def _log_prior_t(data, log_prior):
    """Class log prior renormalized over each task's valid classes, [T, K] (-inf elsewhere)."""
    lp = jnp.where(data.mask, log_prior[None, :], -jnp.inf)
    return lp - _lse(lp)[:, None]


def _e_step(data, params):
    """E-step: ``(log_q [T, K], log_likelihood [T])``."""
    T, _, K = data.shape
    x, sp = _rows(data, params)
    (lk1,) = _barrier(_log_k1(data, x.dtype)[data.task])
    wrong = -sp - x - lk1                                   # log((1 - s) / (K_t - 1))
    # row p adds `wrong` to every class of its task and log s to its label's: one scatter of
    # K-vectors (cheaper on XLA:CPU than one per task plus one per (task, class))
    vals = wrong[:, None] + jnp.where(jnp.arange(K)[None, :] == data.label[:, None],
                                      (-sp - wrong)[:, None], 0.0)
    score = _seg(vals, data.task, T)
    score = jnp.where(_support(data), score + _log_prior_t(data, params.log_prior), -jnp.inf)
    return _clamp(data, score)


@jax.jit
def glad_e_step(data: CrowdLabels, params: GLADParams):
    """GLAD E-step (Whitehill et al. 2009 Eq. 3; crowd-kit ``GLAD._e_step``):
    ``log q[t, c] = log pi_c + sum_rows [y = c] log s + [y != c] (log(1 - s) - log(K_t - 1))``.

    Returns ``(log_posterior [T, K], log_likelihood [T])``; gold tasks are one-hot and contribute
    ``log p(gold, labels_t)``."""
    return _e_step(data, params)


def _r(data, log_q):
    """``r = q[t, y]`` per row [P] from the log posterior [T, K]."""
    (r,) = _barrier(jnp.exp(log_q).reshape(-1)[_flat(data)])
    return r


def _q_value(data, params, r, mu_a, mu_b):
    """crowd-kit's Q (unnormalized, ``GLAD._compute_Q``)."""
    x, sp = _rows(data, params)
    (lk1,) = _barrier(_log_k1(data, x.dtype)[data.task])
    rows = -sp - (1.0 - r) * (x + lk1)
    prior = -(0.5 * (params.alpha - mu_a) ** 2 + _HALF_LOG_2PI).sum() \
        - (0.5 * (params.log_beta - mu_b) ** 2 + _HALF_LOG_2PI).sum()
    return rows.sum() + prior


def glad_objective(data: CrowdLabels, params: GLADParams, log_posterior, alpha_prior_mean=1.0,
                   log_beta_prior_mean=1.0):
    """crowd-kit's (unnormalized) loss ``Q(q, params)`` for posteriors ``log_posterior`` [T, K]:
    expected complete-data log-likelihood of the labels plus the Gaussian log priors."""
    dt = params.alpha.dtype
    return _objective(data, params, jnp.asarray(log_posterior, dt),
                      jnp.asarray(alpha_prior_mean, dt), jnp.asarray(log_beta_prior_mean, dt))


@jax.jit
def _objective(data, params, log_posterior, mu_a, mu_b):
    return _q_value(data, params, _r(data, log_posterior), mu_a, mu_b)


def _map_prior(params, mu_a, mu_b):
    return -(0.5 * (params.alpha - mu_a) ** 2 + _HALF_LOG_2PI).sum() \
        - (0.5 * (params.log_beta - mu_b) ** 2 + _HALF_LOG_2PI).sum()


# ---------------------------------------------------------------- M-step: SciPy CG in JAX


def _dcstep(stx, fx, dx, sty, fy, dy, stp, fp, dp, brackt, stpmin, stpmax):
    """MINPACK DCSTEP (scipy.optimize._dcsrch.dcstep), branch-free."""
    sgnd = jnp.sign(dp) * jnp.sign(dx)
    amax3 = lambda a, b, c: jnp.maximum(jnp.maximum(jnp.abs(a), jnp.abs(b)), jnp.abs(c))
    theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp
    s = amax3(theta, dx, dp)
    disc = (theta / s) ** 2 - (dx / s) * (dp / s)
    # case 1: higher function value -> bracketed, cubic or mid cubic/quadratic
    root = s * jnp.sqrt(disc)
    g1 = jnp.where(stp < stx, -root, root)
    r1 = ((g1 - dx) + theta) / (((g1 - dx) + g1) + dp)
    stpc1 = stx + r1 * (stp - stx)
    stpq1 = stx + ((dx / ((fx - fp) / (stp - stx) + dx)) / 2.0) * (stp - stx)
    stpf1 = jnp.where(jnp.abs(stpc1 - stx) <= jnp.abs(stpq1 - stx), stpc1,
                      stpc1 + (stpq1 - stpc1) / 2.0)
    # case 2: derivatives of opposite sign -> bracketed
    g2 = jnp.where(stp > stx, -root, root)
    r2 = ((g2 - dp) + theta) / (((g2 - dp) + g2) + dx)
    stpc2 = stp + r2 * (stx - stp)
    stpq2 = stp + (dp / (dp - dx)) * (stx - stp)
    stpf2 = jnp.where(jnp.abs(stpc2 - stp) > jnp.abs(stpq2 - stp), stpc2, stpq2)
    # case 3: same sign, derivative magnitude decreases
    g3 = s * jnp.sqrt(jnp.maximum(0.0, disc))
    g3 = jnp.where(stp > stx, -g3, g3)
    r3 = ((g3 - dp) + theta) / ((g3 + (dx - dp)) + g3)
    stpc3 = jnp.where((r3 < 0) & (g3 != 0), stp + r3 * (stx - stp),
                      jnp.where(stp > stx, stpmax, stpmin))
    stpq3 = stp + (dp / (dp - dx)) * (stx - stp)
    near = jnp.where(jnp.abs(stpc3 - stp) < jnp.abs(stpq3 - stp), stpc3, stpq3)
    near = jnp.where(stp > stx, jnp.minimum(stp + 0.66 * (sty - stp), near),
                     jnp.maximum(stp + 0.66 * (sty - stp), near))
    far = jnp.clip(jnp.where(jnp.abs(stpc3 - stp) > jnp.abs(stpq3 - stp), stpc3, stpq3),
                   stpmin, stpmax)
    stpf3 = jnp.where(brackt, near, far)
    # case 4: same sign, derivative magnitude does not decrease
    theta4 = 3.0 * (fp - fy) / (sty - stp) + dy + dp
    s4 = amax3(theta4, dy, dp)
    g4 = s4 * jnp.sqrt((theta4 / s4) ** 2 - (dy / s4) * (dp / s4))
    g4 = jnp.where(stp > sty, -g4, g4)
    r4 = ((g4 - dp) + theta4) / (((g4 - dp) + g4) + dy)
    stpf4 = jnp.where(brackt, stp + r4 * (sty - stp), jnp.where(stp > stx, stpmax, stpmin))

    c1 = fp > fx
    c2 = ~c1 & (sgnd < 0)
    c3 = ~c1 & ~c2 & (jnp.abs(dp) < jnp.abs(dx))
    stpf = jnp.where(c1, stpf1, jnp.where(c2, stpf2, jnp.where(c3, stpf3, stpf4)))
    brackt = brackt | c1 | c2
    to_y = c1 | (sgnd < 0)
    src = lambda a_x, a_p: jnp.where(c1, a_p, a_x)        # y <- p if c1 else x
    sty, fy, dy = (jnp.where(to_y, src(stx, stp), sty), jnp.where(to_y, src(fx, fp), fy),
                   jnp.where(to_y, src(dx, dp), dy))
    stx, fx, dx = (jnp.where(c1, stx, stp), jnp.where(c1, fx, fp), jnp.where(c1, dx, dp))
    return stx, fx, dx, sty, fy, dy, stpf, brackt


class _Search(NamedTuple):
    stp: jax.Array
    stage: jax.Array
    brackt: jax.Array
    width: jax.Array
    width1: jax.Array
    stx: jax.Array
    fx: jax.Array
    gx: jax.Array
    sty: jax.Array
    fy: jax.Array
    gy: jax.Array
    stmin: jax.Array
    stmax: jax.Array


def _dcsrch_iterate(st: _Search, f, g, ginit, stpmin, stpmax):
    """One ``DCSRCH._iterate`` after START (finit = 0: f is a difference). Returns (state,
    status) with status 0 = evaluate the new ``stp``, 1 = converged, 2 = warning (failure)."""
    gtest = _C1 * ginit
    stp = st.stp
    ftest = stp * gtest
    stage = jnp.where((st.stage == 1) & (f <= ftest) & (g >= 0), 2, st.stage)
    warn = ((st.brackt & ((stp <= st.stmin) | (stp >= st.stmax)))
            | (st.brackt & (st.stmax - st.stmin <= _XTOL * st.stmax))
            | ((stp == stpmax) & (f <= ftest) & (g <= gtest))
            | ((stp == stpmin) & ((f > ftest) | (g >= gtest))))
    conv = (f <= ftest) & (jnp.abs(g) <= _C2 * -ginit)
    status = jnp.where(conv, 1, jnp.where(warn, 2, 0)).astype(jnp.int32)

    mod = (stage == 1) & (f <= st.fx) & (f > ftest)
    sh = lambda v, s_: jnp.where(mod, v - s_ * gtest, v)
    shg = lambda v: jnp.where(mod, v - gtest, v)
    stx, fx, gx, sty, fy, gy, stp_new, brackt = _dcstep(
        st.stx, sh(st.fx, st.stx), shg(st.gx), st.sty, sh(st.fy, st.sty), shg(st.gy), stp,
        sh(f, stp), shg(g), st.brackt, st.stmin, st.stmax)
    fx = jnp.where(mod, fx + stx * gtest, fx)
    fy = jnp.where(mod, fy + sty * gtest, fy)
    gx = jnp.where(mod, gx + gtest, gx)
    gy = jnp.where(mod, gy + gtest, gy)
    bisect = brackt & (jnp.abs(sty - stx) >= 0.66 * st.width1)
    stp_new = jnp.where(bisect, stx + 0.5 * (sty - stx), stp_new)
    width1 = jnp.where(brackt, st.width, st.width1)
    width = jnp.where(brackt, jnp.abs(sty - stx), st.width)
    stmin = jnp.where(brackt, jnp.minimum(stx, sty), stp_new + 1.1 * (stp_new - stx))
    stmax = jnp.where(brackt, jnp.maximum(stx, sty), stp_new + 4.0 * (stp_new - stx))
    stp_new = jnp.clip(stp_new, stpmin, stpmax)
    stp_new = jnp.where((brackt & ((stp_new <= stmin) | (stp_new >= stmax)))
                        | (brackt & (stmax - stmin <= _XTOL * stmax)), stx, stp_new)
    status = jnp.where((status == 0) & ~jnp.isfinite(stp_new), 2, status).astype(jnp.int32)
    new = _Search(stp_new, stage, brackt, width, width1, stx, fx, gx, sty, fy, gy, stmin, stmax)
    keep = status != 0
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), st._replace(stage=stage),
                                 new)
    return new, status


class _Point(NamedTuple):
    """Objective pieces at a trial point: ``f`` (difference to the base point), ``g`` (= grad .
    p), gradients ``ga`` [W], ``gl`` [T], rows ``x``, ``sp`` [P]."""

    f: jax.Array
    g: jax.Array
    ga: jax.Array
    gl: jax.Array
    x: jax.Array
    sp: jax.Array


def _evaluate(data, r, a0, l0, pa, pl, x0, sp0, stp, mu_a, mu_b):
    """-Q at ``(a0, l0) + stp (pa, pl)`` minus -Q at the base point, and its gradient.

    The difference is summed row by row from ``dx = x - x0`` computed without cancellation
    (``stp pa_j e^lb + a0_j e^l0 expm1(stp pl_t)``) and ``softplus(-x) - softplus(-x0) =
    log1p(sigmoid(-x0) expm1(-dx))``, so float32 resolves the small decreases the line search
    compares (a plain float32 difference of two sums of P terms would not)."""
    T, W, _ = data.shape
    a, lb = a0 + stp * pa, l0 + stp * pl
    eb, em = jax.lax.optimization_barrier((jnp.exp(lb), jnp.expm1(stp * pl)))
    w, t = data.worker, data.task
    ebt = eb[t]
    x = a[w] * ebt
    dx = (stp * pa)[w] * ebt + x0 * em[t]
    # materialize the gathered rows: fused into the transcendental loops below they are
    # recomputed per use and XLA:CPU runs ~40x slower
    x, dx, ebt = jax.lax.optimization_barrier((x, dx, ebt))
    sp = _softplus(-x)
    small = jnp.abs(dx) < 1.0
    dsp = jnp.where(small, jnp.log1p(jnp.exp(-(sp0 + x0)) * jnp.expm1(-jnp.where(small, dx, 0.0))),
                    sp - sp0)
    f = (dsp + (1.0 - r) * dx).sum() \
        + (0.5 * stp * pa * (2.0 * (a0 - mu_a) + stp * pa)).sum() \
        + (0.5 * stp * pl * (2.0 * (l0 - mu_b) + stp * pl)).sum()
    u = r - jnp.exp(-sp)                                     # d log-lik / dx per row
    ga = -_seg(u * ebt, w, W) + (a - mu_a)
    gl = -_seg(u * x, t, T) + (lb - mu_b)
    return _Point(f, ga @ pa + gl @ pl, ga, gl, x, sp)


def _zeros_point(ev, stp):
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(ev, stp))


def _wolfe1(ev, g0, alpha1):
    """``scipy.optimize.line_search_wolfe1`` (MINPACK DCSRCH, c1 = 1e-4, c2 = 0.4, at most 100
    steps) for ``phi(a) = ev(a).f`` with ``phi(0) = 0``, ``phi'(0) = g0``. Returns (ok, stp,
    point at stp)."""
    dt = alpha1.dtype
    stpmin = jnp.asarray(max(1e-100, float(jnp.finfo(dt).tiny)), dt)
    stpmax = jnp.asarray(min(1e100, float(jnp.finfo(dt).max)), dt)
    zero = jnp.zeros((), dt)
    st = _Search(alpha1, jnp.int32(1), jnp.bool_(False), stpmax - stpmin,
                 (stpmax - stpmin) / 0.5, zero, zero, g0, zero, zero, g0, zero,
                 alpha1 + 4.0 * alpha1)
    bad_start = (alpha1 < stpmin) | (alpha1 > stpmax) | (g0 >= 0)

    def cond(c):
        i, status, *_ = c
        return (status == 0) & (i < _LS_MAXITER)

    def body(c):
        i, _, st, _ = c
        pt = ev(st.stp)
        st, status = _dcsrch_iterate(st, pt.f, pt.g, g0, stpmin, stpmax)
        return i + 1, status, st, pt

    _, status, st, pt = jax.lax.while_loop(
        cond, body, (jnp.int32(1), jnp.where(bad_start, 2, 0).astype(jnp.int32), st,
                     _zeros_point(ev, alpha1)))
    return status == 1, st.stp, pt


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """scipy.optimize._linesearch._cubicmin; NaN where SciPy returns None."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    u, v = fb - fa - fpa * db, fc - fa - fpa * dc
    A = (dc ** 2 * u - db ** 2 * v) / denom
    B = (-dc ** 3 * u + db ** 3 * v) / denom
    radical = B * B - 3 * A * fpa
    xmin = a + (-B + jnp.sqrt(radical)) / (3 * A)
    ok = (denom != 0) & (A != 0) & (radical >= 0) & jnp.isfinite(xmin)
    return jnp.where(ok, xmin, jnp.nan)


def _quadmin(a, fa, fpa, b, fb):
    """scipy.optimize._linesearch._quadmin; NaN where SciPy returns None."""
    db = b - a
    B = (fb - fa - fpa * db) / (db * db)
    xmin = a - fpa / (2.0 * B)
    ok = (db != 0) & (B != 0) & jnp.isfinite(xmin)
    return jnp.where(ok, xmin, jnp.nan)


class _W2(NamedTuple):
    phase: jax.Array      # 0 bracketing, 1 zoom, 2 accepted, 3 failed
    i: jax.Array          # bracketing steps (doublings)
    j: jax.Array          # zoom steps
    a0: jax.Array         # bracketing: previous point, value, slope; trial point a1
    f0: jax.Array
    d0: jax.Array
    a1: jax.Array
    lo: jax.Array         # zoom: a_lo, a_hi, phi_lo, phi_hi, derphi_lo, a_rec, phi_rec
    hi: jax.Array
    flo: jax.Array
    fhi: jax.Array
    dlo: jax.Array
    arec: jax.Array
    frec: jax.Array
    stp: jax.Array


def _wolfe2(ev, g0, alpha1, extra):
    """``scipy.optimize.line_search_wolfe2`` (bracketing by doubling, at most 10 steps, then
    ``_zoom`` with cubic/quadratic interpolation, at most 11 steps; c1 = 1e-4, c2 = 0.4) with
    SciPy's ``extra_condition`` as ``extra(point)``. One evaluation per loop step (the trial point
    is chosen first), so the objective is traced once. Returns (ok, stp, point at stp)."""
    z = jnp.zeros((), alpha1.dtype)
    i0 = jnp.int32(0)
    sel = lambda m, x, y: jax.tree_util.tree_map(lambda u, v: jnp.where(m, u, v), x, y)

    def body(c):
        st, best = c
        bracketing = st.phase == 0
        # zoom trial point (scipy _zoom: cubic, else quadratic, else bisection)
        dalpha = st.hi - st.lo
        lo_end, hi_end = jnp.minimum(st.lo, st.hi), jnp.maximum(st.lo, st.hi)
        aj = _cubicmin(st.lo, st.flo, st.dlo, st.hi, st.fhi, st.arec, st.frec)
        aj = jnp.where((st.j == 0) | jnp.isnan(aj) | (aj > hi_end - 0.2 * dalpha)
                       | (aj < lo_end + 0.2 * dalpha), jnp.nan, aj)
        aq = _quadmin(st.lo, st.flo, st.dlo, st.hi, st.fhi)
        aq = jnp.where(jnp.isnan(aq) | (aq > hi_end - 0.1 * dalpha)
                       | (aq < lo_end + 0.1 * dalpha), st.lo + 0.5 * dalpha, aq)
        aj = jnp.where(jnp.isnan(aj), aq, aj)
        a = jnp.where(bracketing, st.a1, aj)
        pt = ev(a)
        f, d = pt.f, pt.g
        ok_curv = jnp.abs(d) <= -_C2 * g0
        # bracketing update (pt is the point at a1)
        capped = st.i >= 10                                  # SciPy's for-else: take a1
        high_b = (f > _C1 * a * g0) | ((f >= st.f0) & (st.i > 0))
        accept_b = capped | (~high_b & ok_curv & extra(pt))
        flip_b = ~high_b & ~accept_b & (d >= 0)
        zoom_b = high_b | flip_b
        b = st._replace(a0=a, f0=f, d0=d, a1=2.0 * a, i=st.i + 1)
        b = sel(zoom_b, st._replace(
            phase=jnp.int32(1), j=i0, arec=z, frec=z,
            lo=jnp.where(high_b, st.a0, a), hi=jnp.where(high_b, a, st.a0),
            flo=jnp.where(high_b, st.f0, f), fhi=jnp.where(high_b, f, st.f0),
            dlo=jnp.where(high_b, st.d0, d)), b)
        b = b._replace(phase=jnp.where(st.a1 == 0, 3, jnp.where(accept_b, 2, b.phase)),
                       stp=a)
        # zoom update (pt is the point at aj)
        high = (f > _C1 * a * g0) | (f >= st.flo)
        accept_z = ~high & ok_curv & extra(pt)
        flip = d * (st.hi - st.lo) >= 0
        zz = st._replace(
            hi=jnp.where(high, a, jnp.where(flip, st.lo, st.hi)),
            fhi=jnp.where(high, f, jnp.where(flip, st.flo, st.fhi)),
            frec=jnp.where(high | flip, st.fhi, st.flo),
            arec=jnp.where(high | flip, st.hi, st.lo),
            lo=jnp.where(high, st.lo, a), flo=jnp.where(high, st.flo, f),
            dlo=jnp.where(high, st.dlo, d), j=st.j + 1, stp=a)
        zz = zz._replace(phase=jnp.where(accept_z, 2, jnp.where(st.j + 1 > 10, 3, 1)))
        accept = jnp.where(bracketing, accept_b & (st.a1 != 0), accept_z)
        return sel(bracketing, b, zz), sel(accept, pt, best)

    st = _W2(jnp.int32(0), i0, i0, z, z, g0, alpha1, z, z, z, z, z, z, z, z)
    st, best = jax.lax.while_loop(lambda c: c[0].phase < 2, body,
                                  (st, _zeros_point(ev, alpha1)))
    return st.phase == 2, st.stp, best


class _CG(NamedTuple):
    a: jax.Array
    lb: jax.Array
    ga: jax.Array
    gl: jax.Array
    pa: jax.Array
    pl: jax.Array
    x: jax.Array
    sp: jax.Array
    gnorm: jax.Array
    df: jax.Array
    k: jax.Array
    failed: jax.Array


def _gnorm(pt):
    return jnp.maximum(jnp.abs(pt.ga).max(initial=0.0), jnp.abs(pt.gl).max(initial=0.0))


@jax.jit
def _cg(data, r, params, mu_a, mu_b, tol, max_iter):
    """``scipy.optimize._minimize_cg`` (Polak-Ribiere+, ``line_search_wolfe12``) on -Q."""
    a, lb = params.alpha, params.log_beta
    zero = jnp.zeros((), a.dtype)
    pt = _evaluate(data, r, a, lb, jnp.zeros_like(a), jnp.zeros_like(lb), zero, zero, zero,
                   mu_a, mu_b)
    gg = pt.ga @ pt.ga + pt.gl @ pt.gl
    s0 = _CG(a, lb, pt.ga, pt.gl, -pt.ga, -pt.gl, pt.x, pt.sp, _gnorm(pt), -jnp.sqrt(gg) / 2.0,
             jnp.int32(0), jnp.bool_(False))

    def cond(s):
        return (s.gnorm > tol) & (s.k < max_iter) & ~s.failed

    def body(s):
        deltak = s.ga @ s.ga + s.gl @ s.gl
        g0 = s.ga @ s.pa + s.gl @ s.pl
        alpha1 = jnp.where(g0 != 0, jnp.minimum(1.0, 1.01 * 2 * s.df / g0), 1.0)
        alpha1 = jnp.where(alpha1 < 0, 1.0, alpha1).astype(a.dtype)
        ev = lambda stp: _evaluate(data, r, s.a, s.lb, s.pa, s.pl, s.x, s.sp, stp, mu_a, mu_b)

        def step(pt):                                   # polak_ribiere_powell_step
            beta = jnp.maximum(0.0, ((pt.ga - s.ga) @ pt.ga + (pt.gl - s.gl) @ pt.gl) / deltak)
            return -pt.ga + beta * s.pa, -pt.gl + beta * s.pl

        def descent(pt):                                # descent_condition
            pa, pl = step(pt)
            return (_gnorm(pt) <= tol) | (pa @ pt.ga + pl @ pt.gl
                                          <= -_SIGMA3 * (pt.ga @ pt.ga + pt.gl @ pt.gl))

        ok, stp, pt = _wolfe1(ev, g0, alpha1)
        ok = ok & descent(pt)
        ok, stp, pt = jax.lax.cond(ok, lambda: (ok, stp, pt),
                                   lambda: _wolfe2(ev, g0, alpha1, descent))
        pa, pl = step(pt)
        new = _CG(s.a + stp * s.pa, s.lb + stp * s.pl, pt.ga, pt.gl, pa, pl, pt.x, pt.sp,
                  _gnorm(pt), pt.f, s.k + 1, jnp.bool_(False))
        return jax.tree_util.tree_map(lambda n, o: jnp.where(ok, n, o), new,
                                      s._replace(failed=jnp.bool_(True)))

    s = jax.lax.while_loop(cond, body, s0)
    return params._replace(alpha=s.a, log_beta=s.lb), s.k, s.failed


def glad_m_step(data: CrowdLabels, log_posterior, params: GLADParams, alpha_prior_mean=1.0,
                log_beta_prior_mean=1.0, max_iter=25, tol=1e-2):
    """GLAD M-step: maximize crowd-kit's Q over (alpha, log_beta) from ``params`` with SciPy's
    nonlinear CG ported to JAX (module docstring); ``max_iter`` / ``tol`` are crowd-kit's
    ``m_step_max_iter`` / ``m_step_tol``. Returns ``(params, cg_iterations, line_search_failed)``.
    """
    dt = params.alpha.dtype
    return _cg(data, _r(data, jnp.asarray(log_posterior, dt)), params,
               jnp.asarray(alpha_prior_mean, dt),
               jnp.asarray(log_beta_prior_mean, dt), jnp.asarray(tol, dt),
               jnp.int32(_positive_int(max_iter, "max_iter", 1)))


# ---------------------------------------------------------------- EM loop


@partial(jax.jit, static_argnames=("cap",))
def _glad(data, params, mu_a, mu_b, tol, m_tol, n_iter, m_iter, cap):
    """EM loop; the caps ``n_iter``, ``m_iter`` are traced, ``cap`` (>= n_iter) sizes the
    histories, so every ``n_iter <= 100`` shares one compiled program."""
    dt = params.alpha.dtype
    P, K = data.task.shape[0], data.mask.shape[1]
    N = jnp.asarray(max(P * K, 1), dt)
    nan = jnp.full((cap,), jnp.nan, dt)

    def cond(c):
        it, done = c[0], c[1]
        return (it < n_iter) & ~done

    def body(c):
        it, _, params, _, _, q_last, hist, ohist, mhist = c
        log_q, ll = _e_step(data, params)
        ohist = ohist.at[it].set(ll.sum() + _map_prior(params, mu_a, mu_b))
        r = _r(data, log_q)
        # crowd-kit compares its first loss with the *unnormalized* Q of its initial E-step,
        # which is this E-step (same parameters): computed here, the E-step is traced once
        q_last = jnp.where(it == 0, _q_value(data, params, r, mu_a, mu_b), q_last)
        params, k, _ = _cg(data, r, params, mu_a, mu_b, m_tol, m_iter)
        q = _q_value(data, params, r, mu_a, mu_b) / N
        return (it + 1, q - q_last < tol, params, log_q, ll, q, hist.at[it].set(q), ohist,
                mhist.at[it].set(k))

    T, _, K = data.shape
    zero = jnp.zeros((), dt)
    it, done, params, log_q, ll, q, hist, ohist, mhist = jax.lax.while_loop(
        cond, body, (jnp.int32(0), jnp.bool_(False), params, jnp.zeros((T, K), dt),
                     jnp.zeros(T, dt), zero, nan, nan, jnp.full((cap,), -1, jnp.int32)))
    return GLADResult(log_q, params, ll.sum(), q, it, done, hist, ohist, mhist)


def _prior_mean(v, n, name, dt):
    v = np.asarray(v, float)
    if v.shape not in ((), (n,)) or not np.isfinite(v).all():
        raise DataError(f"{name} must be a finite scalar or a [{n}] array, got shape "
                        f"{v.shape}", field=name)
    return jnp.asarray(np.broadcast_to(v, (n,)), dt)


def _check_loop(n_iter, tol, name_iter="n_iter", name_tol="tol", least=-np.inf):
    _positive_int(n_iter, name_iter, 1)
    if isinstance(tol, bool) or not np.isscalar(tol) or np.isnan(tol) or tol < least:
        raise DataError(f"{name_tol} must be a number >= {least}, got {tol!r}", field=name_tol)


def glad_em(task, worker, label, n_tasks, n_workers, n_classes, *, mask=None, gold=None,
            n_iter=100, tol=1e-5, m_step_max_iter=25, m_step_tol=1e-2, alpha_prior_mean=1.0,
            log_beta_prior_mean=1.0, class_prior=None, dtype=None) -> GLADResult:
    """GLAD by EM over sparse labels, crowd-kit 1.4.2 semantics (module docstring).

    Args:
      task, worker, label: [P] integer arrays, one row per label (duplicates allowed).
      n_tasks, n_workers, n_classes: T, W, K (static).
      mask: [T, K] valid classes per task (default all); wrong labels are uniform over the
        task's other valid classes and the class prior is renormalized over them.
      gold: [T] known classes (-1 = unknown); those tasks keep a one-hot posterior.
      n_iter, tol: crowd-kit's cap and loss tolerance (stop when ``Q_k - Q_{k-1} < tol``;
        ``tol=-inf`` runs all ``n_iter`` iterations).
      m_step_max_iter, m_step_tol: crowd-kit's CG cap and gradient max-norm tolerance.
      alpha_prior_mean: scalar or [W]; log_beta_prior_mean: scalar or [T] (crowd-kit's
        ``alphas_priors_mean`` / ``betas_priors_mean``; unit variances).
      class_prior: [K] positive class prior (crowd-kit's ``labels_priors``), default uniform.
      dtype: float32 (default) or float64 (needs x64 mode).

    Returns :class:`GLADResult`. Only the shapes (and ``n_iter`` above 100) are static: other
    caps and tolerances reuse the compiled program.
    """
    dt = float_dtype(dtype)
    data = crowd_labels(task, worker, label, n_tasks, n_workers, n_classes, mask=mask,
                        gold=gold)
    _check_loop(n_iter, tol)
    _check_loop(m_step_max_iter, m_step_tol, "m_step_max_iter", "m_step_tol", 0.0)
    T, W, K = data.shape
    if class_prior is None:
        class_prior = np.ones(K)
    class_prior = np.asarray(class_prior, float)
    if class_prior.shape != (K,) or not (np.isfinite(class_prior) & (class_prior > 0)).all():
        raise DataError(f"class_prior must be [{K}] finite and > 0", field="class_prior")
    params = GLADParams(jnp.ones(W, dt), jnp.ones(T, dt),
                        jnp.asarray(np.log(class_prior / class_prior.sum()), dt))
    r = _glad(data, params, _prior_mean(alpha_prior_mean, W, "alpha_prior_mean", dt),
              _prior_mean(log_beta_prior_mean, T, "log_beta_prior_mean", dt),
              jnp.asarray(tol, dt), jnp.asarray(m_step_tol, dt), jnp.int32(n_iter),
              jnp.int32(m_step_max_iter), max(int(n_iter), 100))
    return r._replace(loss_history=r.loss_history[:n_iter],
                      objective_history=r.objective_history[:n_iter],
                      m_step_iters=r.m_step_iters[:n_iter])
