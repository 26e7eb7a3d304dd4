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
worker w gave label l on task t (sufficient statistics, built from a sparse ``task/worker/label``
layout of P labels — never a dense T × W matrix),

    log p(y_t | pi, C) = logsumexp_k [ log pi_k + sum_{w,l} n_t[w, l] log C[w, k, l] ]

and a task with a known (gold) class g contributes the joint term ``log pi_g + sum n_t log C[:, g, :]``
(gold clamp). The model adds ``numpyro.factor("log_lik", ll)`` with ``ll`` of shape [T], so the
per-task marginal log-likelihoods are the pointwise log-likelihoods LOO needs.

Speed: tasks with identical answer patterns (same multiset of (worker, label) pairs and same gold)
have identical likelihood terms, so :func:`prepare` groups them ("patterns", U ≤ T of them) and the
model evaluates U × K terms, then gathers them back to the T tasks.

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

from .inference import ModelSpec

__all__ = [
    "DSData", "DSPrior", "check_sparse", "prepare", "ds_model", "task_log_lik", "task_class_log_post",
    "default_init", "SPEC",
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


def check_sparse(task, worker, label, K=None, n_tasks=None, n_workers=None, gold=None):
    """Validate the sparse layout ``task, worker, label`` ([P] ints) and ``gold`` ([T], -1 =
    unknown); returns int64 arrays ``task, worker, label, gold`` and the sizes ``K, T, W``
    (inferred from the data where not given). Raises ``ValueError`` naming what is wrong."""
    task = np.asarray(task, np.int64)
    worker = np.asarray(worker, np.int64)
    label = np.asarray(label, np.int64)
    if not (task.shape == worker.shape == label.shape) or task.ndim != 1:
        raise ValueError("task, worker, label must be 1-D arrays of equal length")
    K = int(label.max()) + 1 if K is None else int(K)
    T = int(task.max()) + 1 if n_tasks is None else int(n_tasks)
    W = int(worker.max()) + 1 if n_workers is None else int(n_workers)
    if K < 2:
        raise ValueError("need K >= 2 classes")
    if task.size and (label.min() < 0 or label.max() >= K or worker.min() < 0
                      or worker.max() >= W or task.min() < 0 or task.max() >= T):
        raise ValueError("label must lie in [0, K), worker in [0, n_workers), task in "
                         "[0, n_tasks)")
    gold = np.full(T, -1, np.int64) if gold is None else np.asarray(gold, np.int64)
    if gold.shape != (T,) or (gold < -1).any() or (gold >= K).any():
        raise ValueError(f"gold must have shape ({T},) with values in [-1, K)")
    return task, worker, label, gold, K, T, W


def prepare(task, worker, label, K=None, n_tasks=None, n_workers=None, gold=None) -> DSData:
    """Build :class:`DSData` from the sparse layout ``task, worker, label`` ([P] ints).

    ``gold`` (optional, [T] ints, -1 = unknown) clamps tasks to their known class."""
    task, worker, label, gold, K, T, W = check_sparse(task, worker, label, K, n_tasks,
                                                      n_workers, gold)
    # distinct (task, pair) cells with counts
    pair = worker * K + label
    cell, cnt = np.unique(task * (W * K) + pair, return_counts=True)
    c_task, c_pair = cell // (W * K), cell % (W * K)
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


def _pattern_joint(pi, conf, data: DSData):
    """log pi_k + sum_{w,l} n_u[w,l] log C[w,k,l] per pattern: [U, K]."""
    K = data.K
    logc = jnp.log(conf)                                   # [W, K_true, K_obs]
    table = jnp.transpose(logc, (0, 2, 1)).reshape(-1, K)  # [W*K_obs, K_true]
    terms = table[data.pair] * data.count[:, None]         # [Q, K]
    s = jax.ops.segment_sum(terms, data.pat_idx, num_segments=data.n_patterns,
                            indices_are_sorted=True)
    return jnp.log(pi) + s


def _pattern_log_lik(joint, data: DSData):
    marg = jax.nn.logsumexp(joint, axis=-1)
    g = jnp.clip(data.pat_gold, 0)
    clamp = jnp.take_along_axis(joint, g[:, None], axis=-1)[:, 0]
    return jnp.where(data.pat_gold >= 0, clamp, marg)      # [U]


def task_log_lik(params, data: DSData):
    """Per-task marginal log-likelihood [T] (gold tasks: joint term of their gold class)."""
    joint = _pattern_joint(params["pi"], params["conf"], data)
    return _pattern_log_lik(joint, data)[data.task_pat]


def task_class_log_post(params, data: DSData):
    """Per-task log posterior over the class [T, K] (gold tasks: one-hot)."""
    joint = _pattern_joint(params["pi"], params["conf"], data)
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
    joint = _pattern_joint(pi, conf, data)
    numpyro.factor("log_lik", _pattern_log_lik(joint, data)[data.task_pat])


def default_init(data: DSData, acc: float = 0.7):
    """Diagonal-dominant starting point: uniform pi, C = acc on the diagonal."""
    K, W = data.K, data.n_workers
    off = (1.0 - acc) / (K - 1)
    conf = jnp.full((W, K, K), off) + (acc - off) * jnp.eye(K)
    return {"pi": jnp.full(K, 1.0 / K), "conf": conf}


SPEC = ModelSpec("dawid_skene", ds_model, default_init, task_log_lik, task_class_log_post,
                 DSPrior())
"""The model for :mod:`models.inference` (``run_nuts``, ``fit_svi``, ``fit_map``, ...)."""
