"""The per-task multiclass Brier score: the proper score model selection minimizes ([BDA] §5,
Appendix D.1) and the metrics report (:func:`bda_jax.metrics.brier_mc`)."""
import jax
import jax.numpy as jnp

__all__ = ["brier_mc_per_task"]


def brier_mc_per_task(proba, gold, mask) -> jax.Array:
    """[T] sum over valid slots of (p_g - 1{g = gold})^2 (Brier 1950); ``proba`` [T, K], ``gold``
    [T], ``mask`` [T, K]. Gold -1 (unlabeled, or not a candidate) gives an all-zero one-hot.
    Finite everywhere, so weights can zero tasks out.

    >>> import jax.numpy as jnp
    >>> float(brier_mc_per_task(jnp.array([[0.75, 0.25]]), jnp.array([0]), jnp.array([[True, True]]))[0])
    0.125
    """
    onehot = jnp.arange(proba.shape[-1])[None, :] == gold[:, None]
    return jnp.sum(jnp.where(mask, (proba - onehot) ** 2, 0.0), axis=-1)
