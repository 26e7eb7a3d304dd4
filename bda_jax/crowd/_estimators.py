"""Crowd aggregation on crowd-kit's surface (docs/crowd.md): ``MajorityVote``, ``Wawa``,
``DawidSkene``, ``OneCoinDawidSkene``, ``SpectralDawidSkene``, ``GLAD``, ``MACE``.

Data: a pandas DataFrame with crowd-kit's columns ``task``, ``worker``, ``label`` (one row per
label; repeated rows count as repeated votes), a list of :class:`~bda_jax.Trace`, a
:class:`~bda_jax.Counts` or a :class:`~bda_jax.PairCounts`. Every input becomes the sparse pair
layout: a frame goes through :func:`pairs_from_frame` (vectorized ``pd.factorize`` into
:meth:`~bda_jax.PairCounts.from_votes`, the tally's own packing of one round-0 ``propose`` per
row; building Trace objects would cost seconds on 1e5-row frames), traces through
``tally(..., layout="pairs")``, Counts through ``Counts.to_pairs()``. Every EM then reads the
pairs' :func:`~bda_jax.crowd.crowd_votes`.
The candidate list of a frame is the sorted label set, shared by every task (``vocab``); tasks
and workers are sorted too, so results do not depend on row order.

Outputs follow crowd-kit: ``labels_`` (Series indexed by task, name ``agg_label``),
``probas_`` (DataFrame indexed by task, one column per label; rows sum to 1 over the task's
candidates), ``priors_``, ``errors_`` (DataFrame indexed by (worker, observed label), one column
per true label: ``errors_.loc[(w, observed), true] = P(observed | true)``), ``skills_``,
``loss_history_``, ``n_iter_``. The DS estimators run the jitted EM
:func:`~bda_jax.crowd.dawid_skene_pairs` (one EM for councils and crowds). ``fit``/``predict_proba`` also
take Counts/PairCounts/traces and then return NumPy arrays [T, K] (the aggregator interface the
evaluation harness reads).

Ties. crowd-kit's ``labels_`` is ``probas_.idxmax(axis=1)``: the *first* label in column
order wins an exact tie, so every tied task gets the same label. Its column order depends on
the class (benchmarks/results/crowdkit_reference.json, crowd-kit 1.4.2 with pandas 3.1):
sorted labels for ``GLAD`` and for ``Wawa``'s weighted vote, the order in which labels first
appear in the data for ``MajorityVote`` (also inside ``Wawa``), ``DawidSkene``,
``OneCoinDawidSkene`` and ``MACE``. Here ``tie_break="random"`` (default; [BDA] Appendix D.6:
a fixed order correlates with attacks) picks uniformly among the tied labels from ``seed``;
``"first"`` takes the first label in sorted order, ``"appearance"`` the one that appears first
in the data frame (frames only), and ``"crowdkit"`` whichever of the two crowd-kit uses at each
step of that class. docs/coming-from-crowd-kit.md lists every argument against crowd-kit's.

Differences from crowd-kit 1.4.2, on purpose: ``smoothing`` (default 1e-10, crowd-kit's
``_EPS``) is a pseudo-count added to the error counts, where crowd-kit clips them below at
1e-10; ``probas_`` of the DS estimators are the E-step of the returned parameters (crowd-kit
returns the posterior one M-step earlier); ``errors_`` lists every (worker, label) row (crowd-kit
only the labels a worker used; the others have probability ~0); a (weighted) majority task whose
votes all have weight 0 gets the uniform distribution (crowd-kit: NaN). ``OneCoinDawidSkene``
also accepts ``true_labels`` and ``initial_error`` (crowd-kit's one-coin does not).
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core.conformal import (check_alpha, check_set_method, conformal_scores,
                               conformal_threshold, prediction_sets)
from .._core.counts import Counts, CountsInfo, PairCounts, tally
from .._core.decisions import argmax_random_ties, vote_shares
from .._core.errors import DataError
from .._core.params import Params, wrap_fit
from ._dawid_skene import INITS, STRATEGIES, check_ds_settings, dawid_skene_pairs, ds_predict
from ._glad import glad_em
from ._mace import METHODS as MACE_METHODS, mace_em
from ._votes import VOTE_SOURCES, CrowdVotes, crowd_votes

__all__ = ["MajorityVote", "Wawa", "DawidSkene", "OneCoinDawidSkene", "SpectralDawidSkene",
           "GLAD", "MACE", "PerTaskModel", "pairs_from_frame"]

COLUMNS = ("task", "worker", "label")
TIE_BREAKS = ("random", "first", "appearance", "crowdkit")
ON_MISSING_SKILL = ("error", "ignore", "value")
CROWDKIT_EPS = 1e-10


def _pd():
    import pandas as pd        # only the crowd surface needs pandas
    return pd


def _factorize(values, name, known=None):
    """Codes and sorted uniques of a column; with ``known`` (a fitted list), codes into it."""
    pd = _pd()
    if known is not None:
        codes = pd.Index(known).get_indexer(values)
        if (codes < 0).any():
            bad = values[np.flatnonzero(codes < 0)[0]]
            raise DataError(f"{name} {bad!r} was not seen at fit time", field=name)
        return codes, known
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError as err:
        raise DataError(f"{name} values cannot be ordered ({err}); use one type", field=name)
    return codes, uniques


def pairs_from_frame(data, *, workers=None, labels=None) -> PairCounts:
    """A crowd-kit DataFrame (``task``, ``worker``, ``label``) as :class:`PairCounts`.

    Each row is one vote (a round-0 ``propose`` of ``label`` by ``worker``); the rows are
    factorized (sorted tasks, workers, labels) and packed by the tally's own array step. With a
    fitted ``workers`` / ``labels`` list, any other worker or label is a :class:`DataError`.
    ``info.notes["label_order"]`` keeps the label slots in the order they first appear in the
    rows (what ``tie_break="appearance"`` reads: crowd-kit's column order).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"],
    ...                    "label": ["no", "yes", "no"]})
    >>> p = pairs_from_frame(df)
    >>> p.vocab, p.agents, p.task_ids, p.e0.tolist()
    (('no', 'yes'), ('a', 'b'), ('t1', 't2'), [[1, 0], [0, 1], [1, 0]])
    """
    pd = _pd()
    if not isinstance(data, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(data).__name__}", field="data")
    for col in COLUMNS:
        if col not in data.columns:
            raise DataError(f"the data frame needs the column {col!r} (crowd-kit's task, "
                            f"worker, label); it has {list(data.columns)}", field=col)
    if len(data) == 0:
        raise DataError("the data frame has no rows", field="data")
    for col in COLUMNS:
        missing = data[col].isna().to_numpy()
        if missing.any():
            raise DataError(f"{int(missing.sum())} rows have a missing {col} (first at row "
                            f"{data.index[np.flatnonzero(missing)[0]]!r})", field=col)
    task, tasks = _factorize(data["task"].to_numpy(), "task")
    agent, workers = _factorize(data["worker"].to_numpy(), "worker", workers)
    cand, labels = _factorize(data["label"].to_numpy(), "label", labels)
    T, I, K = len(tasks), len(workers), len(labels)
    vocab = tuple(labels)
    order = tuple(int(k) for k in pd.unique(cand))        # label slots by first appearance
    info = CountsInfo(tuple(workers), tuple(tasks), (vocab,) * T, vocab, None,
                      {"source": "data frame", "label_order": order})
    return PairCounts.from_votes(task, agent, cand, T, I, K, info=info)


def _is_frame(data) -> bool:
    try:
        return isinstance(data, _pd().DataFrame)
    except ImportError:
        return False


def _label_order(pairs: PairCounts):
    """Label slots in order of first appearance in the frame the pairs came from, or None."""
    info = getattr(pairs, "info", None)
    return None if info is None else info.notes.get("label_order")


def _resolve_seed(seed, random_state):
    """One seed from ``seed`` (ours) and ``random_state`` (crowd-kit's name for it): either
    may be given (an int); both given and different is a :class:`DataError`; neither: 0."""
    for name, v in (("seed", seed), ("random_state", random_state)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise DataError(f"{name} must be an int, got {v!r}", field=name)
    if seed is not None and random_state is not None and int(seed) != int(random_state):
        raise DataError(f"seed={seed} and random_state={random_state} disagree: random_state is "
                        "crowd-kit's name for seed; give one", field="random_state")
    v = seed if seed is not None else random_state
    return 0 if v is None else int(v)


class _Crowd(Params):
    """Shared input handling and outputs of the crowd estimators.

    scikit-learn's parameter protocol (``bda_jax._core.params.Params``): ``get_params`` /
    ``set_params`` over the constructor's named parameters, so ``sklearn.base.clone`` gives an
    unfitted copy with the same settings (docs/crowd.md, "scikit-learn compatibility"). Every
    ``__init__`` stores its arguments unchanged (``None`` stays ``None``: a class default is
    resolved when fitting) and checks them in ``_check_params``, which every ``fit`` runs
    first."""

    tie_break: str = "random"
    seed: int = 0
    # tie_break="crowdkit": the rule crowd-kit 1.4.2 (pandas 3.1) follows, per step of the fit
    _crowdkit_ties = {"final": "appearance"}

    def __init_subclass__(cls, **kwargs):
        # Each ``fit`` checks the settings first and records the gold it was given
        # (``true_labels``) after it succeeds, so predict_set can refuse to calibrate on labels
        # the fit already read.
        super().__init_subclass__(**kwargs)
        wrap_fit(cls, lambda model, bound: model.__dict__.__setitem__(
            "_fit_true_labels", bound.arguments.get("true_labels")))

    def _seed(self) -> int:
        """The seed of the random tie-break (``seed``; MACE also reads ``random_state``)."""
        return self.seed

    def _check_tie_break(self):
        if self.tie_break not in TIE_BREAKS:
            raise DataError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}",
                            field="tie_break")

    def _tie_rule(self, stage="final"):
        """The tie rule of one step of the fit (``"crowdkit"`` resolved per class)."""
        if self.tie_break != "crowdkit":
            return self.tie_break
        return self._crowdkit_ties.get(stage, self._crowdkit_ties["final"])

    def _check_appearance(self, data):
        rules = ({self.tie_break} if self.tie_break != "crowdkit"
                 else set(self._crowdkit_ties.values()))
        if "appearance" in rules and not _is_frame(data):
            raise DataError(f"tie_break={self.tie_break!r} breaks ties by the order labels first "
                            "appear in a data frame; this data is not one (use 'first' or "
                            "'random')", field="tie_break")

    # ---- inputs
    def _pairs(self, data, fitted=False) -> PairCounts:
        workers = getattr(self, "workers_", None) if fitted else None
        labels = getattr(self, "classes_", None) if fitted else None
        self._check_appearance(data)
        if _is_frame(data):
            return pairs_from_frame(data, workers=workers,
                                    labels=None if labels is None else list(labels))
        if isinstance(data, PairCounts):
            pairs = data
        elif isinstance(data, Counts):
            pairs = data.to_pairs()
        elif isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
            if len(data) == 0:
                raise DataError("no traces given", field="data")
            pairs = tally(data, agents=None if workers is None else tuple(workers),
                          layout="pairs")
        else:
            raise DataError("expected a DataFrame (task, worker, label), a list of traces, "
                            f"Counts or PairCounts; got {type(data).__name__}", field="data")
        if fitted:
            pairs = self._align(pairs, workers, labels)
        return pairs

    def _align(self, pairs: PairCounts, workers, labels) -> PairCounts:
        """Counts given at predict time: agents matched to the fitted workers by name (when both
        have names), candidate slots checked against the fitted labels."""
        if pairs.mask.shape[1] != len(labels):
            raise DataError(f"fitted on K = {len(labels)} labels, got {pairs.mask.shape[1]}",
                            field="K")
        if pairs.vocab is not None and self.label_space_ == "semantic" \
                and list(pairs.vocab) != list(labels):
            raise DataError(f"the data's labels {list(pairs.vocab)} differ from the fitted "
                            f"{list(labels)}", field="label")
        if pairs.agents is None or list(pairs.agents) == list(workers):
            if pairs.n_agents != len(workers):
                raise DataError(f"fitted on {len(workers)} workers, got {pairs.n_agents}",
                                field="agents")
            return pairs
        codes = _pd().Index(workers).get_indexer(list(pairs.agents))
        if (codes < 0).any():
            bad = pairs.agents[int(np.flatnonzero(codes < 0)[0])]
            raise DataError(f"worker {bad!r} was not seen at fit time", field="worker")
        agent = codes[np.asarray(pairs.agent)]
        order = np.lexsort((agent, np.asarray(pairs.task)))
        per_pair = [np.asarray(getattr(pairs, f))[order] for f in ("N", "e", "c", "e0", "conf0")]
        info = pairs.info
        info = CountsInfo(tuple(workers), info.task_ids, info.candidates, info.vocab,
                          info.clusters, dict(info.notes))
        return PairCounts(np.asarray(pairs.task)[order], agent[order].astype(np.int32), *per_pair,
                          pairs.mask, pairs.K, pairs.gold, pairs.gold_missing, pairs.cluster,
                          n_tasks=pairs.n_tasks, n_agents=len(workers), info=info)

    def _remember(self, pairs: PairCounts):
        pd = _pd()
        self.__dict__["_fitted_pairs"] = pairs    # predict_set scores the fitted tasks
        T, I, K = pairs.shape
        self.workers_ = list(pairs.agents) if pairs.agents is not None else list(range(I))
        self.classes_ = list(pairs.vocab) if pairs.vocab is not None else list(range(K))
        self.tasks_ = pd.Index(list(pairs.task_ids) if pairs.task_ids is not None
                               else range(T), name="task")
        self.label_space_ = "semantic" if pairs.vocab is not None else "positional"
        self.n_tasks_, self.n_workers_ = T, I

    def _gold(self, pairs: PairCounts, true_labels):
        """[T] clamped slots (-1: free) from a Series keyed by task, or [T] slots."""
        if true_labels is None:
            return None
        pd = _pd()
        if isinstance(true_labels, pd.Series):
            if true_labels.isna().any():
                raise DataError("true_labels has missing values", field="true_labels")
            tasks = pd.Index(list(pairs.task_ids) if pairs.task_ids is not None
                             else range(pairs.n_tasks))
            rows = tasks.get_indexer(true_labels.index)
            if (rows < 0).any():
                bad = true_labels.index[np.flatnonzero(rows < 0)[0]]
                raise DataError(f"true_labels names task {bad!r}, which is not in the data",
                                field="true_labels", task_id=str(bad))
            labels = (list(pairs.vocab) if pairs.vocab is not None
                      else list(range(pairs.mask.shape[1])))
            slots = pd.Index(labels).get_indexer(true_labels.to_numpy())
            if (slots < 0).any():
                bad = true_labels.iloc[np.flatnonzero(slots < 0)[0]]
                raise DataError(f"true_labels holds {bad!r}, which is not a label of the data",
                                field="true_labels")
            gold = np.full(pairs.n_tasks, -1, np.int32)
            gold[rows] = slots
        else:
            gold = np.asarray(true_labels)
            if gold.shape != (pairs.n_tasks,) or not np.issubdtype(gold.dtype, np.integer):
                raise DataError(f"true_labels must be a Series keyed by task or [T] = "
                                f"[{pairs.n_tasks}] integer slots (-1: unknown)",
                                field="true_labels")
        if (gold >= np.asarray(pairs.K)).any() or (gold < -1).any():
            raise DataError("true_labels slots must be -1 or below each task's K",
                            field="true_labels")
        return gold

    # ---- outputs
    def _task_index(self, pairs: PairCounts | None):
        if pairs is None:
            return self.tasks_
        return _pd().Index(list(pairs.task_ids) if pairs.task_ids is not None
                           else range(pairs.n_tasks), name="task")

    def _frame(self, proba, pairs: PairCounts | None = None):
        pd = _pd()
        return pd.DataFrame(np.asarray(proba, np.float64), index=self._task_index(pairs),
                            columns=pd.Index(self.classes_, name="label"))

    def _decide(self, scores, mask, key=None, order=None, stage="final"):
        """Chosen slots [T]: argmax of ``scores`` [T, K]; ties per ``tie_break`` (``order``:
        the label slots by first appearance, for ``"appearance"``; ``stage``: the step of the
        fit, for ``"crowdkit"``)."""
        rule = self._tie_rule(stage)
        if rule in ("first", "appearance"):
            mask = np.asarray(mask)
            s = np.where(mask, np.asarray(scores), -np.inf)
            if rule == "first":
                return np.argmax(s, axis=-1)
            if order is None:
                raise DataError("tie_break='appearance' needs data from a data frame",
                                field="tie_break")
            K = s.shape[-1]
            rank = np.full(K, K, np.int64)              # labels absent from the frame: last
            rank[list(order)] = np.arange(len(order))
            tied = mask & (s == s.max(-1, keepdims=True))
            return np.argmin(np.where(tied, rank, K + 1), axis=-1)
        key = jax.random.key(self._seed()) if key is None else key
        return np.asarray(argmax_random_ties(key, scores, mask))

    def _labels(self, index, pairs=None):
        return _pd().Series(np.asarray(self.classes_, dtype=object)[index],
                            index=self._task_index(pairs), name="agg_label").infer_objects()

    def _finish(self, pairs, proba, scores, stage="final"):
        self.probas_ = self._frame(proba)
        self.labels_ = self._labels(self._decide(scores, pairs.mask, order=_label_order(pairs),
                                                 stage=stage))
        return self

    # ---- public surface
    def fit_predict(self, data, *args, **kwargs):
        """Fit (``fit``'s arguments) and return ``labels_`` (Series indexed by task)."""
        return self.fit(data, *args, **kwargs).labels_

    def fit_predict_proba(self, data, *args, **kwargs):
        """Fit (``fit``'s arguments) and return ``probas_`` (DataFrame indexed by task, one
        column per label)."""
        return self.fit(data, *args, **kwargs).probas_

    def predict_proba(self, data=None):
        """Probabilities over each task's candidates. ``None``: the fitted tasks' ``probas_``;
        a DataFrame: a DataFrame for its tasks; Counts/PairCounts/traces: a NumPy array [T, K]
        (0 on padding slots), the aggregator interface."""
        self._check_fitted()
        if data is None:
            return self.probas_
        pairs = self._pairs(data, fitted=True)
        proba = np.asarray(self._proba(pairs), np.float64)
        return self._frame(proba, pairs) if _is_frame(data) else proba

    def predict(self, data=None, key=None):
        """Chosen labels. ``None``: ``labels_``; a DataFrame: a Series; Counts/PairCounts/traces:
        candidate slots [T] (NumPy)."""
        self._check_fitted()
        if data is None:
            return self.labels_
        pairs = self._pairs(data, fitted=True)
        index = self._decide(self._scores(pairs), pairs.mask, key, _label_order(pairs))
        return self._labels(index, pairs) if _is_frame(data) else index

    def predict_set(self, alpha: float, data=None, *, true_labels, method: str = "lac",
                    key=None, randomized: bool = True):
        """Answer sets with coverage ``1 - alpha``: split conformal prediction over this
        estimator's posterior (docs/answer-sets.md; ``method`` ``"lac"`` or ``"aps"``).

        ``true_labels`` (a Series keyed by task, or [T] slots with -1 for unknown, as in
        ``fit``) are the calibration labels: known answers of tasks of the fitted data that
        the fit did not read (an unsupervised fit reads none; a task whose label was passed to
        ``fit`` is refused). ``data``: the tasks to give sets to (``None``: the fitted tasks,
        a DataFrame of booleans indexed by task, one column per label; Counts/PairCounts/
        traces: a NumPy bool array [T, K], False on padding slots). ``key`` (default from
        ``seed``) draws the APS uniforms.
        """
        self._check_fitted()
        alpha = check_alpha(alpha)
        check_set_method(method)
        pairs = self.__dict__["_fitted_pairs"]
        cal_gold = self._gold(pairs, true_labels)
        fit_gold = self._gold(pairs, self.__dict__.get("_fit_true_labels"))
        if fit_gold is not None and ((fit_gold >= 0) & (cal_gold >= 0)).any():
            t = int(np.flatnonzero((fit_gold >= 0) & (cal_gold >= 0))[0])
            raise DataError("a calibration label was given to fit (in-sample calibration would "
                            "under-cover): calibrate on labels the fit did not read",
                            field="true_labels", task_id=str(self.tasks_[t]))
        labeled = np.flatnonzero(cal_gold >= 0)
        if not labeled.size:
            raise DataError("no calibration label: true_labels names no task", field="true_labels")
        key = jax.random.key(self._seed()) if key is None else key
        k_scores, k_sets = jax.random.split(key)
        proba = np.asarray(self._proba(pairs), np.float64)
        scores = conformal_scores(proba[labeled], cal_gold[labeled],
                                  np.asarray(pairs.mask)[labeled], method=method, key=k_scores,
                                  randomized=randomized)
        threshold = conformal_threshold(scores, alpha)
        target = pairs if data is None else self._pairs(data, fitted=True)
        target_proba = proba if data is None else np.asarray(self._proba(target), np.float64)
        sets = np.asarray(prediction_sets(target_proba, target.mask, threshold, method=method,
                                          key=k_sets, randomized=randomized))
        if data is not None and not _is_frame(data):
            return sets
        pd = _pd()
        return pd.DataFrame(sets, index=self._task_index(None if data is None else target),
                            columns=pd.Index(self.classes_, name="label"))

    def _check_fitted(self):
        if not hasattr(self, "probas_"):
            raise DataError("fit the estimator first", field="fit")

    def _scores(self, pairs):
        return self._proba(pairs)


# ---------------------------------------------------------------- vote-counting estimators


@jax.jit
def _vote_matrix(ent: CrowdVotes, agent_weight):
    """Weighted votes per task [T, K]: ``sum_e w_e * agent_weight[a_e]`` on label ``k_e``."""
    T, K = ent.mask.shape
    w = ent.weight * agent_weight[ent.agent]
    hot = jax.nn.one_hot(ent.label, K, dtype=w.dtype)
    return jax.ops.segment_sum(w[:, None] * hot, ent.task, T, indices_are_sorted=True)


@jax.jit
def _agreement(ent: CrowdVotes, chosen, n_agents_zeros):
    """Per-worker share of distinct (task, label) answers equal to ``chosen[task]`` (Wawa)."""
    seen = (ent.weight > 0).astype(n_agents_zeros.dtype)
    hit = seen * (ent.label == chosen[ent.task])
    I = n_agents_zeros.shape[0]
    num = jax.ops.segment_sum(hit, ent.agent, I)
    den = jax.ops.segment_sum(seen, ent.agent, I)
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


class MajorityVote(_Crowd):
    """Majority vote: each task's label shares (crowd-kit ``MajorityVote``; [BDA] B.1), or with
    ``fit(data, skills)`` the weighted majority vote.

    Args (crowd-kit's, in its order): ``default_skill`` (the weight of a worker missing from
    ``skills`` when ``on_missing_skill="value"``), ``on_missing_skill``: what a vote by a worker
    without a skill does: ``"error"`` (a :class:`DataError`, crowd-kit's default), ``"ignore"``
    (the vote is dropped; a task left without votes is a :class:`DataError`) or ``"value"``
    (weight ``default_skill``). Both matter only with ``skills``. Keyword-only (ours):
    ``tie_break``, ``seed`` (module docstring), ``votes`` (``"round0"`` or ``"all"``, for traces).

    ``fit(data, skills=None)``: ``skills`` (crowd-kit's argument) is a Series of vote weights
    indexed by worker (or [I] weights in ``workers_`` order; NaN = missing), finite and >= 0.
    ``probas_`` are each label's share of the task's (weighted) votes (repeated rows count as
    repeated votes), ``labels_`` the label with the largest share (ties: ``tie_break``),
    ``skills_`` each worker's share of distinct answers that agree with ``labels_`` (crowd-kit's
    ``get_accuracy``; under ``"ignore"`` only the workers whose votes counted). Data given to
    ``predict`` / ``predict_proba`` later is weighted by the same skills.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": [1, 1, 1, 2, 2], "worker": list("abcab"),
    ...                    "label": ["x", "x", "y", "y", "y"]})
    >>> MajorityVote().fit_predict(df).tolist()
    ['x', 'y']
    >>> MajorityVote().fit_predict(df, pd.Series({"a": 0.2, "b": 0.2, "c": 0.9})).tolist()
    ['y', 'y']
    """

    def __init__(self, default_skill: float | None = None, on_missing_skill: str = "error", *,
                 tie_break: str = "random", seed: int = 0, votes: str = "round0"):
        self.default_skill, self.on_missing_skill = default_skill, on_missing_skill
        self.tie_break, self.seed, self.votes = tie_break, seed, votes
        self._check_params()

    def _check_params(self) -> None:
        default_skill, on_missing_skill = self.default_skill, self.on_missing_skill
        if on_missing_skill not in ON_MISSING_SKILL:
            raise DataError(f"on_missing_skill must be one of {ON_MISSING_SKILL}, got "
                            f"{on_missing_skill!r}", field="on_missing_skill")
        if default_skill is not None:
            if on_missing_skill != "value":
                raise DataError("default_skill is used only with on_missing_skill='value' "
                                f"(got {on_missing_skill!r})", field="default_skill")
            if (isinstance(default_skill, (bool, np.bool_))
                    or not isinstance(default_skill, (int, float, np.integer, np.floating))
                    or not np.isfinite(default_skill) or default_skill < 0):
                raise DataError(f"default_skill must be a finite number >= 0, got "
                                f"{default_skill!r}", field="default_skill")
        elif on_missing_skill == "value":
            raise DataError("on_missing_skill='value' needs default_skill", field="default_skill")
        self._check_tie_break()

    def _entries(self, pairs):
        return crowd_votes(pairs, self.votes, dtype=jnp.float32)

    def _skill_weights(self, skills, ent):
        """``(weights [I], known [I] or None)`` from crowd-kit's ``skills`` argument."""
        pd = _pd()
        I = len(self.workers_)
        if isinstance(skills, pd.Series):
            if skills.index.has_duplicates:
                dup = skills.index[skills.index.duplicated()][0]
                raise DataError(f"skills names worker {dup!r} twice", field="skills")
            values = skills.reindex(pd.Index(self.workers_))
        else:
            values = skills
        try:
            w = np.asarray(values, np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise DataError("skills must be numbers: a Series indexed by worker, or [I] "
                            "weights in workers_ order", field="skills") from None
        if w.shape != (I,):
            raise DataError(f"skills must be a Series indexed by worker or [{I}] weights, got "
                            f"shape {np.shape(values)}", field="skills")
        missing = np.isnan(w)
        if (np.isinf(w) | (w < 0)).any():
            bad = self.workers_[int(np.flatnonzero(np.isinf(w) | (w < 0))[0])]
            raise DataError(f"skills must be finite and >= 0 (vote weights); worker {bad!r} has "
                            f"{w[self.workers_.index(bad)]!r}", field="skills")
        missing &= np.asarray(ent.agent_votes) > 0          # only workers who voted matter
        known = None
        if missing.any():
            first = self.workers_[int(np.flatnonzero(missing)[0])]
            if self.on_missing_skill == "error":
                raise DataError(f"skills has no value for {int(missing.sum())} worker(s) who "
                                f"voted (first {first!r}); give every worker a skill, or use "
                                "on_missing_skill='ignore' or 'value'", field="skills")
            if self.on_missing_skill == "value":
                w = np.where(missing, self.default_skill, w)
            else:
                known = ~missing
        return np.where(np.isnan(w), 0.0, w).astype(np.float32), known

    def _check_known(self, ent, pairs):
        """``on_missing_skill="ignore"``: every task with votes keeps one by a known worker."""
        task, weight = np.asarray(ent.task), np.asarray(ent.weight, np.float64)
        kept = weight * self._known[np.asarray(ent.agent)]
        total = np.bincount(task, weight, pairs.n_tasks)
        left = np.bincount(task, kept, pairs.n_tasks)
        empty = np.flatnonzero((total > 0) & (left == 0))
        if empty.size:
            tid = self._task_index(pairs)[int(empty[0])]
            raise DataError(f"{empty.size} task(s) have no vote by a worker with a known skill "
                            f"(first {tid!r}); give those workers a skill, or use "
                            "on_missing_skill='value'", field="skills", task_id=str(tid))

    def _proba(self, pairs):
        ent = self._entries(pairs)
        weight = getattr(self, "_weight", None)
        if weight is None:
            weight = np.ones(pairs.n_agents, np.float32)
        elif getattr(self, "_known", None) is not None:
            weight = weight * self._known
            self._check_known(ent, pairs)
        return np.asarray(vote_shares(_vote_matrix(ent, jnp.asarray(weight)), ent.mask))

    def fit(self, data, skills=None, *, true_labels=None) -> "MajorityVote":
        """Count the votes of ``data``, weighted by ``skills`` if given (class docstring).
        ``true_labels``: majority vote reads no labels, so giving any is a
        :class:`DataError` (the EM estimators clamp them)."""
        self._no_labels(true_labels)
        pairs = self._pairs(data)
        self._remember(pairs)
        self._weight, self._known = None, None
        if skills is not None:
            self._weight, self._known = self._skill_weights(skills, self._entries(pairs))
        self._fit_pairs(pairs)
        return self

    def _no_labels(self, true_labels):
        if true_labels is not None:
            raise DataError(f"{type(self).__name__} reads no labels: true_labels are clamped by "
                            "the EM estimators (DawidSkene, GLAD, MACE, ...)",
                            field="true_labels")

    def _fit_pairs(self, pairs, stage="final"):
        proba = self._proba(pairs)
        self._finish(pairs, proba, proba, stage)
        chosen = self._decide(proba, pairs.mask, order=_label_order(pairs),
                              stage=stage).astype(np.int32)
        ent = self._entries(pairs)
        workers = _pd().Index(self.workers_, name="worker")
        if self._known is not None:                     # dropped votes do not count
            ent = ent._replace(weight=ent.weight * jnp.asarray(self._known, ent.weight.dtype)[
                ent.agent])
        skills = np.asarray(_agreement(ent, chosen, np.zeros(pairs.n_agents, np.float32)),
                            np.float64)
        self.skills_ = _pd().Series(skills, index=workers, name="skill")
        if self._known is not None:
            self.skills_ = self.skills_[self._known]


class Wawa(MajorityVote):
    """Worker Agreement With Aggregate (crowd-kit ``Wawa``): skill = share of a worker's
    distinct answers that agree with the majority vote; then a skill-weighted majority vote
    (:class:`MajorityVote` with ``skills=skills_``). crowd-kit's Wawa takes no arguments;
    keyword-only here: ``tie_break``, ``seed``, ``votes``.

    ``predict_proba(data)`` / ``predict(data)`` weight ``data``'s votes by the fitted skills.
    """

    # not parameters of Wawa (it takes no skills): MajorityVote's defaults, read by its code
    default_skill = None
    on_missing_skill = "error"

    def __init__(self, *, tie_break: str = "random", seed: int = 0, votes: str = "round0"):
        self.tie_break, self.seed, self.votes = tie_break, seed, votes
        self._check_params()

    def fit(self, data, *, true_labels=None) -> "Wawa":
        """Majority vote, agreement skills, skill-weighted vote (``true_labels``: as
        :meth:`MajorityVote.fit`)."""
        self._no_labels(true_labels)
        pairs = self._pairs(data)
        self._remember(pairs)
        self._weight, self._known = None, None
        self._fit_pairs(pairs)
        return self

    # crowd-kit's Wawa: the majority step's columns in order of first appearance, the weighted
    # vote's in sorted order (benchmarks/results/crowdkit_reference.json, "tie_breaking")
    _crowdkit_ties = {"majority": "appearance", "final": "first"}

    def _fit_pairs(self, pairs):
        super()._fit_pairs(pairs, "majority")             # majority labels and agreement skills
        self._weight = self.skills_.to_numpy().astype(np.float32)
        proba = self._proba(pairs)
        self._finish(pairs, proba, proba)


# ---------------------------------------------------------------- Dawid–Skene estimators


class DawidSkene(_Crowd):
    """Dawid–Skene EM with per-worker confusion matrices (crowd-kit ``DawidSkene``; Dawid and
    Skene 1979), jitted over the sparse pair layout (:func:`bda_jax.crowd.dawid_skene_pairs`).

    Args:
      n_iter, tol: crowd-kit's cap and tolerance (defaults 100, 1e-5) with its stopping rule
        (``criterion="crowdkit"``: change of crowd-kit's per-label loss); ``"posterior"``:
        max change of the task posteriors.
      initial_error_strategy: ``None``, ``"addition"`` or ``"assign"``: how ``fit(...,
        initial_error=...)`` (counts indexed by (worker, observed label), one column per true
        label, as crowd-kit's) enters the first M-step.
      model: "confusion" (default here) or "one-coin". init: "majority" (crowd-kit), "spectral"
        or "anti". prior: the class prior, "estimate" (crowd-kit; the default here) or
        "uniform" (the default of :class:`OneCoinDawidSkene`). ``None`` (the default of all
        three) is stored as given and means the class's default, so ``get_params`` and
        ``sklearn.base.clone`` see the arguments as passed.
      smoothing: additive pseudo-count of every M-step (default 1e-10: crowd-kit's floor).
      error_prior: Dirichlet pseudo-counts added at every M-step: a scalar ``a`` (``a`` on the
        diagonal: diagonal-dominant), [K, K] or [I, K, K] (rows = true label).
      votes: "round0" or "all" (for traces). dtype: float32 (default) or "float64" (x64 mode).
      tie_break, seed: see the module docstring.

    Fitted: ``labels_``, ``probas_``, ``priors_`` (Series by label), ``errors_`` (DataFrame
    indexed by (worker, observed label), columns = true labels), ``skills_`` (one-coin: the
    accuracy; confusion: ``sum_g prior_g P[g, g]``), ``loss_history_`` (crowd-kit's loss per
    iteration; empty with ``criterion="posterior"``), ``log_likelihood_`` (observed-data log-likelihood at the returned parameters;
    clamped tasks enter jointly), ``objective_``, ``n_iter_``, ``converged_``, ``params_``
    (:class:`DSParams`), ``log_proba_`` [T, K], ``workers_``, ``classes_``, ``tasks_``.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": [1, 1, 1, 2, 2, 2], "worker": list("abcabc"),
    ...                    "label": [0, 0, 1, 1, 1, 1]})
    >>> DawidSkene().fit_predict(df).tolist()
    [0, 1]
    """

    _model = "confusion"
    _init_default = "majority"
    _prior_default = "estimate"

    def __init__(self, n_iter: int = 100, tol: float = 1e-5, initial_error_strategy=None, *,
                 model: str | None = None, init=None, prior: str | None = None,
                 smoothing: float = CROWDKIT_EPS, error_prior=None,
                 criterion: str = "crowdkit", votes: str = "round0", dtype=None,
                 tie_break: str = "random", seed: int = 0):
        self.n_iter, self.tol, self.initial_error_strategy = n_iter, tol, initial_error_strategy
        self.model, self.init, self.prior = model, init, prior
        self.smoothing, self.error_prior = smoothing, error_prior
        self.criterion, self.votes, self.dtype = criterion, votes, dtype
        self.tie_break, self.seed = tie_break, seed
        self._check_params()

    def _settings(self) -> tuple:
        """``(model, init, prior)``: the arguments, ``None`` resolved to this class's default."""
        return (self._model if self.model is None else self.model,
                self._init_default if self.init is None else self.init,
                self._prior_default if self.prior is None else self.prior)

    def _check_params(self) -> None:
        model, init, prior = self._settings()
        check_ds_settings(model, prior, self.criterion, self.n_iter, self.tol, self.smoothing)
        if isinstance(init, str) and init not in INITS:
            raise DataError(f"init must be one of {INITS}, got {init!r}", field="init")
        if self.initial_error_strategy not in STRATEGIES:
            raise DataError(f"initial_error_strategy must be one of {STRATEGIES}, got "
                            f"{self.initial_error_strategy!r}", field="initial_error_strategy")
        if self.votes not in ("round0", "all"):
            raise DataError(f"votes must be 'round0' or 'all', got {self.votes!r}",
                            field="votes")
        self._check_tie_break()

    def _initial_error(self, initial_error, pairs):
        """crowd-kit's (worker, observed label) x true label counts -> [I, K(true), K(obs)]."""
        if initial_error is None or self.initial_error_strategy is None:
            return None
        if not hasattr(initial_error, "index"):
            return np.asarray(initial_error, np.float64)
        pd = _pd()
        if list(initial_error.index.names) != ["worker", "label"]:
            raise DataError("initial_error must be indexed by (worker, label), got "
                            f"{list(initial_error.index.names)}", field="initial_error")
        labels = pd.Index(self.classes_)
        cols = labels.get_indexer(initial_error.columns)
        obs = labels.get_indexer(initial_error.index.get_level_values("label"))
        if (cols < 0).any() or (obs < 0).any():
            raise DataError("initial_error names a label that is not in the data",
                            field="initial_error")
        rows = pd.Index(self.workers_).get_indexer(initial_error.index.get_level_values("worker"))
        values = initial_error.to_numpy(np.float64)
        if not np.isfinite(values).all() or (values < 0).any():
            raise DataError("initial_error must hold finite non-negative values",
                            field="initial_error")
        I, K = len(self.workers_), len(self.classes_)
        out = np.zeros((I, K, K))
        known = rows >= 0
        if self.initial_error_strategy == "assign":
            missing = sorted(set(range(I)) - set(rows[known].tolist()))
            if missing:
                raise DataError(f"initial_error with strategy 'assign' must cover every worker; "
                                f"{len(missing)} missing (e.g. {self.workers_[missing[0]]!r})",
                                field="initial_error")
        for j, g in enumerate(cols):                  # K columns: a loop over labels only
            np.add.at(out, (rows[known], g, obs[known]), values[known, j])
        return out

    def fit(self, data, true_labels=None, initial_error=None) -> "DawidSkene":
        """Run EM on ``data``; ``true_labels`` (Series keyed by task, or [T] slots with -1 for
        unknown) are clamped through EM (crowd-kit's gold correction); ``initial_error``: see
        ``initial_error_strategy``."""
        pairs = self._pairs(data)
        self._remember(pairs)
        gold = self._gold(pairs, true_labels)
        model, init, prior = self._settings()
        res = dawid_skene_pairs(pairs, init, self.n_iter, self.tol, self.smoothing,
                                model=model, prior=prior, votes=self.votes,
                                criterion=self.criterion, gold=gold,
                                error_prior=self.error_prior,
                                initial_error=self._initial_error(initial_error, pairs),
                                initial_error_strategy=self.initial_error_strategy,
                                history=self.criterion == "crowdkit", dtype=self.dtype)
        pd = _pd()
        self.params_ = res.params
        self.n_iter_ = int(res.n_iter)
        self.converged_ = bool(res.converged)
        self.log_likelihood_ = float(res.log_likelihood)
        self.objective_ = float(res.objective)
        hist = np.asarray(res.loss_history if res.loss_history is not None else [], np.float64)
        self.loss_history_ = hist[:self.n_iter_].tolist()
        self.log_proba_ = np.asarray(res.log_posterior)
        proba = np.where(np.asarray(pairs.mask), np.exp(self.log_proba_.astype(np.float64)), 0.0)
        labels = pd.Index(self.classes_, name="label")
        workers = pd.Index(self.workers_, name="worker")
        self.priors_ = pd.Series(np.exp(np.asarray(res.params.log_prior, np.float64)),
                                 index=labels, name="prior")
        conf = np.asarray(res.params.confusion, np.float64)           # [I, true, observed]
        I, K = conf.shape[:2]
        self.errors_ = pd.DataFrame(
            np.swapaxes(conf, 1, 2).reshape(I * K, K),
            index=pd.MultiIndex.from_product([workers, labels], names=["worker", "label"]),
            columns=labels)
        self.skills_ = pd.Series(np.asarray(res.params.skill, np.float64), index=workers,
                                 name="skill")
        return self._finish(pairs, proba, self.log_proba_)

    def _log_proba(self, pairs):
        votes = crowd_votes(pairs, self.votes, dtype=self.params_.skill.dtype)
        model, _, prior = self._settings()
        return np.asarray(ds_predict(votes, self.params_, model=model, prior=prior))

    def _proba(self, pairs):
        return np.where(np.asarray(pairs.mask), np.exp(self._log_proba(pairs)), 0.0)

    def _scores(self, pairs):
        return self._log_proba(pairs)


class OneCoinDawidSkene(DawidSkene):
    """One-coin Dawid–Skene (crowd-kit ``OneCoinDawidSkene``): worker w answers right with
    probability ``skills_[w]``, else uniformly among the other ``K - 1`` labels. Same EM, same
    arguments and attributes as :class:`DawidSkene`, except the class prior: **uniform by
    default** (``prior="estimate"`` is crowd-kit's).

    Why: a one-coin worker cannot express a label bias, so an estimated class prior absorbs it.
    On S4 relevance one worker gives 7,920 labels, 99.9 % of them the same class; with an
    estimated prior EM runs to the fixed point where that class has prior 0.835 and the worker
    looks expert, and accuracy falls to 0.258 (crowd-kit 1.4.2: the same 0.258 after 100
    iterations; gold has that class at 0.19). That fixed point has the higher likelihood — the
    model is misspecified, EM is not at fault. With the uniform prior the same data gives 0.467,
    and on every other set we checked the uniform prior is as good or better (D_Product 0.928
    against 0.908, S5 adult 0.763 against 0.709, Zhang web 0.839 against 0.764). For label-biased
    workers use :class:`DawidSkene`, whose confusion rows model the bias (0.617 on S4
    relevance)."""

    _model = "one-coin"
    _prior_default = "uniform"


class SpectralDawidSkene(DawidSkene):
    """Dawid–Skene EM started from the one-coin spectral initialization (in the spirit of Zhang,
    Chen, Zhou and Jordan 2016, "Spectral methods meet EM"): worker skills from the rank-one
    structure of the pairwise agreement matrix, then confusion-matrix EM. Limits (see the
    Dawid–Skene EM, :func:`bda_jax.crowd.dawid_skene_votes`): a one-coin spectral step, not
    their three-view tensor method; needs >= 3 workers with overlapping tasks; a majority
    coalition's mode wins the sign.
    """

    _init_default = "spectral"


# ---------------------------------------------------------------- GLAD and MACE


class PerTaskModel(_Crowd):
    """Base of the crowd estimators with a parameter per fitted task (GLAD's difficulty,
    MACE's and semi-supervised BDA's posteriors over the fitted tasks only): predictions exist
    for the fitted tasks; new data means a new fit."""

    def _proba(self, pairs):
        raise DataError(f"{type(self).__name__} estimates per-task parameters; fit it on the "
                        "new data (predict_proba() without data returns the fitted tasks)",
                        field="data")

    def _votes(self, data, true_labels, dtype=None):
        """(pairs, [T] gold slots or None, their :class:`~bda_jax.crowd.CrowdVotes`) of
        ``data``, unpadded; remembers the names."""
        pairs = self._pairs(data)
        self._remember(pairs)
        return (pairs, self._gold(pairs, true_labels),
                crowd_votes(pairs, self.votes, dtype=dtype, pad=False))

    def _store(self, pairs, res):
        """Common fitted attributes from a result with ``log_posterior``, ``n_iter``,
        ``converged`` and ``log_likelihood``; sets ``probas_`` / ``labels_``."""
        self.n_iter_, self.converged_ = int(res.n_iter), bool(res.converged)
        self.log_likelihood_ = float(res.log_likelihood)
        log_proba = np.asarray(res.log_posterior, np.float64)
        proba = np.where(np.asarray(pairs.mask), np.exp(log_proba), 0.0)
        return self._finish(pairs, proba, log_proba)

    def _check_votes(self):
        if self.votes not in VOTE_SOURCES:
            raise DataError(f"votes must be one of {VOTE_SOURCES}, got {self.votes!r}",
                            field="votes")
        self._check_tie_break()


class GLAD(PerTaskModel):
    """GLAD (Whitehill et al. 2009) on crowd-kit's surface (crowd-kit ``GLAD``): worker ability
    α_w and task inverse difficulty β_t; a label is right with probability σ(α_w β_t), wrong
    labels uniform over the other K_t − 1. EM with crowd-kit's conjugate-gradient M-step, priors,
    start and stopping rule (:func:`bda_jax.crowd.glad_em`).

    Args (crowd-kit's, in its order): ``n_iter``, ``tol`` (100, 1e-5); ``silent`` (default
    True; False writes one line per EM iteration to stderr while the compiled loop runs,
    ``GLAD iteration k/n_iter: Q = ...``, the loss crowd-kit's progress bar shows);
    ``labels_priors``: the fixed class prior, a Series indexed by label (crowd-kit's; its index
    is the label set, so a label it adds that no worker used becomes a class, and a label of the
    data it lacks is a :class:`DataError`) or [K] in ``classes_`` order; positive, normalized
    here; default uniform. ``alphas_priors_mean`` / ``betas_priors_mean``: means of the
    unit-variance normal priors on α and on log β: a number, a Series indexed by worker / by task
    (crowd-kit's; it must cover every worker / task of the data, other entries are not read) or
    [W] / [T] in ``workers_`` / ``tasks_`` order; default (None) 1 each, as crowd-kit's.
    ``m_step_max_iter``, ``m_step_tol`` (25, 1e-2). Keyword-only (ours): ``votes``, ``dtype``,
    ``tie_break``, ``seed`` as :class:`DawidSkene`.

    Fitted: ``labels_``, ``probas_``, ``alphas_`` (Series by worker), ``betas_`` (log β, Series
    by task: crowd-kit's ``betas_``), ``priors_`` (the class prior, Series by label),
    ``prior_labels_``, ``alphas_priors_mean_`` / ``betas_priors_mean_`` (Series by worker / by
    task), ``loss_history_``, ``log_likelihood_``, ``n_iter_``, ``converged_``.
    """

    _crowdkit_ties = {"final": "first"}       # crowd-kit's GLAD: groupby-sorted columns

    def __init__(self, n_iter: int = 100, tol: float = 1e-5, silent: bool = True,
                 labels_priors=None, alphas_priors_mean=None, betas_priors_mean=None,
                 m_step_max_iter: int = 25, m_step_tol: float = 1e-2, *,
                 votes: str = "round0", dtype=None, tie_break: str = "random", seed: int = 0):
        self.n_iter, self.tol, self.silent = n_iter, tol, silent
        self.labels_priors = labels_priors
        self.alphas_priors_mean, self.betas_priors_mean = alphas_priors_mean, betas_priors_mean
        self.m_step_max_iter, self.m_step_tol = m_step_max_iter, m_step_tol
        self.votes, self.dtype, self.tie_break, self.seed = votes, dtype, tie_break, seed
        self._check_params()

    def _check_params(self) -> None:
        if not isinstance(self.silent, (bool, np.bool_)):
            raise DataError(f"silent must be True or False, got {self.silent!r}",
                            field="silent")
        self._check_votes()

    def _pairs(self, data, fitted=False):
        """A frame fitted with a ``labels_priors`` Series takes its index as the label set."""
        pd = _pd()
        prior = self.labels_priors
        if fitted or not _is_frame(data) or not isinstance(prior, pd.Series):
            return super()._pairs(data, fitted)
        self._check_appearance(data)
        index = pd.Index(prior.index)
        if index.has_duplicates:
            raise DataError(f"labels_priors names label {index[index.duplicated()][0]!r} twice",
                            field="labels_priors")
        if "label" in data.columns:
            unknown = ~data["label"].isin(index).to_numpy()
            if unknown.any():
                bad = data["label"].to_numpy()[np.flatnonzero(unknown)[0]]
                raise DataError(f"the data's label {bad!r} is not in labels_priors' index "
                                f"{list(index)}", field="labels_priors")
        try:
            labels = list(index.sort_values())
        except TypeError as err:
            raise DataError(f"labels_priors' labels cannot be ordered ({err}); use one type",
                            field="labels_priors") from None
        return pairs_from_frame(data, labels=labels)

    def _class_prior(self):
        """[K] class prior in ``classes_`` order (None: uniform)."""
        prior, K = self.labels_priors, len(self.classes_)
        if prior is None:
            return np.full(K, 1.0 / K)
        pd = _pd()
        if isinstance(prior, pd.Series):
            extra = pd.Index(prior.index).difference(pd.Index(self.classes_))
            if len(extra):
                raise DataError(f"labels_priors names label {extra[0]!r}, which is not among the "
                                f"data's candidates {self.classes_}", field="labels_priors")
            prior = prior.reindex(pd.Index(self.classes_))
        try:
            v = np.asarray(prior, np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise DataError("labels_priors must hold numbers", field="labels_priors") from None
        if v.shape != (K,) or not (np.isfinite(v) & (v > 0)).all():
            raise DataError(f"labels_priors must give every one of the {K} labels a finite prior "
                            f"> 0 (a Series by label, or [{K}] in classes_ order)",
                            field="labels_priors")
        return v / v.sum()

    def _prior_mean(self, value, names, field, what):
        """[n] prior means from a number, a Series indexed by ``what``, or [n] values."""
        pd = _pd()
        n = len(names)
        if value is None:
            v = np.ones(n)
        elif isinstance(value, pd.Series):
            if value.index.has_duplicates:
                raise DataError(f"{field} names {what} {value.index[value.index.duplicated()][0]!r}"
                                " twice", field=field)
            v = value.reindex(pd.Index(list(names)))
            missing = v.isna().to_numpy()
            if missing.any():
                raise DataError(f"{field} has no value for {what} {names[int(np.flatnonzero(missing)[0])]!r}"
                                f" ({int(missing.sum())} of {n} missing)", field=field)
            v = v.to_numpy(np.float64)
        else:
            try:
                v = np.broadcast_to(np.asarray(value, np.float64), (n,)).copy()
            except (TypeError, ValueError):
                raise DataError(f"{field} must be a number, a Series indexed by {what} or [{n}] "
                                f"values, got shape {np.shape(value)}", field=field) from None
        if not np.isfinite(v).all():
            raise DataError(f"{field} must be finite", field=field)
        return v

    def fit(self, data, true_labels=None) -> "GLAD":
        pairs, gold, votes = self._votes(data, true_labels, self.dtype)
        prior = self._class_prior()
        alpha_mean = self._prior_mean(self.alphas_priors_mean, self.workers_,
                                      "alphas_priors_mean", "worker")
        beta_mean = self._prior_mean(self.betas_priors_mean, list(self.tasks_),
                                     "betas_priors_mean", "task")
        res = glad_em(votes, gold=gold, n_iter=self.n_iter, tol=self.tol,
                      m_step_max_iter=self.m_step_max_iter, m_step_tol=self.m_step_tol,
                      alpha_prior_mean=alpha_mean, log_beta_prior_mean=beta_mean,
                      class_prior=prior, progress=not bool(self.silent))
        pd = _pd()
        workers = pd.Index(self.workers_, name="worker")
        labels = pd.Index(self.classes_, name="label")
        self.loss_history_ = np.asarray(res.loss_history, np.float64)[:int(res.n_iter)].tolist()
        self.alphas_ = pd.Series(np.asarray(res.params.alpha, np.float64), index=workers,
                                 name="alpha")
        self.betas_ = pd.Series(np.asarray(res.params.log_beta, np.float64), index=self.tasks_,
                                name="beta")
        self.priors_ = pd.Series(prior, index=labels, name="prior")
        self.prior_labels_ = labels
        self.alphas_priors_mean_ = pd.Series(alpha_mean, index=workers, name="alpha")
        self.betas_priors_mean_ = pd.Series(beta_mean, index=self.tasks_, name="beta")
        return self._store(pairs, res)


class MACE(PerTaskModel):
    """MACE (Hovy et al. 2013) on crowd-kit's surface (crowd-kit ``MACE``): worker w knows the
    answer with probability θ_w and copies it, else spams from its strategy ξ_w. Variational
    Bayes (``method="vb"``, crowd-kit's default) or EM, ``n_restarts`` seeded restarts of
    ``n_iter`` iterations each, the best kept (:func:`bda_jax.crowd.mace_em`). Restart
    starts come from ``jax.random.key(seed)``; crowd-kit draws them from NumPy (and reuses one
    seed for every restart), so agreement with it is at the level of the fixed point.

    Args (crowd-kit's, in its order): ``n_restarts``, ``n_iter``, ``method`` (10, 50, "vb");
    ``smoothing``: the pseudo-count of the ``"em"`` M-step, default (None) ``0.01 / K`` — what
    crowd-kit uses whatever its ``smoothing`` says (crowd-kit never reads that argument); giving
    one with ``method="vb"``, which has no use for it, is a :class:`DataError`;
    ``default_noise``, ``alpha``, ``beta`` (0.5 each); ``random_state``: crowd-kit's name for
    ``seed`` (either; both and different: :class:`DataError`; neither: 0; both are stored as
    given, ``None`` included, and resolved when fitting); ``verbose``: 0
    (default) quiet, 1 one stderr line per restart with its final log-likelihood, 2 also one per
    iteration of each restart — written when the compiled loop returns, since all restarts run
    together in it (crowd-kit shows live progress bars). Keyword-only (ours): ``votes``,
    ``tie_break``, ``seed``.

    Fitted: ``labels_``, ``probas_``, ``spamming_`` [W, 2] (spam, knows), ``thetas_`` [W, K]
    (the spamming strategies) — with ``"vb"`` these are crowd-kit's geometric-mean weights
    exp E[log p], so rows sum to a little under 1 — ``theta_priors_`` [W, 2] (alpha, beta) and
    ``strategy_priors_`` [W, K] (10) with ``"vb"`` (None with ``"em"``), ``smoothing_``,
    ``log_likelihood_``, ``n_iter_``, ``converged_``.
    """

    def __init__(self, n_restarts: int = 10, n_iter: int = 50, method: str = "vb",
                 smoothing: float | None = None, default_noise: float = 0.5,
                 alpha: float = 0.5, beta: float = 0.5, random_state: int | None = None,
                 verbose: int = 0, *, votes: str = "round0", tie_break: str = "random",
                 seed: int | None = None):
        self.n_restarts, self.n_iter, self.method = n_restarts, n_iter, method
        self.smoothing, self.default_noise = smoothing, default_noise
        self.alpha, self.beta = alpha, beta
        self.random_state, self.seed = random_state, seed
        self.verbose = verbose
        self.votes, self.tie_break = votes, tie_break
        self._check_params()

    def _check_params(self) -> None:
        if self.method not in MACE_METHODS:
            raise DataError(f"method must be one of {MACE_METHODS}, got {self.method!r}",
                            field="method")
        if self.smoothing is not None and self.method == "vb":
            raise DataError("smoothing is the pseudo-count of method='em'; 'vb' does not read it "
                            "(crowd-kit never reads its smoothing argument: it uses 0.01 / K, the "
                            "default here); drop it or use method='em'", field="smoothing")
        verbose = self.verbose
        if isinstance(verbose, (bool, np.bool_)) or not isinstance(verbose, (int, np.integer)) \
                or verbose < 0:
            raise DataError(f"verbose must be an int >= 0, got {verbose!r}", field="verbose")
        self._seed()
        self._check_votes()

    def _seed(self) -> int:
        """One seed from ``seed`` and ``random_state`` (either; both: equal; neither: 0)."""
        return _resolve_seed(self.seed, self.random_state)

    def fit(self, data, true_labels=None) -> "MACE":
        pairs, gold, votes = self._votes(data, true_labels)
        res = mace_em(jax.random.key(self._seed()), votes, gold=gold,
                      n_restarts=self.n_restarts, n_iter=self.n_iter,
                      method=self.method, alpha=self.alpha, beta=self.beta,
                      smoothing=self.smoothing, default_noise=self.default_noise)
        self.spamming_ = np.stack([np.asarray(res.params.spam, np.float64),
                                   np.asarray(res.params.competence, np.float64)], axis=1)
        self.thetas_ = np.asarray(res.params.strategy, np.float64)
        W, K = self.thetas_.shape
        vb = self.method == "vb"
        self.theta_priors_ = (np.tile(np.array([self.alpha, self.beta], np.float64), (W, 1))
                              if vb else None)
        self.strategy_priors_ = np.full((W, K), 10.0) if vb else None
        self.smoothing_ = 0.01 / K if self.smoothing is None else float(self.smoothing)
        if self.verbose:
            self._report(res)
        return self._store(pairs, res)

    def _report(self, res):
        """``verbose``: the restarts' log-likelihoods on stderr."""
        import sys
        final = np.asarray(res.restart_log_likelihood, np.float64)
        hist = np.asarray(res.log_likelihood_history, np.float64)
        best, R = int(res.best_restart), final.size
        for r in range(R):
            if self.verbose > 1:
                for i in np.flatnonzero(~np.isnan(hist[r])):
                    print(f"MACE restart {r + 1}/{R} iteration {i + 1}/{self.n_iter}: "
                          f"log-likelihood = {hist[r, i]:.6f}", file=sys.stderr)
            print(f"MACE restart {r + 1}/{R}: log-likelihood = {final[r]:.6f}"
                  + (" (best)" if r == best else ""), file=sys.stderr)
