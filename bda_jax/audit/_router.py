"""The runtime router of confidence-routed broadcast ([Audit] Fig. 1; docs/audit.md), replayed
on a log: :func:`runtime_argmax` (largest stated score, first listed agent wins ties) and
:func:`effective_selection`, the selection every selection-based metric uses by default.
"""
from __future__ import annotations

import numpy as np

from ._log import BroadcastLog
from .._core.errors import DataError

__all__ = ["SELECTION_SOURCES", "effective_selection", "runtime_argmax"]


def runtime_argmax(log: BroadcastLog, score=None) -> np.ndarray:
    """[R] bool: the runtime router's pick per block (docs/audit.md): the largest ``score`` over all
    polled agents, valid or not, strict ``>`` so the first-listed agent wins ties; a missing (NaN)
    score ranks below every stated one (all missing: the first listed).

    >>> from bda_jax.audit import from_records
    >>> log = from_records([{"kind": "poll", "problem": 1, "outer_round": 0, "turn": 0,
    ...                      "agent": a, "score": s} for a, s in (("x", .5), ("y", .9), ("z", .9))])
    >>> runtime_argmax(log).tolist()
    [False, True, False]
    """
    score = log.score if score is None else np.asarray(score, np.float64)
    if score.shape != (log.n_polls,):
        raise DataError(f"score must be [R] = [{log.n_polls}], got shape {score.shape}",
                        field="score")
    padded = log.padded(np.where(np.isnan(score), -np.inf, score), -np.inf)
    pick = np.argmax(padded, axis=1)           # first maximum = first listed
    out = np.zeros(log.n_polls, bool)
    out[log.block_start[:-1] + pick] = True
    return out


SELECTION_SOURCES = ("logged", "replayed")
"""Values of the source :func:`effective_selection` reports."""


def effective_selection(log: BroadcastLog) -> tuple[np.ndarray, str]:
    """``([R] bool, source)``: the selection the audit uses when none is passed explicitly.

    * ``"logged"`` — some poll of the log is ``selected``: the flags as logged. Blocks without
      a selected poll stay unselected and drop out of every selection-based denominator (CRA,
      HRWP, runtime success, MCR, selected-invalid rate).
    * ``"replayed"`` — no poll of the log is selected (a log written without ``selected``
      flags; ``selected`` defaults to false): in a block with a speak record, the speaker's
      poll (the speaker held the floor); in the other blocks the runtime rule replayed
      (:func:`runtime_argmax`: largest score, first listed wins ties).

    >>> from bda_jax.audit import from_records
    >>> log = from_records([{"kind": "poll", "problem": 1, "outer_round": 0, "turn": t,
    ...                      "agent": a, "score": s} for t in (0, 1)
    ...                     for a, s in (("x", .5), ("y", .9))]
    ...                    + [{"kind": "speak", "problem": 1, "outer_round": 0, "turn": 1,
    ...                        "speaker": "x"}])
    >>> sel, source = effective_selection(log)
    >>> sel.tolist(), source
    ([False, True, True, False], 'replayed')
    """
    if log.selected.any():
        return log.selected, "logged"
    out = runtime_argmax(log)
    if log.n_speaks:
        out[np.isin(log.block, log.speak_block)] = False
        out[log.speak_poll_row] = True
    return out, "replayed"

