"""The Mixture-of-Agents family ([BDA] Appendix B.1; Wang et al. 2025; Li et al. 2026) as
``Agg ∘ Gen`` (Table 4).

* :class:`MoA` (``n_proposers=3``) and MoA-Lite (``n_proposers=2``): ``Gen`` is the proposers'
  free-text surfaces, read from the council traces (each proposer seat's round-0 proposal with
  its argument, or with ``surfaces="last"`` its latest answer-resolving move), or written by its
  own proposer seats on the question (``own_proposers``; the method then no longer reads a
  council). ``Agg`` is one synthesizer call that answers with a structured reply: a candidate
  and a confidence. Reads the council: rho reaches it through the seats (the attacked traces),
  gamma = the adversary seats' share of the surfaces read.
* :class:`SelfMoA`: ``Gen`` is ``n_samples`` (6) draws of one model on the question; ``Agg`` is the
  same synthesizer. Non-reading; under rho every draw carries the role (gamma = 1).

The synthesizer's confidence is the one it states; the paper finds it near-constant
("calibration N/A"), which every run reports in ``MethodRun.calibration``.
"""
from __future__ import annotations

import asyncio
from typing import Sequence

from .._core.errors import DataError
from .._core.traces import resolve_trace
from ._config import Seat
from ._judge import Judge, commitment, json_object
from ._method_prompts import proposer_messages, synthesis_schema, synthesizer_messages
from ._methods import Caller, Evidence, LLMMethod, MethodAnswer, MethodTask, Runtime

__all__ = ["MoA", "SelfMoA", "SURFACES"]

SURFACES = ("round0", "last")


def _surface(answer: str, argument) -> str:
    text = " ".join(str(argument or "").split())
    return f"{text} Answer: {answer}" if text else f"Answer: {answer}"


def trace_surfaces(trace, seats: Sequence[str] | None, n: int, how: str) -> list[tuple[str, str]]:
    """``[(seat, surface)]`` of the proposer seats of one trace: ``seats`` by name, else the
    first ``n`` agents to move in round 0. A seat with no answer to show is left out."""
    by_id = {m.id: m for m in trace.moves}
    order = list(dict.fromkeys(m.agent for m in trace.moves if m.round == 0)) or \
        list(dict.fromkeys(m.agent for m in trace.moves))
    chosen = list(seats) if seats is not None else order[:n]
    res = resolve_trace(trace)
    out = []
    for seat in chosen:
        picks = [(mid, c, r) for mid, a, c, s, r in zip(res.moves, res.agent, res.cand, res.sign,
                                                        res.round) if a == seat and s > 0]
        if how == "round0":
            picks = [p for p in picks if p[2] == 0][:1]
        else:
            picks = picks[-1:]
        if picks:
            mid, c, _ = picks[0]
            out.append((seat, _surface(res.candidates[c], by_id[mid].extra.get("argument"))))
    return out


class _Synthesized(LLMMethod):
    """The synthesizer ``Agg`` shared by MoA and Self-MoA."""

    agg_channels = ("synthesizer", "judge")

    def __init__(self, runtime: Runtime, synthesizer: Seat, **kw):
        super().__init__(runtime, **kw)
        if not isinstance(synthesizer, Seat):
            raise DataError("synthesizer must be a Seat", field="synthesizer")
        self.synthesizer = synthesizer
        self._judge = None if self.judge is None else Judge(self.judge)

    async def aggregate(self, caller: Caller, task: MethodTask, evidence: Evidence) -> MethodAnswer:
        responses = [text for _, text in evidence.items]
        if not responses:
            return MethodAnswer(None, None, None, {"synthesis": None, "note": "no responses"})
        reply = await caller.chat(self.synthesizer,
                                  synthesizer_messages(task.question.question, task.candidates,
                                                       responses),
                                  task=task, channel="synthesizer",
                                  schema=synthesis_schema(task.candidates))
        obj = json_object(reply.text)
        if obj is None:                     # not the JSON asked for: read the prose
            structured, text = None, reply.text
        else:
            structured = obj.get("answer")
            text = str(obj.get("rationale", "")) + (
                f" Answer: {structured}" if isinstance(structured, str) else "")
        answer, rule, detail = await commitment(caller, task, text, structured, self._judge)
        conf = obj.get("confidence") if obj is not None else None
        conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) \
            else None
        return MethodAnswer(answer, conf, rule, {"synthesis": reply.text, **detail})

    def settings(self) -> dict:
        return {**super().settings(), "synthesizer": vars(self.synthesizer)}


class MoA(_Synthesized):
    """MoA (``n_proposers=3``) / MoA-Lite (``n_proposers=2``) over a council's surfaces.

    ``synthesizer``: the :class:`~bda_jax.council.Seat` that answers (the paper runs a
    stronger model than any seat). ``proposers``: the seat names whose surfaces it reads (default:
    the first ``n_proposers`` seats of each trace); ``surfaces``: ``"round0"`` (the proposals,
    the paper's reading) or ``"last"`` (each seat's latest answer-resolving move).
    ``adversaries``: seat names known to play rho (only to report gamma).
    ``own_proposers``: seats that write the surfaces on the question instead (then the method
    reads no council; under ``attack`` the last ``attacked_proposers`` of them play rho).
    ``judge``: optional frozen judge seat for prose-only replies. ``name`` defaults to
    ``"moa"`` or ``"moa-lite"`` (two proposers).
    """

    gen_channels = ("proposer",)

    def __init__(self, runtime: Runtime, synthesizer: Seat, *, n_proposers: int = 3,
                 proposers: Sequence[str] | None = None, surfaces: str = "round0",
                 adversaries: Sequence[str] = (), own_proposers: Sequence[Seat] | None = None,
                 attacked_proposers: int = 2, attack: bool = False, seed: int = 0,
                 samples: int = 1, judge: Seat | None = None, name: str | None = None):
        super().__init__(runtime, synthesizer, attack=attack, seed=seed, samples=samples,
                         judge=judge)
        if surfaces not in SURFACES:
            raise DataError(f"surfaces must be one of {list(SURFACES)}, got {surfaces!r}",
                            field="surfaces")
        self.proposers = None if proposers is None else tuple(proposers)
        self.n_proposers = len(self.proposers) if self.proposers is not None else int(n_proposers)
        if self.n_proposers < 1:
            raise DataError("MoA needs at least one proposer", field="n_proposers")
        self.surfaces = surfaces
        self.adversaries = tuple(adversaries)
        self.own_proposers = None if own_proposers is None else tuple(own_proposers)
        if self.own_proposers is not None:
            self.own_proposers = self.own_proposers[:self.n_proposers]
        self.attacked_proposers = int(attacked_proposers)
        self.reads_council = self.own_proposers is None
        self.name = name or ("moa-lite" if self.n_proposers == 2 else "moa")

    def _runs_own_council(self) -> bool:
        return self.own_proposers is not None

    async def generate(self, caller: Caller, task: MethodTask, attack: bool) -> Evidence:
        if self.own_proposers is None:
            if task.trace is None:
                raise DataError(f"{self.name} reads the council: this task has no trace",
                                task_id=task.task_id, field="data")
            items = trace_surfaces(task.trace, self.proposers, self.n_proposers, self.surfaces)
            bad = sum(seat in self.adversaries for seat, _ in items)
            return Evidence(items, bad, len(items))
        seats = self.own_proposers
        n_bad = min(len(seats), self.attacked_proposers) if attack else 0
        bad = {s.name for s in seats[len(seats) - n_bad:]}
        q = task.question

        async def one(seat):
            reply = await caller.chat(seat, proposer_messages(q.question, task.candidates,
                                                              gold=q.gold,
                                                              adversary=seat.name in bad),
                                      task=task, channel=f"proposer:{seat.name}")
            return seat.name, reply.text
        items = list(await asyncio.gather(*(one(s) for s in seats)))
        return Evidence(items, len(bad), len(items))

    def settings(self) -> dict:
        return {**super().settings(), "name": self.name, "n_proposers": self.n_proposers,
                "proposers": self.proposers, "surfaces": self.surfaces,
                "adversaries": list(self.adversaries),
                "own_proposers": None if self.own_proposers is None
                else [vars(s) for s in self.own_proposers],
                "attacked_proposers": self.attacked_proposers}


class SelfMoA(_Synthesized):
    """Self-MoA: ``n_samples`` draws of one ``sampler`` seat on the question (never the
    council), then the synthesizer. Under ``attack`` every draw carries rho (gamma = 1)."""

    name = "self-moa"
    reads_council = False
    gen_channels = ("sampler",)

    def __init__(self, runtime: Runtime, sampler: Seat, synthesizer: Seat, *, n_samples: int = 6,
                 attack: bool = False, seed: int = 0, samples: int = 1,
                 judge: Seat | None = None):
        super().__init__(runtime, synthesizer, attack=attack, seed=seed, samples=samples,
                         judge=judge)
        if not isinstance(sampler, Seat):
            raise DataError("sampler must be a Seat", field="sampler")
        if int(n_samples) < 1:
            raise DataError("Self-MoA needs at least one sample", field="n_samples")
        self.sampler = sampler
        self.n_samples = int(n_samples)

    async def generate(self, caller: Caller, task: MethodTask, attack: bool) -> Evidence:
        q = task.question
        messages = proposer_messages(q.question, task.candidates, gold=q.gold, adversary=attack)

        async def one(i):
            reply = await caller.chat(self.sampler, messages, task=task, channel="sampler",
                                      draw=i)
            return f"sample {i + 1}", reply.text
        items = list(await asyncio.gather(*(one(i) for i in range(self.n_samples))))
        return Evidence(items, len(items) if attack else 0, len(items))

    def settings(self) -> dict:
        return {**super().settings(), "sampler": vars(self.sampler), "n_samples": self.n_samples}
