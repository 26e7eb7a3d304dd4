"""Crowd aggregation on crowd-kit's surface over the sparse pair layout."""
import jax
import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

import bda_jax as bda
from bda_jax import crowd, datasets
from bda_jax.aggregators import CouncilDawidSkene as CouncilDS
from bda_jax.simulate import simulate_council
from reference import EXAMPLE, SHARED_DATA

FIELDS = ("N", "e", "c", "mask", "K", "gold", "gold_missing", "cluster", "e0", "conf0")
PAIR_FIELDS = ("task", "agent", "N", "e", "c", "e0", "conf0", "mask", "K", "gold",
               "gold_missing", "cluster")


# ---------------------------------------------------------------- data
def crowd_frame(rng, T=120, I=10, K=3, per_task=(5, 5), acc=None, repeat=0.0, conf=None):
    """Synthetic crowd: each task gets a random subset of workers; worker i answers from its
    confusion rows ``conf[i]`` (default: one-coin with accuracy ``acc[i]``). Names sort in
    creation order. Returns (frame, gold Series, label list). Most tests keep the default
    shape, so they share compiled EMs."""
    labels = [f"l{k}" for k in range(K)]
    acc = rng.uniform(0.45, 0.9, I) if acc is None else np.asarray(acc)
    if conf is None:
        conf = np.stack([a * np.eye(K) + (1 - a) / (K - 1) * (1 - np.eye(K)) for a in acc])
    gold = rng.integers(0, K, T)
    rows = []
    for t in range(T):
        n_workers = min(rng.integers(per_task[0], per_task[1] + 1), I)
        for i in rng.choice(I, n_workers, replace=False):
            n = 2 if rng.random() < repeat else 1
            for _ in range(n):
                rows.append((f"t{t:03d}", f"w{i:02d}", labels[rng.choice(K, p=conf[i][gold[t]])]))
    df = pd.DataFrame(rows, columns=["task", "worker", "label"])
    truth = pd.Series(np.asarray(labels)[gold], index=[f"t{t:03d}" for t in range(T)])
    return df, truth, labels


def frame_arrays(df):
    """Independent codes (sorted) of a frame: task, worker, label per row and the sizes."""
    tasks, workers, labels = (np.unique(df[c].to_numpy()) for c in ("task", "worker", "label"))
    code = lambda col, u: np.searchsorted(u, df[col].to_numpy())
    return (code("task", tasks), code("worker", workers), code("label", labels),
            len(tasks), len(workers), len(labels))


# ---------------------------------------------------------------- independent NumPy EM
def ref_m_step(rows, T, I, K, q, s, model, extra):
    task, worker, label = rows
    pi = (q.sum(0) + s) / (q.sum() + K * s)
    if model == "confusion":
        num = np.zeros((I, K, K)) + s + extra
        for t, i, k in zip(task, worker, label):
            num[i, :, k] += q[t]
        return num / num.sum(-1, keepdims=True), pi
    agree = np.zeros(I) + s + np.trace(extra, axis1=1, axis2=2)
    n = np.zeros(I) + 2 * s + extra.sum((1, 2))
    for t, i, k in zip(task, worker, label):
        agree[i] += q[t, k]
        n[i] += 1.0
    p = agree / n
    P = np.stack([pi_ * np.eye(K) + (1 - pi_) / (K - 1) * (1 - np.eye(K)) for pi_ in p])
    return P, pi


def ref_e_step(rows, T, K, P, pi, gold):
    task, worker, label = rows
    lp = np.tile(np.log(pi), (T, 1))
    for t, i, k in zip(task, worker, label):
        lp[t] += np.log(P[i, :, k])
    ll = logsumexp(lp, axis=1)
    q = np.exp(lp - ll[:, None])
    for t in np.flatnonzero(gold >= 0):
        q[t] = np.eye(K)[gold[t]]
        ll[t] = lp[t, gold[t]]
    return q, ll.sum()


def ref_loss(rows, q, P, pi):
    """crowd-kit 1.4.2's DawidSkene loss: E_q[log P + log pi] per label row, + entropy, / rows."""
    task, worker, label = rows
    expect = sum(q[t] @ (np.log(P[i, :, k]) + np.log(pi)) for t, i, k in zip(task, worker, label))
    entropy = -np.sum(np.where(q > 0, q * np.log(np.where(q > 0, q, 1)), 0))
    return (expect + entropy) / len(task)


def ref_crowdkit_em(df, model, n_iter=100, tol=1e-5, s=1e-10, gold=None, first_extra=None):
    """crowd-kit's loop (MV start, M-step, then E, M, loss until the loss gains < tol), our
    smoothing as a pseudo-count; returns the E-step of the final parameters as the posterior."""
    task, worker, label, T, I, K = frame_arrays(df)
    rows = (task, worker, label)
    gold = np.full(T, -1) if gold is None else gold
    q = np.zeros((T, K))
    np.add.at(q, (task, label), 1.0)
    q /= q.sum(1, keepdims=True)
    q[gold >= 0] = np.eye(K)[gold[gold >= 0]]
    zero = np.zeros((I, K, K))
    P, pi = ref_m_step(rows, T, I, K, q, s, model, zero if first_extra is None else first_extra)
    history, prev = [], -np.inf
    for _ in range(n_iter):
        q, _ = ref_e_step(rows, T, K, P, pi, gold)
        P, pi = ref_m_step(rows, T, I, K, q, s, model, zero)
        loss = ref_loss(rows, q, P, pi)
        history.append(loss)
        if loss - prev < tol:
            break
        prev = loss
    q, ll = ref_e_step(rows, T, K, P, pi, gold)
    return q, P, pi, history, ll


# ---------------------------------------------------------------- EM against the references
@pytest.mark.parametrize("model", ["confusion", "one-coin"])
def test_one_em_step_matches_numpy_reference(rng, model):
    df, _, _ = crowd_frame(rng)
    task, worker, label, T, I, K = frame_arrays(df)
    rows = (task, worker, label)
    extra = rng.uniform(0, 2, (I, K, K))
    q0 = rng.dirichlet(np.ones(K), T)
    with jax.enable_x64(True):
        pairs = crowd.pairs_from_frame(df)
        for n in (1, 3):
            r = crowd.dawid_skene_pairs(pairs, init=q0, n_iter=n, tol=0.0, smoothing=0.05,
                                        model=model, error_prior=extra, dtype="float64")
            q = q0
            for _ in range(n):
                P, pi = ref_m_step(rows, T, I, K, q, 0.05, model, extra)
                q, ll = ref_e_step(rows, T, K, P, pi, np.full(T, -1))
            assert int(r.n_iter) == n
            np.testing.assert_allclose(np.exp(np.asarray(r.log_posterior)), q, atol=1e-6)
            np.testing.assert_allclose(np.asarray(r.params.confusion), P, atol=1e-6)
            np.testing.assert_allclose(np.exp(np.asarray(r.params.log_prior)), pi, atol=1e-6)
            np.testing.assert_allclose(float(r.log_likelihood), ll, rtol=1e-9)


@pytest.mark.parametrize("cls,model", [(crowd.DawidSkene, "confusion"),
                                       (crowd.OneCoinDawidSkene, "one-coin")])
def test_full_em_matches_crowdkit_loop_reference(rng, cls, model):
    df, _, _ = crowd_frame(rng, repeat=0.1)
    q, P, pi, history, ll = ref_crowdkit_em(df, model)
    with jax.enable_x64(True):                 # crowd-kit estimates the class prior
        est = cls(dtype="float64", prior="estimate").fit(df)
    assert est.converged_ and est.n_iter_ == len(history) >= 2
    np.testing.assert_allclose(est.loss_history_, history, atol=1e-6)
    np.testing.assert_allclose(est.probas_.to_numpy(), q, atol=1e-6)
    np.testing.assert_allclose(est.priors_.to_numpy(), pi, atol=1e-6)
    # errors_: rows (worker, observed label), columns true label = P[worker, true, observed]
    np.testing.assert_allclose(est.errors_.to_numpy(), np.swapaxes(P, 1, 2).reshape(-1, P.shape[1]),
                               atol=1e-6)
    np.testing.assert_allclose(est.log_likelihood_, ll, rtol=1e-9)
    if model == "one-coin":
        np.testing.assert_allclose(est.skills_.to_numpy(), P[:, 0, 0], atol=1e-6)


def test_float32_default_agrees_with_float64(rng):
    df, _, _ = crowd_frame(rng)
    f32 = crowd.DawidSkene().fit(df)
    with jax.enable_x64(True):
        f64 = crowd.DawidSkene(dtype="float64").fit(df)
    assert f32.n_iter_ == f64.n_iter_
    np.testing.assert_allclose(f32.probas_, f64.probas_, atol=1e-4)
    np.testing.assert_allclose(f32.loss_history_, f64.loss_history_, atol=1e-5)


def test_gold_clamping_keeps_labels_and_fixes_a_flipped_crowd(rng):
    """K = 2, three always-wrong workers and three good ones, 3-4 per task: unsupervised EM
    converges to the mirror of the truth; clamping 10 % of tasks at their gold recovers it."""
    T, K = 300, 2
    wrong = 0.05 * np.eye(K) + 0.95 * (1 - np.eye(K))
    good = 0.8 * np.eye(K) + 0.2 * (1 - np.eye(K))
    df, truth, labels = crowd_frame(rng, T=T, I=6, K=K, per_task=(3, 4),
                                    conf=np.stack([wrong] * 3 + [good] * 3))
    free = crowd.DawidSkene().fit(df)
    known = truth.iloc[::10]
    clamped = crowd.DawidSkene().fit(df, true_labels=known)
    rest = truth.index.difference(known.index)
    acc = lambda est: (est.labels_.loc[rest] == truth.loc[rest]).mean()
    assert acc(free) < 0.2 and acc(clamped) > 0.9, (acc(free), acc(clamped))
    hot = (known.to_numpy()[:, None] == np.asarray(labels)[None, :]).astype(float)
    np.testing.assert_array_equal(clamped.probas_.loc[known.index].to_numpy(), hot)
    assert (clamped.labels_.loc[known.index] == known).all()
    # the reference loop with the same clamping
    slots = np.full(T, -1)
    slots[np.arange(0, T, 10)] = np.searchsorted(labels, known.to_numpy())
    q, *_ = ref_crowdkit_em(df, "confusion", gold=slots)
    np.testing.assert_allclose(clamped.probas_.to_numpy(), q, atol=1e-4)
    # one-coin accepts gold too; so do [T] slots
    np.testing.assert_array_equal(
        crowd.DawidSkene().fit(df, true_labels=slots).probas_.to_numpy(),
        clamped.probas_.to_numpy())
    assert (crowd.OneCoinDawidSkene().fit(df, true_labels=known).labels_.loc[rest]
            == truth.loc[rest]).mean() > 0.9


def test_initial_error_strategies(rng):
    df, _, labels = crowd_frame(rng, T=300, I=6, K=2, per_task=(3, 4))
    task, worker, label, T, I, K = frame_arrays(df)
    workers = sorted(df.worker.unique())
    index = pd.MultiIndex.from_product([workers, labels], names=["worker", "label"])
    counts = rng.uniform(0, 5, (I * K, K))
    init = pd.DataFrame(counts, index=index, columns=labels)
    extra = np.swapaxes(counts.reshape(I, K, K), 1, 2)            # [I, true, observed]
    # the first M-step only (n_iter=1, posterior rule: the returned parameters are M(q0))
    q0 = np.zeros((T, K))
    np.add.at(q0, (task, label), 1.0)
    q0 /= q0.sum(1, keepdims=True)
    P_add, _ = ref_m_step((task, worker, label), T, I, K, q0, 1e-10, "confusion", extra)
    for strategy, want in (("addition", P_add),
                           ("assign", (extra + 1e-10) / (extra + 1e-10).sum(-1, keepdims=True))):
        est = crowd.DawidSkene(1, 0.0, strategy, criterion="posterior").fit(df, initial_error=init)
        np.testing.assert_allclose(est.errors_.to_numpy(),
                                   np.swapaxes(want, 1, 2).reshape(-1, K), atol=1e-5)
    # crowd-kit semantics: later M-steps ignore initial_error (compare with the reference loop)
    with jax.enable_x64(True):
        full = crowd.DawidSkene(initial_error_strategy="addition", dtype="float64").fit(
            df, initial_error=init)
    q, *_, history, _ = ref_crowdkit_em(df, "confusion", first_extra=extra)
    np.testing.assert_allclose(full.loss_history_, history, atol=1e-6)
    np.testing.assert_allclose(full.probas_.to_numpy(), q, atol=1e-6)
    with pytest.raises(bda.DataError, match="initial_error"):
        crowd.DawidSkene(initial_error_strategy="assign").fit(df, initial_error=init.iloc[2:])
    with pytest.raises(bda.DataError, match="initial_error_strategy"):
        crowd.DawidSkene(initial_error_strategy="replace")


def test_council_arm_and_crowd_class_share_one_em(rng):
    df, _, _ = crowd_frame(rng)
    pairs = crowd.pairs_from_frame(df)
    counts = pairs.to_dense()
    for model in ("one-coin", "confusion"):
        arm = CouncilDS(model=model, tol=1e-6, smoothing=0.01).fit(counts)
        est = crowd.DawidSkene(model=model, tol=1e-6, smoothing=0.01, criterion="posterior")
        est.fit(counts)
        assert arm.n_iter_ == est.n_iter_
        np.testing.assert_allclose(np.exp(arm.log_proba_), est.probas_.to_numpy(), atol=1e-6)
        np.testing.assert_allclose(est.predict_proba(counts), arm.predict_proba(counts),
                                   atol=1e-6)


# ---------------------------------------------------------------- majority vote and Wawa
def test_majority_vote_and_wawa_match_pandas(rng):
    df, _, labels = crowd_frame(rng, T=200, I=9, per_task=(3, 7), repeat=0.2)
    scores = df.groupby(["task", "label"]).size().unstack("label", fill_value=0)[labels]
    shares = scores.div(scores.sum(axis=1), axis=0)
    mv = crowd.MajorityVote(tie_break="first").fit(df)
    np.testing.assert_allclose(mv.probas_.loc[shares.index, labels], shares, atol=1e-6)
    pd.testing.assert_series_equal(mv.labels_, shares.idxmax(axis=1).rename("agg_label"),
                                   check_index_type=False, check_names=False)
    # Wawa: skill = share of a worker's distinct (task, label) answers equal to MV's label
    distinct = df.drop_duplicates()
    agree = distinct.label.to_numpy() == mv.labels_.loc[distinct.task].to_numpy()
    skill = pd.Series(agree, index=distinct.worker.to_numpy()).groupby(level=0).mean()
    wawa = crowd.Wawa(tie_break="first").fit(df)
    np.testing.assert_allclose(wawa.skills_.loc[skill.index], skill, atol=1e-6)
    np.testing.assert_allclose(mv.skills_.loc[skill.index], skill, atol=1e-6)
    weighted = (df.assign(w=df.worker.map(skill)).groupby(["task", "label"]).w.sum()
                .unstack("label", fill_value=0)[labels])
    want = weighted.div(weighted.sum(axis=1), axis=0)
    np.testing.assert_allclose(wawa.probas_.loc[want.index, labels], want, atol=1e-6)
    assert (wawa.labels_ == want.idxmax(axis=1)).all()
    # predict on other data reuses the fitted skills
    sub = df[df.task < "t050"]
    np.testing.assert_allclose(wawa.predict_proba(sub), want.loc[sorted(sub.task.unique())],
                               atol=1e-6)


def test_ties_first_and_seeded_random():
    df = pd.DataFrame({"task": np.repeat([f"t{k:02d}" for k in range(40)], 2),
                       "worker": ["a", "b"] * 40, "label": ["x", "y"] * 40})   # every task tied
    first = crowd.MajorityVote(tie_break="first").fit_predict(df)
    assert (first == "x").all()                         # crowd-kit: first label in column order
    r0 = crowd.MajorityVote(seed=0).fit_predict(df)
    assert set(r0) == {"x", "y"}
    pd.testing.assert_series_equal(r0, crowd.MajorityVote(seed=0).fit_predict(df))
    assert (r0 != crowd.MajorityVote(seed=1).fit_predict(df)).any()
    with pytest.raises(bda.DataError, match="tie_break"):
        crowd.MajorityVote(tie_break="last")


# ---------------------------------------------------------------- data paths
def test_pairs_match_dense_on_every_field():
    sim = simulate_council(3, 30, [0.7, 0.6, 0.65], n_candidates=(2, 4), n_rounds=3)
    for traces, opts in [(sim, {}), (sim, {"max_round": 0}), (sim, {"one_move_per_round": True}),
                         (sim, {"permute_candidates": 5}), (bda.read_traces(EXAMPLE), {})]:
        dense = bda.tally(traces, **opts)
        pairs = bda.tally(traces, layout="pairs", **opts)
        assert isinstance(pairs, crowd.PairCounts) and pairs.shape == dense.shape
        back = pairs.to_dense()
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(back, f), getattr(dense, f), err_msg=f)
        relaid = dense.to_pairs()
        for f in PAIR_FIELDS:
            np.testing.assert_array_equal(getattr(relaid, f), getattr(pairs, f), err_msg=f)
        assert pairs.info == dense.info
        assert (np.asarray(pairs.N) > 0).all()             # only pairs with a move
        idx = np.array([4, 0, 4, 2])
        sub = pairs.take(idx).to_dense()
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(sub, f), getattr(dense.take(idx), f))
        assert pairs.take(idx).task_ids == dense.take(idx).task_ids
    leaves, tree = jax.tree_util.tree_flatten(pairs)       # a pytree with static sizes
    again = jax.tree_util.tree_unflatten(tree, leaves)
    assert again.n_agents == pairs.n_agents and again.n_tasks == pairs.n_tasks
    with pytest.raises(bda.DataError, match="layout"):
        bda.tally(sim, layout="sparse")


@pytest.mark.parametrize("sparse", [False, True])
def test_dense_grid_packed_directly_or_from_its_pairs_is_the_same(monkeypatch, sparse):
    """The dense tally packs a sparse [T, I] grid (crowd data) through its pairs and a full one
    directly (``_DENSE_DIRECT``): both routes give every field the same on the same moves."""
    import bda_jax._core.counts as counts_module   # private: the switch between the two routes
    if sparse:   # 300 tasks, 461 workers, 1,720 labels: nearly every (task, worker) cell empty
        traces = datasets.to_traces(datasets.load_crowd("act_CF"))
    else:
        traces = simulate_council(7, 25, [0.7, 0.6, 0.65], n_candidates=(2, 4), n_rounds=3)
    routes = {}
    for name, cells_per_move in (("direct", 10**9), ("pairs", 0)):
        monkeypatch.setattr(counts_module, "_DENSE_DIRECT", cells_per_move)
        routes[name] = bda.tally(traces)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(routes["pairs"], f), getattr(routes["direct"], f),
                                      err_msg=f)
        assert np.asarray(getattr(routes["pairs"], f)).dtype == \
            np.asarray(getattr(routes["direct"], f)).dtype, f
    assert routes["pairs"].info == routes["direct"].info


def test_frame_traces_and_counts_give_identical_results(rng):
    df, truth, labels = crowd_frame(rng)
    traces = [bda.Trace(task, tuple(bda.Move(f"m{j}", w, 0, "propose", lab)
                                    for j, (w, lab) in enumerate(zip(g.worker, g.label))),
                        tuple(labels), truth[task])
              for task, g in df.groupby("task", sort=True)]
    workers = sorted(df.worker.unique())
    from_frame = crowd.pairs_from_frame(df)
    from_traces = bda.tally(traces, agents=workers, layout="pairs")
    for f in ("task", "agent", "e0", "mask"):
        np.testing.assert_array_equal(getattr(from_frame, f), getattr(from_traces, f))
    counts = bda.tally(traces, agents=workers)
    for cls in (crowd.MajorityVote, crowd.Wawa, crowd.DawidSkene, crowd.OneCoinDawidSkene):
        ref = cls().fit(df)
        for data in (traces, counts, counts.to_pairs(), from_traces):
            est = cls().fit(data)
            np.testing.assert_allclose(est.probas_.to_numpy(), ref.probas_.to_numpy(), atol=1e-6)
            assert est.probas_.index.tolist() == ref.probas_.index.tolist()
            assert est.labels_.tolist() == ref.labels_.tolist()
            proba = est.predict_proba(counts)            # the aggregator interface: NumPy [T, K]
            assert isinstance(proba, np.ndarray) and proba.shape == (120, 3)
            np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)
            np.testing.assert_allclose(proba, ref.probas_.to_numpy(), atol=1e-5)
            assert (est.predict(counts) == np.searchsorted(labels, est.labels_)).all()


def test_predict_on_new_frame_and_fitted_attributes(rng):
    df, _, labels = crowd_frame(rng)
    est = crowd.DawidSkene().fit(df)
    assert est.probas_.index.name == "task" and est.probas_.columns.tolist() == labels
    np.testing.assert_allclose(est.probas_.sum(axis=1), 1.0, atol=1e-6)
    assert est.labels_.name == "agg_label" and est.priors_.name == "prior"
    assert est.errors_.index.names == ["worker", "label"] and est.errors_.columns.tolist() == labels
    np.testing.assert_allclose(est.errors_.groupby(level="worker").sum(), 1.0, atol=1e-5)
    assert len(est.loss_history_) == est.n_iter_ and np.isfinite(est.log_likelihood_)
    # predict_proba(frame) = one E-step with the fitted parameters: on the fit data, probas_
    pd.testing.assert_frame_equal(est.predict_proba(df), est.probas_, atol=1e-6)
    pd.testing.assert_series_equal(est.predict(df), est.labels_)
    sub = df[df.task.isin(["t003", "t010", "t077"])]
    np.testing.assert_allclose(est.predict_proba(sub), est.probas_.loc[["t003", "t010", "t077"]],
                               atol=1e-5)
    with pytest.raises(bda.DataError, match="worker"):
        est.predict_proba(pd.DataFrame({"task": ["x"], "worker": ["stranger"], "label": ["l0"]}))
    with pytest.raises(bda.DataError, match="label"):
        est.predict_proba(pd.DataFrame({"task": ["x"], "worker": ["w01"], "label": ["l9"]}))
    # spectral start: same surface, a sensible answer
    spec = crowd.SpectralDawidSkene().fit(df)
    assert spec.converged_ and (spec.labels_ == est.labels_).mean() > 0.9


def test_bad_input_names_the_field(rng):
    df, truth, _ = crowd_frame(rng, T=20, I=4, K=2)
    cases = [(df.drop(columns="worker"), "worker"), (df.iloc[:0], "data"),
             (df.assign(label=df.label.where(df.index != 3)), "label"),
             (df.assign(task=df.task.where(df.index != 5)), "task"),
             ("not a frame", "data")]
    for bad, field in cases:
        for cls in (crowd.MajorityVote, crowd.DawidSkene):
            with pytest.raises(bda.DataError) as err:
                cls().fit(bad)
            assert err.value.field == field and repr(field) in str(err.value)
    with pytest.raises(bda.DataError) as err:
        crowd.DawidSkene().fit(df, true_labels=pd.Series({"t000": "l0", "nowhere": "l1"}))
    assert err.value.field == "true_labels" and "nowhere" in str(err.value)
    with pytest.raises(bda.DataError, match="true_labels"):
        crowd.DawidSkene().fit(df, true_labels=pd.Series({"t000": "l7"}))
    with pytest.raises(bda.DataError, match="true_labels"):
        crowd.DawidSkene().fit(df, true_labels=pd.Series({"t000": None}))
    with pytest.raises(bda.DataError, match="fit"):
        crowd.DawidSkene().predict_proba(df)
    with pytest.raises(bda.DataError, match="model"):
        crowd.DawidSkene(model="two-coin")
    with pytest.raises(bda.DataError, match="n_iter"):
        crowd.DawidSkene(n_iter=0)
    with pytest.raises(bda.DataError, match="error_prior"):
        crowd.DawidSkene(error_prior=np.ones((3, 3))).fit(df)


def test_deterministic_and_row_order_free(rng):
    df, _, _ = crowd_frame(rng)
    shuffled = df.sample(frac=1.0, random_state=1)
    for cls in (crowd.Wawa, crowd.DawidSkene, crowd.OneCoinDawidSkene,
                crowd.SpectralDawidSkene):
        a, b, c = cls().fit(df), cls().fit(df), cls().fit(shuffled)
        pd.testing.assert_frame_equal(a.probas_, b.probas_, check_exact=True)
        pd.testing.assert_series_equal(a.labels_, b.labels_)
        np.testing.assert_allclose(c.probas_, a.probas_, atol=1e-6)
        assert (c.labels_ == a.labels_).all()


def test_error_prior_is_a_persistent_dirichlet_prior(rng):
    """A diagonal pseudo-count pulls every worker toward accuracy at every M-step."""
    df, _, _ = crowd_frame(rng)
    plain = crowd.DawidSkene().fit(df)
    strong = crowd.DawidSkene(error_prior=50.0).fit(df)
    diag = lambda est: np.mean([np.trace(est.errors_.loc[w].to_numpy()) for w in
                                est.workers_]) / 3
    assert diag(strong) > diag(plain) + 0.05
    assert (strong.labels_ == crowd.MajorityVote().fit(df).labels_).mean() > 0.9


# ---------------------------------------------------------------- real data
def test_zheng_sentiment_matches_crowdkit_numbers():
    root = SHARED_DATA / "zheng_d_sentiment"
    if not (root / "answer.csv").exists():
        pytest.skip(f"shared data not present at {root}")
    df = pd.read_csv(root / "answer.csv").rename(
        columns={"id": "task", "worker": "worker", "answer": "label"})
    truth = pd.read_csv(root / "truth.csv").set_index("q")["truth"]
    accuracy = lambda labels: float((labels.loc[truth.index] == truth).mean())
    ds = crowd.DawidSkene().fit(df)
    assert abs(accuracy(ds.labels_) - 0.960) <= 0.01          # crowd-kit 1.4.2: 0.960
    assert abs(accuracy(crowd.MajorityVote().fit_predict(df)) - 0.932) <= 0.01   # 0.932
    assert ds.converged_ and ds.n_iter_ == 5                  # crowd-kit 1.4.2: 5 iterations


def test_glad_and_mace_on_crowdkits_surface(rng):
    """GLAD and MACE classes: crowd-kit's attributes on a small crowd, gold clamping, per-task
    models refuse new data, and bad options name the field."""
    df, truth, _ = crowd_frame(rng, T=60, I=8, K=3)
    gold = truth.iloc[:5]
    glad = crowd.GLAD().fit(df, true_labels=gold)
    mace = crowd.MACE(n_restarts=3, n_iter=20).fit(df, true_labels=gold)
    for model in (glad, mace):
        assert list(model.probas_.columns) == sorted(df["label"].unique())
        np.testing.assert_allclose(model.probas_.sum(axis=1), 1.0, atol=1e-5)
        assert (model.labels_.loc[gold.index] == gold).all()            # clamped
        assert model.predict_proba() is model.probas_
        with pytest.raises(bda.DataError) as err:
            model.predict_proba(df)
        assert err.value.field == "data"
    assert glad.alphas_.index.name == "worker" and len(glad.alphas_) == 8
    assert len(glad.betas_) == 60 and glad.n_iter_ >= 2 and glad.loss_history_
    assert mace.spamming_.shape == (8, 2) and mace.thetas_.shape == (8, 3)
    # VB weights are geometric means (exp E[log p]), so a row sums to a little under 1
    assert (mace.spamming_ > 0).all() and (mace.spamming_.sum(1) <= 1.0 + 1e-6).all()
    for cls in (crowd.GLAD, crowd.MACE):
        with pytest.raises(bda.DataError) as err:
            cls(votes="some")
        assert err.value.field == "votes"


def test_glad_matches_crowdkit_on_bundled_bluebirds():
    """crowd-kit 1.4.2's GLAD scored 0.7222 on Bluebirds here (benchmarks/results/
    crowdkit_reference.json, its defaults); the same algorithm, start and stopping rule must
    land on the same labels."""
    from bda_jax.datasets import load_crowd
    data = load_crowd("bluebirds")
    labels = crowd.GLAD().fit(data.labels).labels_
    assert (labels.loc[data.gold.index] == data.gold).mean() == pytest.approx(78 / 108)


@pytest.mark.skipif(not (SHARED_DATA / "zheng_s4_relevance").exists(),
                    reason=f"shared data absent: {SHARED_DATA / 'zheng_s4_relevance'}")
def test_one_coin_does_not_collapse_on_s_rel():
    """crowd-kit 1.4.2's OneCoinDawidSkene collapses on S4 relevance (0.258 on the 4,460 gold
    tasks after 100 iterations): its estimated class prior absorbs one worker's 7,920 near-
    constant labels. With the estimated prior we land on the same fixed point; our default
    uniform prior does not collapse."""
    from bda_jax.datasets import load_crowd
    data = load_crowd("s4_relevance", root=SHARED_DATA)
    acc = lambda m: (m.labels_.loc[data.gold.index].astype(str) == data.gold).mean()
    assert acc(crowd.OneCoinDawidSkene().fit(data.labels)) > 0.45
    assert acc(crowd.OneCoinDawidSkene(prior="estimate").fit(data.labels)) == \
        pytest.approx(0.2578, abs=0.002)
