"""Dawid–Skene EM over sparse votes (Dawid and Skene 1979; [BDA] Appendix B.1 "DS-EM", F.10).

One EM serves the council arms (dense [T, I, K] votes) and the crowd estimators
(:mod:`bda_jax.crowd`, :class:`~bda_jax.PairCounts`): both become
:class:`~bda_jax.crowd.CrowdVotes`, the nonzero cells of the pair layout — entries ``(task,
agent, label, weight)``, one per (task, agent) pair and voted candidate — and every step is a
segment sum over entries (no dense tasks x workers matrix). The votes are by default the round-0
positive endorsements ``e0``; the mask [T, K] marks each task's K_t candidates. Each vote of worker i on a task whose truth is g lands on candidate k with
probability

* one-coin:  ``p_i`` if k = g, else ``(1 - p_i) / (K_t - 1)`` (uniform errors over the task's
  other candidates; the K_t-dependence makes it meaningful for per-task candidate sets);
* confusion: ``P_i[g, k]`` (rows = true class). A row indexes candidate *slots*, so it is a
  cross-task object only when every task shares one candidate list (``Counts.vocab``: semantic
  labels such as yes/no/maybe). With positional or open answers the rows mean "slot g -> slot k"
  and the one-coin is the documented choice ([BDA] Appendix F.11).

The truth has the class prior ``pi`` (estimated, or uniform over each task's candidates). Ragged K
is handled by masking: rows and ``pi`` live on the K_max slots and a task's padding slots are
simply never observed, i.e. the model is the *masked* (deficient) likelihood ``sum_{g < K_t}
pi_g prod_i prod_k P_i[g, k]^v``. For a shared candidate list this is the ordinary DS likelihood;
for ragged K the EM below is still exact and monotone for it.

EM (all pure, jitted as one ``lax.while_loop``, fixed shapes, no Python loop over tasks):

* E-step: ``log q[t, g] = log pi_g + segment_sum_{entries e of t} w_e log P_{a_e}[g, k_e]``
  normalized over the task's valid candidates (padding: -inf); its log-normalizer is the task's
  exact observed-data marginal log-likelihood. Tasks with a clamped gold label (crowd-kit's
  ``fit(data, true_labels=...)``) keep ``q`` at the one-hot gold through EM; their
  log-likelihood term is the joint ``log p(votes, z = gold)``.
* M-step by segment sums over agents, with additive smoothing ``s`` and optional Dirichlet
  pseudo-counts ``A_i[g, k]`` (``error_prior``; the MAP under Dirichlet(1 + s + A) rows /
  Beta(1 + s + tr A_i, 1 + s + sum A_i - tr A_i)): ``p_i = (agree_i + s + tr A_i) / (n_i + 2 s +
  sum A_i)`` with ``agree_i = sum q[t, k_e] w_e`` over i's entries; ``P_i[g, :] ∝ sum_e q[t_e, g]
  w_e [k_e = :] + s + A_i[g, :]``; ``pi ∝ sum_t q[t, :] + s``. Logs are taken of the smoothed
  counts (``log p = log(agree + s) - log(den)``, ``log(1 - p) = log(disagree + s) - log(den)``
  with ``disagree`` summed directly), so near-perfect workers keep finite, accurate log-odds in
  float32. With ``s > 0`` EM increases the penalized ``objective`` (log-likelihood + log prior
  density of the parameters, up to a constant); with ``s = 0`` and no pseudo-counts the
  log-likelihood itself. Zero probabilities (only with ``s = 0``) are clamped to the smallest
  normal float before taking logs.
* ``initial_error`` (crowd-kit 1.4.2's ``initial_error_strategy``): error *counts* [I, K, K]
  used by the first M-step only — ``"addition"`` adds them to the data counts, ``"assign"``
  replaces the data counts with them. This is crowd-kit's semantics (its later M-steps ignore
  ``initial_error``); a prior that persists through every M-step is ``error_prior``.
* Loop and stopping (``criterion``):

  - ``"posterior"`` (the council default): stop when ``max |q_new - q| < tol``;
    ``n_iter`` counts M+E iterations.
  - ``"crowdkit"`` (the crowd estimators' default): crowd-kit 1.4.2's ``DawidSkene`` rule.
    Its iteration j runs an E-step from the previous parameters, an M-step, then its loss
    ``L_j = [sum_e w_e sum_g q[t_e, g] (log P_{a_e}[g, k_e] + log pi_g) + H(q)] / sum_e w_e``
    (expected complete-data log-likelihood with the prior counted once per *label*, plus the
    entropy of q, per label), and stops at the first j >= 2 with ``L_j - L_{j-1} < tol`` (a
    decrease also stops), or at j = ``n_iter``. We run the same sequence of M-steps (one more
    E-step: the returned posterior is ``E(returned parameters)``, where crowd-kit's ``probas_``
    come from the parameters one M-step earlier), report ``n_iter`` = crowd-kit's j
    (``len(loss_history_)``) and ``loss_history`` = its ``L_1 .. L_j``. Same ``tol`` and cap,
    same number of M-steps: a side-by-side benchmark can use crowd-kit's defaults
    (``n_iter=100``, ``tol=1e-5``) on both.

  Reductions over all entries / tasks are summed in blocks of 1024 (float32 stays accurate to
  ~1e-7 relative on 1e5-vote crowds); pass ``dtype="float64"`` inside ``jax.enable_x64(True)``
  for float64 throughout.

Initializations (the starting posterior; EM starts with an M-step from it):

* ``"majority"``: each task's vote shares (uniform where nobody voted); crowd-kit's start.
* ``"anti"``: the mirror of majority, ``(1 - share_g) / (K_t - 1)``: at K = 2 the shares are
  swapped; at K > 2 the mass goes to the candidates the majority disfavours. At K = 2 this is the
  other label-switching mode ([BDA] Table 16: the label-requiring "oracle" mode).
* ``"spectral"``: a one-coin spectral start in the spirit of Zhang et al. (2016): under the
  one-coin model with chance-corrected skill ``w_i = (K p_i - 1) / (K - 1)`` the expected
  chance-corrected agreement of two workers is ``(K a_ij - 1) / (K - 1) = w_i w_j`` — a rank-one
  matrix off the diagonal. We estimate it from the tasks both workers voted on (an I x I sparse
  product over the pairs, never a dense T x I matrix), fit ``w w^T`` to the observed
  off-diagonal entries by least squares (start: the leading eigenpair of the observed matrix,
  then 100 damped alternating updates, each a matrix-vector product), fix the global sign so
  that the vote-weighted mean skill is positive ("workers are better than chance on average"),
  map ``p_{t,i} = (1 + (K_t - 1) w_i) / K_t`` clipped to [0.01, 0.99], and take the one-coin
  posterior under a uniform prior as the start. Limits: this is not Zhang et al.'s three-view
  tensor method (no per-class confusion from the spectral step: the confusion model starts from
  this one-coin posterior); it needs >= 3 workers with overlapping tasks, assumes conditional
  independence, and treats multi-vote workers through their vote shares. The sign rule is why
  it lands on a majority coalition's mode (Table 16).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import positive_int
from .._core.counts import PairCounts
from .._core.decisions import decide, vote_shares
from .._core.errors import DataError
from .._core.exported import persistent_jit, serializable
from .._core.numerics import safe_log
from ._votes import CrowdVotes, check_dense_votes, check_gold, crowd_votes, votes_from_dense

__all__ = ["DSParams", "DSResult", "DSSwitch", "check_ds_settings", "dawid_skene_em",
           "dawid_skene_pairs", "dawid_skene_trace", "dawid_skene_votes", "ds_e_step",
           "ds_init_posterior", "ds_m_step", "ds_predict", "ds_switch_rate", "spectral_skills"]

MODELS = ("one-coin", "confusion")
INITS = ("majority", "spectral", "anti")
PRIORS = ("estimate", "uniform")
CRITERIA = ("posterior", "crowdkit")
STRATEGIES = (None, "addition", "assign")
DEFAULT_SMOOTHING = 0.01
_BLOCK = 1024


@serializable
class DSParams(NamedTuple):
    """Dawid–Skene parameters (a pytree).

    ``skill`` [I]: one-coin accuracy ``p_i`` (confusion model: the prior-weighted diagonal
    ``sum_g pi_g P_i[g, g]``, for reporting); ``confusion`` [I, K, K] rows = true class (one-coin:
    the implied matrix at K = K_max, for reporting); ``log_prior`` [K] log class prior.
    ``log_table`` (optional; computed from the probabilities when ``None``): what the E-step
    reads — one-coin [I, 2] ``(log p_i, log(1 - p_i))``, confusion [I, K, K] ``log P_i``.
    """

    skill: jax.Array
    confusion: jax.Array
    log_prior: jax.Array
    log_table: jax.Array | None = None


@serializable
class DSResult(NamedTuple):
    """``log_posterior`` [T, K] (-inf on padding), ``params`` (:class:`DSParams`), ``n_iter``
    (EM iterations, see the module's stopping rules), ``log_likelihood`` (exact observed-data
    marginal log-likelihood at ``params``; clamped tasks enter with their joint term),
    ``objective`` (log-likelihood + smoothing/pseudo-count log-prior, what EM increases),
    ``converged`` (the stopping rule fired before the cap), ``loss_history`` ([n_iter cap]
    crowd-kit loss per iteration, NaN after the last; ``None`` unless asked for)."""

    log_posterior: jax.Array
    params: DSParams
    n_iter: jax.Array
    log_likelihood: jax.Array
    objective: jax.Array
    converged: jax.Array
    loss_history: jax.Array | None = None


def _grid_votes(votes, mask) -> CrowdVotes:
    """Every cell of dense votes [T, I, K] as an entry (zero weights included): traceable."""
    T, I, K = votes.shape
    t, i, k = (x.reshape(-1) for x in jnp.meshgrid(jnp.arange(T, dtype=jnp.int32),
                                                   jnp.arange(I, dtype=jnp.int32),
                                                   jnp.arange(K, dtype=jnp.int32),
                                                   indexing="ij"))
    w = jnp.where(mask[:, None, :], votes, 0)
    return CrowdVotes(t, i, k, w.reshape(-1), mask, w.sum((0, 2)))


# ---------------------------------------------------------------- pure kernels


def _task_K(mask, dtype):
    return mask.sum(-1).astype(dtype)


def _fsum(x):
    """Sum of all elements in blocks of 1024 (keeps float32 sums over 1e5 terms accurate)."""
    x = x.reshape(-1)
    n = x.shape[0]
    if n <= 4 * _BLOCK:
        return x.sum()
    return jnp.pad(x, (0, (-n) % _BLOCK)).reshape(-1, _BLOCK).sum(1).sum()


def _segsum_tasks(x, ent):
    return jax.ops.segment_sum(x, ent.task, ent.mask.shape[0], indices_are_sorted=True)


def _segsum_agents(x, ids, n):
    return jax.ops.segment_sum(x, ids, n)


def _log_table(params: DSParams, model):
    if params.log_table is not None:
        return params.log_table
    if model == "one-coin":
        return jnp.stack([safe_log(params.skill), safe_log(1.0 - params.skill)], -1)
    return safe_log(params.confusion)


def _cell(ent):
    """Each entry's flat (task, label) cell index into a [T * K] array."""
    return ent.task * ent.mask.shape[1] + ent.label


def _terms(ent, params, model):
    """Per-entry log-likelihood terms ``w_e log P_{a_e}[g, k_e]``. One-coin: ``(off [E], hit
    [E])`` with the term ``off_e + [g = k_e] hit_e`` (no [E, K] array); confusion: [E, K]."""
    table = _log_table(params, model)
    K = ent.mask.shape[1]
    w = ent.weight
    if model == "one-coin":
        logk1 = jnp.log(jnp.maximum(_task_K(ent.mask, w.dtype) - 1.0, 1.0))[ent.task]
        lp, lq = table[ent.agent, 0], table[ent.agent, 1]
        return w * (lq - logk1), w * (lp - lq + logk1)
    flat = jnp.swapaxes(table, 1, 2).reshape(-1, K)             # row (i, k) -> [g]
    return w[:, None] * flat[ent.agent * K + ent.label]


def _task_scores(ent, terms, model):
    """``sum_{entries e of t} w_e log P_{a_e}[g, k_e]`` [T, K] by segment sums over tasks."""
    T, K = ent.mask.shape
    if model == "one-coin":
        off, hit = terms
        at = ent.label[:, None] == jnp.arange(K)[None, :]
        terms = off[:, None] + jnp.where(at, hit[:, None], 0.0)
    return _segsum_tasks(terms, ent)


def _expected_terms(ent, terms, q, model):
    """``sum_e sum_g q[t_e, g] w_e log P_{a_e}[g, k_e]`` (crowd-kit's loss, likelihood part)."""
    if model == "one-coin":
        off, hit = terms
        return _fsum(off * q.sum(-1)[ent.task] + hit * q.reshape(-1)[_cell(ent)])
    return _fsum((q[ent.task] * terms).sum(-1))


def _prior_term(params, mask, prior):
    if prior == "uniform":
        return -jnp.log(_task_K(mask, params.log_prior.dtype))[:, None]
    return params.log_prior[None, :]


def _e_step(ent, params, gold, model, prior):
    """``(log_q [T, K], ll [T], terms)``; clamped tasks (gold >= 0) get the one-hot."""
    terms = _terms(ent, params, model)
    mask = ent.mask
    score = _task_scores(ent, terms, model) + _prior_term(params, mask, prior)
    score = jnp.where(mask, score, -jnp.inf)
    lse = jax.nn.logsumexp(score, axis=-1)
    log_q = score - lse[:, None]
    clamped = gold >= 0
    hot = jnp.arange(mask.shape[1])[None, :] == gold[:, None]
    log_q = jnp.where(clamped[:, None], jnp.where(hot, 0.0, -jnp.inf), log_q)
    joint = jnp.take_along_axis(score, jnp.maximum(gold, 0)[:, None], axis=-1)[:, 0]
    return log_q, jnp.where(clamped, joint, lse), terms


@partial(jax.jit, static_argnames=("model", "prior"))
def ds_predict(votes: CrowdVotes, params: DSParams, *, model="one-coin", prior="estimate"):
    """E-step with fitted parameters and no clamping: the log posterior [T, K] of the tasks
    of ``votes`` (-inf on padding slots)."""
    gold = jnp.full(votes.mask.shape[:1], -1, jnp.int32)
    return _e_step(votes, params, gold, model, prior)[0]


def _m_step(ent, q, smoothing, extra, data_scale, n_agents, model, prior):
    """MAP M-step from task posteriors ``q`` [T, K], pseudo-counts ``extra``
    [I, K, K] (rows = true class) and the data counts scaled by ``data_scale`` (0: assign)."""
    w = ent.weight
    dt = w.dtype
    s = jnp.asarray(smoothing, dt)
    mask = ent.mask
    Kmax = mask.shape[1]
    I = n_agents
    eye = jnp.eye(Kmax, dtype=dt)
    if prior == "estimate":
        mass = q.sum(0) + s
        pi = jnp.where(mass.sum() > 0, mass / jnp.maximum(mass.sum(), jnp.finfo(dt).tiny),
                       1.0 / Kmax)
    else:
        pi = jnp.full((Kmax,), 1.0 / Kmax, dt)
    log_prior = safe_log(pi)
    if model == "one-coin":
        cell = _cell(ent)
        others = q @ (1.0 - eye)                # sum_{g != k} q[t, g]: summed directly, exact
        both = jnp.stack([q.reshape(-1)[cell], others.reshape(-1)[cell]], -1) * w[:, None]
        agree_d, miss_d = _segsum_agents(both, ent.agent, I).T
        diag = jnp.trace(extra, axis1=1, axis2=2)
        agree = agree_d * data_scale + diag + s
        miss = miss_d * data_scale + extra.sum((1, 2)) - diag + s
        den = agree + miss
        ok = den > 0
        lp = jnp.where(ok, safe_log(agree) - safe_log(den), jnp.log(0.5).astype(dt))
        lq = jnp.where(ok, safe_log(miss) - safe_log(den), jnp.log(0.5).astype(dt))
        p = jnp.where(ok, agree / jnp.where(ok, den, 1.0), 0.5)
        off = (1.0 - p) / max(Kmax - 1, 1)
        conf = p[:, None, None] * eye + off[:, None, None] * (1.0 - eye)
        return DSParams(p, conf, log_prior, jnp.stack([lp, lq], -1))
    counts = _segsum_agents(w[:, None] * q[ent.task], ent.agent * Kmax + ent.label, I * Kmax)
    num = jnp.swapaxes(counts.reshape(I, Kmax, Kmax), 1, 2) * data_scale + extra + s
    den = num.sum(-1, keepdims=True)
    ok = den > 0
    conf = jnp.where(ok, num / jnp.where(ok, den, 1.0), 1.0 / Kmax)
    log_conf = jnp.where(ok, safe_log(num) - safe_log(den), -jnp.log(float(Kmax)).astype(dt))
    skill = jnp.einsum("g,igg->i", pi, conf)
    return DSParams(skill, conf, log_prior, log_conf)


def _log_param_prior(params, smoothing, extra, model, prior):
    """Log density (up to a constant) of the smoothing / pseudo-count prior: what MAP-EM adds to
    the likelihood."""
    table = _log_table(params, model)
    if model == "one-coin":
        diag = jnp.trace(extra, axis1=1, axis2=2)
        lp = ((smoothing + diag) * table[:, 0]
              + (smoothing + extra.sum((1, 2)) - diag) * table[:, 1]).sum()
    else:
        lp = ((smoothing + extra) * table).sum()
    if prior == "estimate":
        lp = lp + smoothing * params.log_prior.sum()
    return lp


def _clamp(q, gold):
    hot = (jnp.arange(q.shape[1])[None, :] == gold[:, None]).astype(q.dtype)
    return jnp.where((gold >= 0)[:, None], hot, q)


def _step(ent, q, gold, smoothing, extra, init_extra, first, assign, n_agents, model, prior,
          want_loss):
    """One EM iteration: M-step from ``q``, E-step, and crowd-kit's loss of (q, new params)."""
    pseudo = extra + jnp.where(first, init_extra, 0.0)
    scale = jnp.where(first & assign, 0.0, 1.0).astype(q.dtype)
    params = _m_step(ent, q, smoothing, pseudo, scale, n_agents, model, prior)
    log_q, ll_t, terms = _e_step(ent, params, gold, model, prior)
    mask = ent.mask
    q_new = jnp.where(mask, jnp.exp(log_q), 0.0)
    ll = _fsum(ll_t)
    obj = ll + _log_param_prior(params, smoothing, extra, model, prior)
    delta = jnp.max(jnp.abs(q_new - q))
    loss = jnp.zeros((), q.dtype)
    if want_loss:
        prior_tk = jnp.where(mask, _prior_term(params, mask, prior), 0.0)
        w_task = _segsum_tasks(ent.weight, ent)
        expect = (_expected_terms(ent, terms, q, model)
                  + _fsum(w_task * (q * prior_tk).sum(-1)))
        entropy = -_fsum(jnp.where(q > 0, q * jnp.log(jnp.where(q > 0, q, 1.0)), 0.0))
        loss = (expect + entropy) / jnp.maximum(_fsum(ent.weight), 1.0)
    return q_new, log_q, params, ll, obj, delta, loss


@partial(persistent_jit, static_argnames=("n_agents", "model", "prior", "criterion", "history"))
def _em(ent, q0, gold, extra, init_extra, assign, n_iter, tol, smoothing, *, n_agents, model,
        prior, criterion, history):
    dt = ent.weight.dtype
    crowdkit = criterion == "crowdkit"
    cap = n_iter + 1 if crowdkit else n_iter
    want_loss = crowdkit or history > 0
    step = partial(_step, ent, gold=gold, smoothing=smoothing, extra=extra,
                   init_extra=init_extra, assign=assign, n_agents=n_agents, model=model,
                   prior=prior, want_loss=want_loss)

    def cond(state):
        it, *_, stop, _, _ = state
        return (it < cap) & ~stop

    def body(state):
        it, q, _, _, _, _, _, loss_prev, hist = state
        q_new, log_q, params, ll, obj, delta, loss = step(q, first=it == 0)
        it = it + 1
        if crowdkit:    # loss is crowd-kit's L_{it-1}; L_0 is never compared (crowd-kit: -inf)
            stop = (it >= 3) & (loss - loss_prev < tol)
        else:
            stop = delta < tol
        if history:
            hist = jnp.where(it >= 2, hist.at[jnp.maximum(it - 2, 0)].set(loss), hist)
        return it, q_new, log_q, params, ll, obj, stop, loss, hist

    q0 = _clamp(q0, gold)
    shapes = jax.eval_shape(lambda q: step(q, first=True), q0)
    zeros = lambda x: jnp.zeros(x.shape, x.dtype)
    _, log_q, params, ll, obj, _, _ = jax.tree_util.tree_map(zeros, shapes)
    hist = jnp.full((max(history, 1),), jnp.nan, dt)
    it, _, log_q, params, ll, obj, stop, _, hist = jax.lax.while_loop(
        cond, body, (jnp.int32(0), q0, log_q, params, ll, obj, jnp.bool_(False),
                     jnp.asarray(-jnp.inf, dt), hist))
    n_done = it - 1 if crowdkit else it
    return DSResult(log_q, params, n_done, ll, obj, stop, hist if history else None)


@partial(jax.jit, static_argnames=("n_steps", "n_agents", "model", "prior"))
def _trace(ent, q0, smoothing, n_steps, n_agents, model, prior):
    gold = jnp.full(ent.mask.shape[:1], -1, jnp.int32)
    K = ent.mask.shape[1]
    zero = jnp.zeros((n_agents, K, K), ent.weight.dtype)

    def body(q, _):
        q, _, _, ll, obj, delta, _ = _step(ent, q, gold, smoothing, zero, zero, False, False,
                                           n_agents, model, prior, False)
        return q, (ll, obj, delta)

    return jax.lax.scan(body, q0, None, length=n_steps)[1]


# ---------------------------------------------------------------- initializations


@partial(jax.jit, static_argnames=("init",))
def _init_posterior(ent, init, w_spectral):
    mask = ent.mask
    T, K = mask.shape
    dt = ent.weight.dtype
    votes = jax.ops.segment_sum(ent.weight[:, None] * jax.nn.one_hot(ent.label, K, dtype=dt),
                                ent.task, T, indices_are_sorted=True)
    shares = vote_shares(votes, mask)
    if init == "majority":
        return shares
    Kt = _task_K(mask, dt)[:, None]
    if init == "anti":
        anti = jnp.where(Kt > 1, (1.0 - shares) / jnp.maximum(Kt - 1.0, 1.0), shares)
        return jnp.where(mask, anti, 0.0)
    Ke = Kt[ent.task, 0]
    p = jnp.clip((1.0 + (Ke - 1.0) * w_spectral[ent.agent]) / Ke, 0.01, 0.99)       # [E]
    logk1 = jnp.log(jnp.maximum(Ke - 1.0, 1.0))
    lp, lq = jnp.log(p), jnp.log(1.0 - p) - logk1
    hit = jax.nn.one_hot(ent.label, K, dtype=dt)
    contrib = ent.weight[:, None] * (hit * lp[:, None] + (1.0 - hit) * lq[:, None])
    score = jnp.where(mask, _segsum_tasks(contrib, ent), -jnp.inf)
    return jnp.where(mask, jax.nn.softmax(score, axis=-1), 0.0)


def _spectral_w(ent: CrowdVotes, n_agents: int) -> jax.Array:
    """Chance-corrected one-coin skills [I] from the pairwise agreement of workers: the I x I
    matrices are sparse products over the pairs (SciPy on the host), then a jitted rank-one fit."""
    from scipy import sparse
    task, agent, label = (np.asarray(x, np.int64) for x in (ent.task, ent.agent, ent.label))
    w = np.asarray(ent.weight, np.float64)
    mask = np.asarray(ent.mask, bool)
    T, K = mask.shape
    I = n_agents
    keep = w > 0
    task, agent, label, w = task[keep], agent[keep], label[keep], w[keep]
    pair_key, pair = np.unique(task * I + agent, return_inverse=True)
    pair = pair.reshape(-1)
    n_pair = np.bincount(pair, weights=w, minlength=pair_key.size)
    pt, pa = pair_key // I, pair_key % I
    Kt = mask.sum(1).astype(np.float64)
    use = (Kt > 1).astype(np.float64)
    wt = use * Kt / np.maximum(Kt - 1.0, 1.0)
    zt = use / np.maximum(Kt - 1.0, 1.0)
    u = w / n_pair[pair]                                            # vote shares per pair
    U = sparse.csr_matrix((u * np.sqrt(wt[task]), (agent, task * K + label)), shape=(I, T * K))
    B = sparse.csr_matrix((np.sqrt(zt[pt]), (pa, pt)), shape=(I, T))
    C = sparse.csr_matrix((use[pt], (pa, pt)), shape=(I, T))
    num = (U @ U.T).toarray() - (B @ B.T).toarray()
    cnt = (C @ C.T).toarray()
    nvotes = np.bincount(agent, weights=w, minlength=I)
    dt = ent.weight.dtype
    return _rank_one(num.astype(dt), cnt.astype(dt), nvotes.astype(dt))


@jax.jit
def _rank_one(num, cnt, nvotes):
    """Least-squares rank-one fit ``w w^T`` of the observed off-diagonal agreement matrix."""
    I = num.shape[0]
    observed = (cnt > 0) & ~jnp.eye(I, dtype=bool)
    M = jnp.where(observed, num / jnp.maximum(cnt, 1.0), 0.0)
    obs = observed.astype(M.dtype)
    vals, vecs = jnp.linalg.eigh(M)
    w0 = jnp.sqrt(jnp.maximum(vals[-1], 0.0)) * vecs[:, -1]

    def als(_, w):
        den = obs @ (w * w)
        new = jnp.where(den > 0, (M @ w) / jnp.where(den > 0, den, 1.0), 0.0)
        return 0.5 * (w + new)                      # damped: plain Jacobi ALS oscillates c <-> 1/c

    w = jax.lax.fori_loop(0, 100, als, w0)
    sign = jnp.where((nvotes * w).sum() < 0, -1.0, 1.0).astype(M.dtype)
    return jnp.clip(sign * w, -1.0, 1.0)


def _init(ent, init, n_agents):
    if isinstance(init, str):
        if init not in INITS:
            raise DataError(f"init must be one of {INITS} or a [T, K] array, got {init!r}",
                            field="init")
        w = (_spectral_w(ent, n_agents) if init == "spectral"
             else np.zeros(n_agents, ent.weight.dtype))
        return _init_posterior(ent, init, w)
    mask = np.asarray(ent.mask)
    q = np.asarray(init, ent.weight.dtype)
    if q.shape != mask.shape:
        raise DataError(f"an explicit init must be [T, K] = {mask.shape}, got {q.shape}",
                        field="init")
    if not np.isfinite(q).all() or (q < 0).any():
        raise DataError("an explicit init must hold finite non-negative values", field="init")
    return np.where(mask, q, 0.0).astype(ent.weight.dtype)


# ---------------------------------------------------------------- checks


def check_ds_settings(model="one-coin", prior="estimate", criterion="posterior", n_iter=1,
                      tol=0.0, smoothing=0.0, init=None):
    """Refuse an unknown ``model`` / ``prior`` / ``criterion`` / ``init`` or a bad ``n_iter`` /
    ``tol`` / ``smoothing`` with a :class:`~bda_jax.DataError` naming the argument (the checks
    every Dawid–Skene EM entry point and estimator runs before any compilation)."""
    _check_options(model, prior, criterion)
    _check_numbers(n_iter, tol, smoothing)
    if isinstance(init, str) and init not in INITS:
        raise DataError(f"init must be one of {INITS} or a [T, K] array, got {init!r}",
                        field="init")


def _check_options(model, prior, criterion="posterior"):
    if model not in MODELS:
        raise DataError(f"model must be one of {MODELS}, got {model!r}", field="model")
    if prior not in PRIORS:
        raise DataError(f"prior must be one of {PRIORS}, got {prior!r}", field="prior")
    if criterion not in CRITERIA:
        raise DataError(f"criterion must be one of {CRITERIA}, got {criterion!r}",
                        field="criterion")


def _check_numbers(n_iter=1, tol=0.0, smoothing=0.0):
    positive_int(n_iter, "n_iter")
    if not np.isfinite(tol) or tol < 0:
        raise DataError(f"tol must be >= 0, got {tol!r}", field="tol")
    if not np.isfinite(smoothing) or smoothing < 0:
        raise DataError(f"smoothing must be >= 0, got {smoothing!r}", field="smoothing")


def _pseudo(value, I, K, dt, name, diagonal_scalar=True) -> jax.Array:
    """Pseudo-counts [I, K, K] from None, a scalar (diagonal pseudo-count), [K, K] or [I, K, K]."""
    if value is None:
        return np.zeros((I, K, K), dt)
    a = np.asarray(value, np.float64)
    if a.ndim == 0 and diagonal_scalar:
        a = float(a) * np.eye(K)
    if a.shape not in ((K, K), (I, K, K)):
        raise DataError(f"{name} must be a scalar, [K, K] = [{K}, {K}] or [I, K, K] = "
                        f"[{I}, {K}, {K}] pseudo-counts, got shape {a.shape}", field=name)
    if not np.isfinite(a).all() or (a < 0).any():
        raise DataError(f"{name} must hold finite non-negative counts", field=name)
    return np.broadcast_to(a, (I, K, K)).astype(dt)


def _run(ent, n_agents, init, n_iter, tol, smoothing, model, prior, criterion, gold,
         error_prior, initial_error, initial_error_strategy, history) -> DSResult:
    _check_options(model, prior, criterion)
    _check_numbers(n_iter, tol, smoothing)
    if initial_error_strategy not in STRATEGIES:
        raise DataError(f"initial_error_strategy must be one of {STRATEGIES}, got "
                        f"{initial_error_strategy!r}", field="initial_error_strategy")
    dt = ent.weight.dtype
    K = ent.mask.shape[1]
    extra = _pseudo(error_prior, n_agents, K, dt, "error_prior")
    use_initial = initial_error is not None and initial_error_strategy is not None
    init_extra = (_pseudo(initial_error, n_agents, K, dt, "initial_error", False)
                  if use_initial else np.zeros((n_agents, K, K), dt))
    q0 = _init(ent, init, n_agents)
    assign = np.bool_(use_initial and initial_error_strategy == "assign")
    size = -(-int(history) // 128) * 128            # buffers in steps of 128: fewer compiles
    res = _em(ent, q0, check_gold(gold, ent.mask), extra, init_extra, assign,
              np.int32(n_iter), np.asarray(tol, dt), np.asarray(smoothing, dt),
              n_agents=n_agents, model=model, prior=prior, criterion=criterion, history=size)
    return res._replace(loss_history=np.asarray(res.loss_history)[:int(history)] if history
                        else None)


# ---------------------------------------------------------------- public functions


@partial(jax.jit, static_argnames=("model", "prior"))
def ds_e_step(votes, mask, params: DSParams, *, model="one-coin", prior="estimate"):
    """E-step on dense votes [T, I, K]: ``(log_posterior [T, K], log_likelihood [T])``; the
    per-task log-likelihood is the exact observed-data marginal ``log sum_{g < K_t} pi_g prod_i
    prod_k P_i[g, k]^v[t,i,k]``."""
    ent = _grid_votes(votes, mask)
    gold = jnp.full(mask.shape[:1], -1, jnp.int32)
    return _e_step(ent, params, gold, model, prior)[:2]


@partial(jax.jit, static_argnames=("model", "prior"))
def ds_m_step(votes, mask, q, smoothing=DEFAULT_SMOOTHING, *, model="one-coin",
              prior="estimate") -> DSParams:
    """M-step (MAP with ``smoothing`` pseudo-counts) on dense votes [T, I, K] from task
    posteriors ``q`` [T, K] (0 on padding). Returns :class:`DSParams`."""
    ent = _grid_votes(votes, mask)
    T, I, K = votes.shape
    zero = jnp.zeros((I, K, K), votes.dtype)
    return _m_step(ent, q, smoothing, zero, jnp.ones((), votes.dtype), I, model, prior)


def ds_init_posterior(votes, mask, init="majority", *, dtype=None):
    """Starting posterior [T, K] (0 on padding) for ``init`` in "majority", "spectral", "anti"
    (module docstring). ``init`` may also be an explicit [T, K] array, returned masked."""
    ent = votes_from_dense(votes, mask, dtype=dtype)
    return _init(ent, init, ent.shape[1])


def spectral_skills(votes, mask):
    """Chance-corrected one-coin skills ``w`` [I] (``w = (K p - 1) / (K - 1)``) from the
    rank-one structure of the pairwise chance-corrected agreement matrix (module docstring)."""
    votes = np.asarray(votes)
    dt = votes.dtype if np.issubdtype(votes.dtype, np.floating) else np.float32
    ent = votes_from_dense(votes, mask, dtype=dt)
    return _spectral_w(ent, ent.shape[1])


def dawid_skene_em(votes, mask, init="majority", n_iter=100, tol=1e-6,
                   smoothing=DEFAULT_SMOOTHING, *, model="one-coin", prior="estimate",
                   criterion="posterior", gold=None, error_prior=None, dtype=None) -> DSResult:
    """Dawid–Skene EM on dense votes ([BDA] Appendix B.1 "DS-EM"; module docstring). The
    votes are converted to their nonzero cells and run through the same EM as
    :func:`dawid_skene_votes`.

    Args:
      votes: [T, I, K] non-negative vote counts (e.g. ``counts.e0``); padding slots are ignored.
      mask: [T, K] valid candidates.
      init: "majority", "spectral", "anti", or a [T, K] starting posterior.
      n_iter: cap on the number of EM iterations (M-step + E-step), >= 1.
      tol: ``criterion="posterior"`` (default): stop when max |q_new - q| over tasks and
        candidates is below ``tol``; ``"crowdkit"``: crowd-kit's loss rule (module docstring).
      smoothing: additive pseudo-count of the M-step (>= 0).
      model: "one-coin" or "confusion". prior: "estimate" (class prior by EM) or "uniform".
      gold: optional [T] slots to clamp (-1: free). error_prior: Dirichlet pseudo-counts
        (scalar on the diagonal, [K, K] or [I, K, K]) added at every M-step.
      dtype: float32 (default) or float64 (needs JAX's x64 mode).

    Returns :class:`DSResult`. ``n_iter``, ``tol`` and ``smoothing`` are traced (changing them does
    not recompile); ``model``, ``prior`` and a string ``init`` are static.

    >>> votes = np.array([[[1, 0], [1, 0], [0, 1]], [[0, 1], [0, 1], [0, 1]]])   # [T=2, I=3, K=2]
    >>> r = dawid_skene_em(votes, np.ones((2, 2), bool))
    >>> np.argmax(np.asarray(r.log_posterior), axis=1).tolist(), bool(r.converged)
    ([0, 1], True)
    """
    return dawid_skene_votes(votes_from_dense(votes, mask, dtype=dtype), init, n_iter, tol,
                             smoothing, model=model, prior=prior, criterion=criterion, gold=gold,
                             error_prior=error_prior)


def dawid_skene_votes(votes: CrowdVotes, init="majority", n_iter=100, tol=1e-6,
                      smoothing=DEFAULT_SMOOTHING, *, model="one-coin", prior="estimate",
                      criterion="posterior", gold=None, error_prior=None, initial_error=None,
                      initial_error_strategy=None, history=False) -> DSResult:
    """Dawid–Skene EM on :class:`~bda_jax.crowd.CrowdVotes` (module docstring): the EM every
    other entry point runs. Arguments as :func:`dawid_skene_em`, plus:

    Args:
      gold: [T] slots to clamp (-1: free) whose posterior stays at the one-hot gold through EM.
      initial_error, initial_error_strategy: crowd-kit's first-M-step error counts [I, K, K]
        (rows = true class) and ``"addition"`` / ``"assign"`` (module docstring).
      history: record crowd-kit's loss ``L_j`` (entry j - 1) in ``DSResult.loss_history``
        ([n_iter], NaN where not reached; with ``criterion="posterior"`` the last iteration's
        ``L_n`` is NaN too: it needs one more M-step).

    The float dtype of ``votes.weight`` is the dtype of the EM.
    """
    if not isinstance(votes, CrowdVotes):
        raise DataError(f"expected CrowdVotes, got {type(votes).__name__}", field="votes")
    return _run(votes, votes.shape[1], init, n_iter, tol, smoothing, model, prior, criterion,
                gold, error_prior, initial_error, initial_error_strategy,
                n_iter if history else 0)


def dawid_skene_pairs(pairs: PairCounts, init="majority", n_iter=100, tol=1e-6,
                      smoothing=DEFAULT_SMOOTHING, *, model="one-coin", prior="estimate",
                      votes="round0", criterion="posterior", gold=None, error_prior=None,
                      initial_error=None, initial_error_strategy=None, history=False,
                      dtype=None) -> DSResult:
    """Dawid–Skene EM on :class:`~bda_jax.PairCounts` (the sparse crowd layout): its
    :func:`~bda_jax.crowd.crowd_votes` through :func:`dawid_skene_votes`, without ever forming
    a tasks x workers matrix.

    Arguments as :func:`dawid_skene_votes`; these are new or read differently here:

    Args:
      votes: "round0" (``pairs.e0``, the crowd labels) or "all" (``pairs.e``).
      gold: ``None``, ``True`` (clamp every task with ``pairs.gold >= 0``) or [T] slots (-1:
        free).
      dtype: float32 (default) or float64 (needs JAX's x64 mode).

    >>> import bda_jax as bda
    >>> e = np.array([[[1, 0], [1, 0], [0, 1]], [[0, 1], [0, 1], [0, 1]]])
    >>> pairs = bda.Counts.from_arrays(e.sum(-1), e, e).to_pairs()
    >>> r = dawid_skene_pairs(pairs, criterion="crowdkit", tol=1e-5)
    >>> np.argmax(np.asarray(r.log_posterior), axis=1).tolist()
    [0, 1]
    """
    if not isinstance(pairs, PairCounts):
        raise DataError(f"expected PairCounts, got {type(pairs).__name__}", field="pairs")
    if isinstance(gold, bool):
        gold = np.asarray(pairs.gold) if gold else None
    return dawid_skene_votes(crowd_votes(pairs, votes, dtype=dtype), init, n_iter, tol,
                             smoothing, model=model, prior=prior, criterion=criterion, gold=gold,
                             error_prior=error_prior, initial_error=initial_error,
                             initial_error_strategy=initial_error_strategy, history=history)


def dawid_skene_trace(votes, mask, n_steps, init="majority", smoothing=DEFAULT_SMOOTHING, *,
                      model="one-coin", prior="estimate", dtype=None):
    """Run exactly ``n_steps`` EM iterations (no tolerance) and return per-iteration
    ``(log_likelihood [n_steps], objective [n_steps], change [n_steps])``; entry k equals
    ``dawid_skene_em(..., n_iter=k + 1, tol=0)``'s values. EM makes ``objective`` non-decreasing
    (``log_likelihood`` too when ``smoothing == 0``)."""
    _check_options(model, prior)
    _check_numbers(n_steps, 0.0, smoothing)
    ent = votes_from_dense(votes, mask, dtype=dtype)
    q0 = _init(ent, init, ent.shape[1])
    return _trace(ent, q0, np.asarray(smoothing, ent.weight.dtype), int(n_steps), ent.shape[1],
                  model, prior)


# ---------------------------------------------------------------- diagnostics


class DSSwitch(NamedTuple):
    """What :func:`ds_switch_rate` returns.

    ``rate``: the share of items on which the two fits decide differently (None without items);
    ``n_items``; ``items`` [T] the tasks that count (at least one vote on a candidate and at
    least two candidates); ``disagree`` [T] (False off the items); ``decisions`` [2, T] each
    fit's decided slot; ``log_likelihood`` (2,) each fit's observed-data log-likelihood (equal
    at mirror modes); ``inits`` the two initializations compared.
    """

    rate: float | None
    n_items: int
    items: np.ndarray
    disagree: np.ndarray
    decisions: np.ndarray
    log_likelihood: tuple[float, float]
    inits: tuple[str, str]


def ds_switch_rate(votes, mask, inits=("majority", "anti"), n_iter=100, tol=1e-6,
                   smoothing=DEFAULT_SMOOTHING, *, model="one-coin", prior="estimate",
                   seed: int = 0, dtype=None) -> DSSwitch:
    """The label-switch rate of unsupervised Dawid–Skene ([BDA] Appendix F.10, Table 16).

    EM is run twice on the same votes, from the two initializations ``inits`` (default the
    majority start and its mirror, "anti"; module docstring), and the rate is the fraction of
    items on which the two fits' decisions differ — the paper's definition ("fraction of items on
    which the majority- and anti-initializations disagree"). At K = 2 the one-coin likelihood
    is invariant under the flip p_i -> 1 - p_i with the labels swapped, so a rate of 1.0 with
    equal ``log_likelihood`` says the two starts reached mirror modes: agreement alone cannot
    tell which is right and only labels can (the supervised prior of [BDA] Eq. 3). A rate near 0
    says both starts found one mode. At K > 2 the symmetry is not exact and the rate measures
    how far the fit depends on its start (mode capture).

    An item is a task with at least one vote on one of its candidates and at least two
    candidates (elsewhere nothing can switch). Decisions are argmaxes with exact ties broken at
    random from ``seed``, the same draw for both fits, so a task tied the same way in both fits
    never counts as a switch. Arguments otherwise as :func:`dawid_skene_em` (``votes`` [T, I, K],
    ``mask`` [T, K]).
    """
    if (not isinstance(inits, (tuple, list)) or len(inits) != 2
            or not all(isinstance(i, str) and i in INITS for i in inits) or inits[0] == inits[1]):
        raise DataError(f"inits must be two different initializations of {INITS}, got "
                        f"{inits!r}", field="inits")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DataError(f"seed must be an integer, got {seed!r}", field="seed")
    checked, m = check_dense_votes(votes, mask, dtype)
    ent = votes_from_dense(checked, m, dtype=dtype)
    fits = [dawid_skene_votes(ent, init, n_iter, tol, smoothing, model=model, prior=prior)
            for init in inits]
    key = jax.random.key(int(seed))
    decisions = np.stack([np.asarray(decide(key, f.log_posterior, m).index) for f in fits])
    items = (checked.sum((1, 2)) > 0) & (m.sum(1) >= 2)
    disagree = items & (decisions[0] != decisions[1])
    n = int(items.sum())
    return DSSwitch(float(disagree.sum()) / n if n else None, n, items, disagree, decisions,
                    tuple(float(f.log_likelihood) for f in fits), tuple(inits))
