"""The LLM-based methods by name, built from a council config's ``[methods]`` table
(docs/llm-methods.md): ``moa``, ``moa-lite``, ``self-moa`` and ``argllms``."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Sequence

from .._core.errors import DataError
from ._argllms import ArgLLMs
from ._config import CouncilConfig
from ._methods import LLMMethod, Runtime
from ._moa import MoA, SelfMoA

__all__ = ["METHODS", "make_method", "read_method_inputs", "run_method_files"]

#: method name -> reads the council?
METHODS = {"moa": True, "moa-lite": True, "self-moa": False, "argllms": False}


def make_method(name: str, config: CouncilConfig, runtime: Runtime | None = None, *,
                attack: bool = False, adversaries: Sequence[str] = (), seed: int | None = None,
                proposers: Sequence[str] | None = None,
                own_proposers: bool = False) -> LLMMethod:
    """The method ``name`` with the models of ``config.methods`` (defaults:
    :class:`~bda_jax.council.MethodsConfig`) and calls going to ``runtime`` (default: the
    config's endpoints and prices, an in-memory cache). ``attack`` applies rho inside ``Gen``
    (Self-MoA, ArgLLMs; a council reader is attacked through its traces, and ``adversaries``
    names the seats that played rho there, for gamma). ``proposers``: the seats MoA reads
    (default: the first three, two for MoA-Lite). ``own_proposers``: MoA runs the config's
    seats as its own proposers on the questions (a non-reading MoA; under ``attack`` the last
    two play rho) instead of reading traces. ``seed``: default the config's."""
    if name not in METHODS:
        raise DataError(f"unknown method {name!r}; expected one of {list(METHODS)}",
                        field="methods")
    runtime = Runtime.from_config(config) if runtime is None else runtime
    m = config.methods
    seats = config.seats
    seed = config.seed if seed is None else int(seed)
    judge = m.seat("judge", seats)
    synthesizer = m.seat("synthesizer", seats)
    if name in ("moa", "moa-lite"):
        n = 3 if name == "moa" else 2
        own = None
        if own_proposers:
            chosen = [s for s in seats if proposers is None or s.name in proposers][:n]
            own = [replace(s, role="honest") for s in chosen]
        return MoA(runtime, synthesizer, n_proposers=n, adversaries=adversaries,
                   proposers=None if proposers is None or own else tuple(proposers)[:n],
                   own_proposers=own, attack=attack and own is not None, seed=seed,
                   judge=judge, name=name)     # a trace reader is attacked through its traces
    if name == "self-moa":
        return SelfMoA(runtime, m.seat("sampler", seats), synthesizer, n_samples=m.samples,
                       attack=attack, seed=seed, judge=judge)
    return ArgLLMs(runtime, m.seat("generator", seats), m.seat("evaluator", seats),
                   depth=m.depth, breadth=m.breadth, root_base=m.root_base, attack=attack,
                   seed=seed)


def read_method_inputs(path):
    """A method's input file: traces (JSON Lines with ``moves``, read strictly) or a question
    set, told apart by the first record. Returns ``("traces" | "questions", items)``."""
    from .._core.traces import read_traces
    from ._questions import read_questions
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            first = next((line for line in fh if line.strip()), b"")
    except OSError as err:
        raise DataError(f"cannot open input: {err.strerror}", file=path) from None
    try:
        is_trace = isinstance(json.loads(first), dict) and "moves" in json.loads(first)
    except ValueError:
        is_trace = False                      # the reader below names the bad line
    return ("traces", read_traces(path)) if is_trace else ("questions", read_questions(path))


def run_method_files(name: str, inputs, config, out, *, attack: bool = False,
                     adversaries: Sequence[str] = (), cache_path=None, cache_mode: str = "record",
                     local: bool = False, progress=None):
    """``bda council method``: read ``inputs`` (:func:`read_method_inputs`) and the config,
    build the method (:func:`make_method`; MoA on a question set runs the config's seats as its
    own proposers; with ``local``, every endpoint points at the bundled local model), run it and write the :class:`~bda_jax.council.MethodRun` to ``out``
    (reply cache default ``<out>.cache.sqlite``). An ``out`` that is an input is refused."""
    from ._config import read_config
    from ._methods import Runtime
    from ._runner import on_model, refuse_input_as_output
    out = os.fspath(out)
    refuse_input_as_output(out, input=inputs, config=config)
    kind, items = read_method_inputs(inputs)
    cfg = read_config(config)
    cache_path = f"{out}.cache.sqlite" if cache_path is None and cache_mode != "off" \
        else cache_path

    def go(cfg):
        runtime = Runtime.from_config(cfg, cache_path=cache_path, cache_mode=cache_mode)
        method = make_method(name, cfg, runtime, attack=attack, adversaries=adversaries,
                             own_proposers=kind == "questions" and METHODS[name])
        return method.run(items, out=out, progress=progress)
    return on_model(cfg, local, go)
