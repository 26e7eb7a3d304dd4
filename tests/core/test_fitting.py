"""Eq. 3 priors, Dirichlet confusion rows, folds, nested CV (leak-free), the BDA aggregators, and
the padded task axis (one compiled fit per bucket of task counts)."""
import logging

import jax
import numpy as np
import pytest

import bda_jax as bda
from bda_jax import (GRIDS, fit_confusion, make_folds, prior_from_reliability, reliability,
                     select_and_predict)
from bda_jax.aggregators import BDA, BDAConfusion, BDAPerAgent, Majority
from reference import EXAMPLE, onecoin_reference, random_counts


def test_reliability_counts_consistent_moves_by_hand():
    # Consistent / informative moves per seat over the five labeled example tasks, read off the
    # file by hand (a rejection of a wrong answer is consistent): A1 5/8, A2 6/10, A3 9/10.
    counts = bda.tally(bda.read_traces(EXAMPLE))
    np.testing.assert_allclose(reliability(counts), [5 / 8, 6 / 10, 9 / 10], rtol=1e-6)
    only_claims = np.array([1, 1, 0, 0, 0, 0], np.float32)
    np.testing.assert_allclose(reliability(counts, only_claims), [1 / 4, 2 / 3, 4 / 5], rtol=1e-6)


def test_gold_not_a_candidate_counts_rejections_as_consistent():
    t = bda.Trace("x", (bda.Move("1", "a", 0, "propose", "A"), bda.Move("2", "b", 0, "propose", "B"),
                        bda.Move("3", "b", 1, "challenge", target="1")), ("A", "B"), gold="C")
    np.testing.assert_allclose(reliability(bda.tally([t])), [0.0, 0.5])


def test_eq3_prior_map():
    prior = prior_from_reliability(np.array([0.21, 0.29, 0.60]), 0.52, 1.0, 4.0)
    mu = np.asarray(prior.alpha) / 4.0
    np.testing.assert_allclose(mu, 0.52 + np.array([0.21, 0.29, 0.60]) - 1.1 / 3, atol=1e-6)
    np.testing.assert_allclose(np.asarray(prior.alpha + prior.beta), 4.0, rtol=1e-6)
    clipped = prior_from_reliability(np.array([0.0, 1.0]), 0.5, 4.0, 10.0)
    np.testing.assert_allclose(np.asarray(clipped.alpha) / 10, [0.05, 0.95], atol=1e-6)
    shared = prior_from_reliability(np.array([0.1, 0.9]), 0.6, 0.0, 8.0)
    np.testing.assert_allclose(np.asarray(shared.alpha), [4.8, 4.8], rtol=1e-6)


def test_confusion_rows_are_the_dirichlet_posterior_mean(rng):
    N, e, c, _ = random_counts(rng, 60, 3, 3, ragged=False)
    gold = rng.integers(0, 3, 60)
    counts = bda.Counts.from_arrays(N=N, e=e, c=c, gold=gold)
    w = (rng.random(60) < 0.7).astype(np.float32)
    lam = 3.0
    m = np.full((3, 3), 0.2) + np.eye(3) * 0.4
    ref = np.zeros((3, 3, 3))
    for i in range(3):
        for g in range(3):
            n = sum(c[t, i] for t in range(60) if gold[t] == g and w[t] > 0)
            ref[i, g] = (lam * m[g] + n) / (lam + np.sum(n))
    np.testing.assert_allclose(fit_confusion(counts, lam, w), ref, rtol=1e-5)


def shared_vocab_counts(rng, T=120, I=3, K=2, clusters=None):
    N, e, c, _ = random_counts(rng, T, I, K, ragged=False)
    gold = rng.integers(0, K, T)
    cluster = np.arange(T) // 2 if clusters is None else clusters
    return bda.Counts.from_arrays(N=N, e=e, c=c, gold=gold, cluster=cluster,
                                  vocab=[f"v{k}" for k in range(K)])


def test_folds_are_grouped_stratified_and_seeded(rng):
    counts = shared_vocab_counts(rng, T=200)
    f = make_folds(counts, 5, seed=3)
    assert (f == make_folds(counts, 5, seed=3)).all() and not (f == make_folds(counts, 5, 4)).all()
    cl = np.asarray(counts.cluster)
    for k in np.unique(cl):
        assert len(set(f[cl == k])) == 1
    gold = np.asarray(counts.gold)
    for fold in range(5):
        share = gold[f == fold].mean()
        assert abs(share - gold.mean()) < 0.12
    with pytest.raises(bda.DataError):
        make_folds(counts, 1)


@pytest.mark.parametrize("arm", sorted(GRIDS))
def test_nested_cv_is_leak_free(rng, arm):
    counts = shared_vocab_counts(rng, T=80, K=3)
    outer = make_folds(counts, 4, seed=0)
    base = select_and_predict(counts, arm, outer, n_inner=3)
    held = outer == 1
    gold = np.asarray(counts.gold).copy()
    gold[held] = rng.permutation((gold[held] + 1) % 3)
    moved = bda.Counts.from_arrays(N=counts.N, e=counts.e, c=counts.c, gold=gold,
                                   cluster=counts.cluster, vocab=counts.vocab)
    again = select_and_predict(moved, arm, outer, n_inner=3)
    a, b = np.asarray(base.log_proba)[held], np.asarray(again.log_proba)[held]
    assert a.tobytes() == b.tobytes()
    if arm != "bda-shared":     # the labels do reach the other folds' fits
        assert (np.asarray(base.log_proba)[~held].tobytes()
                != np.asarray(again.log_proba)[~held].tobytes())
    assert base.selected.shape == (4, GRIDS[arm].shape[1])


def test_aggregators_fit_predict_surface():
    traces = bda.read_traces(EXAMPLE)
    model = BDAPerAgent(n_folds=2).fit(traces)
    assert model is not None and model.agents_ == ("A1", "A2", "A3")
    assert set(model.params_) == {"b", "kappa", "s", "tau"} and model.params_["b"] in (0.52, 0.55, 0.58, 0.6)
    proba = model.predict_proba(traces)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    assert (proba[~np.asarray(bda.tally(traces).mask)] == 0).all()
    pred = model.predict(traces)
    assert pred.shape == (6,) and (pred == model.predict(traces)).all()
    conf = BDAConfusion(n_folds=2).fit(traces)
    assert conf.label_space_ == "positional" and conf.confusion_.shape == (3, 4, 4)
    assert Majority().fit(traces).predict(traces).tolist()[:3] == [1, 1, 1]
    with pytest.raises(bda.DataError, match="fit"):
        BDAPerAgent().predict(traces)
    with pytest.raises(bda.DataError):
        BDA("bda-magic")
    with pytest.raises(bda.DataError):
        BDAPerAgent(basis="propose").fit(bda.tally(traces))


def test_bda_fit_ignores_labels_outside_its_weights(rng):
    counts = shared_vocab_counts(rng, T=120, K=2)
    w = (np.arange(120) % 3 != 0).astype(np.float32)
    gold = np.asarray(counts.gold).copy()
    gold[w == 0] = 1 - gold[w == 0]
    moved = bda.Counts.from_arrays(N=counts.N, e=counts.e, c=counts.c, gold=gold,
                                   cluster=counts.cluster, vocab=counts.vocab)
    for arm in ("bda-per-agent", "bda-confusion"):
        a = BDA(arm, n_folds=3).fit(counts, w)
        b = BDA(arm, n_folds=3).fit(moved, w)
        assert a.params_ == b.params_
        assert a.predict_proba(counts).tobytes() == b.predict_proba(counts).tobytes()


# ---------------------------------------------------------------- task-axis buckets (padding)

def _with_empty_tasks(counts, n):
    """``counts`` and ``n`` more tasks without any move or gold (weight 0 in every fit)."""
    T, I, K = counts.shape
    z = lambda *shape: np.zeros(shape, np.int64)
    cat = lambda x, y: np.concatenate([np.asarray(x), y])
    return bda.Counts.from_arrays(N=cat(counts.N, z(n, I)), e=cat(counts.e, z(n, I, K)),
                                  c=cat(counts.c, z(n, I, K)),
                                  gold=cat(counts.gold, np.full(n, -1)),
                                  cluster=cat(counts.cluster, 10_000 + np.arange(n)),
                                  vocab=counts.vocab)


def test_padding_leaves_nested_cv_unchanged(rng):
    # 80 tasks fill their bucket exactly (no padding); 7 empty tasks more are padded to 96
    counts = shared_vocab_counts(rng, T=80, K=3)
    more = _with_empty_tasks(counts, 7)
    outer = make_folds(counts, 4, seed=0)
    labeled = np.asarray(counts.gold) >= 0
    train = np.stack([(outer != f) & labeled for f in range(4)]).astype(np.float32)
    base = select_and_predict(counts, "bda-confusion", outer, n_inner=3, train_weights=train)
    padded = select_and_predict(more, "bda-confusion", np.concatenate([outer, np.zeros(7, int)]),
                                n_inner=3, train_weights=np.pad(train, ((0, 0), (0, 7))))
    np.testing.assert_array_equal(np.asarray(padded.selected), np.asarray(base.selected))
    np.testing.assert_allclose(np.asarray(padded.inner_brier), np.asarray(base.inner_brier),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(padded.log_proba)[:80], np.asarray(base.log_proba),
                               rtol=1e-5, atol=1e-6)


def test_padded_cv_brier_matches_an_independent_reference():
    # six example tasks, padded to 64 inside the fit: every grid row's mean inner-fold Brier
    # against float64 Beta functions (reference.onecoin_reference) on the real tasks alone
    counts = bda.tally(bda.read_traces(EXAMPLE))
    model = BDAPerAgent(n_folds=2).fit(counts)
    np.testing.assert_allclose(model.reliability_, [5 / 8, 6 / 10, 9 / 10], rtol=1e-6)
    N, e, c, K = (np.asarray(x) for x in (counts.N, counts.e, counts.c, counts.K))
    gold = np.asarray(counts.gold)
    idx = np.flatnonzero(gold >= 0)
    folds = np.full(6, -1)
    folds[idx] = make_folds(counts.take(idx), 2, 0)
    onehot = np.arange(4)[None, :] == gold[:, None]
    mask = np.arange(4)[None, :] < K[:, None]
    ref = []
    for b, kappa, s, tau in GRIDS["bda-per-agent"]:
        total = n = 0.0
        for f in range(2):
            r = np.asarray(reliability(counts, ((folds >= 0) & (folds != f)).astype(np.float32)))
            mu = np.clip(b + kappa * (r - r.mean()), 0.05, 0.95)
            p = np.exp(onecoin_reference(N, e, c, K, mu * s, (1 - mu) * s, tau))
            brier = np.where(mask, (p - onehot) ** 2, 0.0).sum(1)
            total += brier[folds == f].sum()
            n += (folds == f).sum()
        ref.append(total / n)
    np.testing.assert_allclose(model.cv_brier_, ref, rtol=2e-5)
    assert model.params_ == dict(zip(("b", "kappa", "s", "tau"), GRIDS["bda-per-agent"][np.argmin(ref)]))


class _Compiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        if record.getMessage().startswith("Compiling "):
            self.messages.append(record.getMessage())


@pytest.mark.parametrize("cls", [BDAPerAgent, BDAConfusion])
def test_datasets_of_one_bucket_share_the_compiled_fit(cls):
    small = bda.tally(bda.read_traces(EXAMPLE))                     # 6 tasks and 42: bucket 64
    large = small.take(np.tile(np.arange(6), 7))
    cls(n_folds=2).fit(small)
    seen, logger = _Compiles(), logging.getLogger("jax")
    logger.addHandler(seen)
    try:
        with jax.log_compiles():
            model = cls(n_folds=2).fit(large)
    finally:
        logger.removeHandler(seen)
    assert seen.messages == [] and model.params_
