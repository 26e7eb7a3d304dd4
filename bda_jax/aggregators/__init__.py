"""Aggregators with one interface: ``fit`` -> self, ``predict_proba`` [T, K] over each task's
candidates (0 on padding), ``predict`` (seeded random ties); fitted attributes end in ``_``."""
from ._bda import BDA, BDAConfusion, BDAPerAgent, BDAShared, BDATempered, Majority
from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                             TemperatureScaled, VerbalizedVote)
from ..crowd._dawid_skene import DawidSkene

__all__ = ["BDA", "BDAConfusion", "BDAPerAgent", "BDAShared", "BDATempered", "BestMember",
           "DawidSkene", "GatedVote", "IsotonicRecalibrated", "LogisticStacking", "Majority",
           "TemperatureScaled", "VerbalizedVote"]
