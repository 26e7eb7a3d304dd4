import os

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
