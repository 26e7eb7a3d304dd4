"""Council configs in TOML ([BDA] §5: the seats, rounds and samples of a live council).

Shape (``docs/council.md``)::

    rounds = 3            # >= 1; round 0 is the propose round
    samples = 1           # >= 1 runs per question (different seeds)
    seed = 0              # seeds the anonymized labels and the per-sample request seeds
    max_reasks = 2        # bounded re-asks of an unusable reply
    extra_forces = []     # any of "retract", "vote", "abstain"
    [endpoints.local]
    base_url = "http://127.0.0.1:8080/v1"
    api_key_env = "OPENAI_API_KEY"   # optional
    max_concurrency = 4   # optional; requests_per_minute, timeout_s, max_retries too
    [[seats]]
    name = "gemma"; endpoint = "local"; model = "smollm2"
    temperature = 0.7     # optional, finite in [0, 2]; seed, role ("honest" | "adversary"),
                          # max_tokens too
    [prices.smollm2]      # optional, by model: USD per million tokens
    prompt_per_million = 0.0
    completion_per_million = 0.0
    [methods]             # optional: the LLM-based baselines (docs/llm-methods.md)
    samples = 6           # Self-MoA's draws; depth, breadth, root_base for ArgLLMs
    [methods.synthesizer] # also sampler, generator, evaluator, judge: endpoint, model,
    endpoint = "local"    # temperature, seed, max_tokens
    model = "smollm2"

Unknown keys are refused. Every problem raises :class:`~bda_jax.DataError` naming the file and
the dotted field (``seats[1].endpoint``).
"""
from __future__ import annotations

import hashlib
import math
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any, Mapping

from .._core.errors import DataError
from .._core.io import canonical_json

__all__ = ["Endpoint", "Seat", "Price", "MethodsConfig", "CouncilConfig", "read_config", "ROLES",
           "EXTRA_FORCES", "METHOD_SEATS"]

ROLES = ("honest", "adversary")
EXTRA_FORCES = ("retract", "vote", "abstain")


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server: ``base_url`` (ending in ``/v1`` as a rule), the environment
    variable holding its key (``None``: no key), at most ``max_concurrency`` requests in flight,
    an optional requests-per-minute limit, a per-request timeout and a retry budget."""

    name: str
    base_url: str
    api_key_env: str | None = None
    max_concurrency: int = 4
    requests_per_minute: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 4


@dataclass(frozen=True)
class Seat:
    """One council member: a model on an endpoint, its sampling settings and its role
    (``"honest"`` or ``"adversary"``, [BDA] Appendix F)."""

    name: str
    endpoint: str
    model: str
    temperature: float = 0.7
    seed: int | None = None
    role: str = "honest"
    max_tokens: int = 256


@dataclass(frozen=True)
class Price:
    """USD per million prompt and completion tokens of one model."""

    prompt_per_million: float
    completion_per_million: float


#: the model roles of the LLM-based methods, with the temperature each defaults to
METHOD_SEATS = {"synthesizer": 0.0, "sampler": 0.7, "generator": 0.7, "evaluator": 0.0,
                "judge": 0.0}


@dataclass(frozen=True)
class MethodsConfig:
    """The models and settings of the LLM-based methods ([BDA] Appendix B.1; docs/llm-methods.md).

    Each model role (``synthesizer`` of MoA / Self-MoA, Self-MoA's ``sampler``, ArgLLMs'
    ``generator`` and ``evaluator``, the frozen ``judge``) is a :class:`Seat` named after the
    role, or ``None``: the synthesizer, sampler and generator then default to the council's first
    seat (the synthesizer at temperature 0), the evaluator to the synthesizer, and there is no
    judge. ``samples``: Self-MoA's draws; ``depth``, ``breadth``, ``root_base``: ArgLLMs' tree."""

    synthesizer: Seat | None = None
    sampler: Seat | None = None
    generator: Seat | None = None
    evaluator: Seat | None = None
    judge: Seat | None = None
    samples: int = 6
    depth: int = 1
    breadth: int = 1
    root_base: Any = "evaluator"

    def seat(self, role: str, council_seats: tuple) -> Seat | None:
        """The seat playing ``role``, with the defaults of the class docstring applied."""
        from dataclasses import replace
        given = getattr(self, role)
        if given is not None or role == "judge":
            return given
        if role == "evaluator":
            return self.seat("synthesizer", council_seats)
        first = council_seats[0]
        temperature = first.temperature if role in ("sampler", "generator") else 0.0
        return replace(first, name=role, temperature=temperature, role="honest", max_tokens=512)

    def canonical(self) -> dict:
        return {k: (vars(v) if isinstance(v, Seat) else v) for k, v in vars(self).items()}


def _fail(reason: str, fld: str | None = None, file=None):
    raise DataError(reason, file=file, field=fld)


@dataclass(frozen=True)
class CouncilConfig:
    """A whole council: ``rounds`` (>= 1), ``samples`` (>= 1), the ``seed``, endpoints by name,
    the seats in order, prices by model, the re-ask budget and the enabled extra forces.

    Cross-field checks run on construction (unique seat names, every seat's endpoint defined,
    roles, extra forces) and raise :class:`~bda_jax.DataError` naming the dotted field."""

    rounds: int = 3
    samples: int = 1
    seed: int = 0
    endpoints: Mapping[str, Endpoint] = field(default_factory=dict)
    seats: tuple[Seat, ...] = ()
    prices: Mapping[str, Price] = field(default_factory=dict)
    max_reasks: int = 2
    extra_forces: tuple[str, ...] = ()
    methods: MethodsConfig = field(default_factory=MethodsConfig)

    def __post_init__(self):
        for name in ("rounds", "samples"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                _fail(f"{name} must be an integer >= 1, got {value!r}", name)
        if not _is_int(self.seed):
            _fail(f"seed must be an integer, got {self.seed!r}", "seed")
        if not _is_int(self.max_reasks) or self.max_reasks < 0:
            _fail(f"max_reasks must be an integer >= 0, got {self.max_reasks!r}", "max_reasks")
        object.__setattr__(self, "seats", tuple(self.seats))
        object.__setattr__(self, "extra_forces", tuple(self.extra_forces))
        if not self.seats:
            _fail("a council needs at least one seat", "seats")
        for i, force in enumerate(self.extra_forces):
            if force not in EXTRA_FORCES:
                _fail(f"unknown extra force {force!r}; expected any of "
                      f"{', '.join(EXTRA_FORCES)}", f"extra_forces[{i}]")
            if force in self.extra_forces[:i]:
                _fail(f"extra force {force!r} is listed twice", f"extra_forces[{i}]")
        for key, ep in self.endpoints.items():
            if not isinstance(ep, Endpoint) or ep.name != key:
                _fail(f"endpoint {key!r} must be an Endpoint named {key!r}", f"endpoints.{key}")
        names: dict[str, int] = {}
        for i, seat in enumerate(self.seats):
            if seat.name in names:
                _fail(f"seat name {seat.name!r} is used twice (first seats[{names[seat.name]}])",
                      f"seats[{i}].name")
            names[seat.name] = i
            if seat.endpoint not in self.endpoints:
                known = ", ".join(sorted(self.endpoints)) or "none"
                _fail(f"seat {seat.name!r} names endpoint {seat.endpoint!r}, which is not "
                      f"defined (endpoints: {known})", f"seats[{i}].endpoint")
            if seat.role not in ROLES:
                _fail(f"role must be 'honest' or 'adversary', got {seat.role!r}",
                      f"seats[{i}].role")
            t = seat.temperature
            if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) \
                    or not 0 <= t <= 2:
                _fail(f"temperature must be a finite number in [0, 2], got {t!r}",
                      f"seats[{i}].temperature")
        for role in METHOD_SEATS:
            seat = getattr(self.methods, role)
            if seat is not None and seat.endpoint not in self.endpoints:
                known = ", ".join(sorted(self.endpoints)) or "none"
                _fail(f"methods.{role} names endpoint {seat.endpoint!r}, which is not defined "
                      f"(endpoints: {known})", f"methods.{role}.endpoint")

    def canonical(self) -> dict:
        """The config as plain JSON values, keys sorted (what :meth:`fingerprint` hashes; a
        config without a ``[methods]`` table hashes as it did before methods existed)."""
        out = {
            "rounds": self.rounds, "samples": self.samples, "seed": self.seed,
            "max_reasks": self.max_reasks, "extra_forces": list(self.extra_forces),
            "endpoints": {k: vars(v) for k, v in sorted(self.endpoints.items())},
            "seats": [vars(s) for s in self.seats],
            "prices": {k: vars(v) for k, v in sorted(self.prices.items())},
        }
        if self.methods != MethodsConfig():
            out["methods"] = self.methods.canonical()
        return out

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical config: equal configs, equal fingerprints."""
        return hashlib.sha256(canonical_json(self.canonical()).encode("ascii")).hexdigest()


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class _Reader:
    """Typed access to one TOML table, errors naming the file and the dotted field."""

    def __init__(self, table, where: str, file: str):
        self.file, self.where = file, where
        if not isinstance(table, dict):
            self.fail(f"must be a table, got {type(table).__name__}", where or None)
        self.table = table

    def fld(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, reason: str, fld: str | None):
        raise DataError(reason, file=self.file, field=fld)

    def check_keys(self, allowed):
        for key in self.table:
            if key not in allowed:
                self.fail(f"unknown key {key!r} (expected one of {', '.join(allowed)})",
                          self.fld(key))

    def get(self, key, kind, default=..., *, low=None, high=None, low_open=False):
        if key not in self.table:
            if default is ...:
                self.fail(f"missing required key {key!r}", self.fld(key))
            return default
        value = self.table[key]
        fld = self.fld(key)
        if kind == "str":
            if not isinstance(value, str) or not value.strip():
                self.fail(f"must be a non-empty string, got {value!r}", fld)
            return value
        if kind == "int":
            if not _is_int(value):
                self.fail(f"must be an integer, got {type(value).__name__} {value!r}", fld)
        elif kind == "float":
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                self.fail(f"must be a number, got {type(value).__name__} {value!r}", fld)
            if not math.isfinite(value):
                self.fail(f"must be finite, got {value!r}", fld)
            value = float(value)
        if low is not None and (value <= low if low_open else value < low):
            self.fail(f"must be {'>' if low_open else '>='} {low}, got {value!r}", fld)
        if high is not None and value > high:
            self.fail(f"must be <= {high}, got {value!r}", fld)
        return value


_TOP = ("rounds", "samples", "seed", "max_reasks", "extra_forces", "endpoints", "seats", "prices",
        "methods")
_METHODS = tuple(METHOD_SEATS) + ("samples", "depth", "breadth", "root_base")
_METHOD_SEAT = ("endpoint", "model", "temperature", "seed", "max_tokens")
_ENDPOINT = ("base_url", "api_key_env", "max_concurrency", "requests_per_minute", "timeout_s",
             "max_retries")
_SEAT = ("name", "endpoint", "model", "temperature", "seed", "role", "max_tokens")
_PRICE = ("prompt_per_million", "completion_per_million")


def _endpoint(name: str, table, file: str) -> Endpoint:
    r = _Reader(table, f"endpoints.{name}", file)
    r.check_keys(_ENDPOINT)
    url = r.get("base_url", "str")
    if not url.startswith(("http://", "https://")):
        r.fail(f"base_url must start with http:// or https://, got {url!r}", r.fld("base_url"))
    return Endpoint(name, url, r.get("api_key_env", "str", None),
                    r.get("max_concurrency", "int", 4, low=1),
                    r.get("requests_per_minute", "float", None, low=0, low_open=True),
                    r.get("timeout_s", "float", 60.0, low=0, low_open=True),
                    r.get("max_retries", "int", 4, low=0))


def _seat(i: int, table, file: str) -> Seat:
    r = _Reader(table, f"seats[{i}]", file)
    r.check_keys(_SEAT)
    role = r.get("role", "str", "honest")
    if role not in ROLES:
        r.fail(f"role must be 'honest' or 'adversary', got {role!r}", r.fld("role"))
    return Seat(r.get("name", "str"), r.get("endpoint", "str"), r.get("model", "str"),
                r.get("temperature", "float", 0.7, low=0, high=2), r.get("seed", "int", None),
                role, r.get("max_tokens", "int", 256, low=1))


def _methods(table, file: str) -> MethodsConfig:
    r = _Reader(table, "methods", file)
    r.check_keys(_METHODS)
    seats = {}
    for role, temperature in METHOD_SEATS.items():
        if role not in table:
            continue
        s = _Reader(table[role], f"methods.{role}", file)
        s.check_keys(_METHOD_SEAT)
        seats[role] = Seat(role, s.get("endpoint", "str"), s.get("model", "str"),
                           s.get("temperature", "float", temperature, low=0, high=2),
                           s.get("seed", "int", None), "honest",
                           s.get("max_tokens", "int", 512, low=1))
    root = table.get("root_base", "evaluator")
    if root != "evaluator":
        root = r.get("root_base", "float", low=0, high=1)
    return MethodsConfig(**seats, samples=r.get("samples", "int", 6, low=1),
                         depth=r.get("depth", "int", 1, low=1),
                         breadth=r.get("breadth", "int", 1, low=1), root_base=root)


def read_config(path) -> CouncilConfig:
    """Read and check a council config (TOML, the shape in the module docstring) ->
    :class:`CouncilConfig`. Raises :class:`~bda_jax.DataError` naming the file and the dotted
    field: TOML syntax, unknown keys, wrong types, out-of-range values, a seat naming an
    undefined endpoint, duplicate seat names, unknown roles or extra forces."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = tomllib.load(handle)
    except OSError as err:
        raise DataError(f"cannot open council config: {err.strerror}", file=path) from None
    except UnicodeDecodeError as err:
        raise DataError(f"not valid UTF-8 (byte {err.start + 1})", file=path) from None
    except tomllib.TOMLDecodeError as err:
        raise DataError(f"invalid TOML: {err}", file=path) from None
    top = _Reader(raw, "", path)
    top.check_keys(_TOP)
    endpoints_raw = raw.get("endpoints", {})
    _Reader(endpoints_raw, "endpoints", path)
    endpoints = {name: _endpoint(name, t, path) for name, t in endpoints_raw.items()}
    seats_raw = raw.get("seats")
    if seats_raw is None:
        top.fail("missing required key 'seats' (one [[seats]] table per seat)", "seats")
    if not isinstance(seats_raw, list) or not seats_raw:
        top.fail("seats must be a non-empty array of tables ([[seats]])", "seats")
    seats = tuple(_seat(i, t, path) for i, t in enumerate(seats_raw))
    prices_raw = raw.get("prices", {})
    _Reader(prices_raw, "prices", path)
    prices = {}
    for model, table in prices_raw.items():
        r = _Reader(table, f"prices.{model}", path)
        r.check_keys(_PRICE)
        prices[model] = Price(r.get("prompt_per_million", "float", low=0),
                              r.get("completion_per_million", "float", low=0))
    forces = raw.get("extra_forces", [])
    if not isinstance(forces, list) or not all(isinstance(f, str) for f in forces):
        top.fail(f"extra_forces must be a list of strings, got {forces!r}", "extra_forces")
    kwargs: dict[str, Any] = dict(
        rounds=top.get("rounds", "int", 3, low=1), samples=top.get("samples", "int", 1, low=1),
        seed=top.get("seed", "int", 0), max_reasks=top.get("max_reasks", "int", 2, low=0))
    if "methods" in raw:
        kwargs["methods"] = _methods(raw["methods"], path)
    try:
        return CouncilConfig(endpoints=endpoints, seats=seats, prices=prices,
                             extra_forces=tuple(forces), **kwargs)
    except DataError as err:
        raise DataError(err.reason, file=path, field=err.field) from None
