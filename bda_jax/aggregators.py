"""Aggregators with one interface: ``fit`` -> self, ``predict_proba``, ``predict`` (seeded ties)."""
from ._src.aggregators import BDA, BDAConfusion, BDAPerAgent, BDAShared, BDATempered, Majority

__all__ = ["BDA", "BDAConfusion", "BDAPerAgent", "BDAShared", "BDATempered", "Majority"]
