"""Trace-Audit Card ([Audit] Table 21 and Table 6): a protocol's measurement sheet.

The card records what one needs to read a routing audit: which protocol and agents produced the
traces, how turns were routed and ties broken, what the confidence scale was, how answers were
extracted and judged, and every audited metric with its numerator, denominator and interval. It
describes a protocol's measurement properties, not a model or a dataset.

Fields (R = required, O = optional, may be null; R+ = required here, an extension: the rows
of the paper's Table 21 that its available text shows are protocol_name (R), protocol_version (R),
paper_of_record (O) and agent_model (R, "homogeneous or heterogeneous"); every other field is
this implementation's):

=====================  ===  ==========================================================
field                  R/O  content
=====================  ===  ==========================================================
schema_version         R+   this JSON layout's version; :data:`SCHEMA_VERSION`
protocol_name          R    short protocol name (Table 21)
protocol_version       R    protocol version tag (Table 21)
paper_of_record        O    citation defining the protocol (Table 21)
agent_model            R    model id(s), a non-empty list (one entry per distinct model)
                            (Table 21)
agent_pool             O    "homogeneous" or "heterogeneous" (Table 21's note on
                            agent_model; ``audit_broadcast`` derives it from agent_model)
decoding_temperature   O    sampling temperature of the agents
n_agents               R+   agents polled per turn (>= 1)
routing_rule           R+   e.g. "confidence argmax"
tie_rule               R+   e.g. "first listed agent wins"
confidence_scale       R+   e.g. "integer 0-100"
speak_threshold        O    score threshold gating speech or notes, on the confidence scale
memory_regime          O    public-memory regime
approval_policy        O    approval / candidate-update policy
evaluator              O    what scores final answers
judge                  O    equivalence / correctness judge
extraction_method      O    how answers are extracted from free text
parse_rate             O    a metric entry: parsed / attempted polls
ci_level               O    the level of every metric's interval (default 0.95)
ci_method              O    how intervals were made (e.g. a problem-cluster bootstrap)
metrics                R    list of metric entries (may be empty)
notes                  O    free text
=====================  ===  ==========================================================

A metric entry is ``{name, value, numerator, denominator, ci_low, ci_high, note, axis, unit}``:
``name`` required, the rest optional; ``unit`` names what the denominator counts (e.g.
"valid selected pairs") and ``axis`` groups rows (routing, calibration, commitment). Undefined
numbers (NaN) are stored as null. :meth:`AuditCard.from_json` refuses unknown or missing
fields, wrong types and unsupported schema versions with :class:`~bda_jax.ArtifactError`
naming the field (``metrics[2].denominator``); building a card in Python with bad values raises
:class:`~bda_jax.DataError` the same way. Files are written atomically.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from ._format import fmt_count, fmt_value, md_cell
from .._core.io import DuplicateKeyError, unique_keys
from .._core.errors import ArtifactError, DataError
from .._core.io import atomic_write

__all__ = ["AGENT_POOLS", "SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS", "AuditCard", "MetricEntry"]

SCHEMA_VERSION = "0.1"
"""Version written by :meth:`AuditCard.to_json` (after the paper's Trace-Audit Card v0.1)."""

SUPPORTED_SCHEMA_VERSIONS = ("0.1",)


# --------------------------------------------------------------------------- value checks

def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) or (
        hasattr(x, "dtype") and getattr(x, "shape", None) == () and x.dtype.kind in "iuf")


def _num(value, where, err, *, required=False, minimum=None):
    if value is None:
        if required:
            raise err("a number is required", field=where)
        return None
    if not _is_num(value):
        raise err(f"must be a number or null, got {type(value).__name__}", field=where)
    v = float(value)
    if not math.isfinite(v):
        return None                                   # undefined -> null
    if minimum is not None and v < minimum:
        raise err(f"must be >= {minimum}, got {v}", field=where)
    return int(v) if isinstance(value, (int,)) or (hasattr(value, "dtype")
                                                   and value.dtype.kind in "iu") else v


def _str(value, where, err, *, required=False):
    if value is None:
        if required:
            raise err("a non-empty string is required", field=where)
        return None
    if not isinstance(value, str):
        raise err(f"must be a string or null, got {type(value).__name__}", field=where)
    if required and not value.strip():
        raise err("a non-empty string is required", field=where)
    return value


# --------------------------------------------------------------------------- metric entry

@dataclass
class MetricEntry:
    """One audited metric with its parts ([Audit] Table 6 layout).

    ``value`` the estimate; ``numerator`` / ``denominator`` the counts it is a ratio of (the
    numerator may be negative for a net shift); ``ci_low`` / ``ci_high`` its interval;
    ``unit`` what the denominator counts; ``axis`` routing / calibration / commitment; ``note``.

    >>> MetricEntry("PSDR", 0.204, 1927, 9436, unit="valid selected pairs").denominator
    9436
    """

    name: str
    value: float | None = None
    numerator: float | None = None
    denominator: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str | None = None
    axis: str | None = None
    unit: str | None = None

    def __post_init__(self):
        self._check(DataError, "metric")

    def _check(self, err, where):
        self.name = _str(self.name, f"{where}.name", err, required=True)
        self.value = _num(self.value, f"{where}.value", err)
        self.numerator = _num(self.numerator, f"{where}.numerator", err)
        self.denominator = _num(self.denominator, f"{where}.denominator", err, minimum=0)
        self.ci_low = _num(self.ci_low, f"{where}.ci_low", err)
        self.ci_high = _num(self.ci_high, f"{where}.ci_high", err)
        if self.ci_low is not None and self.ci_high is not None and self.ci_low > self.ci_high:
            raise err(f"ci_low {self.ci_low} exceeds ci_high {self.ci_high}",
                      field=f"{where}.ci_low")
        for k in ("note", "axis", "unit"):
            setattr(self, k, _str(getattr(self, k), f"{where}.{k}", err))

    @classmethod
    def from_ratio(cls, name: str, r: Any, *, ci=None, axis=None, unit=None,
                   note=None) -> "MetricEntry":
        """Entry from anything with ``value``, ``numerator``, ``denominator`` (e.g. a
        :class:`~bda_jax.audit.Ratio`); ``ci`` an optional (low, high) pair."""
        lo, hi = (None, None) if ci is None else ci
        return cls(name, r.value, r.numerator, r.denominator, lo, hi, note, axis, unit)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def _from_mapping(cls, d, where, err) -> "MetricEntry":
        if isinstance(d, MetricEntry):
            d = d.to_dict()
        if not isinstance(d, Mapping):
            raise err(f"must be an object, got {type(d).__name__}", field=where)
        known = {f.name for f in fields(cls)}
        for k in d:
            if k not in known:
                raise err(f"unknown metric field {k!r}", field=f"{where}.{k}")
        if "name" not in d:
            raise err("missing required field", field=f"{where}.name")
        obj = cls.__new__(cls)
        for f in fields(cls):
            setattr(obj, f.name, d.get(f.name))
        obj._check(err, where)
        return obj


# --------------------------------------------------------------------------- card

_REQUIRED = ("protocol_name", "protocol_version", "agent_model", "n_agents", "routing_rule",
             "tie_rule", "confidence_scale", "metrics")
AGENT_POOLS = ("homogeneous", "heterogeneous")
_STR_FIELDS = ("protocol_name", "protocol_version", "paper_of_record", "routing_rule",
               "tie_rule", "confidence_scale", "memory_regime", "approval_policy", "evaluator",
               "judge", "extraction_method", "ci_method", "notes")

_LABELS = [
    ("protocol_name", "Protocol name"), ("protocol_version", "Protocol version"),
    ("paper_of_record", "Paper of record"), ("agent_model", "Agent model(s)"),
    ("agent_pool", "Agent pool"),
    ("decoding_temperature", "Decoding temperature"), ("n_agents", "Number of agents"),
    ("routing_rule", "Routing rule"), ("tie_rule", "Tie rule"),
    ("confidence_scale", "Confidence scale"), ("speak_threshold", "Speak threshold"),
    ("memory_regime", "Memory regime"), ("approval_policy", "Approval policy"),
    ("evaluator", "Evaluator"), ("judge", "Judge"), ("extraction_method", "Extraction method"),
    ("parse_rate", "Parse rate"),
]


@dataclass
class AuditCard:
    """A Trace-Audit Card ([Audit] Table 21); fields as in the module docstring.

    >>> card = AuditCard("broadcast", "1.0", ["gpt-oss-120b"], 3, "confidence argmax",
    ...                  "first listed wins", "integer 0-100",
    ...                  metrics=[MetricEntry("PSDR", 0.204, 1927, 9436)])
    >>> AuditCard.from_json(card.to_json()) == card
    True
    >>> "| PSDR | 0.204 |" in card.to_markdown()
    True
    """

    protocol_name: str
    protocol_version: str
    agent_model: list
    n_agents: int
    routing_rule: str
    tie_rule: str
    confidence_scale: str
    metrics: list = field(default_factory=list)
    paper_of_record: str | None = None
    agent_pool: str | None = None
    decoding_temperature: float | None = None
    speak_threshold: float | None = None
    memory_regime: str | None = None
    approval_policy: str | None = None
    evaluator: str | None = None
    judge: str | None = None
    extraction_method: str | None = None
    parse_rate: MetricEntry | None = None
    ci_level: float | None = 0.95
    ci_method: str | None = None
    notes: str | None = None
    schema_version: str = SCHEMA_VERSION

    def __post_init__(self):
        self._check(DataError)

    def _check(self, err):
        if self.schema_version not in SUPPORTED_SCHEMA_VERSIONS:
            raise err(f"unsupported schema version {self.schema_version!r}; this bda_jax reads "
                      f"{list(SUPPORTED_SCHEMA_VERSIONS)}", field="schema_version")
        for k in _STR_FIELDS:
            setattr(self, k, _str(getattr(self, k), k, err, required=k in _REQUIRED))
        am = self.agent_model
        if isinstance(am, str):
            am = [am]
        if not isinstance(am, (list, tuple)) or not am:
            raise err("must be a non-empty list of model ids", field="agent_model")
        self.agent_model = [_str(m, f"agent_model[{i}]", err, required=True)
                            for i, m in enumerate(am)]
        if self.agent_pool is not None and self.agent_pool not in AGENT_POOLS:
            raise err(f"must be 'homogeneous', 'heterogeneous' or null, got "
                      f"{self.agent_pool!r}", field="agent_pool")
        n = self.n_agents
        if isinstance(n, bool) or not _is_num(n) or float(n) != int(n) or int(n) < 1:
            raise err(f"must be an integer >= 1, got {n!r}", field="n_agents")
        self.n_agents = int(n)
        self.decoding_temperature = _num(self.decoding_temperature, "decoding_temperature", err,
                                         minimum=0)
        self.speak_threshold = _num(self.speak_threshold, "speak_threshold", err)
        self.ci_level = _num(self.ci_level, "ci_level", err)
        if self.ci_level is not None and not 0 < self.ci_level < 1:
            raise err(f"must lie in (0, 1), got {self.ci_level}", field="ci_level")
        if self.parse_rate is not None:
            self.parse_rate = MetricEntry._from_mapping(self.parse_rate, "parse_rate", err)
        if not isinstance(self.metrics, (list, tuple)):
            raise err(f"must be a list of metric entries, got {type(self.metrics).__name__}",
                      field="metrics")
        self.metrics = [MetricEntry._from_mapping(m, f"metrics[{i}]", err)
                        for i, m in enumerate(self.metrics)]

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict:
        """Plain JSON-ready dict, ``schema_version`` first."""
        out: dict[str, Any] = {"schema_version": self.schema_version}
        for f in fields(self):
            if f.name == "schema_version":
                continue
            v = getattr(self, f.name)
            if f.name == "metrics":
                v = [m.to_dict() for m in v]
            elif f.name == "parse_rate" and v is not None:
                v = v.to_dict()
            elif f.name == "agent_model":
                v = list(v)
            out[f.name] = v
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON text (no NaN; undefined numbers are null)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Any) -> "AuditCard":
        """Validate a decoded card; :class:`~bda_jax.ArtifactError` names the offending field."""
        if not isinstance(d, Mapping):
            raise ArtifactError(f"an audit card must be a JSON object, got {type(d).__name__}")
        if "schema_version" not in d:
            raise ArtifactError("missing required field", field="schema_version")
        if d["schema_version"] not in SUPPORTED_SCHEMA_VERSIONS:
            raise ArtifactError(f"unsupported schema version {d['schema_version']!r}; this "
                                f"bda_jax reads {list(SUPPORTED_SCHEMA_VERSIONS)}",
                                field="schema_version")
        known = {f.name for f in fields(cls)}
        for k in d:
            if k not in known:
                raise ArtifactError(f"unknown field {k!r}", field=k)
        for k in _REQUIRED:
            if k not in d:
                raise ArtifactError("missing required field", field=k)
        obj = cls.__new__(cls)
        for f in fields(cls):
            default = f.default_factory() if callable(f.default_factory) else f.default
            setattr(obj, f.name, d.get(f.name, default))
        obj._check(ArtifactError)
        return obj

    @classmethod
    def from_json(cls, text: str) -> "AuditCard":
        """Parse and validate JSON text (see :meth:`from_dict`).

        >>> AuditCard.from_json('{"schema_version": "9"}')
        Traceback (most recent call last):
        ...
        bda_jax._core.errors.ArtifactError: field 'schema_version': unsupported schema version '9'; this bda_jax reads ['0.1']
        """
        def _no_constants(c):
            raise ArtifactError(f"{c} is not allowed in an audit card (use null)")

        try:
            d = json.loads(text, parse_constant=_no_constants, object_pairs_hook=unique_keys)
        except DuplicateKeyError as err:
            raise ArtifactError(f"a JSON object repeats the key {err.key!r}",
                                field=err.key) from None
        except json.JSONDecodeError as err:
            raise ArtifactError(f"not valid JSON: {err.msg} (column {err.colno})",
                                line=err.lineno) from None
        return cls.from_dict(d)

    # ------------------------------------------------------------------ files

    def write(self, path, fmt: str | None = None) -> None:
        """Write the card atomically (temp file, then ``os.replace``): ``fmt`` "json" or
        "markdown"; by default markdown for a ``.md`` path, JSON otherwise."""
        fmt = fmt or ("markdown" if os.fspath(path).endswith(".md") else "json")
        if fmt not in ("json", "markdown"):
            raise DataError(f"fmt must be 'json' or 'markdown', got {fmt!r}", field="fmt")
        text = self.to_json() if fmt == "json" else self.to_markdown()
        atomic_write(path, lambda h: h.write(text + "\n"))

    @classmethod
    def read(cls, path) -> "AuditCard":
        """Read a JSON card; errors name the file and the field."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as h:
                text = h.read()
        except (OSError, UnicodeDecodeError) as err:
            raise ArtifactError(f"cannot read audit card: {err}", file=path) from None
        try:
            return cls.from_json(text)
        except ArtifactError as err:
            raise ArtifactError(err.reason, file=path, line=err.line, field=err.field) from None

    # ------------------------------------------------------------------ Markdown

    def to_markdown(self) -> str:
        """A readable card: the protocol table, then one metric row each with its numerator,
        denominator (and unit) and interval."""
        lines = [f"# Trace-Audit Card: {md_cell(self.protocol_name)} "
                 f"{md_cell(self.protocol_version)}",
                 "", f"Schema version {self.schema_version}.", "", "## Protocol", "",
                 "| Field | Value |", "|---|---|"]
        for key, label in _LABELS:
            v = getattr(self, key)
            if key == "agent_model":
                text = ", ".join(md_cell(m) for m in v)
            elif key == "parse_rate":
                text = "n/a" if v is None else (
                    f"{fmt_value(v.value)} ({fmt_count(v.numerator)} / "
                    f"{fmt_count(v.denominator)}{' ' + md_cell(v.unit) if v.unit else ''})")
            else:
                text = "n/a" if v is None else md_cell(str(v))
            lines.append(f"| {label} | {text} |")
        level = "CI" if self.ci_level is None else f"{100 * self.ci_level:g}% CI"
        lines += ["", "## Metrics", ""]
        if self.ci_method:
            lines += [f"Intervals: {md_cell(self.ci_method)}.", ""]
        lines += [f"| Axis | Metric | Estimate | {level} | Numerator | Denominator | Note |",
                  "|---|---|---|---|---|---|---|"]
        for m in self.metrics:
            ci = "n/a" if m.ci_low is None or m.ci_high is None else \
                f"[{fmt_value(m.ci_low)}, {fmt_value(m.ci_high)}]"
            den = fmt_count(m.denominator) + (f" {md_cell(m.unit)}" if m.unit else "")
            lines.append(f"| {md_cell(m.axis or '')} | {md_cell(m.name)} | {fmt_value(m.value)} "
                         f"| {ci} | {fmt_count(m.numerator)} | {den} | {md_cell(m.note or '')} |")
        if self.notes:
            lines += ["", "## Notes", "", md_cell(self.notes)]
        return "\n".join(lines)
