"""GLAD over sparse crowd votes (Whitehill et al. 2009), matching crowd-kit 1.4.2's ``GLAD``.

Data: :class:`~bda_jax.crowd.CrowdVotes` (the vote cells ``task``, ``agent``, ``label`` [E] with
their vote counts as weights, ``mask`` [T, K] of each task's valid classes) and ``gold`` [T]
(-1 = unknown). No dense tasks x workers matrix is ever formed: per-task and per-worker sums
are ``jax.ops.segment_sum`` with static segment counts; a cell of w votes counts as w labels.

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
* each iteration: E-step ``log q[t, c] = log pi_c + sum_labels log P(y | c)`` (softmax over the
  task's valid classes; gold tasks clamped one-hot); M-step = scipy ``minimize(-Q,
  method="CG", jac=..., tol=m_step_tol, options={"maxiter": m_step_max_iter})`` from the current
  point, with ``Q(q, params) = sum_labels [r log s + (1 - r)(log(1 - s) - log(K_t - 1))] +
  sum_j log N(alpha_j - mu_alpha) + sum_t log N(lb_t - mu_lb)``, ``r = q[t, y]``. Then
  ``Q_k = Q(q, new params) / (P K)`` with P labels (crowd-kit divides by ``len(data)`` of its
  melted [P * K]-row frame) and the loop stops when ``Q_k - Q_{k-1} < tol`` (a *decrease*
  stops it too; at k = 1 the comparison is against the unnormalized ``Q_0``, so it never stops
  there).
* The M-step is SciPy's CG ported to JAX (:func:`bda_jax.crowd.minimize_cg`; its module says
  why a port rather than a library optimizer: crowd-kit's labels depend on the truncated CG
  path). Its line runs on differences ``f(x + a p) - f(x)`` summed label by label
  (``_line``), which keeps float32 able to resolve the small decreases the line search
  compares.
* crowd-kit's K in ``log(K - 1)`` is the number of distinct labels in its frame: the votes'
  ``mask.shape[1]`` (with a ``mask``, ``K_t`` is each task's number of valid classes).
* Returned like crowd-kit: ``log_posterior`` is the last E-step's (the one the final M-step
  used), the parameters are those after the final M-step.

Monotonicity: every accepted CG step increases Q (Armijo), so this is a generalized EM for the
MAP objective ``log p(labels | alpha, beta) + log N(alpha) + log N(lb)``; ``objective_history``
records it at each E-step and is non-decreasing. crowd-kit's loss ``Q_k`` (``loss_history``) is
not an EM bound and need not increase.

>>> from bda_jax.crowd import votes_from_labels
>>> rng = np.random.RandomState(0)                       # 60 tasks, each labeled by 6 workers
>>> task, worker = np.repeat(np.arange(60), 6), np.tile(np.arange(6), 60)
>>> truth = rng.randint(0, 3, 60)
>>> label = np.where(rng.rand(360) < 0.7, truth[task], rng.randint(0, 3, 360))
>>> r = glad_em(votes_from_labels(task, worker, label, 60, 6, 3))
>>> r.log_posterior.shape, r.params.alpha.shape, r.params.beta.shape
((60, 3), (6,), (60,))
>>> bool((np.argmax(r.log_posterior, 1) == truth).mean() > 0.9)
True
"""
from __future__ import annotations

import sys
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import DataError
from ._cg import minimize_cg
from .._core.checks import positive_int
from ._checks import check_loop
from ._votes import CrowdVotes, cell_index, check_gold, truth_support

__all__ = ["GLADParams", "GLADResult", "glad_e_step", "glad_em", "glad_m_step",
           "glad_objective"]

_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


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


def _log_k1(votes, dt):
    """``log(K_t - 1)`` per task [T] (0 where K_t = 1)."""
    return jnp.log(jnp.maximum(votes.mask.sum(-1).astype(dt) - 1.0, 1.0))


def _softplus(x):
    return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def _barrier(*xs):
    """Materialize gathered per-entry arrays: fused into transcendental loops, XLA:CPU
    recomputes each gather per use and runs the loop ~10-40x slower."""
    return jax.lax.optimization_barrier(xs)


def _rows(votes, params):
    """Per-entry ``x = alpha_j beta_t`` and ``sp = softplus(-x) = -log sigmoid(x)`` [E]."""
    (eb,) = _barrier(jnp.exp(params.log_beta))
    (x,) = _barrier(params.alpha[votes.agent] * eb[votes.task])
    return x, _softplus(-x)


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


def _log_prior_t(mask, log_prior):
    """Class log prior renormalized over each task's valid classes, [T, K] (-inf elsewhere)."""
    lp = jnp.where(mask, log_prior[None, :], -jnp.inf)
    return lp - _lse(lp)[:, None]


def _e_step(votes, gold, params):
    """E-step: ``(log_q [T, K], log_likelihood [T])``; the score is ``-inf`` outside
    the votes' truth support (each task's valid classes, or only its gold one), so gold tasks
    come out clamped with their joint."""
    T, _, K = votes.shape
    x, sp = _rows(votes, params)
    (lk1,) = _barrier(_log_k1(votes, x.dtype)[votes.task])
    wrong = -sp - x - lk1                                   # log((1 - s) / (K_t - 1))
    # entry e adds w_e `wrong` to every class of its task and w_e log s to its label's: one
    # scatter of K-vectors (cheaper on XLA:CPU than one per task plus one per (task, class))
    vals = (wrong[:, None] + jnp.where(jnp.arange(K)[None, :] == votes.label[:, None],
                                       (-sp - wrong)[:, None], 0.0)) * votes.weight[:, None]
    score = jax.ops.segment_sum(vals, votes.task, T)
    score = jnp.where(truth_support(votes.mask, gold),
                      score + _log_prior_t(votes.mask, params.log_prior), -jnp.inf)
    ll = _lse(score)
    return score - ll[:, None], ll


_e_step_jit = jax.jit(_e_step)


def glad_e_step(votes: CrowdVotes, params: GLADParams, gold=None):
    """GLAD E-step (Whitehill et al. 2009 Eq. 3; crowd-kit ``GLAD._e_step``):
    ``log q[t, c] = log pi_c + sum_labels [y = c] log s + [y != c] (log(1 - s) - log(K_t - 1))``.

    Returns ``(log_posterior [T, K], log_likelihood [T])``; gold tasks (``gold`` [T] >= 0) are
    one-hot and contribute ``log p(gold, labels_t)``."""
    return _e_step_jit(votes, check_gold(gold, votes.mask), params)


def _r(votes, log_q):
    """``r = q[t, y]`` per entry [E] from the log posterior [T, K]."""
    (r,) = _barrier(jnp.exp(log_q).reshape(-1)[cell_index(votes)])
    return r


def _map_prior(params, mu_a, mu_b):
    return -(0.5 * (params.alpha - mu_a) ** 2 + _HALF_LOG_2PI).sum() \
        - (0.5 * (params.log_beta - mu_b) ** 2 + _HALF_LOG_2PI).sum()


def _q_value(votes, params, r, mu_a, mu_b):
    """crowd-kit's Q (unnormalized, ``GLAD._compute_Q``)."""
    x, sp = _rows(votes, params)
    (lk1,) = _barrier(_log_k1(votes, x.dtype)[votes.task])
    rows = (-sp - (1.0 - r) * (x + lk1)) * votes.weight
    return rows.sum() + _map_prior(params, mu_a, mu_b)


def glad_objective(votes: CrowdVotes, params: GLADParams, log_posterior, alpha_prior_mean=1.0,
                   log_beta_prior_mean=1.0):
    """crowd-kit's (unnormalized) loss ``Q(q, params)`` for posteriors ``log_posterior`` [T, K]:
    expected complete-data log-likelihood of the labels plus the Gaussian log priors."""
    dt = params.alpha.dtype
    return _objective(votes, params, jnp.asarray(log_posterior, dt),
                      jnp.asarray(alpha_prior_mean, dt), jnp.asarray(log_beta_prior_mean, dt))


@jax.jit
def _objective(votes, params, log_posterior, mu_a, mu_b):
    return _q_value(votes, params, _r(votes, log_posterior), mu_a, mu_b)


# ---------------------------------------------------------------- M-step


def _line(votes, r, mu_a, mu_b):
    """-Q along a line for :func:`~bda_jax.crowd.minimize_cg`: position ``(alpha, log_beta)``,
    cache ``(x, sp)`` [E] at the base point.

    The difference is summed entry by entry from ``dx = x - x0`` computed without cancellation
    (``stp pa_j e^lb + a0_j e^l0 expm1(stp pl_t)``) and ``softplus(-x) - softplus(-x0) =
    log1p(sigmoid(-x0) expm1(-dx))``, so float32 resolves the small decreases the line search
    compares (a plain float32 difference of two sums of E terms would not)."""
    T, W, _ = votes.shape
    j, t, wt = votes.agent, votes.task, votes.weight

    def line(base, direction, cache, stp):
        (a0, l0), (pa, pl), (x0, sp0) = base, direction, cache
        a, lb = a0 + stp * pa, l0 + stp * pl
        eb, em = jax.lax.optimization_barrier((jnp.exp(lb), jnp.expm1(stp * pl)))
        ebt = eb[t]
        x = a[j] * ebt
        dx = (stp * pa)[j] * ebt + x0 * em[t]
        # materialize the gathered entries: fused into the transcendental loops below they are
        # recomputed per use and XLA:CPU runs ~40x slower
        x, dx, ebt = jax.lax.optimization_barrier((x, dx, ebt))
        sp = _softplus(-x)
        small = jnp.abs(dx) < 1.0
        dsp = jnp.where(small,
                        jnp.log1p(jnp.exp(-(sp0 + x0)) * jnp.expm1(-jnp.where(small, dx, 0.0))),
                        sp - sp0)
        f = ((dsp + (1.0 - r) * dx) * wt).sum() \
            + (0.5 * stp * pa * (2.0 * (a0 - mu_a) + stp * pa)).sum() \
            + (0.5 * stp * pl * (2.0 * (l0 - mu_b) + stp * pl)).sum()
        u = (r - jnp.exp(-sp)) * wt                          # d log-lik / dx per entry
        ga = -jax.ops.segment_sum(u * ebt, j, W) + (a - mu_a)
        gl = -jax.ops.segment_sum(u * x, t, T) + (lb - mu_b)
        return f, (ga, gl), (x, sp)

    return line


@jax.jit
def _m_step(votes, r, params, mu_a, mu_b, tol, max_iter):
    """SciPy's ``minimize(-Q, method="CG")`` from ``params``: ``(params, iterations, failed)``."""
    line = _line(votes, r, mu_a, mu_b)
    x0 = (params.alpha, params.log_beta)
    zero = jnp.zeros((), params.alpha.dtype)
    _, grad0, cache0 = line(x0, jax.tree_util.tree_map(jnp.zeros_like, x0), (zero, zero), zero)
    res = minimize_cg(line, x0, grad0, cache0, tol, max_iter)
    alpha, log_beta = res.x
    return params._replace(alpha=alpha, log_beta=log_beta), res.n_iter, res.failed


def glad_m_step(votes: CrowdVotes, log_posterior, params: GLADParams, alpha_prior_mean=1.0,
                log_beta_prior_mean=1.0, max_iter=25, tol=1e-2):
    """GLAD M-step: maximize crowd-kit's Q over (alpha, log_beta) from ``params`` with SciPy's
    nonlinear CG (module docstring); ``max_iter`` / ``tol`` are crowd-kit's ``m_step_max_iter``
    / ``m_step_tol``. Returns ``(params, cg_iterations, line_search_failed)``."""
    dt = params.alpha.dtype
    return _m_step(votes, _r(votes, jnp.asarray(log_posterior, dt)), params,
                   jnp.asarray(alpha_prior_mean, dt), jnp.asarray(log_beta_prior_mean, dt),
                   jnp.asarray(tol, dt), jnp.int32(positive_int(max_iter, "max_iter", 1)))


# ---------------------------------------------------------------- EM loop


def _progress_line(it, n_iter, q):
    """One line per EM iteration (``glad_em(progress=True)``; crowd-kit's ``silent=False``)."""
    print(f"GLAD iteration {int(it)}/{int(n_iter)}: Q = {float(q):.6f}", file=sys.stderr,
          flush=True)


@partial(jax.jit, static_argnames=("cap",))
def _glad(votes, gold, params, mu_a, mu_b, tol, m_tol, n_iter, m_iter, progress, cap):
    """EM loop; the caps ``n_iter``, ``m_iter`` are traced, ``cap`` (>= n_iter) sizes the
    histories, so every ``n_iter <= 100`` shares one compiled program. ``progress`` (a traced
    bool, so it needs no second program) switches on an ordered host callback per iteration."""
    dt = params.alpha.dtype
    K = votes.mask.shape[1]
    N = jnp.maximum(votes.weight.sum() * K, 1.0)          # crowd-kit's len(data): labels x K
    nan = jnp.full((cap,), jnp.nan, dt)

    def cond(c):
        it, done = c[0], c[1]
        return (it < n_iter) & ~done

    def body(c):
        it, _, params, _, _, q_last, hist, ohist, mhist = c
        log_q, ll = _e_step(votes, gold, params)
        ohist = ohist.at[it].set(ll.sum() + _map_prior(params, mu_a, mu_b))
        r = _r(votes, log_q)
        # crowd-kit compares its first loss with the *unnormalized* Q of its initial E-step,
        # which is this E-step (same parameters): computed here, the E-step is traced once
        q_last = jnp.where(it == 0, _q_value(votes, params, r, mu_a, mu_b), q_last)
        params, k, _ = _m_step(votes, r, params, mu_a, mu_b, m_tol, m_iter)
        q = _q_value(votes, params, r, mu_a, mu_b) / N
        jax.lax.cond(progress, lambda: jax.debug.callback(_progress_line, it + 1, n_iter, q,
                                                          ordered=True), lambda: None)
        return (it + 1, q - q_last < tol, params, log_q, ll, q, hist.at[it].set(q), ohist,
                mhist.at[it].set(k))

    T, _, K = votes.shape
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


def glad_em(votes: CrowdVotes, *, gold=None, n_iter=100, tol=1e-5, m_step_max_iter=25,
            m_step_tol=1e-2, alpha_prior_mean=1.0, log_beta_prior_mean=1.0,
            class_prior=None, progress=False) -> GLADResult:
    """GLAD by EM over sparse crowd votes, crowd-kit 1.4.2 semantics (module docstring).

    Args:
      votes: :class:`~bda_jax.crowd.CrowdVotes` (:func:`~bda_jax.crowd.votes_from_labels` for
        one row per label, :func:`~bda_jax.crowd.crowd_votes` for PairCounts); a wrong label
        is uniform over the task's other valid classes and the class prior is renormalized
        over them. The float dtype of ``votes.weight`` is the dtype of the fit (float64
        needs x64 mode).
      gold: [T] known classes (-1 = unknown); those tasks keep a one-hot posterior.
      n_iter, tol: crowd-kit's cap and loss tolerance (stop when ``Q_k - Q_{k-1} < tol``;
        ``tol=-inf`` runs all ``n_iter`` iterations).
      m_step_max_iter, m_step_tol: crowd-kit's CG cap and gradient max-norm tolerance.
      alpha_prior_mean: scalar or [W]; log_beta_prior_mean: scalar or [T] (crowd-kit's
        ``alphas_priors_mean`` / ``betas_priors_mean``; unit variances).
      class_prior: [K] positive class prior (crowd-kit's ``labels_priors``; normalized here),
        default uniform. It is fixed: EM does not re-estimate it (crowd-kit neither).
      progress: write ``GLAD iteration k/n_iter: Q = ...`` (crowd-kit's loss) to stderr after
        each EM iteration while the loop runs (crowd-kit's ``silent=False`` progress bar shows
        the same loss); the same compiled program either way.

    Returns :class:`GLADResult`. Only the shapes (and ``n_iter`` above 100) are static: other
    caps and tolerances reuse the compiled program.
    """
    if not isinstance(votes, CrowdVotes):
        raise DataError(f"expected CrowdVotes, got {type(votes).__name__}", field="votes")
    gold = check_gold(gold, votes.mask)
    check_loop(n_iter, tol)
    check_loop(m_step_max_iter, m_step_tol, "m_step_max_iter", "m_step_tol", 0.0)
    dt = votes.weight.dtype
    T, W, K = votes.shape
    if class_prior is None:
        class_prior = np.ones(K)
    class_prior = np.asarray(class_prior, float)
    if class_prior.shape != (K,) or not (np.isfinite(class_prior) & (class_prior > 0)).all():
        raise DataError(f"class_prior must be [{K}] finite and > 0", field="class_prior")
    params = GLADParams(jnp.ones(W, dt), jnp.ones(T, dt),
                        jnp.asarray(np.log(class_prior / class_prior.sum()), dt))
    if not isinstance(progress, (bool, np.bool_)):
        raise DataError(f"progress must be True or False, got {progress!r}", field="progress")
    r = _glad(votes, gold, params, _prior_mean(alpha_prior_mean, W, "alpha_prior_mean", dt),
              _prior_mean(log_beta_prior_mean, T, "log_beta_prior_mean", dt),
              jnp.asarray(tol, dt), jnp.asarray(m_step_tol, dt), jnp.int32(n_iter),
              jnp.int32(m_step_max_iter), jnp.bool_(progress), max(int(n_iter), 100))
    if progress:
        jax.effects_barrier()                         # every line written before returning
    return r._replace(loss_history=r.loss_history[:n_iter],
                      objective_history=r.objective_history[:n_iter],
                      m_step_iters=r.m_step_iters[:n_iter])
