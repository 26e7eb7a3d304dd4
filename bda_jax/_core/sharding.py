"""Tasks sharded over devices: the one-coin and confusion kernels on a mesh (docs/scale.md).

Tasks are independent (each posterior row reads only its own counts), so the kernels shard over
the task axis without communication: counts are padded to a multiple of the device count and
placed with a ``NamedSharding`` on a 1-D ``"tasks"`` mesh (:func:`task_mesh`, built with
``jax.make_mesh``), and each device runs the unchanged kernel on its block inside
``jax.shard_map``. The same code runs on CPU devices, on GPUs, and across processes started
with ``jax.distributed.initialize``: there each process passes the counts of *its* tasks (e.g.
``tally_stream(path, agents=..., shard=(jax.process_index(), jax.process_count()))``), the
global array is assembled with ``jax.make_array_from_process_local_data``, and each process
gets back the posterior rows of its own tasks. See ``docs/scale.md``.

Padding tasks have no moves and one candidate slot (K = 1), so their rows are finite and are
cut off before returning; padding candidate slots (to the largest K over processes) are masked
and come back as ``-inf`` like any padding slot.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from .counts import Counts
from .errors import DataError
from .kernels import confusion_log_posterior, onecoin_log_posterior, table_size_for

__all__ = ["TASK_AXIS", "task_mesh", "shard_counts", "sharded_onecoin_log_posterior",
           "sharded_confusion_log_posterior"]

TASK_AXIS = "tasks"
_FIELDS = ("N", "e", "c", "mask", "K", "gold", "gold_missing", "cluster", "e0", "conf0")


def task_mesh(devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
    """A 1-D mesh with axis ``"tasks"`` over ``devices`` (default: every device of every
    process, ``jax.devices()``), ordered by (process, device id) so that each process owns
    one contiguous block of tasks. The axis is ``AxisType.Auto``: outside the kernels, results
    slice and index like ordinary arrays (explicit-mode sharding types are not needed here)."""
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise DataError("no devices for the mesh", field="devices")
    devices.sort(key=lambda d: (d.process_index, d.id))
    return jax.make_mesh((len(devices),), (TASK_AXIS,), axis_types=(AxisType.Auto,),
                         devices=devices)


def _check_mesh(mesh):
    if mesh is None:
        return task_mesh()
    if tuple(mesh.axis_names) != (TASK_AXIS,):
        raise DataError(f"the mesh must have the single axis {TASK_AXIS!r} (see task_mesh), "
                        f"got {mesh.axis_names}", field="mesh")
    return mesh


def _agree(local: np.ndarray) -> np.ndarray:
    """Elementwise maximum of a small int vector over all processes (itself in one process)."""
    if jax.process_count() == 1:
        return local
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(local)).max(axis=0)


def _pad(x: np.ndarray, rows: int, slots: int | None, fill) -> np.ndarray:
    """Pad the task axis to ``rows`` (and the last, candidate axis to ``slots``)."""
    shape = (rows,) + x.shape[1:]
    if slots is not None:
        shape = shape[:-1] + (slots,)
    if shape == x.shape:
        return x
    out = np.full(shape, fill, x.dtype)
    out[tuple(slice(0, s) for s in x.shape)] = x
    return out


def shard_counts(counts: Counts, mesh: jax.sharding.Mesh | None = None,
                 n_slots: int | None = None) -> tuple[Counts, int]:
    """Place ``counts`` on ``mesh``, tasks sharded: returns ``(sharded, n_tasks)``.

    ``sharded`` is a :class:`Counts` of global ``jax.Array`` s whose task axis is padded to
    a multiple of the device count (padding tasks: no moves, K = 1) and sharded over the
    ``"tasks"`` axis; ``n_tasks`` is the number of real tasks of this process. In a
    multi-process run each process passes its own tasks: the task axis is padded to the same
    length in every process (the largest), the candidate axis to the largest K (or
    ``n_slots``), and the process's block lands on its own devices. ``info`` is not carried.
    """
    mesh = _check_mesh(mesh)
    local = {f: np.asarray(getattr(counts, f)) for f in _FIELDS}
    T, _, K = local["e"].shape
    n_local = sum(d.process_index == jax.process_index() for d in mesh.devices.flat)
    if n_local == 0:
        raise DataError("the mesh has no device of this process", field="mesh")
    rows = math.ceil(max(T, 1) / n_local) * n_local
    rows, slots = _agree(np.array([rows, K if n_slots is None else max(K, n_slots)]))
    rows, slots = int(rows), int(slots)
    padded = {
        "N": _pad(local["N"], rows, None, 0),
        "e": _pad(local["e"], rows, slots, 0), "c": _pad(local["c"], rows, slots, 0),
        "e0": _pad(local["e0"], rows, slots, 0),
        "conf0": _pad(local["conf0"], rows, slots, np.nan),
        "mask": _pad(local["mask"], rows, slots, False),
        "K": _pad(local["K"], rows, None, 1), "gold": _pad(local["gold"], rows, None, -1),
        "gold_missing": _pad(local["gold_missing"], rows, None, False),
        "cluster": _pad(local["cluster"], rows, None, -1),
    }
    if rows > T:
        padded["mask"][T:, 0] = True             # padding tasks: one candidate, no moves
    sharding = NamedSharding(mesh, P(TASK_AXIS))
    n_proc = len({d.process_index for d in mesh.devices.flat})
    placed = {f: jax.make_array_from_process_local_data(sharding, x,
                                                        (rows * n_proc,) + x.shape[1:])
              for f, x in padded.items()}
    return Counts(**placed), T


def _local_rows(out: jax.Array, n_tasks: int) -> jax.Array:
    """This process's rows of a task-sharded global result, padding cut off, as one array on
    the process's first device of the mesh (where the single-device kernel would leave it):
    gathered on the devices in one process, joined on the host across processes."""
    if out.is_fully_addressable:
        first = min(out.sharding.device_set, key=lambda d: d.id)
        return jax.device_put(out, first)[:n_tasks]
    shards = sorted(out.addressable_shards, key=lambda s: s.index[0].start or 0)
    return jnp.asarray(np.concatenate([np.asarray(s.data) for s in shards])[:n_tasks])


def _require(name, x, ok, what):
    """Value checks the single-device kernels make on concrete inputs (inside the sharded map
    the parameters are traced, so they are checked here, before it)."""
    x = np.asarray(x, dtype=float)
    if not np.all(ok(x)):
        raise DataError(f"{name} must be {what}", field=name)
    return x


@functools.lru_cache(maxsize=64)
def _sharded_kernel(kind: str, mesh, per_task_prior: bool, dtype, table_size):
    """The jitted, task-sharded kernel for one (kind, mesh, options): built once, so repeated
    calls (a grid of priors, CV folds) reuse its compilation. Parameters are replicated."""
    def block(N, e, c, mask, K, params, log_prior):
        local = Counts(N, e, c, mask, K, None, None, None, None, None)
        if kind == "onecoin":
            alpha, beta, tau = params
            return onecoin_log_posterior(local, alpha, beta, tau, log_prior, dtype=dtype,
                                         table_size=table_size)
        confusion, tau = params
        return confusion_log_posterior(local, confusion, tau, log_prior, dtype=dtype)

    specs = (P(TASK_AXIS),) * 5 + (P(), P(TASK_AXIS) if per_task_prior else P())
    return jax.jit(jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P(TASK_AXIS),
                                 check_vma=False))


def _run(kind, counts: Counts, params, log_prior, mesh, padded, dtype, table_size=None,
         n_slots=None):
    """Shard ``counts`` (and a per-task ``log_prior``) and run the sharded kernel."""
    mesh = _check_mesh(mesh)
    sharded, T = shard_counts(counts, mesh, n_slots)
    width = sharded.e.shape[-1]
    per_task = log_prior is not None and np.ndim(log_prior) == 2 and np.shape(log_prior)[0] != 1
    if per_task:
        lp = np.asarray(log_prior)
        if lp.shape[0] != T:
            raise DataError(f"log_prior must be [K] or [T, K] with T = {T}, got {lp.shape}",
                            field="log_prior")
        rows = sharded.N.shape[0] // len({d.process_index for d in mesh.devices.flat})
        lp = _pad(lp, rows, width, 0.0)
        log_prior = jax.make_array_from_process_local_data(
            NamedSharding(mesh, P(TASK_AXIS)), lp, sharded.N.shape[:1] + lp.shape[1:])
    elif log_prior is not None:
        lp = np.asarray(log_prior)
        if lp.shape[-1] < width:       # a [K] prior over this process's K: pad masked slots
            lp = _pad(lp.reshape(1, -1), 1, width, 0.0).reshape(lp.shape[:-1] + (width,))
        log_prior = lp
    dtype = None if dtype is None else np.dtype(dtype)
    fn = _sharded_kernel(kind, mesh, per_task, dtype, table_size)
    out = fn(sharded.N, sharded.e, sharded.c, sharded.mask, sharded.K, params, log_prior)
    return out if padded else _local_rows(out, T)


def sharded_onecoin_log_posterior(counts: Counts, alpha, beta, tau=1.0, log_prior=None, *,
                                  mesh: jax.sharding.Mesh | None = None, dtype=None,
                                  table_size: int | None = None,
                                  padded: bool = False) -> jax.Array:
    """:func:`bda_jax.onecoin_log_posterior` (Eqs. 1-2 of [BDA] §3) with the tasks sharded
    over the devices of ``mesh`` (default :func:`task_mesh`: all devices, all processes).

    Same arguments and result as the single-device kernel — normalized log-posteriors [T, K]
    for the rows of ``counts`` (in a multi-process run: this process's tasks, K padded to the
    largest K over processes), on the first device of the mesh. ``table_size`` defaults to the
    one the single-device kernel would pick for the largest N over all processes, so both give
    the same numbers. ``padded=True`` returns instead the global result as computed: task axis
    padded (see :func:`shard_counts`) and sharded over the mesh, for work that stays sharded.
    The compiled kernel is cached per (mesh, dtype, table size, kind of prior).

    >>> import numpy as np, bda_jax as bda
    >>> counts = bda.Counts.from_arrays(N=[[1]], e=[[[1, 0, 0]]], c=[[[1, 0, 0]]])
    >>> lp = sharded_onecoin_log_posterior(counts, [7.0], [3.0])
    >>> np.exp(lp).astype(float).round(3).tolist()
    [[0.7, 0.15, 0.15]]
    """
    positive = lambda x: np.isfinite(x) & (x > 0)
    alpha = _require("alpha", alpha, positive, "finite and > 0")
    beta = _require("beta", beta, positive, "finite and > 0")
    tau = _require("tau", tau, lambda x: np.isfinite(x) & (x >= 0), "finite and >= 0")
    if table_size is None:
        top = _agree(np.array([int(np.max(np.asarray(counts.N), initial=0))]))[0]
        table_size = table_size_for(Counts.from_arrays(N=[[top]], e=[[[0]]], c=[[[0]]]))
    return _run("onecoin", counts, (alpha, beta, tau), log_prior, mesh, padded, dtype,
                table_size=int(table_size))


def sharded_confusion_log_posterior(counts: Counts, confusion, tau=1.0, log_prior=None, *,
                                    mesh: jax.sharding.Mesh | None = None,
                                    dtype=None, padded: bool = False) -> jax.Array:
    """:func:`bda_jax.confusion_log_posterior` (Eq. 4 of [BDA] §3) with the tasks sharded
    over the devices of ``mesh``; ``confusion`` [I, K, K] fixes K for every process.
    Result and ``padded`` as for :func:`sharded_onecoin_log_posterior`.

    >>> import numpy as np, bda_jax as bda
    >>> counts = bda.Counts.from_arrays(N=[[1]], e=[[[1, 0]]], c=[[[1, 0]]])
    >>> P = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    >>> np.exp(sharded_confusion_log_posterior(counts, P)).astype(float).round(4).tolist()
    [[0.7273, 0.2727]]
    """
    confusion = _require("confusion", confusion, lambda x: np.isfinite(x) & (x >= 0),
                         "finite and >= 0")
    if confusion.ndim != 3:
        raise DataError(f"confusion must be [I, K, K], got shape {confusion.shape}",
                        field="confusion")
    tau = _require("tau", tau, lambda x: np.isfinite(x) & (x >= 0), "finite and >= 0")
    return _run("confusion", counts, (confusion, tau), log_prior, mesh, padded, dtype,
                n_slots=confusion.shape[-1])
