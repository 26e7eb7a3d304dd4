"""The `bda` command line: every subcommand's main job and its bad-input path (exit 2, one
`error: ...` line), --json machine output, exit codes and --debug."""
import json
import os

import numpy as np
import pytest

import bda_jax
import bda_jax.report
from bda_jax import read_traces, tally, write_traces
from bda_jax.simulate import simulate_council
from cli_calls import invoke, ok, user_error


@pytest.fixture(scope="module")
def council(tmp_path_factory):
    """40 labeled binary tasks (the council of tests/aggregators/test_artifacts.py: compiled fits are
    shared), the same tasks without gold, and a council of other agents."""
    d = tmp_path_factory.mktemp("council")
    traces = simulate_council(0, 40, [0.74, 0.68, 0.68])
    write_traces(traces, d / "train.jsonl")
    unlabeled = [bda_jax.Trace(t.task_id, t.moves, t.candidates, None, t.cluster) for t in traces]
    write_traces(unlabeled, d / "unlabeled.jsonl")
    write_traces(simulate_council(1, 5, [0.7, 0.7], agent_names=["B1", "B2"]),
                 d / "strangers.jsonl")
    return d


@pytest.fixture(scope="module")
def model(council):
    out = council / "model.json"
    res = ok(invoke("fit", council / "train.jsonl", "--arm", "bda-per-agent", "--out", out,
                    "--no-progress", "--json"))
    return out, json.loads(res.stdout)


# ----------------------------------------------------------------------------- demo

def test_demo_table_only_on_bundled_example():
    result = ok(invoke("demo", "--table-only"))
    assert "claim-01" in result.output and "mcq-07" in result.output
    # mcq-07 under the shared Beta(2.4, 1.6): SciPy's betaln on the hand-tallied counts
    # N = (2, 3, 2), c = (0,2,0,0), (1,1,2,1), (1,2,0,1), e = (0,2,0,0), (0,1,1,0), (0,1,0,0)
    # gives (0.0029, 0.9818, 0.0124, 0.0029)
    assert "A 0.003  B 0.982  C 0.012  D 0.003" in result.output


def test_demo_reports_trace_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x", "moves": [{"id": "1", "agent": "a", "round": 0, '
                   '"force": "shout"}]}\n')
    line = user_error(invoke("demo", "--table-only", "--traces", bad), "unknown force")
    assert line.startswith(f"error: {bad}:1: task 'x'")
    user_error(invoke("demo", "--table-only", "--mean", "1.5"), "--mean/--strength")


def test_demo_prints_the_table_then_writes_the_report(tmp_path, monkeypatch):
    calls = []

    def run_demo(out_dir="bda-report", *, seed=0, quick=False, progress=True, resume=True):
        calls.append((out_dir, seed, quick, progress, resume))
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "index.html"), "w") as handle:
            handle.write("<html></html>")
        return {"schema_version": 1, "kind": "bda_jax.demo_results"}

    monkeypatch.setattr(bda_jax.report, "run_demo", run_demo)
    out = tmp_path / "rep"
    result = ok(invoke("demo", "--out", out, "--quick", "--seed", 3, "--no-progress"))
    assert calls == [(str(out), 3, True, False, True)]
    assert "mcq-07" in result.stdout and f"demo report written to {out}/index.html" in result.stdout
    result = ok(invoke("demo", "--out", out, "--json", "--no-resume"))
    doc = json.loads(result.stdout)
    assert doc["report"]["kind"] == "bda_jax.demo_results" and calls[-1][-1] is False
    assert {r["task_id"] for r in doc["table"]["rows"]} >= {"claim-01", "mcq-07"}


# ----------------------------------------------------------------------------- fit / predict

def test_fit_then_predict_matches_an_in_process_fit(council, model):
    path, summary = model
    assert summary["arm"] == "bda-per-agent" and summary["n_labeled"] == 40
    assert set(summary["params"]) == {"b", "kappa", "s", "tau"}
    result = ok(invoke("predict", path, council / "train.jsonl", "--json"))
    doc = json.loads(result.stdout)
    assert doc["training_data"] is True and doc["n_tasks"] == 40
    counts = tally(read_traces(council / "train.jsonl"))
    expected = bda_jax.make_arm("bda-per-agent", 0).fit(counts).predict_proba(counts)
    got = np.array([p["proba"] for p in doc["predictions"]])
    np.testing.assert_array_equal(got, expected)
    first = doc["predictions"][0]
    assert first["decision"] == first["candidates"][first["index"]]
    assert first["confidence"] == max(first["proba"])
    # JSON Lines file and the console table
    out = council / "preds.jsonl"
    result = ok(invoke("predict", path, council / "train.jsonl", "--out", out))
    assert "40 predictions written" in result.stdout and "in-sample" in result.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["proba"] for r in rows] == [p["proba"] for p in doc["predictions"]]
    result = ok(invoke("predict", path, council / "unlabeled.jsonl"))
    assert "q0-s0" in result.stdout and "accuracy" not in result.stdout


def test_fit_bad_inputs(council, tmp_path):
    user_error(invoke("fit", council / "train.jsonl", "--arm", "nope", "--out",
                      tmp_path / "m.json"), "arms", "unknown arm 'nope'")
    user_error(invoke("fit", council / "unlabeled.jsonl", "--arm", "bda-confusion", "--out",
                      tmp_path / "m.json"), "unlabeled.jsonl", "gold", "supervised")
    user_error(invoke("fit", tmp_path / "missing.jsonl", "--out", tmp_path / "m.json"),
               "missing.jsonl", "cannot open")
    assert not (tmp_path / "m.json").exists()


def test_predict_answer_sets(council, model, tmp_path):
    """--set ALPHA: each task's answer set, calibrated on --calibration traces the model never
    saw (the training traces are refused), as predict_tasks computes it."""
    path, _ = model
    cal, new = tmp_path / "cal.jsonl", tmp_path / "new.jsonl"
    fresh = simulate_council(7, 60, [0.74, 0.68, 0.68])
    write_traces(fresh[:30], cal)
    write_traces(fresh[30:], new)
    doc = json.loads(ok(invoke("predict", path, new, "--set", 0.2, "--calibration", cal,
                               "--json")).stdout)
    artifact = bda_jax.aggregators.load_model(path)
    rows, summary = bda_jax.aggregators.predict_tasks(artifact, read_traces(new), set_alpha=0.2,
                                                      calibration=read_traces(cal))
    assert [r["set"] for r in doc["predictions"]] == [r["set"] for r in rows]
    assert doc["set"]["n_calibration"] == 30 and doc["set"]["coverage"] == summary["set"]["coverage"]
    text = ok(invoke("predict", path, new, "--set", 0.2, "--calibration", cal)).stdout
    assert "set (80%)" in text and "calibrated on 30 labeled tasks of cal.jsonl" in text
    user_error(invoke("predict", path, new, "--set", 0.2, "--calibration",
                      council / "train.jsonl"), "calibration", "training data")
    user_error(invoke("predict", path, new, "--calibration", cal), "--calibration", "--set")
    user_error(invoke("predict", path, new, "--set", 0), "--set")
    user_error(invoke("predict", path, new, "--set", 0.1, "--set-method", "top"), "--set-method")


def test_predict_bad_inputs(council, model, tmp_path):
    path, _ = model
    user_error(invoke("predict", path, council / "strangers.jsonl"), "strangers.jsonl",
               "agents", "not in the model's agent list")
    tampered = tmp_path / "model.json"
    doc = json.loads(path.read_text())
    doc["meta"]["arm"] = "majority"
    tampered.write_text(json.dumps(doc))
    (tmp_path / "model.npz").write_bytes(path.with_suffix(".npz").read_bytes())
    user_error(invoke("predict", tampered, council / "train.jsonl"), "sha256", "modified")
    tampered.write_text(path.read_text()[:100])
    user_error(invoke("predict", tampered, council / "train.jsonl"), "truncated")
    user_error(invoke("predict", tmp_path / "nothing.json", council / "train.jsonl"),
               "cannot open")


# ----------------------------------------------------------------------------- evaluate

def test_evaluate_equals_the_library_and_resumes(council, tmp_path):
    args = ("evaluate", council / "train.jsonl", "--arms", "majority,bda-confusion",
            "--n-resamples", 200, "--cache", tmp_path / "cells.jsonl", "--out",
            tmp_path / "res.json", "--no-progress")
    first = json.loads(ok(invoke(*args, "--json")).stdout)
    ev = bda_jax.evaluate(read_traces(council / "train.jsonl"), ["bda-confusion"], folds=5,
                          seed=0, n_resamples=200)
    assert first["table"] == ev.table[::-1]            # [majority, bda-confusion]
    assert first["bootstrap"] == ev.bootstrap and first["selected"] == ev.selected
    assert first["folds"] == ev.folds.tolist() and first["kind"] == "bda_jax.evaluation"
    assert json.loads((tmp_path / "res.json").read_text()) == first
    assert len((tmp_path / "cells.jsonl").read_text().splitlines()) == 3   # header + 2 arms
    second = ok(invoke(*args))                          # from the cache, as a table
    assert "bda-confusion" in second.stdout and "Δacc vs majority" in second.stdout
    again = json.loads((tmp_path / "res.json").read_text())
    assert again["cells"]["loaded"] == 2 and again["table"] == first["table"]
    # the results file renders as a report
    result = ok(invoke("report", tmp_path / "res.json", "--out", tmp_path / "report"))
    assert (tmp_path / "report" / "index.html").exists() and "index.html" in result.stdout


def test_evaluate_answer_sets(council):
    res = ok(invoke("evaluate", council / "train.jsonl", "--arms", "majority,bda-per-agent",
                    "--set", 0.2, "--n-resamples", 50, "--no-progress", "--json"))
    doc = json.loads(res.stdout)
    ev = bda_jax.evaluate(read_traces(council / "train.jsonl"), ["bda-per-agent"], folds=5,
                          seed=0, n_resamples=50, set_alpha=0.2)
    assert doc["table"] == ev.table[::-1] and doc["sets"] == ev.sets
    assert all({"coverage", "mean_set_size", "empty_sets"} <= set(r) for r in doc["table"])
    table = ok(invoke("evaluate", council / "train.jsonl", "--arms", "majority", "--set", 0.2,
                      "--set-method", "aps", "--n-resamples", 50, "--no-progress"))
    assert "coverage" in table.stdout and "answer sets at 1 - 0.2 (aps)" in table.stdout
    user_error(invoke("evaluate", council / "train.jsonl", "--set", 1.5), "--set")
    user_error(invoke("evaluate", council / "train.jsonl", "--set", 0.1, "--set-method", "top"),
               "--set-method")


def test_evaluate_bad_inputs(council, tmp_path):
    user_error(invoke("evaluate", council / "train.jsonl", "--arms", "majority,bogus"),
               "arms", "bogus")
    user_error(invoke("evaluate", council / "unlabeled.jsonl", "--arms", "majority"),
               "unlabeled.jsonl", "gold")
    user_error(invoke("evaluate", council / "train.jsonl", "--folds", 1), "--folds")
    cache = tmp_path / "c.jsonl"
    cache.write_text('{"schema_version": 1, "kind": "other"}\n')
    user_error(invoke("evaluate", council / "train.jsonl", "--arms", "majority", "--cache",
                      cache, "--no-progress"), f"{cache}:1", "kind")


# ----------------------------------------------------------------------------- simulate

def test_simulate_writes_traces(tmp_path):
    out = tmp_path / "sim.jsonl"
    doc = json.loads(ok(invoke("simulate", "--questions", 6, "--seats", "0.8,0.6,0.6,0.55",
                               "--adversaries", "0:0.5", "--candidates", "2-4",
                               "--seeds-per-question", 2, "--out", out, "--json")).stdout)
    traces = read_traces(out)
    assert len(traces) == doc["n_traces"] == 12 and doc["agents"] == ["A1", "A2", "A3", "A4"]
    assert traces == simulate_council(0, 6, [0.8, 0.6, 0.6, 0.55], adversaries={0: 0.5},
                                      n_candidates=(2, 4), seeds_per_question=2)
    user_error(invoke("simulate", "--questions", 5, "--seats", "0.7,1.5", "--out", out),
               "reliabilities")
    user_error(invoke("simulate", "--questions", 5, "--seats", "a,b", "--out", out), "--seats")
    user_error(invoke("simulate", "--questions", 5, "--adversaries", "x", "--out", out),
               "--adversaries")
    user_error(invoke("simulate", "--questions", 5, "--out", tmp_path / "no" / "dir.jsonl"),
               "--out", "does not exist")


# ----------------------------------------------------------------------------- study

def test_study_quick_dose_response_resumes(tmp_path):
    args = ("study", "dose-response", "--quick", "--questions", 40, "--arms",
            "majority,bda-confusion", "--cache", tmp_path / "cells.jsonl", "--out",
            tmp_path / "study.json", "--no-progress")
    doc = json.loads(ok(invoke(*args, "--json")).stdout)
    acc = doc["accuracy"]
    assert set(acc) == {"persistent k=1", "persistent k=2"}
    assert len(acc["persistent k=2"]["majority"]) == 3          # p_wrong 0, .5, 1
    assert acc["persistent k=2"]["majority"][-1] <= acc["persistent k=2"]["majority"][0]
    again = ok(invoke(*args))                                   # every cell from the cache
    assert "| persistent k=2 | bda-confusion |" in again.stdout
    assert json.loads((tmp_path / "study.json").read_text())["accuracy"] == acc


def test_study_bad_inputs():
    user_error(invoke("study", "nope"), "NAME", "dose-response")
    user_error(invoke("study", "sleeper", "--questions", 3), "--questions")
    user_error(invoke("study", "sleeper", "--arms", "nope"), "arms")


# ----------------------------------------------------------------------------- stop

def test_stop_replay_bundled_excerpt():
    doc = json.loads(ok(invoke("stop", "replay", "--bundled", "aime_w8_head20", "--empty-g",
                               0.5, "--n-boot", 50, "--json")).stdout)
    assert doc["n_problems"] == 20 and doc["settings"]["W"] == 8
    overall = doc["partition"][-1]
    assert overall["commit"] == "overall" and overall["n"] == 20
    assert sum(b["n"] for b in doc["partition"][:-1]) == 20
    assert all(p["stop_round"] >= 1 for p in doc["problems"])
    text = ok(invoke("stop", "replay", "--bundled", "gpqa_w4_head50", "--empty-g", 0.5,
                     "--n-boot", 50, "--per-problem")).stdout
    # docs/stopping.md: the GPQA head-50 excerpt, W = 4, logged g = 0.5
    assert "right_wall │ 38" in text and "stop rounds" in text


def test_stop_replay_bad_inputs(tmp_path):
    user_error(invoke("stop", "replay"), "LOG")
    user_error(invoke("stop", "replay", "--bundled", "nope"), "--bundled")
    bad = tmp_path / "safe_DASE_Bellman_History_4_x.jsonl"
    bad.write_text('{"idx": 1, "history": []}\n{oops\n')
    user_error(invoke("stop", "replay", bad), str(bad))


def test_stop_live_reads_rounds_from_stdin():
    rounds = '["5","5","5","5","5"]\n\n["5","5","5","5","2"]\n["1","2",null,"3","1"]\n'
    text = ok(invoke("stop", "live", "--W", 2, input=rounds)).stdout.splitlines()
    assert text[0].startswith("problem 1 round 1: continue")
    assert text[1] == "problem 1 round 2: STOP right_wall answer 5"
    assert text[2].startswith("problem 2 round 1: continue")
    assert text[-1] == "input ended: problem 2 still running"
    lines = ok(invoke("stop", "live", "--W", 2, "--json", input=rounds)).stdout.splitlines()
    decisions = [json.loads(x) for x in lines]
    assert [d["stop"] for d in decisions] == [False, True, False]
    assert decisions[1]["commit"] == "right_wall" and decisions[1]["answer"] == "5"
    user_error(invoke("stop", "live", input='["a","b"]\nnot json\n'), "<stdin>:2", "answers")
    user_error(invoke("stop", "live", input='["a","b"]\n["a"]\n'), "<stdin>:2",
               "expected 2 answers")
    user_error(invoke("stop", "live", "--rule", "psychic", input='["a"]\n'), "rule")


# ----------------------------------------------------------------------------- audit

def test_simulate_broadcast_gives_the_audit_a_log(tmp_path):
    """bda simulate-broadcast writes the simulator's log (same seed, same bytes as the library),
    and bda audit reads it."""
    from bda_jax import audit
    log, ref = tmp_path / "b.jsonl", tmp_path / "ref.jsonl"
    doc = json.loads(ok(invoke("simulate-broadcast", "--out", log, "--problems", 12, "--seed", 3,
                               "--json")).stdout)
    audit.write_broadcast_log(audit.simulate_broadcast(3, n_problems=12), ref)
    assert log.read_bytes() == ref.read_bytes()
    assert doc["n_blocks"] == audit.read_broadcast_log(log).n_blocks and doc["n_problems"] == 12
    assert "Trace-Audit Card" in ok(invoke("audit", log, "--n-boot", 20, "--no-progress")).stdout
    user_error(invoke("simulate-broadcast", "--out", tmp_path / "c.jsonl", "--problems", 0),
               "--problems")


def test_audit_prints_and_writes_the_card(tmp_path):
    from bda_jax import audit
    log = tmp_path / "broadcast.jsonl"
    audit.write_broadcast_log(audit.simulate_broadcast(0, n_problems=12), log)
    card = tmp_path / "card.json"
    doc = json.loads(ok(invoke("audit", log, "--n-boot", 20, "--card", card, "--json",
                               "--no-progress")).stdout)
    names = {m["name"] for m in doc["card"]["metrics"]}
    assert {"CRA", "HRWP"} <= names
    assert json.loads(card.read_text())["metrics"] == doc["card"]["metrics"]
    text = ok(invoke("audit", log, "--n-boot", 20, "--card", tmp_path / "card.md",
                     "--no-progress")).stdout
    assert "# Trace-Audit Card" in text and (tmp_path / "card.md").read_text().startswith("#")


def test_audit_bad_inputs(tmp_path):
    log = tmp_path / "broadcast.jsonl"
    log.write_text('{"kind": "poll", "problem": "p1", "outer_round": 0, "turn": 0, '
                   '"agent": "a", "score": 7}\n')
    user_error(invoke("audit", log, "--no-progress"), f"{log}:1", "score")
    user_error(invoke("audit", log, "--card", tmp_path / "card.txt"), "--card")


# ----------------------------------------------------------------------------- convert

def test_convert_crowd_and_dase(tmp_path):
    out = tmp_path / "bluebirds.jsonl"
    doc = json.loads(ok(invoke("convert", "bluebirds", "--out", out, "--json")).stdout)
    assert doc["n_traces"] == len(read_traces(out)) == 108 and doc["kind"] == "crowd"
    out = tmp_path / "gpqa.jsonl"
    text = ok(invoke("convert", "gpqa_w4_head50", "--out", out)).stdout
    assert "50 traces (34 with gold)" in text
    assert len(read_traces(out)) == 50
    assert "bluebirds" in ok(invoke("convert", "--list")).stdout


def test_convert_bad_inputs(tmp_path):
    user_error(invoke("convert", "nope", "--out", tmp_path / "x.jsonl"), "DATASET", "nope")
    user_error(invoke("convert", "bluebirds"), "--out")
    user_error(invoke("convert", "--out", tmp_path / "x.jsonl"), "DATASET")


# ----------------------------------------------------------------------------- report

def test_report_bad_inputs(tmp_path):
    user_error(invoke("report", tmp_path / "missing.json"), "missing.json", "cannot open")
    bad = tmp_path / "results.json"
    bad.write_text('{"table": [1, 2,\n')
    user_error(invoke("report", bad, "--out", tmp_path / "r"), f"{bad}:2", "not JSON")
    bad.write_text("[1, 2]")
    user_error(invoke("report", bad), "JSON object")
    bad.write_text('{"kind": "bda_jax.evaluation", "table": []}')
    user_error(invoke("report", bad, "--out", tmp_path / "r"), "table")
    bad.write_text('{"kind": "bda_jax.demo_results", "schema_version": 99}')
    user_error(invoke("report", bad, "--out", tmp_path / "r"), "schema_version")
    assert not (tmp_path / "r" / "index.html").exists()


def test_report_calls_the_renderer(tmp_path, monkeypatch):
    monkeypatch.setattr(bda_jax.report, "load_results", lambda path: {"loaded": str(path)})
    monkeypatch.setattr(bda_jax.report, "render_report",
                        lambda results, out_dir: out_dir / "index.html")
    results = tmp_path / "results.json"
    results.write_text('{"kind": "bda_jax.demo_results"}')
    result = ok(invoke("report", results, "--out", tmp_path / "r"))
    assert f"report written to {tmp_path / 'r' / 'index.html'}" in result.stdout


# ----------------------------------------------------------------------------- exit codes

def test_json_mode_reports_errors_as_json(tmp_path):
    result = invoke("evaluate", tmp_path / "missing.jsonl", "--json")
    line = user_error(result, "cannot open")
    doc = json.loads(result.stdout)
    assert doc["error"]["exit_code"] == 2 and doc["error"]["message"] == line
    assert doc["error"]["type"] == "TraceError"


def test_debug_shows_tracebacks_and_internal_errors_exit_1(tmp_path, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n")
    result = invoke("--debug", "demo", "--table-only", "--traces", bad)
    assert result.exit_code == 2 and "Traceback" in result.stderr

    def boom(*args, **kwargs):
        raise RuntimeError("boom")
    monkeypatch.setattr(bda_jax.report, "posterior_table", boom)
    result = invoke("demo", "--table-only")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == ("internal error: RuntimeError: boom (run `bda --debug ...` "
                                     "for the traceback)")
    result = invoke("--debug", "demo", "--table-only")
    assert result.exit_code == 1 and "Traceback" in result.stderr


def test_usage_errors_exit_2_and_version():
    assert invoke("fit").exit_code == 2                 # missing argument (Click usage error)
    assert invoke("nonsense").exit_code == 2
    assert ok(invoke("--version")).stdout.strip() == f"bda_jax {bda_jax.__version__}"
