"""The LLM-based methods by name, built from a council config's ``[methods]`` table
(docs/llm-methods.md): ``moa``, ``moa-lite``, ``self-moa`` and ``argllms``."""
from __future__ import annotations

from typing import Sequence

from .._core.errors import DataError
from ._argllms import ArgLLMs
from ._config import CouncilConfig
from ._methods import LLMMethod, Runtime
from ._moa import MoA, SelfMoA

__all__ = ["METHODS", "make_method"]

#: method name -> reads the council?
METHODS = {"moa": True, "moa-lite": True, "self-moa": False, "argllms": False}


def make_method(name: str, config: CouncilConfig, runtime: Runtime | None = None, *,
                attack: bool = False, adversaries: Sequence[str] = (), seed: int | None = None,
                proposers: Sequence[str] | None = None) -> LLMMethod:
    """The method ``name`` with the models of ``config.methods`` (defaults:
    :class:`~bda_jax.council.MethodsConfig`) and calls going to ``runtime`` (default: the
    config's endpoints and prices, an in-memory cache). ``attack`` applies rho inside ``Gen``
    (Self-MoA, ArgLLMs; a council reader is attacked through its traces, and ``adversaries``
    names the seats that played rho there, for gamma). ``proposers``: the seats MoA reads
    (default: the first three, two for MoA-Lite). ``seed``: default the config's."""
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
        return MoA(runtime, synthesizer, n_proposers=n, adversaries=adversaries,
                   proposers=None if proposers is None else tuple(proposers)[:n],
                   seed=seed, judge=judge, name=name)
    if name == "self-moa":
        return SelfMoA(runtime, m.seat("sampler", seats), synthesizer, n_samples=m.samples,
                       attack=attack, seed=seed, judge=judge)
    return ArgLLMs(runtime, m.seat("generator", seats), m.seat("evaluator", seats),
                   depth=m.depth, breadth=m.breadth, root_base=m.root_base, attack=attack,
                   seed=seed)
