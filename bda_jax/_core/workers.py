"""What the package's worker processes share (no JAX here: a worker may import this module).

Parse workers (:mod:`bda_jax._core.fastparse`) and figure workers
(:mod:`bda_jax.report._figures`) are ``python -P -c BOOT PACKAGE_DIR ...`` processes whose boot
sets up the ``bda_jax`` packages without running their ``__init__`` (which imports JAX).
"""
from __future__ import annotations

import os

__all__ = ["PACKAGE_DIR", "WORKER_THREADS", "usable_cpus"]

#: the ``bda_jax`` package folder, the first argument of every worker's boot
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: A worker does no linear algebra: one BLAS / OpenMP thread, so that importing NumPy does not
#: start a pool of them (a third of a worker's start-up CPU on a 2-core machine).
WORKER_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def usable_cpus() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count()`` where that
    does not exist)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                  # not on Linux
        return os.cpu_count() or 1
