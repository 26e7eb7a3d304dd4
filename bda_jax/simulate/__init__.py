"""Council simulator with correlated errors, interacting moves, contagion and adversaries.

Not BDA's own generative model (docs/simulator.md): see ``docs/simulator.md`` for the generative story.

>>> from bda_jax.simulate import simulate_council
>>> traces = simulate_council(0, 100, [0.738, 0.684, 0.678], seeds_per_question=3)
>>> len(traces), traces[0].cluster == traces[1].cluster
(300, True)
"""
from ._council import Behavior, default_labels, seat_intercepts, simulate_council

__all__ = ["Behavior", "default_labels", "seat_intercepts", "simulate_council"]
