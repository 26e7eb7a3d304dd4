"""MACE over sparse crowd votes (Hovy et al. 2013), matching crowd-kit 1.4.2's ``MACE``.

Data: :class:`~bda_jax.crowd.CrowdVotes` (vote cells ``task``, ``agent``, ``label`` [E] weighted
by their vote counts, ``mask`` [T, K]) and ``gold`` [T] (-1 = unknown), as for GLAD; all
aggregation is ``segment_sum`` and a cell of w votes counts as w labels.

Model (Hovy et al. 2013, Sec. 2). The truth ``z_t`` is uniform over the task's valid classes. On
each label worker j copies the truth with probability ``theta_j`` (``competence``) and otherwise
("spamming", probability ``1 - theta_j``, ``spam``) draws the label from a per-worker strategy
``xi_j`` [K] (``strategy``): ``P(y = k | z = c) = spam_j xi_j[k] + theta_j [k = c]``. crowd-kit's
``spamming_[:, 0]`` is ``spam``, ``spamming_[:, 1]`` is ``competence`` and ``thetas_`` is
``strategy``. With masks the strategy still ranges over all K classes (only the truth prior is
masked), the deficient-model convention of the Dawid–Skene EM
(:func:`bda_jax.crowd.dawid_skene_votes`).

Fitting, exactly crowd-kit 1.4.2 ``MACE.fit`` (crowdkit/aggregation/classification/mace.py):

* init: ``spamming ~ U(1, 2 + default_noise)`` [W, 2] and ``strategy ~ U(1, 2 + default_noise)``
  [W, K] (SciPy ``uniform(loc=1, scale=1 + default_noise)``), rows normalized; then one E-step.
* ``n_iter`` times: M-step, then E-step. E-step: ``log q[t, c] = -log K_t + sum_rows log(spam_j
  xi_j[y] + theta_j [y = c])``; expected counts per row: knowing ``kappa = q[t, y] theta_j /
  (spam_j xi_j[y] + theta_j)``, spamming ``1 - kappa`` (also added to the strategy count of the
  observed label). M-step ``method="vb"`` (default): variational Bayes with ``Beta(alpha,
  beta)`` on (spam, competence) and symmetric ``Dirichlet(strategy_prior = 10)`` on ``xi``:
  ``w = exp(digamma(count + prior) - digamma(sum(count + prior)))`` (geometric means, not
  normalized; crowd-kit ``variational_normalize``); ``method="em"``: ``(count + s) / sum(count +
  s)`` with ``s = smoothing``, default ``0.01 / K`` (crowd-kit's ``smoothing_``; its
  ``smoothing=0.1`` attribute is never read).
* ``n_restarts`` restarts; the one with the largest final log-likelihood wins (the first on
  ties) and its posterior is the E-step at its final parameters. crowd-kit seeds every restart
  with the same ``random_state``, so its 10 restarts are 10 copies of one run; here each
  restart draws its own start from ``jax.random.split(key, n_restarts)`` (uniforms by
  ``jax.random.uniform``; all restarts advance together, as a trailing axis of every scatter).
  The draws therefore differ from crowd-kit's NumPy stream: agreement is at the level of the
  fixed point and the accuracy, not bits. Pass ``init`` to start from given parameters (e.g.
  crowd-kit's own draws: then the results agree to float precision, see the tests).
* crowd-kit has no convergence test and no loss history (always ``n_iter`` iterations).
  ``tol`` (default 0) freezes a restart once the largest parameter change is ``<= tol``; at 0
  that is an exact fixed point, where further iterations change nothing, so the default
  reproduces crowd-kit's result.

``log_likelihood`` is ``sum_t log sum_c (1/K_t) prod_rows P(y | c)`` at the parameters (crowd-kit's
``log_marginal_likelihood`` in log space, without its ``+1e-8``; gold tasks contribute the joint
with their gold class). For ``"em"`` it is the observed-data log-likelihood and ``objective`` =
log-likelihood ``+ s sum log(parameters)`` (MAP EM, non-decreasing). For ``"vb"`` it is evaluated
at the geometric-mean weights (not a probability model) and ``objective`` is the evidence lower
bound ``log-likelihood - KL(q(params) || prior)`` (non-decreasing over VB iterations).

>>> rng = np.random.RandomState(0)                       # 60 tasks, each labeled by 6 workers
>>> task, worker = np.repeat(np.arange(60), 6), np.tile(np.arange(6), 60)
>>> truth = rng.randint(0, 3, 60)
>>> copies = rng.rand(360) < np.array([0.8, 0.8, 0.8, 0.8, 0.1, 0.1])[worker]   # 4, 5 spam
>>> label = np.where(copies, truth[task], rng.randint(0, 3, 360))
>>> from bda_jax.crowd import votes_from_labels
>>> r = mace_em(jax.random.key(0), votes_from_labels(task, worker, label, 60, 6, 3), n_restarts=3)
>>> r.log_posterior.shape, r.restart_log_likelihood.shape
((60, 3), (3,))
>>> comp = np.asarray(r.params.competence)          # P(copy the truth): spammers get little
>>> bool(comp[4:].max() < 0.4 < 0.7 < comp[:4].min())
True
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, gammaln

from .._core.errors import DataError
from .._core.numerics import float_dtype, safe_log
from .._core.checks import positive_int
from ._checks import check_loop
from ._votes import CrowdVotes, cell_index, check_gold, truth_support

__all__ = ["MACECounts", "MACEParams", "MACEResult", "mace_e_step", "mace_em", "mace_init",
           "mace_m_step"]

METHODS = ("vb", "em")


class MACEParams(NamedTuple):
    """MACE parameters (a pytree): ``spam`` [W] (crowd-kit ``spamming_[:, 0]``), ``competence``
    [W] (``theta_j``, crowd-kit ``spamming_[:, 1]``), ``strategy`` [W, K] (``xi_j``, crowd-kit
    ``thetas_``). With ``"vb"`` these are the geometric-mean weights (rows sum to < 1)."""

    spam: jax.Array
    competence: jax.Array
    strategy: jax.Array


class MACECounts(NamedTuple):
    """Expected counts of an E-step: ``spam`` [W], ``know`` [W] (crowd-kit
    ``knowing_expected_count_0/1``), ``strategy`` [W, K] (``strategy_expected_counts``)."""

    spam: jax.Array
    know: jax.Array
    strategy: jax.Array


class MACEResult(NamedTuple):
    """``log_posterior`` [T, K] (-inf on invalid classes) and ``params`` of the best restart,
    its ``log_likelihood`` and ``objective`` (module docstring), ``n_iter`` (its M-steps),
    ``converged`` (its last change ``<= tol``), ``best_restart``, ``restart_log_likelihood``
    [R], ``log_likelihood_history`` / ``objective_history`` [R, n_iter] (after each iteration;
    NaN after a restart stopped)."""

    log_posterior: jax.Array
    params: MACEParams
    log_likelihood: jax.Array
    objective: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    best_restart: jax.Array
    restart_log_likelihood: jax.Array
    log_likelihood_history: jax.Array
    objective_history: jax.Array


class _Prep(NamedTuple):
    """Loop-invariant per-row / per-task arrays, computed once before the EM loop (XLA does
    not hoist them out of a ``while_loop``: recomputed in the body they cost ~2x)."""

    task: jax.Array        # [E]
    wk: jax.Array          # [E] worker * K + label
    flat: jax.Array        # [E] task * K + label
    weight: jax.Array      # [E, 1] votes of the cell
    support: jax.Array     # [T, K] valid classes, only the gold one for gold tasks
    log_kt: jax.Array      # [T] log(number of valid classes)
    worker_count: jax.Array  # [W] float labels per worker


def _prep(votes, gold, dt):
    T, W, K = votes.shape
    return _Prep(votes.task, votes.agent * K + votes.label, cell_index(votes),
                 votes.weight.astype(dt)[:, None], truth_support(votes.mask, gold),
                 jnp.log(votes.mask.sum(-1).astype(dt)), votes.agent_votes.astype(dt))


def _e_step(prep, params):
    """E-step for R parameter sets at once (``params`` with a leading [R] axis): ``(log_q
    [T, K, R], log_likelihood [T, R], counts with a leading [R] axis)``.

    Every per-entry quantity depends on (worker, label) only, so the model enters through
    [W, K, R] tables gathered per entry; entry e adds ``w_e log P(y_e | z = k) = w_e (la[j, y] +
    [k = y] (log(a + b) - la)[j, y])`` to ``score[t, k]`` (one scatter per task, one per (task,
    class)).
    The restarts ride along as the trailing axis of each scatter (one index pass for all of
    them: ~20% faster on XLA:CPU than R separate passes; ``vmap``'s batched scatters are slower
    still). The optimization barriers keep XLA:CPU from fusing gathers into the loops that
    consume them, which it runs several times slower."""
    T, K = prep.support.shape
    W = prep.worker_count.shape[0]
    R = params.spam.shape[0]
    strat = jnp.moveaxis(params.strategy, 0, -1)                      # [W, K, R]
    a = params.spam.T[:, None, :] * strat                             # spam and draw the label
    b = params.competence.T[:, None, :]                               # copy the truth
    la = safe_log(a)
    hit = (safe_log(a + b) - la).reshape(W * K, R)
    la_row, hit_row = jax.lax.optimization_barrier((la.reshape(W * K, R)[prep.wk] * prep.weight,
                                                     hit[prep.wk] * prep.weight))
    seg = jax.ops.segment_sum
    score = (seg(la_row, prep.task, T)[:, None, :]                    # every class of the task
             + seg(hit_row, prep.flat, T * K).reshape(T, K, R))       # the labeled class
    # gold tasks: only the gold class is in the support, so ll is log p(gold, labels_t)
    score = jnp.where(prep.support[:, :, None], score - prep.log_kt[:, None, None], -jnp.inf)
    m = score.max(1, keepdims=True)                                   # finite: K_t >= 1
    ll = m[:, 0] + jnp.log(jnp.exp(score - m).sum(1))                 # [T, R]
    # materialized before the gather (else XLA:CPU recomputes it per gathered row: ~30% slower)
    (log_q,) = jax.lax.optimization_barrier((score - ll[:, None, :],))
    q_row = jnp.exp(log_q.reshape(T * K, R)[prep.flat])               # q[t, y] per entry [E, R]
    share = (b / jnp.maximum(a + b, jnp.finfo(a.dtype).tiny)).reshape(W * K, R)  # P(know|z=y)
    strategy = seg((1.0 - q_row * share[prep.wk]) * prep.weight, prep.wk,
                   W * K).reshape(W, K, R)
    spam = strategy.sum(1).T                       # every label is spam or know: one scatter
    counts = MACECounts(spam, prep.worker_count[None, :] - spam, jnp.moveaxis(strategy, -1, 0))
    return log_q, ll, counts


@jax.jit
def _e_step_one(votes, gold, params):
    log_q, ll, counts = _e_step(_prep(votes, gold, params.spam.dtype),
                                jax.tree_util.tree_map(lambda x: x[None], params))
    return log_q[..., 0], ll[:, 0], jax.tree_util.tree_map(lambda x: x[0], counts)


def mace_e_step(votes: CrowdVotes, params: MACEParams, gold=None):
    """MACE E-step (crowd-kit ``MACE._e_step``). Returns ``(log_posterior [T, K],
    log_likelihood [T], MACECounts)``; gold tasks (``gold`` [T] >= 0) are clamped one-hot."""
    return _e_step_one(votes, check_gold(gold, votes.mask), params)


def _em_norm(x):
    s = x.sum(-1, keepdims=True)
    return jnp.where(s > 0, x / jnp.where(s > 0, s, 1.0), 0.0)


def mace_m_step(counts: MACECounts, method="vb", alpha=0.5, beta=0.5, strategy_prior=10.0,
                smoothing=None) -> MACEParams:
    """MACE M-step from expected counts: ``"vb"`` (crowd-kit ``_variational_m_step``, priors
    ``Beta(alpha, beta)`` on (spam, competence), ``Dirichlet(strategy_prior)`` on the strategy)
    or ``"em"`` (``_m_step``: add ``smoothing``, default ``0.01 / K``, and normalize)."""
    if method not in METHODS:
        raise DataError(f"method must be one of {METHODS}, got {method!r}", field="method")
    K = counts.strategy.shape[-1]
    s = 0.01 / K if smoothing is None else smoothing
    dt = counts.spam.dtype
    hyper = tuple(jnp.asarray(v, dt) for v in (alpha, beta, strategy_prior, s))
    return _m_jit(counts, jnp.asarray(method == "vb"), hyper)[0]


def _m(counts, is_vb, hyper):
    """Both M-steps (W-sized, negligible), selected by the traced ``is_vb`` so one compiled
    program serves both methods, and the log prior term of the objective: ``s sum log(params)``
    (EM) or ``-KL(q(params) || prior)`` (VB). digamma and gammaln (large expansions in XLA) are
    called once each, on one concatenated vector."""
    alpha, beta, sprior, s = hyper
    W, K = counts.strategy.shape
    sw = jnp.stack([counts.spam, counts.know], -1)
    a2 = sw + jnp.stack([alpha, beta])                     # Beta posterior pseudo-counts [W, 2]
    ak = counts.strategy + sprior                          # Dirichlet posterior [W, K]
    priors = jnp.stack([alpha, beta, alpha + beta, sprior, K * sprior])
    sizes = (2 * W, W, W * K, W)
    x = jnp.concatenate([a2.reshape(-1), a2.sum(-1), ak.reshape(-1), ak.sum(-1)])
    d2, d2s, dk, dks = jnp.split(digamma(x), np.cumsum(sizes)[:-1])
    g2, g2s, gk, gks, gp = jnp.split(gammaln(jnp.concatenate([x, priors])),
                                     np.cumsum(sizes))
    log2 = d2.reshape(W, 2) - d2s[:, None]                 # E log (spam, competence)
    logk = dk.reshape(W, K) - dks[:, None]                 # E log strategy
    # crowd-kit variational_normalize: exp(digamma(x + prior) - digamma(sum(x + prior)))
    two = jnp.where(is_vb, jnp.exp(log2), _em_norm(sw + s))
    strat = jnp.where(is_vb, jnp.exp(logk), _em_norm(counts.strategy + s))
    kl = (g2s - g2.reshape(W, 2).sum(-1) - gp[2] + gp[0] + gp[1]
          + ((a2 - jnp.stack([alpha, beta])) * log2).sum(-1)).sum() \
        + (gks - gk.reshape(W, K).sum(-1) - gp[4] + K * gp[3]
           + ((ak - sprior) * logk).sum(-1)).sum()
    log_prior = jnp.where(is_vb, -kl, s * (safe_log(two).sum() + safe_log(strat).sum()))
    return MACEParams(two[..., 0], two[..., 1], strat), log_prior


_m_jit = jax.jit(_m)


def _restarts(votes, gold, params, tol, hyper, is_vb, n_iter):
    """All restarts in one ``while_loop`` (leading [R] axis); a restart whose last change is
    ``<= tol`` (or that ran ``n_iter`` M-steps) is frozen while the others go on.

    crowd-kit's order "E-step; n_iter x (M-step, E-step)" is run as "n_iter x (E-step,
    M-step); E-step" (the same steps; carrying the parameters rather than the expected counts
    keeps XLA:CPU on its fast schedule, ~1.6x). Returns the final parameters, log-likelihood
    [R], objective [R], M-steps [R], converged [R], the final E-step's log posteriors
    [T, K, R] and the histories [R, n_iter]."""
    dt = params.spam.dtype
    R = params.spam.shape[0]
    prep = _prep(votes, gold, dt)
    rows = jnp.arange(R)
    m_step = jax.vmap(_m, in_axes=(0, None, None))

    def active(c):
        return (c[0] < n_iter) & (c[2] > tol)

    def record(hist, it, on, value):
        col = jnp.maximum(it - 1, 0)
        return hist.at[rows, col].set(jnp.where(on & (it > 0), value, hist[rows, col]))

    def body(c):
        it, params, change, lp, hl, ho = c
        on = active(c)
        _, ll, counts = _e_step(prep, params)
        ll = ll.sum(0)                              # completes the record of M-step it - 1
        hl, ho = record(hl, it, on, ll), record(ho, it, on, ll + lp)
        new, new_lp = m_step(counts, is_vb, hyper)
        new_change = jnp.maximum(jnp.maximum(jnp.abs(new.spam - params.spam).max(-1),
                                             jnp.abs(new.competence - params.competence).max(-1)),
                                 jnp.abs(new.strategy - params.strategy).max((-2, -1)))
        pick = lambda n, o: jnp.where(on.reshape(on.shape + (1,) * (n.ndim - 1)), n, o)
        return (it + on, jax.tree_util.tree_map(pick, new, params),
                jnp.where(on, new_change, change), jnp.where(on, new_lp, lp), hl, ho)

    nan = jnp.full((R, n_iter), jnp.nan, dt)
    c = (jnp.zeros(R, jnp.int32), params, jnp.full(R, jnp.inf, dt), jnp.full(R, jnp.nan, dt),
         nan, nan)
    it, params, change, lp, hl, ho = jax.lax.while_loop(lambda c: active(c).any(), body, c)
    log_q, ll, _ = _e_step(prep, params)
    ll = ll.sum(0)
    done = jnp.ones(R, bool)
    hl, ho = record(hl, it, done, ll), record(ho, it, done, ll + lp)
    return params, ll, jnp.where(it > 0, ll + lp, jnp.nan), it, change <= tol, log_q, hl, ho


def _random_starts(key, W, K, R, noise, dt):
    def one(k):
        k1, k2 = jax.random.split(k)
        hi = 2.0 + noise
        sw = jax.random.uniform(k1, (W, 2), dt, 1.0, hi)
        st = jax.random.uniform(k2, (W, K), dt, 1.0, hi)
        sw = sw / sw.sum(-1, keepdims=True)
        return MACEParams(sw[:, 0], sw[:, 1], st / st.sum(-1, keepdims=True))

    return jax.vmap(one)(jax.random.split(key, R))


@partial(jax.jit, static_argnames=("n_iter",))
def _mace(votes, gold, key, init, use_init, noise, tol, hyper, is_vb, n_iter):
    T, W, K = votes.shape
    R = init.spam.shape[0]
    starts = jax.tree_util.tree_map(lambda a, b: jnp.where(use_init, a, b), init,
                                    _random_starts(key, W, K, R, noise, init.spam.dtype))
    params, ll, obj, its, conv, log_q, hl, ho = _restarts(votes, gold, starts, tol, hyper,
                                                         is_vb, n_iter)
    best = jnp.argmax(jnp.where(jnp.isnan(ll), -jnp.inf, ll))
    p = jax.tree_util.tree_map(lambda x: x[best], params)
    # the best restart's last E-step is crowd-kit's final E-step with the best parameters
    return MACEResult(log_q[..., best], p, ll[best], obj[best], its[best], conv[best],
                      best.astype(jnp.int32), ll, hl, ho)


def _key(key):
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.key(int(key))
    try:
        jax.random.split(key)
    except Exception:
        raise DataError(f"key must be a jax.random key or an int seed, got {key!r}",
                        field="key") from None
    return key


def mace_init(key, n_workers, n_classes, n_restarts=1, default_noise=0.5, dtype=None):
    """Random starts as crowd-kit ``MACE._initialize`` draws them (``U(1, 2 + default_noise)``,
    rows normalized), one per restart from ``jax.random.split(key, n_restarts)``: a
    :class:`MACEParams` with a leading [n_restarts] axis (the starts :func:`mace_em` uses)."""
    return _random_starts(_key(key), positive_int(n_workers, "n_workers", 1),
                          positive_int(n_classes, "n_classes", 2),
                          positive_int(n_restarts, "n_restarts", 1), float(default_noise),
                          float_dtype(dtype))


def _check_init(init, W, K, dt):
    try:
        spamming, strategy = init
    except (TypeError, ValueError):
        raise DataError("init must be a pair (spamming [W, 2], strategy [W, K]), optionally "
                        "with a leading restart axis", field="init") from None
    sw, st = np.asarray(spamming, float), np.asarray(strategy, float)
    if sw.ndim == 2:
        sw, st = sw[None], st[None]
    if sw.shape[1:] != (W, 2) or st.shape[1:] != (W, K) or sw.shape[0] != st.shape[0]:
        raise DataError(f"init must be ([R,] {W}, 2) and ([R,] {W}, {K}); got {np.shape(spamming)}"
                        f" and {np.shape(strategy)}", field="init")
    if not (np.isfinite(sw).all() and np.isfinite(st).all() and (sw >= 0).all()
            and (st >= 0).all()):
        raise DataError("init must be finite and non-negative", field="init")
    return MACEParams(jnp.asarray(sw[..., 0], dt), jnp.asarray(sw[..., 1], dt),
                      jnp.asarray(st, dt))


def _positive(x, name, zero_ok=False):
    ok = not isinstance(x, bool) and np.isscalar(x) and np.isfinite(x) and (
        x >= 0 if zero_ok else x > 0)
    if not ok:
        raise DataError(f"{name} must be a finite number {'>=' if zero_ok else '>'} 0, got "
                        f"{x!r}", field=name)
    return float(x)


def mace_em(key, votes: CrowdVotes, *, gold=None, n_restarts=10, n_iter=50, tol=0.0,
            method="vb", alpha=0.5, beta=0.5, strategy_prior=10.0, smoothing=None,
            default_noise=0.5, init=None) -> MACEResult:
    """MACE over sparse crowd votes, crowd-kit 1.4.2 semantics (module docstring).

    Args:
      key: a ``jax.random`` key or an int seed for the restarts' starts (ignored with ``init``).
      votes: :class:`~bda_jax.crowd.CrowdVotes` (the truth prior is uniform over each task's
        valid classes); the float dtype of ``votes.weight`` is the dtype of the fit (float64
        needs x64 mode).
      gold: [T] known classes (-1 = unknown), clamped one-hot.
      n_restarts, n_iter: crowd-kit's restarts and iterations per restart (defaults 10, 50).
      tol: stop a restart when the largest parameter change is ``<= tol`` (0: crowd-kit's fixed
        ``n_iter`` except at an exact fixed point).
      method: "vb" (default) or "em"; alpha, beta: Beta prior on (spam, competence) for "vb";
        strategy_prior: Dirichlet prior of the strategies for "vb" (crowd-kit hard-codes 10);
        smoothing: "em" pseudo-count (default ``0.01 / n_classes``); default_noise: init spread.
      init: optional ``(spamming [R, W, 2], strategy [R, W, K])`` starts (R restarts, replacing
        ``n_restarts``; the leading axis may be dropped for one; ``key`` is then unused).

    Returns :class:`MACEResult`. Only ``n_iter`` and the shapes are static (one compiled program
    serves both methods, random or given starts).
    """
    if not isinstance(votes, CrowdVotes):
        raise DataError(f"expected CrowdVotes, got {type(votes).__name__}", field="votes")
    if method not in METHODS:
        raise DataError(f"method must be one of {METHODS}, got {method!r}", field="method")
    gold = check_gold(gold, votes.mask)
    check_loop(n_iter, tol, least=0.0)
    dt = votes.weight.dtype
    T, W, K = votes.shape
    hyper = tuple(jnp.asarray(v, dt) for v in (
        _positive(alpha, "alpha"), _positive(beta, "beta"),
        _positive(strategy_prior, "strategy_prior"),
        0.01 / K if smoothing is None else _positive(smoothing, "smoothing", zero_ok=True)))
    noise = _positive(default_noise, "default_noise", zero_ok=True)
    if init is None:
        R = positive_int(n_restarts, "n_restarts", 1)
        key = _key(key)
        init = MACEParams(jnp.zeros((R, W), dt), jnp.zeros((R, W), dt), jnp.zeros((R, W, K), dt))
        use_init = False
    else:
        init = _check_init(init, W, K, dt)
        key = jax.random.key(0) if key is None else _key(key)
        use_init = True
    return _mace(votes, gold, key, init, jnp.asarray(use_init), jnp.asarray(noise, dt),
                 jnp.asarray(tol, dt), hyper, jnp.asarray(method == "vb"), int(n_iter))
