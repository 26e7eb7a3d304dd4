"""One model object, three inference routes: NUTS, SVI (optax) and MAP.

Every model of this package is described by a :class:`ModelSpec`: the NumPyro model function
``model(data, prior)``, a label-switching-safe starting point ``init(data)`` (constrained site
values), the per-item marginal log-likelihood ``log_lik(params, data) -> [n_items]`` (what
``numpyro.factor("log_lik", ...)`` adds inside the model, computed by hand so LOO works for models
whose discrete truth is summed out — docs/models.md) and the per-task class posterior
``class_log_post(params, data) -> [T, K]``.

The functions here take a spec and never look inside the model:

* :func:`run_nuts` — NUTS started at ``spec.init`` (moderate data);
* :func:`fit_svi` — SVI with an autoguide (``"normal"``: mean field, ``"lowrank"``: low-rank
  multivariate normal, ``"delta"``: a point mass, i.e. MAP) and an optax optimizer (large data);
* :func:`fit_map` — MAP: :func:`fit_svi` with ``guide="delta"``, returning the point estimate;
* :func:`draws_log_lik`, :func:`class_posterior` — per-item log-likelihoods and class
  posteriors over a set of draws (from NUTS or from a guide) or over a point estimate;
* :func:`jit_over_data` — how the models compile their likelihood code (below).

``samples`` arguments are dicts of arrays whose leading dimensions are draws (``[draw, ...]`` or
``[chain, draw, ...]``); the number of leading dimensions is read off ``spec.init(data)``.
Usage (``ds`` = :mod:`models.dawid_skene`)::

    mcmc = run_nuts(jax.random.key(0), ds.SPEC, data, num_chains=2)
    proba = class_posterior(ds.SPEC, mcmc.get_samples(), data)          # [T, K]

Compilation: NumPyro initializes a sampler or a guide by running the model, and its gradient,
eagerly, one operation at a time, and JAX compiles every eager operation as its own program
(about a hundred per model and data shape). The models' likelihood code is therefore wrapped in
:func:`jit_over_data`: eagerly it runs as one compiled program (and one each for its derivatives),
inside a traced sampler it is inlined as before. The numbers are the same; only the count of
compiled programs changes.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpyro.infer import MCMC, NUTS, SVI, Predictive, Trace_ELBO, init_to_value
from numpyro.infer.autoguide import AutoDelta, AutoLowRankMultivariateNormal, AutoNormal

__all__ = ["ModelSpec", "SVIFit", "run_nuts", "fit_svi", "fit_map", "guide_draws",
           "draws_log_lik", "class_posterior", "jit_over_data"]

F = TypeVar("F", bound=Callable[..., Any])


def jit_over_data(fn: F) -> F:
    """``jax.jit`` of a model function ``fn(*args, data)`` whose last argument is the model's
    data, a NamedTuple of arrays and Python ints: the ints are sizes (e.g.
    :class:`~models.dawid_skene.DSData`'s ``n_patterns``, which ``segment_sum`` needs as a
    constant) and are static, one compiled program per size; the arrays and ``args`` (pytrees of
    arrays) are traced. Same values as ``fn``; see the module docstring for why."""

    @functools.partial(jax.jit, static_argnames=("cls", "sizes"))
    def compiled(args, arrays, *, cls, sizes):
        return fn(*args, cls(**arrays, **dict(sizes)))

    @functools.wraps(fn)
    def call(*args):
        *head, data = args
        fields = data._asdict()
        is_size = {k: isinstance(v, (int, np.integer)) for k, v in fields.items()}
        sizes = tuple((k, int(v)) for k, v in fields.items() if is_size[k])
        arrays = {k: v for k, v in fields.items() if not is_size[k]}
        return compiled(tuple(head), arrays, cls=type(data), sizes=sizes)

    return call  # type: ignore[return-value]


class ModelSpec(NamedTuple):
    """What inference needs to know about a model (see the module docstring)."""
    name: str
    model: Callable[..., Any]
    init: Callable[[Any], dict]
    log_lik: Callable[[dict, Any], jax.Array]
    class_log_post: Callable[[dict, Any], jax.Array]
    default_prior: Any = None


class SVIFit(NamedTuple):
    """Result of :func:`fit_svi`: the guide, its fitted parameters and the ELBO loss trace [steps]."""
    guide: Any
    params: dict
    losses: jax.Array


def _prior(spec: ModelSpec, prior):
    return spec.default_prior if prior is None else prior


def run_nuts(key, spec: ModelSpec, data, prior=None, *, num_warmup=500, num_samples=500,
             num_chains=1, chain_method="sequential", progress_bar=False, extra_fields=(),
             mcmc_kw=None, **nuts_kw) -> MCMC:
    """NUTS on ``spec.model`` started at ``spec.init(data)`` (every chain starts there: the
    diagonal-dominant start keeps the chains in one labelling). ``mcmc_kw``: more ``MCMC``
    options (e.g. ``{"jit_model_args": True}``); ``nuts_kw``: ``NUTS`` options. Returns the run
    ``MCMC``."""
    kernel = NUTS(spec.model, init_strategy=init_to_value(values=spec.init(data)), **nuts_kw)
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                chain_method=chain_method, progress_bar=progress_bar, **(mcmc_kw or {}))
    mcmc.run(key, data, _prior(spec, prior), extra_fields=extra_fields)
    return mcmc


_GUIDES = {"normal": AutoNormal, "lowrank": AutoLowRankMultivariateNormal, "delta": AutoDelta}


def fit_svi(key, spec: ModelSpec, data, prior=None, *, guide="normal", steps=2000,
            optimizer=None, num_particles=1) -> SVIFit:
    """Stochastic variational inference on ``spec.model`` (Trace_ELBO, optax optimizer, default
    ``optax.adam(0.05)``). ``guide``: ``"normal"`` (AutoNormal, mean field), ``"lowrank"``
    (AutoLowRankMultivariateNormal) or ``"delta"`` (AutoDelta: MAP); every guide is centred at
    ``spec.init(data)`` to start with."""
    if guide not in _GUIDES:
        raise ValueError(f"guide must be one of {sorted(_GUIDES)}, got {guide!r}")
    g = _GUIDES[guide](spec.model, init_loc_fn=init_to_value(values=spec.init(data)))
    opt = optax.adam(0.05) if optimizer is None else optimizer
    svi = SVI(spec.model, g, opt, Trace_ELBO(num_particles=num_particles))
    res = svi.run(key, steps, data, _prior(spec, prior), progress_bar=False)
    return SVIFit(g, res.params, res.losses)


def fit_map(key, spec: ModelSpec, data, prior=None, *, steps=2000, lr=0.05) -> dict:
    """MAP estimate (constrained site values) by SVI with a point-mass guide and ``optax.adam``."""
    fit = fit_svi(key, spec, data, prior, guide="delta", steps=steps, optimizer=optax.adam(lr))
    return fit.guide.median(fit.params)


def guide_draws(key, fit: SVIFit, spec: ModelSpec, data, num_samples=500) -> dict:
    """``num_samples`` draws of the latent sites from a fitted guide: ``{site: [draw, ...]}``."""
    sites = list(spec.init(data))
    pred = Predictive(fit.guide, params=fit.params, num_samples=num_samples, return_sites=sites)
    return pred(key, data, _prior(spec, None))


def _flatten(spec: ModelSpec, samples: dict, data):
    """Keep the model's latent sites and flatten their leading draw dimensions."""
    init = spec.init(data)
    site = next(iter(init))
    lead = jnp.shape(samples[site])[: jnp.ndim(samples[site]) - jnp.ndim(init[site])]
    flat = {k: jnp.reshape(samples[k], (-1,) + jnp.shape(init[k])) for k in init}
    return flat, tuple(lead)


def draws_log_lik(spec: ModelSpec, samples: dict, data, batch_size=64) -> jax.Array:
    """Per-item log-likelihood for every draw: ``[*lead, n_items]`` (``lead`` = the draw dims)."""
    flat, lead = _flatten(spec, samples, data)
    out = jax.lax.map(lambda p: spec.log_lik(p, data), flat, batch_size=batch_size)
    return out.reshape(lead + out.shape[1:])


def class_posterior(spec: ModelSpec, samples: dict, data, batch_size=64) -> jax.Array:
    """Posterior class probabilities [T, K]: the per-draw class posteriors averaged over draws
    (a point estimate is one draw: pass ``{site: value[None]}``)."""
    flat, _ = _flatten(spec, samples, data)
    probs = jax.lax.map(lambda p: jnp.exp(spec.class_log_post(p, data)), flat,
                        batch_size=batch_size)
    return probs.mean(0)
