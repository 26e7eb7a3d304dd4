"""What the package's worker processes share (no JAX here: a worker may import this module).

Parse workers (:mod:`bda_jax._core.fastparse`) and figure workers
(:mod:`bda_jax.report._figures`) are started by :func:`worker_command`: ``python -P -c BOOT
PACKAGE_DIR MODULE ENTRY ARGS...``, whose boot sets up the packages above ``MODULE`` without
running their ``__init__`` (``bda_jax``'s imports JAX), imports ``MODULE`` and calls its
function ``ENTRY(*ARGS)``.
"""
from __future__ import annotations

import os
import sys

__all__ = ["PACKAGE_DIR", "WORKER_THREADS", "env_count", "usable_cpus", "worker_command"]

#: the ``bda_jax`` package folder, the first argument of every worker's boot
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: A worker does no linear algebra: one BLAS / OpenMP thread, so that importing NumPy does not
#: start a pool of them (a third of a worker's start-up CPU on a 2-core machine).
WORKER_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def env_count(name: str, minimum: int) -> int | None:
    """The worker count set by the environment variable ``name``: None when unset or blank,
    else its value, which must be written in ASCII digits and be at least ``minimum``
    (otherwise a :class:`~bda_jax.DataError` naming the variable)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < minimum:
        from .errors import DataError
        raise DataError(f"{name} must be an integer >= {minimum}, got {text!r}", field=name)
    return int(text)


def usable_cpus() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count()`` where that
    does not exist)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                  # not on Linux
        return os.cpu_count() or 1


#: The worker's ``-c`` program. The packages above the module are created from their folders
#: with ``module_from_spec`` and not executed, so their submodules import as usual while no
#: ``__init__`` runs.
BOOT = """\
import importlib, importlib.util, sys
root, module, entry = sys.argv[1:4]
parts = module.split(".")
for depth in range(1, len(parts)):
    folder = "/".join([root, *parts[1:depth]])
    spec = importlib.util.spec_from_file_location(
        ".".join(parts[:depth]), folder + "/__init__.py", submodule_search_locations=[folder])
    sys.modules[spec.name] = importlib.util.module_from_spec(spec)
getattr(importlib.import_module(module), entry)(*sys.argv[4:])
"""


def worker_command(module: str, entry: str, *args: str) -> list[str]:
    """The command line of a worker process that runs ``module.entry(*args)`` (``module`` a
    dotted name inside ``bda_jax``; ``args`` strings) with this interpreter, in isolated-path
    mode (``-P``: the caller's working folder is not searched), without importing JAX."""
    return [sys.executable, "-P", "-c", BOOT, PACKAGE_DIR, module, entry, *args]
