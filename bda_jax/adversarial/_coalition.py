"""Coalition bookkeeping for live-style attacks ([BDA] Appendix F.2 and F.14, Table 19).

Reads the traces themselves (who endorsed what, in file order) plus the simulator's record of the
coalition (``Trace.extra["sim"]``: the coalition's answer and its active seats), so the same
report works for any trace set that carries that record.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._core.errors import DataError
from .._core.normalize import default_normalizer
from .._core.traces import Trace, resolve_trace

__all__ = ["coalition_report"]


def _stances(resolved):
    """agent -> (first, last) positively endorsed candidate index, in file order."""
    first, last = {}, {}
    for agent, cand, sign in zip(resolved.agent, resolved.cand, resolved.sign):
        if sign > 0:
            first.setdefault(agent, cand)
            last[agent] = cand
    return first, last


def coalition_report(traces: Sequence[Trace], adversaries: Sequence[str] | None = None) -> dict:
    """Compliance, contagion and the effective corrupted fraction of a coalition attack.

    Attacked tasks are those whose ``extra["sim"]["active"]`` names at least one seat.

    * ``compliance``: the fraction of (task, designated adversarial seat) pairs in which the seat
      acted adversarially (``adversaries``; default: every seat active on some task), over all
      tasks;
    * ``genuine_flip_rate``: among genuine seats that did not open (first endorsement) with the
      coalition's answer, the fraction whose last endorsement is the coalition's answer — the
      contagion channel of Table 19;
    * ``effective_corrupted_fraction``: seats whose last endorsement is the coalition's answer,
      divided by the council size, averaged over attacked tasks (against the nominal k / I).

    Returns a dict of plain numbers (``attacked_tasks``, ``nominal_fraction`` included).
    """
    rows = []
    for trace in traces:
        sim = trace.extra.get("sim") if isinstance(trace.extra, dict) else None
        if not sim or "coalition" not in sim or "active" not in sim:
            raise DataError("coalition_report needs the simulator's record extra['sim'] "
                            "(coalition, active)", task_id=trace.task_id, field="extra")
        rows.append((resolve_trace(trace), sim))
    designated = (set(adversaries) if adversaries is not None
                  else {a for _, sim in rows for a in sim["active"]})
    n_tasks = n_active = n_designated = 0
    flips = at_risk = 0
    corrupted = []
    for resolved, sim in rows:
        n_active += len(set(sim["active"]) & designated)
        n_designated += len(designated)
        if not sim["active"]:
            continue
        n_tasks += 1
        key = default_normalizer(sim["coalition"])
        if key not in resolved.keys:
            continue
        coal = resolved.keys.index(key)
        first, last = _stances(resolved)
        seats = sorted(set(resolved.agent))
        for seat in seats:
            if seat in designated:
                continue
            if first.get(seat) != coal:
                at_risk += 1
                flips += last.get(seat) == coal
        corrupted.append(sum(last.get(s) == coal for s in seats) / max(len(seats), 1))
    n_seats = len({a for r, _ in rows for a in r.agent}) or 1
    return {
        "attacked_tasks": n_tasks,
        "compliance": n_active / n_designated if n_designated else None,
        "genuine_flip_rate": flips / at_risk if at_risk else None,
        "effective_corrupted_fraction": float(np.mean(corrupted)) if corrupted else None,
        "nominal_fraction": len(designated) / n_seats,
    }
