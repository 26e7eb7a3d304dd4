"""Hierarchical reliability: BDA's one-coin as a generative model with a learned population prior.

BDA's one-coin kernel ([BDA] Eqs. 1–2) integrates each agent's reliability θ_i *per task* under
a finite-strength Beta prior whose strength s is a CV-selected constant; at K = 2 that caps the
posterior ([BDA] Theorem 2c: 0.9987 for Beta(8.8, 7.2), θ* = 0.8, I = 3). [BDA] Remark 2 names
the fix and leaves it as future work: one global θ_i per seat whose posterior strength grows with every labeled
move. This module is that model (docs/models.md ceiling example: tests/models/test_hierarchical.py).

Generative story over BDA's typed-move counts (docs/trace-format.md: ``N[t,i]`` informative moves,
``e[t,i,g]`` positive endorsements, ``c[t,i,g]`` moves consistent with "truth is g"), G seat
groups (one group, or one per move force when counts are tallied with ``seat_key="agent-force"``:
BDA's propose / concede / challenge cells, each seat its own reliability)::

    μ_j  ~ Beta(mu_a, mu_b)                       population mean reliability of group j   [G]
    κ_j  ~ LogNormal(log kappa_loc, kappa_scale)  population strength of group j (learned)  [G]
    θ_i  ~ Beta(μ_{j(i)} κ_{j(i)}, (1 − μ_{j(i)}) κ_{j(i)})   reliability of seat i          [I]
    g_t  ~ π0 (uniform over the task's K_t candidates)
    each informative move of seat i on task t is consistent with g_t with probability θ_i; an
    inconsistent positive endorsement names one of the K_t − 1 wrong candidates uniformly.

so, with ``d = N − c``, the task likelihood given g is (Eq. 1 before the Beta integral)

    log p(moves_t | g, θ) = Σ_i c[t,i,g] log θ_i + d[t,i,g] log(1 − θ_i) − (N[t,i] − e[t,i,g]) log(K_t − 1)

and g_t is summed out by hand (logsumexp over the task's candidates); a labeled task contributes
its gold term (gold clamp). A task whose gold is given but is not a candidate (``gold_missing``)
contributes the "truth outside the list" term: its consistent moves are its rejections
(``bda_jax.fitting.gold_consistent``) and each positive endorsement names one of the K_t listed
candidates uniformly (factor K_t^{−Σ_g e}; the paper leaves this case to scoring only — our
reading). With μ, κ held fixed and only labeled tasks besides a test task, θ_i is conjugate and
the test posterior is Eq. 1 with α_i = μκ + Σ c_i(g*), β_i = (1 − μ)κ + Σ d_i(g*): the finite
construction is this model with the population strength frozen and the calibration counts moved
into the prior.

Variants for model comparison (one model function, its ``kind`` argument): ``"hierarchical"``
(above), ``"per-agent"`` (θ_i ~ Beta(a, b) independently, fixed strength) and ``"shared"``
(one θ for every seat of a group: θ_i = μ_{j(i)}).

Shapes: T tasks, I seats, K = K_max candidate slots; every field of :class:`ReliabilityData` is an
array (no static ints), so the data may be a traced argument (``MCMC(..., jit_model_args=True)``).

>>> import numpy as np
>>> c = np.array([[[3, 1]]]); e = c.copy(); N = np.array([[4]])
>>> data = reliability_data_from_arrays(N, e, c, mask=np.ones((1, 2), bool))
>>> ll = task_log_lik({"theta": np.array([0.75]), "mu": np.array([0.7]), "kappa": np.array([10.])}, data)
>>> round(float(ll[0]), 4) == round(float(np.log(0.5 * 0.75**3 * 0.25 + 0.5 * 0.25**3 * 0.75)), 4)
True
"""
from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from .inference import ModelSpec, jit_over_data

__all__ = ["ReliabilityData", "ReliabilityPrior", "reliability_data", "reliability_data_from_arrays",
           "reliability_model", "task_log_lik", "task_class_log_post", "default_init",
           "replicate_endorsements", "KINDS", "HIERARCHICAL_SPEC", "PER_AGENT_SPEC", "SHARED_SPEC", "spec_for"]


class ReliabilityData(NamedTuple):
    """Arrays the model reads (a pytree; float counts so jit sees one dtype).

    c, e: [T, I, K]; N: [T, I]; mask: [T, K] bool; log_km1: [T] log(K_t − 1); log_k: [T] log K_t;
    gold: [T] (−1 unlabeled); gold_out: [T] bool (gold given, not a candidate); out_c: [T, I]
    consistent moves under "truth outside the list"; group: [I, G] one-hot seat groups."""
    c: jax.Array
    e: jax.Array
    N: jax.Array
    mask: jax.Array
    log_km1: jax.Array
    log_k: jax.Array
    gold: jax.Array
    gold_out: jax.Array
    out_c: jax.Array
    group: jax.Array


class ReliabilityPrior(NamedTuple):
    """Hyperparameters (all floats, so they may be traced model arguments).

    Defaults: μ ~ Beta(2, 2) (weak, symmetric: orientation comes from the data and the
    better-than-chance start), κ ~ LogNormal(log 10, 1.5) (strengths from ~0.5 to ~200 within
    2 sd), per-agent θ ~ Beta(2, 2)."""
    mu_a: float = 2.0
    mu_b: float = 2.0
    kappa_loc: float = 10.0
    kappa_scale: float = 1.5
    a: float = 2.0
    b: float = 2.0


def reliability_data_from_arrays(N, e, c, mask, gold=None, gold_missing=None, groups=None
                                 ) -> ReliabilityData:
    """Build :class:`ReliabilityData` from count arrays (shapes as in :class:`bda_jax.Counts`).

    ``groups``: [I] group index of each seat (default: one group)."""
    c = jnp.asarray(c, jnp.float32)
    e = jnp.asarray(e, jnp.float32)
    N = jnp.asarray(N, jnp.float32)
    mask = jnp.asarray(mask, bool)
    T, I, K = c.shape
    if e.shape != c.shape or N.shape != (T, I) or mask.shape != (T, K):
        raise ValueError(f"shapes: c {c.shape}, e {e.shape}, N {N.shape}, mask {mask.shape}")
    Kt = mask.sum(-1).astype(jnp.float32)
    gold = jnp.full(T, -1, jnp.int32) if gold is None else jnp.asarray(gold, jnp.int32)
    gold_out = (jnp.zeros(T, bool) if gold_missing is None else jnp.asarray(gold_missing, bool))
    groups = np.zeros(I, np.int64) if groups is None else np.asarray(groups, np.int64)
    if groups.shape != (I,) or groups.min() < 0:
        raise ValueError(f"groups must be [I] = [{I}] non-negative ints")
    return ReliabilityData(
        c=c, e=e, N=N, mask=mask, log_km1=jnp.log(jnp.maximum(Kt - 1, 1.0)), log_k=jnp.log(Kt),
        gold=gold, gold_out=gold_out, out_c=N - e.sum(-1),
        group=jnp.asarray(np.eye(groups.max() + 1, dtype=np.float32)[groups]))


def reliability_data(counts, groups: str | Sequence[int] | None = None) -> ReliabilityData:
    """From :class:`bda_jax.Counts` (dense layout). ``groups``: ``None`` (one population),
    ``"force"`` (seats tallied with ``seat_key="agent-force"`` or ``"force"``: one population per
    move force, read after the last ``:`` of the seat name) or [I] group indices."""
    if isinstance(groups, str):
        if groups != "force" or counts.agents is None:
            raise ValueError("groups='force' needs counts with seat names (seat_key='agent-force')")
        forces = [a.rsplit(":", 1)[-1] for a in counts.agents]
        names = list(dict.fromkeys(forces))
        groups = [names.index(f) for f in forces]
    return reliability_data_from_arrays(counts.N, counts.e, counts.c, counts.mask, counts.gold,
                                        counts.gold_missing, groups)


def _hypothesis_terms(theta, data: ReliabilityData):
    """log p(moves_t | g, θ) for every candidate g: [T, K] (masked slots −inf)."""
    lt, l1t = jnp.log(theta), jnp.log1p(-theta)                        # [I]
    d = data.N[..., None] - data.c
    per = (data.c * lt[None, :, None] + d * l1t[None, :, None]
           - (data.N[..., None] - data.e) * data.log_km1[:, None, None])  # [T, I, K]
    return jnp.where(data.mask, per.sum(1), -jnp.inf)


def _joint(theta, data: ReliabilityData):
    log_pi0 = -jnp.log(data.mask.sum(-1, keepdims=True).astype(jnp.float32))
    return _hypothesis_terms(theta, data) + log_pi0


@jit_over_data
def task_log_lik(params, data: ReliabilityData):
    """Per-task marginal log-likelihood [T] (labeled: gold term; gold outside the list: its term)."""
    theta = params["theta"]
    joint = _joint(theta, data)
    marg = jax.nn.logsumexp(joint, axis=-1)
    g = jnp.clip(data.gold, 0)
    clamp = jnp.take_along_axis(joint, g[:, None], axis=-1)[:, 0]
    out = (data.out_c * jnp.log(theta) + (data.N - data.out_c) * jnp.log1p(-theta)).sum(-1) \
        - (data.e.sum(-1) * data.log_k[:, None]).sum(-1)
    return jnp.where(data.gold_out, out, jnp.where(data.gold >= 0, clamp, marg))


@jit_over_data
def task_class_log_post(params, data: ReliabilityData):
    """Per-task class log-posterior given θ [T, K] (labeled: one-hot at the gold)."""
    joint = _joint(params["theta"], data)
    lp = joint - jax.nn.logsumexp(joint, axis=-1, keepdims=True)
    onehot = jax.nn.one_hot(jnp.clip(data.gold, 0), data.mask.shape[-1]) > 0
    return jnp.where((data.gold >= 0)[:, None], jnp.where(onehot, 0.0, -jnp.inf), lp)


KINDS = ("hierarchical", "per-agent", "shared")


def reliability_model(data: ReliabilityData, prior: ReliabilityPrior = ReliabilityPrior(),
                      kind: str = "hierarchical"):
    """The NumPyro model (module docstring); ``kind`` in :data:`KINDS` (a Python string: bind it
    with ``functools.partial``, it is not a traced argument). Sites ``mu`` [G] (not for
    "per-agent"), ``kappa`` [G] (hierarchical only), ``theta`` [I] and the factor ``log_lik`` [T]."""
    G = data.group.shape[1]
    I = data.group.shape[0]
    if kind == "per-agent":
        theta = numpyro.sample("theta", dist.Beta(jnp.full(I, prior.a), prior.b))
    else:
        mu = numpyro.sample("mu", dist.Beta(jnp.full(G, prior.mu_a), prior.mu_b))
        if kind == "shared":
            theta = numpyro.deterministic("theta", data.group @ mu)
        elif kind == "hierarchical":
            kappa = numpyro.sample("kappa", dist.LogNormal(
                jnp.full(G, jnp.log(prior.kappa_loc)), prior.kappa_scale))
            m, k = data.group @ mu, data.group @ kappa
            theta = numpyro.sample("theta", dist.Beta(m * k, (1 - m) * k))
        else:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    numpyro.factor("log_lik", task_log_lik({"theta": theta}, data))


def default_init(data: ReliabilityData, kind: str = "hierarchical", theta0: float = 0.7) -> dict:
    """Better-than-chance start (θ = 0.7) so chains sit in the orientation where seats help."""
    I, G = data.group.shape
    if kind == "per-agent":
        return {"theta": jnp.full(I, theta0)}
    if kind == "shared":
        return {"mu": jnp.full(G, theta0)}
    return {"mu": jnp.full(G, theta0), "kappa": jnp.full(G, 10.0), "theta": jnp.full(I, theta0)}


def _theta_of(params, data):
    return params["theta"] if "theta" in params else data.group @ params["mu"]


def spec_for(kind: str, prior: ReliabilityPrior = ReliabilityPrior()) -> ModelSpec:
    """The :class:`ModelSpec` of one variant (``kind`` in :data:`KINDS`) with ``prior`` as default."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")

    def ll(p, d):
        return task_log_lik({"theta": _theta_of(p, d)}, d)

    def clp(p, d):
        return task_class_log_post({"theta": _theta_of(p, d)}, d)

    return ModelSpec(f"reliability-{kind}", functools.partial(reliability_model, kind=kind),
                     lambda d: default_init(d, kind), ll, clp, prior)


HIERARCHICAL_SPEC = spec_for("hierarchical")
PER_AGENT_SPEC = spec_for("per-agent")
SHARED_SPEC = spec_for("shared")


def replicate_endorsements(key, params, data: ReliabilityData) -> jax.Array:
    """One replicated endorsement tensor [T, I, K] under the generative story, for posterior
    predictive checks: g_t drawn from the task's class posterior given θ (gold where known),
    the number of informative moves N[t, i] kept, Binomial(N, θ_i) of them endorse g_t, the rest
    endorse wrong candidates uniformly. (Only positive endorsements are replicated: the story
    does not say which inconsistent moves are challenges.)

    Drawn as one multinomial per (task, seat) over the K slots plus a sink: slot g_t with
    probability θ_i, each wrong slot with (1 − θ_i) / (number of wrong slots), the sink with
    1 − θ_i when the task has no wrong slot (those moves endorse nothing). That is the same joint
    law as the binomial-then-uniform story, with one binomial sampler in the compiled program
    (``jax.random.multinomial`` scans the slots) instead of K + 1 inlined ones."""
    theta = _theta_of(params, data)
    k_g, k_m = jax.random.split(key)
    T, I, K = data.c.shape
    lp = task_class_log_post({"theta": theta}, data)
    g = jax.random.categorical(k_g, lp, axis=-1)                                    # [T]
    right = jax.nn.one_hot(g, K, dtype=theta.dtype)                                 # [T, K]
    wrong = (data.mask & (jnp.arange(K)[None, :] != g[:, None])).astype(theta.dtype)   # [T, K]
    n_wrong = wrong.sum(-1, keepdims=True)                                          # [T, 1]
    th = theta[None, :, None]                                                       # [1, I, 1]
    p = jnp.concatenate([th * right[:, None, :]
                         + (1 - th) * (wrong / jnp.maximum(n_wrong, 1))[:, None, :],
                         jnp.broadcast_to((1 - th) * (n_wrong[:, None, :] == 0), (T, I, 1))],
                        axis=-1)                                                    # [T, I, K + 1]
    draws = jax.random.multinomial(k_m, data.N.astype(theta.dtype), p)
    return draws[..., :K].astype(jnp.int32)
