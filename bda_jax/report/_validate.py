"""The schemas of the two results files :func:`~bda_jax.report.render_report` draws, checked
whole before anything is drawn: the ``results.json`` of ``bda demo`` (kind
:data:`RESULTS_KIND`) and the document of ``bda evaluate --out`` (kind ``"bda_jax.evaluation"``).

Guarantee: a results file that passes :func:`validate_results` renders without an exception, and
one that does not is refused with one :class:`~bda_jax.ArtifactError` naming the offending field
by its path in the file (``datasets.council.arms[2].row.accuracy``, ``dose_response.p_grid[1]``).
Every field the report reads is checked for its type (a number where a number is drawn: finite,
never NaN or a string; a list where a list is walked; an object where keys are read) and for the
agreement the report relies on (a per-agent column has one entry per agent, the reliability
bins have one entry per bin). Fields the report does not read are free (a newer writer may add
some).

>>> validate_results({"schema_version": 1, "kind": RESULTS_KIND, "config": {},
...                   "datasets": {"toy": {"arms": [{"arm": "majority",
...                                                  "row": {"accuracy": "0.8"}}]}}})
Traceback (most recent call last):
...
bda_jax._core.errors.ArtifactError: field 'datasets.toy.arms[0].row.accuracy': expected a finite number or null, got string
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping

from .._core.errors import ArtifactError
from ._evaluation import EVALUATION_KIND

__all__ = ["SCHEMA_VERSION", "RESULTS_KIND", "validate_results", "validate_evaluation"]

#: ``schema_version`` of the demo's ``results.json`` this bda_jax writes and reads
SCHEMA_VERSION = 1
#: ``kind`` of the demo's ``results.json``
RESULTS_KIND = "bda_jax.demo_results"
_EVALUATION_VERSION = 1


class _Fail:
    def __init__(self, file):
        self.file = None if file is None else str(file)

    def __call__(self, reason: str, where: str) -> ArtifactError:
        return ArtifactError(reason, file=self.file, field=where or "results")


# --------------------------------------------------------------------------- the schema language

class _Spec(ABC):
    null = False
    what = "a value"

    def check(self, value, where: str, fail: _Fail) -> None:
        if value is None:
            if not self.null:
                raise fail(f"expected {self.what}, got null", where)
            return
        self.check_value(value, where, fail)

    @abstractmethod
    def check_value(self, value, where, fail):
        """Check a non-null ``value`` at ``where``; raise ``fail(reason, where)``."""


def _type_name(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "bool"}.get(
        type(value), type(value).__name__)


class _Scalar(_Spec):
    """``kind``: "num" (finite int or float, never bool), "int" (int, never bool), "str", "bool",
    "scalar" (any of them), "any" (any JSON value)."""

    def __init__(self, kind: str, null: bool = False, lo: float | None = None):
        self.kind, self.null, self.lo = kind, null, lo
        names = {"num": "a finite number", "int": "an integer", "str": "a string",
                 "bool": "true or false", "scalar": "a string, number or bool",
                 "any": "a value"}
        self.what = names[kind] + (" or null" if null else "")
        if lo is not None:
            self.what += f" (>= {lo:g})"

    def check_value(self, value, where, fail):
        k = self.kind
        if k == "any":
            return
        ok = {"num": _is_finite_number, "int": _is_int, "str": lambda v: isinstance(v, str),
              "bool": lambda v: isinstance(v, bool),
              "scalar": lambda v: isinstance(v, (str, bool)) or _is_finite_number(v)}[k](value)
        if not ok:
            got = _type_name(value)
            if k in ("num", "scalar") and isinstance(value, float):
                got = repr(value)                                   # nan, inf
            elif k in ("num", "scalar") and _is_int(value):
                got = "an integer too large for a float"
            raise fail(f"expected {self.what}, got {got}", where)
        if self.lo is not None and value < self.lo:
            raise fail(f"expected {self.what}, got {value!r}", where)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_finite_number(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:                       # an int beyond any float
        return False


class _List(_Spec):
    def __init__(self, item: _Spec, null: bool = False, length: int | None = None,
                 min_length: int = 0):
        self.item, self.null, self.length, self.min_length = item, null, length, min_length
        self.what = "a list" + (" or null" if null else "")

    def check_value(self, value, where, fail):
        if not isinstance(value, list):
            raise fail(f"expected {self.what}, got {_type_name(value)}", where)
        if self.length is not None and len(value) != self.length:
            raise fail(f"expected a list of {self.length} entries, got {len(value)}", where)
        if len(value) < self.min_length:
            raise fail(f"expected at least {self.min_length} entries, got {len(value)}", where)
        for i, v in enumerate(value):
            self.item.check(v, f"{where}[{i}]", fail)


class _Map(_Spec):
    """An object whose every value has one spec (keys are free: names, arms, seats)."""

    def __init__(self, value: _Spec, null: bool = False):
        self.value, self.null = value, null
        self.what = "an object" + (" or null" if null else "")

    def check_value(self, value, where, fail):
        if not isinstance(value, dict):
            raise fail(f"expected {self.what}, got {_type_name(value)}", where)
        for k, v in value.items():
            self.value.check(v, f"{where}.{k}" if where else k, fail)


class _Obj(_Spec):
    """An object with ``required`` and ``optional`` keys (other keys are free), and an ``after``
    check of the whole object (cross-field agreement)."""

    def __init__(self, required: Mapping[str, _Spec] | None = None,
                 optional: Mapping[str, _Spec] | None = None, null: bool = False,
                 after: Callable[[dict, str, _Fail], None] | None = None):
        self.required, self.optional = dict(required or {}), dict(optional or {})
        self.null, self.after = null, after
        self.what = "an object" + (" or null" if null else "")

    def check_value(self, value, where, fail):
        if not isinstance(value, dict):
            raise fail(f"expected {self.what}, got {_type_name(value)}", where)
        for key, spec in {**self.required, **self.optional}.items():
            at = f"{where}.{key}" if where else key
            if key not in value:
                if key in self.required:
                    raise fail("missing", at)
                continue
            spec.check(value[key], at, fail)
        if self.after is not None:
            self.after(value, where, fail)


NUM, NUM_NULL = _Scalar("num"), _Scalar("num", null=True)
INT_NULL = _Scalar("int", null=True, lo=0)
STR, STR_NULL = _Scalar("str"), _Scalar("str", null=True)
BOOL_NULL = _Scalar("bool", null=True)
SCALAR = _Scalar("scalar", null=True)
ANY = _Scalar("any", null=True)
NUMS = _List(NUM_NULL)


def _same_length(*keys: str, like: str):
    """Every list in ``keys`` that is present (and not null) has as many entries as ``like``."""
    def after(obj, where, fail):
        n = len(obj.get(like) or [])
        for key in keys:
            if obj.get(key) is not None and len(obj[key]) != n:
                raise fail(f"has {len(obj[key])} entries for {n} {like}", f"{where}.{key}")
    return after


# --------------------------------------------------------------------------- the demo's results

_METRIC_ROW = {"nll": NUM_NULL, "auroc": NUM_NULL, "ece_em": NUM_NULL, "brier": NUM_NULL,
               "n": INT_NULL, "arm": STR}
ROW = _Obj({"accuracy": NUM_NULL, "ece_ew": NUM_NULL, "brier_mc": NUM_NULL}, _METRIC_ROW)
DELTA = _Obj(optional={"delta": NUM_NULL, "ci_low": NUM_NULL, "ci_high": NUM_NULL,
                       "p_win": NUM_NULL, "n_resamples": INT_NULL, "n_units": INT_NULL},
             null=True)
VS_REFERENCE = _Map(DELTA, null=True)             # metric -> paired bootstrap
SELECTED = _List(_Map(SCALAR, null=True), null=True)  # one row of hyperparameters per outer fold
PAIR = _List(NUM_NULL, null=True, length=2)
CI = _Obj(optional={"accuracy": PAIR, "ece_ew": PAIR, "brier_mc": PAIR,
                    "n_resamples": INT_NULL, "n_units": INT_NULL,
                    "method": _Map(SCALAR, null=True)}, null=True)
CALIBRATION = _Obj(optional={"n": INT_NULL, "min": NUM_NULL, "max": NUM_NULL,
                             "spread": NUM_NULL, "sd": NUM_NULL,
                             "constant_confidence": BOOL_NULL}, null=True)
BINS = _Obj(optional={"count": _List(NUM_NULL, null=True),
                      "confidence": _List(NUM_NULL, null=True),
                      "accuracy": _List(NUM_NULL, null=True)}, null=True,
            after=_same_length("count", "confidence", like="accuracy"))
ARM = _Obj({"arm": STR, "row": ROW},
           {"ci": CI, "vs_reference": VS_REFERENCE, "selected": SELECTED, "bins": BINS,
            "calibration": CALIBRATION, "not_ranked": STR_NULL})
WEIGHTS = _Obj({"agents": _List(STR), "weight": NUMS, "reliability": NUMS},
               {"prior_mean": _List(NUM_NULL, null=True), "n_moves": _List(NUM_NULL, null=True),
                "K": INT_NULL, "chance": NUM_NULL, "hyperparameters": _Map(SCALAR, null=True),
                "hyperparameters_from": SCALAR, "adversaries": _List(STR, null=True)},
               null=True,
               after=_same_length("weight", "reliability", "prior_mean", "n_moves",
                                  like="agents"))
SETUP = _Obj(optional={"adversaries": _Map(NUM_NULL, null=True),
                       "reliabilities": _List(NUM_NULL, null=True),
                       "n_questions": SCALAR, "seeds_per_question": SCALAR}, null=True)
COALITION = _Obj(optional={"compliance": NUM_NULL, "genuine_flip_rate": NUM_NULL,
                           "effective_corrupted_fraction": NUM_NULL,
                           "nominal_fraction": NUM_NULL, "attacked_tasks": SCALAR}, null=True)
DATASET = _Obj({"arms": _List(ARM)},
               {"name": SCALAR, "title": SCALAR, "n_tasks": INT_NULL, "n_labeled": INT_NULL,
                "n_agents": INT_NULL, "K": INT_NULL, "folds": INT_NULL, "source": SCALAR,
                "reference": STR, "setup": SETUP, "coalition": COALITION, "weights": WEIGHTS,
                "n_labels": INT_NULL, "stated_confidences": INT_NULL})
DOSE = _Obj({"rows": _List(_Obj({"regime": STR, "arm": STR, "p_wrong": NUM},
                                {"accuracy": NUM_NULL, "ece_ew": NUM_NULL, "brier_mc": NUM_NULL,
                                 "redirect_rate": NUM_NULL, "n": INT_NULL, "mode": SCALAR,
                                 "k": SCALAR}))},
            {"arms": _List(STR, null=True), "p_grid": _List(NUM, null=True),
             "regimes": _List(STR, null=True), "n_tasks": SCALAR, "setup": SCALAR}, null=True)
SLEEPER = _Obj({"table": _List(_Obj({"f": NUM, "arm": STR},
                                    {"accuracy": NUM_NULL, "ece_ew": NUM_NULL,
                                     "brier_mc": NUM_NULL, "drift": NUM_NULL, "floor": NUM_NULL,
                                     "drift_ratio": NUM_NULL, "alarm": BOOL_NULL}))},
               {"arms": _List(STR, null=True), "f_grid": _List(NUM, null=True),
                "factor": NUM_NULL, "reliabilities": _List(NUM_NULL, null=True),
                "compliance": NUM_NULL, "setup": SCALAR, "n_tasks": ANY,
                "monitor": _List(_Obj({"f": NUM},
                                      {"agents": _List(STR, null=True),
                                       "ratio": _List(NUM_NULL, null=True),
                                       "alarm": _List(BOOL_NULL, null=True)},
                                      after=_same_length("ratio", "alarm", like="agents")),
                                 null=True)}, null=True)
PART = _Obj(optional={"n": SCALAR, "correct": SCALAR, "accuracy": NUM_NULL}, null=True)
PARTITION = _Map(PART, null=True)
GAP = _Obj(optional={"gap": NUM_NULL, "low": NUM_NULL, "high": NUM_NULL, "coverage": NUM_NULL,
                     "error": SCALAR}, null=True)
RECORD = _Obj(optional={"idx": SCALAR, "commit": STR_NULL, "answer": SCALAR, "gold": SCALAR,
                        "correct": BOOL_NULL, "steps": SCALAR, "final_x": NUM_NULL,
                        "g": _List(NUM_NULL, null=True), "x": _List(NUM_NULL, null=True),
                        "winner": _List(SCALAR, null=True)})
REPLAY = _Obj({"records": _List(RECORD), "partition": _Map(PART)},
              {"empty_g": SCALAR, "routing_gap": GAP})
RESIMULATE = _Obj(optional={"empty_g": SCALAR,
                            "rows": _List(_Obj(optional={"W": NUM_NULL, "mean_steps": NUM_NULL,
                                                         "partition": PARTITION,
                                                         "routing_gap": GAP}), null=True)},
                  null=True)
EXCERPT = _Obj({"replays": _List(REPLAY)},
               {"name": SCALAR, "title": SCALAR, "benchmark": SCALAR, "file": SCALAR,
                "n_gold": SCALAR, "settings": _Obj(optional={"W": NUM_NULL}, null=True),
                "resimulate": RESIMULATE})
DASE = _Obj({"excerpts": _List(EXCERPT)},
            {"trajectories": INT_NULL, "source": SCALAR}, null=True)
RESULTS = _Obj({"config": _Map(ANY), "datasets": _Map(DATASET)},
               {"bda_jax_version": SCALAR, "created": SCALAR,
                "environment": _Map(ANY, null=True),
                "cache": _Obj(optional={"file": SCALAR, "loaded": SCALAR, "computed": SCALAR,
                                        "total": SCALAR, "reset": SCALAR}, null=True),
                "timings_s": _Map(ANY, null=True),
                "dose_response": DOSE, "sleeper": SLEEPER, "dase": DASE})


def _version_and_kind(doc, kinds: tuple[str, ...], versions: tuple[int, int], what: str,
                      fail: _Fail, version_required: bool = True) -> None:
    if not isinstance(doc, dict):
        raise fail(f"{what} must be a JSON object, got {_type_name(doc)}", "results")
    if "schema_version" not in doc:
        if version_required:
            raise fail("missing", "schema_version")
    else:
        _check_version(doc["schema_version"], versions, fail)
    if "kind" not in doc:
        raise fail("missing", "kind")
    kind = doc["kind"]
    if not isinstance(kind, str):
        raise fail(f"expected a string, got {_type_name(kind)}", "kind")
    if kind not in kinds:
        raise fail(f"not {what} (kind {kind!r}, expected {' or '.join(map(repr, kinds))})",
                   "kind")


def _check_version(version, versions: tuple[int, int], fail: _Fail) -> None:
    if not _is_int(version):
        raise fail(f"expected an integer, got {_type_name(version)}", "schema_version")
    if not versions[0] <= version <= versions[1]:
        raise fail(f"schema_version {version!r} is not readable by this bda_jax "
                   f"(reads {versions[0]}..{versions[1]})", "schema_version")


def validate_results(results: Any, file=None) -> dict:
    """Check a whole demo results document (what :func:`~bda_jax.report.run_demo` returns and
    ``results.json`` holds; also what :func:`~bda_jax.report.evaluation_as_report` makes of an
    evaluation); return it unchanged.

    Checks ``schema_version`` (1..:data:`SCHEMA_VERSION`) and ``kind`` first, then every field
    the report reads. Raises :class:`~bda_jax.ArtifactError` naming ``file`` and the first
    offending field, e.g. ``datasets.council.arms[2].row.accuracy``.

    >>> validate_results({"schema_version": 99, "kind": "bda_jax.demo_results"})
    Traceback (most recent call last):
    ...
    bda_jax._core.errors.ArtifactError: field 'schema_version': schema_version 99 is not readable by this bda_jax (reads 1..1)
    """
    fail = _Fail(file)
    _version_and_kind(results, (RESULTS_KIND,), (1, SCHEMA_VERSION), "demo results", fail)
    RESULTS.check(results, "", fail)
    return results


EVALUATION_ROW = _Obj({"arm": STR, "accuracy": NUM_NULL, "ece_ew": NUM_NULL, "brier_mc": NUM_NULL},
                      _METRIC_ROW)
EVALUATION = _Obj(
    {"table": _List(EVALUATION_ROW, min_length=1)},
    {"package_version": SCALAR, "traces": STR_NULL, "n_tasks": INT_NULL, "n_labeled": INT_NULL,
     "agents": _List(STR, null=True), "K_max": INT_NULL, "arms": _List(STR, null=True),
     "reference": STR, "label_budget": INT_NULL, "seed": _Scalar("int", null=True),
     "n_folds": INT_NULL, "n_resamples": INT_NULL,
     "bootstrap": _Map(VS_REFERENCE, null=True), "selected": _Map(SELECTED, null=True),
     "methods": _Map(ANY, null=True), "calibration": _Map(CALIBRATION, null=True),
     "folds": _List(_Scalar("int"), null=True),
     "cells": _Obj(optional={"cache": STR_NULL, "loaded": INT_NULL, "computed": INT_NULL},
                   null=True)})


def validate_evaluation(doc: Any, file=None) -> dict:
    """Check a whole ``bda evaluate --out`` document (kind ``"bda_jax.evaluation"``, what
    :func:`~bda_jax.report.evaluation_results` returns); return it unchanged.

    ``table`` must be a non-empty list of metric rows (``arm`` a string; ``accuracy``,
    ``ece_ew``, ``brier_mc`` finite numbers or null); ``bootstrap`` maps arms to paired
    bootstraps, ``selected`` arms to one row of hyperparameters per outer fold, and the sizes are
    non-negative integers. Raises :class:`~bda_jax.ArtifactError` naming ``file`` and the first
    offending field, e.g. ``table[1].accuracy``.
    """
    fail = _Fail(file)
    _version_and_kind(doc, (EVALUATION_KIND,), (1, _EVALUATION_VERSION), "evaluation results",
                      fail, version_required=False)
    EVALUATION.check(doc, "", fail)
    if "schema_version" not in doc:
        raise fail("missing", "schema_version")
    return doc
