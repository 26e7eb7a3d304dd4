"""The posterior table of a trace set under a shared one-coin prior (the first part of
``bda demo``)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._core.errors import DataError
from .._core.traces import Trace

__all__ = ["posterior_table"]


def posterior_table(traces: Sequence[Trace], mean: float = 0.6, strength: float = 4.0,
                    seed: int = 0, source: str | None = None) -> dict:
    """Each task's one-coin posterior under the shared prior Beta(b s, (1 - b) s) for every agent
    ([BDA] Eqs. 1-3 with kappa = 0: ``mean`` b, ``strength`` s), its BDA answer (argmax, seeded
    random tie-break) and the round-0 plurality.

    Returns ``{"traces": source, "alpha", "beta", "rows"}``, one row per task: ``task_id``,
    ``candidates``, ``proba`` (the posterior over them), ``bda`` and ``confidence``,
    ``majority`` and ``majority_share``, ``gold`` (``None`` if unlabeled, ``"(not a candidate)"``
    for a gold outside the candidates), ``labeled``, ``bda_correct``, ``majority_correct``.

    >>> from bda_jax.simulate import simulate_council
    >>> table = posterior_table(simulate_council(0, 2, [0.8, 0.7, 0.6]), mean=0.7, strength=8)
    >>> table["alpha"], len(table["rows"]), sorted(table["rows"][0])[:3]
    (5.6, 2, ['bda', 'bda_correct', 'candidates'])
    """
    import jax

    from .._core.counts import tally
    from .._core.decisions import decide, majority
    from .._core.kernels import onecoin_log_posterior

    if not 0.0 < mean < 1.0:
        raise DataError(f"the prior mean must be in (0, 1), got {mean!r}", field="mean")
    if not strength > 0:
        raise DataError(f"the prior strength must be > 0, got {strength!r}", field="strength")
    counts = tally(list(traces))
    I = counts.N.shape[1]
    alpha = np.full(I, mean * strength)
    beta = np.full(I, (1.0 - mean) * strength)
    key_bda, key_maj = jax.random.split(jax.random.key(seed))
    post = decide(key_bda, onecoin_log_posterior(counts, alpha, beta), counts.mask)
    vote = majority(key_maj, counts)
    proba = np.asarray(post.proba)
    rows = []
    for t, task_id in enumerate(counts.task_ids):
        cands = counts.candidates[t]
        g = int(counts.gold[t])
        rows.append({
            "task_id": task_id, "candidates": list(cands),
            "proba": [float(proba[t, k]) for k in range(len(cands))],
            "bda": cands[int(post.index[t])], "confidence": float(post.confidence[t]),
            "majority": cands[int(vote.index[t])],
            "majority_share": float(vote.confidence[t]),
            "gold": cands[g] if g >= 0 else (None if not counts.gold_missing[t]
                                             else "(not a candidate)"),
            "labeled": bool(g >= 0 or counts.gold_missing[t]),
            "bda_correct": bool(int(post.index[t]) == g),
            "majority_correct": bool(int(vote.index[t]) == g)})
    return {"traces": source, "alpha": float(alpha[0]), "beta": float(beta[0]), "rows": rows}
