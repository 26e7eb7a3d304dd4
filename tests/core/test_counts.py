"""The tally (docs/trace-format.md): signed endorsements -> N, e, c, e0, conf0 and the study options."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bda_jax as bda
from reference import EXAMPLE


def mv(mid, agent, rnd, force, answer=None, target=None, confidence=None):
    return bda.Move(mid, agent, rnd, force, answer, target, confidence)


def one(moves, candidates=("A", "B", "C"), gold=None, task_id="t"):
    return bda.Trace(task_id, tuple(moves), candidates, gold)


def test_force_table_and_consistent_counts():
    trace = one([
        mv("1", "x", 0, "propose", "A", confidence=0.9),
        mv("2", "y", 0, "propose", "B", confidence=0.4),
        mv("3", "z", 1, "concede", target="1"),           # +A
        mv("4", "x", 1, "concede", target="3"),           # self? no: z's move -> chain to A, +A
        mv("5", "y", 1, "challenge", target="1"),         # -A
        mv("6", "y", 2, "challenge", target="2"),         # own move: retract of B, -B
        mv("7", "z", 2, "concede", target="3"),           # self-concede: no information
        mv("8", "z", 2, "abstain"),
        mv("9", "x", 2, "retract", target="1"),           # -A
        mv("10", "z", 3, "vote", "C"),                    # +C
        mv("11", "z", 3, "retract", answer="C"),          # -C
    ])
    c = bda.tally([trace], agents=["x", "y", "z"])
    np.testing.assert_array_equal(c.N, [[3, 3, 3]])
    np.testing.assert_array_equal(c.e, [[[2, 0, 0], [0, 1, 0], [1, 0, 1]]])
    # c = e + rejections of every other candidate
    np.testing.assert_array_equal(c.c, [[[2, 1, 1], [1, 2, 2], [2, 1, 1]]])
    np.testing.assert_array_equal(c.d, [[[1, 2, 2], [2, 1, 1], [1, 2, 2]]])
    assert (c.c.sum(-1) >= c.N).all()
    np.testing.assert_array_equal(c.e0, [[[1, 0, 0], [0, 1, 0], [0, 0, 0]]])
    np.testing.assert_allclose(c.conf0[0, 0], [0.9, np.nan, np.nan])
    np.testing.assert_allclose(c.conf0[0, 1], [np.nan, 0.4, np.nan])


def test_gold_vocab_clusters_and_ragged_candidates():
    traces = bda.read_traces(EXAMPLE)
    c = bda.tally(traces)
    assert c.vocab is None and c.K.tolist() == [2, 2, 4, 2, 4, 1]
    assert c.mask.sum(1).tolist() == c.K.tolist()
    assert c.gold.tolist() == [0, 1, 1, 0, -1, 0]
    assert (c.e[~np.broadcast_to(c.mask[:, None, :], c.e.shape)] == 0).all()
    # gold that is not a candidate: scored wrong, flagged, never added to the candidates
    t = one([mv("1", "x", 0, "propose", "A")], candidates=None, gold="B")
    c = bda.tally([t])
    assert c.gold.tolist() == [-1] and c.gold_missing.tolist() == [True]
    assert c.candidates == (("A",),)
    # shared candidate list -> vocab; clusters group tasks
    ts = [bda.Trace(f"q{k}", (mv("1", "x", 0, "propose", "yes"),), ("yes", "no"), "yes",
                    cluster=f"c{k // 2}") for k in range(4)]
    c = bda.tally(ts)
    assert c.vocab == ("yes", "no") and c.cluster.tolist() == [0, 0, 1, 1]


def test_max_round_and_one_move_per_round():
    trace = one([
        mv("1", "x", 0, "propose", "A"), mv("2", "y", 0, "propose", "B"),
        mv("3", "x", 1, "propose", "B"), mv("4", "x", 1, "challenge", target="2"),
        mv("5", "y", 2, "concede", target="1"),
    ])
    r0 = bda.tally([trace], max_round=0)
    np.testing.assert_array_equal(r0.N, [[1, 1]])
    np.testing.assert_array_equal(r0.e, r0.e0)
    last = bda.tally([trace], one_move_per_round=True)
    np.testing.assert_array_equal(last.N, [[2, 2]])
    np.testing.assert_array_equal(last.e[0, 0], [1, 0, 0])       # x keeps its round-1 challenge
    np.testing.assert_array_equal(last.c[0, 0], [2, 0, 1])
    proposals = bda.tally([trace], forces=("propose",))
    np.testing.assert_array_equal(proposals.N, [[2, 1]])
    np.testing.assert_array_equal(proposals.c[0, 0], [1, 1, 0])
    with pytest.raises(bda.DataError, match="forces"):
        bda.tally([trace], forces=("shout",))
    with pytest.raises(bda.DataError, match="max_round"):
        bda.tally([trace], max_round=-1)


def test_candidate_permutation_is_seeded_and_equivariant():
    traces = bda.read_traces(EXAMPLE)
    base = bda.tally(traces)
    p1 = bda.tally(traces, permute_candidates=7)
    p2 = bda.tally(traces, permute_candidates=7)
    np.testing.assert_array_equal(p1.c, p2.c)
    assert p1.vocab is None and not np.array_equal(p1.c, base.c)
    alpha, beta = np.array([2.0, 3.0, 1.5]), np.array([1.0, 1.2, 2.5])
    lp0 = np.asarray(bda.onecoin_log_posterior(base, alpha, beta))
    lp1 = np.asarray(bda.onecoin_log_posterior(p1, alpha, beta))
    for t in range(len(traces)):
        for k, name in enumerate(base.candidates[t]):
            k1 = p1.candidates[t].index(name)
            assert abs(lp0[t, k] - lp1[t, k1]) < 1e-5
        if base.gold[t] >= 0:
            assert p1.candidates[t][p1.gold[t]] == base.candidates[t][base.gold[t]]


def test_fixed_agent_list_and_unknown_agents():
    traces = bda.read_traces(EXAMPLE)
    c = bda.tally(traces, agents=["A3", "A1", "A2", "A4"])
    ref = bda.tally(traces)
    np.testing.assert_array_equal(c.N[:, :3], ref.N[:, [2, 0, 1]])
    assert (c.N[:, 3] == 0).all()
    with pytest.raises(bda.TraceError) as info:
        bda.tally(traces, agents=["A1", "A2"])
    assert info.value.field == "agent" and info.value.task_id == "claim-01"
    assert info.value.move_id == "m3"
    dropped = bda.tally(traces, agents=["A1", "A2"], unknown_agents="drop")
    assert dropped.info.notes["dropped_unknown_agent_moves"] == int(ref.N[:, 2].sum())
    with pytest.raises(bda.DataError):
        bda.tally(traces, agents=["A1", "A1"])


def test_from_arrays_validates():
    N, e, c = [[2]], [[[1, 0]]], [[[2, 0]]]
    counts = bda.Counts.from_arrays(N=N, e=e, c=c, gold=[0])
    assert counts.K.tolist() == [2] and counts.agents == ("agent0",)
    bad = [
        (dict(N=[2], e=e, c=c), "N"), (dict(N=N, e=[[1, 0]], c=c), "e"),
        (dict(N=N, e=[[[2, 0]]], c=[[[1, 0]]]), "e"), (dict(N=N, e=e, c=[[[3, 0]]]), "c"),
        (dict(N=[[-1]], e=e, c=c), "N"), (dict(N=N, e=[[[0.5, 0]]], c=c), "e"),
        (dict(N=N, e=e, c=c, gold=[2]), "gold"), (dict(N=N, e=e, c=c, K=[3]), "K"),
        (dict(N=N, e=e, c=[[[2, 1]]], K=[1]), "c"), (dict(N=N, e=e, c=c, e0=[[1]]), "e0"),
        (dict(N=[[1]], e=[[[1, 1]]], c=[[[1, 1]]]), "e"),
        (dict(N=N, e=e, c=c, agents=["a", "b"]), "agents"),
        (dict(N=N, e=e, c=c, vocab=["yes"]), "vocab"),
        (dict(N=N, e=e, c=c, gold=[0], gold_missing=[True]), "gold_missing"),
    ]
    for kwargs, field in bad:
        with pytest.raises(bda.DataError) as info:
            bda.Counts.from_arrays(**kwargs)
        assert info.value.field == field, kwargs


def test_counts_is_a_pytree():
    counts = bda.tally(bda.read_traces(EXAMPLE))
    leaves = jax.tree.leaves(counts)
    assert len(leaves) == 10
    total = jax.jit(lambda k: jnp.sum(k.c) + jnp.sum(k.N))(counts)
    assert int(total) == int(counts.c.sum() + counts.N.sum())
    sub = counts.take([0, 2])
    assert sub.task_ids == ("claim-01", "mcq-07") and sub.e.shape[0] == 2


def test_seat_keys_for_the_reliability_ablation():
    traces = bda.read_traces(EXAMPLE)
    by_agent = bda.tally(traces)
    by_force = bda.tally(traces, seat_key="force")
    by_both = bda.tally(traces, seat_key="agent-force")
    assert set(by_force.agents) == {"propose", "challenge", "concede", "retract", "vote"}
    assert "A1:propose" in by_both.agents and "A3:challenge" in by_both.agents
    for other in (by_force, by_both):   # the same moves, only distributed over other seats
        np.testing.assert_array_equal(other.N.sum(1), by_agent.N.sum(1))
        np.testing.assert_array_equal(other.c.sum(1), by_agent.c.sum(1))
    with pytest.raises(bda.DataError, match="seat_key"):
        bda.tally(traces, seat_key="round")


def test_counts_reach_the_device_once_and_stay_true():
    """Issue 20: host counts are copied to the device once per collection (the kernels read
    the cached copy), their host arrays are read-only, and reassigning a field is seen."""
    from reference import onecoin_reference
    N, e, c = [[2, 1]], [[[2, 0], [0, 1]]], [[[2, 0], [0, 1]]]
    counts = bda.Counts.from_arrays(N=N, e=e, c=c)
    assert counts.max_count == 2
    first = counts.kernel_arrays("N", "e", "c")
    assert all(a is b for a, b in zip(first, counts.kernel_arrays("N", "e", "c")))
    assert all(isinstance(a, jax.Array) and a.dtype == jnp.int8 for a in first)  # max N 2
    assert counts.on_device() is counts.on_device()
    assert isinstance(counts.on_device().N, jax.Array) and counts.on_device().agents == counts.agents
    with pytest.raises(ValueError):
        counts.e[0, 0, 0] = 5                           # owned, read-only host arrays
    alpha, beta = np.array([4.0, 3.0]), np.array([2.0, 1.0])
    ref = onecoin_reference(N, e, c, [2], alpha, beta)
    for _ in range(2):
        got = bda.onecoin_log_posterior(counts, alpha, beta)
        np.testing.assert_allclose(np.asarray(got), ref, atol=1e-5)
    # a new array in a field: the cache follows it (agent 1 now endorses slot 0)
    counts.e = np.array([[[2, 0], [1, 0]]], np.int32)
    counts.c = np.array([[[2, 0], [1, 0]]], np.int32)
    ref2 = onecoin_reference(N, counts.e, counts.c, [2], alpha, beta)
    np.testing.assert_allclose(np.asarray(bda.onecoin_log_posterior(counts, alpha, beta)), ref2,
                               atol=1e-5)
    assert not np.allclose(ref, ref2)


def test_kernel_arrays_narrow_only_as_far_as_the_counts_allow():
    """Counts above int8's range are read as int16 (exactly); the posterior matches the
    float64 reference either way."""
    from reference import onecoin_reference
    N, e, c = [[300, 1]], [[[200, 0], [0, 1]]], [[[250, 50], [0, 1]]]
    counts = bda.Counts.from_arrays(N=N, e=e, c=c)
    (n16,) = counts.kernel_arrays("N")
    assert n16.dtype == jnp.int16 and int(n16[0, 0]) == 300
    alpha, beta = np.array([4.0, 2.0]), np.array([2.0, 2.0])
    np.testing.assert_allclose(np.asarray(bda.onecoin_log_posterior(counts, alpha, beta)),
                               onecoin_reference(N, e, c, [2], alpha, beta), atol=1e-4)
    P = np.array([[[0.8, 0.2], [0.3, 0.7]], [[0.6, 0.4], [0.4, 0.6]]])
    want = np.log(P[0, :, 0]) * 250 + np.log(P[0, :, 1]) * 50 + np.log(P[1, :, 1])
    want = want - np.logaddexp.reduce(want)
    np.testing.assert_allclose(np.asarray(bda.confusion_log_posterior(counts, P)), want[None],
                               atol=1e-3)
