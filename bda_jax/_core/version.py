"""The package version, one definition (``bda_jax.__version__`` re-exports it)."""
__version__ = "0.1.0"
