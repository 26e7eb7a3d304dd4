import atexit
import os
import shutil
import tempfile

# One persistent XLA compilation cache per test session (set before anything imports jax; the
# notebook kernels and subprocess tests inherit it): NumPyro re-traces its sampling loop on every
# MCMC.run, and many tests compile identical programs, so a session cache saves minutes. A fresh
# directory each session, removed at exit, so no run reads another run's executables.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.mkdtemp(prefix="bda-jax-xla-cache-")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache_dir
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import numpy as np
import pytest
from hypothesis import settings

# The default run is reproducible (same examples every time, so CI cannot flake on a fresh random
# draw); HYPOTHESIS_PROFILE=explore draws new random examples, more of them.
settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
