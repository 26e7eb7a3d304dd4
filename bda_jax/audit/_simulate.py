"""A seeded simulator of confidence-routed broadcast runs with known ground truth ([Audit]
Fig. 1): :func:`simulate_broadcast`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ._assemble import PollRecord, SpeakRecord, assemble_log
from ._common import is_int
from ._log import BroadcastLog
from .._core.errors import DataError

__all__ = ["simulate_broadcast"]


def simulate_broadcast(seed: int, n_problems: int = 300, n_agents: int = 3, *, n_tiers: int = 6,
                       outer_rounds: int = 2, turns_per_round: int = 4, skill_sd: float = 0.5,
                       difficulty_spread: float = 3.0, link_strength: float = 0.15,
                       overconfidence: float = 1.5, score_noise: float = 0.8,
                       granularity: float | None = 0.1, invalid_rate: float = 0.1,
                       n_wrong_answers: int = 3, divergence_rate: float = 0.2,
                       divergence_mix: Sequence[float] = (0.2, 0.1, 0.1, 0.6),
                       cluster_size: int = 10) -> BroadcastLog:
    """Simulate a confidence-routed broadcast run ([Audit] Fig. 1) with known ground truth.

    Generative model (one numpy ``Generator(PCG64(seed))``, so the same arguments give the same
    log, bit for bit):

    * problems are split into ``n_tiers`` contiguous tiers "01", "02", ...; problem difficulty
      ``d ~ N(mu_tier, 1)`` with ``mu_tier`` spaced evenly over ``difficulty_spread``; agent skill
      ``a_i ~ N(0, skill_sd^2)``; each poll is correct with probability ``sigmoid(a_i - d)``.
    * a wrong poll answers one of ``n_wrong_answers`` problem-specific wrong answers (weights
      1, 1/2, 1/3, ...), so wrong answers coincide and plurality votes are non-trivial;
    * the stated score is ``sigmoid(overconfidence + link_strength * (2y - 1) + N(0,
      score_noise^2))`` rounded to a multiple of ``granularity`` (ties), with ``y`` the poll's
      latent correctness: over-confident (mean well above accuracy) and only weakly linked to
      correctness for small ``link_strength``;
    * with probability ``invalid_rate`` the candidate is unparsable (null) but the score stays;
    * the runtime router (:func:`~bda_jax.audit.runtime_argmax`) selects; the selected agent
      speaks. With probability ``divergence_rate`` its spoken answer differs from its poll
      candidate, by a source drawn with weights ``divergence_mix`` = (self-revert to one of the
      speaker's own earlier *spoken* answers — its public answers, the ones the audit's
      self-revert flag looks for, not its private polls; incumbent pull; peer echo of another
      agent's earlier spoken answer; novel answer), each differing from the poll candidate. An
      unavailable source (no such earlier answer, no incumbent) falls back to a novel answer: a
      fresh draw from the problem's answers other than the poll candidate (which may, by
      chance, repeat an earlier public answer). The incumbent after each outer round is the
      plurality of that round's spoken answers (latest wins ties) and persists;
      ``earlier_public`` lists all earlier spoken answers of the problem; equivalence is exact
      matching (source "exact").
    * clusters: chunks of at most ``cluster_size`` consecutive problems within a tier.

    Returns a :class:`BroadcastLog` with ``n_problems * outer_rounds * turns_per_round`` blocks of
    ``n_agents`` polls each and one speak record per block.
    """
    for name, value in (("n_problems", n_problems), ("n_agents", n_agents), ("n_tiers", n_tiers),
                        ("outer_rounds", outer_rounds), ("turns_per_round", turns_per_round),
                        ("n_wrong_answers", n_wrong_answers)):
        if not is_int(value) or value < 1:
            raise DataError(f"{name} must be a positive integer, got {value!r}", field=name)
    for name, value in (("invalid_rate", invalid_rate), ("divergence_rate", divergence_rate)):
        if not 0.0 <= value <= 1.0:
            raise DataError(f"{name} must lie in [0, 1], got {value!r}", field=name)
    if granularity is not None and not 0.0 < granularity <= 1.0:
        raise DataError(f"granularity must lie in (0, 1] or be None, got {granularity!r}",
                        field="granularity")
    mix = np.asarray(divergence_mix, np.float64)
    if mix.shape != (4,) or (mix < 0).any() or mix.sum() <= 0:
        raise DataError("divergence_mix must be 4 non-negative weights (self-revert, incumbent "
                        "pull, peer echo, novel) with a positive sum", field="divergence_mix")
    mix = mix / mix.sum()
    rng = np.random.Generator(np.random.PCG64(seed))
    agents = [f"a{i}" for i in range(n_agents)]
    skill = rng.normal(0.0, skill_sd, n_agents)
    tier_idx = np.minimum((np.arange(n_problems) * n_tiers) // n_problems, n_tiers - 1)
    tier_mu = np.linspace(-difficulty_spread / 2, difficulty_spread / 2, n_tiers)
    difficulty = rng.normal(tier_mu[tier_idx], 1.0)
    wrong_weights = 1.0 / np.arange(1, n_wrong_answers + 1)
    wrong_weights /= wrong_weights.sum()
    polls: list[PollRecord] = []
    speaks: list[SpeakRecord] = []
    for q in range(n_problems):
        problem, tier = f"p{q:05d}", f"{tier_idx[q] + 1:02d}"
        answers = rng.choice(np.arange(10, 10_000), n_wrong_answers + 1, replace=False)
        gold, wrong = str(answers[0]), [str(a) for a in answers[1:]]
        p_correct = 1.0 / (1.0 + np.exp(-(skill - difficulty[q])))
        incumbent = None
        public: list[tuple[str, str]] = []

        def fresh(i, exclude=None):
            pool = [gold] + wrong
            weights = np.concatenate([[p_correct[i]], (1 - p_correct[i]) * wrong_weights])
            if exclude is not None:
                keep = [k for k, a in enumerate(pool) if a != exclude]
                pool, weights = [pool[k] for k in keep], weights[keep]
            return pool[rng.choice(len(pool), p=weights / weights.sum())]

        for o in range(outer_rounds):
            round_spoken: list[str] = []
            for t in range(turns_per_round):
                y = rng.random(n_agents) < p_correct
                latent = overconfidence + link_strength * (2 * y - 1) + rng.normal(
                    0.0, score_noise, n_agents)
                score = 1.0 / (1.0 + np.exp(-latent))
                if granularity is not None:
                    score = np.clip(np.round(score / granularity) * granularity, 0.0, 1.0)
                parsed = rng.random(n_agents) >= invalid_rate
                wrong_pick = rng.choice(n_wrong_answers, n_agents, p=wrong_weights)
                cands = [(gold if y[i] else wrong[wrong_pick[i]]) if parsed[i] else None
                         for i in range(n_agents)]
                chosen = int(np.argmax(score))           # first listed wins ties
                for i, agent in enumerate(agents):
                    polls.append(PollRecord((None, ""), problem, tier, None, o, t, agent,
                                            float(score[i]), cands[i],
                                            None if cands[i] is None else bool(y[i]),
                                            i == chosen))
                speaker, poll_cand = agents[chosen], cands[chosen]
                if rng.random() < divergence_rate:
                    source = rng.choice(4, p=mix)
                    options: list[str] = []
                    if source == 0:         # the speaker's own earlier *spoken* answers
                        options = [a for who, a in public if who == speaker and a != poll_cand]
                    elif source == 1 and incumbent is not None and incumbent != poll_cand:
                        options = [incumbent]
                    elif source == 2:
                        options = [a for who, a in public if who != speaker and a != poll_cand]
                    spoken = (options[rng.integers(len(options))] if options
                              else fresh(chosen, exclude=poll_cand))
                elif poll_cand is not None:
                    spoken = poll_cand
                else:
                    spoken = None if rng.random() < invalid_rate else fresh(chosen)
                equivalence = (None if spoken is None or poll_cand is None else
                               "equivalent" if spoken == poll_cand else "divergent")
                speaks.append(SpeakRecord((None, ""), problem, o, t, speaker, spoken,
                                          None if spoken is None else spoken == gold, incumbent,
                                          tuple(public), equivalence,
                                          None if equivalence is None else "exact"))
                if spoken is not None:
                    public.append((speaker, spoken))
                    round_spoken.append(spoken)
            if round_spoken:
                counts: dict[str, int] = {}
                for a in round_spoken:
                    counts[a] = counts.get(a, 0) + 1
                top = max(counts.values())
                incumbent = [a for a in round_spoken if counts[a] == top][-1]
    return assemble_log(polls, speaks, error=DataError, cluster_size=cluster_size)

