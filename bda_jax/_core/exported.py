"""Compiled functions kept across processes as JAX exports (docs/performance.md, "Compile once").

JAX's persistent compilation cache skips XLA's compile in a new process, not JAX's tracing and
lowering of the function to StableHLO, which repeats in every process: for the largest programs
(the nested CV's grid search, the stacking grids) that is most of a warm ``bda demo``'s compile
work. :func:`persistent_jit` is ``jax.jit`` for such a function, and once
:func:`bda_jax.enable_compilation_cache` has chosen a cache folder (the ``bda`` command, the
notebooks), each (function, static arguments, argument shapes and dtypes) is traced once and kept
as a serialized :mod:`jax.export` program in ``<folder>/exported/``: a later process reads it
back (StableHLO bytecode in a flatbuffer; no pickle), and JAX's cache supplies the compiled
executable. Without a chosen folder (a plain ``import bda_jax``, a folder the user configured
JAX with themselves) it is ``jax.jit`` unchanged.

A program's file name is a SHA-256 of everything its tracing reads: the function's module,
name, file, first line and bytecode, the static arguments' ``repr``, the flattened arguments'
tree, shapes and dtypes, the source of every module of this package (an edited package never
reads an old program), the versions of JAX, jaxlib and NumPy, the backend and device kind, and
the JAX settings that change tracing (x64, default matmul precision, dtype promotion, the PRNG
implementation). A file whose header or contents do not check is exported again and replaced
(atomically); one that cannot be written leaves the call running on the program just traced. A
typed PRNG key is passed as its key data and wrapped again inside the program (its
implementation is part of the key). Calls inside another trace (``jit``, ``grad``, ``vmap``:
the call is then part of that trace, and differentiable as usual), with Python scalars or
weak-typed arrays (whose promotion an export does not keep), with arrays sharded over several
devices (an export is lowered for one), with static arguments whose
``repr`` is not the same in every process (a function, an object), and functions the export
refuses, go to ``jax.jit``. A NamedTuple result needs :func:`serializable` on its class;
without it the program still runs, with one :class:`ExportWarning`.

The exported program computes the same operations as the jitted function; on this package's
programs the results are the same bits (tests/core/test_exported.py, and the demo's
``results.json``).
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import warnings
from pathlib import Path

import jax
import numpy as np

from . import compilation
from .io import atomic_write

__all__ = ["persistent_jit", "serializable", "program_key", "ExportWarning", "HEADER", "SUFFIX"]

#: The first bytes of every file: what it is and its format version (checked on load).
HEADER = b"bda_jax exported program 1\n"
SUFFIX = compilation.EXPORT_SUFFIX
_PACKAGE = Path(__file__).resolve().parents[1]


@functools.cache
def _source_digest() -> str:
    """SHA-256 of every ``.py`` file of the package (path and bytes), read once per process."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def _setting_text() -> str:
    import jaxlib
    dev = jax.devices()[0]
    cfg = jax.config
    return "|".join(map(str, (
        jax.__version__, jaxlib.__version__, np.__version__, jax.default_backend(),
        dev.device_kind, cfg.jax_enable_x64, cfg.jax_default_matmul_precision,
        cfg.jax_numpy_dtype_promotion, cfg.jax_default_prng_impl,
        cfg.jax_threefry_partitionable, _source_digest())))


def program_key(name: str, statics: tuple, treedef, avals: tuple) -> str:
    """The file stem of one program: SHA-256 of its function ``name``, ``statics`` ((name,
    value) pairs), the arguments' ``treedef`` and ``avals`` ((shape, dtype) per leaf), and the
    settings and sources tracing depends on (module docstring)."""
    text = "\n".join((name, repr(statics), str(treedef), repr(avals), _setting_text()))
    return hashlib.sha256(text.encode()).hexdigest()


def serializable(cls):
    """Class decorator: lets a NamedTuple that a :func:`persistent_jit` function returns be
    written in its program (``jax.export`` serializes only registered result trees), under its
    module-qualified name. Returns ``cls``."""
    jax.export.register_namedtuple_serialization(
        cls, serialized_name=f"{cls.__module__}.{cls.__qualname__}")
    return cls


def _plain(value) -> bool:
    """Whether a static argument's ``repr`` is the same in every process (None, bools, numbers,
    strings and tuples of them); a function or an object's default ``repr`` holds an address."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, tuple) and all(map(_plain, value))


_CANONICAL: dict = {}          # (NumPy dtype, x64) -> the name of the dtype JAX computes in


def _leaf_array(x):
    """``(array, aval)`` for one argument leaf: the array the program takes and its (shape,
    canonical dtype), with a typed PRNG key passed as its key data and its implementation's name
    added to the aval; ``(None, None)`` where an export would not keep the call's meaning (a
    tracer, a Python scalar, a weak-typed array, an array sharded over several devices, another
    extended dtype)."""
    if isinstance(x, jax.core.Tracer) or not isinstance(x, (np.ndarray, np.generic, jax.Array)):
        return None, None
    if getattr(x, "weak_type", False):
        return None, None
    if isinstance(x, jax.Array) and len(x.sharding.device_set) != 1:
        return None, None                     # sharded over devices: jit keeps its sharding
    dtype = x.dtype
    if not isinstance(dtype, np.dtype):                      # an extended dtype
        if not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            return None, None
        data = jax.random.key_data(x)
        return data, (tuple(data.shape), data.dtype.name, str(jax.random.key_impl(x)))
    known = (dtype, jax.config.jax_enable_x64)
    name = _CANONICAL.get(known)
    if name is None:
        name = _CANONICAL[known] = np.dtype(jax.dtypes.canonicalize_dtype(dtype)).name
    return x, (x.shape, name)


def _read(path: Path, avals: tuple):
    """The program stored at ``path``, or None if it is absent or does not check."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if not blob.startswith(HEADER):
        return None
    try:
        exp = jax.export.deserialize(bytearray(blob[len(HEADER):]))
    except Exception:                  # a damaged flatbuffer: JAX raises various errors
        return None
    got = tuple((tuple(a.shape), np.dtype(a.dtype).name) for a in exp.in_avals)
    return exp if got == avals else None


class ExportWarning(RuntimeWarning):
    """A function's program cannot be written (a result type not registered with
    :func:`serializable`): it runs, and is traced again in every process."""


def _write(path: Path, exp, name: str) -> None:
    """Store ``exp`` at ``path`` atomically. A folder that cannot be written (full, removed) is
    skipped; a program that cannot be serialized warns (:class:`ExportWarning`)."""
    try:
        blob = HEADER + bytes(exp.serialize())
    except (ValueError, TypeError) as err:
        warnings.warn(f"{name.split(':')[0]}: its compiled program is not kept across processes "
                      f"({err})",
                      ExportWarning, stacklevel=4)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: f.write(blob), suffix=SUFFIX + ".tmp", binary=True)
    except OSError:
        pass


class persistent_jit:
    """``jax.jit(fun, static_argnames=...)`` whose programs persist as JAX exports (module
    docstring). Use as ``@persistent_jit`` or ``@partial(persistent_jit, static_argnames=...)``.
    Returns what ``fun`` returns."""

    def __init__(self, fun, static_argnames=()):
        self._fun = fun
        self._static = tuple(static_argnames)
        self._jitted = jax.jit(fun, static_argnames=self._static)
        self._signature = inspect.signature(fun)
        params = self._signature.parameters.values()
        self._names = tuple(p.name for p in params)
        self._defaults = tuple((p.name, p.default) for p in params if p.default is not p.empty)
        self._simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        self._n_positional = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
        code = fun.__code__
        # where and what it is: two functions of one name (lambdas of one scope) never share
        self._name = (f"{fun.__module__}.{fun.__qualname__}:{Path(code.co_filename).name}:"
                      f"{code.co_firstlineno}:{hashlib.sha256(code.co_code).hexdigest()}")
        self._calls: dict = {}
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        folder = compilation.exported_folder()
        if folder is None:
            return self._jitted(*args, **kwargs)
        arguments = self._arguments(args, kwargs)
        statics = tuple((n, arguments[n]) for n in self._static)
        names = tuple(n for n in arguments if n not in self._static)
        leaves, treedef = jax.tree.flatten([arguments[n] for n in names])
        arrays, avals = zip(*map(_leaf_array, leaves)) if leaves else ((), ())
        if None in avals or not all(_plain(v) for _, v in statics):
            return self._jitted(*args, **kwargs)
        memo = (folder, statics, names, treedef, avals)
        if memo not in self._calls:
            self._calls[memo] = self._program(folder, statics, names, treedef, avals)
        call = self._calls[memo]
        return self._jitted(*args, **kwargs) if call is None else call(*arrays)

    def _arguments(self, args, kwargs) -> dict:
        """Every parameter's value by name, in the signature's order (what
        ``inspect.Signature.bind`` and ``apply_defaults`` give, without their cost on the common
        call; a call they would refuse raises their ``TypeError``)."""
        if self._simple and len(args) <= self._n_positional:
            given = dict(zip(self._names, args))
            if not given.keys() & kwargs.keys() and kwargs.keys() <= set(self._names):
                given.update(kwargs)
                for name, default in self._defaults:
                    given.setdefault(name, default)
                if len(given) == len(self._names):
                    return {n: given[n] for n in self._names}
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def clear_cache(self) -> None:
        """Forget this process's traces and programs (``jax.jit``'s ``clear_cache``); the files
        stay."""
        self._jitted.clear_cache()
        self._calls.clear()

    def _program(self, folder: Path, statics, names, treedef, avals):
        """The compiled call of one (statics, tree, avals), read back or exported and written;
        None where ``jax.jit`` must run it (an argument tree whose text holds an address, a
        function the export refuses)."""
        if " at 0x" in str(treedef):          # a pytree node's data of no stable repr
            return None
        path = folder / (program_key(self._name, statics, (names, treedef), avals) + SUFFIX)
        taken = tuple(a[:2] for a in avals)             # what the program takes: key data, not keys
        exp = _read(path, taken)
        if exp is None:
            fun, fixed = self._fun, dict(statics)
            impls = [a[2] if len(a) == 3 else None for a in avals]

            def flat(*leaves):
                leaves = [x if impl is None else jax.random.wrap_key_data(x, impl=impl)
                          for x, impl in zip(leaves, impls)]
                values = jax.tree.unflatten(treedef, leaves)
                return fun(**dict(zip(names, values)), **fixed)

            flat.__name__ = self._fun.__name__
            specs = [jax.ShapeDtypeStruct(s, d) for s, d in taken]
            try:
                exp = jax.export.export(jax.jit(flat))(*specs)
            except Exception:
                # what the export refuses (an operation it cannot serialize) or a call that
                # fails to trace: jax.jit runs it, and raises the call's own error if any
                return None
            _write(path, exp, self._name)
        return jax.jit(exp.call)
