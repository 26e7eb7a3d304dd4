"""Bayesian one-coin Dawid–Skene, MACE and GLAD, the true class marginalized by hand.

Three annotator models of increasing structure, each a :class:`~models.inference.ModelSpec`
(:data:`ONE_COIN_SPEC`, :data:`MACE_SPEC`, :data:`GLAD_SPEC`) for :mod:`models.inference` (NUTS,
SVI, MAP, per-task log-likelihoods, class posteriors). K classes, W workers, T tasks, P labels
in the sparse layout ``task, worker, label`` ([P] ints; a worker may label a task several times;
a task may have no label). In all three the true class ``z_t`` is never sampled: each model sums
it out by hand,

    log p(y_t | params) = logsumexp_k [ log pi_k + sum_{labels p of t} log P(y_p | z_t = k) ]

and adds ``numpyro.factor("log_lik", ll)`` with ``ll`` of shape [T] (the pointwise
log-likelihoods LOO needs; ``draws_log_lik`` recomputes them outside the model). A task with a
known (gold) class g contributes only its joint term ``log pi_g + sum_p log P(y_p | z_t = g)``
and its class posterior is one-hot on g (gold clamp).

**1. One-coin Dawid–Skene** (:func:`one_coin_model`; data :class:`~models.dawid_skene.DSData`
from :func:`prepare` = :func:`models.dawid_skene.prepare`)::

    pi          ~ Dirichlet(alpha_pi * 1_K)                             class prior        [K]
    theta_w     ~ Beta(a, b)                                            worker accuracy    [W]
    C[w, k, l]  = theta_w if l == k else (1 - theta_w) / (K - 1)        confusion          [W, K, K]
    z_t ~ Categorical(pi),   y_p | z_{t_p} ~ Categorical(C[w_p, z_{t_p}, :])

The confusion tensor is built from ``theta`` and handed to the Dawid–Skene pattern code
(:func:`~models.dawid_skene.pattern_joint`: tasks with identical answer patterns share one U × K
term). Default
``Beta(4, 1)``: mean 0.8, P(theta < 1/2) = 1/16, i.e. workers are assumed better than chance but
an adversary with a few dozen labels is still found (a likelihood of tens of nats beats the prior's
log-ratio ``3 log(0.8 / 0.1) ≈ 6``); at K = 2 it is exactly the diagonal marginal of the
Dawid–Skene prior ``DSPrior()`` (rows ``Dirichlet(4, 1)``), so the two models differ in structure,
not in prior strength. It also weights the mirror mode of K = 2 (all ``theta -> 1 - theta``,
classes swapped: the only label switching a one-coin model has) down, and the start ``theta =
0.7`` (:func:`one_coin_init`) sits in the better-than-chance mode.

**2. MACE** (Hovy et al. 2013; :func:`mace_model`; data ``DSData``)::

    theta_w     ~ Beta(a, b)                     competence = P(worker w is not spamming)  [W]
    xi_w        ~ Dirichlet(gamma * 1_K)         spam strategy                             [W, K]
    z_t         ~ Categorical(1_K / K)           (uniform truth, as in MACE)
    s_p         ~ Bernoulli(1 - theta_{w_p});    y_p = z_{t_p} if s_p = 0 else y_p ~ Categorical(xi_{w_p})

The spam indicator ``s_p`` is summed out by hand too:
``C[w, k, l] = theta_w 1[l == k] + (1 - theta_w) xi_w[l]``, then the same pattern code. Defaults
``Beta(2, 1)`` (mean 2/3: workers mostly try, yet a spammer, theta near 0, costs the prior only
``log(2 / (2 * 0.05)) ≈ 3`` nats at theta = 0.05 — weaker than the one-coin prior because
competence is not accuracy and finding spammers is MACE's job) and ``gamma = 2`` (pulls a
strategy that is seen only through a worker's few spam labels toward uniform and keeps it off
the simplex's faces, where MAP would otherwise push it). ``a, b >= 1`` keep the prior density,
hence the MAP objective, bounded (MACE's VB ``Beta(0.5, 0.5)`` is unbounded at 0 and 1). Start:
``theta = 0.7``, uniform ``xi`` (:func:`mace_init`).

**3. GLAD** (Whitehill et al. 2009; :func:`glad_model`; data :class:`GLADData` from
:func:`prepare_glad`)::

    alpha_w     ~ Normal(mu_a, s_a)              worker ability                            [W]
    log_beta_t  ~ Normal(0, s_b),  beta_t = exp(log_beta_t)   inverse task difficulty      [T]
    z_t         ~ Categorical(1_K / K)           (uniform truth, as in GLAD)
    P(y_p = z_t | z_t) = sigmoid(alpha_{w_p} beta_{t_p});  each wrong label (1 - sigmoid) / (K - 1)

``beta_t`` is per task, so two tasks with the same answers do not share a likelihood term and
answer patterns do not apply: the model works on the vote cells, ``term[e, k] = w_e log
sigmoid(a b)`` if ``y_e == k`` else ``w_e log((1 - sigmoid(a b)) / (K - 1))`` [E, K] (``w_e``
the cell's votes), summed into tasks by ``jax.ops.segment_sum``. Hence its own :class:`GLADData`
(the crowd's :class:`~bda_jax.crowd.CrowdVotes` plus gold) — ``DSData`` keeps only the
deduplicated patterns.
Default ``mu_a = 1, s_a = 1``: a positive mean says "better than chance" (``sigmoid(1) = 0.73``
at ``beta = 1``) and breaks the sign symmetry ``alpha -> -alpha`` (at K = 2 with swapped classes
the likelihood is unchanged), while ``alpha < 0`` (adversaries) keeps prior mass 0.16; ``s_b =
1`` lets difficulties range over a factor ~e either way. Start ``alpha = 1, log_beta = 0``
(:func:`glad_init`).

>>> import numpy as np
>>> task, worker, label = np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), np.array([2, 2, 1, 0])
>>> d = prepare(task, worker, label, K=3)
>>> g = prepare_glad(task, worker, label, K=3)
>>> [s.log_lik(s.init(d), d).shape for s in (ONE_COIN_SPEC, MACE_SPEC)]
[(3,), (3,)]
>>> GLAD_SPEC.class_log_post(glad_init(g), g).shape
(3, 3)
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bda_jax.crowd import CrowdVotes, check_gold, votes_from_labels
from .dawid_skene import DSData, pattern_joint, pattern_log_lik, prepare, task_class_log_post
from .inference import ModelSpec, jit_over_data

__all__ = [
    "DSData", "prepare",
    "OneCoinPrior", "one_coin_conf", "one_coin_model", "one_coin_log_lik",
    "one_coin_class_log_post", "one_coin_init", "ONE_COIN_SPEC",
    "MACEPrior", "mace_conf", "mace_model", "mace_log_lik", "mace_class_log_post", "mace_init",
    "MACE_SPEC",
    "GLADData", "GLADPrior", "prepare_glad", "prepare_glad_votes", "glad_model", "glad_joint",
    "glad_log_lik",
    "glad_class_log_post", "glad_init", "GLAD_SPEC",
]


def _uniform(K):
    return jnp.full(K, 1.0 / K)


# --------------------------------------------------------------------------- one-coin


class OneCoinPrior(NamedTuple):
    """``pi ~ Dirichlet(alpha_pi)``, ``theta_w ~ Beta(a, b)`` (why 4, 1: module docstring)."""
    alpha_pi: float = 1.0
    a: float = 4.0
    b: float = 1.0


def one_coin_conf(theta, K: int):
    """One-coin confusion [W, K, K] from accuracies ``theta`` [W]: ``theta`` on the diagonal,
    ``(1 - theta) / (K - 1)`` elsewhere (K >= 2)."""
    th = theta[:, None, None]
    off = (1.0 - th) / (K - 1)
    return off + (th - off) * jnp.eye(K)


def _one_coin_ds_params(params, data: DSData):
    return {"pi": params["pi"], "conf": one_coin_conf(params["theta"], data.K)}


@jit_over_data
def one_coin_log_lik(params, data: DSData):
    """Per-task marginal log-likelihood [T] at ``{"pi": [K], "theta": [W]}`` (gold: joint)."""
    p = _one_coin_ds_params(params, data)
    return pattern_log_lik(pattern_joint(p["pi"], p["conf"], data), data)[data.task_pat]


@jit_over_data
def one_coin_class_log_post(params, data: DSData):
    """Per-task log posterior over the class [T, K] (gold tasks: one-hot)."""
    return task_class_log_post(_one_coin_ds_params(params, data), data)


def one_coin_model(data: DSData, prior: OneCoinPrior = OneCoinPrior()):
    """Bayesian one-coin Dawid–Skene (module docstring, 1.): sites ``pi`` [K], ``theta`` [W] and
    the factor ``log_lik`` [T]."""
    K, W = data.K, data.n_workers
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(K, prior.alpha_pi)))
    theta = numpyro.sample("theta", dist.Beta(prior.a, prior.b).expand([W]).to_event(1))
    numpyro.factor("log_lik", one_coin_log_lik({"pi": pi, "theta": theta}, data))


def one_coin_init(data: DSData, acc: float = 0.7):
    """Better-than-chance start: uniform ``pi``, every ``theta_w = acc``."""
    return {"pi": _uniform(data.K), "theta": jnp.full(data.n_workers, acc)}


ONE_COIN_SPEC = ModelSpec("one_coin", one_coin_model, one_coin_init, one_coin_log_lik,
                          one_coin_class_log_post, OneCoinPrior())
"""The one-coin model for :mod:`models.inference`."""


# --------------------------------------------------------------------------- MACE


class MACEPrior(NamedTuple):
    """``theta_w ~ Beta(a, b)`` (competence), ``xi_w ~ Dirichlet(gamma 1_K)`` (spam strategy)."""
    a: float = 2.0
    b: float = 1.0
    gamma: float = 2.0


def mace_conf(theta, xi):
    """MACE confusion with the spam indicator summed out, [W, K, K]:
    ``C[w, k, l] = theta_w 1[l == k] + (1 - theta_w) xi_w[l]`` (``theta`` [W], ``xi`` [W, K])."""
    K = xi.shape[-1]
    th = theta[:, None, None]
    return th * jnp.eye(K) + (1.0 - th) * xi[:, None, :]


def _mace_joint(params, data: DSData):
    return pattern_joint(_uniform(data.K), mace_conf(params["theta"], params["xi"]), data)


@jit_over_data
def mace_log_lik(params, data: DSData):
    """Per-task marginal log-likelihood [T] at ``{"theta": [W], "xi": [W, K]}`` (gold: joint)."""
    return pattern_log_lik(_mace_joint(params, data), data)[data.task_pat]


@jit_over_data
def mace_class_log_post(params, data: DSData):
    """Per-task log posterior over the class [T, K] (gold tasks: one-hot)."""
    conf = mace_conf(params["theta"], params["xi"])
    return task_class_log_post({"pi": _uniform(data.K), "conf": conf}, data)


def mace_model(data: DSData, prior: MACEPrior = MACEPrior()):
    """Bayesian MACE (module docstring, 2.): sites ``theta`` [W], ``xi`` [W, K] and the factor
    ``log_lik`` [T]."""
    K, W = data.K, data.n_workers
    theta = numpyro.sample("theta", dist.Beta(prior.a, prior.b).expand([W]).to_event(1))
    xi = numpyro.sample("xi", dist.Dirichlet(jnp.full((W, K), prior.gamma)).to_event(1))
    numpyro.factor("log_lik", mace_log_lik({"theta": theta, "xi": xi}, data))


def mace_init(data: DSData, competence: float = 0.7):
    """Better-than-chance start: every ``theta_w = competence``, uniform strategies."""
    W, K = data.n_workers, data.K
    return {"theta": jnp.full(W, competence), "xi": jnp.full((W, K), 1.0 / K)}


MACE_SPEC = ModelSpec("mace", mace_model, mace_init, mace_log_lik, mace_class_log_post,
                      MACEPrior())
"""The MACE model for :mod:`models.inference`."""


# --------------------------------------------------------------------------- GLAD


class GLADData(NamedTuple):
    """GLAD's data (a pytree; the sizes are static through the shapes): ``votes``, the crowd's
    :class:`~bda_jax.crowd.CrowdVotes` (cells sorted by task), and ``gold`` [T] int32 (-1 =
    unknown)."""
    votes: CrowdVotes
    gold: jax.Array

    @property
    def n_tasks(self) -> int:
        return self.votes.shape[0]

    @property
    def n_workers(self) -> int:
        return self.votes.shape[1]

    @property
    def K(self) -> int:
        return self.votes.shape[2]


class GLADPrior(NamedTuple):
    """``alpha_w ~ Normal(mu_a, s_a)``, ``log_beta_t ~ Normal(0, s_b)`` (module docstring)."""
    mu_a: float = 1.0
    s_a: float = 1.0
    s_b: float = 1.0


def prepare_glad(task, worker, label, K=None, n_tasks=None, n_workers=None,
                 gold=None) -> GLADData:
    """Build :class:`GLADData` from the sparse layout (same arguments and checks as
    :func:`prepare`)."""
    return prepare_glad_votes(votes_from_labels(task, worker, label, n_tasks, n_workers, K), gold)


def prepare_glad_votes(votes: CrowdVotes, gold=None) -> GLADData:
    """Build :class:`GLADData` from a crowd's :class:`~bda_jax.crowd.CrowdVotes` and ``gold``
    ([T], -1 = unknown)."""
    T, _, K = votes.shape
    return GLADData(votes, jnp.asarray(check_gold(gold, np.ones((T, K), bool))))


def glad_joint(params, data: GLADData):
    """``log p(z_t = k, y_t)`` [T, K] at ``{"alpha": [W], "log_beta": [T]}`` (uniform truth)."""
    K, v = data.K, data.votes
    x = params["alpha"][v.agent] * jnp.exp(params["log_beta"])[v.task]            # [E]
    right = jax.nn.log_sigmoid(x)                                   # log sigmoid(a b)
    wrong = jax.nn.log_sigmoid(-x) - jnp.log(K - 1.0)               # log((1 - sigmoid) / (K-1))
    hit = v.label[:, None] == jnp.arange(K)[None, :]
    terms = jnp.where(hit, right[:, None], wrong[:, None]) * v.weight[:, None]    # [E, K]
    s = jax.ops.segment_sum(terms, v.task, num_segments=data.n_tasks, indices_are_sorted=True)
    return s - jnp.log(float(K))


def _clamped_log_lik(joint, gold):
    marg = jax.nn.logsumexp(joint, axis=-1)
    clamp = jnp.take_along_axis(joint, jnp.clip(gold, 0)[:, None], axis=-1)[:, 0]
    return jnp.where(gold >= 0, clamp, marg)


@jit_over_data
def glad_log_lik(params, data: GLADData):
    """Per-task marginal log-likelihood [T] (gold tasks: joint term of their gold class)."""
    return _clamped_log_lik(glad_joint(params, data), data.gold)


@jit_over_data
def glad_class_log_post(params, data: GLADData):
    """Per-task log posterior over the class [T, K] (gold tasks: one-hot)."""
    joint = glad_joint(params, data)
    lp = joint - jax.nn.logsumexp(joint, axis=-1, keepdims=True)
    onehot = jnp.arange(data.K)[None, :] == data.gold[:, None]
    return jnp.where(data.gold[:, None] >= 0, jnp.where(onehot, 0.0, -jnp.inf), lp)


def glad_model(data: GLADData, prior: GLADPrior = GLADPrior()):
    """Bayesian GLAD (module docstring, 3.): sites ``alpha`` [W], ``log_beta`` [T] and the factor
    ``log_lik`` [T]."""
    alpha = numpyro.sample("alpha", dist.Normal(prior.mu_a, prior.s_a)
                           .expand([data.n_workers]).to_event(1))
    log_beta = numpyro.sample("log_beta", dist.Normal(0.0, prior.s_b)
                              .expand([data.n_tasks]).to_event(1))
    numpyro.factor("log_lik", glad_log_lik({"alpha": alpha, "log_beta": log_beta}, data))


def glad_init(data: GLADData, ability: float = 1.0):
    """Better-than-chance start: every ``alpha_w = ability`` (> 0), every ``log_beta_t = 0``."""
    return {"alpha": jnp.full(data.n_workers, ability), "log_beta": jnp.zeros(data.n_tasks)}


GLAD_SPEC = ModelSpec("glad", glad_model, glad_init, glad_log_lik, glad_class_log_post,
                      GLADPrior())
"""The GLAD model for :mod:`models.inference`."""
