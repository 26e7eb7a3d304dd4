"""Answer revisions -> typed moves: each agent's answer per round becomes ``propose`` /
``concede`` / ``retract`` moves ([BDA] §3; the two mappings of docs/datasets.md).

Shared by every LLM log importer (DASE histories, Du et al. and small-model debates).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .._core.errors import DataError
from .._core.traces import Move

__all__ = ["MOVE_MAPPINGS", "answers_said", "revisions_to_moves"]

#: The two ways answer revisions become moves (:func:`revisions_to_moves`).
MOVE_MAPPINGS = ("proposals", "typed")


def _move_id(rnd: int, agent: str, suffix: str = "") -> str:
    return f"r{rnd}.{agent}{suffix}"


def revisions_to_moves(rounds: Sequence[Mapping[str, str | None]], agents: Sequence[str] | None
                       = None, *, moves: str = "proposals", one_vote_per_round: bool = False,
                       extras: Mapping[tuple[str, int], Mapping[str, Any]] | None = None
                       ) -> list[Move]:
    """Turn each agent's answer per round into typed moves (file order = time).

    ``rounds[r][agent]`` is the agent's (already normalized) answer in round ``r``; ``None`` or a
    missing key means no usable answer that round (it makes no move, and the agent's standing
    answer stays what it last said). Agents move in the order of ``agents`` (default: first seen).

    ``moves="proposals"``: every answer is a ``propose`` of it, in every round (a plain re-vote).

    ``moves="typed"``: round-0 answers are proposals; in a later round, with ``p`` the agent's own
    standing answer (its last answer in an earlier round) and ``a`` its answer now:

    * ``a == p``: keeping one's answer is a re-``propose`` of it;
    * else, if some peer answered ``a`` in the previous round: a ``concede`` whose target is that
      peer's latest move holding ``a`` from an earlier round (the first such peer in agent
      order; never a move of the same round, which the agent had not seen);
    * else (``a`` is new: no peer said it in the previous round): a ``retract`` of one's own move
      that holds ``p`` followed by a ``propose`` of ``a`` (only the propose if the agent had no
      answer yet).

    ``one_vote_per_round=True`` drops re-proposals in either mapping, so only new information
    counts: an unchanged answer makes no move (an agent's endorsement of an answer enters once,
    not once per round it repeats it -- the "vocal agent" effect of [BDA] Appendix D.5). This
    is not the same as ``bda_jax.tally(..., one_move_per_round=True)``, which keeps an agent's last
    informative move in each round (e.g. only the propose of a retract + propose pair); the two
    compose and the latter is not duplicated here.

    Move ids are ``r{round}.{agent}`` (``r{round}.{agent}.retract`` for the retract). ``extras``
    maps ``(agent, round)`` to extra keys stored on that round's answer move.

    >>> ms = revisions_to_moves([{"a": "1", "b": "2"}, {"a": "2", "b": "3"}], moves="typed")
    >>> [(m.id, m.force, m.target or m.answer) for m in ms]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('r0.a', 'propose', '1'), ('r0.b', 'propose', '2'), ('r1.a', 'concede', 'r0.b'),
     ('r1.b.retract', 'retract', 'r0.b'), ('r1.b', 'propose', '3')]
    """
    if moves not in MOVE_MAPPINGS:
        raise DataError(f"moves must be one of {MOVE_MAPPINGS}, got {moves!r}", field="moves")
    if agents is None:
        agents = list(dict.fromkeys(a for rnd in rounds for a in rnd))
    extras = extras or {}
    out: list[Move] = []
    standing: dict[str, str] = {}           # agent -> its current answer
    holder: dict[tuple[str, str], str] = {}  # (agent, answer) -> id of its latest move holding it
    previous: dict[str, str | None] = {}    # answers said in the previous round
    for rnd, said in enumerate(rounds):
        seen_before = dict(holder)          # moves of earlier rounds only: what agents saw
        for agent in agents:
            answer = said.get(agent)
            if answer is None:
                continue
            extra = dict(extras.get((agent, rnd), {}))
            own = standing.get(agent)
            mid = _move_id(rnd, agent)
            if own == answer:
                if not one_vote_per_round:
                    out.append(Move(mid, agent, rnd, "propose", answer, extra=extra))
                    holder[(agent, answer)] = mid
                continue
            if moves == "typed" and rnd > 0:
                peer = next((p for p in agents if p != agent and previous.get(p) == answer), None)
                if peer is not None:
                    target = seen_before[(peer, answer)]
                    out.append(Move(mid, agent, rnd, "concede", answer=answer, target=target,
                                    extra=extra))
                    holder[(agent, answer)] = mid
                    standing[agent] = answer
                    continue
                if own is not None:
                    out.append(Move(mid + ".retract", agent, rnd, "retract",
                                    target=holder[(agent, own)]))
            out.append(Move(mid, agent, rnd, "propose", answer, extra=extra))
            holder[(agent, answer)] = mid
            standing[agent] = answer
        previous = {a: said.get(a) for a in agents}
    return out


def answers_said(moves: Sequence[Move]) -> tuple[str, ...]:
    """Open answer space of a task: the distinct answers its moves state, first said first.

    The candidates of an open-answer task (GSM8K, AIME); gold is never added (a task whose gold
    nobody said is ``gold_missing``, docs/trace-format.md).

    >>> answers_said(revisions_to_moves([{"a": "7", "b": "3"}, {"a": "3", "b": "3"}]))
    ('7', '3')
    """
    return tuple(dict.fromkeys(m.answer for m in moves if m.answer is not None))

