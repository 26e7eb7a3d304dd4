"""Coalition bookkeeping for live-style attacks ([BDA] Appendix F.2 and F.14, Table 19).

Reads the traces themselves — who endorsed or rejected what, whom each challenge and concede
targets, in file order — against the gold answer and a given list of adversarial seats, so the
report works on any labeled trace set: a live council, a file, the simulator. The simulator's
own record of the coalition (``Trace.extra["sim"]``: its answer and the seats that complied) is
an optional extra, reported beside the gold-based numbers and never needed for them.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from .._core.errors import DataError
from .._core.normalize import default_normalizer
from .._core.traces import Trace, resolve_trace

__all__ = ["coalition_report"]

_CELLS = ("genuine_truth", "genuine_wrong", "ally_truth", "ally_wrong")


def _stances(resolved):
    """agent -> (first, last) positively endorsed candidate index, in file order."""
    first, last = {}, {}
    for agent, cand, sign in zip(resolved.agent, resolved.cand, resolved.sign):
        if sign > 0:
            first.setdefault(agent, cand)
            last[agent] = cand
    return first, last


def _sim_record(trace):
    sim = trace.extra.get("sim") if isinstance(trace.extra, dict) else None
    if isinstance(sim, dict) and "coalition" in sim and isinstance(sim.get("active"), list):
        return sim
    return None


def _share(num, den):
    return num / den if den else None


def coalition_report(traces: Sequence[Trace], adversaries: Sequence[str] | None = None) -> dict:
    """Compliance, targeting, contagion and the effective corrupted fraction of a coalition.

    ``traces``: any traces; the labeled ones (gold given) are read, unlabeled ones are counted
    in ``unlabeled_tasks`` and skipped. ``adversaries``: the designated adversarial seats (agent
    ids). Without it, the seats the simulator's record ``extra["sim"]["active"]`` names on some
    task; with neither, :class:`~bda_jax.DataError`. Every number below is read from the moves
    and the gold alone ([BDA] Appendix F, "Measured compliance"); the record is not consulted.

    An adversary's informative move is *compliant* when it works against the gold: it endorses
    (propose, vote, concede) a wrong answer, or rejects (challenge, retract) the gold. On a task
    whose gold is not a candidate every endorsement is wrong and no rejection hits the gold.

    * ``compliance``: compliant moves / all informative moves of the adversaries (over
      ``n_adversary_moves``); ``round0_compliance``: the share of their round-0 proposals that
      are wrong (the paper's "anti-correct proposals"); ``final_compliance``: the share of
      (task, adversary) pairs whose last endorsement is wrong (the stance maintained to the
      end), over pairs with an endorsement.
    * ``attacked_tasks``: tasks with at least one compliant adversary move. The coalition's
      answer on such a task is the wrong candidate its adversaries endorse most (ties: the one
      endorsed first); a task where they only rejected the gold has none, and is left out of
      the next two numbers.
    * ``genuine_flip_rate``: among genuine seats whose first endorsement is not the coalition's
      answer, the share whose last endorsement is — the contagion channel of Table 19;
      ``effective_corrupted_fraction``: the seats of a task whose last endorsement is the
      coalition's answer over the seats that moved on it, averaged over attacked tasks (against
      ``nominal_fraction`` = designated seats / all seats).
    * ``targeting``: whom the adversaries challenge and concede to. For each force
      (``"challenge"``, ``"concede"``) a count per cell of (target's seat: ``genuine`` or
      ``ally``, another designated seat) x (the answer the target stands for: ``truth`` = the
      gold, or ``wrong``) — the paper's "challenged truth-supporting moves 56 times against 18
      challenges of allies" — and ``challenged_seats``: challenges per target seat. A
      challenge of one's own move (the protocol reads it as a retract) targets no one.
    * ``sim`` (only when every labeled trace carries the simulator's record, else None):
      ``compliance`` = the share of (task, designated seat) pairs the record marks active (the
      simulator's per-task compliance draw), ``attacked_tasks`` by the record, and
      ``coalition_agreement`` = on tasks attacked by both readings, the share whose coalition
      answer (above) is the record's.

    Returns a dict of plain numbers (None where a share has no denominator).
    """
    labeled, unlabeled = [], 0
    for trace in traces:
        resolved = resolve_trace(trace)
        if resolved.gold < 0 and not resolved.gold_missing:
            unlabeled += 1
            continue
        labeled.append((trace, resolved, _sim_record(trace)))
    records = [sim for _, _, sim in labeled]
    if adversaries is None:
        if not any(sim is not None for sim in records):
            raise DataError("coalition_report needs the adversarial seats (adversaries=[...]) "
                            "or the simulator's record extra['sim'] on the traces",
                            field="adversaries")
        designated = {a for sim in records if sim is not None for a in sim["active"]}
    else:
        if isinstance(adversaries, str) or not all(isinstance(a, str) for a in adversaries):
            raise DataError(f"adversaries must be a list of agent ids, got {adversaries!r}",
                            field="adversaries")
        designated = set(adversaries)

    n_moves = n_compliant = n_r0 = n_r0_wrong = n_final = n_final_wrong = 0
    flips = at_risk = 0
    corrupted, coalitions = [], []
    targeting = {force: dict.fromkeys(_CELLS, 0) for force in ("challenge", "concede")}
    challenged: Counter = Counter()
    for trace, r, _ in labeled:
        author = {m.id: m.agent for m in r.admissible}
        target = {m.id: m.target for m in r.admissible}
        wrong_votes: Counter = Counter()
        first_seen: dict[int, int] = {}
        attacked = False
        for j, (agent, cand, sign) in enumerate(zip(r.agent, r.cand, r.sign)):
            if agent not in designated:
                continue
            force, is_gold = r.force[j], cand == r.gold
            compliant = (sign > 0 and not is_gold) or (sign < 0 and is_gold)
            n_moves += 1
            n_compliant += compliant
            attacked |= compliant
            if sign > 0 and not is_gold:
                wrong_votes[cand] += 1
                first_seen.setdefault(cand, j)
            if r.round[j] == 0 and force == "propose":
                n_r0 += 1
                n_r0_wrong += not is_gold
            whom = author[target[r.moves[j]]] if force in targeting else agent
            if whom != agent:                  # a self-challenge is a retract: no target
                cell = ("ally" if whom in designated else "genuine") + \
                    ("_truth" if is_gold else "_wrong")
                targeting[force][cell] += 1
                if force == "challenge":
                    challenged[whom] += 1
        first, last = _stances(r)
        for seat in designated & set(last):
            n_final += 1
            n_final_wrong += last[seat] != r.gold
        coal = (max(wrong_votes, key=lambda k: (wrong_votes[k], -first_seen[k]))
                if attacked and wrong_votes else None)
        coalitions.append(coal if attacked else False)
        if coal is None:
            continue
        seats = sorted(set(r.agent))
        for seat in seats:
            if seat not in designated and first.get(seat) != coal:
                at_risk += 1
                flips += last.get(seat) == coal
        corrupted.append(sum(last.get(s) == coal for s in seats) / max(len(seats), 1))

    sim = None
    if labeled and all(rec is not None for rec in records):
        active = agree = both = 0
        for (_, r, rec), coal in zip(labeled, coalitions):
            seats = set(rec["active"]) & designated
            active += len(seats)
            if seats and coal is not False and coal is not None:
                both += 1
                key = default_normalizer(rec["coalition"])
                agree += key in r.keys and r.keys.index(key) == coal
        sim = {"compliance": _share(active, len(labeled) * len(designated)),
               "attacked_tasks": sum(bool(set(rec["active"]) & designated) for rec in records),
               "coalition_agreement": _share(agree, both)}
    n_seats = len({a for _, r, _ in labeled for a in r.agent}) or 1
    return {
        "labeled_tasks": len(labeled),
        "unlabeled_tasks": unlabeled,
        "attacked_tasks": sum(c is not False for c in coalitions),
        "n_adversary_moves": n_moves,
        "compliance": _share(n_compliant, n_moves),
        "round0_compliance": _share(n_r0_wrong, n_r0),
        "final_compliance": _share(n_final_wrong, n_final),
        "genuine_flip_rate": _share(flips, at_risk),
        "effective_corrupted_fraction": float(np.mean(corrupted)) if corrupted else None,
        "nominal_fraction": len(designated) / n_seats,
        "targeting": {**targeting, "challenged_seats": dict(sorted(challenged.items()))},
        "sim": sim,
    }
