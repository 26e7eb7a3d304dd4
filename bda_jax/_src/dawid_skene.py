"""Unsupervised Dawid–Skene EM (Dawid and Skene 1979; seed 003 Appendix B.1 "DS-EM", F.10).

The votes are endorsement counts ``v[t, i, g]`` [T, I, K] (by default the round-0 positive
endorsements ``e0``: one vote per seat in a council, any number per worker in a crowd), the mask
[T, K] marks each task's K_t candidates. Each vote of worker i on a task whose truth is g lands on
candidate k with probability

* one-coin:  ``p_i`` if k = g, else ``(1 - p_i) / (K_t - 1)`` (uniform errors over the task's
  other candidates; the K_t-dependence makes it meaningful for per-task candidate sets);
* confusion: ``P_i[g, k]`` (rows = true class). A row indexes candidate *slots*, so it is a
  cross-task object only when every task shares one candidate list (``Counts.vocab``: semantic
  labels such as yes/no/maybe). With positional or open answers the rows mean "slot g -> slot k"
  and the one-coin is the documented choice (seed 003, Appendix F.11).

The truth has the class prior ``pi`` (estimated, or uniform over each task's candidates). Ragged K
is handled by masking: rows and ``pi`` live on the K_max slots and a task's padding slots are
simply never observed, i.e. the model is the *masked* (deficient) likelihood ``sum_{g < K_t}
pi_g prod_i prod_k P_i[g, k]^v``. For a shared candidate list this is the ordinary DS likelihood;
for ragged K the EM below is still exact and monotone for it.

EM (all pure, jitted, no Python loop over tasks):

* E-step: ``log q[t, g] = log pi_g + sum_i sum_k v[t,i,k] log P_i[g, k]`` normalized over the
  task's valid candidates (padding: -inf); its log-normalizer is the task's exact observed-data
  marginal log-likelihood.
* M-step with additive smoothing ``s`` (pseudo-counts; the MAP under Beta(1+s, 1+s) /
  Dirichlet(1+s) priors): ``p_i = (A_i + s) / (n_i + 2 s)`` with ``A_i = sum q v`` on the
  posterior's class and ``n_i`` all of i's votes; ``P_i[g, :] ∝ sum_t q[t,g] v[t,i,:] + s``;
  ``pi ∝ sum_t q[t, :] + s``. With ``s > 0`` EM increases the penalized ``objective``
  (log-likelihood + log prior density of the parameters, up to a constant); with ``s = 0`` it
  increases the log-likelihood itself. Zero probabilities (only with ``s = 0``) are clamped to
  the smallest normal float before taking logs, so everything stays finite.
* Loop: ``jax.lax.while_loop`` until the largest absolute change of the task posteriors is below
  ``tol`` or ``n_iter`` M-steps have run.

Initializations (the starting posterior; EM starts with an M-step from it):

* ``"majority"``: each task's vote shares (uniform where nobody voted).
* ``"anti"``: the mirror of majority, ``(1 - share_g) / (K_t - 1)``: at K = 2 the shares are
  swapped; at K > 2 the mass goes to the candidates the majority disfavours. At K = 2 this is the
  other label-switching mode (seed 003 Table 16: the label-requiring "oracle" mode).
* ``"spectral"``: a one-coin spectral start in the spirit of Zhang et al. (2016): under the
  one-coin model with chance-corrected skill ``w_i = (K p_i - 1) / (K - 1)`` the expected
  chance-corrected agreement of two workers is ``(K a_ij - 1) / (K - 1) = w_i w_j`` — a rank-one
  matrix off the diagonal. We estimate it from the tasks both workers voted on, fit ``w w^T`` by
  rank-one completion (leading eigenpair, unknown diagonal and unobserved pairs refilled, 50
  rounds), fix the global sign so that the vote-weighted mean skill is positive ("workers are
  better than chance on average"), map ``p_{t,i} = (1 + (K_t - 1) w_i) / K_t`` clipped to
  [0.01, 0.99], and take the one-coin posterior under a uniform prior as the start. Limits: this
  is not Zhang et al.'s three-view tensor method (no per-class confusion from the spectral step:
  the confusion model starts from this one-coin posterior); it needs >= 3 workers with
  overlapping tasks, assumes conditional independence, and treats multi-vote workers through
  their vote shares. The sign rule is why it lands on a majority coalition's mode (Table 16).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .aggregators import _Aggregator
from .decisions import vote_shares
from .errors import DataError
from .kernels import _float_dtype

__all__ = ["DSParams", "DSResult", "DawidSkene", "dawid_skene_em", "dawid_skene_trace",
           "ds_e_step", "ds_init_posterior", "ds_m_step", "spectral_skills"]

MODELS = ("one-coin", "confusion")
INITS = ("majority", "spectral", "anti")
PRIORS = ("estimate", "uniform")
DEFAULT_SMOOTHING = 0.01


class DSParams(NamedTuple):
    """Dawid–Skene parameters (a pytree).

    ``skill`` [I]: one-coin accuracy ``p_i`` (confusion model: the prior-weighted diagonal
    ``sum_g pi_g P_i[g, g]``, for reporting); ``confusion`` [I, K, K] rows = true class (one-coin:
    the implied matrix at K = K_max, for reporting); ``log_prior`` [K] log class prior.
    """

    skill: jax.Array
    confusion: jax.Array
    log_prior: jax.Array


class DSResult(NamedTuple):
    """``log_posterior`` [T, K] (-inf on padding), ``params`` (:class:`DSParams`), ``n_iter``
    (M-steps run), ``log_likelihood`` (exact observed-data marginal log-likelihood at
    ``params``), ``objective`` (log-likelihood + smoothing log-prior, what EM increases),
    ``converged`` (posterior change < tol before the cap)."""

    log_posterior: jax.Array
    params: DSParams
    n_iter: jax.Array
    log_likelihood: jax.Array
    objective: jax.Array
    converged: jax.Array


def _safe_log(x):
    return jnp.log(jnp.maximum(x, jnp.finfo(x.dtype).tiny))


def _task_K(mask, dtype):
    return mask.sum(-1).astype(dtype)


def _onecoin_scores(votes, mask, p):
    """Unnormalized log-posterior [T, K] (no prior) of the one-coin with accuracies ``p`` [I] or
    per-task [T, I]."""
    p = jnp.broadcast_to(p, votes.shape[:2])
    logk1 = jnp.log(jnp.maximum(_task_K(mask, votes.dtype) - 1.0, 1.0))[:, None]   # [T, 1]
    lp, lq = _safe_log(p), _safe_log(1.0 - p)
    n = votes.sum(-1)                                                              # [T, I]
    per_vote = jnp.einsum("tik,ti->tk", votes, lp - lq + logk1)
    return per_vote + (n * (lq - logk1)).sum(-1, keepdims=True)


def _log_prior_term(params, mask, prior):
    if prior == "uniform":
        return -jnp.log(_task_K(mask, params.log_prior.dtype))[:, None]
    return params.log_prior[None, :]


def _check_options(model, prior):
    if model not in MODELS:
        raise DataError(f"model must be one of {MODELS}, got {model!r}", field="model")
    if prior not in PRIORS:
        raise DataError(f"prior must be one of {PRIORS}, got {prior!r}", field="prior")


@partial(jax.jit, static_argnames=("model", "prior"))
def ds_e_step(votes, mask, params: DSParams, *, model="one-coin", prior="estimate"):
    """E-step: ``(log_posterior [T, K], log_likelihood [T])``; the per-task log-likelihood is the
    exact observed-data marginal ``log sum_{g < K_t} pi_g prod_i prod_k P_i[g, k]^v[t,i,k]``."""
    if model == "one-coin":
        score = _onecoin_scores(votes, mask, params.skill)
    else:
        score = jnp.einsum("tik,igk->tg", votes, _safe_log(params.confusion))
    score = jnp.where(mask, score + _log_prior_term(params, mask, prior), -jnp.inf)
    ll = jax.nn.logsumexp(score, axis=-1)
    return score - ll[:, None], ll


@partial(jax.jit, static_argnames=("model", "prior"))
def ds_m_step(votes, mask, q, smoothing=DEFAULT_SMOOTHING, *, model="one-coin",
              prior="estimate") -> DSParams:
    """M-step (MAP with ``smoothing`` pseudo-counts) from task posteriors ``q`` [T, K] (0 on
    padding). Returns :class:`DSParams`."""
    dt = votes.dtype
    s = jnp.asarray(smoothing, dt)
    Kmax = mask.shape[1]
    eye = jnp.eye(Kmax, dtype=dt)
    if prior == "estimate":
        mass = q.sum(0) + s
        pi = jnp.where(mass.sum() > 0, mass / jnp.maximum(mass.sum(), jnp.finfo(dt).tiny),
                       1.0 / Kmax)
    else:
        pi = jnp.full((Kmax,), 1.0 / Kmax, dt)
    log_prior = _safe_log(pi)
    if model == "one-coin":
        agree = jnp.einsum("tk,tik->i", q, votes)
        n = votes.sum((0, 2))
        den = n + 2.0 * s
        p = jnp.where(den > 0, (agree + s) / jnp.where(den > 0, den, 1.0), 0.5)
        off = (1.0 - p) / max(Kmax - 1, 1)
        conf = p[:, None, None] * eye + off[:, None, None] * (1.0 - eye)
        return DSParams(p, conf, log_prior)
    num = jnp.einsum("tg,tik->igk", q, votes) + s
    den = num.sum(-1, keepdims=True)
    conf = jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 1.0 / Kmax)
    skill = jnp.einsum("g,igg->i", pi, conf)
    return DSParams(skill, conf, log_prior)


def _log_param_prior(params, smoothing, model, prior):
    """Log density (up to a constant) of the smoothing prior: what MAP-EM adds to the likelihood."""
    if model == "one-coin":
        lp = (_safe_log(params.skill) + _safe_log(1.0 - params.skill)).sum()
    else:
        lp = _safe_log(params.confusion).sum()
    if prior == "estimate":
        lp = lp + params.log_prior.sum()
    return smoothing * lp


@partial(jax.jit, static_argnames=("init",))
def _init_posterior(votes, mask, init):
    shares = vote_shares(votes.sum(1), mask)
    if init == "majority":
        return shares
    Kt = _task_K(mask, votes.dtype)[:, None]
    if init == "anti":
        anti = jnp.where(Kt > 1, (1.0 - shares) / jnp.maximum(Kt - 1.0, 1.0), shares)
        return jnp.where(mask, anti, 0.0)
    w = spectral_skills(votes, mask)
    p = jnp.clip((1.0 + (Kt - 1.0) * w[None, :]) / Kt, 0.01, 0.99)           # [T, I]
    score = jnp.where(mask, _onecoin_scores(votes, mask, p), -jnp.inf)
    return jnp.where(mask, jax.nn.softmax(score, axis=-1), 0.0)


def ds_init_posterior(votes, mask, init="majority", *, dtype=None):
    """Starting posterior [T, K] (0 on padding) for ``init`` in "majority", "spectral", "anti"
    (module docstring). ``init`` may also be an explicit [T, K] array, returned masked."""
    return _init(*_check_arrays(votes, mask, dtype), init)


def _init(votes, mask, init):
    if isinstance(init, str):
        if init not in INITS:
            raise DataError(f"init must be one of {INITS} or a [T, K] array, got {init!r}",
                            field="init")
        return _init_posterior(votes, mask, init)
    q = np.asarray(init, votes.dtype)
    if q.shape != mask.shape:
        raise DataError(f"an explicit init must be [T, K] = {mask.shape}, got {q.shape}",
                        field="init")
    return jnp.asarray(np.where(np.asarray(mask), q, 0.0).astype(votes.dtype))


@jax.jit
def spectral_skills(votes, mask):
    """Chance-corrected one-coin skills ``w`` [I] (``w = (K p - 1) / (K - 1)``) from the
    rank-one structure of the pairwise chance-corrected agreement matrix (module docstring)."""
    dt = votes.dtype
    Kt = _task_K(mask, dt)
    n = votes.sum(-1)                                                    # [T, I]
    u = votes / jnp.maximum(n, 1.0)[..., None]                           # vote shares
    use = (Kt > 1).astype(dt)
    b = (n > 0).astype(dt) * use[:, None]
    wt = use * Kt / jnp.maximum(Kt - 1.0, 1.0)
    zt = use / jnp.maximum(Kt - 1.0, 1.0)
    num = jnp.einsum("tik,tjk->ij", u * wt[:, None, None], u) - jnp.einsum("ti,tj->ij",
                                                                            b * zt[:, None], b)
    cnt = b.T @ b
    I = votes.shape[1]
    observed = (cnt > 0) & ~jnp.eye(I, dtype=bool)
    M = jnp.where(observed, num / jnp.maximum(cnt, 1.0), 0.0)

    def refill(_, w):
        X = jnp.where(observed, M, jnp.outer(w, w))
        vals, vecs = jnp.linalg.eigh(X)
        return jnp.sqrt(jnp.maximum(vals[-1], 0.0)) * vecs[:, -1]

    w = jax.lax.fori_loop(0, 50, refill, jnp.zeros(I, dt))
    sign = jnp.where((n.sum(0) * w).sum() < 0, -1.0, 1.0).astype(dt)
    return jnp.clip(sign * w, -1.0, 1.0)


def _step(votes, mask, q, smoothing, model, prior):
    params = ds_m_step(votes, mask, q, smoothing, model=model, prior=prior)
    log_q, ll = ds_e_step(votes, mask, params, model=model, prior=prior)
    q_new = jnp.where(mask, jnp.exp(log_q), 0.0)
    delta = jnp.max(jnp.abs(q_new - q))
    obj = ll.sum() + _log_param_prior(params, smoothing, model, prior)
    return q_new, log_q, params, ll.sum(), obj, delta


@partial(jax.jit, static_argnames=("model", "prior"))
def _em(votes, mask, q0, n_iter, tol, smoothing, model, prior):
    def cond(state):
        it, *_, delta = state
        return (it < n_iter) & (delta >= tol)

    def body(state):
        it, q, *_ = state
        return (it + 1, *_step(votes, mask, q, smoothing, model, prior))

    zeros = lambda x: jnp.zeros(x.shape, x.dtype)
    shapes = jax.eval_shape(lambda q: _step(votes, mask, q, smoothing, model, prior), q0)
    _, log_q, params, ll, obj, _ = jax.tree_util.tree_map(zeros, shapes)
    inf = jnp.asarray(jnp.inf, votes.dtype)
    it, q, log_q, params, ll, obj, delta = jax.lax.while_loop(
        cond, body, (jnp.int32(0), q0, log_q, params, ll, obj, inf))
    return DSResult(log_q, params, it, ll, obj, delta < tol)


@partial(jax.jit, static_argnames=("n_steps", "model", "prior"))
def _trace(votes, mask, q0, smoothing, n_steps, model, prior):
    def body(q, _):
        q, _, _, ll, obj, delta = _step(votes, mask, q, smoothing, model, prior)
        return q, (ll, obj, delta)

    return jax.lax.scan(body, q0, None, length=n_steps)[1]


def _check_arrays(votes, mask, dtype=None):
    """Validate in NumPy (no per-shape device compiles) and return (votes, mask) as JAX arrays."""
    dt = _float_dtype(dtype)
    votes, mask = np.asarray(votes), np.asarray(mask, bool)
    if votes.ndim != 3 or mask.shape != (votes.shape[0], votes.shape[2]):
        raise DataError(f"votes must be [T, I, K] and mask [T, K]; got {votes.shape} and "
                        f"{mask.shape}", field="votes")
    if not mask.any(-1).all():
        raise DataError("every task needs at least one candidate", field="mask")
    if not np.isfinite(votes).all() or (votes < 0).any():
        raise DataError("votes must be finite and non-negative", field="votes")
    votes = np.where(mask[:, None, :], votes, 0).astype(dt)
    return jnp.asarray(votes), jnp.asarray(mask)


def _check_numbers(n_iter=1, tol=0.0, smoothing=0.0):
    if not isinstance(n_iter, (int, np.integer)) or isinstance(n_iter, bool) or n_iter < 1:
        raise DataError(f"n_iter must be an integer >= 1, got {n_iter!r}", field="n_iter")
    if not np.isfinite(tol) or tol < 0:
        raise DataError(f"tol must be >= 0, got {tol!r}", field="tol")
    if not np.isfinite(smoothing) or smoothing < 0:
        raise DataError(f"smoothing must be >= 0, got {smoothing!r}", field="smoothing")


def dawid_skene_em(votes, mask, init="majority", n_iter=100, tol=1e-6,
                   smoothing=DEFAULT_SMOOTHING, *, model="one-coin", prior="estimate",
                   dtype=None) -> DSResult:
    """Unsupervised Dawid–Skene EM (seed 003 Appendix B.1 "DS-EM"; module docstring).

    Args:
      votes: [T, I, K] non-negative vote counts (e.g. ``counts.e0``); padding slots are ignored.
      mask: [T, K] valid candidates.
      init: "majority", "spectral", "anti", or a [T, K] starting posterior.
      n_iter: cap on the number of EM iterations (M-step + E-step), >= 1.
      tol: stop when max |q_new - q| over tasks and candidates is below ``tol``.
      smoothing: additive pseudo-count of the M-step (>= 0).
      model: "one-coin" or "confusion". prior: "estimate" (class prior by EM) or "uniform".
      dtype: float32 (default) or float64 (needs JAX's x64 mode).

    Returns :class:`DSResult`. ``n_iter``, ``tol`` and ``smoothing`` are traced (changing them does
    not recompile); ``model``, ``prior`` and a string ``init`` are static.

    >>> votes = np.array([[[1, 0], [1, 0], [0, 1]], [[0, 1], [0, 1], [0, 1]]])   # [T=2, I=3, K=2]
    >>> r = dawid_skene_em(votes, np.ones((2, 2), bool))
    >>> np.argmax(np.asarray(r.log_posterior), axis=1).tolist(), bool(r.converged)
    ([0, 1], True)
    """
    _check_options(model, prior)
    _check_numbers(n_iter, tol, smoothing)
    votes, mask = _check_arrays(votes, mask, dtype)
    q0 = _init(votes, mask, init)
    return _em(votes, mask, q0, jnp.int32(n_iter), jnp.asarray(tol, votes.dtype),
               jnp.asarray(smoothing, votes.dtype), model, prior)


def dawid_skene_trace(votes, mask, n_steps, init="majority", smoothing=DEFAULT_SMOOTHING, *,
                      model="one-coin", prior="estimate", dtype=None):
    """Run exactly ``n_steps`` EM iterations (no tolerance) and return per-iteration
    ``(log_likelihood [n_steps], objective [n_steps], change [n_steps])``; entry k equals
    ``dawid_skene_em(..., n_iter=k + 1, tol=0)``'s values. EM makes ``objective`` non-decreasing
    (``log_likelihood`` too when ``smoothing == 0``)."""
    _check_options(model, prior)
    _check_numbers(n_steps, 0.0, smoothing)
    votes, mask = _check_arrays(votes, mask, dtype)
    q0 = _init(votes, mask, init)
    return _trace(votes, mask, q0, jnp.asarray(smoothing, votes.dtype), int(n_steps), model,
                  prior)


# ---------------------------------------------------------------- estimator


class DawidSkene(_Aggregator):
    """Unsupervised Dawid–Skene EM as an aggregator (``fit`` ignores gold).

    ``model``: "one-coin" (one accuracy per worker; the paper's DS-EM) or "confusion" (per-worker
    [K, K] rows; meaningful when all tasks share one candidate list — ``label_space_`` says
    "semantic" when ``Counts.vocab`` is set, else "positional"). ``init``: "majority",
    "spectral", "anti" (module docstring). ``votes``: "round0" (``e0``, the paper's basis) or
    "all" (``e``). ``prior``: "estimate" or "uniform" class prior. ``seed`` breaks exact ties in
    ``predict``.

    Fitted: ``params_`` (:class:`DSParams`), ``skills_`` [I], ``confusion_`` [I, K, K],
    ``prior_`` [K], ``log_likelihood_``, ``objective_``, ``n_iter_``, ``converged_``,
    ``log_proba_`` [T, K] (the fitted tasks' EM posteriors, -inf on padding), ``label_space_``,
    ``agents_``. ``predict_proba(data)`` runs one E-step with the fitted parameters: on the fit
    data it returns the EM posteriors.
    """

    def __init__(self, model: str = "one-coin", init="majority", n_iter: int = 100,
                 tol: float = 1e-6, smoothing: float = DEFAULT_SMOOTHING, votes: str = "round0",
                 prior: str = "estimate", seed: int = 0):
        _check_options(model, prior)
        _check_numbers(n_iter, tol, smoothing)
        if votes not in ("round0", "all"):
            raise DataError(f"votes must be 'round0' or 'all', got {votes!r}", field="votes")
        if isinstance(init, str) and init not in INITS:
            raise DataError(f"init must be one of {INITS} or a [T, K] array, got {init!r}",
                            field="init")
        self.model, self.init, self.n_iter, self.tol = model, init, n_iter, tol
        self.smoothing, self.votes, self.prior, self.seed = smoothing, votes, prior, seed

    def _votes(self, counts):
        return counts.e0 if self.votes == "round0" else counts.e

    def fit(self, data) -> "DawidSkene":
        """Run EM on ``data`` (Counts or traces); gold, if any, is not read."""
        counts = self._counts(data)
        self.agents_ = counts.agents
        res = dawid_skene_em(self._votes(counts), counts.mask, self.init, self.n_iter, self.tol,
                             self.smoothing, model=self.model, prior=self.prior)
        self.params_ = res.params
        self.skills_ = np.asarray(res.params.skill)
        self.confusion_ = np.asarray(res.params.confusion)
        self.prior_ = np.exp(np.asarray(res.params.log_prior))
        self.log_likelihood_ = float(res.log_likelihood)
        self.objective_ = float(res.objective)
        self.n_iter_ = int(res.n_iter)
        self.converged_ = bool(res.converged)
        self.log_proba_ = np.asarray(res.log_posterior)
        self.label_space_ = "semantic" if counts.vocab is not None else "positional"
        return self

    def _log_proba(self, counts):
        if not hasattr(self, "params_"):
            raise DataError("fit the aggregator first", field="fit")
        votes, mask = _check_arrays(self._votes(counts), counts.mask,
                                    self.params_.skill.dtype)
        I, K = self.confusion_.shape[:2]
        if votes.shape[1] != I:
            raise DataError(f"fitted on I = {I} workers, got {votes.shape[1]}", field="agents")
        if votes.shape[2] != K:
            raise DataError(f"fitted on K = {K} slots, got {votes.shape[2]}", field="K")
        return ds_e_step(votes, mask, self.params_, model=self.model, prior=self.prior)[0]
