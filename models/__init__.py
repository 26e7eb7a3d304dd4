"""NumPyro models of bda_jax, installed as ``bda_jax.models`` (see pyproject's package-dir).

Modules: ``dawid_skene`` (Bayesian Dawid–Skene, class marginalized by hand), ``annotators``
(Bayesian one-coin Dawid–Skene, MACE, GLAD), ``hierarchical`` (BDA's one-coin reliability with a
learned population prior, [BDA] Remark 2), ``inference`` (one ``ModelSpec`` for NUTS, SVI and
MAP) and ``diagnostics`` (ArviZ 1.x DataTree with per-item log-likelihoods, r̂/ESS, LOO
``compare``, posterior predictive p-values). The crowd models read the votes as
:class:`bda_jax.crowd.CrowdVotes` (``dawid_skene.prepare_votes``,
``annotators.prepare_glad_votes``).
"""
