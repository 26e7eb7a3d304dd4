"""Bayesian Dawid–Skene with the true class marginalized by hand.

Generative story (Dawid & Skene 1979, Bayesian form), K classes, W workers, T tasks::

    pi                ~ Dirichlet(alpha_pi * 1_K)                         class prior      [K]
    C[w, k, :]        ~ Dirichlet(beta_off * 1_K + (beta_diag - beta_off) * e_k)
                                                                          confusion rows   [W, K, K]
    z_t               ~ Categorical(pi)                                   true class of task t
    y_p | z_{t_p}     ~ Categorical(C[w_p, z_{t_p}, :])                   label p of task t_p by worker w_p

``C[w, true, observed]``. The diagonal-dominant concentration (``beta_diag > beta_off``) together
with a diagonal-dominant initialization pins the labelling of the classes (no label switching).

z_t is never sampled: each task's marginal likelihood is, with ``n_t[w, l]`` the number of times
worker w gave label l on task t (sufficient statistics: the vote cells of
:class:`~bda_jax.crowd.CrowdVotes`, built from a sparse ``task/worker/label`` layout of P labels
— never a dense T × W matrix),

    log p(y_t | pi, C) = logsumexp_k [ log pi_k + sum_{w,l} n_t[w, l] log C[w, k, l] ]

and a task with a known (gold) class g contributes the joint term ``log pi_g + sum n_t log C[:, g, :]``
(gold clamp). The model adds ``numpyro.factor("log_lik", ll)`` with ``ll`` of shape [T], so the
per-task marginal log-likelihoods are the pointwise log-likelihoods LOO needs.

Speed: tasks with identical answer patterns (same multiset of (worker, label) pairs and same gold)
have identical likelihood terms, so :func:`prepare_votes` groups them ("patterns", U ≤ T of them)
and the model evaluates U × K terms, then gathers them back to the T tasks.

Inference: :data:`SPEC` describes the model to :mod:`models.inference` (NUTS, SVI with an
autoguide and optax, MAP; per-task log-likelihoods and class posteriors over the draws).

>>> import numpy as np, jax
>>> data = prepare(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([2, 2, 1]), K=3)
>>> (data.n_tasks, data.n_workers, data.K)
(2, 2, 3)
>>> ll = task_log_lik(default_init(data), data)
>>> ll.shape
(2,)
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bda_jax.crowd import CrowdVotes, check_gold, votes_from_labels
from .inference import ModelSpec, jit_over_data

__all__ = [
    "DSData", "DSPrior", "prepare", "prepare_votes", "pattern_joint", "pattern_log_lik",
    "ds_model", "task_log_lik", "task_class_log_post", "default_init", "SPEC",
]


class DSData(NamedTuple):
    """Sufficient statistics over distinct answer patterns (a pytree of arrays + static ints).

    pat_idx, pair, count: [Q] — pattern u = pat_idx holds ``count`` labels of pair
    ``worker * K + label``; pat_gold: [U] gold class of the pattern or -1; task_pat: [T] the
    pattern of each task."""
    pat_idx: jax.Array
    pair: jax.Array
    count: jax.Array
    pat_gold: jax.Array
    task_pat: jax.Array
    n_tasks: int
    n_workers: int
    K: int
    n_patterns: int


class DSPrior(NamedTuple):
    alpha_pi: float = 1.0
    beta_diag: float = 4.0
    beta_off: float = 1.0


def prepare(task, worker, label, K=None, n_tasks=None, n_workers=None, gold=None) -> DSData:
    """Build :class:`DSData` from the sparse layout ``task, worker, label`` ([P] ints; sizes
    default to one more than the largest code): :func:`bda_jax.crowd.votes_from_labels`, then
    :func:`prepare_votes`. ``gold`` (optional, [T] ints, -1 = unknown) clamps tasks to their
    known class. Bad input raises :class:`~bda_jax.DataError` naming the field."""
    return prepare_votes(votes_from_labels(task, worker, label, n_tasks, n_workers, K), gold)


def prepare_votes(votes: CrowdVotes, gold=None) -> DSData:
    """Build :class:`DSData` from a crowd's :class:`~bda_jax.crowd.CrowdVotes` (every task's
    classes are the votes' K slots) and ``gold`` ([T], -1 = unknown)."""
    T, W, K = votes.shape
    gold = check_gold(gold, np.ones((T, K), bool)).astype(np.int64)
    keep = np.asarray(votes.weight) > 0
    c_task = np.asarray(votes.task, np.int64)[keep]
    c_pair = (np.asarray(votes.agent, np.int64) * K + np.asarray(votes.label))[keep]
    cnt = np.rint(np.asarray(votes.weight, np.float64)[keep]).astype(np.int64)
    # canonical per-task key: the sorted list of (pair, count), padded, plus gold
    deg = np.bincount(c_task, minlength=T)
    width = int(deg.max()) if deg.size else 0
    start = np.concatenate([[0], np.cumsum(deg)[:-1]])
    slot = np.arange(c_task.size) - start[c_task]
    key = np.full((T, 2 * width + 1), -1, np.int64)
    key[c_task, 2 * slot] = c_pair
    key[c_task, 2 * slot + 1] = cnt
    key[:, -1] = gold
    uniq, first, task_pat = np.unique(key, axis=0, return_index=True, return_inverse=True)
    task_pat = task_pat.reshape(-1)
    U = uniq.shape[0]
    rows = uniq[:, : 2 * width].reshape(U, width, 2)
    valid = rows[..., 0] >= 0
    pat_idx = np.broadcast_to(np.arange(U)[:, None], (U, width))[valid]
    return DSData(
        pat_idx=jnp.asarray(pat_idx, jnp.int32),
        pair=jnp.asarray(rows[..., 0][valid], jnp.int32),
        count=jnp.asarray(rows[..., 1][valid], jnp.float32),
        pat_gold=jnp.asarray(uniq[:, -1], jnp.int32),
        task_pat=jnp.asarray(task_pat, jnp.int32),
        n_tasks=T, n_workers=W, K=K, n_patterns=U,
    )


@jit_over_data
def pattern_joint(pi, conf, data: DSData):
    """``log pi_k + sum_{w,l} n_u[w,l] log C[w,k,l]`` per pattern: [U, K] (``pi`` [K], ``conf``
    [W, K, K] rows = true class); the one-coin and MACE models of :mod:`.annotators` pass their
    implied confusion."""
    K = data.K
    logc = jnp.log(conf)                                   # [W, K_true, K_obs]
    table = jnp.transpose(logc, (0, 2, 1)).reshape(-1, K)  # [W*K_obs, K_true]
    terms = table[data.pair] * data.count[:, None]         # [Q, K]
    s = jax.ops.segment_sum(terms, data.pat_idx, num_segments=data.n_patterns,
                            indices_are_sorted=True)
    return jnp.log(pi) + s


@jit_over_data
def pattern_log_lik(joint, data: DSData):
    """Per-pattern log-likelihood [U] from :func:`pattern_joint`: the marginal over the class,
    or the joint term of the gold class for gold patterns."""
    marg = jax.nn.logsumexp(joint, axis=-1)
    g = jnp.clip(data.pat_gold, 0)
    clamp = jnp.take_along_axis(joint, g[:, None], axis=-1)[:, 0]
    return jnp.where(data.pat_gold >= 0, clamp, marg)      # [U]


@jit_over_data
def task_log_lik(params, data: DSData):
    """Per-task marginal log-likelihood [T] (gold tasks: joint term of their gold class)."""
    joint = pattern_joint(params["pi"], params["conf"], data)
    return pattern_log_lik(joint, data)[data.task_pat]


@jit_over_data
def task_class_log_post(params, data: DSData):
    """Per-task log posterior over the class [T, K] (gold tasks: one-hot)."""
    joint = pattern_joint(params["pi"], params["conf"], data)
    lp = joint - jax.nn.logsumexp(joint, axis=-1, keepdims=True)
    onehot = jax.nn.one_hot(jnp.clip(data.pat_gold, 0), data.K)
    lp = jnp.where(data.pat_gold[:, None] >= 0, jnp.where(onehot > 0, 0.0, -jnp.inf), lp)
    return lp[data.task_pat]


def ds_model(data: DSData, prior: DSPrior = DSPrior()):
    """The NumPyro model (see the module docstring); sites ``pi`` [K], ``conf`` [W, K, K] and the
    factor ``log_lik`` [T]."""
    K, W = data.K, data.n_workers
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(K, prior.alpha_pi)))
    conc = prior.beta_off + (prior.beta_diag - prior.beta_off) * jnp.eye(K)
    conf = numpyro.sample("conf", dist.Dirichlet(jnp.broadcast_to(conc, (W, K, K))).to_event(1))
    numpyro.factor("log_lik", task_log_lik({"pi": pi, "conf": conf}, data))


def default_init(data: DSData, acc: float = 0.7):
    """Diagonal-dominant starting point: uniform pi, C = acc on the diagonal."""
    K, W = data.K, data.n_workers
    off = (1.0 - acc) / (K - 1)
    conf = jnp.full((W, K, K), off) + (acc - off) * jnp.eye(K)
    return {"pi": jnp.full(K, 1.0 / K), "conf": conf}


SPEC = ModelSpec("dawid_skene", ds_model, default_init, task_log_lik, task_class_log_post,
                 DSPrior())
"""The model for :mod:`models.inference` (``run_nuts``, ``fit_svi``, ``fit_map``, ...)."""
