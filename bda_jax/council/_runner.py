"""The council runner ([BDA] §5, Appendix D.7): every question (times ``samples``) deliberated
by the configured seats under the protocol automaton, through the cached, counted client, into
traces of the trace format that ``tally`` and every aggregator read unchanged.

One task is one question and one sample. Round 0: each seat proposes; rounds 1 .. R-1: each seat
makes one legal move, having seen every earlier round's moves (anonymized labels and argument
text); the moves of one round are requested together and applied in seat order, so no seat sees
a move of its own round. A reply that does not parse as a legal move gets up to ``max_reasks``
re-asks (the reason is sent back); after that the move is recorded as an ``abstain`` with
``error`` set to the reason, counted in the summary, and the run goes on.

Resuming: every reply is in the cache before it is used, so a rerun of a killed run replays
what it has and asks only for the rest; the final traces are written atomically at the end in
question order, and each finished task is also appended to ``<out>.partial`` (whole lines only:
at once for a task that waited on the network, :data:`PARTIAL_BATCH` lines at a time for tasks
the cache answered whole), so a killed run shows its progress.

Speed (``benchmarks/bench_runner.py``): every task is first played as far as the cache answers
it, without the event loop (:meth:`CouncilClient.lookup`), so a replay never waits on it and a
resumed run finishes its cached tasks at once; the tasks that miss then run together, enough of
them to fill every endpoint's ``max_concurrency`` (at least :data:`TASK_CONCURRENCY`). The
prompts of a round are made together (:func:`round_messages`), each seat's legal moves once
(for the prompt, the schema, the reply check and the move), one request template per seat and
schema holds everything of a request but its messages, JSON included
(:meth:`ChatRequest.with_messages`); each trace is serialized once.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from .._core.errors import DataError, TraceError
from .._core.io import atomic_write
from .._core.traces import Trace, trace_line
from .._core.version import __version__
from ._cache import ReplyCache
from ._client import ChatRequest, CouncilClient, UpstreamError
from ._config import METHOD_SEATS, CouncilConfig, Seat
from ._ledger import Ledger
from ._prompts import PROMPT_VERSION, reask_message, round_messages
from ._protocol import (LegalMoves, TaskState, apply_move, legal_moves, new_task_state, next_round,
                        record_abstain, to_trace, trace_task_id)
from ._questions import Question
from ._schema import ReplyError, move_schema, parse_reply

__all__ = ["MANIFEST_KIND", "RunSummary", "local_config", "on_model", "pointed_at",
           "refuse_input_as_output", "run_council", "run_council_files"]

MANIFEST_KIND = "bda_jax.council_manifest"
MANIFEST_SCHEMA_VERSION = 1
#: the fewest tasks deliberated at once (more where the endpoints' ``max_concurrency`` allows;
#: each endpoint also bounds its own requests in flight)
TASK_CONCURRENCY = 8
#: tasks answered wholly from the cache reach ``<out>.partial`` this many lines at a time (one
#: write each: whole lines only); a task that waited on the network, at once
PARTIAL_BATCH = 64


@dataclass
class RunSummary:
    """What a run did: ``n_tasks`` traces written to ``out`` (manifest beside it), the ledger's
    totals (``calls``, ``cached``, tokens, cost, latency), ``parse_failures`` (moves recorded as
    abstain after the re-asks), ``reasks``, and ``unanswered``: tasks of open questions in which
    no seat named an answer (no trace can hold them; listed here and in the manifest, not
    written)."""

    out: str
    manifest: str
    n_tasks: int
    ledger: dict
    parse_failures: list[dict] = field(default_factory=list)
    reasks: int = 0
    unanswered: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"out": self.out, "manifest": self.manifest, "n_tasks": self.n_tasks,
                "ledger": self.ledger, "parse_failures": self.parse_failures,
                "reasks": self.reasks, "unanswered": self.unanswered}


@dataclass
class _Tally:
    parse_failures: list = field(default_factory=list)
    reasks: int = 0
    unanswered: list = field(default_factory=list)


class _Asker:
    """One seat's move in the current round, as a small state machine: :meth:`request` is the
    chat request of the current attempt, :meth:`take` judges its reply against the legal moves
    (a usable one ends the ask; an unusable one queues a re-ask with the reason sent back, at
    most ``config.max_reasks`` times). ``result`` is ``(MoveReply or None, reason of the last
    failure, extras)`` once ``done``."""

    __slots__ = ("seat", "legal", "messages", "template", "attempt", "reason", "result",
                 "_reasks")

    def __init__(self, config: CouncilConfig, seat: Seat, state: TaskState, legal: LegalMoves,
                 messages: list[dict], shared: dict):
        self.seat = seat
        self.legal = legal
        self.messages = messages
        # one request template per (seat, sample, schema), one schema object per distinct set
        # of legal moves (what the schema reads of them): everything of a request but its
        # messages, JSON included, made once
        of = (legal.forces, legal.answers, legal.targets, legal.open_answers)
        key = (seat.name, state.sample, of)
        template = shared.get(key)
        if template is None:
            schema = shared.get(of)
            if schema is None:
                schema = shared[of] = move_schema(legal)
            template = shared[key] = ChatRequest(
                endpoint=seat.endpoint, model=seat.model, messages=(),
                temperature=seat.temperature,
                seed=None if seat.seed is None else seat.seed + state.sample, schema=schema,
                sample=state.sample, max_tokens=seat.max_tokens)
        self.template = template
        self.attempt = 0
        self.reason = ""
        self.result = None
        self._reasks = config.max_reasks

    @property
    def done(self) -> bool:
        return self.result is not None

    def request(self) -> ChatRequest:
        return self.template.with_messages(self.messages)

    def take(self, reply, tally: _Tally) -> None:
        extras = {"model": reply.model or self.seat.model, "latency_s": round(reply.latency_s, 4),
                  "cache_hit": reply.cached}
        try:
            self.result = parse_reply(reply.text, self.legal), "", extras
            return
        except ReplyError as err:
            self.reason = err.reason
        if self.attempt < self._reasks:
            self.attempt += 1
            tally.reasks += 1
            self.messages = [*self.messages, {"role": "assistant", "content": reply.text},
                             reask_message(self.reason)]
        else:
            self.result = None, self.reason, extras


def _askers(config: CouncilConfig, state: TaskState, shared: dict) -> list[_Asker]:
    """One asker per seat for the current round, their prompts made together."""
    seats = config.seats
    legal = [legal_moves(state, seat.name) for seat in seats]
    messages = round_messages(state, [(s.name, lm, s.role) for s, lm in zip(seats, legal)])
    return [_Asker(config, seat, state, lm, m, shared)
            for seat, lm, m in zip(seats, legal, messages)]


async def _answer(client: CouncilClient, asker: _Asker, task: str, tally: _Tally) -> None:
    """Finish ``asker`` through the client (upstream for a miss, cached replies otherwise)."""
    while not asker.done:
        asker.take(await client.complete(asker.request(), task=task, seat=asker.seat.name),
                   tally)


class _Deliberation:
    """One task (a question and a sample) in progress: its protocol state, its trace task id,
    the round it is in and that round's askers (``None`` before they are made)."""

    __slots__ = ("question", "state", "task", "round", "askers")

    def __init__(self, config: CouncilConfig, question: Question, sample: int):
        self.question = question
        self.state = new_task_state(question, [s.name for s in config.seats], seed=config.seed,
                                    sample=sample, extra_forces=config.extra_forces)
        self.task = trace_task_id(question, sample)
        self.round = 0
        self.askers: list[_Asker] | None = None

    def play_cached(self, client: CouncilClient, config: CouncilConfig, tally: _Tally,
                    shared: dict) -> bool:
        """Play the rounds whose every move is answered from the cache, at once (no event
        loop); ``True`` once every round is played, ``False`` when a seat of the current round
        must wait on the network (the round's cached answers are taken already)."""
        while self.round < config.rounds:
            if self.askers is None:
                if self.round:
                    next_round(self.state)
                self.askers = _askers(config, self.state, shared)
            waiting = False
            for asker in self.askers:        # cached replies until done or a request misses
                while asker.result is None:
                    reply = client.lookup(asker.request(), task=self.task, seat=asker.seat.name)
                    if reply is None:
                        waiting = True
                        break
                    asker.take(reply, tally)
            if waiting:
                return False
            self.end_round(tally)
        return True

    async def play(self, client: CouncilClient, config: CouncilConfig, tally: _Tally,
                   shared: dict) -> None:
        """Play every round left, once :meth:`play_cached` stopped at a round: the seats that
        missed the cache wait on the network together, the cached ones are answered at once."""
        while True:
            await asyncio.gather(*(_answer(client, a, self.task, tally) for a in self.askers
                                   if not a.done))
            self.end_round(tally)
            if self.play_cached(client, config, tally, shared):
                return

    def end_round(self, tally: _Tally) -> None:
        """Apply the round's moves in seat order and open the next round."""
        state = self.state
        for asker in self.askers:
            move, reason, extras = asker.result
            name = asker.seat.name
            if move is None:
                tally.parse_failures.append({"task": self.task, "seat": name,
                                             "round": self.round, "reason": reason})
                record_abstain(state, name, reason, extra=extras)
            else:           # the legal moves it was parsed against, made once for the prompt
                apply_move(state, name, move, extra=extras, legal=asker.legal)
        self.askers = None
        self.round += 1

    def trace(self, tally: _Tally) -> Trace | None:
        """The finished task's trace (``None``: an open question nobody answered)."""
        try:
            return to_trace(self.state)
        except TraceError:
            if self.question.candidates is not None:
                raise
            tally.unanswered.append(self.task)     # no trace can hold it
            return None


def _tasks_at_once(config: CouncilConfig) -> int:
    """How many tasks a run deliberates at once: :data:`TASK_CONCURRENCY`, or more where the
    seats' endpoints allow more requests in flight, so that each endpoint's
    ``max_concurrency`` can be filled (twice over: a round waits for its slowest seat)."""
    used = {seat.endpoint for seat in config.seats}
    capacity = sum(max(1, int(config.endpoints[name].max_concurrency)) for name in used)
    return max(TASK_CONCURRENCY, -(-2 * capacity // len(config.seats)))


def _sha256_file(path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


async def _run(questions, config, out, cache, ledger, progress):
    client = CouncilClient(config.endpoints, cache, ledger)
    tally = _Tally()
    partial = Path(f"{out}.partial")
    jobs = [(q, s) for q in questions for s in range(config.samples)]
    results: list[Trace | None] = [None] * len(jobs)
    lines: list[str | None] = [None] * len(jobs)
    gate = asyncio.Semaphore(_tasks_at_once(config))
    shared: dict = {}        # the move schemas (never mutated) and the request templates
    done = 0
    try:
        served: dict = {}
        if cache.mode != "replay":          # replay-only runs never touch the network
            for name in config.endpoints:
                if any(seat.endpoint == name for seat in config.seats):
                    try:
                        served[name] = await client.list_models(name)
                    except UpstreamError as err:   # a server without GET /models still runs
                        if err.status not in (404, 405, 501):
                            raise
                        served[name] = {"error": err.reason}
        if progress is not None:
            progress(0, len(jobs), ledger.running())
        with open(partial, "w", encoding="utf-8") as fh:
            unflushed = []                  # whole lines of finished tasks, not yet written

            def finish(i: int, task: _Deliberation, flush: bool = True) -> None:
                nonlocal done
                results[i] = trace = task.trace(tally)
                if trace is not None:
                    lines[i] = trace_line(trace, out) + "\n"
                    unflushed.append(lines[i])
                if unflushed and (flush or len(unflushed) >= PARTIAL_BATCH):
                    fh.write("".join(unflushed))
                    fh.flush()
                    unflushed.clear()
                done += 1
                if progress is not None:
                    progress(done, len(jobs), ledger.running())

            async def one(i: int, task: _Deliberation) -> None:
                async with gate:
                    await task.play(client, config, tally, shared)
                finish(i, task)

            waiting = []
            for i, (q, s) in enumerate(jobs):      # what the cache holds is played at once
                task = _Deliberation(config, q, s)
                if task.play_cached(client, config, tally, shared):
                    finish(i, task, flush=False)   # written PARTIAL_BATCH at a time
                else:
                    waiting.append((i, task))
            if unflushed:
                fh.write("".join(unflushed))
                fh.flush()
                unflushed.clear()
            await asyncio.gather(*(one(i, task) for i, task in waiting))
    finally:
        await client.aclose()
    traces = [t for t in results if t is not None]
    # the lines of write_traces(traces, out), already made for the partial file: written once
    atomic_write(out, lambda handle: handle.writelines(x for x in lines if x is not None),
                 suffix=".jsonl")
    partial.unlink(missing_ok=True)
    return traces, tally, served


def run_council(questions: Sequence[Question], config: CouncilConfig, out, *,
                cache_path=None, cache_mode: str = "record",
                progress: Callable[[int, int, dict], None] | None = None,
                question_file: str | None = None, config_file: str | None = None) -> RunSummary:
    """Deliberate every question ``config.samples`` times and write the traces to ``out``.

    ``cache_path`` (default ``<out>.cache.sqlite``) and ``cache_mode`` (``"record"``,
    ``"replay"``: no network, a miss is an error naming task and seat; ``"off"``) select the
    reply cache. ``progress(done, total, counters)`` is called once the inputs are checked and
    after each finished task (``counters``: :meth:`Ledger.running`).
    Writes ``out`` (atomically, question order) and ``<out>.manifest.json`` (config fingerprint,
    package and prompt versions, seats with roles, the models each endpoint reports, the ledger
    summary). An ``out`` that is one of the inputs is refused. Returns a :class:`RunSummary`.
    """
    out = os.fspath(out)
    refuse_input_as_output(out, questions=question_file, config=config_file)
    if not questions:
        raise DataError("the question set is empty", file=question_file, field="questions")
    cache_path = f"{out}.cache.sqlite" if cache_path is None and cache_mode != "off" \
        else cache_path
    ledger = Ledger(config.prices)
    t0 = time.time()
    with ReplyCache(cache_path, mode=cache_mode) as cache:
        traces, tally, served = asyncio.run(_run(questions, config, out, cache, ledger,
                                                 progress))
    summary = ledger.summary()
    manifest_path = f"{out}.manifest.json"
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION, "kind": MANIFEST_KIND,
        "package_version": __version__, "prompt_version": PROMPT_VERSION,
        "config_fingerprint": config.fingerprint(), "config_file": config_file,
        "questions_file": question_file,
        "questions_sha256": None if question_file is None else _sha256_file(question_file),
        "rounds": config.rounds, "samples": config.samples, "seed": config.seed,
        "seats": [{"name": s.name, "endpoint": s.endpoint, "model": s.model, "role": s.role,
                   "temperature": s.temperature, "seed": s.seed} for s in config.seats],
        "endpoint_models": served, "n_tasks": len(traces),
        "parse_failures": len(tally.parse_failures), "reasks": tally.reasks,
        "unanswered": tally.unanswered,
        "ledger": summary,
        "cache": {"path": None if cache_path is None else os.fspath(cache_path), "mode": cache_mode},
        "run": {"started": t0, "seconds": time.time() - t0},
    }
    atomic_write(manifest_path, lambda fh: fh.write(json.dumps(manifest, indent=1) + "\n"))
    return RunSummary(out=out, manifest=manifest_path, n_tasks=len(traces), ledger=summary,
                      parse_failures=tally.parse_failures, reasks=tally.reasks,
                      unanswered=tally.unanswered)


def local_config(base_url: str, model: str, *, rounds: int = 3, n_seats: int = 3) -> CouncilConfig:
    """The council of ``bda council run --local`` without ``--config``: ``n_seats`` honest seats
    (temperature 0.7, seeds 1, 2, ...) of the one local model, ``rounds`` rounds, one sample."""
    from ._config import Endpoint
    endpoint = Endpoint(name="local", base_url=base_url, max_concurrency=2, timeout_s=120.0)
    seats = tuple(Seat(name=f"seat-{i + 1}", endpoint="local", model=model, temperature=0.7,
                       seed=i + 1) for i in range(n_seats))
    return CouncilConfig(rounds=rounds, samples=1, seed=0, endpoints={"local": endpoint},
                         seats=seats, prices={})


def pointed_at(config: CouncilConfig, base_url: str, model: str) -> CouncilConfig:
    """``config`` with every endpoint's URL replaced by ``base_url`` and every seat's model (the
    ``[methods]`` seats' too) by ``model`` (``--local`` with a config: the same council, run on
    the local model)."""
    endpoints = {name: replace(ep, base_url=base_url, api_key_env=None)
                 for name, ep in config.endpoints.items()}
    seats = tuple(replace(seat, model=model) for seat in config.seats)
    methods = replace(config.methods, **{
        role: replace(seat, model=model) for role in METHOD_SEATS
        if (seat := getattr(config.methods, role)) is not None})
    return replace(config, endpoints=endpoints, seats=seats, methods=methods)


def on_model(config: CouncilConfig | None, local: bool, run: Callable[[CouncilConfig], object]):
    """``run(config)``, or with ``local`` ``run`` on the bundled local model: the server is
    started (:func:`local_server`) for the call and every endpoint points at it
    (:func:`pointed_at`; no config: :func:`local_config`). The one place every ``*_files``
    runner switches to the local model."""
    if not local:
        return run(config)
    from ._local import local_server
    with local_server() as server:
        return run(local_config(server.base_url, server.model) if config is None else
                   pointed_at(config, server.base_url, server.model))


def refuse_input_as_output(out, **inputs) -> None:
    """Raise :class:`~bda_jax.DataError` when the output ``out`` is one of the named input
    files (``questions=path, config=path``; ``None`` skipped), compared with
    ``os.path.samefile``: a runner never overwrites its inputs."""
    out = os.fspath(out)
    for name, given in inputs.items():
        if given and os.path.exists(out) and os.path.exists(given) \
                and os.path.samefile(given, out):
            raise DataError(f"--out {out} is the {name} file: refusing to overwrite an input",
                            file=out, field="out")


def run_council_files(questions, config, out, *, cache_path=None, cache_mode: str = "record",
                      local: bool = False, progress=None) -> RunSummary:
    """``bda council run``: read the question set (:func:`read_questions`) and the config
    (:func:`read_config`; with ``local`` and no config, :func:`local_config`), start the local
    model when ``local`` (:func:`local_server`; every endpoint then points at it), and
    :func:`run_council`."""
    from ._config import read_config
    from ._questions import read_questions
    qs = read_questions(questions)
    cfg = None if config is None else read_config(config)
    kwargs = dict(cache_path=cache_path, cache_mode=cache_mode, progress=progress,
                  question_file=os.fspath(questions),
                  config_file=None if config is None else os.fspath(config))
    return on_model(cfg, local, lambda c: run_council(qs, c, out, **kwargs))
