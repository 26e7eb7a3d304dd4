"""The broadcast log data model ([Audit] Fig. 1 and Appendix Table 7): :class:`BroadcastLog`.

The audited protocol: in every discussion turn each agent is *polled* privately for a candidate
answer and a confidence score; the router hands the floor to the most confident agent, which
then *speaks* publicly, and its spoken answer may differ from the answer it polled.
docs/audit.md pins the reading used here: a **block** is one poll round, identified by
``(problem, outer_round, turn)``; a **valid candidate** is a parsed, normalized and labeled
answer.

A log is built by the readers of :mod:`bda_jax.audit` (``read_broadcast_log``,
``from_records``, ``from_frame``: the JSON Lines format of docs/audit.md), by
``simulate_broadcast`` and by ``load_confmad``; all of them go through ``assemble_log``, so every
log satisfies the same cross-record checks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._core.errors import DataError

__all__ = ["BroadcastLog", "EQUIVALENCE_LABELS"]

EQUIVALENCE_LABELS = ("equivalent", "divergent")
"""Values of a speak record's ``equivalence``: the spoken answer matches the speaker's poll
candidate, or not (None: no verdict)."""


@dataclass(frozen=True, eq=False)
class BroadcastLog:
    """Columnar poll and speak tables of a broadcast deliberation log ([Audit] Fig. 1).

    **Poll table**, one row per (block, agent), ``R`` rows ordered by block and, within a block,
    by listing order; every array is [R]:

    ``problem``, ``tier``, ``cluster``, ``agent`` (object arrays of str; the JSON Lines, record
    and frame readers store agent and speaker ids NFKC-normalized and stripped); ``outer_round``,
    ``turn``, ``position`` (listing order within the block, 0-based) and ``block`` (block index
    in [0, B)) int64; ``score`` float64 (NaN: not stated); ``candidate`` object (normalized str or
    None); ``valid`` bool (candidate present and labeled); ``correct`` bool (False unless valid);
    ``selected`` bool (the runtime router's pick).

    **Blocks**: ``B`` poll rounds ``(problem, outer_round, turn)`` in order of first appearance;
    the rows of block ``b`` are ``block_start[b]:block_start[b+1]`` (``block_start`` [B+1]).

    **Speak table**, ``S`` rows ordered by block, every array [S]: ``speak_block`` int64;
    ``speaker``, ``spoken``, ``incumbent``, ``equivalence``, ``equivalence_source`` object (str or
    None); ``spoken_valid`` and ``spoken_correct`` bool (as for polls); ``earlier_public`` object,
    each a tuple of ``(agent or None, answer)`` pairs, oldest first; ``speak_poll_row`` int64, the
    poll row of the speaker in its block.
    """

    problem: np.ndarray
    tier: np.ndarray
    cluster: np.ndarray
    outer_round: np.ndarray
    turn: np.ndarray
    agent: np.ndarray
    position: np.ndarray
    score: np.ndarray
    candidate: np.ndarray
    valid: np.ndarray
    correct: np.ndarray
    selected: np.ndarray
    block: np.ndarray
    block_start: np.ndarray
    speak_block: np.ndarray
    speaker: np.ndarray
    spoken: np.ndarray
    spoken_valid: np.ndarray
    spoken_correct: np.ndarray
    incumbent: np.ndarray
    earlier_public: np.ndarray
    equivalence: np.ndarray
    equivalence_source: np.ndarray
    speak_poll_row: np.ndarray

    # ------------------------------------------------------------------ sizes and block views
    @property
    def n_polls(self) -> int:
        return int(self.block.size)

    @property
    def n_blocks(self) -> int:
        return int(self.block_start.size - 1)

    @property
    def n_speaks(self) -> int:
        return int(self.speak_block.size)

    @property
    def block_size(self) -> np.ndarray:
        """[B] number of polled agents per block."""
        return np.diff(self.block_start)

    def _per_block(self, column: np.ndarray) -> np.ndarray:
        return column[self.block_start[:-1]]

    @property
    def block_problem(self) -> np.ndarray:
        """[B] problem id of each block."""
        return self._per_block(self.problem)

    @property
    def block_tier(self) -> np.ndarray:
        return self._per_block(self.tier)

    @property
    def block_cluster(self) -> np.ndarray:
        """[B] bootstrap cluster of each block (pass it to ``cluster_bootstrap``)."""
        return self._per_block(self.cluster)

    @property
    def block_outer_round(self) -> np.ndarray:
        return self._per_block(self.outer_round)

    @property
    def block_turn(self) -> np.ndarray:
        return self._per_block(self.turn)

    @property
    def block_speak(self) -> np.ndarray:
        """[B] row of each block's speak record in the speak table, -1 where none."""
        out = np.full(self.n_blocks, -1, np.int64)
        out[self.speak_block] = np.arange(self.n_speaks)
        return out

    @property
    def problems(self) -> list[str]:
        """Problem ids in order of first appearance."""
        return list(dict.fromkeys(self.problem.tolist()))

    def padded(self, column, fill) -> np.ndarray:
        """[B, A] view of a poll column ([R]), A = the largest block; ``fill`` pads short blocks.

        >>> from bda_jax.audit import from_records
        >>> log = from_records([
        ...     {"kind": "poll", "problem": 1, "outer_round": 0, "turn": 0, "agent": "a",
        ...      "score": 0.9, "candidate": "x", "correct": True},
        ...     {"kind": "poll", "problem": 1, "outer_round": 0, "turn": 1, "agent": "a",
        ...      "score": 0.4, "candidate": "y", "correct": False},
        ...     {"kind": "poll", "problem": 1, "outer_round": 0, "turn": 1, "agent": "b",
        ...      "score": 0.7, "candidate": None, "correct": None}])
        >>> log.padded(log.score, np.nan).tolist()
        [[0.9, nan], [0.4, 0.7]]
        """
        column = np.asarray(column)
        if column.shape[:1] != (self.n_polls,):
            raise DataError(f"column must be [R] = [{self.n_polls}], got shape {column.shape}",
                            field="column")
        width = int(self.block_size.max()) if self.n_blocks else 0
        out = np.full((self.n_blocks, width) + column.shape[1:], fill,
                      dtype=np.result_type(column.dtype, np.asarray(fill).dtype)
                      if column.dtype != object else object)
        out[self.block, self.position] = column
        return out

    # ------------------------------------------------------------------ equality
    def __eq__(self, other) -> bool:
        if not isinstance(other, BroadcastLog):
            return NotImplemented
        for name in self.__dataclass_fields__:
            a, b = getattr(self, name), getattr(other, name)
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.dtype.kind == "f":
                if not np.array_equal(a, b, equal_nan=True):
                    return False
            elif not all(x == y for x, y in zip(a.tolist(), b.tolist())):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"BroadcastLog({len(self.problems)} problems, {self.n_blocks} blocks, "
                f"{self.n_polls} polls, {self.n_speaks} speak records)")

    # ------------------------------------------------------------------ records
    def to_records(self) -> list[dict]:
        """The log as JSON-ready records (the file format): per block, its polls then its speak."""
        out: list[dict] = []
        speak_of = self.block_speak
        for b in range(self.n_blocks):
            for r in range(self.block_start[b], self.block_start[b + 1]):
                rec: dict[str, Any] = {
                    "kind": "poll", "problem": self.problem[r],
                    "outer_round": int(self.outer_round[r]), "turn": int(self.turn[r]),
                    "agent": self.agent[r],
                    "score": None if math.isnan(self.score[r]) else float(self.score[r]),
                    "candidate": self.candidate[r],
                    "correct": bool(self.correct[r]) if self.valid[r] else None,
                    "selected": bool(self.selected[r]),
                    "tier": self.tier[r] if self.tier[r] != "" else None,
                    "cluster": self.cluster[r]}
                out.append(rec)
            s = speak_of[b]
            if s >= 0:
                out.append({
                    "kind": "speak", "problem": self.problem[self.block_start[b]],
                    "outer_round": int(self.outer_round[self.block_start[b]]),
                    "turn": int(self.turn[self.block_start[b]]), "speaker": self.speaker[s],
                    "spoken": self.spoken[s],
                    "spoken_correct": (bool(self.spoken_correct[s]) if self.spoken_valid[s]
                                       else None),
                    "incumbent": self.incumbent[s],
                    "earlier_public": [answer if agent is None
                                       else {"agent": agent, "answer": answer}
                                       for agent, answer in self.earlier_public[s]],
                    "equivalence": self.equivalence[s],
                    "equivalence_source": self.equivalence_source[s]})
        return out

