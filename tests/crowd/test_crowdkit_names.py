"""crowd-kit's argument names on our crowd classes (docs/coming-from-crowd-kit.md).

A table of calls written with crowd-kit 1.4.2's argument names runs against our classes on the
bundled crowds; the expected labels are crowd-kit's own, recorded in
benchmarks/results/crowdkit_reference.json (crowd-kit 1.4.2, pandas 3.1.1). The other checks
compare with hand computations: the weighted vote of ``MajorityVote.fit(data, skills)``, GLAD's
first E-step under ``labels_priors``, and the positional order of crowd-kit's fields (copied
from its source, crowdkit/aggregation/classification/*.py).

Cost: GLAD compiles once per shape (~5 s); the GLAD checks use bluebirds' shape (that of
test_crowd.py's GLAD check) and the 60 x 6 x 3 shape of test_glad_mace.py, so a session that
runs those files compiles them once.
"""
import inspect
import json

import numpy as np
import pandas as pd
import pytest

import bda_jax as bda
from bda_jax import crowd, datasets
from reference import REPO

RECORDED = json.loads((REPO / "benchmarks" / "results" / "crowdkit_reference.json").read_text())
RECORDS = {(r["dataset"], r["method"]): r for r in RECORDED["records"]}


@pytest.fixture(scope="module")
def sets():
    return {name: datasets.load_crowd(name) for name in ("bluebirds", "act_CF", "act_MS")}


def _summary(labels, gold):
    """(predicted label counts, correct on gold) as the recording counts them (strings)."""
    labels = labels.astype(str)
    return (labels.value_counts().sort_index().to_dict(),
            int((labels.loc[gold.index] == gold).sum()))


# ---------------------------------------------------------------- the table of crowd-kit calls
# (data set, crowd-kit method, our class, crowd-kit's arguments by name, our extra arguments)
CALLS = [
    ("act_CF", "MV", crowd.MajorityVote, {"default_skill": None, "on_missing_skill": "error"},
     {"tie_break": "crowdkit"}),
    ("act_MS", "MV", crowd.MajorityVote, {}, {"tie_break": "crowdkit"}),
    ("act_CF", "Wawa", crowd.Wawa, {}, {"tie_break": "crowdkit"}),
    ("act_MS", "Wawa", crowd.Wawa, {}, {"tie_break": "crowdkit"}),
    ("bluebirds", "OneCoinDS", crowd.OneCoinDawidSkene,
     {"n_iter": 100, "tol": 1e-5, "initial_error_strategy": None},
     {"prior": "estimate", "tie_break": "crowdkit"}),
    ("bluebirds", "GLAD", crowd.GLAD,
     {"n_iter": 100, "tol": 1e-5, "silent": True, "labels_priors": None,
      "alphas_priors_mean": None, "betas_priors_mean": None, "m_step_max_iter": 25,
      "m_step_tol": 0.01}, {"tie_break": "crowdkit"}),
]


@pytest.mark.parametrize("name,method,cls,kwargs,ours", CALLS,
                         ids=[f"{c[1]}-{c[0]}" for c in CALLS])
def test_crowdkit_calls_give_crowdkits_recorded_labels(sets, name, method, cls, kwargs, ours):
    """With crowd-kit's arguments (its defaults spelled out) plus the settings the docs give
    for its tie order and class prior, every label count and the number correct equal
    crowd-kit's (act_CF's majority vote has 27 exact ties, act_MS's 188)."""
    record = RECORDS[(name, method)]
    if method not in ("MV", "Wawa"):
        assert {k: v for k, v in record["params"].items() if k in kwargs} == kwargs
    data = sets[name]
    est = cls(**kwargs, **ours).fit(data.labels)
    assert _summary(est.labels_, data.gold) == (record["pred_label_counts"], record["n_correct"])
    if "n_iterations_run" in record["convergence"]:
        assert est.n_iter_ == record["convergence"]["n_iterations_run"]


def test_dawid_skene_differs_from_crowdkit_only_where_the_docs_say(sets):
    """DawidSkene with crowd-kit's arguments runs crowd-kit's number of M-steps; its posterior
    is one E-step later than crowd-kit's (documented), which moves one bluebirds task."""
    record = RECORDS[("bluebirds", "DS")]
    data = sets["bluebirds"]
    est = crowd.DawidSkene(n_iter=100, tol=1e-5, initial_error_strategy=None,
                           tie_break="crowdkit").fit(data.labels)
    assert est.n_iter_ == record["convergence"]["n_iterations_run"] == 2
    counts, correct = _summary(est.labels_, data.gold)
    assert abs(correct - record["n_correct"]) == 1
    assert sum(abs(counts[k] - v) for k, v in record["pred_label_counts"].items()) == 2


def test_positional_order_is_crowdkits():
    """crowd-kit's attrs fields in its source order are our leading positional parameters."""
    fields = {crowd.MajorityVote: ["default_skill", "on_missing_skill"],
              crowd.DawidSkene: ["n_iter", "tol", "initial_error_strategy"],
              crowd.OneCoinDawidSkene: ["n_iter", "tol", "initial_error_strategy"],
              crowd.GLAD: ["n_iter", "tol", "silent", "labels_priors", "alphas_priors_mean",
                           "betas_priors_mean", "m_step_max_iter", "m_step_tol"],
              crowd.MACE: ["n_restarts", "n_iter", "method", "smoothing", "default_noise",
                           "alpha", "beta", "random_state", "verbose"],
              crowd.Wawa: []}
    for cls, names in fields.items():
        params = list(inspect.signature(cls).parameters.values())
        positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
        assert positional == names, cls.__name__
    glad = crowd.GLAD(50, 1e-4, True, None, None, None, 10, 0.1)
    assert (glad.n_iter, glad.m_step_max_iter, glad.m_step_tol) == (50, 10, 0.1)
    mace = crowd.MACE(3, 20, "em", 0.2, 0.4, 0.5, 0.5, 7, 0)
    assert (mace.smoothing, mace.default_noise, mace.seed, mace.random_state) == (0.2, 0.4, None, 7)
    fit = inspect.signature(crowd.MajorityVote.fit).parameters
    assert list(fit)[:3] == ["self", "data", "skills"]
    assert list(inspect.signature(crowd.DawidSkene.fit).parameters)[:4] == \
        ["self", "data", "true_labels", "initial_error"]


# ---------------------------------------------------------------- MajorityVote(skills=...)
FRAME = pd.DataFrame({"task": ["t1", "t1", "t1", "t2", "t2", "t2", "t3", "t3", "t3"],
                      "worker": ["p1", "p2", "p3"] * 3,
                      "label": [0, 0, 1, 0, 1, 0, 1, 1, 0]})


def _weighted_by_hand(frame, skill):
    """Per task, each label's share of the summed worker weights (plain loop)."""
    out = {}
    for task, rows in frame.groupby("task"):
        totals = {}
        for w, lab in zip(rows.worker, rows.label):
            totals[lab] = totals.get(lab, 0.0) + skill[w]
        s = sum(totals.values())
        out[task] = {lab: v / s for lab, v in totals.items()}
    return pd.DataFrame(out).T.fillna(0.0).sort_index(axis=1)


def test_majority_vote_skills_is_the_weighted_vote():
    skills = pd.Series({"p3": 0.3, "p1": 0.2, "p2": 0.9})            # any order
    mv = crowd.MajorityVote()
    labels = mv.fit_predict(FRAME, skills)                           # crowd-kit's call
    expected = _weighted_by_hand(FRAME, skills)
    np.testing.assert_allclose(mv.probas_.to_numpy(), expected.to_numpy(), atol=1e-6)
    assert labels.tolist() == expected.idxmax(axis=1).tolist() == [0, 1, 1]
    # skills_: the share of each worker's answers that agree with labels_ (crowd-kit's)
    agree = (FRAME.label.to_numpy() == labels.loc[FRAME.task].to_numpy())
    np.testing.assert_allclose(mv.skills_, FRAME.assign(a=agree).groupby("worker").a.mean())
    # unweighted: t2 goes the other way; new data is weighted by the fitted skills
    assert crowd.MajorityVote().fit_predict(FRAME).tolist() == [0, 0, 1]
    new = FRAME[FRAME.task == "t2"]
    np.testing.assert_allclose(mv.predict_proba(new).to_numpy(),
                               _weighted_by_hand(new, skills).to_numpy(), atol=1e-6)
    # [I] weights in workers_ order are the same call
    same = crowd.MajorityVote().fit(FRAME, np.array([0.2, 0.9, 0.3]))
    np.testing.assert_array_equal(same.probas_.to_numpy(), mv.probas_.to_numpy())


def test_on_missing_skill_modes():
    partial = pd.Series({"p1": 0.2, "p2": 0.9})                      # p3 has no skill
    with pytest.raises(bda.DataError, match="p3") as err:
        crowd.MajorityVote().fit(FRAME, partial)                     # crowd-kit's default
    assert err.value.field == "skills"
    ignore = crowd.MajorityVote(on_missing_skill="ignore").fit(FRAME, partial)
    np.testing.assert_allclose(ignore.probas_.to_numpy(), _weighted_by_hand(
        FRAME[FRAME.worker != "p3"], partial).to_numpy(), atol=1e-6)
    assert ignore.skills_.index.tolist() == ["p1", "p2"]             # p3's votes did not count
    value = crowd.MajorityVote(default_skill=0.1, on_missing_skill="value").fit(FRAME, partial)
    np.testing.assert_allclose(value.probas_.to_numpy(), _weighted_by_hand(
        FRAME, {"p1": 0.2, "p2": 0.9, "p3": 0.1}).to_numpy(), atol=1e-6)
    only_p3 = pd.DataFrame({"task": ["a", "b"], "worker": ["p3", "p1"], "label": [1, 0]})
    with pytest.raises(bda.DataError, match="no vote by a worker with a known skill") as err:
        crowd.MajorityVote(on_missing_skill="ignore").fit(only_p3, partial)
    assert err.value.task_id == "a"
    bad = [({"default_skill": 0.3}, "default_skill"),                # needs "value"
           ({"on_missing_skill": "value"}, "default_skill"),         # needs default_skill
           ({"default_skill": "a", "on_missing_skill": "value"}, "default_skill"),
           ({"on_missing_skill": "drop"}, "on_missing_skill")]
    for kwargs, field in bad:
        with pytest.raises(bda.DataError) as err:
            crowd.MajorityVote(**kwargs)
        assert err.value.field == field
    for skills in (pd.Series({"p1": -1.0, "p2": 1, "p3": 1}), np.ones(2),
                   pd.Series({"p1": "x", "p2": 1, "p3": 1})):
        with pytest.raises(bda.DataError) as err:
            crowd.MajorityVote().fit(FRAME, skills)
        assert err.value.field == "skills"


def test_vote_counters_refuse_labels_they_would_not_read():
    for cls in (crowd.MajorityVote, crowd.Wawa):
        with pytest.raises(bda.DataError) as err:
            cls().fit(FRAME, true_labels=pd.Series({"t1": 0}))
        assert err.value.field == "true_labels"


def test_appearance_ties_need_a_frame():
    counts = bda.tally(datasets.to_traces(datasets.load_crowd("bluebirds")))
    for tie in ("appearance", "crowdkit"):
        with pytest.raises(bda.DataError) as err:
            crowd.MajorityVote(tie_break=tie).fit(counts)
        assert err.value.field == "tie_break"
    # a tie of two labels: "first" takes the sorted first, "appearance" the first seen
    tie = pd.DataFrame({"task": ["a", "a"], "worker": ["u", "v"], "label": ["z", "y"]})
    assert crowd.MajorityVote(tie_break="first").fit_predict(tie).tolist() == ["y"]
    assert crowd.MajorityVote(tie_break="appearance").fit_predict(tie).tolist() == ["z"]


# ---------------------------------------------------------------- GLAD
def _glad_first_e_step(frame, labels, prior):
    """GLAD's E-step at crowd-kit's start (alpha = 1, log beta = 1) with class prior ``prior``:
    log q[t, c] = log prior_c + sum_rows [y = c] log s + [y != c] log((1 - s) / (K - 1))."""
    K = len(labels)
    x = np.exp(1.0)
    log_s, log_not = -np.log1p(np.exp(-x)), -np.log1p(np.exp(x)) - np.log(K - 1)
    out = {}
    for task, rows in frame.groupby("task"):
        score = np.log(np.asarray(prior, float))
        for y in rows.label:
            score = score + np.where(np.asarray(labels) == y, log_s, log_not)
        out[task] = np.exp(score - np.logaddexp.reduce(score))
    return pd.DataFrame(out, index=labels).T.sort_index()


def test_glad_labels_priors_enter_as_the_class_prior(sets):
    data = sets["bluebirds"]
    prior = pd.Series({"1": 0.8, "0": 0.2})
    one = crowd.GLAD(n_iter=1, labels_priors=prior).fit(data.labels)
    # one EM iteration returns the E-step at the start, where the prior is all that moved
    np.testing.assert_allclose(one.probas_.to_numpy(),
                               _glad_first_e_step(data.labels, ["0", "1"], [0.2, 0.8]).to_numpy(),
                               atol=2e-5)
    assert one.priors_.to_dict() == pytest.approx({"0": 0.2, "1": 0.8})
    # a uniform labels_priors is crowd-kit's default; an unnormalized one is the same prior
    default = crowd.GLAD().fit(data.labels)
    uniform = crowd.GLAD(labels_priors=pd.Series({"0": 3.0, "1": 3.0})).fit(data.labels)
    np.testing.assert_array_equal(uniform.probas_.to_numpy(), default.probas_.to_numpy())
    skewed = crowd.GLAD(labels_priors=pd.Series({"0": 0.02, "1": 0.98})).fit(data.labels)
    assert (skewed.labels_ == "1").sum() > (default.labels_ == "1").sum()
    with pytest.raises(bda.DataError) as err:                        # a label of the data lacks one
        crowd.GLAD(labels_priors=pd.Series({"0": 1.0})).fit(data.labels)
    assert err.value.field == "labels_priors"
    with pytest.raises(bda.DataError) as err:
        crowd.GLAD(labels_priors=pd.Series({"0": 0.0, "1": 1.0})).fit(data.labels)
    assert err.value.field == "labels_priors"


def test_glad_labels_priors_index_is_the_label_set():
    """crowd-kit takes the label set from labels_priors' index: a label nobody used becomes a
    class (and K in log(K - 1) counts it). 60 tasks x 6 workers, labels 0/1, prior over 0-2."""
    rs = np.random.RandomState(3)
    task, worker = np.repeat(np.arange(60), 6), np.tile(np.arange(6), 60)
    truth = rs.randint(0, 2, 60)
    label = np.where(rs.rand(360) < 0.75, truth[task], 1 - truth[task])
    frame = pd.DataFrame({"task": task, "worker": worker, "label": label})
    prior = pd.Series({2: 0.2, 0: 0.4, 1: 0.4})
    glad = crowd.GLAD(n_iter=1, labels_priors=prior).fit(frame)
    assert glad.classes_ == [0, 1, 2] and list(glad.probas_.columns) == [0, 1, 2]
    np.testing.assert_allclose(glad.probas_.to_numpy(),
                               _glad_first_e_step(frame, [0, 1, 2], [0.4, 0.4, 0.2]).to_numpy(),
                               atol=2e-5)


def test_glad_prior_means_take_crowdkits_series(sets):
    data = sets["bluebirds"]
    base = crowd.GLAD().fit(data.labels)
    workers, tasks = base.workers_, list(base.tasks_)
    rng = np.random.default_rng(0)
    a_mean = rng.normal(1.0, 0.5, len(workers))
    b_mean = rng.normal(1.0, 0.5, len(tasks))
    # shuffled Series by worker / by task (plus a worker the data lacks) = arrays in our order
    a_series = pd.Series(a_mean, index=workers).sample(frac=1.0, random_state=1)
    a_series["not-a-worker"] = 5.0
    b_series = pd.Series(b_mean, index=tasks).sample(frac=1.0, random_state=2)
    by_name = crowd.GLAD(alphas_priors_mean=a_series, betas_priors_mean=b_series).fit(data.labels)
    by_order = crowd.GLAD(alphas_priors_mean=a_mean, betas_priors_mean=b_mean).fit(data.labels)
    np.testing.assert_array_equal(by_name.alphas_.to_numpy(), by_order.alphas_.to_numpy())
    np.testing.assert_array_equal(by_name.probas_.to_numpy(), by_order.probas_.to_numpy())
    np.testing.assert_array_equal(by_name.alphas_priors_mean_.loc[workers], a_mean)
    assert not np.allclose(by_name.alphas_.to_numpy(), base.alphas_.to_numpy())
    np.testing.assert_array_equal(base.alphas_priors_mean_, 1.0)     # crowd-kit's None: 1 each
    with pytest.raises(bda.DataError, match=repr(workers[0])) as err:
        crowd.GLAD(alphas_priors_mean=a_series.drop(workers[0])).fit(data.labels)
    assert err.value.field == "alphas_priors_mean"


def test_glad_silent_false_reports_each_iteration(sets, capsys):
    data = sets["bluebirds"]
    quiet = crowd.GLAD().fit(data.labels)
    assert capsys.readouterr().err == ""
    loud = crowd.GLAD(silent=False).fit(data.labels)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"GLAD iteration {k + 1}/100: Q = {q:.6f}"
                     for k, q in enumerate(loud.loss_history_)]
    assert len(lines) == quiet.n_iter_ == 6                           # crowd-kit: 6 iterations
    np.testing.assert_array_equal(loud.probas_.to_numpy(), quiet.probas_.to_numpy())
    with pytest.raises(bda.DataError) as err:
        crowd.GLAD(silent="no")
    assert err.value.field == "silent"


# ---------------------------------------------------------------- MACE
def _mace_frame():
    rs = np.random.RandomState(5)
    task, worker = np.repeat(np.arange(20), 4), np.tile(np.arange(4), 20)
    truth = rs.randint(0, 3, 20)
    label = np.where(rs.rand(80) < 0.7, truth[task], rs.randint(0, 3, 80))
    return pd.DataFrame({"task": task, "worker": worker, "label": label})


def test_mace_random_state_smoothing_verbose(capsys):
    frame = _mace_frame()
    kw = {"n_restarts": 2, "n_iter": 5}
    by_state = crowd.MACE(random_state=3, **kw).fit(frame)
    by_seed = crowd.MACE(seed=3, **kw).fit(frame)
    np.testing.assert_array_equal(by_state.probas_.to_numpy(), by_seed.probas_.to_numpy())
    np.testing.assert_array_equal(by_state.spamming_, by_seed.spamming_)
    assert crowd.MACE(random_state=3, seed=3).seed == 3
    assert (crowd.MACE().seed, crowd.MACE().random_state) == (None, None)  # both 0 at fit
    for kwargs, field in (({"random_state": 3, "seed": 4}, "random_state"),
                          ({"random_state": 1.5}, "random_state"),
                          ({"smoothing": 0.1}, "smoothing"),             # "vb" never reads it
                          ({"verbose": -1}, "verbose"), ({"method": "gibbs"}, "method")):
        with pytest.raises(bda.DataError) as err:
            crowd.MACE(**kwargs)
        assert err.value.field == field
    # crowd-kit's fitted priors and smoothing: VB priors Beta(alpha, beta), Dirichlet(10)
    assert by_state.theta_priors_.tolist() == [[0.5, 0.5]] * 4
    assert by_state.strategy_priors_.tolist() == [[10.0] * 3] * 4
    assert by_state.smoothing_ == pytest.approx(0.01 / 3)
    em = crowd.MACE(method="em", random_state=3, **kw).fit(frame)
    em_smooth = crowd.MACE(method="em", smoothing=5.0, random_state=3, **kw).fit(frame)
    assert em.theta_priors_ is None and em.strategy_priors_ is None
    assert em_smooth.smoothing_ == 5.0
    # a pseudo-count of 5 per cell pulls the strategies toward uniform
    assert np.abs(em_smooth.thetas_ - 1 / 3).max() < np.abs(em.thetas_ - 1 / 3).max()
    capsys.readouterr()
    crowd.MACE(random_state=3, verbose=1, **kw).fit(frame)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and sum(line.endswith("(best)") for line in lines) == 1
    assert lines[0].startswith("MACE restart 1/2: log-likelihood = ")
    best = float(next(line for line in lines if line.endswith("(best)")).split()[-2])
    assert best == pytest.approx(by_state.log_likelihood_, abs=1e-5)
    crowd.MACE(random_state=3, verbose=2, **kw).fit(frame)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 * (5 + 1)
    assert lines[0].startswith("MACE restart 1/2 iteration 1/5: log-likelihood = ")
