"""LLM-based methods as ``Agg ∘ Gen`` ([BDA] Appendix B.2, Eqs. 7-8, Table 4).

A method ``Phi`` is a generator of evidence ``Gen`` (LLM calls: proposer surfaces, samples,
argument trees) and a fixed rule ``Agg`` that turns the evidence into an answer and a
confidence (itself possibly an LLM: MoA's synthesizer, ArgLLMs' evaluator). The fair attack of
Eq. 8, ``Phi^rho = Agg ∘ Gen^rho``, applies the adversary role rho to the LLM calls inside
``Gen`` and never to ``Agg``: :class:`LLMMethod` keeps the two apart, and a subclass implements
:meth:`LLMMethod.generate` (told whether rho applies) and :meth:`LLMMethod.aggregate` (never
told).

A method *reads the council* if its verdict depends on the trace (``reads_council``); a
non-reading method is only ever handed the question: :meth:`LLMMethod.run` strips the trace
before :meth:`~LLMMethod.generate` sees a task, so its answers on clean and attacked traces of
the same questions are the same calls.

Every call goes through the council's client (:class:`~bda_jax.council.CouncilClient`): cached
before use (a killed run resumes without repeating a call), counted in a
:class:`~bda_jax.council.Ledger` under its channel (``"synthesizer"``, ``"sampler"``,
``"proposer:<seat>"``, ``"generator"``, ``"evaluator"``, ``"judge"``), one-line upstream errors.

Scores. A task's answer ``a`` (a candidate, or ``None``: no commitment) with confidence ``c``
becomes the distribution ``p(a) = max(c, 1/K)``, the rest spread evenly over the other
candidates (:func:`answer_proba`; a stated confidence below chance cannot make another
candidate the argmax; an answer without a stated confidence is one-hot). A task without a
commitment has the uniform distribution and the prediction ``-1``: it is scored wrong with
confidence ``1/K`` ([BDA] Appendix D.3, "genuine non-commitments stay wrong").
"""
from __future__ import annotations

import asyncio
import hashlib
from abc import ABC, abstractmethod
import json
import math
import os
import statistics
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .._core.counts import Counts, tally
from .._core.errors import ArtifactError, BdaError, DataError
from .._core.io import atomic_write, read_json_file
from .._core.normalize import default_normalizer
from .._core.traces import Trace, resolve_trace
from .._core.version import __version__
from ..datasets import ParseWarning
from ._cache import ChatReply, ChatRequest, ReplyCache
from ._client import CouncilClient
from ._config import CouncilConfig, Endpoint, Seat
from ._ledger import Ledger
from ._method_prompts import METHOD_PROMPT_VERSION
from ._questions import Question

__all__ = ["Runtime", "MethodTask", "Evidence", "MethodAnswer", "MethodRecord", "MethodRun",
           "LLMMethod", "Caller", "derived_seed", "answer_proba", "tasks_from_traces",
           "tasks_from_questions", "read_method_run", "METHOD_RUN_KIND", "NEAR_CONSTANT_SD"]

METHOD_RUN_KIND = "bda_jax.method_run"
METHOD_RUN_SCHEMA_VERSION = 1
#: confidences whose standard deviation is below this are "near-constant" (calibration N/A)
NEAR_CONSTANT_SD = 0.05
#: tasks a method works on at once (each endpoint also bounds its own requests in flight)
TASK_CONCURRENCY = 8


@dataclass(frozen=True)
class Runtime:
    """Where a method's calls go: endpoints by name, the reply cache (``cache_path``; ``None``
    keeps an in-memory cache for one run; ``cache_mode`` ``"record"`` / ``"replay"`` / ``"off"``),
    the price table by model, and how many tasks run at once."""

    endpoints: Mapping[str, Endpoint]
    cache_path: str | None = None
    cache_mode: str = "record"
    prices: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int = TASK_CONCURRENCY

    @classmethod
    def from_config(cls, config: CouncilConfig, *, cache_path=None,
                    cache_mode: str = "record") -> "Runtime":
        """The endpoints and prices of a council config."""
        return cls(dict(config.endpoints), None if cache_path is None else os.fspath(cache_path),
                   cache_mode, dict(config.prices))


@dataclass(frozen=True)
class MethodTask:
    """One task for a method: the trace task id, the question, the candidates in the order
    scores are reported, the sample index and the council trace (``None`` for a non-reading
    method, whatever the caller had)."""

    task_id: str
    question: Question
    candidates: tuple[str, ...]
    sample: int = 0
    trace: Trace | None = None


@dataclass
class Evidence:
    """What ``Gen`` produced for one task: method-specific ``items``, how many of them were
    produced under rho (``corrupted``) out of ``total``, and notes for the record."""

    items: Any
    corrupted: int = 0
    total: int = 0
    notes: dict = field(default_factory=dict)

    @property
    def gamma(self) -> float:
        """The corrupted fraction of the evidence (gamma_Phi of [BDA] Table 4)."""
        return self.corrupted / self.total if self.total else 0.0


@dataclass(frozen=True)
class MethodAnswer:
    """What ``Agg`` concluded: a candidate or ``None``, the confidence (``None``: none stated),
    the rule that produced the answer (``"schema"``, ``"extract:<rule>"``, ``"judge"``,
    ``"strength"``, ``None``), details for the record, and the [K] scores where the rule makes
    its own (``proba``; ``None``: :func:`answer_proba`)."""

    answer: str | None
    confidence: float | None
    rule: str | None
    detail: dict = field(default_factory=dict)
    proba: tuple[float, ...] | None = None


def answer_proba(answer: str | None, confidence: float | None,
                 candidates: Sequence[str]) -> np.ndarray:
    """[K] scores of one task (module docstring): ``p(answer) = max(confidence, 1/K)`` (1 with no
    confidence), the rest even over the other candidates; uniform without an answer."""
    K = len(candidates)
    if answer is None:
        return np.full(K, 1.0 / K)
    top = 1.0 if confidence is None else max(float(confidence), 1.0 / K)
    p = np.full(K, (1.0 - top) / (K - 1) if K > 1 else 0.0)
    p[list(candidates).index(answer)] = top
    return p


@dataclass(frozen=True)
class MethodRecord:
    """One task's result (a line of the run file)."""

    task_id: str
    sample: int
    candidates: tuple[str, ...]
    gold: str | None
    answer: str | None
    confidence: float | None
    proba: tuple[float, ...]
    rule: str | None
    corrupted: int
    evidence: int
    detail: dict = field(default_factory=dict)

    @property
    def gamma(self) -> float:
        return self.corrupted / self.evidence if self.evidence else 0.0

    def to_json(self) -> dict:
        return {"task_id": self.task_id, "sample": self.sample,
                "candidates": list(self.candidates), "gold": self.gold, "answer": self.answer,
                "confidence": self.confidence, "proba": list(self.proba), "rule": self.rule,
                "corrupted": self.corrupted, "evidence": self.evidence, "detail": self.detail}

    @classmethod
    def from_json(cls, d: dict, *, file=None) -> "MethodRecord":
        try:
            return cls(str(d["task_id"]), int(d["sample"]), tuple(map(str, d["candidates"])),
                       d["gold"], d["answer"],
                       None if d["confidence"] is None else float(d["confidence"]),
                       tuple(float(x) for x in d["proba"]), d["rule"], int(d["corrupted"]),
                       int(d["evidence"]), dict(d.get("detail") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"unreadable method record: {exc}", file=file,
                                task_id=d.get("task_id") if isinstance(d, dict) else None) from None


def _slot_of(candidates: Sequence[str]) -> dict[str, int]:
    return {default_normalizer(c): k for k, c in enumerate(candidates)}


@dataclass
class MethodRun:
    """Every task's :class:`MethodRecord` of one method under one condition, with the ledger
    summary (``ledger``; per channel in ``channels``; every call's ledger row, with its task and
    channel, in ``calls``), the parse report and the calibration note.

    ``parse``: ``rate`` (share of tasks with a committed answer), ``rules`` (how each answer was
    read), ``judged`` (answers the judge mapped), ``accuracy_committed`` and ``chance`` (the
    tripwire's two sides; ``tripwire`` True when the first is below the second).
    ``calibration``: ``confidence_sd`` and ``applicable`` (False when the confidences are
    near-constant, below :data:`NEAR_CONSTANT_SD`: the paper's "calibration N/A").
    Satisfies the evaluation harness' method protocol (:meth:`method_proba`), so a stored run
    can be evaluated next to the count-based arms without a single call.
    """

    method: str
    reads_council: bool
    attack: bool
    records: list[MethodRecord]
    ledger: dict
    channels: dict
    settings: dict = field(default_factory=dict)
    calls: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.method

    @property
    def gamma(self) -> float:
        """Mean over tasks of the corrupted fraction of the evidence."""
        return float(np.mean([r.gamma for r in self.records])) if self.records else 0.0

    @property
    def parse(self) -> dict:
        recs = self.records
        committed = [r for r in recs if r.answer is not None]
        labeled = [r for r in committed if r.gold is not None]
        right = [r for r in labeled if default_normalizer(r.answer) == default_normalizer(r.gold)]
        chance = float(np.mean([1.0 / len(r.candidates) for r in labeled])) if labeled else None
        acc = len(right) / len(labeled) if labeled else None
        return {"rate": len(committed) / len(recs) if recs else None,
                "rules": dict(sorted(Counter(str(r.rule) for r in recs).items())),
                "judged": sum(r.rule == "judge" for r in recs),
                "accuracy_committed": acc, "chance": chance,
                "tripwire": bool(acc is not None and chance is not None and acc < chance)}

    @property
    def calibration(self) -> dict:
        conf = [r.confidence for r in self.records if r.answer is not None
                and r.confidence is not None]
        sd = statistics.pstdev(conf) if len(conf) > 1 else 0.0
        return {"confidence_sd": sd, "applicable": bool(sd >= NEAR_CONSTANT_SD)}

    def judge_ledger(self) -> list[dict]:
        """Every judge verdict of the run (task, the text judged, the verdict, the answer it
        maps to, the model and whether it came from the cache), for audit."""
        return [{"task_id": r.task_id, "sample": r.sample, **r.detail["judge"]}
                for r in self.records if "judge" in r.detail]

    def method_proba(self, data, counts: Counts | None = None):
        """``(proba [T, K], pred [T])`` aligned with ``counts`` (or ``tally(data)``): each task's
        scores moved to the tally's candidate slots, ``pred`` the answer's slot or -1. Raises
        :class:`~bda_jax.DataError` for a task the run does not hold or a candidate set that
        differs."""
        counts = tally(data) if counts is None else counts
        if counts.info is None or counts.info.task_ids is None:
            raise DataError("method scores need counts that carry task ids and candidates",
                            field="data")
        by_id = {r.task_id: r for r in self.records}
        T, K = counts.mask.shape
        proba = np.zeros((T, K))
        pred = np.full(T, -1, np.int32)
        for t, (tid, cands) in enumerate(zip(counts.info.task_ids, counts.info.candidates)):
            rec = by_id.get(tid)
            if rec is None:
                raise DataError(f"method {self.method!r} has no result for this task",
                                task_id=tid, field="task_id")
            slots = _slot_of(cands)
            mine = [default_normalizer(c) for c in rec.candidates]
            if sorted(mine) != sorted(slots):
                raise DataError(f"method {self.method!r} scored candidates {list(rec.candidates)}, "
                                f"the traces have {list(cands)}", task_id=tid, field="candidates")
            for key, p in zip(mine, rec.proba):
                proba[t, slots[key]] = p
            if rec.answer is not None:
                pred[t] = slots[default_normalizer(rec.answer)]
        return proba, pred

    def to_json(self) -> dict:
        return {"schema_version": METHOD_RUN_SCHEMA_VERSION, "kind": METHOD_RUN_KIND,
                "package_version": __version__, "prompt_version": METHOD_PROMPT_VERSION,
                "method": self.method, "reads_council": self.reads_council,
                "attack": self.attack, "gamma": self.gamma, "parse": self.parse,
                "calibration": self.calibration, "ledger": self.ledger,
                "channels": self.channels, "settings": self.settings,
                "judge_ledger": self.judge_ledger(), "calls": self.calls,
                "records": [r.to_json() for r in self.records]}

    def write(self, path) -> str:
        """Write the run as one JSON file (atomically; strict JSON). Returns the path."""
        path = os.fspath(path)
        text = json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n"
        atomic_write(path, lambda fh: fh.write(text))
        return path


def read_method_run(path) -> MethodRun:
    """Read a run written by :meth:`MethodRun.write`; the kind and schema version are checked
    (:class:`~bda_jax.ArtifactError` naming the file otherwise)."""
    path = os.fspath(path)
    d = read_json_file(path, ArtifactError, "method run")
    if not isinstance(d, dict) or d.get("kind") != METHOD_RUN_KIND:
        raise ArtifactError(f"not a bda_jax method run (kind {d.get('kind') if isinstance(d, dict) else None!r})",
                            file=path)
    if d.get("schema_version") != METHOD_RUN_SCHEMA_VERSION:
        raise ArtifactError(f"method run schema version {d.get('schema_version')!r}; this bda_jax "
                            f"reads {METHOD_RUN_SCHEMA_VERSION}", file=path)
    try:
        return MethodRun(str(d["method"]), bool(d["reads_council"]), bool(d["attack"]),
                         [MethodRecord.from_json(r, file=path) for r in d["records"]],
                         dict(d["ledger"]), dict(d["channels"]), dict(d.get("settings") or {}),
                         [dict(r) for r in d.get("calls") or ()])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"unreadable method run: {exc}", file=path) from None


def _question_of_trace(trace: Trace, candidates: tuple[str, ...]) -> Question:
    text = trace.extra.get("question")
    if not isinstance(text, str) or not text.strip():
        raise DataError("the trace carries no question text (field 'question'), which a "
                        "method needs", task_id=trace.task_id, field="question",
                        file=trace.source[0], line=trace.source[1])
    base = trace.task_id.split("#s")[0] if "#s" in trace.task_id else trace.task_id
    return Question(base, text, candidates, trace.gold, trace.cluster)


def tasks_from_traces(traces: Sequence[Trace]) -> list[MethodTask]:
    """One :class:`MethodTask` per trace: the question text from the trace's ``question`` field
    (the council runner writes it), the candidates the tally resolves (so scores line up with
    every count-based arm), the sample from ``sample`` (0 when absent) and the trace itself."""
    out = []
    for trace in traces:
        cands = tuple(resolve_trace(trace).candidates)
        sample = trace.extra.get("sample", 0)
        sample = sample if isinstance(sample, int) and not isinstance(sample, bool) \
            and sample >= 0 else 0
        out.append(MethodTask(trace.task_id, _question_of_trace(trace, cands), cands, sample, trace))
    return out


def tasks_from_questions(questions: Sequence[Question], samples: int = 1) -> list[MethodTask]:
    """One :class:`MethodTask` per (question, sample), task ids as the council runner names
    them (``"<task_id>#s<k>"`` past sample 0). Every question needs candidates."""
    from ._protocol import trace_task_id
    out = []
    for q in questions:
        if q.candidates is None:
            raise DataError("the LLM-based methods answer from a candidate list; this question "
                            "has none (open answers are read from council traces instead)",
                            task_id=q.task_id, field="candidates")
        for s in range(samples):
            out.append(MethodTask(trace_task_id(q, s), q, tuple(q.candidates), s, None))
    return out


def derived_seed(seed: int | None, sample: int, draw: int) -> int | None:
    """The request seed of draw ``draw`` of sample ``sample`` from a seat's ``seed``: the seed
    itself for the first draw of sample 0, else the first 31 bits of SHA-256 of the JSON text
    ``[seed, sample, draw]`` (so the draws of different seats, samples and rounds never share a
    seed, whatever the seats' own seeds); ``None`` without a seed."""
    if seed is None:
        return None
    if sample == 0 and draw == 0:
        return int(seed)
    text = json.dumps([int(seed), int(sample), int(draw)], separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode("ascii")).digest()[:4], "big") >> 1


class Caller:
    """The calls of one method run: :meth:`chat` builds the :class:`ChatRequest` of a seat
    (endpoint, model, temperature, max tokens; seed :func:`derived_seed`) and sends it through
    the cached, counted client under a channel name."""

    def __init__(self, client: CouncilClient):
        self.client = client

    async def chat(self, seat: Seat, messages: Sequence[dict], *, task: MethodTask, channel: str,
                   schema: dict | None = None, draw: int = 0) -> ChatReply:
        seed = derived_seed(seat.seed, task.sample, draw)
        req = ChatRequest(endpoint=seat.endpoint, model=seat.model, messages=tuple(messages),
                          temperature=seat.temperature, seed=seed, schema=schema,
                          sample=task.sample, max_tokens=seat.max_tokens, draw=draw)
        return await self.client.complete(req, task=task.task_id, seat=channel)


def _channel_totals(rows: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for r in rows:
        name = r["seat"].split(":")[0]
        acc = out.setdefault(name, {"calls": 0, "cached": 0, "tokens": 0, "cost": 0.0})
        acc["calls"] += 1
        if r["cached"]:
            acc["cached"] += 1
            continue
        acc["tokens"] += r["prompt_tokens"] + r["completion_tokens"]
        if r["cost"] is None or acc["cost"] is None:
            acc["cost"] = None
        else:
            acc["cost"] += r["cost"]
    return dict(sorted(out.items()))


class LLMMethod(ABC):
    """Base of the LLM-based methods (module docstring): ``Agg ∘ Gen`` with the same
    ``fit`` / ``predict_proba`` / ``predict`` surface as the count-based arms.

    A subclass sets ``name`` and ``reads_council``, lists its ``gen_channels`` and
    ``agg_channels`` (the ledger channel names of each stage; rho only ever reaches the first),
    and implements :meth:`generate` and :meth:`aggregate`. ``runtime``: where the calls go;
    ``attack``: apply rho inside ``Gen`` ([BDA] Eq. 8); ``seed``: seeds tie-breaks;
    ``samples``: samples per question when run on questions.
    """

    name = "method"
    reads_council = False
    gen_channels: tuple[str, ...] = ()
    agg_channels: tuple[str, ...] = ()

    def __init__(self, runtime: Runtime, *, attack: bool = False, seed: int = 0,
                 samples: int = 1, judge: Seat | None = None):
        if not isinstance(runtime, Runtime):
            raise DataError(f"runtime must be a Runtime, got {type(runtime).__name__}",
                            field="runtime")
        self.runtime = runtime
        self.attack = bool(attack)
        self.seed = int(seed)
        self.samples = int(samples)
        self.judge = judge
        self.run_: MethodRun | None = None

    # -- the two stages ----------------------------------------------------------------------
    @abstractmethod
    async def generate(self, caller: Caller, task: MethodTask, attack: bool) -> Evidence:
        """``Gen`` (``Gen^rho`` when ``attack``): the LLM-made evidence for one task."""

    @abstractmethod
    async def aggregate(self, caller: Caller, task: MethodTask, evidence: Evidence) -> MethodAnswer:
        """``Agg``: the fixed rule from evidence to answer and confidence (rho never applies)."""

    def settings(self) -> dict:
        """The method's parameters, as JSON values (written with every run)."""
        return {"attack": self.attack, "seed": self.seed, "samples": self.samples,
                "judge": None if self.judge is None else vars(self.judge)}

    # -- running ------------------------------------------------------------------------------
    def tasks(self, data) -> list[MethodTask]:
        """The tasks of ``data`` (traces, or questions for a method that needs no trace); a
        non-reading method's tasks never hold the trace."""
        items = list(data)
        if not items:
            raise DataError("no tasks to run", field="data")
        if all(isinstance(x, Trace) for x in items):
            tasks = tasks_from_traces(items)
        elif all(isinstance(x, Question) for x in items):
            if self.reads_council and not self._runs_own_council():
                raise DataError(f"{self.name} reads the council: give it traces (or own "
                                "proposers to run on questions)", field="data")
            tasks = tasks_from_questions(items, self.samples)
        elif all(isinstance(x, MethodTask) for x in items):
            tasks = items
        else:
            raise DataError("expected a list of traces, questions or MethodTasks", field="data")
        if not self.reads_council:
            tasks = [replace(t, trace=None) for t in tasks]
        return tasks

    def _runs_own_council(self) -> bool:
        return False

    def run(self, data, *, out=None, progress=None) -> MethodRun:
        """Run the method on every task of ``data`` (:meth:`tasks`) and return (and keep, as
        ``run_``) the :class:`MethodRun`; with ``out``, also write it there (and, while running,
        one line per finished task to ``<out>.partial``). ``progress(done, total, counters)``
        as in :func:`~bda_jax.council.run_council`. Warns when the
        committed answers score below chance on labeled tasks (the tripwire of [BDA] Appendix D.3:
        :class:`bda_jax.datasets.ParseWarning`)."""
        tasks = self.tasks(data)
        ledger = Ledger(self.runtime.prices)
        with ReplyCache(self.runtime.cache_path, mode=self.runtime.cache_mode) as cache:
            records = asyncio.run(self._run(tasks, cache, ledger, out, progress))
        rows = ledger.rows()
        run = MethodRun(self.name, self.reads_council, self.attack, records, ledger.summary(),
                        _channel_totals(rows), self.settings(), rows)
        if run.parse["tripwire"]:
            p = run.parse
            warnings.warn(f"{self.name}: committed answers are {p['accuracy_committed']:.3f} "
                          f"accurate on labeled tasks, below chance {p['chance']:.3f}: check the "
                          "answer extraction before reading the result ([BDA] Appendix D.3)",
                          ParseWarning,
                          stacklevel=2)
        if out is not None:
            run.write(out)
            Path(f"{os.fspath(out)}.partial").unlink(missing_ok=True)
        self.run_ = run
        return run

    async def _one(self, caller: Caller, task: MethodTask) -> MethodRecord:
        evidence = await self.generate(caller, task, self.attack)
        verdict = await self.aggregate(caller, task, evidence)
        if verdict.answer is not None and verdict.answer not in task.candidates:
            raise BdaError(f"{self.name}: Agg returned {verdict.answer!r}, not a candidate",
                           task_id=task.task_id)
        conf = verdict.confidence
        if conf is not None and not (math.isfinite(conf) and 0.0 <= conf <= 1.0):
            conf = None
        proba = answer_proba(verdict.answer, conf, task.candidates) \
            if verdict.proba is None else np.asarray(verdict.proba, float)
        detail = {**evidence.notes, **verdict.detail}
        return MethodRecord(task.task_id, task.sample, task.candidates, task.question.gold,
                            verdict.answer, conf, tuple(float(x) for x in proba), verdict.rule,
                            evidence.corrupted, evidence.total, detail)

    async def _run(self, tasks, cache, ledger, out, progress):
        client = CouncilClient(self.runtime.endpoints, cache, ledger)
        caller = Caller(client)
        gate = asyncio.Semaphore(max(1, int(self.runtime.concurrency)))
        results: list[MethodRecord | None] = [None] * len(tasks)
        done = 0
        partial = None if out is None else open(f"{os.fspath(out)}.partial", "w", encoding="utf-8")
        try:
            if progress is not None:
                progress(0, len(tasks), ledger.running())

            async def one(i, task):
                nonlocal done
                async with gate:
                    results[i] = rec = await self._one(caller, task)
                if partial is not None:
                    partial.write(json.dumps(rec.to_json(), allow_nan=False) + "\n")
                    partial.flush()
                done += 1
                if progress is not None:
                    progress(done, len(tasks), ledger.running())
            await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))
        finally:
            if partial is not None:
                partial.close()
            await client.aclose()
        return results

    # -- the estimator surface ------------------------------------------------------------------
    def fit(self, data=None, weights=None) -> "LLMMethod":
        """No-op (the method reads no label): returns ``self``."""
        return self

    def method_proba(self, data, counts: Counts | None = None):
        """The evaluation harness' method protocol: run on ``data`` (cached) and return
        ``(proba [T, K], pred [T])`` aligned with ``counts`` (see :meth:`MethodRun.method_proba`)."""
        if isinstance(data, Counts):
            raise DataError(f"{self.name} runs on traces or questions, not on Counts",
                            field="data")
        run = self.run(data)
        return run.method_proba(data, counts)

    def predict_proba(self, data) -> np.ndarray:
        """[T, K] scores aligned with ``tally(data)`` (traces), or [T, K_max] in each
        question's candidate order (questions)."""
        if all(isinstance(x, Trace) for x in data):
            return self.method_proba(data)[0]
        run = self.run(data)
        K = max(len(r.candidates) for r in run.records)
        out = np.zeros((len(run.records), K))
        for t, r in enumerate(run.records):
            out[t, :len(r.proba)] = r.proba
        return out

    def predict(self, data) -> np.ndarray:
        """[T] slot of each task's answer (-1: no commitment), in the layout of
        :meth:`predict_proba`."""
        if all(isinstance(x, Trace) for x in data):
            return self.method_proba(data)[1]
        run = self.run(data)
        return np.array([-1 if r.answer is None else r.candidates.index(r.answer)
                         for r in run.records], np.int32)

