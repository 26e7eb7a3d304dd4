"""Streaming tally (issue 10): ``tally_stream(path)`` == ``tally(read_traces(path))``, exactly.

The stream runs the same checks as read_traces (same errors: file, line, task, move, field) and
the same packing as tally, chunk by chunk; these tests pin both, plus sharding of the file and
the memory the stream holds.
"""
import random
import tracemalloc

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.simulate import simulate_council
from reference import EXAMPLE, load_fuzz_module, outcome

FIELDS = ("task", "agent", "N", "e", "c", "e0", "conf0", "mask", "K", "gold", "gold_missing",
          "cluster")


def assert_same_counts(a, b):
    assert type(a) is type(b)
    for f in FIELDS:
        if hasattr(a, f):
            x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
            assert x.dtype == y.dtype and x.shape == y.shape, f
            np.testing.assert_array_equal(x, y, err_msg=f)
    assert a.info == b.info
    if isinstance(a, bda.PairCounts):
        assert (a.n_tasks, a.n_agents) == (b.n_tasks, b.n_agents)


@pytest.fixture(scope="module")
def council_file(tmp_path_factory):
    """2,000 traces: ragged K (2-5), gold, clusters, 4 agents, then a block where a fifth
    agent appears late and a third of the tasks give no candidate list."""
    main = simulate_council(3, 800, [0.7, 0.6, 0.8, 0.65], n_candidates=(2, 5), n_rounds=3,
                            seeds_per_question=2)
    late = simulate_council(4, 400, [0.7, 0.6, 0.8, 0.65, 0.7], n_candidates=3, n_rounds=2,
                            agent_names=["A1", "A2", "Z9", "A4", "A3"])
    late = [bda.Trace("x" + t.task_id, t.moves, None if k % 3 == 0 else t.candidates, t.gold,
                      t.cluster) for k, t in enumerate(late)]
    path = tmp_path_factory.mktemp("stream") / "council.jsonl"
    bda.write_traces(main + late, path)
    return path


OPTIONS = [
    {}, {"max_round": 0}, {"forces": ("propose", "challenge")}, {"one_move_per_round": True},
    {"permute_candidates": 7}, {"seat_key": "force"}, {"seat_key": "agent-force"},
    {"abstain_candidate": "unknown"},
    {"agents": ["A2", "A1", "A3", "A4"], "unknown_agents": "drop"},
    {"agents": ["A4", "A3", "A2", "A1", "Z9", "A6"]},
    {"permute_candidates": 3, "one_move_per_round": True, "max_round": 1},
]


@pytest.mark.parametrize("layout", ["dense", "pairs"])
def test_stream_equals_tally_of_read_traces(council_file, layout):
    traces = bda.read_traces(council_file)
    assert len(traces) == 2000
    for k, options in enumerate(OPTIONS):
        ref = bda.tally(traces, layout=layout, **options)
        chunk = (300, 1000, 4096)[k % 3]
        got = bda.tally_stream(council_file, chunk_tasks=chunk, layout=layout, **options)
        assert_same_counts(ref, got)
    # tiny chunks on a small file: every task its own part
    small = bda.tally(bda.read_traces(EXAMPLE), layout=layout)
    assert_same_counts(small, bda.tally_stream(EXAMPLE, chunk_tasks=1, layout=layout))


def test_late_agents_are_padded_into_earlier_chunks(council_file):
    counts = bda.tally_stream(council_file, chunk_tasks=500)
    assert counts.agents == ("A1", "A2", "A3", "A4", "Z9")
    assert counts.N.dtype == np.int32 and counts.e.dtype == np.int32
    assert (counts.N[:1600, 4] == 0).all() and (counts.N[1600:, 4] > 0).any()
    assert counts.vocab is None and counts.shape == (2000, 5, 5)


def test_lenient_mode_matches_and_warns_alike(tmp_path):
    text = EXAMPLE.read_text().splitlines()
    bad = ('{"task_id": "zz", "candidates": ["A", "B"], "moves": [{"id": "m1", "agent": "A1", '
           '"round": 0, "force": "propose", "answer": "A"}, {"id": "m2", "agent": "A2", '
           '"round": 0, "force": "shout"}, {"id": "m3", "agent": "A2", "round": 1, '
           '"force": "concede", "target": "m2"}]}')
    path = tmp_path / "lenient.jsonl"
    path.write_text("\n".join(text[:2] + [bad] + text[2:]) + "\n")
    with pytest.raises(bda.TraceError) as strict:
        bda.tally_stream(path)
    assert (strict.value.line, strict.value.task_id, strict.value.move_id,
            strict.value.field) == (3, "zz", "m2", "force")
    with pytest.warns(UserWarning) as ref_warn:
        ref = bda.tally(bda.read_traces(path, lenient=True), lenient=True)
    with pytest.warns(UserWarning) as got_warn:
        got = bda.tally_stream(path, lenient=True, chunk_tasks=2)
    assert [str(w.message) for w in got_warn] == [str(w.message) for w in ref_warn]
    assert "unknown_force: 1" in str(got_warn[0].message)
    assert_same_counts(ref, got)


def test_errors_match_read_traces_on_fuzzed_files(tmp_path):
    """The fuzzer's mutated files (bad JSON, bytes, types, targets, rounds, ids, ...): the
    stream gives the same counts or the same error, strict and lenient, sharded reader too."""
    fuzz = load_fuzz_module()
    examples = fuzz.load_examples()
    rng = random.Random(20261130)
    path = tmp_path / "case.jsonl"
    kinds = set()
    for case_no in range(250):
        case = fuzz.make_case(rng, examples, max_tasks=3)
        path.write_bytes(case.data)
        for lenient in (False, True):
            ref = outcome(label="counts", run=lambda: bda.tally(bda.read_traces(path, lenient=lenient),
                                             lenient=lenient))
            for shard in (None, (0, 1)):
                got = outcome(label="counts", run=lambda: bda.tally_stream(path, lenient=lenient, shard=shard,
                                                        chunk_tasks=1 + case_no % 2))
                assert got[0] == ref[0], (case.mutations, ref, got)
                if ref[0] == "error":
                    assert got == ref, case.mutations
                else:
                    assert_same_counts(ref[1], got[1])
                    assert got[2] == ref[2]
            kinds.add(ref[0] + ("/lenient" if lenient else ""))
    assert kinds == {"error", "counts", "error/lenient", "counts/lenient"}


def test_shards_partition_the_file(council_file):
    agents = ["A1", "A2", "A3", "A4", "Z9"]
    traces = bda.read_traces(council_file)
    lines = np.array([t.source[1] for t in traces])
    seen = []
    for index in range(3):
        part = bda.tally_stream(council_file, agents=agents, shard=(index, 3), chunk_tasks=700,
                                layout="pairs")
        mine = [t for t, line in zip(traces, lines) if line % 3 == index]
        ref = bda.tally(mine, agents=agents, layout="pairs")
        assert_same_counts(ref, part)
        seen += part.task_ids
    assert sorted(seen) == sorted(t.task_id for t in traces)


def test_bad_options(council_file, tmp_path):
    for kwargs, field in [({"chunk_tasks": 0}, "chunk_tasks"),
                          ({"chunk_tasks": 2.0}, "chunk_tasks"),
                          ({"shard": (2, 2)}, "shard"), ({"shard": (0,)}, "shard"),
                          ({"layout": "sparse"}, "layout"), ({"max_round": -1}, "max_round")]:
        with pytest.raises(bda.DataError) as info:
            bda.tally_stream(council_file, **kwargs)
        assert info.value.field == field
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(bda.TraceError, match="holds no task"):
        bda.tally_stream(empty)
    with pytest.raises(bda.TraceError, match="cannot open"):
        bda.tally_stream(tmp_path / "missing.jsonl")
    with pytest.raises(bda.TraceError) as info:
        bda.tally_stream(council_file, agents=["A1", "A2"], chunk_tasks=64)
    assert info.value.field == "agent" and info.value.line == 1 and info.value.move_id


def test_stream_holds_counts_not_traces(tmp_path):
    """Peak traced allocation of the stream stays a fraction of read_traces + tally's."""
    path = tmp_path / "mem.jsonl"
    bda.write_traces(simulate_council(5, 1200, [0.7, 0.6, 0.8], n_candidates=4, n_rounds=4), path)
    tracemalloc.start()
    try:
        bda.tally(bda.read_traces(path))
        _, in_memory = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        bda.tally_stream(path, chunk_tasks=64)
        _, streamed = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert streamed < in_memory / 4, (streamed, in_memory)
