"""Saved models: a fitted aggregator as one JSON file, plus an ``.npz`` beside it for
large arrays. No pickle anywhere: every value is written as JSON or as a plain numeric array, and
read back from the ``.npz``'s array headers and raw bytes, never through pickle.

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
and ``npz.sha256`` that of the ``.npz`` bytes, so a truncated or damaged file or a swapped
``.npz`` is refused with :class:`~bda_jax.ArtifactError` naming the field. The checksums detect
*damage*, not *tampering*: anyone who edits a file can recompute them. What protects a reader
from an edited (or hostile) file is the validation on load, which never trusts the checksums:

* both files must be regular files (a FIFO, a device or a folder is refused without reading it;
  a symlink is resolved and its target checked) of at most :data:`MODEL_JSON_MAX_BYTES` /
  :data:`MODEL_NPZ_MAX_BYTES` bytes;
* the ``.npz`` is opened as a zip and every member is checked *before any array data is
  decompressed*: its name is one the JSON declares, its declared size is within
  :data:`MODEL_NPZ_MAX_BYTES` (a zip bomb is refused on its header), its array header (read with
  ``numpy.lib.format.read_magic`` and ``read_array_header_1_0`` / ``_2_0``) has a plain numeric
  dtype (never an object dtype: nothing is unpickled) and the dtype and shape the JSON declares;
* every setting goes through the estimator's constructor again, and every fitted attribute is
  checked for its type, shape and range (probabilities in [0, 1], finite floats, positive
  strengths and temperatures, one agent list of unique non-empty strings that agrees with the
  JSON's ``agents`` and with every per-agent array, ...).

A file written by a newer schema than this bda_jax reads is refused on ``schema_version`` before
anything else. Saving writes both files to temporary files first and renames them into place,
the ``.npz`` first; a crash between the two renames leaves the old JSON, whose hash then no
longer matches the new ``.npz``: refused, never silently mixed. Saving never overwrites an
``.npz`` that the JSON file being replaced does not own (:func:`check_model_out`).

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
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .._core.checks import is_int
from .._core.errors import ArtifactError, DataError
from .._core.io import canonical_json, read_json_file

__all__ = ["MODEL_SCHEMA_VERSION", "MODEL_KIND", "MODEL_INLINE_LIMIT", "MODEL_JSON_MAX_BYTES",
           "MODEL_NPZ_MAX_BYTES", "ModelArtifact", "fingerprint_counts", "load_model",
           "model_state", "registered_classes", "save_model", "check_agents", "check_model_out"]

MODEL_SCHEMA_VERSION = 1
MODEL_KIND = "bda_jax.model"
#: arrays with more elements than this (or with non-finite floats) go to the ``.npz``
MODEL_INLINE_LIMIT = 64
#: the largest model JSON file :func:`load_model` reads (bytes)
MODEL_JSON_MAX_BYTES = 64 * 2 ** 20
#: the largest ``.npz`` :func:`load_model` reads, and the most bytes its arrays may declare
#: uncompressed, all members together (checked on the zip headers, before decompressing)
MODEL_NPZ_MAX_BYTES = 2 ** 30
_MAX_DEPTH = 64            # nesting of tagged values a model file may use
_MAX_NDIM = 32
_TAGS = ("__array__", "__float__", "__tuple__", "__namedtuple__", "__estimator__")
_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")
_COUNTS_FIELDS = ("N", "e", "c", "mask", "K", "gold", "gold_missing", "cluster", "e0", "conf0")


# ----------------------------------------------------------------------------- registry

def registered_classes() -> dict[str, type]:
    """Class name -> class of every aggregator a model file may hold."""
    from ._bda import BDA, BDAAuto, BDAConfusion, BDAPerAgent, BDAShared, BDATempered, Majority
    from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                            TemperatureScaled, VerbalizedVote)
    from ._dawid_skene import CouncilDawidSkene
    classes = (BDA, BDAAuto, BDAConfusion, BDAPerAgent, BDAShared, BDATempered, Majority,
               BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking, TemperatureScaled,
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


# ----------------------------------------------------------------------------- files

def _npz_path(path: str) -> str:
    root, ext = os.path.splitext(path)
    return (root if ext.lower() == ".json" else path) + ".npz"


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _shown(path: str) -> str:
    """``path``, and where it leads when it is (or goes through) a symlink."""
    real = os.path.realpath(path)
    return path if real == os.path.abspath(path) else f"{path} (-> {real})"


def _regular_file_problem(st: os.stat_result, path: str, cap: int) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return f"{_shown(path)} is {_file_kind(st.st_mode)}, not a regular file"
    if st.st_size > cap:
        return f"{_shown(path)} is {st.st_size} bytes, over the limit of {cap} bytes"
    return None


def _read_regular(path: str, cap: int, error) -> bytes:
    """The bytes of ``path`` if it is a regular file (after symlinks) of at most ``cap`` bytes;
    else ``error(reason)`` is raised. A FIFO or a device is never read: the file is opened
    without blocking and checked on its descriptor before any read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise error(f"cannot read {_shown(path)}: {e.strerror}") from None
    try:
        problem = _regular_file_problem(os.fstat(fd), path, cap)
        if problem:
            raise error(problem)
        with os.fdopen(fd, "rb") as handle:
            fd = None
            data = handle.read(cap + 1)
    except OSError as e:
        raise error(f"cannot read {_shown(path)}: {e.strerror}") from None
    finally:
        if fd is not None:
            os.close(fd)
    if len(data) > cap:
        raise error(f"{_shown(path)} is over the limit of {cap} bytes")
    return data


def _temp_beside(dest: str, data: bytes, suffix: str) -> str:
    """``data`` in a new temporary file beside ``dest`` (``0666 & ~umask``, as
    :func:`~bda_jax.atomic_write` leaves its files); returns its path."""
    fd, tmp = tempfile.mkstemp(prefix=".bda_tmp_", suffix=suffix,
                               dir=os.path.dirname(os.path.abspath(dest)))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_model_files(path: str, text: str, npz: str | None, data: bytes | None) -> None:
    """Both files to temporary files first, then renamed into place (the ``.npz`` first): an
    error while writing either leaves every existing file as it was. (Should the JSON's rename
    fail after the ``.npz``'s, a new ``.npz`` with no old one to replace is removed again.)"""
    had_npz = npz is not None and os.path.lexists(npz)
    pending: list[tuple[str, str]] = []
    try:
        if npz is not None:
            pending.append((_temp_beside(npz, data, ".npz"), npz))
        pending.append((_temp_beside(path, text.encode("utf-8"), ".json"), path))
        if npz is not None:
            os.replace(*pending[0])
            pending.pop(0)
        try:
            os.replace(*pending[0])
        except BaseException:
            if npz is not None and not had_npz:
                _unlink(npz)
            raise
        pending.pop(0)
    finally:
        for tmp, _ in pending:
            _unlink(tmp)


def _owner_problem(path: str, name: str) -> str | None:
    """Why the file at ``path`` does not own the array file ``name`` beside it (None: it does)."""
    if not os.path.lexists(path):
        return f"there is no model file {path} to replace"
    try:
        raw = _read_regular(path, MODEL_JSON_MAX_BYTES, _NotOwner)
        doc = json.loads(raw.decode("utf-8"))
    except _NotOwner as e:
        return str(e)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return f"{path} is not a bda_jax model file"
    if not isinstance(doc, dict) or doc.get("kind") != MODEL_KIND:
        return f"{path} is not a bda_jax model file"
    npz = doc.get("npz")
    if not isinstance(npz, dict) or npz.get("file") != name:
        return f"the model file {path} does not use it"
    return None


class _NotOwner(Exception):
    pass


def check_model_out(path) -> None:
    """Refuse to save a model to ``path`` when its array file (``<path without .json>.npz``)
    exists and is not owned by the model file at ``path``, i.e. ``path`` is not a bda_jax model
    file whose ``npz.file`` names it (the ``.npz`` of another model file, e.g. ``model`` beside
    ``model.json``, or a file of the user's). Raises :class:`~bda_jax.DataError` naming the
    ``.npz``. :func:`save_model` runs this check before writing anything;
    :func:`fit_model_file` runs it before fitting."""
    path = os.fspath(path)
    npz = _npz_path(path)
    if not os.path.lexists(npz):
        return
    problem = _owner_problem(path, os.path.basename(npz))
    if problem is not None:
        raise DataError(f"refusing to overwrite the array file {npz}: it does not belong to the "
                        f"model file being replaced ({problem}); choose another output path or "
                        "remove it", file=npz, field="npz")


# ----------------------------------------------------------------------------- saving

def save_model(path, estimator_or_state, *, counts_fingerprint, meta: Mapping | None = None
               ) -> None:
    """Write a fitted aggregator (or a :func:`model_state` dict) to ``path`` (JSON; large arrays
    go to ``<path without .json>.npz`` beside it).

    ``counts_fingerprint``: the training data's fingerprint, a string, or the training
    :class:`~bda_jax.Counts` (fingerprinted with :func:`fingerprint_counts`), or None.
    ``meta``: free JSON-serializable information kept verbatim (e.g. the arm name, the training
    file). Raises :class:`~bda_jax.DataError` for a value that cannot be saved, and for an
    existing ``.npz`` that the model file at ``path`` does not own (:func:`check_model_out`).
    Guarantees: nothing is written unless both files can be; both are written to temporary files
    and renamed into place, the ``.npz`` first, so a failed write (a full disk, a folder in the
    way) leaves the old files untouched and never leaves a JSON without its ``.npz``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise DataError("is a folder, expected a model file path", file=path)
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
    npz, data = None, None
    if enc.arrays:
        check_model_out(path)
        buf = io.BytesIO()
        np.savez_compressed(buf, **enc.arrays)
        data = buf.getvalue()
        npz = _npz_path(path)
        doc["npz"] = {"file": os.path.basename(npz), "sha256": _sha256(data),
                      "arrays": sorted(enc.arrays)}
    else:
        doc["npz"] = None
    doc["sha256"] = _sha256(_canonical(doc))
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    stale = None
    if npz is None:        # the arrays of the model file being replaced, if it owns them
        beside = _npz_path(path)
        if os.path.lexists(beside) and _owner_problem(path, os.path.basename(beside)) is None:
            stale = beside
    _write_model_files(path, text, npz, data)
    if stale is not None:  # removed once the new JSON is in place (it no longer names them)
        _unlink(stale)


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


def _shape_spec(spec) -> tuple[int, ...] | None:
    """The shape of a well-formed ``__array__`` body, else None."""
    if not isinstance(spec, dict) or spec.get("dtype") not in _DTYPES or \
            not isinstance(spec.get("shape"), list) or len(spec["shape"]) > _MAX_NDIM or \
            not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                    for s in spec["shape"]) or \
            not isinstance(spec.get("jax", False), bool):
        return None
    return tuple(spec["shape"])


class _Decoder:
    def __init__(self, path: str, arrays: Mapping[str, np.ndarray]):
        self.path, self.arrays, self.used = path, arrays, set()

    def error(self, reason, where):
        return ArtifactError(reason, file=self.path, field=where)

    def decode(self, value, where: str, depth: int = 0):
        if depth > _MAX_DEPTH:
            raise self.error(f"nested more than {_MAX_DEPTH} levels deep", where)
        if value is None or isinstance(value, (bool, str, int, float)):
            return value
        if isinstance(value, list):
            return [self.decode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        if not isinstance(value, dict):
            raise self.error(f"unexpected JSON value of type {type(value).__name__}", where)
        tag = next((t for t in _TAGS if t in value), None)
        if tag is None:
            return {k: self.decode(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
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
            return tuple(self.decode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(body))
        if tag == "__array__":
            return self._array(body, where)
        if tag == "__namedtuple__":
            if not isinstance(body, dict) or not isinstance(body.get("type"), str) or \
                    body["type"] not in _namedtuples() or \
                    not isinstance(body.get("fields"), dict):
                raise self.error("unknown or malformed named tuple", where)
            cls = _namedtuples()[body["type"]]
            fields_ = {k: self.decode(v, f"{where}.{k}", depth + 1)
                       for k, v in body["fields"].items()}
            if set(fields_) != set(cls._fields):
                raise self.error(f"{body['type']} needs the fields {list(cls._fields)}", where)
            return cls(**fields_)
        # __estimator__
        if not isinstance(body, dict):
            raise self.error("__estimator__ must hold an object", where)
        return self.estimator(body, where, depth + 1)

    def _array(self, spec, where):
        shape = _shape_spec(spec)
        if shape is None:
            raise self.error("malformed array (dtype, shape, jax)", where)
        if "data" in spec:
            data = spec["data"]
            if not isinstance(data, list) or not all(
                    isinstance(v, (bool, int, float)) for v in data):
                raise self.error("inline array data must be a flat list of numbers", where)
            if len(data) != math.prod(shape):
                raise self.error(f"inline array data has {len(data)} values, the shape "
                                 f"{list(shape)} needs {math.prod(shape)}", where)
            try:
                a = np.asarray(data, dtype=spec["dtype"]).reshape(shape)
            except (TypeError, ValueError, OverflowError) as err:
                raise self.error(f"inline array data does not fit: {err}", where) from None
        elif "npz" in spec:
            key = spec["npz"]
            if not isinstance(key, str) or key not in self.arrays:
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

    def estimator(self, body, where, depth: int = 0):
        name = body.get("estimator")
        name = RENAMED_CLASSES.get(name, name) if isinstance(name, str) else name
        classes = registered_classes()
        if not isinstance(name, str) or name not in classes:
            raise self.error(f"unknown estimator {name!r}; this bda_jax rebuilds "
                             f"{sorted(classes)}", where + ".estimator")
        hyper = body.get("hyperparameters")
        fitted = body.get("fitted")
        if not isinstance(hyper, dict) or not isinstance(fitted, dict):
            raise self.error("hyperparameters and fitted must be objects", where)
        hyper = self.decode(hyper, where + ".hyperparameters", depth + 1)
        fitted = self.decode(fitted, where + ".fitted", depth + 1)
        if not isinstance(hyper, dict) or not isinstance(fitted, dict):
            raise self.error("hyperparameters and fitted must be plain objects", where)
        return _rebuild(classes[name], hyper, fitted, self, where)


def _rebuild(cls, hyper: dict, fitted: dict, dec: _Decoder, where: str):
    """A new ``cls`` built through its constructor (which validates the settings), then given
    the stored attributes exactly, then checked by :func:`_check_state` (types, shapes, ranges
    of the settings and fitted attributes)."""
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self"]
    from ._bda import BDA
    if issubclass(cls, BDA) and cls is not BDA:
        # the per-arm BDA classes fix their arm (BDAPerAgent is BDA("bda-per-agent", ...))
        fixed = cls().arm
        arm = hyper.get("arm", fixed)
        if not isinstance(arm, str) or arm != fixed:
            raise dec.error(f"{cls.__name__} has arm {fixed!r}, the file says "
                            f"{hyper.get('arm')!r}", where + ".hyperparameters.arm")
        hyper = {k: v for k, v in hyper.items() if k != "arm"}   # a class attribute there
    names = {p.name for p in params}
    kwargs = {k: v for k, v in hyper.items() if k in names}
    try:
        obj = cls(**kwargs)
    except Exception as err:   # noqa: BLE001 - any refusal of a stored setting, typed
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
    try:
        _check_state(obj, dec, where)
    except ArtifactError:
        raise
    except Exception as err:   # noqa: BLE001 - a value of a type no check expected
        raise dec.error(f"invalid {cls.__name__} state: {err}", where) from None
    return obj


def _read_json(path: str) -> dict:
    try:
        st = os.stat(path)
    except OSError:
        st = None                            # read_json_file names the error
    if st is not None:
        problem = _regular_file_problem(st, path, MODEL_JSON_MAX_BYTES)
        if problem:
            raise ArtifactError(f"cannot read the model file: {problem}", file=path)
    try:
        doc = read_json_file(path, ArtifactError, "the model file")
    except ArtifactError as err:
        if err.reason.startswith("not valid UTF-8") and _starts_with(path, b"PK\x03\x04"):
            raise ArtifactError("this is a zip archive (the model's .npz arrays?), not the model "
                                "file: pass the .json that `save_model` wrote beside it",
                                file=path) from None
        raise
    if not isinstance(doc, dict):
        raise ArtifactError("a model file must hold a JSON object", file=path)
    return doc


def _starts_with(path: str, magic: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(magic)) == magic
    except OSError:
        return False


def load_model(path) -> ModelArtifact:
    """Read a model written by :func:`save_model` and rebuild its estimator.

    Checks, in order: the file is a regular file within :data:`MODEL_JSON_MAX_BYTES` and complete
    JSON (a truncated file is refused), ``kind``, a ``schema_version`` this bda_jax reads (a newer
    one is refused naming that field), the ``sha256`` of the content, the ``.npz`` (a regular
    file within :data:`MODEL_NPZ_MAX_BYTES`, its ``sha256``, then every member's zip and array
    header against what the JSON declares, before any array is decompressed; no pickle is ever
    loaded), then the estimator's class and settings (its constructor validates them) and every
    fitted attribute's type, shape and range, and the ``agents`` list against the estimator's.
    The checksums detect damage, not tampering (anyone can recompute them); the checks after
    them are what a hand-edited file meets. Every refusal is an :class:`~bda_jax.ArtifactError`
    naming the file and field.
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
    except (ValueError, RecursionError):     # NaN / Infinity literals, absurd nesting
        actual = None
    if not isinstance(expected, str) or actual != expected:
        raise err("content does not match its sha256: the file was modified or damaged",
                  "sha256")
    for key in ("estimator", "hyperparameters", "fitted"):
        if key not in doc:
            raise err(f"missing {key!r}", key)
    top = {k: doc[k] for k in ("estimator", "hyperparameters", "fitted")}
    declared = _declared_arrays(path, top)
    arrays: dict[str, np.ndarray] = {}
    npz = doc.get("npz")
    if npz is not None:
        arrays = _read_npz(path, npz, declared)
    elif declared:
        key, (_, _, where) = next(iter(declared.items()))
        raise err(f"array {key!r} lives in an .npz, but the model file names none (npz is "
                  "null)", where)
    dec = _Decoder(path, arrays)
    try:
        estimator = dec.estimator(top, "estimator")
    except ArtifactError:
        raise
    except Exception as e:     # noqa: BLE001 - last resort: a value no check foresaw, typed
        raise err(f"malformed model content ({type(e).__name__}: {e})", "estimator") from None
    unused = sorted(set(arrays) - dec.used)
    if unused:
        raise err(f".npz holds arrays the model does not use: {unused}", "npz.arrays")
    agents = doc.get("agents")
    if agents is not None:
        if not isinstance(agents, list) or not agents or \
                not all(isinstance(a, str) and a for a in agents) or \
                len(set(agents)) != len(agents):
            raise err("agents must be a non-empty list of unique non-empty strings", "agents")
    fitted_agents = getattr(estimator, "agents_", None)
    if (agents is None) != (fitted_agents is None) or \
            (agents is not None and list(fitted_agents) != agents):
        raise err(f"agents {agents} differ from the estimator's agents_ "
                  f"{None if fitted_agents is None else list(fitted_agents)}", "agents")
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise err("meta must be an object", "meta")
    fp = doc.get("counts_fingerprint")
    if fp is not None and not isinstance(fp, str):
        raise err("counts_fingerprint must be a string", "counts_fingerprint")
    return ModelArtifact(estimator, None if agents is None else tuple(agents), fp,
                         str(doc.get("package_version")), version, path, meta)


def _declared_arrays(path: str, top: dict) -> dict[str, tuple[str, tuple, str]]:
    """Every ``.npz`` array the JSON names: key -> (dtype, shape, field), the field named as
    the decoder names it. A malformed array body, a key named twice or absurd nesting is an
    :class:`~bda_jax.ArtifactError`; other malformations are left to the decoder."""
    out: dict[str, tuple[str, tuple, str]] = {}

    def walk(value, where, depth):
        if depth > _MAX_DEPTH:
            raise ArtifactError(f"nested more than {_MAX_DEPTH} levels deep", file=path,
                                field=where)
        if isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]", depth + 1)
            return
        if not isinstance(value, dict):
            return
        tag = next((t for t in _TAGS if t in value), None)
        if tag is None:
            for k, v in value.items():
                walk(v, f"{where}.{k}", depth + 1)
            return
        if len(value) != 1:
            return
        body = value[tag]
        if tag == "__tuple__":
            walk(body, where, depth + 1)
        elif tag == "__namedtuple__" and isinstance(body, dict) and \
                isinstance(body.get("fields"), dict):
            for k, v in body["fields"].items():
                walk(v, f"{where}.{k}", depth + 1)
        elif tag == "__estimator__" and isinstance(body, dict):
            estimator(body, where, depth + 1)
        elif tag == "__array__" and isinstance(body, dict) and "npz" in body and \
                "data" not in body:
            shape, key = _shape_spec(body), body["npz"]
            if shape is None or not isinstance(key, str):
                raise ArtifactError("malformed array (dtype, shape, jax, npz)", file=path,
                                    field=where)
            if key in out:
                raise ArtifactError(f".npz array {key!r} is named twice (also by "
                                    f"{out[key][2]})", file=path, field=where)
            out[key] = (body["dtype"], shape, where)

    def estimator(body, where, depth):
        for part in ("hyperparameters", "fitted"):
            if isinstance(body.get(part), dict):
                walk(body[part], f"{where}.{part}", depth + 1)

    estimator(top, "estimator", 0)
    return out


def _read_exact(handle, n: int) -> bytes:
    chunks, left = [], n
    while left > 0:
        chunk = handle.read(min(left, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_npz(path: str, npz, declared: Mapping[str, tuple[str, tuple, str]]
              ) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` the model file names, read without trusting it: a regular
    file of bounded size whose hash matches, a zip whose members are exactly the declared
    arrays (``<key>.npy``), each of bounded declared size, with an ``.npy`` header of a plain
    numeric dtype and the dtype and shape the JSON declares; all checked on the headers, before
    any array data is decompressed. Never unpickles anything."""
    err = lambda reason, fld: ArtifactError(reason, file=path, field=fld)
    if not isinstance(npz, dict) or not isinstance(npz.get("file"), str) or \
            not isinstance(npz.get("sha256"), str):
        raise err("npz must be null or {file, sha256, arrays}", "npz")
    name = npz["file"]
    if not name or os.path.basename(name) != name or name in (".", "..") or \
            any(c in name for c in "\\\x00"):
        raise err(f"npz file name {name!r} must be a bare file name", "npz.file")
    npz_path = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    data = _read_regular(npz_path, MODEL_NPZ_MAX_BYTES,
                         lambda reason: err(f"cannot read the array file: {reason}", "npz.file"))
    if _sha256(data) != npz["sha256"]:
        raise err(f"{name} does not match its sha256: the array file was modified, damaged or "
                  "belongs to another save", "npz.sha256")
    listed = npz.get("arrays")
    if listed is not None and (not isinstance(listed, list) or
                               sorted(map(str, listed)) != sorted(declared)):
        raise err(f"npz.arrays lists {listed}, the model names {sorted(declared)}", "npz.arrays")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except Exception as e:            # zipfile raises many types on a damaged archive
        raise err(f"{name} is not a readable .npz (zip) file: {e}", "npz") from None
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        key = info.filename[:-4] if info.filename.endswith(".npy") else None
        if key is None or key not in declared or key in members:
            raise err(f"{name} holds the member {info.filename!r}, which the model file does not "
                      f"declare (it names {sorted(declared)})", "npz.arrays")
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED,
                                                              zipfile.ZIP_DEFLATED):
            raise err(f"{name}: member {info.filename!r} is encrypted or uses an unsupported "
                      "compression", "npz")
        total += info.file_size
        if info.file_size > MODEL_NPZ_MAX_BYTES or total > MODEL_NPZ_MAX_BYTES:
            raise err(f"{name}: member {info.filename!r} declares {info.file_size} bytes "
                      f"uncompressed, over the limit of {MODEL_NPZ_MAX_BYTES} bytes for all "
                      "arrays (refused before decompressing)", "npz")
        members[key] = info
    missing = sorted(set(declared) - set(members))
    if missing:
        raise err(f"{name} lacks the array(s) {missing} the model file names", "npz.arrays")
    arrays: dict[str, np.ndarray] = {}
    for key in sorted(members):
        info, (want_dtype, want_shape, where) = members[key], declared[key]
        try:
            with zf.open(info) as handle:
                version = np.lib.format.read_magic(handle)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
                else:
                    raise ValueError(f"unsupported .npy format version {version}")
                offset = handle.tell()
                if dtype.hasobject:
                    raise _HeaderMismatch(f"{name}: array {key!r} has an object dtype (a pickle):"
                                          " refused, never unpickled")
                if dtype.name not in _DTYPES or \
                        dtype.str != np.dtype(want_dtype).str or fortran or \
                        tuple(shape) != want_shape:
                    raise _HeaderMismatch(
                        f"{name}: array {key!r} is {dtype.str}{list(shape)}"
                        f"{' (Fortran order)' if fortran else ''}, the model file declares "
                        f"{want_dtype}{list(want_shape)}")
                nbytes = math.prod(want_shape) * dtype.itemsize
                if offset + nbytes != info.file_size:
                    raise _HeaderMismatch(f"{name}: array {key!r} holds {info.file_size - offset}"
                                          f" data bytes, its header says {nbytes}")
                raw = _read_exact(handle, nbytes)
        except _HeaderMismatch as e:
            raise err(str(e), where) from None
        except Exception as e:        # zlib / format errors of a file whose hash was rewritten
            raise err(f"cannot read array {key!r} of {name}: {e}", where) from None
        if len(raw) != nbytes:
            raise err(f"{name}: array {key!r} is truncated", where)
        a = np.frombuffer(raw, dtype=dtype).reshape(want_shape).copy()
        if a.dtype.kind == "b" and a.size and int(a.view(np.uint8).max()) > 1:
            raise err(f"{name}: bool array {key!r} holds bytes other than 0 and 1", where)
        arrays[key] = a
    return arrays


class _HeaderMismatch(Exception):
    pass


# ----------------------------------------------------------------------------- state checks

class _State:
    """Type, shape and range checks of a rebuilt estimator's attributes, each failure an
    :class:`~bda_jax.ArtifactError` naming ``<where>.hyperparameters.<name>`` or
    ``<where>.fitted.<name>``. Symbolic dimensions (``"I"`` agents, ``"K"`` slots, ...) bind on
    first use, so every per-agent array must agree with ``agents_`` and with each other."""

    def __init__(self, obj, dec: _Decoder, where: str):
        self.obj, self.dec, self.where = obj, dec, where
        self.vars = vars(obj)
        self.dims: dict[str, tuple[int, str]] = {}

    def fail(self, name: str, reason: str):
        part = "fitted" if name.split(".")[0].endswith("_") else "hyperparameters"
        return self.dec.error(reason, f"{self.where}.{part}.{name}")

    def fitted(self, *names: str) -> bool:
        """Whether any of the fitted attributes ``names`` is present (then all must be)."""
        if not any(name in self.vars for name in names):
            return False
        self.need(*names)
        return True

    def need(self, *names: str) -> None:
        for name in names:
            if name not in self.vars:
                raise self.fail(name, "missing: the other fitted attributes need it")

    def integer(self, name: str, lo: int | None = None, hi: int | None = None) -> int:
        v = self.vars.get(name)
        if not is_int(v) or (lo is not None and v < lo) or (hi is not None and v >= hi):
            bounds = "" if lo is None and hi is None else \
                f" in [{'' if lo is None else lo}, {'' if hi is None else hi})"
            raise self.fail(name, f"must be an integer{bounds}, got {v!r}")
        return int(v)

    def seed(self) -> None:
        self.integer("seed", -2 ** 63, 2 ** 63)

    def flag(self, name: str) -> bool:
        v = self.vars.get(name)
        if not isinstance(v, (bool, np.bool_)):
            raise self.fail(name, f"must be true or false, got {v!r}")
        return bool(v)

    def choice(self, name: str, options) -> None:
        v = self.vars.get(name)
        if not isinstance(v, str) or v not in options:
            raise self.fail(name, f"must be one of {list(options)}, got {v!r}")

    def real(self, name: str, lo: float | None = None, hi: float | None = None, *,
             lo_open: bool = False, optional: bool = False, finite: bool = True):
        v = self.vars.get(name)
        if v is None and optional:
            return None
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                  np.floating)):
            raise self.fail(name, f"must be a number, got {v!r}")
        try:
            x = float(v)
        except OverflowError:
            raise self.fail(name, f"must be a finite number, got {v!r}") from None
        if math.isnan(x) or (finite and not math.isfinite(x)):
            raise self.fail(name, f"must be a finite number, got {v!r}")
        if (lo is not None and (x < lo or (lo_open and x == lo))) or (hi is not None and x > hi):
            raise self.fail(name, f"must be in {'(' if lo_open else '['}"
                                  f"{'-inf' if lo is None else lo}, "
                                  f"{'inf' if hi is None else hi}], got {v!r}")
        return x

    def array(self, name: str, kind: str, shape: tuple, *, lo: float | None = None,
              hi: float | None = None, lo_open: bool = False, nan: bool = False,
              neginf: bool = False, optional: bool = False, value=None):
        """``kind``: "f" float, "b" bool, "i" integer; ``shape``: ints or dimension names.
        Floats: no NaN unless ``nan``, never +inf, -inf only with ``neginf``; finite values in
        [lo, hi] (``lo_open``: lo excluded)."""
        v = self.vars.get(name.split(".")[0]) if value is None else value
        if v is None and optional:
            return None
        if not isinstance(v, np.ndarray) and not _is_jax(v):
            raise self.fail(name, f"must be an array, got {type(v).__name__}")
        a = np.asarray(v)
        kinds = {"f": "f", "b": "b", "i": "iu"}[kind]
        if a.dtype.kind not in kinds:
            raise self.fail(name, f"must be a {dict(f='float', b='bool', i='integer')[kind]} "
                                  f"array, got {a.dtype.name}")
        if a.ndim != len(shape):
            raise self.fail(name, f"must have {len(shape)} dimension(s), got shape "
                                  f"{list(a.shape)}")
        for axis, (n, want) in enumerate(zip(a.shape, shape)):
            if isinstance(want, str):
                if want not in self.dims:
                    self.dims[want] = (n, name)
                    continue
                want_n, source = self.dims[want]
                if n != want_n:
                    raise self.fail(name, f"has {n} entries on axis {axis}, but {source} has "
                                          f"{want} = {want_n}")
            elif n != want:
                raise self.fail(name, f"has {n} entries on axis {axis}, expected {want}")
        if kind == "f" and a.size:
            if not nan and np.isnan(a).any():
                raise self.fail(name, "holds NaN")
            if np.isposinf(a).any() or (not neginf and np.isneginf(a).any()):
                raise self.fail(name, "holds an infinity")
            fin = a[np.isfinite(a)]
            if fin.size and ((lo is not None and (fin.min() < lo or (lo_open and
                                                                     fin.min() == lo)))
                             or (hi is not None and fin.max() > hi)):
                raise self.fail(name, f"has values outside {'(' if lo_open else '['}"
                                      f"{'-inf' if lo is None else lo}, "
                                      f"{'inf' if hi is None else hi}] (min {fin.min():g}, "
                                      f"max {fin.max():g})")
        return a

    def strings(self, name: str, *, dim: str | None = None, optional: bool = True,
                nonempty: bool = True):
        """A non-empty list or tuple of unique strings (``nonempty``: no empty string), stored
        back as a tuple."""
        v = self.vars.get(name)
        if v is None and optional:
            return None
        if not isinstance(v, (list, tuple)) or not v or \
                not all(isinstance(s, str) and (s or not nonempty) for s in v) or \
                len(set(v)) != len(v):
            raise self.fail(name, f"must be a non-empty list of unique{' non-empty' * nonempty}"
                                  f" strings, got {v!r}")
        self.vars[name] = tuple(v)
        if dim is not None:
            self.dims[dim] = (len(v), name)
        return tuple(v)


_PROB_TOL = 1e-4       # float32 slack on probabilities, log-probabilities and row sums


def _log_distribution(st: _State, name: str, shape: tuple, *, optional: bool = False,
                      value=None):
    """Log-probabilities over the last axis: no NaN, <= 0, rows summing to 1."""
    a = st.array(name, "f", shape, hi=_PROB_TOL, neginf=True, optional=optional, value=value)
    if a is not None and a.size:
        with np.errstate(over="ignore", under="ignore"):
            total = np.exp(a.astype(np.float64)).sum(-1)
        if np.abs(total - 1.0).max() > 1e-3:
            raise st.fail(name, "is not a log-probability distribution (its probabilities sum "
                                f"to {float(total.ravel()[np.argmax(np.abs(total - 1.0))]):g})")
    return a


def _check_bda(st: _State, obj) -> None:
    from .._core.selection import GRID_COLUMNS, GRIDS
    st.integer("n_folds", 2)
    if st.vars.get("class_prior") is not None:     # None: the arm's reading of pi0
        st.flag("class_prior")
    columns = GRID_COLUMNS[obj.arm]
    n_rows = len(GRIDS[obj.arm])
    if obj.grid is not None:
        try:
            grid = np.asarray(obj.grid, np.float64)
        except (TypeError, ValueError, OverflowError):
            raise st.fail("grid", "must be a table of numbers") from None
        if grid.ndim != 2 or grid.shape[1] != len(columns) or not grid.shape[0] or \
                not np.isfinite(grid).all():
            raise st.fail("grid", f"must be a non-empty finite [rows, {len(columns)}] table "
                                  f"(columns {list(columns)})")
        n_rows = grid.shape[0]
    if not st.fitted("params_", "cv_brier_", "log_prior_"):
        return
    params = obj.params_
    if not isinstance(params, dict) or set(params) != set(columns):
        raise st.fail("params_", f"must hold exactly {list(columns)}, got {params!r}")
    for key, value in params.items():
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value)
        if not ok or (key in ("tau", "s") and value <= 0) or (key == "lambda" and value < 0):
            raise st.fail("params_", f"{key} = {value!r} is not a valid value (finite; tau and "
                                     "s > 0, lambda >= 0)")
    st.array("cv_brier_", "f", (n_rows,), nan=True)
    if obj.fits_class_prior:
        _log_distribution(st, "log_prior_", ("K",))
    elif obj.log_prior_ is not None:
        raise st.fail("log_prior_", "must be null when the arm keeps a uniform class prior")
    if obj.arm == "bda-confusion":
        st.need("confusion_", "label_space_")
        conf = st.array("confusion_", "f", ("I", "K", "K"), lo=0.0, hi=1.0 + _PROB_TOL)
        if conf.size and np.abs(conf.astype(np.float64).sum(-1) - 1.0).max() > 1e-3:
            raise st.fail("confusion_", "rows must sum to 1")
        st.choice("label_space_", ("semantic", "positional"))
    else:
        st.need("reliability_", "alpha_", "beta_")
        st.array("reliability_", "f", ("I",), lo=0.0, hi=1.0)
        st.array("alpha_", "f", ("I",), lo=0.0, lo_open=True)
        st.array("beta_", "f", ("I",), lo=0.0, lo_open=True)


def _check_bda_auto(st: _State, obj) -> None:
    """A :class:`BDAAuto` (its constructor has checked ``variants``, ``criterion``, ``basis``,
    ``n_folds``): the winner is one of the variants, ``best_`` a fitted :class:`BDA` of that arm
    with the same folds, seed, basis and agents (its own state checked as any BDA's), one score
    per variant with the winner's the lowest, and the margin to the runner-up."""
    from ._bda import BDA
    if not st.fitted("variant_", "best_", "variant_brier_", "margin_"):
        return
    st.choice("variant_", obj.variants)
    best = obj.best_
    if type(best) is not BDA or getattr(best, "arm", None) != obj.variant_ or \
            not hasattr(best, "params_"):
        raise st.fail("best_", f"must be a fitted BDA of arm {obj.variant_!r} (variant_)")
    for name in ("n_folds", "seed", "basis"):
        if getattr(best, name) != getattr(obj, name):
            raise st.fail("best_", f"has {name} = {getattr(best, name)!r}, the auto arm "
                                   f"{getattr(obj, name)!r}")
    if tuple(best.agents_ or ()) != tuple(obj.agents_ or ()):
        raise st.fail("agents_", f"differ from best_.agents_ {list(best.agents_ or ())}")
    scores = st.array("variant_brier_", "f", (len(obj.variants),), lo=0.0, hi=2.0)
    won = obj.variants.index(obj.variant_)
    if int(np.argmin(scores)) != won:
        raise st.fail("variant_", f"{obj.variant_!r} is not the first variant with the lowest "
                                  "variant_brier_")
    if len(obj.variants) == 1:
        if not isinstance(obj.margin_, float) or not math.isnan(obj.margin_):
            raise st.fail("margin_", "must be NaN with a single variant")
        return
    margin = st.real("margin_", 0.0, 2.0)
    expected = float(np.delete(scores.astype(np.float64), won).min() - float(scores[won]))
    if abs(margin - expected) > 1e-9:
        raise st.fail("margin_", f"is {margin!r}; the scores say {expected!r}")


def _check_majority(st: _State, obj) -> None:
    st.choice("rounds", ("round0", "all"))


def _check_stacking(st: _State, obj) -> None:
    st.integer("n_folds", 2)
    st.integer("steps", 0)
    st.real("learning_rate", 0.0, lo_open=True, optional=True)
    if not st.fitted("coef_", "theta_", "intercept_", "l2_", "cv_brier_", "vocab_"):
        return
    vocab = st.strings("vocab_", optional=True, nonempty=False)
    coef = st.array("coef_", "f", ("I", 2))
    theta = st.array("theta_", "f", ("P",))
    intercept = st.array("intercept_", "f", ("K",), optional=True)
    wants = {"auto": vocab is not None, True: True, False: False}[obj.intercept]
    if (intercept is not None) != wants:
        raise st.fail("intercept_", f"is {'set' if intercept is not None else 'null'}, but "
                                    f"intercept = {obj.intercept!r} and vocab_ = {vocab!r} "
                                    f"say it must {'' if wants else 'not '}be set")
    if intercept is not None and vocab is not None and len(vocab) != intercept.shape[0]:
        raise st.fail("intercept_", f"has {intercept.shape[0]} slots, vocab_ has {len(vocab)}")
    I = coef.shape[0]
    n_b = 0 if intercept is None else intercept.shape[0]
    if theta.shape[0] != 2 * I + n_b or not np.array_equal(theta[:2 * I].reshape(2, I).T, coef) \
            or (intercept is not None and not np.array_equal(theta[2 * I:], intercept)):
        raise st.fail("theta_", "does not hold coef_ and intercept_ (the order of "
                                "stacking_features)")
    l2 = st.real("l2_", 0.0)
    if not any(l2 == float(g) for g in obj.l2_grid):
        raise st.fail("l2_", f"{l2!r} is not in l2_grid {list(obj.l2_grid)}")
    st.array("cv_brier_", "f", (len(obj.l2_grid),), nan=True)


def _seat_accuracy(st: _State, name: str):
    return st.array(name, "f", ("I",), lo=0.0, hi=1.0, nan=True)


def _check_gated(st: _State, obj) -> None:
    if not st.fitted("gate_", "seat_accuracy_", "chance_", "fallback_"):
        return
    acc = _seat_accuracy(st, "seat_accuracy_")
    chance = st.array("chance_", "f", ("I",), lo=0.0, hi=1.0, lo_open=True, nan=True)
    gate = st.array("gate_", "b", ("I",))
    fallback = st.flag("fallback_")
    passes = np.isfinite(acc) & (acc > chance)
    if fallback != (not passes.any()) or not np.array_equal(gate, np.ones_like(gate) if
                                                            fallback else passes):
        raise st.fail("gate_", "does not match seat_accuracy_ > chance_ (and fallback_)")


def _check_best(st: _State, obj) -> None:
    if not st.fitted("member_", "seat_accuracy_"):
        return
    acc = _seat_accuracy(st, "seat_accuracy_")
    m = st.integer("member_", 0, acc.shape[0])
    if not np.isfinite(acc[m]) or acc[m] != np.nanmax(acc):
        raise st.fail("member_", f"seat {m} does not have the highest seat_accuracy_")


def _check_verbalized(st: _State, obj) -> None:
    st.real("missing", 0.0, 1.0, optional=True)


def _check_recalibrated(st: _State, obj) -> None:
    from ._base import Aggregator
    from ._baselines import IsotonicRecalibrated
    st.integer("n_folds", 2)
    iso = isinstance(obj, IsotonicRecalibrated)
    if not st.fitted("base_", "oof_log_proba_",
                     *(("iso_x_", "iso_y_") if iso else ("temperature_",))):
        return
    if not isinstance(obj.base_, Aggregator) or type(obj.base_) is not type(obj.base):
        raise st.fail("base_", f"must be a fitted {type(obj.base).__name__} (the base)")
    base_agents = getattr(obj.base_, "agents_", None)
    if base_agents is not None and tuple(base_agents) != tuple(obj.agents_ or ()):
        raise st.fail("agents_", f"differ from base_.agents_ {list(base_agents)}")
    st.array("oof_log_proba_", "f", ("T", "K"), hi=_PROB_TOL, neginf=True)
    if iso:
        x = st.array("iso_x_", "f", ("n",), lo=0.0, hi=1.0 + _PROB_TOL)
        y = st.array("iso_y_", "f", ("n",), lo=0.0, hi=1.0)
        if not x.size or (np.diff(x) <= 0).any():
            raise st.fail("iso_x_", "must be non-empty and strictly increasing")
        if (np.diff(y) < 0).any():
            raise st.fail("iso_y_", "must be non-decreasing")
    else:
        st.real("temperature_", 0.0, lo_open=True)


def _check_dawid_skene(st: _State, obj) -> None:
    from ..crowd import DSParams
    if not st.fitted("params_", "skills_", "confusion_", "prior_", "log_proba_", "label_space_",
                     "n_iter_", "converged_", "log_likelihood_", "objective_"):
        return
    p = obj.params_
    if not isinstance(p, DSParams):
        raise st.fail("params_", f"must be DSParams, got {type(p).__name__}")
    st.array("params_.skill", "f", ("I",), lo=0.0, hi=1.0, value=p.skill)
    st.array("params_.confusion", "f", ("I", "K", "K"), lo=0.0, hi=1.0 + _PROB_TOL,
             value=p.confusion)
    st.array("params_.log_prior", "f", ("K",), hi=_PROB_TOL, neginf=True, value=p.log_prior)
    if p.log_table is not None:
        st.array("params_.log_table", "f",
                 ("I", 2) if obj.model == "one-coin" else ("I", "K", "K"),
                 hi=_PROB_TOL, neginf=True, value=p.log_table)
    st.array("skills_", "f", ("I",), lo=0.0, hi=1.0)
    st.array("confusion_", "f", ("I", "K", "K"), lo=0.0, hi=1.0 + _PROB_TOL)
    st.array("prior_", "f", ("K",), lo=0.0, hi=1.0 + _PROB_TOL)
    st.array("log_proba_", "f", ("T", "K"), hi=_PROB_TOL, neginf=True, nan=True)
    st.choice("label_space_", ("semantic", "positional"))
    st.integer("n_iter_", 0)
    st.flag("converged_")
    st.real("log_likelihood_", finite=False)
    st.real("objective_", finite=False)


def _check_state(obj, dec: _Decoder, where: str) -> None:
    """Check a rebuilt estimator's settings and fitted attributes (types, shapes, ranges,
    agreement between arrays); the constructor has already validated what it checks."""
    from ._bda import BDA, BDAAuto, Majority
    from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                            TemperatureScaled, VerbalizedVote)
    from ._dawid_skene import CouncilDawidSkene
    st = _State(obj, dec, where)
    st.seed()
    st.strings("agents_", dim="I")
    for cls, check in ((BDA, _check_bda), (BDAAuto, _check_bda_auto),
                       (Majority, _check_majority),
                       (LogisticStacking, _check_stacking), (GatedVote, _check_gated),
                       (BestMember, _check_best), (VerbalizedVote, _check_verbalized),
                       (IsotonicRecalibrated, _check_recalibrated),
                       (TemperatureScaled, _check_recalibrated),
                       (CouncilDawidSkene, _check_dawid_skene)):
        if isinstance(obj, cls):
            check(st, obj)
            return


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
