"""Live DASE stopping ([DASE] §3; docs/stopping.md): feed one round of answers at a time to the
same per-round step functions the batched rules scan, read whether to stop."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import DataError
from ._encoding import answer_key
from ._rules import (COMMITS, RULES, RUNNING, ArenaParams, HeuristicParams, heuristic_step,
                     init_rule_state, spatial_step)

__all__ = ["StopDecision", "Stopper"]


class StopDecision(NamedTuple):
    """One round's verdict: ``stop``; ``commit`` (a :data:`COMMITS` kind, None while running);
    ``answer`` (None while running or when nobody answered); ``x`` the arena position (streak
    for the heuristic); ``g`` this round's score; ``step`` rounds seen."""

    stop: bool
    commit: str | None
    answer: str | None
    x: int
    g: float
    step: int


def _check_empty_g(empty_g) -> None:
    """``empty_g`` must be a real number in [0, 1] (NaN is not)."""
    if isinstance(empty_g, bool) or not isinstance(empty_g, (int, float, np.integer,
                                                             np.floating)) \
            or not 0.0 <= float(empty_g) <= 1.0:
        raise DataError(f"empty_g must be a number in [0, 1], got {empty_g!r}", field="empty_g")


_spatial_step_jit = jax.jit(spatial_step)
_heuristic_step_jit = jax.jit(heuristic_step)


class Stopper:
    """Live DASE stopping: feed each round's answers, read whether to stop.

    ``Stopper(rule="spatial", W=4, L=15, empty_g=0.0)`` or ``Stopper(rule="heuristic", k=4)``;
    ``update(answers)`` takes the round's n answers (str, or None / "empty" / "" for none) and
    returns a :class:`StopDecision`. It runs the same per-round function as the batched rules.
    ``W``, ``k``, ``L``, ``n`` must be positive integers and ``empty_g`` (the score of an
    all-empty round) a number in [0, 1]; anything else raises :class:`~bda_jax.DataError`
    naming the argument.

    >>> s = Stopper("spatial", W=2)
    >>> s.update(["5", "5", "5", "5", "5"]).stop, s.update(["5", "5", "5", "5", "2"])[:3]
    (False, (True, 'right_wall', '5'))
    """

    def __init__(self, rule: str = "spatial", *, W: int = 4, k: int = 4, L: int = 15, n: int = 5,
                 empty_g: float = 0.0, w: float = 0.2, cx: float = 0.01,
                 normalize: bool = False, benchmark: str = "aime"):
        if rule not in RULES:
            raise DataError(f"rule must be one of {RULES}, got {rule!r}", field="rule")
        for name, v in (("W", W), ("k", k), ("L", L), ("n", n)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise DataError(f"{name} must be a positive integer, got {v!r}", field=name)
        _check_empty_g(empty_g)
        self.rule, self.L, self.n = rule, int(L), int(n)
        self.normalize, self.benchmark = normalize, benchmark
        if rule == "spatial":
            self._params = ArenaParams(jnp.int32(W), jnp.float32(empty_g), jnp.float32(w),
                                       jnp.float32(cx))
            self._step = _spatial_step_jit
        else:
            self._params = HeuristicParams(jnp.int32(k))
            self._step = _heuristic_step_jit
        self.reset()

    def reset(self) -> None:
        self._vocab: dict[str, int] = {}
        self._state = init_rule_state(self.n * self.L)
        self.decision: StopDecision | None = None

    def update(self, answers: Sequence[str | None]) -> StopDecision:
        if self.decision is not None and self.decision.stop:
            raise DataError("the stopper has already committed; call reset()", field="answers")
        if len(answers) != self.n:
            raise DataError(f"expected {self.n} answers, got {len(answers)}", field="answers")
        ids = [-1 if (key := answer_key(a, self.normalize, self.benchmark)) is None
               else self._vocab.setdefault(key, len(self._vocab)) for a in answers]
        last = int(self._state.t) + 1 >= self.L
        self._state, (g, x, _) = self._step(self._params, self._state,
                                            jnp.asarray(ids, jnp.int32), jnp.bool_(True),
                                            jnp.bool_(last))
        commit = int(self._state.commit)
        names = list(self._vocab)
        answer = int(self._state.answer)
        self.decision = StopDecision(commit != RUNNING, None if commit == RUNNING
                                     else COMMITS[commit],
                                     names[answer] if answer >= 0 else None, int(x), float(g),
                                     int(self._state.t))
        return self.decision
