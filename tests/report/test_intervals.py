"""The report's ECE interval (issue 22.5): the centred bootstrap interval always holds its
estimate, where the percentile interval of the biased ECE does not."""
import jax
import numpy as np
import pytest

from bda_jax import DataError
from bda_jax.metrics import ece, paired_bootstrap, paired_bootstrap_stat


def _ece_stat(data, w):
    return ece(data[0], data[1], weights=w)


# a perfectly calibrated arm: in each occupied bin the accuracy equals the confidence, so its
# ECE is 0, and a resample scores 0 only if every bin stays exactly balanced
CONF = np.array([0.25] * 4 + [0.5] * 2 + [0.75] * 4)
CORR = np.array([1, 0, 0, 0] + [1, 0] + [1, 1, 1, 0], np.float64)


def test_centred_interval_holds_a_biased_estimate_the_percentile_one_misses():
    bins = np.minimum((CONF * 10).astype(int), 9)           # equal-width, 10 bins
    expected = sum(abs(CONF[bins == b].mean() - CORR[bins == b].mean()) * (bins == b).mean()
                   for b in np.unique(bins))
    assert expected == 0.0
    key = jax.random.key(0)
    args = (key, _ece_stat, (CONF, CORR), (CORR, CORR), 400)
    pct = paired_bootstrap_stat(*args, higher_is_better=False)
    cen = paired_bootstrap_stat(*args, higher_is_better=False, interval="centred")
    assert abs(pct.delta) < 1e-6 and cen.delta == pct.delta
    assert pct.ci_low > pct.delta + 1e-3                # every resample above the estimate
    assert cen.ci_low <= cen.delta <= cen.ci_high       # the centred interval holds it
    assert cen.ci_high - cen.ci_low == pytest.approx(pct.ci_high - pct.ci_low, abs=1e-9)
    assert (cen.p_win, cen.n_resamples) == (pct.p_win, pct.n_resamples)


def test_centred_interval_of_a_mean_keeps_the_width_and_holds_the_mean():
    rng = np.random.default_rng(0)
    a = rng.random(30) ** 3                             # skewed per-task values
    pct = paired_bootstrap(jax.random.key(1), a, np.zeros(30), 300)
    cen = paired_bootstrap(jax.random.key(1), a, np.zeros(30), 300, interval="centred")
    assert cen.delta == pytest.approx(a.mean())
    assert cen.ci_low <= a.mean() <= cen.ci_high
    assert cen.ci_high - cen.ci_low == pytest.approx(pct.ci_high - pct.ci_low, abs=1e-9)


def test_unknown_interval_is_a_data_error():
    with pytest.raises(DataError) as err:
        paired_bootstrap(jax.random.key(0), [1.0, 0.0], [0.0, 0.0], 10, interval="bca")
    assert err.value.field == "interval"
