"""Numerical conventions shared by every kernel and EM: the floating dtypes allowed and the
clamped logarithm of the EM steps."""
import jax
import jax.numpy as jnp

from .errors import DataError

__all__ = ["float_dtype", "safe_log"]


def float_dtype(dtype=None) -> jnp.dtype:
    """The float dtype a computation runs in: float32 by default, float64 only under JAX's x64
    mode (a :class:`DataError` naming ``dtype`` otherwise, never a silent downcast).

    >>> float_dtype(None)
    dtype('float32')
    """
    dt = jnp.dtype(jnp.float32 if dtype is None else dtype)
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise DataError(f"dtype must be float32 or float64, got {dt}", field="dtype")
    if dt == jnp.float64 and not jax.config.read("jax_enable_x64"):
        raise DataError("float64 needs JAX's x64 mode: call "
                        "jax.config.update('jax_enable_x64', True) first", field="dtype")
    return dt


def safe_log(x) -> jax.Array:
    """``log(x)`` with zeros clamped to the dtype's smallest normal number first, so an EM step
    whose count is exactly 0 gives a large negative finite log, never -inf or NaN.

    >>> bool(jnp.isfinite(safe_log(jnp.zeros(()))))
    True
    """
    return jnp.log(jnp.maximum(x, jnp.finfo(x.dtype).tiny))
