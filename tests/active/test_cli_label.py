"""`bda label next`: the table and --json on a pool with a partial gold file, and every bad input
as exit 2 with one `error: ...` line."""
import json

import pytest

from bda_jax import Trace, write_traces
from bda_jax.active import label_next
from bda_jax.simulate import simulate_council
from cli_calls import invoke, user_error


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """40 unlabeled tasks and a gold file for 8 of them."""
    d = tmp_path_factory.mktemp("label")
    traces = simulate_council(0, 40, [0.74, 0.68, 0.68])
    write_traces([Trace(t.task_id, t.moves, t.candidates, None, t.cluster) for t in traces],
                 d / "pool.jsonl")
    rows = "".join(f"{t.task_id},{t.gold}\n" for t in traces[:8])
    (d / "gold.csv").write_text("task_id,answer\n" + rows)
    (d / "all.csv").write_text("task_id,answer\n" + "".join(f"{t.task_id},{t.gold}\n"
                                                           for t in traces))
    (d / "empty.jsonl").write_text("")
    return d


def test_prints_the_tasks_to_label_next(pool):
    res = invoke("label", "next", pool / "pool.jsonl", "--gold", pool / "gold.csv", "-b", 3,
                 "--seed", 1)
    assert res.exit_code == 0, res.output
    assert "40 tasks, 8 labeled; strategy expected-brier" in res.stdout
    plan = label_next(pool / "pool.jsonl", pool / "gold.csv", budget=3, seed=1)
    assert len(plan.task_ids) == 3
    for task in plan.task_ids:                       # the library's picks, in the table
        assert task in res.stdout
    assert not set(plan.task_ids) & {f"q{q}-s0" for q in range(8)}


def test_json_output_is_the_plan(pool):
    res = invoke("label", "next", pool / "pool.jsonl", "--gold", pool / "gold.csv", "--budget",
                 4, "--strategy", "disagreement", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    plan = label_next(pool / "pool.jsonl", pool / "gold.csv", budget=4, strategy="disagreement")
    assert out["command"] == "label next" and out["strategy"] == "disagreement"
    assert [t["task_id"] for t in out["tasks"]] == list(plan.task_ids)
    assert [t["rank"] for t in out["tasks"]] == [1, 2, 3, 4]
    assert (out["n_tasks"], out["n_labeled"], out["n_unlabeled"]) == (40, 8, 32)
    res = invoke("label", "next", pool / "pool.jsonl", "-b", 2, "--strategy", "random", "--json")
    assert json.loads(res.stdout)["tasks"][0]["score"] is None


@pytest.mark.parametrize("args,fragments", [
    (["-b", 0], ["--budget", ">= 1"]),
    (["-b", 2, "--strategy", "best"], ["--strategy", "unknown strategy"]),
    (["-b", 2, "--arm", "majority"], ["--arm"]),
    (["-b", 2, "--batch", "all"], ["--batch"]),
    (["-b", 2, "--n-candidates", 0], ["--n-candidates"]),
    (["-b", 2, "--seed", -3], ["--seed"]),
    (["-b", 2, "--gold", "missing.csv"], ["missing.csv"]),
    (["-b", 2, "--gold", "all.csv"], ["all 40 tasks are labeled"]),
])
def test_bad_options_exit_2_with_one_line(pool, args, fragments):
    args = [pool / a if isinstance(a, str) and a.endswith(".csv") else a for a in args]
    user_error(invoke("label", "next", pool / "pool.jsonl", *args), *fragments)


def test_bad_gold_rows_name_file_and_line(pool, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("task_id,answer\nq0-s0,True\nq1-s0,Perhaps\n")
    user_error(invoke("label", "next", pool / "pool.jsonl", "--gold", bad, "-b", 2),
               "bad.csv:3", "q1-s0", "answer", "not a candidate")
    bad.write_text("id,label\n")
    user_error(invoke("label", "next", pool / "pool.jsonl", "--gold", bad, "-b", 2),
               "bad.csv:1", "header")


def test_bad_trace_files_exit_2(pool, tmp_path):
    user_error(invoke("label", "next", pool / "empty.jsonl", "-b", 2), "holds no task")
    user_error(invoke("label", "next", tmp_path / "nope.jsonl", "-b", 2), "nope.jsonl")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"task_id": "x", "moves": [{"id": "1", "agent": "A", "force": "shout"}]}\n')
    user_error(invoke("label", "next", broken, "-b", 2), "broken.jsonl:1")
