"""The confusion arm's candidate prior pi0: train-fitted by default ([BDA] Appendix D.6), uniform
as the ``bda-confusion-uniform`` arm; both through ``evaluate`` and model files."""
import numpy as np
import pytest

import bda_jax as bda
from bda_jax.aggregators import (BDA, BDAConfusion, BDAPerAgent, evaluate, load_model,
                                 make_arm, save_model)
from bda_jax.simulate import simulate_council


@pytest.fixture(scope="module")
def skewed():
    """docs/evaluation.md's council: K = 3 semantic answers, every task with gold "yes", every
    second "no" and every fourth "maybe" of a balanced simulated council (222 tasks)."""
    traces = simulate_council(0, 400, [0.74, 0.68, 0.68], n_candidates=3,
                              candidate_labels=["yes", "no", "maybe"])
    step, seen, kept = {"yes": 1, "no": 2, "maybe": 4}, {"yes": 0, "no": 0, "maybe": 0}, []
    for t in traces:
        seen[t.gold] += 1
        if seen[t.gold] % step[t.gold] == 0:
            kept.append(t)
    return kept


def test_the_documented_numbers(skewed):
    ev = evaluate(skewed, ["bda-confusion", "bda-confusion-uniform"], folds=5, seed=0,
                  n_resamples=200, reference="bda-confusion-uniform")
    rows = {r["arm"]: r for r in ev.table}
    assert len(skewed) == 222
    # docs/evaluation.md: accuracy 0.802 against 0.743, multiclass Brier 0.327 against 0.372
    assert round(rows["bda-confusion"]["accuracy"] * 222) == 178
    assert round(rows["bda-confusion-uniform"]["accuracy"] * 222) == 165
    assert rows["bda-confusion"]["brier_mc"] == pytest.approx(0.327, abs=1e-3)
    assert rows["bda-confusion-uniform"]["brier_mc"] == pytest.approx(0.372, abs=1e-3)
    assert ev.selected["bda-confusion-uniform"][0].keys() == {"lambda", "tau"}


def test_defaults_and_the_fitted_prior(skewed):
    # stored as given (scikit-learn's contract); fits_class_prior is the arm's reading
    assert BDAConfusion().class_prior is None and BDAConfusion().fits_class_prior is True
    assert BDA("bda-confusion").fits_class_prior is True
    assert BDAPerAgent().fits_class_prior is False and BDA("bda-tempered").fits_class_prior is False
    assert make_arm("bda-confusion").fits_class_prior is True
    uniform = make_arm("bda-confusion-uniform")
    assert (uniform.arm, uniform.class_prior, uniform.fits_class_prior) == \
        ("bda-confusion", False, False)
    with pytest.raises(bda.DataError, match="class_prior"):
        BDAConfusion(class_prior="train")
    # the fitted pi0 is the add-one gold frequency of the training tasks alone
    counts = bda.tally(skewed)
    w = (np.arange(len(skewed)) % 3 != 0).astype(np.float32)
    model = BDAConfusion(n_folds=3).fit(counts, w)
    gold = np.asarray(counts.gold)
    n = np.array([np.sum((gold == k) & (w > 0)) for k in range(3)], float)
    np.testing.assert_allclose(np.exp(model.log_prior_), (n + 1) / (n.sum() + 3), atol=1e-5)
    assert n[0] > 2 * n[2]                                        # yes is the common answer


def test_model_files_record_the_prior(skewed, tmp_path):
    counts = bda.tally(skewed[:60])
    for arm, flag in (("bda-confusion", True), ("bda-confusion-uniform", False)):
        model = make_arm(arm).fit(counts)
        path = tmp_path / f"{arm}.json"
        save_model(path, model, counts_fingerprint=counts)
        back = load_model(path).estimator
        assert back.fits_class_prior is flag and (back.log_prior_ is None) is (not flag)
        np.testing.assert_array_equal(back.predict_proba(counts), model.predict_proba(counts))
