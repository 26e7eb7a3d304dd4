import numpy as np
import pytest

import bda_jax as bda
from bda_jax import risk_coverage, selective_decision


def test_selective_decision_thresholds():
    proba = np.array([[0.9, 0.1], [0.55, 0.45], [0.2, 0.8]])
    assert selective_decision(proba, 0.6).tolist() == [0, -1, 1]
    assert selective_decision(proba, 0.0).tolist() == [0, 0, 1]
    with pytest.raises(bda.DataError):
        selective_decision(proba, 1.5)


def test_risk_coverage_by_hand():
    # confidences 0.9 (right), 0.8 (wrong), 0.7 (right), 0.6 (wrong)
    rc = risk_coverage([0.7, 0.9, 0.6, 0.8], [1, 1, 0, 0])
    np.testing.assert_allclose(rc.coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(rc.risk, [0.0, 0.5, 1 / 3, 0.5])
    assert rc.aurc == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    # ties are answered together: order of tied tasks does not matter
    a = risk_coverage([0.5, 0.5, 0.9], [1, 0, 1])
    b = risk_coverage([0.5, 0.5, 0.9], [0, 1, 1])
    np.testing.assert_allclose(a.risk, b.risk)
    np.testing.assert_allclose(a.risk, [0.0, 1 / 3, 1 / 3])


def test_unknown_as_an_explicit_candidate():
    t = bda.Trace("q", (bda.Move("1", "a", 0, "propose", "A"), bda.Move("2", "b", 0, "abstain"),
                        bda.Move("3", "c", 0, "abstain")), ("A", "B"), gold="A")
    plain = bda.tally([t])
    assert plain.K.tolist() == [2] and plain.N.tolist() == [[1, 0, 0]]
    counts = bda.tally([t], abstain_candidate="unknown")
    assert counts.candidates == (("A", "B", "unknown"),) and counts.K.tolist() == [3]
    np.testing.assert_array_equal(counts.e[0, :, 2], [0, 1, 1])
    np.testing.assert_array_equal(counts.N, [[1, 1, 1]])
    post = np.exp(bda.onecoin_log_posterior(counts, np.full(3, 3.0), np.full(3, 1.0)))[0]
    assert post.argmax() == 2     # two confident abstentions outweigh one proposal
