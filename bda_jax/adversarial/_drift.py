"""Row-drift monitoring and the sleeper study ([BDA] Appendix F.8 and F.13).

The confusion rows P_i(. | g) of Eq. (4) describe *how* a seat errs. A seat that turns adversarial
between two fits (a sleeper, a wrong-answer policy shift) moves its rows, so comparing rows fitted
on two labeled windows announces the change before the next refit exploits it (F.13).

**Statistic.** For agent i and true class g let P^a_i(. | g), P^b_i(. | g) be the rows fitted by
:func:`~bda_jax.fit_confusion` on windows a and b (same fixed ``lam``: drift must not be
confounded with hyperparameter selection), and n^a_i(g), n^b_i(g) their evidence (the row's
pseudo-observation totals sum_h n_i(g, h) of Eq. (4)). Per row the total variation is

    TV_i(g) = 0.5 * sum_h |P^a_i(h | g) - P^b_i(h | g)|            in [0, 1],

and the per-agent drift is the evidence-weighted mean over true classes

    D_i = sum_g w_i(g) TV_i(g) / sum_g w_i(g),   w_i(g) = n^a n^b / (n^a + n^b)

(the harmonic-mean weight is the effective size of a two-sample comparison: a class without
evidence in *either* window gets no weight). An agent with no row observed in both windows has
no drift estimate: NaN. With balanced classes D_i is the paper's mean per-(seat, class) TV.

**Noise floor.** The same statistic between two disjoint random halves of a clean (reference)
window, halves split by cluster so seeds of one question stay together, averaged over
``n_splits`` random splits (or a high quantile of them). Half-size windows overstate the sampling
noise of a full-size comparison (about sqrt(2)-fold), so the floor is conservative (F.13).

:class:`RowDriftMonitor` wraps both as an online monitor: fit a reference window, then each new
labeled window yields a :class:`DriftReport` that alarms per agent when D_i > factor * floor_i and
recommends the policy-robust one-coin fallback (F.12) while any alarm is raised.

:func:`sleeper_study` runs the contamination axis of F.8 on simulated councils.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core.counts import Counts, tally
from .._core.errors import ArtifactError, DataError
from .._core.fitting import fit_confusion
from .._core.selection import training_weights
from ..aggregators import is_supervised, make_arm
from ..metrics import summary
from ..simulate import simulate_council

__all__ = ["row_drift", "noise_floor", "DriftReport", "RowDriftMonitor", "SleeperStudy",
           "sleeper_study", "F_GRID"]

#: The sleeper contamination axis f in {0, .1, ..., 1} ([BDA] Appendix F.8).
F_GRID = tuple(round(0.1 * k, 1) for k in range(11))


# --------------------------------------------------------------------------- the statistic

def _weights(counts: Counts, weights) -> jax.Array:
    """[T] row-fitting weights: ``weights`` (default 1) on tasks whose gold is a candidate
    (checked as every training weight is: :func:`~bda_jax._core.selection.training_weights`)."""
    return jnp.asarray(training_weights(counts, weights)) * (jnp.asarray(counts.gold) >= 0)


def _rows(counts: Counts, lam, w):
    """Confusion rows [I, K, K] and their evidence n_i(g) [I, K] (Eq. 4's row totals)."""
    K = counts.e.shape[2]
    rows = fit_confusion(counts, lam, w)
    onehot = jax.nn.one_hot(jnp.maximum(counts.gold, 0), K) * w[:, None]
    evidence = jnp.einsum("tg,tih->ig", onehot, jnp.asarray(counts.c, jnp.float32))
    return rows, evidence


def _tv(rows_a, ev_a, rows_b, ev_b):
    """Per-agent evidence-weighted mean row TV [I] (NaN: no row seen in both windows)."""
    tv = 0.5 * jnp.abs(rows_a - rows_b).sum(-1)                          # [I, K]
    tot = ev_a + ev_b
    w = jnp.where(tot > 0, ev_a * ev_b / jnp.where(tot > 0, tot, 1.0), 0.0)
    den = w.sum(-1)
    return jnp.where(den > 0, (w * tv).sum(-1) / jnp.where(den > 0, den, 1.0), jnp.nan)


def _check_pair(a: Counts, b: Counts):
    if a.e.shape[1:] != b.e.shape[1:]:
        raise DataError(f"windows differ in agents or candidate slots: [I, K] = "
                        f"{list(a.e.shape[1:])} vs {list(b.e.shape[1:])}", field="counts")
    if a.agents is not None and b.agents is not None and tuple(a.agents) != tuple(b.agents):
        raise DataError(f"windows list different agents: {list(a.agents)} vs {list(b.agents)} "
                        "(tally both with the same agents=...)", field="agents")


def row_drift(counts_a: Counts, counts_b: Counts, lam=1.0, weights_a=None,
              weights_b=None) -> jax.Array:
    """Per-agent drift D_i [I] between the confusion rows of two labeled windows (F.13).

    Rows are fitted on each window with :func:`~bda_jax.fit_confusion` at the fixed ``lam``
    (Dirichlet concentration; the paper's monitor uses 10); ``weights_a`` / ``weights_b`` [T]
    select tasks of each window (default: every task whose gold is a candidate). D_i is the
    evidence-weighted mean over true classes g of the row total variation
    0.5 * ||P^a_i(. | g) - P^b_i(. | g)||_1, with weight n^a n^b / (n^a + n^b) per class (module
    docstring). It is 0 for identical windows, symmetric in (a, b), in [0, 1], and NaN for an
    agent with no row observed in both windows. Both windows must share agents and K slots.

    >>> from bda_jax import tally
    >>> from bda_jax.simulate import simulate_council
    >>> a = tally(simulate_council(0, 50, [0.7, 0.7]))
    >>> b = tally(simulate_council(1, 50, [0.7, 0.7], adversaries=[1]), agents=a.agents)
    >>> [float(x) for x in row_drift(a, a)]
    [0.0, 0.0]
    >>> d = row_drift(a, b)
    >>> bool(d[1] > 0.3 > d[0])
    True
    """
    _check_pair(counts_a, counts_b)
    ra, ea = _rows(counts_a, lam, _weights(counts_a, weights_a))
    rb, eb = _rows(counts_b, lam, _weights(counts_b, weights_b))
    return _tv(ra, ea, rb, eb)


def _half_split_weights(counts: Counts, w: np.ndarray, n_splits: int, seed: int):
    """[n_splits, T] weights of two disjoint cluster-grouped random halves of the tasks w > 0."""
    idx = np.flatnonzero(w > 0)
    cluster = np.asarray(counts.cluster)
    ids, inv = np.unique(cluster[idx], return_inverse=True)
    if ids.size < 2:
        raise DataError(f"a noise floor needs labeled tasks from >= 2 clusters, got {ids.size}",
                        field="counts")
    rng = np.random.default_rng(seed)
    half = ids.size // 2
    wa = np.zeros((n_splits, w.size), np.float32)
    wb = np.zeros_like(wa)
    for s in range(n_splits):
        in_a = np.zeros(ids.size, bool)
        in_a[rng.permutation(ids.size)[:half]] = True
        wa[s, idx] = w[idx] * in_a[inv]
        wb[s, idx] = w[idx] * ~in_a[inv]
    return wa, wb


def noise_floor(counts: Counts, lam=1.0, n_splits: int = 20, seed: int = 0, weights=None,
                quantile: float | None = None, *, return_splits: bool = False):
    """Per-agent noise floor [I] of :func:`row_drift` from clean half-windows (F.13).

    ``counts`` (with optional task ``weights``) is a window believed clean. Its labeled tasks are
    split ``n_splits`` times into two disjoint random halves — by cluster, so the seeds of one
    question never straddle the halves — and the drift D_i between the halves' rows (fixed
    ``lam``) is computed for each split. The floor is the mean over splits (``quantile=None``),
    or that quantile of them (e.g. 0.95 for a stricter floor); NaN splits (no shared evidence)
    are ignored. Half windows overstate the sampling noise of a full-window comparison, so the
    floor is conservative. ``return_splits=True`` also returns the [n_splits, I] drifts.
    """
    if not isinstance(n_splits, int) or n_splits < 1:
        raise DataError(f"n_splits must be a positive integer, got {n_splits!r}", field="n_splits")
    if quantile is not None and not 0.0 <= float(quantile) <= 1.0:
        raise DataError(f"quantile must be in [0, 1] or None, got {quantile!r}", field="quantile")
    w = np.asarray(_weights(counts, weights))
    wa, wb = _half_split_weights(counts, w, n_splits, seed)

    def one(a, b):
        ra, ea = _rows(counts, lam, a)
        rb, eb = _rows(counts, lam, b)
        return _tv(ra, ea, rb, eb)

    splits = jax.vmap(one)(jnp.asarray(wa), jnp.asarray(wb))                 # [S, I]
    floor = (jnp.nanmean(splits, 0) if quantile is None
             else jnp.nanquantile(splits, float(quantile), axis=0))
    return (floor, splits) if return_splits else floor


# --------------------------------------------------------------------------- the online monitor

@dataclass
class DriftReport:
    """One :meth:`RowDriftMonitor.update`: per agent ``drift`` D_i, ``floor``, ``ratio`` =
    drift / floor and ``alarm`` (drift > factor * floor); ``mean_drift`` / ``mean_floor`` /
    ``mean_ratio`` average over agents with an estimate (the paper's single monitoring number);
    ``recommendation`` is ``"one-coin fallback"`` while any alarm is raised, else ``"keep"``.
    ``n_tasks``: labeled tasks in the window. Lists are plain Python (NaN where undefined)."""

    agents: list
    drift: list
    floor: list
    ratio: list
    alarm: list
    factor: float
    mean_drift: float
    mean_floor: float
    mean_ratio: float
    recommendation: str
    n_tasks: int

    @property
    def any_alarm(self) -> bool:
        return any(self.alarm)

    def to_dict(self) -> dict:
        """JSON-ready (NaN and infinities become None)."""
        clean = lambda v: v if not isinstance(v, float) or math.isfinite(v) else None
        return {k: [clean(x) for x in v] if isinstance(v, list) else clean(v)
                for k, v in asdict(self).items()}


def _ratio(drift, floor):
    drift, floor = np.asarray(drift, np.float64), np.asarray(floor, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(floor > 0, drift / np.where(floor > 0, floor, 1.0),
                     np.where(drift > 0, np.inf, np.nan))
    return np.where(np.isnan(drift) | np.isnan(floor), np.nan, r)


class RowDriftMonitor:
    """Online row-drift alarm ([BDA] Appendix F.13).

    ``fit_reference`` takes a labeled window believed clean (Counts or traces): it fits the
    reference rows at the fixed ``lam`` and their noise floor from ``n_splits`` random clean
    half-windows (:func:`noise_floor`; ``quantile`` None = mean). Each ``update`` with a new labeled
    window returns a :class:`DriftReport`: the per-agent drift against the reference rows, the
    ratio to the floor and an alarm per agent when drift > ``factor`` * floor. While any alarm is
    raised the recommendation is the one-coin fallback (the policy-robust arm of F.12) until the
    supervised arms are re-fitted on data that include the change; the reference itself is not
    moved by ``update`` (call ``fit_reference`` again after re-fitting).

    Fitted: ``agents_``, ``rows_`` [I, K, K], ``evidence_`` [I, K], ``floor_`` [I],
    ``floor_splits_`` [n_splits, I], ``n_reference_`` (labeled tasks), ``history_`` (reports).
    """

    def __init__(self, lam: float = 1.0, factor: float = 2.0, seed: int = 0,
                 n_splits: int = 20, quantile: float | None = None):
        if not (isinstance(lam, numbers.Real) and lam > 0):
            raise DataError(f"lam must be a positive number, got {lam!r}", field="lam")
        if not (isinstance(factor, numbers.Real) and factor > 0):
            raise DataError(f"factor must be a positive number, got {factor!r}", field="factor")
        self.lam, self.factor, self.seed = float(lam), float(factor), seed
        self.n_splits, self.quantile = n_splits, quantile

    def _counts(self, data, agents=None) -> Counts:
        if isinstance(data, Counts):
            return data
        if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
            return tally(data, agents=agents)
        raise DataError(f"expected Counts or a list of traces, got {type(data).__name__}",
                        field="data")

    def fit_reference(self, data, weights=None) -> "RowDriftMonitor":
        """Reference rows and noise floor from a clean labeled window; returns self."""
        counts = self._counts(data)
        w = _weights(counts, weights)
        self.agents_ = counts.agents
        self.rows_, self.evidence_ = (np.asarray(x) for x in _rows(counts, self.lam, w))
        floor, splits = noise_floor(counts, self.lam, self.n_splits, self.seed, w,
                                    self.quantile, return_splits=True)
        self.floor_, self.floor_splits_ = np.asarray(floor), np.asarray(splits)
        self.n_reference_ = int(np.sum(np.asarray(w) > 0))
        self.history_ = []
        return self

    def update(self, data, weights=None) -> DriftReport:
        """Drift of a new labeled window against the reference: a :class:`DriftReport`."""
        if not hasattr(self, "rows_"):
            raise DataError("call fit_reference first", field="fit")
        counts = self._counts(data, self.agents_)
        I, K = self.rows_.shape[:2]
        if counts.e.shape[1:] != (I, K):
            raise DataError(f"window has [I, K] = {list(counts.e.shape[1:])}, the reference "
                            f"{[I, K]}", field="counts")
        if (self.agents_ is not None and counts.agents is not None
                and tuple(counts.agents) != tuple(self.agents_)):
            raise DataError(f"window agents {list(counts.agents)} differ from the reference "
                            f"{list(self.agents_)}", field="agents")
        w = _weights(counts, weights)
        rows, ev = _rows(counts, self.lam, w)
        drift = np.asarray(_tv(jnp.asarray(self.rows_), jnp.asarray(self.evidence_), rows, ev),
                           np.float64)
        floor = self.floor_.astype(np.float64)
        ratio = _ratio(drift, floor)
        alarm = np.nan_to_num(drift, nan=-np.inf) > self.factor * np.nan_to_num(floor, nan=np.inf)
        ok = ~np.isnan(drift) & ~np.isnan(floor)
        mean_drift = float(drift[ok].mean()) if ok.any() else float("nan")
        mean_floor = float(floor[ok].mean()) if ok.any() else float("nan")
        agents = list(self.agents_) if self.agents_ is not None else list(range(I))
        report = DriftReport(
            agents=agents, drift=drift.tolist(), floor=floor.tolist(), ratio=ratio.tolist(),
            alarm=[bool(a) for a in alarm], factor=self.factor, mean_drift=mean_drift,
            mean_floor=mean_floor, mean_ratio=float(_ratio(mean_drift, mean_floor)),
            recommendation="one-coin fallback" if alarm.any() else "keep",
            n_tasks=int(np.sum(np.asarray(w) > 0)))
        self.history_.append(report)
        return report


# --------------------------------------------------------------------------- the sleeper study

@dataclass
class SleeperStudy:
    """Result of :func:`sleeper_study`.

    ``table``: tidy rows (f, arm, accuracy, ece_ew, brier_mc, drift, floor, drift_ratio, alarm,
    drift_paired, drift_ratio_paired): deployment metrics of each arm fitted on the calibration
    window contaminated at f, with the monitor's numbers for that window repeated on every arm's
    row (the data of Figure 7's two panels). ``drift`` / ``floor`` / ``drift_ratio`` / ``alarm``
    are the :class:`RowDriftMonitor`'s (mean over agents; reference = the disjoint clean window,
    what a deployed monitor sees). ``drift_paired`` is the mean drift against the *clean twins of
    the same calibration tasks* — no between-window sampling noise, the pure signal of the turn,
    the reading under which F.13's drift is linear in f — and ``drift_ratio_paired`` its ratio
    to the same floor. ``monitor``: per f the full :class:`DriftReport` as a dict (per-agent
    drift, ratio, alarm), the contaminated fraction and the per-agent ``drift_paired``.
    ``config``: the study's settings and window sizes.
    """

    table: list
    monitor: list
    config: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        clean = lambda v: None if isinstance(v, float) and not math.isfinite(v) else v
        return {"config": self.config,
                "table": [{k: clean(v) for k, v in r.items()} for r in self.table],
                "monitor": [{**m, "drift_paired": [clean(x) for x in m["drift_paired"]]}
                            for m in self.monitor]}

    @classmethod
    def from_json(cls, data: dict) -> "SleeperStudy":
        """Inverse of :meth:`to_json` (non-finite numbers come back as ``None``)."""
        if not isinstance(data, dict) or not {"config", "table", "monitor"} <= set(data):
            raise ArtifactError("not a sleeper study: needs config, table and monitor",
                                field="table")
        return cls(data["table"], data["monitor"], data["config"])

    def curve(self, arm: str, column: str = "accuracy") -> np.ndarray:
        """[len(f_grid)] ``column`` of ``arm`` along f (``None`` read back as NaN)."""
        return np.array([np.nan if r[column] is None else r[column]
                         for r in self.table if r["arm"] == arm], np.float64)


def sleeper_study(seed: int = 0, f_grid: Sequence[float] = F_GRID, n_questions: int = 1500,
                  arms: Sequence[str] = ("majority", "bda-per-agent", "bda-confusion"), *,
                  reliabilities: Sequence[float] = (0.74, 0.68, 0.68),
                  adversaries: Sequence[int] | Mapping[int, float] = (0, 1),
                  compliance: float = 0.6, seeds_per_question: int = 3,
                  monitor_lam: float = 10.0, factor: float = 2.0, n_splits: int = 20,
                  **simulate_options) -> SleeperStudy:
    """The sleeper contamination axis ([BDA] Appendix F.8) with the row-drift monitor (F.13).

    Data. One council (``reliabilities``, default the paper's binary regime .74/.68/.68, K = 2,
    ``seeds_per_question`` seeds per question) is simulated twice with the same ``seed``: clean,
    and with the persistent coalition ``adversaries`` — the same seats on every task, each arguing
    the coalition's wrong answer on a task with probability ``compliance`` and behaving honestly
    otherwise (a mapping ``{seat: p}`` sets the rates directly; see
    :func:`~bda_jax.simulate.simulate_council`). The default compliance 0.6 puts deployment
    majority at about 0.37-0.39, the paper's live binary k = 2 majority (0.369, Table 15); at
    compliance 1 the K = 2 coalition is always wrong, majority and the pure sleeper are both at
    exactly 0 and "below majority" cannot be measured. The simulator draws the same random stream
    either way, so the two runs share every question, gold answer, difficulty and honest seat's
    round-0 answer and differ only through the coalition: trace t of one run is the attacked
    (clean) twin of trace t of the other. The questions are split (seeded, by question, so the
    seeds of a question stay together) into three disjoint thirds:

    * reference window: clean traces (the previous fit's window; the monitor's reference rows
      and noise floor);
    * calibration window: each trace is the attacked twin with probability f, else the clean one
      (one uniform draw per trace shared by all f, so contamination sets are nested in f);
    * deployment: the attacked traces.

    For each f, every arm in ``arms`` (names of :data:`~bda_jax.ARMS`) is fitted on the whole
    labeled calibration window (supervised arms select hyperparameters by their own CV inside
    it; unsupervised arms read no labels; DS-EM is fitted on the deployment votes) and predicts
    the deployment; metrics are :func:`~bda_jax.metrics.summary`'s with ties broken from
    ``seed``. A :class:`RowDriftMonitor` (``monitor_lam`` fixed, the paper's 10; ``factor``;
    ``n_splits``) is fitted on the reference window and updated with the calibration window.
    ``simulate_options`` go to ``simulate_council`` (e.g. ``contagion``, ``n_candidates``).
    """
    f_grid = [float(f) for f in f_grid]
    if not f_grid or any(not 0.0 <= f <= 1.0 for f in f_grid):
        raise DataError(f"f_grid must hold fractions in [0, 1], got {f_grid!r}", field="f_grid")
    for name in arms:
        make_arm(name)
    if not isinstance(n_questions, int) or n_questions < 6:
        raise DataError(f"n_questions must be an integer >= 6, got {n_questions!r}",
                        field="n_questions")
    if not isinstance(adversaries, Mapping):
        adversaries = {int(a): float(compliance) for a in adversaries}
    clean = simulate_council(seed, n_questions, reliabilities,
                             seeds_per_question=seeds_per_question, **simulate_options)
    attacked = simulate_council(seed, n_questions, reliabilities, adversaries=adversaries,
                                seeds_per_question=seeds_per_question, **simulate_options)
    agents = tuple(dict.fromkeys(m.agent for t in clean for m in t.moves))
    S = seeds_per_question
    rng = np.random.default_rng([seed, 4])
    q_perm = rng.permutation(n_questions)
    thirds = np.array_split(q_perm, 3)
    task_of = lambda qs: (np.sort(qs)[:, None] * S + np.arange(S)).ravel()
    ref_idx, cal_idx, dep_idx = (task_of(q) for q in thirds)
    u = rng.random(cal_idx.size)

    def window(traces, idx):
        return tally([traces[i] for i in idx], agents=agents)

    reference = window(clean, ref_idx)
    cal_clean = window(clean, cal_idx)
    deploy = window(attacked, dep_idx)
    monitor = RowDriftMonitor(lam=monitor_lam, factor=factor, seed=seed,
                              n_splits=n_splits).fit_reference(reference)
    key = jax.random.key(seed)
    gold, gm, mask = (np.asarray(deploy.gold), np.asarray(deploy.gold_missing),
                      np.asarray(deploy.mask))

    fixed = {}                      # arms that read no calibration data: one fit for every f
    table, monitor_rows = [], []
    for f in f_grid:
        hit = u < f
        cal = window([attacked[i] if h else clean[i] for i, h in zip(cal_idx, hit)],
                     np.arange(cal_idx.size))
        report = monitor.update(cal)
        paired = np.asarray(row_drift(cal_clean, cal, monitor_lam), np.float64)
        ok = ~np.isnan(paired) & ~np.isnan(monitor.floor_)
        paired_mean = float(paired[ok].mean()) if ok.any() else float("nan")
        paired_ratio = float(_ratio(paired_mean, report.mean_floor))
        monitor_rows.append({"f": f, "contaminated": float(hit.mean()), **report.to_dict(),
                             "drift_paired": paired.tolist()})
        for name in arms:
            supervised = is_supervised(name)
            if not supervised and name in fixed:
                proba = fixed[name]
            else:
                model = make_arm(name, seed)
                if supervised:
                    model.fit(cal)
                elif name == "ds-em":
                    model.fit(deploy)
                else:
                    model.fit(cal)
                proba = np.asarray(model.predict_proba(deploy))
                if not supervised:
                    fixed[name] = proba
            s = summary(proba, gold, gm, mask, key=key)
            table.append({"f": f, "arm": name, "accuracy": s["accuracy"], "ece_ew": s["ece_ew"],
                          "brier_mc": s["brier_mc"], "drift": report.mean_drift,
                          "floor": report.mean_floor, "drift_ratio": report.mean_ratio,
                          "alarm": report.any_alarm, "drift_paired": paired_mean,
                          "drift_ratio_paired": paired_ratio})
    config = {"seed": seed, "f_grid": f_grid, "n_questions": n_questions,
              "seeds_per_question": S, "reliabilities": list(map(float, reliabilities)),
              "adversaries": {str(k): float(v) for k, v in adversaries.items()},
              "monitor_lam": monitor_lam, "factor": factor, "n_splits": n_splits,
              "n_tasks": {"reference": int(ref_idx.size), "calibration": int(cal_idx.size),
                          "deployment": int(dep_idx.size)},
              "agents": list(agents), "arms": list(arms),
              "simulate_options": {k: v for k, v in simulate_options.items()
                                   if isinstance(v, (int, float, str, bool, list, tuple))}}
    return SleeperStudy(table, monitor_rows, config)
