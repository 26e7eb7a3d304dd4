"""Trace-level summaries and adoption rows of a broadcast log: the inputs of the regressions of
[Audit] (outcome linkage, Tables 4 and 18; adoption logit, Table 12).

**Trace.** [Audit] counts "4,181 gpt-oss-120b olympiad-math traces" over "the same 4,181
problems" (abstract; Tables 4 and 20: n = 4,181 in the outcome linkage): a trace is one
broadcast run on one problem — all its outer rounds and turns. :func:`trace_summaries` makes one
row per problem, in order of first appearance.

**Trace summaries** (each [T]; block rates over the trace's *selected* blocks — every block
of a log whose selection is logged or replayed in full, see
:func:`~bda_jax.audit.effective_selection` — so that slack = pool-solvable −
selected-correct holds within the trace):

=========================  =================================================================
column                     meaning
=========================  =================================================================
pool_solvable_rate         share of blocks where some valid candidate is correct (the
                           router-independent content ceiling; Table 4's "pool-solvable rate")
selected_correct_rate      share of blocks whose selected candidate is correct (an invalid
                           pick counts as not correct; Table 18)
routing_slack              pool_solvable_rate − selected_correct_rate (oracle − runtime
                           success within the trace; Table 18), >= 0
selected_invalid_rate      share of blocks whose selected poll is not a valid candidate
psdr                       divergent / valid (poll, spoken) pairs of the trace's speak events
improvement_rate           divergent pairs with poll wrong and spoken correct / valid pairs
degradation_rate           divergent pairs with poll correct and spoken wrong / valid pairs
mean_selected_confidence   mean stated score of the selected polls (unstated ones left out)
last_spoken_correct        correctness of the trace's last labeled spoken answer (by outer
                           round, turn): a proxy outcome only — the paper's outcome is the
                           broadcast's final verdict, which the log format does not carry
=========================  =================================================================

Commitment columns (psdr, improvement/degradation rates) are NaN for a trace without valid
speak pairs, block rates NaN for a trace without a selected block, and
``mean_selected_confidence`` NaN when no selected poll states a score; the counts behind them
are ``n_blocks``, ``n_selected_blocks``, ``n_valid_pairs``. ``tier_rank`` is the 1-based rank
of the trace's tier in sorted order: a tier-difficulty predictor when tiers are named in order
of difficulty (as the paper's 01-10 are).

**Adoption rows** (:func:`adoption_rows`, Table 12): one row per (divergent speak event,
visible candidate). A divergent speak event is a valid (poll, spoken) pair that diverges under
``rule`` (as in :func:`~bda_jax.audit.commitment_metrics`). Its visible
candidates are each entry of its ``earlier_public`` list (the public answers before the event)
and, when the record names one, the system incumbent as one more candidate:

==================  =========================================================================
column              meaning
==================  =========================================================================
event               the speak record (row of the log's speak table)
answer, role        the candidate answer; "own" (an earlier public answer of the speaker:
                    Table 12's self-prior-speak), "peer" (another agent's, or of unknown
                    author) or "incumbent"
adopted             1 when the spoken answer equals the candidate answer (normalized strings)
lag                 poll rounds back: the event's block minus the source's block, counting the
                    problem's blocks in (outer round, turn) order; NaN when the source is
                    unknown
source_confidence   the stated score of the source's originating private poll (the source
                    speaker's poll in the source block; post-hoc metadata, not seen by the
                    speaker); NaN when unknown or unstated
source_correct      the candidate answer's correctness label in the problem (from the source
                    speak record, else any labeled poll or spoken answer equal to it); NaN
                    when unlabeled
most_recent         1 for the newest ``earlier_public`` entry (the last public answer before
                    the event); 0 for older entries and for the incumbent row
==================  =========================================================================

Sources: an ``earlier_public`` entry's source is an earlier speak record of the problem (an
earlier block by (outer round, turn)) with the same spoken answer and, when the entry names
one, the same speaker; entries are matched newest first to distinct records, keeping their
order (a derived ``earlier_public`` list matches its records exactly). The incumbent's source
is the newest earlier speak record whose spoken answer equals it.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ._commitment import commitment_terms
from ._common import group_rows
from ._log import BroadcastLog
from ._router import effective_selection
from .._core.errors import DataError

__all__ = ["ADOPTION_COVARIATES", "AdoptionRows", "TRACE_PREDICTORS", "TraceSummaries",
           "adoption_rows", "commitment_inputs", "trace_summaries"]

TRACE_PREDICTORS = ("pool_solvable_rate", "selected_correct_rate", "routing_slack",
                    "selected_invalid_rate", "psdr", "improvement_rate", "degradation_rate",
                    "mean_selected_confidence", "tier_rank")
"""Numeric per-trace columns of :class:`TraceSummaries` usable as predictors."""

ADOPTION_COVARIATES = ("role=own", "role=incumbent", "lag", "source_confidence",
                       "source_correct", "most_recent")
"""Columns of :meth:`AdoptionRows.covariates` (peer is the reference role, as in Table 12)."""


def commitment_inputs(log: BroadcastLog) -> dict:
    """The arrays of the commitment functions ([E], one per speak record) read off
    the log: poll answer and correctness = the speaker's poll row in that block; spoken answer
    and correctness from the record; own earlier answers = ``earlier_public`` entries authored
    by the speaker, peer earlier answers = all other entries (unknown authors included);
    incumbent; ``equivalent`` from the record's equivalence verdict."""
    rows = log.speak_poll_row
    own, peers = [], []
    for earlier, speaker in zip(log.earlier_public, log.speaker):
        own.append([a for who, a in earlier if who == speaker])
        peers.append([a for who, a in earlier if who != speaker])
    return dict(
        poll_answer=list(log.candidate[rows]), spoken_answer=list(log.spoken),
        poll_correct=np.where(log.valid[rows], log.correct[rows], np.nan),
        spoken_correct=np.where(log.spoken_valid, log.spoken_correct, np.nan),
        own_earlier=own, incumbent=list(log.incumbent), peer_earlier=peers,
        equivalent=[None if e is None else e == "equivalent" for e in log.equivalence])


def _commitment_terms(log: BroadcastLog, rule: str) -> dict:
    inputs = commitment_inputs(log)
    return commitment_terms(inputs["poll_answer"], inputs["spoken_answer"],
                            inputs["poll_correct"], inputs["spoken_correct"],
                            equivalent=inputs["equivalent"], rule=rule)


def _obj(values) -> np.ndarray:
    out = np.empty(len(values), object)
    out[:] = values
    return out


# ============================================================================ trace summaries
class TraceSummaries(NamedTuple):
    """Per-trace (= per-problem) summaries, each column [T]; see the module docstring."""

    problem: np.ndarray
    tier: np.ndarray
    cluster: np.ndarray
    tier_rank: np.ndarray
    n_blocks: np.ndarray
    n_selected_blocks: np.ndarray
    n_valid_pairs: np.ndarray
    pool_solvable_rate: np.ndarray
    selected_correct_rate: np.ndarray
    routing_slack: np.ndarray
    selected_invalid_rate: np.ndarray
    psdr: np.ndarray
    improvement_rate: np.ndarray
    degradation_rate: np.ndarray
    mean_selected_confidence: np.ndarray
    last_spoken_correct: np.ndarray

    def complete(self, names) -> np.ndarray:
        """[T] bool: traces where every named column is finite (rows a regression can use)."""
        ok = np.ones(self.problem.size, bool)
        for name in names:
            ok &= np.isfinite(np.asarray(getattr(self, name), np.float64))
        return ok

    def predictors(self, names=TRACE_PREDICTORS, rows=None) -> dict:
        """{name: [n] float column} for :func:`~bda_jax.audit.outcome_linkage`,
        on ``rows`` (a [T] bool mask or indices; default all traces)."""
        unknown = [n for n in names if n not in TRACE_PREDICTORS]
        if unknown:
            raise DataError(f"unknown predictors {unknown}; expected some of "
                            f"{list(TRACE_PREDICTORS)}", field="names")
        pick = slice(None) if rows is None else rows
        return {n: np.asarray(getattr(self, n), np.float64)[pick] for n in names}


def _per_trace(trace: np.ndarray, T: int, values) -> np.ndarray:
    return np.bincount(trace, weights=np.asarray(values, np.float64), minlength=T)


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def trace_summaries(log: BroadcastLog, *, rule: str = "residual") -> TraceSummaries:
    """One row of predictors per trace (= problem; module docstring), for the outcome-linkage
    regressions of [Audit] Tables 4 and 18. ``rule``: the divergence rule of the commitment
    columns.

    Worked example: one problem, two blocks; block 0 has a correct candidate and the selected
    poll is correct (score .9), block 1 has none and the selected poll is invalid (score .5):
    pool-solvable 1/2, selected-correct 1/2, slack 0, selected-invalid 1/2, mean selected
    confidence .7.

    >>> from bda_jax.audit import from_records
    >>> P = lambda t, a, s, c, ok, sel: {"kind": "poll", "problem": "q", "outer_round": 0,
    ...     "turn": t, "agent": a, "score": s, "candidate": c, "correct": ok, "selected": sel}
    >>> ts = trace_summaries(from_records([P(0, "a", .9, "4", True, True),
    ...     P(0, "b", .2, "5", False, False), P(1, "a", .5, None, None, True),
    ...     P(1, "b", .1, "5", False, False)]))
    >>> [float(getattr(ts, c)[0]) for c in ("pool_solvable_rate", "selected_correct_rate",
    ...  "routing_slack", "selected_invalid_rate", "mean_selected_confidence")]
    [0.5, 0.5, 0.0, 0.5, 0.7]
    """
    if not isinstance(log, BroadcastLog):
        raise DataError(f"log must be a BroadcastLog, got {type(log).__name__}", field="log")
    problems = log.problems
    T, B = len(problems), log.n_blocks
    index = {p: k for k, p in enumerate(problems)}
    trace_of_block = np.fromiter((index[p] for p in log.block_problem.tolist()), np.int64, B)
    sel = effective_selection(log)[0]

    def count(mask):
        return np.bincount(log.block, weights=mask, minlength=B) > 0

    has_sel = count(sel)
    sel_valid, sel_correct, possible = count(sel & log.valid), count(sel & log.correct), \
        count(log.correct)
    n_sel = _per_trace(trace_of_block, T, has_sel)
    pool = _div(_per_trace(trace_of_block, T, has_sel & possible), n_sel)
    right = _div(_per_trace(trace_of_block, T, sel_correct), n_sel)
    invalid = _div(_per_trace(trace_of_block, T, has_sel & ~sel_valid), n_sel)
    stated = sel & ~np.isnan(log.score)
    trace_of_row = trace_of_block[log.block]
    conf = _div(_per_trace(trace_of_row, T, np.where(stated, log.score, 0.0)),
                _per_trace(trace_of_row, T, stated))

    psdr = impr = degr = np.full(T, np.nan)
    n_pairs = np.zeros(T)
    last = np.full(T, np.nan)
    if log.n_speaks:
        terms = _commitment_terms(log, rule)
        trace_of_speak = trace_of_block[log.speak_block]
        n_pairs = _per_trace(trace_of_speak, T, terms["psdr"][1])
        psdr = _div(_per_trace(trace_of_speak, T, terms["psdr"][0]), n_pairs)
        impr = _div(_per_trace(trace_of_speak, T, terms["improvement_rate"][0]), n_pairs)
        degr = _div(_per_trace(trace_of_speak, T, terms["degradation_rate"][0]), n_pairs)
        when = {}
        for s in np.flatnonzero(log.spoken_valid):
            b = log.speak_block[s]
            key = (int(log.block_outer_round[b]), int(log.block_turn[b]))
            t = trace_of_speak[s]
            if t not in when or key >= when[t]:
                when[t] = key
                last[t] = float(log.spoken_correct[s])
    first_block = np.full(T, -1, np.int64)
    for b in range(B - 1, -1, -1):
        first_block[trace_of_block[b]] = b
    tiers = _obj(log.block_tier[first_block].tolist())
    rank = {t: k + 1 for k, (t, _) in enumerate(group_rows(tiers))}
    return TraceSummaries(
        problem=_obj(problems), tier=tiers, cluster=_obj(log.block_cluster[first_block].tolist()),
        tier_rank=np.array([rank[t] for t in tiers.tolist()], np.int64),
        n_blocks=np.bincount(trace_of_block, minlength=T).astype(np.int64),
        n_selected_blocks=n_sel.astype(np.int64), n_valid_pairs=n_pairs.astype(np.int64),
        pool_solvable_rate=pool, selected_correct_rate=right, routing_slack=pool - right,
        selected_invalid_rate=invalid, psdr=psdr, improvement_rate=impr,
        degradation_rate=degr, mean_selected_confidence=conf, last_spoken_correct=last)


# ============================================================================= adoption rows
class AdoptionRows(NamedTuple):
    """One row per (divergent speak event, visible candidate), each column [n]; see the module
    docstring."""

    event: np.ndarray
    problem: np.ndarray
    cluster: np.ndarray
    answer: np.ndarray
    role: np.ndarray
    adopted: np.ndarray
    lag: np.ndarray
    source_confidence: np.ndarray
    source_correct: np.ndarray
    most_recent: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.event.size)

    def complete(self) -> np.ndarray:
        """[n] bool: rows whose lag, source confidence and source correctness are known."""
        return (np.isfinite(self.lag) & np.isfinite(self.source_confidence)
                & np.isfinite(self.source_correct))

    def covariates(self, rows=None) -> dict:
        """{name: [n] float column} of :data:`ADOPTION_COVARIATES` for
        :func:`~bda_jax.audit.adoption_logit` (role dummies with peer as the
        reference), on ``rows`` (default: all)."""
        pick = slice(None) if rows is None else rows
        cols = {"role=own": self.role == "own", "role=incumbent": self.role == "incumbent",
                "lag": self.lag, "source_confidence": self.source_confidence,
                "source_correct": self.source_correct, "most_recent": self.most_recent}
        return {k: np.asarray(v, np.float64)[pick] for k, v in cols.items()}


def adoption_rows(log: BroadcastLog, *, rule: str = "residual") -> AdoptionRows:
    """Rows of the adoption logit of [Audit] Table 12 (module docstring); ``rule``: the
    divergence rule. Events without a visible candidate give no row."""
    if not isinstance(log, BroadcastLog):
        raise DataError(f"log must be a BroadcastLog, got {type(log).__name__}", field="log")
    cols: dict[str, list] = {k: [] for k in AdoptionRows._fields}
    if not log.n_speaks:
        return _adoption(cols)
    divergent = _commitment_terms(log, rule)["psdr"][0] > 0
    # chronological block position within each problem, and each problem's speak records
    order: dict[str, list[int]] = {}
    for b in range(log.n_blocks):
        order.setdefault(log.block_problem[b], []).append(b)
    position = np.empty(log.n_blocks, np.int64)
    for blocks in order.values():
        blocks.sort(key=lambda b: (log.block_outer_round[b], log.block_turn[b]))
        position[blocks] = np.arange(len(blocks))
    speaks_of: dict[str, list[int]] = {}
    for s in np.argsort(position[log.speak_block], kind="stable"):
        speaks_of.setdefault(log.block_problem[log.speak_block[s]], []).append(int(s))
    labels: dict[str, dict] = {}          # problem -> answer -> correctness label
    for r in np.flatnonzero(log.valid):
        labels.setdefault(log.problem[r], {}).setdefault(log.candidate[r], bool(log.correct[r]))
    for s in np.flatnonzero(log.spoken_valid):
        labels.setdefault(log.block_problem[log.speak_block[s]], {}).setdefault(
            log.spoken[s], bool(log.spoken_correct[s]))

    for e in np.flatnonzero(divergent):
        b = log.speak_block[e]
        problem = log.block_problem[b]
        spoken, speaker = log.spoken[e], log.speaker[e]
        earlier = [s for s in speaks_of[problem]
                   if position[log.speak_block[s]] < position[b] and log.spoken[s] is not None]
        entries = list(log.earlier_public[e])
        sources: list[int | None] = [None] * len(entries)
        j = len(earlier) - 1
        for k in range(len(entries) - 1, -1, -1):
            author, answer = entries[k]
            i = j
            while i >= 0 and not (log.spoken[earlier[i]] == answer
                                  and (author is None or log.speaker[earlier[i]] == author)):
                i -= 1
            if i >= 0:
                sources[k], j = earlier[i], i - 1
        rows = [(answer, "own" if author == speaker else "peer", sources[k],
                 int(k == len(entries) - 1)) for k, (author, answer) in enumerate(entries)]
        if log.incumbent[e] is not None:
            inc = log.incumbent[e]
            src = next((s for s in reversed(earlier) if log.spoken[s] == inc), None)
            rows.append((inc, "incumbent", src, 0))
        for answer, role, src, recent in rows:
            cols["event"].append(int(e))
            cols["problem"].append(problem)
            cols["cluster"].append(log.block_cluster[b])
            cols["answer"].append(answer)
            cols["role"].append(role)
            cols["adopted"].append(int(spoken == answer))
            if src is None:
                cols["lag"].append(math.nan)
                cols["source_confidence"].append(math.nan)
                label = labels.get(problem, {}).get(answer)
            else:
                cols["lag"].append(float(position[b] - position[log.speak_block[src]]))
                cols["source_confidence"].append(float(log.score[log.speak_poll_row[src]]))
                label = (bool(log.spoken_correct[src]) if log.spoken_valid[src]
                         else labels.get(problem, {}).get(answer))
            cols["source_correct"].append(math.nan if label is None else float(label))
            cols["most_recent"].append(recent)
    return _adoption(cols)


def _adoption(cols: dict) -> AdoptionRows:
    return AdoptionRows(
        event=np.asarray(cols["event"], np.int64), problem=_obj(cols["problem"]),
        cluster=_obj(cols["cluster"]), answer=_obj(cols["answer"]), role=_obj(cols["role"]),
        adopted=np.asarray(cols["adopted"], np.int64),
        lag=np.asarray(cols["lag"], np.float64),
        source_confidence=np.asarray(cols["source_confidence"], np.float64),
        source_correct=np.asarray(cols["source_correct"], np.float64),
        most_recent=np.asarray(cols["most_recent"], np.int64))
