"""Commitment axis of the routing audit ([Audit]: Tables 3, 4, 10-13, 16, 17; docs/audit.md).

In the audited protocol the router hands the turn to the agent with the highest private poll
score, and that agent then speaks publicly. Commitment asks whether the spoken answer is the one
that won the poll. Inputs are flat arrays with one entry per selected speak event, [E]:

* ``poll_answer``, ``spoken_answer``: answer strings (``None``, NaN or ``""`` = not parsed);
* ``poll_correct``, ``spoken_correct``: 0/1 correctness (NaN = unlabeled);
* ``valid`` (optional bool): the pair enters the audit; by default, both answers parsed and both
  labeled. A pair marked valid without them is refused;
* ``equivalent`` (optional): a judge's verdict that the two answers are the same answer
  (``True``/``False``/``None``), used by the divergence ``rule`` below.

Every rate is a :class:`~bda_jax.audit.Ratio` holding its numerator and
denominator; :func:`commitment_terms` gives the per-event terms behind each rate (for the
problem-cluster bootstrap).

Definitions (the counts are over valid pairs; D = the divergent ones):

=======================  ==========================================  ===========
metric                   numerator                                   denominator
=======================  ==========================================  ===========
PSDR                     divergent pairs                             valid pairs
PSIR                     divergent, poll wrong, spoken correct       divergent
PSDRg                    divergent, poll correct, spoken wrong       divergent
NPCS|D                   PSIR numerator - PSDRg numerator            divergent
improvement rate         PSIR numerator                              valid pairs
degradation rate         PSDRg numerator                             valid pairs
unconditional shift      sum(spoken_correct - poll_correct)          valid pairs
=======================  ==========================================  ===========

Readings chosen where the paper leaves room:

* PSIR and PSDRg are conditional on divergence ([Audit] Table 17 states the divergent
  denominator), so NPCS|D = PSIR - PSDRg exactly; the unconditional improvement/degradation
  event rates (the trace-level predictors of Table 4) are returned beside them.
* The unconditional shift is the literal mean of (spoken - poll) correctness over valid pairs.
  It equals PSDR x NPCS|D whenever non-divergent pairs have equal correctness (checked on the
  paper: 0.207 x -0.083 ~ -1.7 pp); pairs judged equivalent but labeled differently are counted
  in ``n_nondivergent_discordant`` rather than hidden.
* ``rule="residual"`` (default): string-equal answers (after ``normalize``) never diverge; a
  string-different pair diverges unless the judge marked it equivalent (the paper's residual
  relabeling, Appendix H). ``rule="string"`` ignores the judge; ``rule="label"`` lets a given
  judge label override string equality too.
* Divergence sources (Table 3 and Table 13) compare the spoken answer by normalized string
  equality with the speaker's own earlier public answers (self-revert), the system incumbent at
  speak time (incumbent-pull) and the answers peers spoke before the event (peer-echo); the
  primary class follows ``precedence`` (default self-revert, incumbent-pull, peer-echo), and a
  divergence matching none is novel.
* Regressions use cluster-robust (sandwich) covariance by problem cluster with statsmodels'
  small-sample correction; ``standardize`` z-scores predictors with the population SD (ddof=0),
  so coefficients read "per SD" as in Table 4.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np
from scipy import stats

from ._common import group_rows
from .._core.errors import DataError
from ..metrics import Ratio, ratio

__all__ = [
    "CLASSES", "COMMITMENT_METRICS", "DEFAULT_PRECEDENCE", "CommitmentMetrics",
    "DivergenceSources", "KappaResult", "LogitFit", "LogitTerm", "SourceRow", "adoption_logit",
    "cluster_logit", "cohens_kappa", "commitment_by_group", "commitment_metrics",
    "commitment_terms", "divergence", "divergence_sources", "fixed_effects", "outcome_linkage",
]

DEFAULT_PRECEDENCE = ("self_revert", "incumbent_pull", "peer_echo")
"""Primary-class order of [Audit] Table 3: self-revert, then incumbent-pull, then peer-echo."""

CLASSES = DEFAULT_PRECEDENCE + ("novel",)

_RULES = ("residual", "string", "label")


# --------------------------------------------------------------------------- inputs

def _missing(a) -> bool:
    return a is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(a, str)
                                                                       and a.strip() == "")


def _answers(x, n, field, normalize):
    if isinstance(x, str) or not hasattr(x, "__len__"):
        raise DataError(f"{field} must be a sequence of answers", field=field)
    out = list(x)
    if n is not None and len(out) != n:
        raise DataError(f"{field} must have length E = {n}, got {len(out)}", field=field)
    res = []
    for i, a in enumerate(out):
        if _missing(a):
            res.append(None)
        elif not isinstance(a, str):
            raise DataError(f"{field}[{i}] must be a string or None, got {type(a).__name__}",
                            field=field)
        else:
            res.append(normalize(a) if normalize is not None else a)
    return res


def _answer_lists(x, n, field, normalize):
    if isinstance(x, str) or not hasattr(x, "__len__") or len(x) != n:
        raise DataError(f"{field} must be a length-E = {n} sequence of answer lists",
                        field=field)
    res = []
    for i, items in enumerate(x):
        if items is None:
            res.append(frozenset())
            continue
        if isinstance(items, str):
            raise DataError(f"{field}[{i}] must be a list of answers, not a string", field=field)
        res.append(frozenset(a for a in _answers(items, None, f"{field}[{i}]", normalize)
                             if a is not None))
    return res


def _flags01(x, n, field) -> np.ndarray:
    a = np.asarray([np.nan if v is None else v for v in x] if not isinstance(x, np.ndarray)
                   else x, np.float64)
    if a.shape != (n,):
        raise DataError(f"{field} must be [E] = [{n}], got shape {a.shape}", field=field)
    if not np.isin(a[~np.isnan(a)], (0.0, 1.0)).all():
        raise DataError(f"{field} must hold 0/1 (NaN or None: unlabeled)", field=field)
    return a


def _equivalent(x, n) -> np.ndarray:
    """[E] float: 1 equivalent, 0 not, NaN no verdict."""
    if x is None:
        return np.full(n, np.nan)
    return _flags01(x, n, "equivalent")


def _pairs(poll_answer, spoken_answer, poll_correct, spoken_correct, valid, normalize):
    poll = _answers(poll_answer, None, "poll_answer", normalize)
    n = len(poll)
    spoken = _answers(spoken_answer, n, "spoken_answer", normalize)
    pc = _flags01(poll_correct, n, "poll_correct")
    sc = _flags01(spoken_correct, n, "spoken_correct")
    usable = np.array([p is not None and s is not None for p, s in zip(poll, spoken)], bool)
    usable &= ~np.isnan(pc) & ~np.isnan(sc)
    if valid is None:
        ok = usable
    else:
        ok = np.asarray(valid, bool)
        if ok.shape != (n,):
            raise DataError(f"valid must be [E] = [{n}], got shape {ok.shape}", field="valid")
        bad = ok & ~usable
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"pair {i} is marked valid but lacks a parsed answer or a "
                            "correctness label", field="valid")
    return poll, spoken, np.nan_to_num(pc), np.nan_to_num(sc), ok


def _check_rule(rule):
    if rule not in _RULES:
        raise DataError(f"rule must be one of {_RULES}, got {rule!r}", field="rule")


def _divergent(poll, spoken, eq, rule):
    differ = np.array([p is not None and s is not None and p != s
                       for p, s in zip(poll, spoken)], bool)
    if rule == "string":
        return differ
    judged = ~np.isnan(eq)
    verdict = eq == 0.0
    if rule == "residual":
        return differ & np.where(judged, verdict, True)
    present = np.array([p is not None and s is not None for p, s in zip(poll, spoken)], bool)
    return present & np.where(judged, verdict, differ)


def divergence(poll_answer, spoken_answer, *, equivalent=None, rule: str = "residual",
               normalize: Callable[[str], str] | None = None) -> np.ndarray:
    """[E] bool: the spoken answer differs from the polled one ([Audit] §commitment, App. H).

    ``rule`` as in the module docstring ("residual": string-different and not judged
    equivalent). A pair with a missing answer is never divergent.

    >>> divergence(["4", "4", "x", None], ["4", "5", "y", "3"], equivalent=[None, None, 1, None])
    array([False,  True, False, False])
    """
    _check_rule(rule)
    poll = _answers(poll_answer, None, "poll_answer", normalize)
    spoken = _answers(spoken_answer, len(poll), "spoken_answer", normalize)
    return _divergent(poll, spoken, _equivalent(equivalent, len(poll)), rule)


# --------------------------------------------------------------------------- PSDR / PSIR / ...

class CommitmentMetrics(NamedTuple):
    """Commitment rates of [Audit] (Tables 5, 6, 10, 17), each a :class:`Ratio`.

    ``psdr`` divergent / valid; ``psir`` and ``psdrg`` improvement / degradation among divergent
    pairs; ``npcs_d`` = psir - psdrg (numerator: improvements - degradations); unconditional
    ``improvement_rate`` / ``degradation_rate`` over valid pairs; ``unconditional_shift`` the mean
    (spoken - poll) correctness over valid pairs; ``poll_accuracy``, ``spoken_accuracy`` over
    valid pairs. Counts: ``n_pairs`` (all events given), ``n_valid``, ``n_divergent``,
    ``n_nondivergent_discordant`` (non-divergent valid pairs whose correctness differs).
    """

    psdr: Ratio
    psir: Ratio
    psdrg: Ratio
    npcs_d: Ratio
    improvement_rate: Ratio
    degradation_rate: Ratio
    unconditional_shift: Ratio
    poll_accuracy: Ratio
    spoken_accuracy: Ratio
    n_pairs: int
    n_valid: int
    n_divergent: int
    n_nondivergent_discordant: int

    def entries(self) -> list[dict]:
        """Metric entries ``{name, value, numerator, denominator, unit, note}`` (the generic
        shape of :class:`bda_jax.audit.MetricEntry`), one per rate."""
        units = {"psdr": "valid selected pairs", "psir": "divergent pairs",
                 "psdrg": "divergent pairs", "npcs_d": "divergent pairs"}
        out = []
        for name in COMMITMENT_METRICS:
            r = getattr(self, name)
            out.append({"name": name, "value": r.value, "numerator": r.numerator,
                        "denominator": r.denominator,
                        "unit": units.get(name, "valid selected pairs"), "note": None})
        return out


COMMITMENT_METRICS = ("psdr", "psir", "psdrg", "npcs_d", "improvement_rate", "degradation_rate",
                      "unconditional_shift", "poll_accuracy", "spoken_accuracy")
"""The rates of :class:`CommitmentMetrics`, in field order (keys of :func:`commitment_terms`)."""


def _terms(poll_answer, spoken_answer, poll_correct, spoken_correct, valid, equivalent, rule,
           normalize):
    _check_rule(rule)
    poll, spoken, pc, sc, ok = _pairs(poll_answer, spoken_answer, poll_correct, spoken_correct,
                                      valid, normalize)
    div = _divergent(poll, spoken, _equivalent(equivalent, len(poll)), rule) & ok
    v, d = ok.astype(np.float64), div.astype(np.float64)
    impr = (div & (pc == 0) & (sc == 1)).astype(np.float64)
    degr = (div & (pc == 1) & (sc == 0)).astype(np.float64)
    terms = {"psdr": (d, v), "psir": (impr, d), "psdrg": (degr, d), "npcs_d": (impr - degr, d),
             "improvement_rate": (impr, v), "degradation_rate": (degr, v),
             "unconditional_shift": ((sc - pc) * v, v), "poll_accuracy": (pc * v, v),
             "spoken_accuracy": (sc * v, v)}
    return terms, len(poll), int((ok & ~div & (pc != sc)).sum())


def commitment_terms(poll_answer, spoken_answer, poll_correct, spoken_correct, valid=None, *,
                     equivalent=None, rule: str = "residual",
                     normalize: Callable[[str], str] | None = None) -> dict:
    """Per-event ``(numerator, denominator)`` terms, each [E] float, of every rate in
    :data:`COMMITMENT_METRICS` (the table of the module docstring); a rate is the ratio of
    their sums, and :func:`~bda_jax.audit.ratio_bootstrap` resamples them by
    problem cluster. Arguments as for :func:`commitment_metrics`.

    >>> t = commitment_terms(["1", "2"], ["1", "3"], [1, 0], [1, 1])
    >>> t["psdr"][0].tolist(), t["psdr"][1].tolist(), t["psir"][0].tolist()
    ([0.0, 1.0], [1.0, 1.0], [0.0, 1.0])
    """
    return _terms(poll_answer, spoken_answer, poll_correct, spoken_correct, valid, equivalent,
                  rule, normalize)[0]


def commitment_metrics(poll_answer, spoken_answer, poll_correct, spoken_correct, valid=None, *,
                       equivalent=None, rule: str = "residual",
                       normalize: Callable[[str], str] | None = None) -> CommitmentMetrics:
    """PSDR, PSIR, PSDRg, NPCS|D and the unconditional shift ([Audit] Tables 6, 10, 17).

    Arrays [E] as in the module docstring. Worked example: 5 valid pairs, 3 divergent (pairs
    1-3): pair 1 improves (0 -> 1), pair 2 degrades (1 -> 0), pair 3 stays wrong, so
    PSDR = 3/5, PSIR = PSDRg = 1/3, NPCS|D = 0/3 and the unconditional shift 0/5.

    >>> m = commitment_metrics(["1", "2", "3", "4", "5"], ["1", "9", "8", "7", "5"],
    ...                        [1, 0, 1, 0, 1], [1, 1, 0, 0, 1])
    >>> m.psdr, m.psir.numerator, m.psdrg.numerator, m.npcs_d.value
    (Ratio(value=0.6, numerator=3, denominator=5), 1, 1, 0.0)
    """
    terms, n_pairs, discordant = _terms(poll_answer, spoken_answer, poll_correct,
                                        spoken_correct, valid, equivalent, rule, normalize)
    rates = {name: ratio(num.sum(), den.sum()) for name, (num, den) in terms.items()}
    return CommitmentMetrics(**rates, n_pairs=n_pairs, n_valid=rates["psdr"].denominator,
                             n_divergent=rates["psdr"].numerator,
                             n_nondivergent_discordant=discordant)


def commitment_by_group(group, poll_answer, spoken_answer, poll_correct, spoken_correct,
                        valid=None, **kwargs) -> dict:
    """:func:`commitment_metrics` per group label (e.g. per tier: [Audit] Table 10).

    ``group`` [E] labels; the other arguments as in :func:`commitment_metrics`. Returns
    {label: CommitmentMetrics} in sorted label order, each with its own denominators.

    >>> out = commitment_by_group([1, 1, 2], ["a", "b", "c"], ["a", "x", "c"], [1, 1, 0], [1, 0, 0])
    >>> {k: (v.psdr.numerator, v.psdr.denominator) for k, v in out.items()}
    {1: (1, 2), 2: (0, 1)}
    """
    g = np.asarray(group)
    poll = list(poll_answer)
    if g.shape != (len(poll),):
        raise DataError(f"group must be [E] = [{len(poll)}], got shape {g.shape}", field="group")
    spoken, pc, sc = list(spoken_answer), list(poll_correct), list(spoken_correct)
    va = None if valid is None else np.asarray(valid, bool)
    eq = kwargs.pop("equivalent", None)
    eq = None if eq is None else list(eq)
    out = {}
    for key, idx in group_rows(g):
        pick = (lambda xs: [xs[i] for i in idx])
        out[key] = commitment_metrics(
            pick(poll), pick(spoken), pick(pc), pick(sc), None if va is None else va[idx],
            equivalent=None if eq is None else pick(eq), **kwargs)
    return out


# --------------------------------------------------------------------------- sources

class SourceRow(NamedTuple):
    """One row of [Audit] Table 3 (primary class) or Table 13 (non-exclusive flag).

    ``name``; ``share`` = Ratio(n in the class, divergent pairs); ``delta_correct`` =
    Ratio(sum of spoken - poll correctness in the class, n in the class): x100 for pp.
    """

    name: str
    share: Ratio
    delta_correct: Ratio


class DivergenceSources(NamedTuple):
    """Output of :func:`divergence_sources`.

    ``divergent`` [E] bool (valid and divergent); ``flags`` {name: [E] bool}, False outside
    ``divergent``; ``primary`` [E] int, an index into ``classes`` (-1 where not divergent);
    ``classes`` the precedence order plus "novel"; ``primary_table`` one :class:`SourceRow` per
    class (Table 3); ``flag_table`` one per flag plus "novel" (Table 13, overlapping);
    ``n_divergent``.
    """

    divergent: np.ndarray
    flags: Mapping[str, np.ndarray]
    primary: np.ndarray
    classes: tuple
    primary_table: tuple
    flag_table: tuple
    n_divergent: int


def divergence_sources(poll_answer, spoken_answer, poll_correct, spoken_correct, own_earlier,
                       incumbent, peer_earlier, valid=None, *, equivalent=None,
                       rule: str = "residual", normalize: Callable[[str], str] | None = None,
                       precedence: Sequence[str] = DEFAULT_PRECEDENCE) -> DivergenceSources:
    """Where divergent spoken answers come from ([Audit] Table 3 and Table 13).

    Per event [E]: ``own_earlier`` a list of the speaker's own earlier public answers,
    ``incumbent`` the system incumbent at speak time (str or None), ``peer_earlier`` a list of
    answers peers spoke before the event; the rest as in :func:`commitment_metrics`. Flags fire
    on divergent pairs only; the primary class is the first firing flag in ``precedence`` (a
    permutation of the three flag names), else "novel".

    Worked example: pair 0 goes back to the speaker's earlier "7", which a peer also said
    (self-revert wins); pair 1 adopts the incumbent; pair 2 says something nobody said.

    >>> s = divergence_sources(["1", "1", "1"], ["7", "8", "9"], [1, 0, 1], [0, 1, 0],
    ...                        [["7"], [], []], [None, "8", "8"], [["7"], [], ["7"]])
    >>> [s.classes[k] for k in s.primary], [r.share.numerator for r in s.flag_table]
    (['self_revert', 'incumbent_pull', 'novel'], [1, 1, 1, 1])
    """
    _check_rule(rule)
    prec = tuple(precedence)
    if sorted(prec) != sorted(DEFAULT_PRECEDENCE):
        raise DataError(f"precedence must order {DEFAULT_PRECEDENCE}, got {prec}",
                        field="precedence")
    poll, spoken, pc, sc, ok = _pairs(poll_answer, spoken_answer, poll_correct, spoken_correct,
                                      valid, normalize)
    n = len(poll)
    div = _divergent(poll, spoken, _equivalent(equivalent, n), rule) & ok
    own = _answer_lists(own_earlier, n, "own_earlier", normalize)
    peers = _answer_lists(peer_earlier, n, "peer_earlier", normalize)
    inc = _answers(incumbent, n, "incumbent", normalize)
    flags = {
        "self_revert": div & np.array([s in o for s, o in zip(spoken, own)], bool),
        "incumbent_pull": div & np.array([i is not None and s == i
                                          for s, i in zip(spoken, inc)], bool),
        "peer_echo": div & np.array([s in p for s, p in zip(spoken, peers)], bool),
    }
    classes = prec + ("novel",)
    primary = np.full(n, -1, np.int32)
    for k in range(len(prec) - 1, -1, -1):      # lowest precedence first, overwritten by higher
        primary[flags[prec[k]]] = k
    primary[div & (primary < 0)] = len(prec)
    delta = sc - pc
    n_div = int(div.sum())

    def row(name, mask):
        m = int(mask.sum())
        return SourceRow(name, ratio(m, n_div), ratio(int(round(float(delta[mask].sum()))), m))

    primary_table = tuple(row(c, primary == k) for k, c in enumerate(classes))
    any_flag = np.zeros(n, bool)
    for f in flags.values():
        any_flag |= f
    flag_table = tuple(row(c, flags[c]) for c in prec) + (row("novel", div & ~any_flag),)
    return DivergenceSources(div, flags, primary, classes, primary_table, flag_table, n_div)


# --------------------------------------------------------------------------- regressions

class LogitTerm(NamedTuple):
    """One coefficient row of Tables 4, 11, 12: ``coef`` (log-odds; per SD when standardized),
    cluster-robust ``se``, ``ci_low``/``ci_high`` (Wald, robust), ``odds_ratio`` = exp(coef),
    ``p_value`` (robust, two-sided normal), and ``naive_se`` (inverse-Hessian, no clustering)."""

    name: str
    coef: float
    se: float
    ci_low: float
    ci_high: float
    odds_ratio: float
    p_value: float
    naive_se: float


class LogitFit(NamedTuple):
    """A cluster-robust logistic regression (plain numbers).

    ``terms`` :class:`LogitTerm` rows (the intercept first, if fitted); ``n`` rows (the
    denominator), ``n_events`` rows with y = 1, ``n_clusters``; ``standardized`` the z-scored
    predictors; ``llf`` / ``llnull`` log-likelihoods and ``pseudo_r2`` McFadden's 1 - llf/llnull;
    ``converged``; ``warnings`` messages statsmodels raised (e.g. quasi-separation).
    """

    terms: tuple
    n: int
    n_events: int
    n_clusters: int
    standardized: tuple
    llf: float
    llnull: float
    pseudo_r2: float
    converged: bool
    warnings: tuple

    def term(self, name: str) -> LogitTerm:
        """The row of one predictor."""
        for t in self.terms:
            if t.name == name:
                return t
        raise DataError(f"no term {name!r}; have {[t.name for t in self.terms]}", field="name")


def _design(X, names):
    if hasattr(X, "columns"):                                     # a pandas DataFrame
        names = [str(c) for c in X.columns]
        cols = [np.asarray(X[c], np.float64) for c in X.columns]
    elif isinstance(X, Mapping):
        names = [str(k) for k in X]
        cols = [np.asarray(v, np.float64) for v in X.values()]
    else:
        a = np.asarray(X, np.float64)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2:
            raise DataError(f"X must be [n, p], got shape {a.shape}", field="X")
        names = [f"x{j}" for j in range(a.shape[1])] if names is None else [str(s) for s in names]
        if len(names) != a.shape[1]:
            raise DataError(f"{len(names)} names for {a.shape[1]} columns", field="names")
        cols = list(a.T)
    if not cols:
        raise DataError("X has no predictor column", field="X")
    if len(set(names)) != len(names):
        raise DataError(f"duplicate predictor names in {names}", field="X")
    n = cols[0].shape
    for nm, c in zip(names, cols):
        if c.ndim != 1 or c.shape != n:
            raise DataError(f"column {nm!r} must be [n] = {list(n)}, got {c.shape}", field=nm)
        if not np.isfinite(c).all():
            raise DataError(f"column {nm!r} has NaN or inf (drop those rows first)", field=nm)
    return names, np.column_stack(cols)


def cluster_logit(y, X, clusters, *, names: Sequence[str] | None = None, intercept: bool = True,
                  standardize=False, level: float = 0.95, maxiter: int = 100) -> LogitFit:
    """Logistic regression with cluster-robust standard errors ([Audit] Tables 4, 11, 12, 18).

    ``y`` [n] 0/1; ``X`` a mapping name -> [n] column, a DataFrame, or an [n, p] array (with
    ``names``); ``clusters`` [n] labels (problem cluster). ``standardize``: False, True (z-score
    every predictor, ddof=0) or a list of predictor names to z-score. Fit by Newton's method
    (statsmodels ``Logit``) with ``cov_type="cluster"``; the naive inverse-Hessian SE is
    returned beside the robust one. Formula-free: interactions and fixed effects are columns the
    caller builds (see :func:`fixed_effects`).

    >>> rng = np.random.default_rng(0); x = rng.normal(size=400)
    >>> yy = (rng.random(400) < 1 / (1 + np.exp(-2 * x))).astype(int)
    >>> fit = cluster_logit(yy, {"x": x}, clusters=np.arange(400) // 4)
    >>> fit.n, fit.n_clusters, 1.5 < fit.term("x").coef < 2.6
    (400, 100, True)
    """
    import statsmodels.api as sm                   # heavy import, only where a fit is asked for

    names, Xm = _design(X, names)
    yv = np.asarray(y, np.float64)
    n = Xm.shape[0]
    if yv.shape != (n,) or not np.isin(yv, (0.0, 1.0)).all():
        raise DataError(f"y must be [n] = [{n}] of 0/1", field="y")
    cl = np.asarray(clusters)
    if cl.shape != (n,):
        raise DataError(f"clusters must be [n] = [{n}], got shape {cl.shape}", field="clusters")
    _, codes = np.unique(cl, return_inverse=True)
    codes = codes.reshape(-1)
    n_clusters = int(codes.max()) + 1 if n else 0
    if n_clusters < 2:
        raise DataError("cluster-robust SEs need at least two clusters", field="clusters")
    if standardize is True:
        zs = list(names)
    elif standardize is False or standardize is None:
        zs = []
    else:
        zs = [str(s) for s in standardize]
        unknown = [s for s in zs if s not in names]
        if unknown:
            raise DataError(f"cannot standardize unknown predictors {unknown}",
                            field="standardize")
    Xm = Xm.copy()
    for nm in zs:
        j = names.index(nm)
        sd = Xm[:, j].std()
        if not sd > 0:
            raise DataError(f"predictor {nm!r} is constant and cannot be z-scored", field=nm)
        Xm[:, j] = (Xm[:, j] - Xm[:, j].mean()) / sd
    terms_names = list(names)
    if intercept:
        Xm = np.column_stack([np.ones(n), Xm])
        terms_names = ["intercept"] + terms_names
    if np.linalg.matrix_rank(Xm) < Xm.shape[1]:
        raise DataError("the design matrix is rank-deficient (collinear columns; drop a "
                        "reference level of each fixed effect)", field="X")
    model = sm.Logit(yv, Xm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = model.fit(method="newton", maxiter=maxiter, disp=0, cov_type="cluster",
                            cov_kwds={"groups": codes})
        except Exception as err:                   # perfect separation, singular Hessian
            raise DataError(f"logistic fit failed: {err}", field="X") from None
    params = np.asarray(res.params, np.float64)
    se = np.asarray(res.bse, np.float64)
    with np.errstate(all="ignore"):
        naive = np.sqrt(np.diag(np.linalg.inv(-model.hessian(params))))
    z = stats.norm.ppf(0.5 + level / 2.0)
    pv = 2.0 * stats.norm.sf(np.abs(params / se))
    terms = tuple(
        LogitTerm(nm, float(b), float(s), float(b - z * s), float(b + z * s),
                  float(np.exp(b)) if b < 700 else math.inf, float(p), float(ns))
        for nm, b, s, p, ns in zip(terms_names, params, se, pv, naive))
    llf, llnull = float(res.llf), float(res.llnull)
    converged = bool(res.mle_retvals.get("converged", True))
    return LogitFit(terms, n, int(yv.sum()), n_clusters, tuple(zs), llf, llnull,
                    1.0 - llf / llnull if llnull else math.nan, converged,
                    tuple(str(w.message) for w in caught))


def outcome_linkage(outcome, predictors, clusters, *, standardize=True, **kwargs) -> LogitFit:
    """Trace-level outcome-linkage logit ([Audit] Table 4 and Table 18).

    One row per trace: ``outcome`` [n] the broadcast's final correctness, ``predictors`` the
    trace summaries (e.g. pool-solvable rate, unconditional improvement / degradation event
    rates, tier difficulty, selected-invalid rate, PSDR), z-scored by default so each odds ratio
    is per SD; ``clusters`` [n] problem clusters. A descriptive association, not an effect.
    Other keywords go to :func:`cluster_logit`.
    """
    return cluster_logit(outcome, predictors, clusters, standardize=standardize, **kwargs)


def adoption_logit(adopted, covariates, clusters, *, standardize=False, **kwargs) -> LogitFit:
    """Adoption logit over (divergent speak event, visible candidate) rows ([Audit] Table 12).

    ``adopted`` [n] 1 when the spoken answer matches that candidate; ``covariates`` e.g. role
    dummies (self-prior, incumbent; peer the reference), lag in rounds, source confidence, source
    correct, most-recent flag; ``clusters`` [n] problem ids. Raw (unstandardized) coefficients by
    default, as the table reports. Other keywords go to :func:`cluster_logit`.
    """
    return cluster_logit(adopted, covariates, clusters, standardize=standardize, **kwargs)


def fixed_effects(labels, *, prefix: str, reference=None) -> dict:
    """0/1 indicator columns for a categorical variable (agent fixed effects of Table 11).

    ``labels`` [n]; one column ``f"{prefix}{level}"`` per level except ``reference`` (default:
    the first level in sorted order), which the intercept absorbs.

    >>> {k: v.tolist() for k, v in fixed_effects(["a", "b", "c", "b"], prefix="agent=").items()}
    {'agent=b': [0.0, 1.0, 0.0, 1.0], 'agent=c': [0.0, 0.0, 1.0, 0.0]}
    """
    lab = np.asarray(labels)
    levels = list(np.unique(lab))
    ref = levels[0] if reference is None else reference
    if ref not in levels:
        raise DataError(f"reference level {reference!r} not among {levels}", field="reference")
    return {f"{prefix}{lv}": (lab == lv).astype(np.float64) for lv in levels if lv != ref}


# --------------------------------------------------------------------------- judges

class KappaResult(NamedTuple):
    """Cohen's kappa between two judges ([Audit] Table 16).

    ``kappa`` = (p_o - p_e) / (1 - p_e) (NaN when p_e = 1); ``agreement`` = Ratio(agreeing
    pairs, decided pairs); ``expected_agreement`` p_e from the two judges' marginals; ``n``
    decided pairs; ``labels`` the category order; ``confusion`` [K, K] ints, row = judge 1's
    label, column = judge 2's (for labels (div, equ) its ravel is Table 16's
    div/div, div/equ, equ/div, equ/equ).
    """

    kappa: float
    agreement: Ratio
    expected_agreement: float
    n: int
    labels: tuple
    confusion: np.ndarray


def cohens_kappa(judge1, judge2, *, labels: Sequence | None = None) -> KappaResult:
    """Cohen's kappa and the confusion table of two judges' labels on the same pairs.

    ``judge1``, ``judge2`` [n] labels; a pair where either is None or NaN is undecided and left
    out. ``labels`` fixes the category order (default: the sorted labels seen).

    Worked example: 10 pairs, confusion [[4, 1], [1, 4]]: p_o = 0.8, each judge says "div" half
    the time so p_e = 0.5, kappa = (0.8 - 0.5) / 0.5 = 0.6.

    >>> j1 = ["div"] * 5 + ["equ"] * 5
    >>> j2 = ["div"] * 4 + ["equ"] + ["div"] + ["equ"] * 4
    >>> k = cohens_kappa(j1, j2, labels=("div", "equ"))
    >>> round(k.kappa, 6), k.confusion.ravel().tolist()
    (0.6, [4, 1, 1, 4])
    """
    a, b = list(judge1), list(judge2)
    if len(a) != len(b):
        raise DataError(f"judge1 ({len(a)}) and judge2 ({len(b)}) must label the same pairs",
                        field="judge2")
    keep = [(x, y) for x, y in zip(a, b) if not (_missing_label(x) or _missing_label(y))]
    seen = sorted({x for x, _ in keep} | {y for _, y in keep}, key=repr)
    labs = tuple(seen) if labels is None else tuple(labels)
    index = {lab: k for k, lab in enumerate(labs)}
    conf = np.zeros((len(labs), len(labs)), np.int64)
    for x, y in keep:
        if x not in index or y not in index:
            bad = x if x not in index else y
            raise DataError(f"label {bad!r} not among {labs}", field="labels")
        conf[index[x], index[y]] += 1
    n = int(conf.sum())
    agree = int(np.trace(conf))
    if n == 0:
        return KappaResult(math.nan, ratio(0, 0), math.nan, 0, labs, conf)
    p_o = agree / n
    p_e = float(np.sum(conf.sum(1) * conf.sum(0))) / n**2
    kappa = (p_o - p_e) / (1.0 - p_e) if p_e < 1.0 else math.nan
    return KappaResult(kappa, ratio(agree, n), p_e, n, labs, conf)


def _missing_label(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))
