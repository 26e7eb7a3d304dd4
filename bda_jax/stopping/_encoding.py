"""Answers -> the integer batch the stopping rules read: per-problem answer ids in first-seen
order (so "ties go to the first seen" is "ties go to the smallest id"), -1 for an empty answer.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core.errors import DataError
from ..datasets import normalize_dase_answer

__all__ = ["EncodedBatch", "answer_key", "encode_answers"]


def answer_key(answer: str | None, normalize: bool = False, benchmark: str = "aime"
               ) -> str | None:
    """The identity of one answer: None if empty (``None``, ``"empty"``, ``""``, anything
    :func:`bda_jax.datasets.normalize_dase_answer` maps to None); else the raw string (what the
    DASE runtime compared) or, with ``normalize=True``, its normalized form.

    >>> answer_key("(B)"), answer_key("(B)", normalize=True, benchmark="gpqa"), answer_key("")
    ('(B)', 'B', None)
    """
    if answer is None:
        return None
    if not isinstance(answer, str):
        raise DataError(f"an answer must be a string or None, got {type(answer).__name__}",
                        field="answers")
    key = normalize_dase_answer(answer, benchmark)
    if key is None or normalize:
        return key
    return answer


class EncodedBatch(NamedTuple):
    """``ids`` [B, R, n] int32 (-1 empty), ``mask`` [B, R] bool recorded rounds, ``vocab`` one
    tuple of answer strings per problem (id j is ``vocab[b][j]``, first seen first)."""

    ids: jax.Array
    mask: jax.Array
    vocab: tuple


def encode_answers(problems: Sequence[Sequence[Sequence[str | None]]], *, n: int | None = None,
                   rounds: int | None = None, normalize: bool = False,
                   benchmark: str = "aime") -> EncodedBatch:
    """Encode problems (each a list of rounds, each a list of n answers) as :class:`EncodedBatch`.

    ``None``, ``"empty"`` and ``""`` are empty (:func:`answer_key`). Answers are compared as
    given (the DASE runtime's string identity) unless ``normalize=True`` merges surface forms
    (``625`` = ``$\\boxed{625}$``, ``A`` = ``(A)``).
    ``rounds`` pads R (default: the longest problem).

    >>> enc = encode_answers([[["7", "7", None, "3", "7"], ["3", "3", "3", "3", "empty"]]])
    >>> enc.ids.tolist(), enc.vocab
    ([[[0, 0, -1, 1, 0], [1, 1, 1, 1, -1]]], (('7', '3'),))
    """
    if not problems:
        raise DataError("no problem to encode", field="problems")
    n = n or max(len(r) for p in problems for r in p)
    R = max(rounds or 0, max(len(p) for p in problems))
    ids = np.full((len(problems), R, n), -1, np.int32)
    mask = np.zeros((len(problems), R), bool)
    vocab = []
    for b, problem in enumerate(problems):
        seen: dict[str, int] = {}
        for t, answers in enumerate(problem):
            if len(answers) != n:
                raise DataError(f"problem {b} round {t + 1} has {len(answers)} answers, "
                                f"expected {n}", field="answers")
            for s, ans in enumerate(answers):
                key = answer_key(ans, normalize, benchmark)
                if key is not None:
                    ids[b, t, s] = seen.setdefault(key, len(seen))
            mask[b, t] = True
        vocab.append(tuple(seen))
    return EncodedBatch(jnp.asarray(ids), jnp.asarray(mask), tuple(vocab))
