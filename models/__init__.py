"""NumPyro models of bda_jax, installed as ``bda_jax.models`` (see pyproject's package-dir).

Modules: ``dawid_skene`` (Bayesian Dawid–Skene, class marginalized by hand; NUTS and MAP) and
``_diagnostics`` (ArviZ 1.x DataTree with per-item log-likelihoods, r̂/ESS).
"""
