"""Aggregators with one interface (crowd-kit/sklearn surface): ``fit`` returns self,
``predict_proba`` gives [T, K] probabilities over each task's candidates (0 on padding slots),
``predict`` the chosen slot with seeded random ties ([BDA] Appendix D.6). Fitted attributes
end in ``_``. ``fit``/``predict`` accept :class:`Counts` or a list of traces (tallied with the
agent list seen at fit time, so train and test agree).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.counts import Counts
from .._core.decisions import majority
from .._core.errors import DataError
from .._core.exported import persistent_jit
from .._core.fitting import fit_confusion, prior_from_reliability, reliability, class_log_prior
from .._core.kernels import confusion_log_posterior, onecoin_log_posterior, table_size_for
from ._base import Aggregator
from .._core.selection import (GRID_COLUMNS, GRIDS, nested_grid_search, pad_tasks, small_counts_for,
                               task_bucket, training_folds, training_weights)

__all__ = ["Majority", "BDA", "BDAShared", "BDAPerAgent", "BDATempered", "BDAConfusion", "BDAAuto",
           "AUTO_VARIANTS", "auto_scores"]


class Majority(Aggregator):
    """Plurality of round-0 endorsements; confidence = the winner's vote share (Appendix B.1)."""

    def __init__(self, rounds: str = "round0", seed: int = 0):
        self.rounds, self.seed = rounds, seed

    def fit(self, data=None) -> "Majority":
        """No parameters: majority needs no labels. Records the agent list of ``data``."""
        if data is not None:
            self.agents_ = self._counts(data).agents
        return self

    def _log_proba(self, counts):
        shares = majority(jax.random.key(0), counts, rounds=self.rounds).proba
        return jnp.where(counts.mask, jnp.log(shares), -jnp.inf)

    def predict(self, data, key=None) -> np.ndarray:
        counts = self._counts(data)
        key = jax.random.key(self.seed) if key is None else key
        return np.asarray(majority(key, counts, rounds=self.rounds).index)


def _default_class_prior(arm: str) -> bool:
    """Whether BDA arm ``arm`` fits its candidate prior pi0 on the training gold by default:
    True for ``"bda-confusion"`` ([BDA] Appendix D.6), False for the one-coin arms (§3)."""
    return arm == "bda-confusion"


class BDA(Aggregator):
    """Supervised BDA arm; hyperparameters chosen by k-fold CV on the multiclass Brier.

    Arms: ``"bda-shared"`` (Eq. 3 with kappa = 0), ``"bda-per-agent"`` (Eq. 3), ``"bda-tempered"``
    (Eq. 3 with a temperature), ``"bda-confusion"`` (Eq. 4 with Dirichlet rows). ``basis``
    ("all", "propose", "round0") chooses which moves estimate the reliabilities (Table 7) when
    fitting from traces.

    Selection ([BDA] Appendix D.1): ``n_folds`` inner folds of the training tasks alone
    (:func:`~bda_jax._core.selection.training_folds` from ``seed``), every grid row fitted on
    each inner training part and scored by the multiclass Brier on its validation fold, the row
    with the lowest pooled mean (first of ties) refit on all training tasks. The evaluation
    harness fits its BDA arms with this class, so ``evaluate(..., seed=s)`` predicts each outer
    fold exactly as ``BDA(arm, seed=s).fit(data, w)`` on that fold's weights.

    ``class_prior`` is the candidate prior pi0 of Eqs. 1 and 4: ``True`` fits it on the training
    gold (:func:`~bda_jax.class_log_prior`, inside every inner and outer training part, so no
    held-out label reaches it), ``False`` keeps it uniform. ``None`` (the default) takes the arm's
    documented reading of [BDA]: the confusion arm is fitted with its "train-fitted candidate
    prior" (Appendix D.6, the one passage that describes this arm's pi0), every one-coin arm keeps
    the uniform pi0 of §3 ("uniform in every experiment"; Eq. 1, Algorithm 1 and Proposition 1,
    where pi0 appears, are the one-coin's). ``class_prior`` is stored as given (scikit-learn's
    contract); :attr:`fits_class_prior` is the resolved flag; the harness names the confusion arm's uniform-prior variant
    ``"bda-confusion-uniform"`` (docs/evaluation.md).

    Fitted: ``params_`` (dict of the selected hyperparameters), ``cv_brier_`` (mean CV Brier per
    grid row), ``reliability_`` [I] (one-coin arms), ``alpha_``/``beta_`` [I] (one-coin arms),
    ``confusion_`` [I, K, K] and ``label_space_`` ("semantic" when every task shares one candidate
    list, else "positional"; confusion arm), ``log_prior_``, ``agents_``.
    """

    def __init__(self, arm: str = "bda-per-agent", *, grid=None, n_folds: int = 5, seed: int = 0,
                 basis: str = "all", class_prior: bool | None = None):
        self.arm, self.grid, self.n_folds, self.seed = arm, grid, n_folds, seed
        self.basis, self.class_prior = basis, class_prior
        self._check_params()

    def _check_params(self) -> None:
        """The settings as given (scikit-learn's contract: stored unchanged, checked here, at
        construction and before every fit)."""
        if self.arm not in GRIDS:
            raise DataError(f"unknown BDA arm {self.arm!r}; expected one of {sorted(GRIDS)}",
                            field="arm")
        if self.basis not in ("all", "propose", "round0"):
            raise DataError(f"basis must be 'all', 'propose' or 'round0', got {self.basis!r}",
                            field="basis")
        if self.class_prior is not None and not isinstance(self.class_prior, (bool, np.bool_)):
            raise DataError(f"class_prior must be True, False or None, got "
                            f"{self.class_prior!r}", field="class_prior")

    @property
    def fits_class_prior(self) -> bool:
        """``class_prior`` resolved: ``None`` takes the arm's reading (:func:`_default_class_prior`)."""
        return _default_class_prior(self.arm) if self.class_prior is None else bool(self.class_prior)

    def fit(self, data, weights=None) -> "BDA":
        """Select hyperparameters by ``n_folds``-fold CV on the labeled tasks of ``data`` (or of
        ``weights`` > 0), then refit on all of them."""
        self._fit(data, weights)
        return self

    def _fit(self, data, weights) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`fit`; returns the inner-fold table it selected on: the multiclass Brier sums
        [F_in, G] of every grid row on every inner validation fold, and the folds' training
        weights [F_in] (:class:`BDAAuto` compares arms on it)."""
        cv = self._inner_cv(data, weights)
        grid = np.asarray(GRIDS[self.arm] if self.grid is None else self.grid, np.float64)
        fold_sums = _inner_search(self.arm, grid, cv, self.fits_class_prior)
        self._adopt(cv, grid, fold_sums)
        return fold_sums, cv.fold_n

    def _inner_cv(self, data, weights) -> "_InnerCV":
        """The tallies, padded counts and inner-fold weights every grid search of this fit
        reads (:class:`_InnerCV`; the folds depend on the training tasks, ``n_folds`` and
        ``seed`` alone, so :class:`BDAAuto` builds them once for all its variants)."""
        counts = self._counts(data)
        self.agents_ = counts.agents           # the basis tally below keeps this agent order
        fit_counts = counts
        if self.basis != "all":
            if isinstance(data, Counts):
                raise DataError("basis other than 'all' needs traces, not counts", field="basis")
            option = {"propose": {"forces": ("propose",)}, "round0": {"max_round": 0}}[self.basis]
            fit_counts = self._counts(data, **option)
        w = training_weights(counts, weights)
        # folds over the training tasks only: labels outside them must not move fold boundaries
        folds = training_folds(counts, w, self.n_folds, self.seed)
        n = int(folds.max()) + 1
        # the task axis padded to its bucket by empty tasks of weight 0 (one compiled search
        # per bucket of T, not per T; docs/cli.md "Compilation cache"): same scores and fits
        size = task_bucket(w.size)
        wp = np.pad(w, (0, size - w.size))
        fp = np.pad(folds, (0, size - w.size), constant_values=-1)
        inner_train = (((fp[None, :] != np.arange(n)[:, None]) & (fp >= 0)) * wp).astype(np.float32)
        inner_val = ((fp[None, :] == np.arange(n)[:, None]) * wp).astype(np.float32)
        table_size = table_size_for(counts)
        return _InnerCV(counts, pad_tasks(counts, size), pad_tasks(fit_counts, size), wp,
                        inner_train, inner_val, inner_val.astype(np.float64).sum(-1), table_size,
                        small_counts_for(counts, table_size))

    def _adopt(self, cv: "_InnerCV", grid: np.ndarray, fold_sums: np.ndarray) -> None:
        """Select on the inner-fold Brier sums ``fold_sums`` [F_in, G] of ``grid`` [G, P]: the
        row with the lowest pooled mean (first of ties), refit on all training tasks of
        ``cv``; sets the fitted attributes."""
        self.agents_ = cv.counts.agents
        self.cv_brier_ = fold_sums.sum(0) / max(cv.fold_n.sum(), 1.0)  # on the host: no device op
        theta = grid[int(np.argmin(self.cv_brier_))]
        self.params_ = dict(zip(GRID_COLUMNS[self.arm], map(float, theta)))
        fitted = _refit(self.arm, self.fits_class_prior, cv.fit_padded, cv.weights,
                        theta.astype(np.float32))
        self.log_prior_ = np.asarray(fitted["log_prior"]) if self.fits_class_prior else None
        if self.arm == "bda-confusion":
            self.confusion_ = np.asarray(fitted["confusion"])
            self.label_space_ = "semantic" if cv.counts.vocab is not None else "positional"
        else:
            self.reliability_ = np.asarray(fitted["reliability"])
            self.alpha_, self.beta_ = np.asarray(fitted["alpha"]), np.asarray(fitted["beta"])

    def _log_proba(self, counts):
        if not hasattr(self, "params_"):
            raise DataError("fit the aggregator first", field="fit")
        if self.arm == "bda-confusion":
            if self.confusion_.shape[1] != counts.e.shape[2]:
                raise DataError(f"fitted on K = {self.confusion_.shape[1]} slots, got "
                                f"{counts.e.shape[2]}", field="K")
            return confusion_log_posterior(counts, self.confusion_, self.params_["tau"],
                                           self.log_prior_)
        return onecoin_log_posterior(counts, self.alpha_, self.beta_, self.params_["tau"],
                                     self.log_prior_)


class _InnerCV(NamedTuple):
    """What one BDA fit's inner grid searches read (:meth:`BDA._inner_cv`): ``counts`` (the
    tally of the data, T tasks), ``padded`` / ``fit_padded`` (it and the reliability basis
    padded to the task bucket, :func:`~bda_jax._core.selection.pad_tasks`), ``weights`` [T_pad]
    training weights (0 on padding), ``inner_train`` / ``inner_val`` [F_in, T_pad] inner-fold
    weights, ``fold_n`` [F_in] the validation folds' weights (float64), the kernels'
    ``table_size`` and ``small_counts`` flag."""

    counts: Counts
    padded: Counts
    fit_padded: Counts
    weights: np.ndarray
    inner_train: np.ndarray
    inner_val: np.ndarray
    fold_n: np.ndarray
    table_size: int
    small_counts: bool


def _inner_search(arm: str, grid: np.ndarray, cv: _InnerCV, class_prior: bool) -> np.ndarray:
    """[F_in, G] multiclass Brier sums of every row of ``grid`` [G, P] on every inner
    validation fold of ``cv`` ([BDA] Appendix D.1), one compiled call: one search "fold" per
    inner fold, so each fold's scores come back, not only their pooled mean. Only
    ``arm == "bda-confusion"`` and ``class_prior`` choose the program (every one-coin arm runs
    the same one), which is what lets :class:`BDAAuto` score several one-coin grids in one
    search."""
    n, size = cv.inner_train.shape
    _, _, scores = nested_grid_search(arm, grid.astype(np.float32),
                                      np.broadcast_to(cv.weights, (n, size)),
                                      cv.inner_train[:, None], cv.inner_val[:, None], cv.padded,
                                      cv.fit_padded, class_prior, cv.table_size, refit=False,
                                      small_counts=cv.small_counts)
    return np.asarray(scores, np.float64) * cv.fold_n[:, None]                 # [F_in, G]


@partial(persistent_jit, static_argnames=("arm", "class_prior"))
def _refit(arm, class_prior, fit_counts, w, theta) -> dict:
    """The fit at the selected grid row ``theta`` on training weights ``w`` [T], one compiled
    call (padded counts: one per bucket): ``log_prior`` [K] (with ``class_prior``), and the
    Dirichlet ``confusion`` rows [I, K, K] (confusion arm) or ``reliability``, ``alpha`` and
    ``beta`` [I] (Eq. 3; one-coin arms)."""
    out = {"log_prior": class_log_prior(fit_counts, w)} if class_prior else {}
    if arm == "bda-confusion":
        out["confusion"] = fit_confusion(fit_counts, theta[0], w)
    else:
        r = reliability(fit_counts, w)
        prior = prior_from_reliability(r, theta[0], theta[1], theta[2])
        out.update(reliability=r, alpha=prior.alpha, beta=prior.beta)
    return out


def _arm_class(name, arm, doc):
    """A BDA class with its arm fixed: ``arm`` is a class attribute, not a constructor argument
    (scikit-learn's contract: ``__init__`` sets exactly its parameters)."""
    def __init__(self, *, grid=None, n_folds: int = 5, seed: int = 0, basis: str = "all",
                 class_prior: bool | None = None):
        self.grid, self.n_folds, self.seed = grid, n_folds, seed
        self.basis, self.class_prior = basis, class_prior
        self._check_params()
    return type(name, (BDA,), {"__init__": __init__, "__doc__": doc, "arm": arm})


BDAShared = _arm_class("BDAShared", "bda-shared", "BDA with one shared Beta prior (Eq. 3, kappa = 0).")
BDAPerAgent = _arm_class("BDAPerAgent", "bda-per-agent", "BDA with per-agent priors (Eq. 3).")
BDATempered = _arm_class("BDATempered", "bda-tempered", "Per-agent one-coin BDA with a CV temperature.")
BDAConfusion = _arm_class("BDAConfusion", "bda-confusion",
                          "Tempered confusion-matrix BDA (Eq. 4); pi0 fitted on the training gold "
                          "unless ``class_prior=False`` (Appendix D.6).")


#: The BDA arms :class:`BDAAuto` chooses among, simplest first (exact ties go to the first).
AUTO_VARIANTS = ("bda-shared", "bda-per-agent", "bda-tempered", "bda-confusion")
_AUTO_CRITERIA = ("selected", "best-row")


def auto_scores(fold_sums, fold_n, criterion: str = "selected") -> float:
    """The inner-CV multiclass Brier of one BDA arm as :class:`BDAAuto` compares it.

    ``fold_sums`` [F_in, G]: the Brier sum of every grid row on every inner validation fold,
    ``fold_n`` [F_in] the folds' weights (what :meth:`BDA.fit` selects on).

    * ``"selected"``: the out-of-fold Brier of the arm *with its own grid search*: inner fold j
      is scored at the row with the lowest Brier on the other inner folds (first of ties), so
      fold j's validation labels never choose the row they score, and a larger grid earns no
      credit for fitting the validation noise (without this the tempered grid, which contains
      the per-agent grid, which contains the shared one, could never lose to either).
    * ``"best-row"``: the lowest pooled mean over the rows, the score the arm's own selection
      reached (optimistic, more so for larger grids).
    """
    s = np.asarray(fold_sums, np.float64)
    n = np.asarray(fold_n, np.float64)
    total = max(float(n.sum()), 1.0)
    if criterion == "best-row":
        return float(s.sum(0).min() / total)
    if criterion != "selected":
        raise DataError(f"criterion must be one of {list(_AUTO_CRITERIA)}, got {criterion!r}",
                        field="criterion")
    if s.shape[0] < 2:
        raise DataError("the 'selected' criterion needs at least 2 inner folds",
                        field="criterion")
    rows = np.argmin(s.sum(0)[None, :] - s, axis=1)                 # [F_in], other folds' best
    return float(s[np.arange(s.shape[0]), rows].sum() / total)


class BDAAuto(Aggregator):
    """The BDA arm that chooses itself: among ``variants`` (default :data:`AUTO_VARIANTS`:
    shared, per-agent, tempered one-coin and the confusion arm, Eqs. 3 and 4), the one with the
    lowest inner-CV multiclass Brier on the training tasks, then that arm fitted on them.

    Every variant is fitted as :class:`BDA` (``BDA(variant, n_folds=n_folds, seed=seed,
    basis=basis)``, its own default candidate prior) on the *same* inner folds of the training
    tasks (:func:`~bda_jax._core.selection.training_folds`, from ``seed``: no other label moves
    a fold), and compared by :func:`auto_scores` with ``criterion`` (default ``"selected"``:
    each inner fold scored at the grid row its variant selects on the other inner folds; a
    defensible reading of "the inner folds' Brier" that does not favour the larger grids; the
    plain ``"best-row"`` minimum is the alternative). Lowest score wins; exact ties go to the
    earlier variant. Why it matters: the one-coin model assumes uniform errors, so a coalition
    that pushes one decoy per task is what the confusion rows capture ([BDA] §6, "confusion
    under attack"); on clean councils the one-coin arms are as good with fewer parameters.

    Fitted: ``variant_`` (the winner), ``best_`` (the fitted :class:`BDA` of the winner:
    ``BDA(variant_, ...).fit(data, weights)``: the same folds, grid and refit, its selection on
    the same rows' scores up to float32 rounding; see :meth:`fit`), ``variant_brier_`` [V]
    (the score of every variant, in ``variants`` order), ``margin_`` (the runner-up's score
    minus the winner's, >= 0; NaN with one variant), ``agents_``. ``predict_proba`` /
    ``predict`` are the winner's.
    """

    def __init__(self, variants=AUTO_VARIANTS, *, criterion: str = "selected",
                 n_folds: int = 5, seed: int = 0, basis: str = "all"):
        self.variants, self.criterion = variants, criterion
        self.n_folds, self.seed, self.basis = n_folds, seed, basis
        self._check_params()

    def _check_params(self) -> None:
        variants, n_folds = self.variants, self.n_folds
        if isinstance(variants, str) or not isinstance(variants, (list, tuple)) or \
                not variants or len(set(variants)) != len(variants) or \
                any(v not in GRIDS for v in variants):
            raise DataError(f"variants must be a non-empty list of distinct BDA arms from "
                            f"{sorted(GRIDS)}, got {variants!r}", field="variants")
        if self.criterion not in _AUTO_CRITERIA:
            raise DataError(f"criterion must be one of {list(_AUTO_CRITERIA)}, got "
                            f"{self.criterion!r}", field="criterion")
        if self.basis not in ("all", "propose", "round0"):
            raise DataError(f"basis must be 'all', 'propose' or 'round0', got {self.basis!r}",
                            field="basis")
        if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or \
                n_folds < 2:
            raise DataError(f"n_folds must be an integer >= 2, got {n_folds!r}", field="n_folds")

    def fit(self, data, weights=None) -> "BDAAuto":
        """Fit every variant on the labeled tasks of ``data`` (or of ``weights`` > 0) with the
        same inner folds, keep the one with the lowest :func:`auto_scores`.

        Built once for all variants: the tally and the inner folds; one grid search per
        compiled program rather than per variant (the one-coin variants' grids nest, shared in
        per-agent in tempered, and every one-coin arm runs the same search program, so their
        union is scored in one call and each variant reads its own rows); only the winner is
        refit. Each variant's scores are its own grid's rows scored on the same folds as
        ``BDA(variant, ...)`` alone would; they can differ from that fit's in float32 rounding
        only (a different batch of rows in one matrix product), the confusion arm's not at all.
        """
        variants = tuple(self.variants)
        models = {v: BDA(v, n_folds=int(self.n_folds), seed=self.seed, basis=self.basis)
                  for v in variants}
        cv = models[variants[0]]._inner_cv(data, weights)
        # one search per program: (confusion arm?, fitted candidate prior?) picks the program
        groups: dict[tuple[bool, bool], list[str]] = {}
        for v in variants:
            groups.setdefault((v == "bda-confusion", models[v].fits_class_prior), []).append(v)
        sums, grids = {}, {}
        for (_, class_prior), members in groups.items():
            rows: dict[tuple, int] = {}                 # union of the grids, first-seen order
            for v in members:
                grids[v] = np.asarray(GRIDS[v], np.float64)
                for row in map(tuple, grids[v]):
                    rows.setdefault(row, len(rows))
            union = np.array(list(rows), np.float64)
            group_sums = _inner_search(members[0], union, cv, class_prior)         # [F_in, U]
            for v in members:
                sums[v] = group_sums[:, [rows[row] for row in map(tuple, grids[v])]]
        scores = np.asarray([auto_scores(sums[v], cv.fold_n, self.criterion) for v in variants],
                            np.float64)
        best = int(np.argmin(scores))                       # first of exact ties
        self.variant_, self.best_ = variants[best], models[variants[best]]
        self.best_._adopt(cv, grids[self.variant_], sums[self.variant_])
        self.variant_brier_ = scores
        rest = np.delete(scores, best)
        self.margin_ = float(rest.min() - scores[best]) if rest.size else float("nan")
        self.agents_ = self.best_.agents_
        return self

    def _log_proba(self, counts):
        if not hasattr(self, "best_"):
            raise DataError("fit the aggregator first", field="fit")
        return self.best_._log_proba(counts)
