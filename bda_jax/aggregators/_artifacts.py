"""Saved models: a fitted aggregator as one JSON file, plus an ``.npz`` beside it for
large arrays. No pickle anywhere: every value is written as JSON or as a plain numeric array, and
read back with ``np.load(allow_pickle=False)``.

File layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "bda_jax.model", "package_version": "0.1.0",
     "estimator": "BDA", "agents": ["A1", "A2", "A3"],
     "counts_fingerprint": "<sha256 of the training counts>",
     "hyperparameters": {...}, "fitted": {...}, "meta": {...},
     "npz": null | {"file": "model.npz", "sha256": "<hex>", "arrays": ["a0", ...]},
     "sha256": "<hex>"}

``hyperparameters`` are the constructor's settings, ``fitted`` the attributes ending in ``_``.
Values that JSON cannot hold are tagged objects with one key: ``{"__array__": {"dtype",
"shape", "data" | "npz", "jax"}}`` (arrays of at most :data:`MODEL_INLINE_LIMIT` finite elements are
inline lists, the others live in the ``.npz`` under the named key), ``{"__float__": "nan"}``,
``{"__tuple__": [...]}``, ``{"__namedtuple__": {"type", "fields"}}`` and ``{"__estimator__":
{"estimator", "hyperparameters", "fitted"}}`` (a nested aggregator, e.g. the base of a
recalibration wrapper). Only the classes in :func:`registered_classes` can be rebuilt.

``sha256`` is the SHA-256 of the canonical JSON (sorted keys, no spaces) of every other field,
and ``npz.sha256`` that of the ``.npz`` bytes, so a truncated or edited file or a swapped
``.npz`` is refused with :class:`~bda_jax.ArtifactError` naming the field. A file written by a
newer schema than this bda_jax reads is refused on ``schema_version`` before anything else.
Both files are written atomically (the ``.npz`` first, so a crash in between leaves the old JSON,
whose hash then no longer matches the new ``.npz``: refused, never silently mixed).

>>> import os, tempfile
>>> import numpy as np
>>> from bda_jax import Counts
>>> from bda_jax.aggregators import BestMember
>>> e0 = np.zeros((4, 2, 2), int); e0[:, 0, 0] = 1; e0[:, 1, 1] = 1
>>> counts = Counts.from_arrays(N=e0.sum(-1), e=e0, c=e0, gold=[0, 0, 0, 1])
>>> model = BestMember().fit(counts)
>>> path = os.path.join(tempfile.mkdtemp(), "model.json")
>>> save_model(path, model, counts_fingerprint=counts)
>>> art = load_model(path)
>>> type(art.estimator).__name__, art.agents
('BestMember', ('agent0', 'agent1'))
>>> bool((art.estimator.predict_proba(counts) == model.predict_proba(counts)).all())
True
"""
from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .._core.errors import ArtifactError, DataError
from .._core.io import atomic_write, canonical_json, read_json_file

__all__ = ["MODEL_SCHEMA_VERSION", "MODEL_KIND", "MODEL_INLINE_LIMIT", "ModelArtifact", "fingerprint_counts",
           "load_model", "model_state", "registered_classes", "save_model", "check_agents"]

MODEL_SCHEMA_VERSION = 1
MODEL_KIND = "bda_jax.model"
#: arrays with more elements than this (or with non-finite floats) go to the ``.npz``
MODEL_INLINE_LIMIT = 64
_TAGS = ("__array__", "__float__", "__tuple__", "__namedtuple__", "__estimator__")
_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")
_COUNTS_FIELDS = ("N", "e", "c", "mask", "K", "gold", "gold_missing", "cluster", "e0", "conf0")


# ----------------------------------------------------------------------------- registry

def registered_classes() -> dict[str, type]:
    """Class name -> class of every aggregator a model file may hold."""
    from ._bda import BDA, BDAConfusion, BDAPerAgent, BDAShared, BDATempered, Majority
    from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                            TemperatureScaled, VerbalizedVote)
    from ._dawid_skene import CouncilDawidSkene
    classes = (BDA, BDAConfusion, BDAPerAgent, BDAShared, BDATempered, Majority, BestMember,
               GatedVote, IsotonicRecalibrated, LogisticStacking, TemperatureScaled,
               VerbalizedVote, CouncilDawidSkene)
    return {c.__name__: c for c in classes}


#: Class names written by earlier versions -> the class that now holds the same state (model
#: files written before the rename still load; new files use the new name).
RENAMED_CLASSES = {"DawidSkene": "CouncilDawidSkene"}


def _namedtuples() -> dict[str, type]:
    from ..crowd import DSParams
    return {"DSParams": DSParams}


# ----------------------------------------------------------------------------- fingerprints

def _canonical(obj) -> bytes:
    return canonical_json(obj).encode("ascii")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint_counts(counts) -> str:
    """SHA-256 of a :class:`~bda_jax.Counts`' arrays (dtype, shape, bytes) and names (agents,
    task ids, candidates, vocab): equal training data give equal fingerprints."""
    h = hashlib.sha256(b"bda_jax.counts.v1")
    for name in _COUNTS_FIELDS:
        a = np.ascontiguousarray(np.asarray(getattr(counts, name)))
        h.update(_canonical([name, a.dtype.str, list(a.shape)]))
        h.update(a.tobytes())
    names = {"agents": counts.agents, "task_ids": counts.task_ids,
             "candidates": counts.candidates, "vocab": counts.vocab}
    h.update(_canonical({k: None if v is None else [list(x) if isinstance(x, tuple) else x
                                                    for x in v] for k, v in names.items()}))
    return h.hexdigest()


# ----------------------------------------------------------------------------- state

def _is_estimator(value) -> bool:
    from ._base import Aggregator
    return isinstance(value, Aggregator)


def model_state(estimator) -> dict:
    """The plain state of a fitted (or unfitted) aggregator: ``{"estimator": class name,
    "hyperparameters": {...}, "fitted": {...}}`` (values still numpy / jax objects).
    Raises :class:`~bda_jax.DataError` for a class :func:`load_model` could not rebuild."""
    name = type(estimator).__name__
    if registered_classes().get(name) is not type(estimator):
        raise DataError(f"cannot save a {name}: not one of {sorted(registered_classes())}",
                        field="estimator")
    hyper, fitted = {}, {}
    for key, value in vars(estimator).items():
        if key.startswith("_"):
            continue
        (fitted if key.endswith("_") else hyper)[key] = value
    return {"estimator": name, "hyperparameters": hyper, "fitted": fitted}


class _Encoder:
    """Turns a state into JSON values, moving large or non-finite arrays to ``self.arrays``."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def encode(self, value, where: str):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (np.generic, np.ndarray)) or _is_jax(value):
            return self._array(value, where)          # numpy scalars too: exact dtype kept
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else {"__float__": repr(value)}
        if _is_estimator(value):
            state = model_state(value)
            return {"__estimator__": {
                "estimator": state["estimator"],
                "hyperparameters": self.encode(state["hyperparameters"], where + ".hyperparameters"),
                "fitted": self.encode(state["fitted"], where + ".fitted")}}
        if isinstance(value, tuple) and type(value).__name__ in _namedtuples() and \
                type(value) is _namedtuples()[type(value).__name__]:
            return {"__namedtuple__": {"type": type(value).__name__, "fields": {
                k: self.encode(v, f"{where}.{k}") for k, v in value._asdict().items()}}}
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if not isinstance(k, str) or k in _TAGS:
                    raise DataError(f"cannot save the key {k!r} (keys must be strings and not "
                                    f"{_TAGS})", field=where)
                out[k] = self.encode(v, f"{where}.{k}")
            return out
        raise DataError(f"cannot save a value of type {type(value).__name__}", field=where)

    def _array(self, value, where):
        is_jax = _is_jax(value)
        a = np.asarray(value)
        if a.dtype.name not in _DTYPES:
            raise DataError(f"cannot save an array of dtype {a.dtype}", field=where)
        spec = {"dtype": a.dtype.name, "shape": list(a.shape), "jax": is_jax}
        finite = a.dtype.kind != "f" or bool(np.isfinite(a).all())
        if a.size <= MODEL_INLINE_LIMIT and finite:
            spec["data"] = a.ravel().tolist()
        else:
            key = f"a{len(self.arrays)}"
            self.arrays[key] = np.ascontiguousarray(a)
            spec["npz"] = key
        return {"__array__": spec}


def _is_jax(value) -> bool:
    try:
        import jax
    except ImportError:          # pragma: no cover
        return False
    return isinstance(value, jax.Array)


# ----------------------------------------------------------------------------- saving

def _npz_path(path: str) -> str:
    root, ext = os.path.splitext(path)
    return (root if ext.lower() == ".json" else path) + ".npz"


def _write_bytes(path: str, data: bytes) -> None:
    atomic_write(path, lambda handle: handle.write(data), suffix=".npz", binary=True)


def save_model(path, estimator_or_state, *, counts_fingerprint, meta: Mapping | None = None
               ) -> None:
    """Write a fitted aggregator (or a :func:`model_state` dict) to ``path`` (JSON; large arrays
    go to ``<path without .json>.npz`` beside it). Both writes are atomic.

    ``counts_fingerprint``: the training data's fingerprint, a string, or the training
    :class:`~bda_jax.Counts` (fingerprinted with :func:`fingerprint_counts`), or None.
    ``meta``: free JSON-serializable information kept verbatim (e.g. the arm name, the training
    file). Raises :class:`~bda_jax.DataError` for a value that cannot be saved.
    """
    path = os.fspath(path)
    state = estimator_or_state if isinstance(estimator_or_state, Mapping) else \
        model_state(estimator_or_state)
    if not {"estimator", "hyperparameters", "fitted"} <= set(state):
        raise DataError("a model state needs 'estimator', 'hyperparameters' and 'fitted'",
                        field="state")
    if state["estimator"] not in registered_classes():
        raise DataError(f"unknown estimator {state['estimator']!r}", field="estimator")
    if counts_fingerprint is not None and not isinstance(counts_fingerprint, str):
        counts_fingerprint = fingerprint_counts(counts_fingerprint)
    agents = state["fitted"].get("agents_")
    enc = _Encoder()
    doc = {"schema_version": MODEL_SCHEMA_VERSION, "kind": MODEL_KIND, "package_version": _version(),
           "estimator": state["estimator"],
           "agents": None if agents is None else [str(a) for a in agents],
           "counts_fingerprint": counts_fingerprint,
           "hyperparameters": enc.encode(dict(state["hyperparameters"]), "hyperparameters"),
           "fitted": enc.encode(dict(state["fitted"]), "fitted")}
    try:
        doc["meta"] = json.loads(json.dumps(dict(meta or {}), allow_nan=False))
    except (TypeError, ValueError) as err:
        raise DataError(f"meta must be JSON-serializable without NaN: {err}",
                        field="meta") from None
    if enc.arrays:
        buf = io.BytesIO()
        np.savez_compressed(buf, **enc.arrays)
        data = buf.getvalue()
        npz = _npz_path(path)
        doc["npz"] = {"file": os.path.basename(npz), "sha256": _sha256(data),
                      "arrays": sorted(enc.arrays)}
        _write_bytes(npz, data)
    else:
        doc["npz"] = None
    doc["sha256"] = _sha256(_canonical(doc))
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    atomic_write(path, lambda h: h.write(text), suffix=".json")


def _version() -> str:
    from .._core.version import __version__
    return __version__


# ----------------------------------------------------------------------------- loading

@dataclass(frozen=True)
class ModelArtifact:
    """What :func:`load_model` returns: the rebuilt ``estimator`` and the file's metadata."""

    estimator: Any
    agents: tuple[str, ...] | None
    counts_fingerprint: str | None
    package_version: str
    schema_version: int
    path: str
    meta: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return type(self.estimator).__name__


class _Decoder:
    def __init__(self, path: str, arrays: Mapping[str, np.ndarray]):
        self.path, self.arrays, self.used = path, arrays, set()

    def error(self, reason, where):
        return ArtifactError(reason, file=self.path, field=where)

    def decode(self, value, where: str):
        if value is None or isinstance(value, (bool, str, int, float)):
            return value
        if isinstance(value, list):
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            raise self.error(f"unexpected JSON value of type {type(value).__name__}", where)
        tag = next((t for t in _TAGS if t in value), None)
        if tag is None:
            return {k: self.decode(v, f"{where}.{k}") for k, v in value.items()}
        if len(value) != 1:
            raise self.error(f"a {tag} object must have no other key", where)
        body = value[tag]
        if tag == "__float__":
            if body not in ("nan", "inf", "-inf"):
                raise self.error(f"bad special float {body!r}", where)
            return float(body)
        if tag == "__tuple__":
            if not isinstance(body, list):
                raise self.error("__tuple__ must hold a list", where)
            return tuple(self.decode(v, f"{where}[{i}]") for i, v in enumerate(body))
        if tag == "__array__":
            return self._array(body, where)
        if tag == "__namedtuple__":
            if not isinstance(body, dict) or body.get("type") not in _namedtuples() or \
                    not isinstance(body.get("fields"), dict):
                raise self.error("unknown or malformed named tuple", where)
            cls = _namedtuples()[body["type"]]
            fields_ = {k: self.decode(v, f"{where}.{k}") for k, v in body["fields"].items()}
            if set(fields_) != set(cls._fields):
                raise self.error(f"{body['type']} needs the fields {list(cls._fields)}", where)
            return cls(**fields_)
        # __estimator__
        if not isinstance(body, dict):
            raise self.error("__estimator__ must hold an object", where)
        return self.estimator(body, where)

    def _array(self, spec, where):
        if not isinstance(spec, dict) or spec.get("dtype") not in _DTYPES or \
                not isinstance(spec.get("shape"), list) or \
                not all(isinstance(s, int) and s >= 0 for s in spec["shape"]):
            raise self.error("malformed array (dtype, shape)", where)
        shape = tuple(spec["shape"])
        if "data" in spec:
            try:
                a = np.asarray(spec["data"], dtype=spec["dtype"]).reshape(shape)
            except (TypeError, ValueError) as err:
                raise self.error(f"inline array data does not fit: {err}", where) from None
        elif "npz" in spec:
            key = spec["npz"]
            if key not in self.arrays:
                raise self.error(f"array {key!r} is missing from the .npz", where)
            a = self.arrays[key]
            self.used.add(key)
            if a.dtype.name != spec["dtype"] or a.shape != shape:
                raise self.error(f".npz array {key!r} is {a.dtype.name}{list(a.shape)}, the "
                                 f"model says {spec['dtype']}{list(shape)}", where)
        else:
            raise self.error("array without data or npz key", where)
        if spec.get("jax"):
            import jax.numpy as jnp
            return jnp.asarray(a)
        return a[()] if shape == () else a

    def estimator(self, body, where):
        name = body.get("estimator")
        name = RENAMED_CLASSES.get(name, name) if isinstance(name, str) else name
        classes = registered_classes()
        if name not in classes:
            raise self.error(f"unknown estimator {name!r}; this bda_jax rebuilds "
                             f"{sorted(classes)}", where + ".estimator")
        hyper = body.get("hyperparameters")
        fitted = body.get("fitted")
        if not isinstance(hyper, dict) or not isinstance(fitted, dict):
            raise self.error("hyperparameters and fitted must be objects", where)
        hyper = self.decode(hyper, where + ".hyperparameters")
        fitted = self.decode(fitted, where + ".fitted")
        return _rebuild(classes[name], hyper, fitted, self, where)


def _rebuild(cls, hyper: dict, fitted: dict, dec: _Decoder, where: str):
    """A new ``cls`` built through its constructor (which validates the settings), then given
    the stored attributes exactly."""
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self"]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        # the per-arm BDA classes: __init__(**kwargs) forwards to BDA(arm, **kwargs)
        from ._bda import BDA
        fixed = cls().arm if issubclass(cls, BDA) else None
        if fixed is not None and hyper.get("arm", fixed) != fixed:
            raise dec.error(f"{cls.__name__} has arm {fixed!r}, the file says "
                            f"{hyper.get('arm')!r}", where + ".hyperparameters.arm")
        params = [p for p in inspect.signature(BDA.__init__).parameters.values()
                  if p.name not in ("self", "arm")]
    names = {p.name for p in params}
    kwargs = {k: v for k, v in hyper.items() if k in names}
    try:
        obj = cls(**kwargs)
    except (DataError, TypeError, ValueError) as err:
        raise dec.error(f"invalid hyperparameters for {cls.__name__}: "
                        f"{getattr(err, 'reason', err)}", where + ".hyperparameters") from None
    unknown = sorted(set(hyper) - set(vars(obj)))
    if unknown:
        raise dec.error(f"unknown hyperparameter(s) {unknown} for {cls.__name__}",
                        where + ".hyperparameters")
    bad = sorted(k for k in fitted if not k.endswith("_") or k.startswith("_"))
    if bad:
        raise dec.error(f"fitted attribute names must end in '_': {bad}", where + ".fitted")
    vars(obj).update(hyper)
    vars(obj).update(fitted)
    return obj


def _read_json(path: str) -> dict:
    doc = read_json_file(path, ArtifactError, "the model file")
    if not isinstance(doc, dict):
        raise ArtifactError("a model file must hold a JSON object", file=path)
    return doc


def load_model(path) -> ModelArtifact:
    """Read a model written by :func:`save_model` and rebuild its estimator.

    Checks, in order: the file is complete JSON (a truncated file is refused), ``kind``, a
    ``schema_version`` this bda_jax reads (a newer one is refused naming that field), the
    ``sha256`` of the content, the ``.npz``'s presence and ``sha256`` and its arrays (read with
    ``allow_pickle=False``), then the estimator's class and settings (its constructor validates
    them). Every refusal is an :class:`~bda_jax.ArtifactError` naming the file and field.
    """
    path = os.fspath(path)
    doc = _read_json(path)
    err = lambda reason, fld: ArtifactError(reason, file=path, field=fld)
    if doc.get("kind") != MODEL_KIND:
        raise err(f"not a bda_jax model file (kind {doc.get('kind')!r}, expected {MODEL_KIND!r})",
                  "kind")
    version = doc.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise err(f"schema_version must be a positive integer, got {version!r}",
                  "schema_version")
    if version > MODEL_SCHEMA_VERSION:
        raise err(f"schema_version {version} is newer than this bda_jax reads (up to "
                  f"{MODEL_SCHEMA_VERSION}); upgrade bda_jax (file written by bda_jax "
                  f"{doc.get('package_version')!r})", "schema_version")
    expected = doc.get("sha256")
    body = {k: v for k, v in doc.items() if k != "sha256"}
    try:
        actual = _sha256(_canonical(body))
    except ValueError:                       # NaN / Infinity literals: never written by us
        actual = None
    if not isinstance(expected, str) or actual != expected:
        raise err("content does not match its sha256: the file was modified or damaged",
                  "sha256")
    for key in ("estimator", "hyperparameters", "fitted"):
        if key not in doc:
            raise err(f"missing {key!r}", key)
    arrays: dict[str, np.ndarray] = {}
    npz = doc.get("npz")
    if npz is not None:
        arrays = _read_npz(path, npz)
    dec = _Decoder(path, arrays)
    estimator = dec.estimator({k: doc[k] for k in ("estimator", "hyperparameters", "fitted")},
                              "estimator")
    unused = sorted(set(arrays) - dec.used)
    if unused:
        raise err(f".npz holds arrays the model does not use: {unused}", "npz.arrays")
    agents = doc.get("agents")
    if agents is not None and (not isinstance(agents, list) or
                               not all(isinstance(a, str) for a in agents)):
        raise err("agents must be a list of strings", "agents")
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise err("meta must be an object", "meta")
    fp = doc.get("counts_fingerprint")
    if fp is not None and not isinstance(fp, str):
        raise err("counts_fingerprint must be a string", "counts_fingerprint")
    return ModelArtifact(estimator, None if agents is None else tuple(agents), fp,
                         str(doc.get("package_version")), version, path, meta)


def _read_npz(path: str, npz) -> dict[str, np.ndarray]:
    err = lambda reason, fld: ArtifactError(reason, file=path, field=fld)
    if not isinstance(npz, dict) or not isinstance(npz.get("file"), str) or \
            not isinstance(npz.get("sha256"), str):
        raise err("npz must be null or {file, sha256, arrays}", "npz")
    name = npz["file"]
    if not name or os.path.basename(name) != name or name in (".", ".."):
        raise err(f"npz file name {name!r} must be a bare file name", "npz.file")
    npz_path = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    try:
        with open(npz_path, "rb") as handle:
            data = handle.read()
    except OSError as e:
        raise err(f"cannot read the array file {npz_path}: {e.strerror}", "npz.file") from None
    if _sha256(data) != npz["sha256"]:
        raise err(f"{name} does not match its sha256: the array file was modified, damaged or "
                  "belongs to another save", "npz.sha256")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:     # zipfile / format errors: a damaged file whose hash we wrote
        raise err(f"cannot read {name}: {e}", "npz") from None
    listed = npz.get("arrays")
    if listed is not None and sorted(arrays) != sorted(listed):
        raise err(f"{name} holds {sorted(arrays)}, the model lists {listed}", "npz.arrays")
    return arrays


# ----------------------------------------------------------------------------- checks

def check_agents(artifact: ModelArtifact, agents, *, file=None, allow_missing: bool = False
                 ) -> None:
    """Refuse data whose agents differ from the model's: an agent the model never saw always
    raises :class:`~bda_jax.DataError` (field ``agents``); a model agent absent from the data
    raises unless ``allow_missing`` (its seat then contributes no evidence)."""
    if artifact.agents is None:
        return
    model = list(artifact.agents)
    seen = list(dict.fromkeys(agents))
    unknown = [a for a in seen if a not in model]
    if unknown:
        raise DataError(f"agent(s) {unknown} are not in the model's agent list {model}",
                        file=file, field="agents")
    missing = [a for a in model if a not in seen]
    if missing and not allow_missing:
        raise DataError(f"the model's agent(s) {missing} do not appear in the data (pass "
                        "--allow-missing-agents to predict without them)", file=file,
                        field="agents")
