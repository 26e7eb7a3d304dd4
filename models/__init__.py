"""NumPyro models of bda_jax, installed as ``bda_jax.models`` (see pyproject's package-dir)."""
