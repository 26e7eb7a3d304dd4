"""Semi-supervised BDA for crowds: gold-fitted worker priors, EM over the unlabeled pool.

A crowd gives each task t a few votes ``v[p, k]`` (pair p = (task t, worker i), grouped from the
cells of :class:`~bda_jax.crowd.CrowdVotes`) and a small subset of tasks carries gold. The model is BDA's ([BDA] §4, Eqs. 1-3) with the
worker's reliability integrated out rather than plugged in:

* **one-coin**: worker i is right with probability θ_i ~ Beta(κ r̄, κ (1 − r̄)), errors uniform
  over the task's other K_t − 1 candidates. r̄ is the pooled accuracy of all votes on gold
  tasks: the *crowd* prior. A worker with many gold answers moves away from it; one with few
  stays near it (shrinkage of strength κ, Eq. 3's prior-from-reliability in spirit).
* **confusion**: the row P_i[g, :] ~ Dirichlet(κ Π̄[g, :]), Π̄ the pooled confusion of the gold
  votes (+1 smoothing, rows normalized). Rows index candidate slots, so this model needs one
  candidate list shared by every task (crowd label sets are; ``PairCounts.vocab``).

Fitting is EM in which every task's posterior uses the *Beta/Dirichlet-marginal* (posterior
predictive) likelihood of its votes given the statistics of **all other tasks** — a cavity,
so a task never counts its own votes as evidence about its workers:

    log q[t, g] = log π_g + τ Σ_{p ∈ t} log ∫ P(v_p | g, θ_i) p(θ_i | prior, S_i − s_p(q_t)) dθ_i

where S_i are worker i's soft sufficient statistics over all tasks (gold tasks with one-hot q,
the rest with the current q) and s_p(q_t) the pair's own share. For a single vote this is the
predictive probability (α / (α + β) if the vote is g, else β / ((α + β)(K_t − 1))); for several
votes of one worker on one task the exact Beta-(Dirichlet-)multinomial, computed with short
rising-factorial sums (counts are small integers; no gammaln). τ tempers the evidence (the
tempered BDA arm); π is the Dirichlet(1)-smoothed class frequency. Gold tasks stay clamped.

κ and τ (and, with ``model="auto"``, the model) are chosen by K-fold cross-validation over the
gold tasks — hide a fold's gold, run EM, score the multiclass Brier of the hidden tasks — in
one vmapped, jitted computation over grid × folds. The loop stops when the largest change of a
task posterior is below ``tol`` or after ``n_iter`` E-steps.

Shapes: E vote cells, P pairs (P <= E), T tasks, I workers, K = K_max candidate slots.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import is_int, positive_int
from .._core.counts import PairCounts
from .._core.errors import DataError
from ._estimators import PerTaskModel
from ._votes import CrowdVotes, crowd_votes

__all__ = ["SemiSupervisedResult", "semisupervised_em", "crowd_prior", "max_pair_votes",
           "SemiSupervisedBDA", "MODELS"]

MODELS = ("one-coin", "confusion")
_TINY = 1e-30


class SemiSupervisedResult(NamedTuple):
    """``proba`` [T, K] task posteriors (gold tasks one-hot), ``alpha`` [I, K, K] the workers'
    posterior Dirichlet parameters (one-coin: ``alpha[i, 0, 0]`` / ``alpha[i, 0, 1]`` hold the
    Beta's α / β), ``class_prior`` [K], ``n_iter`` and ``converged``."""

    proba: jax.Array
    alpha: jax.Array
    class_prior: jax.Array
    n_iter: jax.Array
    converged: jax.Array


def _rising_log(x, n, n_max):
    """Σ_{j < n} log(x + j) elementwise for integer n in [0, n_max] (a static, short loop)."""
    out = jnp.zeros(jnp.broadcast_shapes(jnp.shape(x), jnp.shape(n)), jnp.result_type(x, float))
    for j in range(n_max):
        out = out + jnp.where(j < n, jnp.log(x + j), 0.0)
    return out


def crowd_prior(votes: CrowdVotes, gold, model: str):
    """The crowd-level prior from the votes on gold tasks (``gold`` [T], -1: unknown).

    one-coin: ``[2]`` (r̄, 1 − r̄) with r̄ = correct gold votes / all gold votes (+1/+2
    smoothing); confusion: ``[K, K]`` pooled confusion rows (+1 smoothing, masked slots 0,
    rows normalized). NumPy, host side.
    """
    w = np.asarray(votes.weight, np.float64)
    task, label = np.asarray(votes.task), np.asarray(votes.label)
    g = np.asarray(gold)[task]
    on = (g >= 0) & (w > 0)
    K = votes.mask.shape[1]
    if model == "one-coin":
        right = w[on & (label == g)].sum()
        r = (right + 1.0) / (w[on].sum() + 2.0)
        return np.array([r, 1.0 - r])
    counts = np.ones((K, K)) * np.asarray(votes.mask, bool).any(0)[None, :]
    np.add.at(counts, (g[on], label[on]), w[on])
    return counts / counts.sum(1, keepdims=True)


def max_pair_votes(votes: CrowdVotes) -> int:
    """The most votes one worker gives one task (at least 1): ``semisupervised_em``'s static
    ``n_max``."""
    task, agent = np.asarray(votes.task, np.int64), np.asarray(votes.agent, np.int64)
    _, pair = np.unique(task * votes.shape[1] + agent, return_inverse=True)
    per_pair = np.bincount(pair.reshape(-1), weights=np.asarray(votes.weight, np.float64))
    return max(int(np.rint(per_pair.max(initial=0.0))), 1)


def _pairs(votes: CrowdVotes):
    """Group the cells by (task, worker): per-pair votes [E, K] (float32), task [E], agent [E].
    Traceable: there are at most E pairs, so the rows past the last pair hold no votes (they
    sit on the last task and contribute nothing)."""
    t, a = votes.task, votes.agent
    E = t.shape[0]
    T, _, K = votes.shape
    start = jnp.concatenate([jnp.ones(1, bool), (t[1:] != t[:-1]) | (a[1:] != a[:-1])])
    pair = jnp.cumsum(start) - 1
    pv = jax.ops.segment_sum(votes.weight.astype(jnp.float32)[:, None]
                             * jax.nn.one_hot(votes.label, K, dtype=jnp.float32), pair, E)
    task = jnp.full(E, T - 1, jnp.int32).at[pair].set(t)
    agent = jnp.zeros(E, jnp.int32).at[pair].set(a)
    return pv, task, agent


@partial(jax.jit, static_argnames=("model", "n_max", "n_iter"))
def semisupervised_em(votes: CrowdVotes, gold, crowd, kappa, tau, *, model: str, n_max: int,
                      n_iter: int = 100, tol: float = 1e-5) -> SemiSupervisedResult:
    """EM of the module docstring for one (κ, τ).

    Args:
      votes: the crowd's :class:`~bda_jax.crowd.CrowdVotes` (unpadded or padded).
      gold: [T] int32 gold slot of clamped tasks, -1 elsewhere.
      crowd: :func:`crowd_prior` of the model ([2] or [K, K]).
      kappa: prior strength κ > 0; tau: evidence temperature τ > 0.
      n_max: static bound on a pair's total votes (:func:`max_pair_votes`).
    Returns: :class:`SemiSupervisedResult`.
    """
    mask = votes.mask
    n_agents = votes.shape[1]
    votes, task, agent = _pairs(votes)
    T, K = mask.shape
    n_pair = votes.sum(1)                                            # [P]
    valid = mask[task]                                               # [P, K]
    Kt = mask.sum(1).astype(jnp.float32)                             # [T]
    clamped = gold >= 0
    onehot = jax.nn.one_hot(jnp.where(clamped, gold, 0), K) * clamped[:, None]
    nvotes_int = jnp.round(votes).astype(jnp.int32)
    n_int = jnp.round(n_pair).astype(jnp.int32)
    if model == "one-coin":
        a0, b0 = kappa * crowd[0], kappa * crowd[1]
    else:
        prior_rows = kappa * crowd                                   # [K, K]

    def log_lik(q):
        """[P, K] cavity-predictive log-likelihood of each pair's votes under each truth g."""
        if model == "one-coin":
            right = (q[task] * votes).sum(1)                               # soft correct votes [P]
            S = jax.ops.segment_sum(right, agent, n_agents)          # [I]
            n = jax.ops.segment_sum(n_pair, agent, n_agents)
            a = a0 + S[agent] - right                                # cavity [P]
            b = b0 + (n[agent] - n_pair) - (S[agent] - right)
            c = nvotes_int                                           # correct if truth = g [P, K]
            d = n_int[:, None] - c
            ll = (_rising_log(a[:, None], c, n_max) + _rising_log(b[:, None], d, n_max)
                  - _rising_log((a + b)[:, None], n_int[:, None], n_max)
                  - d * jnp.log(jnp.maximum(Kt[task] - 1.0, 1.0))[:, None])
        else:
            M = jax.ops.segment_sum(q[task][:, :, None] * votes[:, None, :], agent, n_agents)
            own = q[task][:, :, None] * votes[:, None, :]            # [P, K, K] pair's share
            A = prior_rows[None] + M[agent] - own                   # cavity Dirichlet [P, K, K]
            A = jnp.where(valid[:, None, :], jnp.maximum(A, _TINY), 1.0)   # 1: no vote there
            total = jnp.where(valid[:, None, :], A, 0.0).sum(-1)
            ll = (_rising_log(A, nvotes_int[:, None, :], n_max).sum(-1)
                  - _rising_log(total, n_int[:, None], n_max))
        return jnp.where(valid, ll, 0.0)

    def e_step(q):
        ll = jax.ops.segment_sum(log_lik(q), task, T)                # [T, K]
        pi = (q * mask).sum(0) + 1.0
        logits = jnp.log(pi / pi.sum())[None, :] + tau * ll
        logits = jnp.where(mask, logits, -jnp.inf)
        new = jax.nn.softmax(logits, axis=1)
        return jnp.where(clamped[:, None], onehot, new)

    # start: the votes' shares (uniform where no vote), gold clamped
    share = jax.ops.segment_sum(votes, task, T) * mask
    tot = share.sum(1, keepdims=True)
    q0 = jnp.where(tot > 0, share / jnp.maximum(tot, _TINY), mask / Kt[:, None])
    q0 = jnp.where(clamped[:, None], onehot, q0)

    def cond(state):
        _, it, delta = state
        return (it < n_iter) & (delta >= tol)

    def body(state):
        q, it, _ = state
        new = e_step(q)
        return new, it + 1, jnp.max(jnp.abs(new - q))

    q, it, delta = jax.lax.while_loop(cond, body, (q0, jnp.int32(0), jnp.float32(jnp.inf)))
    if model == "one-coin":
        right = (q[task] * votes).sum(1)
        S = jax.ops.segment_sum(right, agent, n_agents)
        n = jax.ops.segment_sum(n_pair, agent, n_agents)
        alpha = jnp.zeros((n_agents, K, K)).at[:, 0, 0].set(a0 + S).at[:, 0, 1].set(b0 + n - S)
    else:
        alpha = prior_rows[None] + jax.ops.segment_sum(q[task][:, :, None] * votes[:, None, :],
                                                       agent, n_agents)
    pi = (q * mask).sum(0) + 1.0
    return SemiSupervisedResult(q, alpha, pi / pi.sum(), it, delta < tol)


def _check_grid(values, name):
    """``values`` as a flat float64 array of positive numbers, else a DataError naming ``name``."""
    try:
        out = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError):
        out = np.zeros(0)
    if out.size == 0 or not np.all(np.isfinite(out) & (out > 0)):
        raise DataError(f"{name} must be a non-empty list of positive numbers, got {values!r}",
                        field=name)
    return out


class SemiSupervisedBDA(PerTaskModel):
    """Semi-supervised BDA for crowd labels (crowd-kit surface; module docstring for the model).

    ``fit(data, true_labels)``: ``data`` a DataFrame with columns task, worker, label (or
    traces, Counts, :class:`~bda_jax.PairCounts`), ``true_labels`` a Series task -> label for the
    gold subset, or [T] slots (-1: unknown); without it the data's own ``gold`` is used (counts,
    traces). κ, τ and the model are chosen by
    ``folds``-fold cross-validation of the Brier score over the gold tasks (folds drawn from
    ``seed``); with fewer than ``2 * folds`` gold tasks the first grid values are used.

    Fitted attributes: ``probas_`` (DataFrame task x label; gold tasks one-hot), ``labels_``
    (Series; exact ties broken at random from ``seed``, or ``tie_break="first"`` /
    ``"appearance"`` as in :class:`~bda_jax.crowd.DawidSkene`), ``skills_`` (one-coin: posterior
    mean reliability per worker; confusion: mean diagonal), ``errors_`` (confusion: the
    per-worker posterior mean confusion in crowd-kit's layout, a DataFrame indexed by (worker,
    observed label), one column per true label: ``errors_.loc[(w, observed), true] =
    P(observed | true)``; one-coin: None), ``priors_`` (the class prior π, Series by label),
    ``model_``, ``kappa_``, ``tau_``, ``cv_`` (one row per grid point: model, kappa, tau,
    brier), ``n_iter_``, ``converged_``.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a", "a", "a", "b", "b", "b"],
    ...                    "worker": ["w1", "w2", "w3", "w1", "w2", "w3"],
    ...                    "label": ["x", "x", "y", "y", "y", "x"]})
    >>> m = SemiSupervisedBDA(model="one-coin", kappa_grid=[4.0], tau_grid=[1.0])
    >>> m.fit_predict(df, true_labels=pd.Series({"a": "x"})).tolist()
    ['x', 'y']
    """

    #: the votes read: round 0 (a class setting, not a constructor parameter)
    votes = "round0"

    def __init__(self, model: str = "auto",
                 kappa_grid: Sequence[float] = (2.0, 8.0, 32.0, 128.0),
                 tau_grid: Sequence[float] = (0.5, 0.75, 1.0), folds: int = 5, seed: int = 0,
                 n_iter: int = 100, tol: float = 1e-5, *, tie_break: str = "random"):
        self.model, self.folds, self.seed = model, folds, seed
        self.kappa_grid, self.tau_grid = kappa_grid, tau_grid
        self.n_iter, self.tol, self.tie_break = n_iter, tol, tie_break
        self._check_params()

    def _check_params(self) -> None:
        if self.model not in MODELS + ("auto",):
            raise DataError(f"model must be one of {MODELS + ('auto',)}, got {self.model!r}",
                            field="model")
        positive_int(self.folds, "folds", 2)
        if not is_int(self.seed):
            raise DataError(f"seed must be an integer, got {self.seed!r}", field="seed")
        _check_grid(self.kappa_grid, "kappa_grid")
        _check_grid(self.tau_grid, "tau_grid")
        positive_int(self.n_iter, "n_iter")
        if isinstance(self.tol, (bool, np.bool_)) or \
                not isinstance(self.tol, (int, float, np.integer, np.floating)) or \
                not np.isfinite(self.tol) or self.tol < 0:
            raise DataError(f"tol must be a finite number >= 0, got {self.tol!r}", field="tol")
        self._check_votes()

    # ------------------------------------------------------------------ fit
    def fit(self, data, true_labels=None) -> "SemiSupervisedBDA":
        pairs = self._pairs(data)
        self._remember(pairs)
        gold = self._gold(pairs, true_labels)
        gold = np.asarray(pairs.gold if gold is None else gold, np.int32)
        votes = crowd_votes(pairs, self.votes, pad=False)
        mask = np.asarray(pairs.mask)
        labeled = np.flatnonzero(gold >= 0)
        if labeled.size == 0:
            raise DataError("semi-supervised BDA needs some gold labels (true_labels)",
                            field="true_labels")
        models = MODELS if self.model == "auto" else (self.model,)
        kappa_grid = _check_grid(self.kappa_grid, "kappa_grid")
        tau_grid = _check_grid(self.tau_grid, "tau_grid")
        n_iter, tol = int(self.n_iter), float(self.tol)
        if "confusion" in models and not (mask.all() or pairs.vocab is not None):
            models = tuple(m for m in models if m != "confusion")
            if not models:
                raise DataError("the confusion model needs one candidate list shared by every "
                                "task", field="model")
        n_max = max_pair_votes(votes)

        def em(g, m, kappa, tau):
            crowd = jnp.asarray(crowd_prior(votes, g, m), jnp.float32)
            return jax.vmap(lambda k, t: semisupervised_em(
                votes, g, crowd, k, t, model=m, n_max=n_max, n_iter=n_iter,
                tol=tol))(jnp.asarray(kappa, jnp.float32), jnp.asarray(tau, jnp.float32))

        grid = [(k, t) for k in kappa_grid for t in tau_grid]
        kappas, taus = [k for k, _ in grid], [t for _, t in grid]
        cv = []
        if labeled.size >= 2 * self.folds and len(grid) * len(models) > 1:
            rng = np.random.default_rng(int(self.seed))
            fold_of = np.empty(labeled.size, np.int64)
            fold_of[rng.permutation(labeled.size)] = np.arange(labeled.size) % self.folds
            for m in models:
                scores = np.zeros(len(grid))
                for f in range(self.folds):
                    hidden = labeled[fold_of == f]
                    g = gold.copy()
                    g[hidden] = -1
                    proba = np.asarray(em(g, m, kappas, taus).proba)[:, hidden]
                    y = np.eye(proba.shape[-1])[gold[hidden]]
                    scores += (((proba - y) ** 2) * mask[hidden]).sum((1, 2))
                cv += [{"model": m, "kappa": float(k), "tau": float(t),
                        "brier": float(s / labeled.size)} for (k, t), s in zip(grid, scores)]
            best = min(cv, key=lambda r: r["brier"])
            self.model_, self.kappa_, self.tau_ = best["model"], best["kappa"], best["tau"]
        else:
            self.model_, (self.kappa_, self.tau_) = models[0], grid[0]
        self.cv_ = cv
        res = jax.tree.map(lambda x: x[0], em(gold, self.model_, [self.kappa_], [self.tau_]))
        self.result_ = res
        self._store(pairs, res)
        return self

    def _store(self, pairs: PairCounts, res: SemiSupervisedResult) -> None:
        import pandas as pd
        workers = pd.Index(self.workers_, name="worker")
        alpha = np.asarray(res.alpha, np.float64)
        if self.model_ == "one-coin":
            skill = alpha[:, 0, 0] / (alpha[:, 0, 0] + alpha[:, 0, 1])
            self.errors_ = None
        else:
            rows = alpha / np.maximum(alpha.sum(-1, keepdims=True), _TINY)   # [I, true, obs]
            skill = np.einsum("ikk->ik", rows).mean(1)
            labels = pd.Index(self.classes_, name="label")
            index = pd.MultiIndex.from_product([workers, labels], names=["worker", "label"])
            self.errors_ = pd.DataFrame(np.swapaxes(rows, 1, 2).reshape(-1, rows.shape[-1]),
                                        index=index, columns=labels)
        self.skills_ = pd.Series(skill, index=workers, name="skill")
        self.priors_ = pd.Series(np.asarray(res.class_prior, np.float64),
                                 index=pd.Index(self.classes_, name="label"), name="prior")
        self.n_iter_ = int(res.n_iter)
        self.converged_ = bool(res.converged)
        proba = np.asarray(res.proba, np.float64)
        self._finish(pairs, proba, proba)
