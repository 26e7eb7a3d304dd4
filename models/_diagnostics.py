"""ArviZ 1.x helpers: DataTree with hand-computed per-item log-likelihoods, r̂ and ESS.

NumPyro's ``log_likelihood`` cannot handle enumerated models (DESIGN §9), so the models of this
package expose per-item marginal log-likelihoods computed by hand (logsumexp over classes) and this
module puts them in the ``log_likelihood`` group that ``arviz.loo`` / ``arviz.compare`` read.
"""
from __future__ import annotations

import arviz as az
import numpy as np
import xarray as xr

__all__ = ["to_datatree", "convergence"]


def to_datatree(mcmc, log_lik, var_name: str = "log_lik", item_dim: str = "task"):
    """DataTree with the posterior of ``mcmc`` and ``log_likelihood[var_name]`` [chain, draw, T].

    ``log_lik``: array [chain, draw, T] (e.g. ``dawid_skene.posterior_log_lik(
    mcmc.get_samples(group_by_chain=True), data)``)."""
    dt = az.from_numpyro(mcmc)  # posterior (+ sample_stats); no numpyro log_likelihood
    ll = np.asarray(log_lik)
    if ll.ndim != 3:
        raise ValueError("log_lik must have shape [chain, draw, n_items]")
    post = dt["posterior"]
    if (post.sizes["chain"], post.sizes["draw"]) != ll.shape[:2]:
        raise ValueError(f"log_lik leading shape {ll.shape[:2]} != posterior (chain, draw)")
    da = xr.DataArray(ll, dims=("chain", "draw", item_dim),
                      coords={"chain": post["chain"].values, "draw": post["draw"].values,
                              item_dim: np.arange(ll.shape[2])})
    dt["log_likelihood"] = xr.Dataset({var_name: da})
    return dt


def convergence(dt, var_names=("pi", "conf")) -> dict:
    """Max rank-normalized r̂ and min bulk/tail ESS over the given posterior variables
    (``arviz.rhat`` / ``arviz.ess``, ArviZ 1.x)."""
    var_names = list(var_names)
    rhat = az.rhat(dt, var_names=var_names)
    ess_bulk = az.ess(dt, var_names=var_names, method="bulk")
    ess_tail = az.ess(dt, var_names=var_names, method="tail")

    def ext(ds, f):
        return float(f([float(f(np.asarray(ds[v]))) for v in var_names]))

    return {"max_rhat": ext(rhat, np.max), "min_ess_bulk": ext(ess_bulk, np.min),
            "min_ess_tail": ext(ess_tail, np.min)}
