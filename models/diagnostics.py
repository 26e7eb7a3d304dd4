"""ArviZ 1.x helpers: DataTree with hand-computed per-item log-likelihoods, r̂ and ESS.

NumPyro's ``log_likelihood`` cannot handle enumerated models (docs/models.md), so the models of this
package expose per-item marginal log-likelihoods computed by hand (logsumexp over classes) and this
module puts them in the ``log_likelihood`` group that ``arviz.loo`` / ``arviz.compare`` read.
"""
from __future__ import annotations

import arviz as az
import jax.numpy as jnp
import numpy as np

__all__ = ["to_datatree", "convergence", "agreement_rates", "ppc_pvalues", "compare"]


# NumPyro's HMC/NUTS state fields under ArviZ's sample_stats names (``potential_energy`` is
# stored negated as ``lp``), as ``arviz.from_numpyro`` names them.
_STAT_NAMES = {"diverging": "diverging", "potential_energy": "lp", "accept_prob": "acceptance_rate",
               "num_steps": "n_steps", "adapt_state.step_size": "step_size", "energy": "energy"}


def to_datatree(mcmc, log_lik, var_name: str = "log_lik", item_dim: str = "task"):
    """DataTree with the posterior of ``mcmc``, its sample stats and ``log_likelihood[var_name]``.

    ``log_lik``: array [chain, draw, T] (e.g. ``dawid_skene.posterior_log_lik(
    mcmc.get_samples(group_by_chain=True), data)``). Groups: ``posterior`` (every sample site,
    [chain, draw, ...]), ``sample_stats`` (the collected NumPyro fields among ``diverging``,
    ``potential_energy`` (as ``lp`` = −potential energy), ``accept_prob``, ``num_steps``,
    ``adapt_state.step_size``, ``energy``, under ArviZ's names) and ``log_likelihood``.

    Built from the stored draws with ``arviz.from_dict``: ``arviz.from_numpyro`` would also run
    the model once more outside ``jit`` (to find observed sites and plate dims), which costs
    hundreds of one-operation XLA compiles on enumerated models and adds nothing the
    PSIS-LOO / r̂ / ESS helpers read."""
    ll = np.asarray(log_lik)
    if ll.ndim != 3:
        raise ValueError("log_lik must have shape [chain, draw, n_items]")
    posterior = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    shape = next(iter(posterior.values())).shape[:2]
    if shape != ll.shape[:2]:
        raise ValueError(f"log_lik leading shape {ll.shape[:2]} != posterior (chain, draw) {shape}")
    stats = {}
    for field, value in mcmc.get_extra_fields(group_by_chain=True).items():
        if field in _STAT_NAMES and np.ndim(value) == 2:
            value = np.asarray(value)
            stats[_STAT_NAMES[field]] = -value if field == "potential_energy" else value
    groups = {"posterior": posterior, "log_likelihood": {var_name: ll}}
    if stats:
        groups["sample_stats"] = stats
    return az.from_dict(groups, dims={var_name: [item_dim]},
                        coords={item_dim: np.arange(ll.shape[2])})


def convergence(dt, var_names=None) -> dict:
    """Max rank-normalized r̂ and min bulk/tail ESS over the given posterior variables (default:
    every variable of the posterior group) (``arviz.rhat`` / ``arviz.ess``, ArviZ 1.x)."""
    var_names = list(dt["posterior"].data_vars) if var_names is None else list(var_names)
    rhat = az.rhat(dt, var_names=var_names)
    ess_bulk = az.ess(dt, var_names=var_names, method="bulk")
    ess_tail = az.ess(dt, var_names=var_names, method="tail")

    def ext(ds, f):
        return float(f([float(f(np.asarray(ds[v]))) for v in var_names]))

    return {"max_rhat": ext(rhat, np.max), "min_ess_bulk": ext(ess_bulk, np.min),
            "min_ess_tail": ext(ess_tail, np.min)}


def agreement_rates(e, mask):
    """Per-seat agreement with the others' plurality: [I] (posterior predictive statistic).

    ``e`` [T, I, K] positive endorsements, ``mask`` [T, K]. For seat i and task t the others'
    plurality is the set of candidates with the most endorsements by seats j ≠ i (ties share the
    credit equally); the rate is Σ_t Σ_g e[t,i,g] · share_t(g) / Σ_t Σ_g e[t,i,g] over tasks where
    the others endorse anything. NaN for a seat with no such endorsement."""
    e = jnp.asarray(e, jnp.float32)
    others = e.sum(1, keepdims=True) - e                                  # [T, I, K]
    others = jnp.where(jnp.asarray(mask)[:, None, :], others, -1.0)
    top = others.max(-1, keepdims=True)
    plural = (others == top) & (top > 0)
    share = plural / jnp.maximum(plural.sum(-1, keepdims=True), 1)
    has = (top[..., 0] > 0)                                               # [T, I]
    num = (e * share).sum((0, 2))
    den = (e.sum(-1) * has).sum(0)
    return jnp.where(den > 0, num / jnp.maximum(den, 1), jnp.nan)


def ppc_pvalues(observed, replicated):
    """Posterior predictive p-values per component: P(T_rep ≥ T_obs) with ties counted half.

    ``observed`` [I], ``replicated`` [R, I] -> [I]; values near 0 or 1 flag misfit."""
    obs, rep = np.asarray(observed), np.asarray(replicated)
    return (rep > obs).mean(0) + 0.5 * (rep == obs).mean(0)


def compare(trees: dict, var_name: str = "log_lik"):
    """``arviz.compare`` over DataTrees holding per-item log-likelihoods (PSIS-LOO, no rounding).

    Returns the ArviZ comparison frame, best model first (``elpd_diff`` = 0)."""
    return az.compare(trees, var_name=var_name, round_to="none")
