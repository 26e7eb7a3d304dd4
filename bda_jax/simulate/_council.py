"""A council simulator that is *not* BDA's own generative model (docs/simulator.md).

BDA reads every informative move as an independent draw from a per-agent categorical noise model
([BDA] §3). A simulator that drew moves that way would make BDA calibrated by construction and
test nothing. This one reproduces what real councils do instead ([BDA] §5, Appendix D.7, F.14):

* **Shared question difficulty.** Every question q has a latent logit shift ``difficulty_sd * z_q``
  shared by all seats and all seeds, plus a per-(question, seat) shift ``seat_question_sd * u_qi``
  shared by the seeds of q. Seat i answers correctly in round 0 with probability
  ``sigmoid(a_i + difficulty_sd * z_q + seat_question_sd * u_qi)``, so errors are correlated
  across seats and across seeds. The intercepts ``a_i`` are calibrated (:func:`seat_intercepts`)
  so that the round-0 accuracy of seat i, averaged over questions, equals ``reliabilities[i]``.
* **An attractive wrong answer.** Each question has a distractor; a wrong seat picks it with extra
  probability ``distractor_pull`` (K > 2), so wrong seats tend to agree with each other.
* **Interaction.** Rounds >= 1: seats move one at a time (a fresh random order per round), each
  seeing every earlier move, and make one typed move among propose / concede / challenge that
  depends on the answers visible so far, their private belief and the challenges they received.
* **Contagion and adversaries.** An honest seat flips to the visible plurality (or to an active
  coalition's answer) with probability ``contagion``; adversarial seats argue a fixed wrong answer.
* **Stated confidences** are noisy and over-confident; BDA never reads them (Property 3).

Only numpy is used; the dynamics are vectorized over traces (one step per round and seat
position), and a final Python loop turns the arrays into :class:`~bda_jax.Trace` objects.
"""
from __future__ import annotations

import math
import string
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .._core.errors import DataError
from .._core.normalize import default_normalizer, normalize_id
from .._core.traces import Move, Trace, mark_field_checked

__all__ = ["Behavior", "simulate_council", "seat_intercepts", "default_labels"]

_PROPOSE, _CONCEDE, _CHALLENGE = 0, 1, 2
_FORCE_NAMES = ("propose", "concede", "challenge")
_HERMITE = np.polynomial.hermite.hermgauss(96)


@dataclass(frozen=True)
class Behavior:
    """How seats deliberate in rounds >= 1 (all on the logit scale unless a rate).

    Attributes:
      belief_signal: a seat's private signal is ``eta + belief_signal * (+1 if right else -1) +
        belief_noise * N(0, 1)``, where ``eta`` is its logit of being right on the question; the
        signal is its log-odds *belief* in its current answer (so wrong seats are less sure).
      belief_noise: standard deviation of that signal's noise.
      conformity: weight of the support margin ``n_rival - n_own`` (other seats holding the
        strongest rival answer minus other seats holding the seat's own answer) in the flip logit.
      flip_bias: intercept of the flip logit ``flip_bias + conformity * margin - belief``.
      challenge_bias: a seat that keeps its answer while another seat holds a different one
        challenges that seat's latest answer with probability ``sigmoid(challenge_bias + belief)``.
      challenge_impact: each challenge a seat receives lowers its belief by this much (log-odds).
      agree_rate: otherwise, a seat that shares its answer with another seat concedes to that seat's
        latest move (an agreement concede) with this probability, else it re-proposes its answer.
      adversary_challenge: probability that an active adversary challenges a seat holding another
        answer (it picks a seat holding the gold answer first).
      adversary_relent: per move in rounds >= 1, probability that an active adversary abandons the
        attack for the rest of the task: it concedes to the latest move holding the gold answer
        (or re-proposes gold when no other seat holds it) and deliberates honestly from then on,
        with belief ``|belief|`` in gold. Live adversaries do this ([BDA] Appendix G.1: their
        full-trace r_i is 0.21 / 0.29 against about 0.07 in round 0); 0 keeps every complying
        adversary wrong in every round.
      overconfidence: stated confidence is ``sigmoid(belief + overconfidence + 0.5 * N(0, 1))``,
        clipped to ``[1/K, 0.99]`` and rounded to two decimals.
    """

    belief_signal: float = 0.25
    belief_noise: float = 1.0
    conformity: float = 1.0
    flip_bias: float = -2.0
    challenge_bias: float = -2.75
    challenge_impact: float = 0.3
    agree_rate: float = 0.5
    adversary_challenge: float = 0.7
    adversary_relent: float = 0.0
    overconfidence: float = 1.0


def seat_intercepts(reliabilities, scale: float) -> np.ndarray:
    """Intercepts ``a_i`` with ``E[sigmoid(a_i + scale * Z)] = reliabilities[i]``, Z ~ N(0, 1).

    ``scale = sqrt(difficulty_sd**2 + seat_question_sd**2)`` is the standard deviation of the
    question-level logit shift. Solved by bisection on a 96-node Gauss-Hermite quadrature (error
    below 1e-9), so the round-0 accuracy of an honest seat averaged over questions is its
    reliability.

    >>> a = seat_intercepts([0.6, 0.7], 0.0)     # no difficulty spread: a_i = logit(r_i)
    >>> [round(float(x), 4) for x in a]
    [0.4055, 0.8473]
    >>> round(float(seat_intercepts([0.7], 1.0)[0]), 4)   # a spread needs a larger intercept
    1.0184
    """
    r = np.asarray(reliabilities, dtype=np.float64)
    nodes, weights = _HERMITE
    shift = math.sqrt(2.0) * float(scale) * nodes
    w = weights / math.sqrt(math.pi)
    lo, hi = np.full(r.shape, -60.0), np.full(r.shape, 60.0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        mean = (_sigmoid(mid[..., None] + shift) * w).sum(-1)
        lo, hi = np.where(mean < r, mid, lo), np.where(mean < r, hi, mid)
    return 0.5 * (lo + hi)


def default_labels(k: int, binary: bool = True) -> list[str]:
    """``["True", "False"]`` for a fixed binary council, else ``A, B, ..., Z, AA, AB, ...``."""
    if k == 2 and binary:
        return ["True", "False"]
    out = []
    for n in range(k):
        name, n = "", n + 1
        while n:
            n, rem = divmod(n - 1, 26)
            name = string.ascii_uppercase[rem] + name
        out.append(name)
    return out


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _prob(x, name):
    x = float(x)
    if not 0.0 <= x <= 1.0:
        raise DataError(f"{name} must be a probability in [0, 1], got {x}", field=name)
    return x


def _adversary_rates(adversaries, I):
    rates = np.zeros(I)
    if adversaries is None:
        return rates
    items = adversaries.items() if isinstance(adversaries, Mapping) else \
        ((seat, 1.0) for seat in adversaries)
    for seat, p in items:
        if isinstance(seat, bool) or not isinstance(seat, (int, np.integer)) or not 0 <= seat < I:
            raise DataError(f"adversary seat must be an index in [0, {I}), got {seat!r}",
                            field="adversaries")
        rates[int(seat)] = _prob(p, "adversaries")
    return rates


def _k_range(n_candidates):
    if isinstance(n_candidates, (int, np.integer)) and not isinstance(n_candidates, bool):
        lo = hi = int(n_candidates)
    else:
        try:
            lo, hi = (int(v) for v in n_candidates)
        except (TypeError, ValueError):
            raise DataError(f"n_candidates must be an int or a (min, max) pair, got "
                            f"{n_candidates!r}", field="n_candidates") from None
    if not 2 <= lo <= hi:
        raise DataError(f"n_candidates needs 2 <= min <= max, got {n_candidates!r}",
                        field="n_candidates")
    return lo, hi


def simulate_council(seed: int, n_questions: int, reliabilities: Sequence[float], *,
                     n_candidates: int | tuple[int, int] = 2, n_rounds: int = 3,
                     seeds_per_question: int = 1, difficulty_sd: float = 1.0,
                     seat_question_sd: float = 0.5, seed_persistence: float = 0.5,
                     distractor_pull: float = 0.5,
                     contagion: float = 0.0,
                     adversaries: Sequence[int] | Mapping[int, float] | None = None,
                     adversary_target: str = "distractor",
                     behavior: Behavior = Behavior(),
                     candidate_labels: Sequence[str] | None = None,
                     agent_names: Sequence[str] | None = None,
                     metadata: bool = True) -> list[Trace]:
    """Simulate deliberation traces of a council with correlated errors.

    Args:
      seed: integer seed of a ``numpy.random.Generator``; equal seeds give identical traces.
      n_questions: number of questions Q; the result holds ``Q * seeds_per_question`` traces.
      reliabilities: [I] round-0 accuracy of each seat averaged over questions, each in (0, 1)
        (for an adversary: its accuracy on the tasks where it does not comply).
      n_candidates: K, or a ``(min, max)`` pair: each question draws K uniformly in that range.
      n_rounds: R >= 1. Round 0: every seat proposes (in seat order); rounds 1..R-1: every seat
        makes one move among propose / concede / challenge, in a random order per round.
      seeds_per_question: S generation seeds of each question; they share gold, K, difficulty,
        distractor and per-seat shifts, and carry the question id as ``cluster``.
      difficulty_sd: sd of the question's logit shift shared by all seats (error correlation).
      seat_question_sd: sd of a per-(question, seat) logit shift shared across seeds.
      seed_persistence: probability that a seat's round-0 answer on seed s > 0 repeats its answer
        on seed 0 of the question (otherwise it is drawn afresh); marginal accuracy is unchanged.
      distractor_pull: extra probability that a wrong seat names the question's distractor
        (the rest of its wrong mass is uniform over the wrong candidates; moot at K = 2).
      contagion: per move, probability that an honest seat holding a minority answer flips to the
        plurality of the other seats (to the coalition's answer when an adversary is active).
      adversaries: seat indices that argue a fixed wrong answer on every task, or a mapping
        ``{seat: p}`` where the seat complies on each task (seed) with probability p and behaves
        honestly otherwise.
      adversary_target: the coalition's answer: ``"distractor"`` (the question's attractive wrong
        answer) or ``"shift"`` (candidate ``(gold + 1) mod K``: a label-systematic attack).
      behavior: deliberation parameters (:class:`Behavior`).
      candidate_labels: candidate strings (at least K_max; per-task K takes a prefix). Default:
        ``["True", "False"]`` when K is fixed at 2, else ``A, B, C, ...``.
      agent_names: seat names (default ``A1 .. AI``).
      metadata: add ``Trace.extra["sim"]`` with the question's ``difficulty`` (its shared logit
        shift, positive = harder), ``distractor``, ``coalition`` answer and the ``active``
        adversary seats. No model reads it.

    Returns:
      ``Q * S`` traces ordered by question then seed; task ids ``f"q{q}-s{s}"``, cluster ``f"q{q}"``,
      move ids ``m1 .. m{R*I}``, one move per seat per round.

    >>> traces = simulate_council(0, 2, [0.74, 0.68, 0.68], seeds_per_question=2)
    >>> [t.task_id for t in traces], traces[0].candidates, len(traces[0].moves)
    (['q0-s0', 'q0-s1', 'q1-s0', 'q1-s1'], ('True', 'False'), 9)
    """
    # ------------------------------------------------------------------ validate the options
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}", field="seed")
    for value, name, least in ((n_questions, "n_questions", 1), (n_rounds, "n_rounds", 1),
                               (seeds_per_question, "seeds_per_question", 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise DataError(f"{name} must be an integer >= {least}, got {value!r}", field=name)
    r = np.asarray(reliabilities, dtype=np.float64)
    if r.ndim != 1 or r.size < 1 or not np.all((r > 0) & (r < 1)):
        raise DataError(f"reliabilities must be a non-empty list of numbers in (0, 1), got "
                        f"{reliabilities!r}", field="reliabilities")
    for value, name in ((difficulty_sd, "difficulty_sd"), (seat_question_sd, "seat_question_sd")):
        if not (math.isfinite(value) and value >= 0):
            raise DataError(f"{name} must be finite and >= 0, got {value!r}", field=name)
    pull = _prob(distractor_pull, "distractor_pull")
    persistence = _prob(seed_persistence, "seed_persistence")
    contagion = _prob(contagion, "contagion")
    if adversary_target not in ("distractor", "shift"):
        raise DataError(f"adversary_target must be 'distractor' or 'shift', got "
                        f"{adversary_target!r}", field="adversary_target")
    bh = behavior
    _prob(bh.adversary_relent, "behavior.adversary_relent")
    I, R, S, Q = r.size, int(n_rounds), int(seeds_per_question), int(n_questions)
    adv_rate = _adversary_rates(adversaries, I)
    k_lo, k_hi = _k_range(n_candidates)
    if candidate_labels is None:
        labels = default_labels(k_hi, binary=(k_lo == k_hi == 2))
    else:
        labels = list(candidate_labels)
        if len(labels) < k_hi or not all(isinstance(x, str) and x.strip() for x in labels):
            raise DataError(f"candidate_labels must hold at least {k_hi} non-empty strings",
                            field="candidate_labels")
        if len({default_normalizer(x) for x in labels[:k_hi]}) < k_hi:
            raise DataError("candidate_labels collide after answer normalization",
                            field="candidate_labels")
    names = [f"A{i + 1}" for i in range(I)] if agent_names is None else list(agent_names)
    if len(names) != I or len(set(names)) != I or not all(isinstance(n, str) and n.strip()
                                                         for n in names):
        raise DataError(f"agent_names must be {I} distinct non-empty strings", field="agent_names")

    rng = np.random.default_rng(int(seed))
    T, M = Q * S, R * I
    ar = np.arange(T)

    # ------------------------------------------------------------------ questions
    Kq = rng.integers(k_lo, k_hi + 1, size=Q)
    gold_q = rng.integers(0, Kq)
    distractor_q = (gold_q + rng.integers(1, Kq)) % Kq          # a wrong candidate
    z = rng.standard_normal(Q)                                  # shared easiness
    u = rng.standard_normal((Q, I))                             # seat x question shift
    a = seat_intercepts(r, math.hypot(difficulty_sd, seat_question_sd))
    eta_q = a[None, :] + difficulty_sd * z[:, None] + seat_question_sd * u       # [Q, I]
    coalition_q = distractor_q if adversary_target == "distractor" else (gold_q + 1) % Kq

    qi = np.repeat(np.arange(Q), S)                             # trace -> question
    K, gold, distractor, coalition = Kq[qi], gold_q[qi], distractor_q[qi], coalition_q[qi]
    eta = eta_q[qi]                                             # [T, I]
    complied = rng.random((T, I)) < adv_rate[None, :]           # complying adversaries
    active = complied.copy()                                    # ... still attacking
    any_active = active.any(1)

    # ------------------------------------------------------------------ round 0
    correct = rng.random((T, I)) < _sigmoid(eta)
    to_distractor = rng.random((T, I)) < pull
    offset = 1 + np.floor(rng.random((T, I)) * (K[:, None] - 1)).astype(np.int64)
    wrong = np.where(to_distractor, distractor[:, None], (gold[:, None] + offset) % K[:, None])
    stance = np.where(correct, gold[:, None], wrong)
    if S > 1:           # later seeds repeat the first seed's answer with prob. seed_persistence
        repeat = (rng.random((T, I)) < persistence) & (np.arange(T) % S > 0)[:, None]
        stance = np.where(repeat, stance[qi * S], stance)
        correct = stance == gold[:, None]
    stance = np.where(active, coalition[:, None], stance)
    signal_sign = np.where(correct | active, 1.0, -1.0)
    belief = eta + bh.belief_signal * signal_sign + bh.belief_noise * rng.standard_normal((T, I))

    force = np.zeros((T, M), np.int8)
    seat_of = np.zeros((T, M), np.int64)
    answer = np.full((T, M), -1, np.int64)          # propose answers (-1: not a propose)
    target = np.full((T, M), -1, np.int64)          # concede / challenge targets (move index)
    conf = np.zeros((T, M))
    conf_noise = 0.5 * rng.standard_normal((T, M))

    def stated(b, m):
        return _sigmoid(b + bh.overconfidence + conf_noise[:, m])

    for i in range(I):
        seat_of[:, i], answer[:, i] = i, stance[:, i]
        conf[:, i] = stated(belief[:, i], i)
    last = np.tile(np.arange(I), (T, 1))            # latest answer-bearing move of each seat
    pending = np.zeros((T, I))                      # challenges received, not yet absorbed
    kslots = np.arange(k_hi)

    def holder_move(g, seat):
        """Latest answer-bearing move (and its seat) among other seats whose answer is g."""
        holds = (stance == g[:, None])
        holds[ar, seat] = False
        moves = np.where(holds, last, -1)
        j = moves.argmax(1)
        return moves[ar, j], j

    # ------------------------------------------------------------------ rounds >= 1
    for rnd in range(1, R):
        order = np.argsort(rng.random((T, I)), axis=1)
        for k in range(I):
            m = rnd * I + k
            s = order[:, k]
            U = rng.random((T, 6))
            tie = rng.random((T, k_hi)) * 0.5
            belief[ar, s] -= bh.challenge_impact * pending[ar, s]
            pending[ar, s] = 0.0
            b = belief[ar, s]
            my = stance[ar, s]
            cnt = (stance[:, :, None] == kslots).sum(1)
            cnt[ar, my] -= 1                                    # other seats only
            n_own = cnt[ar, my]
            score = cnt + tie
            score[ar, my] = -1.0
            rival = score.argmax(1)
            n_rival = cnt[ar, rival]
            has_rival = n_rival > 0
            adv = active[ar, s]
            if bh.adversary_relent > 0.0:           # drawn only when on: old seeds unchanged
                relent = adv & (rng.random(T) < bh.adversary_relent)
                active[ar[relent], s[relent]] = False
                any_active = active.any(1)
                adv = adv & ~relent
            else:
                relent = np.zeros(T, bool)

            # honest seats: contagion, persuasion, then challenge / agree / re-propose
            n_coal = cnt[ar, coalition]
            c_target = np.where(any_active, coalition, rival)
            c_ok = np.where(any_active, (n_coal > 0) & (my != coalition), n_rival > n_own)
            c_flip = ~adv & c_ok & (U[:, 0] < contagion)
            p_flip = _sigmoid(bh.flip_bias + bh.conformity * (n_rival - n_own) - b)
            n_flip = ~adv & ~c_flip & has_rival & (U[:, 1] < p_flip)
            flip = c_flip | n_flip
            new = np.where(c_flip, c_target, rival)
            honest_ch = ~adv & ~flip & has_rival & (U[:, 2] < _sigmoid(bh.challenge_bias + b))

            # adversaries: challenge an opponent (gold holders first), else concede to an ally
            opp = stance != coalition[:, None]
            opp[ar, s] = False
            opp_score = np.where(opp, (stance == gold[:, None]) * 2.0 + rng.random((T, I)), -1.0)
            victim = opp_score.argmax(1)
            adv_ch = adv & opp.any(1) & (U[:, 3] < bh.adversary_challenge)

            # a relenting adversary moves to gold: a concede, or a proposal if nobody holds gold
            flip, new = flip | relent, np.where(relent, gold, new)
            honest_ch = honest_ch & ~relent

            challenge = honest_ch | adv_ch
            agree = ~flip & ~challenge & (n_own > 0) & (U[:, 4] < bh.agree_rate)
            ch_seat = np.where(adv, victim, holder_move(rival, s)[1])
            ch_target = last[ar, ch_seat]
            new_ans = np.where(flip, new, my)
            c_target_move = holder_move(new_ans, s)[0]
            concede = (flip | agree) & (c_target_move >= 0)

            force[:, m] = np.where(challenge, _CHALLENGE, np.where(concede, _CONCEDE, _PROPOSE))
            seat_of[:, m] = s
            target[:, m] = np.where(challenge, ch_target, np.where(concede, c_target_move, -1))
            answer[:, m] = np.where(force[:, m] == _PROPOSE, new_ans, -1)
            np.add.at(pending, (ar[challenge], ch_seat[challenge]), 1.0)
            belief[ar, s] = np.where(relent, np.abs(b), np.where(flip, -b, b))
            stance[ar, s] = new_ans
            last[ar, s] = np.where(challenge, last[ar, s], m)
            conf[:, m] = stated(belief[ar, s], m)

    conf = np.round(np.clip(conf, 1.0 / K[:, None], 0.99), 2)
    return _build(Q, S, R, I, K, gold, distractor, coalition, difficulty_sd * z, complied,
                  force, seat_of, answer, target, conf, labels, names, metadata)


def _build(Q, S, R, I, K, gold, distractor, coalition, easiness, active, force, seat_of, answer,
           target, conf, labels, names, metadata):
    """Turn the move arrays into Trace objects (the one per-task Python loop). With canonical
    agent names (``normalize_id`` leaves them as they are) every field is already in its parsed
    form (ids, rounds, forces, candidate answers and confidences made here), so the traces are
    marked field-checked: resolving them runs the automaton without re-parsing each one."""
    M = R * I
    ids = [f"m{j + 1}" for j in range(M)]
    rounds = [j // I for j in range(M)]
    force_l, seat_l, ans_l = force.tolist(), seat_of.tolist(), answer.tolist()
    tgt_l, conf_l = target.tolist(), conf.tolist()
    K_l, gold_l = K.tolist(), gold.tolist()
    difficulty = np.round(-easiness, 6).tolist()
    checked = all(normalize_id(n) == n for n in names)
    traces = []
    for t in range(Q * S):
        q, s = divmod(t, S)
        cands = tuple(labels[:K_l[t]])
        f_t, s_t, a_t, g_t, c_t = force_l[t], seat_l[t], ans_l[t], tgt_l[t], conf_l[t]
        moves = []
        for j in range(M):
            f = f_t[j]
            moves.append(Move(ids[j], names[s_t[j]], rounds[j], _FORCE_NAMES[f],
                              cands[a_t[j]] if f == _PROPOSE else None,
                              None if f == _PROPOSE else ids[g_t[j]], c_t[j]))
        extra = {}
        if metadata:
            extra = {"sim": {"difficulty": difficulty[q],
                             "distractor": cands[int(distractor[t])],
                             "coalition": cands[int(coalition[t])],
                             "active": [names[i] for i in np.flatnonzero(active[t])]}}
        trace = Trace(f"q{q}-s{s}", tuple(moves), cands, cands[gold_l[t]], f"q{q}", extra=extra)
        traces.append(mark_field_checked(trace) if checked else trace)
    return traces
