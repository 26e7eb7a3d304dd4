"""A CLI that says what it expects (issue 22): a wrong kind of file is answered with what it looks
like and what to do, a BOM is accepted, errors name flags, every command takes the common
options, sizes beyond memory are refused, gold answers that are not candidates are reported."""
from __future__ import annotations

import gzip
import json
import shutil
import zipfile

import pytest
import typer.main
from typer.testing import CliRunner

from bda_jax import DataError, read_traces
from bda_jax.cli import app, check_memory, example_traces_path, simulation_bytes, sniff_file_kind

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def user_error(result, *fragments):
    assert result.exit_code == 2, result.output
    for f in fragments:
        assert f in result.output, result.output
    return result.output


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    traces = d / "traces.jsonl"
    shutil.copy(example_traces_path(), traces)
    lines = traces.read_text().splitlines()
    (d / "labels.csv").write_text("task_id,worker,answer\nq1,w1,A\n")
    (d / "array.json").write_text(json.dumps([json.loads(x) for x in lines], indent=1))
    (d / "traces.jsonl.gz").write_bytes(gzip.compress(traces.read_bytes()))
    (d / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + traces.read_bytes())
    model = d / "model.json"
    r = invoke("fit", traces, "--arm", "majority", "--out", model, "--no-progress")
    assert r.exit_code == 0, r.output
    return {"dir": d, "traces": traces, "model": model, "lines": lines}


def test_a_csv_where_traces_go_names_bda_convert(files):
    user_error(invoke("fit", files["dir"] / "labels.csv", "--out", files["dir"] / "o.json"),
               "labels.csv: TRACES: this looks like a CSV", "convert it with `bda convert`")


def test_a_json_array_is_not_json_lines(files):
    user_error(invoke("evaluate", files["dir"] / "array.json", "--no-progress"),
               "expected JSON Lines, one task per line, got a JSON array")


def test_gzip_input_says_decompress(files):
    user_error(invoke("fit", files["dir"] / "traces.jsonl.gz", "--out", files["dir"] / "o.json"),
               "traces.jsonl.gz: TRACES: gzip input: decompress it first")


def test_predict_with_the_arguments_swapped(files):
    user_error(invoke("predict", files["model"], files["model"]),
               "TRACES: this is a model file; the traces come second")
    user_error(invoke("predict", files["traces"], files["model"]),
               "MODEL: this is a trace file, not a model; the model comes first")


def test_a_trace_file_given_to_report_and_stop_replay(files):
    user_error(invoke("report", files["traces"], "--out", files["dir"] / "rep"),
               "RESULTS: this is a trace file; `bda report` renders a results JSON")
    user_error(invoke("stop", "replay", files["traces"], "--rule", "spatial", "--W", 2,
                      "--no-gold", "--no-progress"),
               "LOG: this is a bda_jax trace file, not a DASE history log")


def test_a_wrong_file_given_to_convert(files):
    user_error(invoke("convert", files["traces"], "--out", files["dir"] / "c.jsonl"),
               "DATASET: this is a bda_jax trace file, not a DASE history log",
               "needs no converting")
    user_error(invoke("convert", files["dir"] / "labels.csv", "--out", files["dir"] / "c.jsonl"),
               "DATASET: this looks like a CSV", "`bda convert --list`")


def test_a_damaged_model_keeps_the_readers_error(files, tmp_path):
    bad = tmp_path / "model.json"
    bad.write_text(files["model"].read_text()[:-40])
    user_error(invoke("predict", bad, files["traces"]), "model.json", "truncated")


def test_load_model_names_an_npz_given_for_the_json(files):
    from bda_jax import ArtifactError
    from bda_jax.aggregators import load_model
    npz = files["dir"] / "arrays.npz"
    with zipfile.ZipFile(npz, "w") as z:
        z.writestr("a0.npy", b"\x93NUMPY")
    with pytest.raises(ArtifactError, match="zip archive .*pass the .json"):
        load_model(npz)
    user_error(invoke("predict", npz, files["traces"]), "MODEL: this is a zip archive")


def test_sniff_kinds(files):
    d = files["dir"]
    assert [sniff_file_kind(p) for p in (d / "labels.csv", d / "array.json",
                                         d / "traces.jsonl.gz", files["traces"],
                                         d / "bom.jsonl", files["model"], d / "missing")] == \
        ["csv", "json-array", "gzip", "traces", "traces", "model", "unknown"]


def test_a_utf8_bom_on_the_first_line_is_accepted_elsewhere_refused(files, tmp_path):
    plain = read_traces(files["traces"])
    for workers in (1, 2):                    # this process alone, and a parse worker
        assert [t.to_json() for t in read_traces(files["dir"] / "bom.jsonl", workers=workers)] \
            == [t.to_json() for t in plain]
    inner = tmp_path / "inner.jsonl"
    inner.write_bytes(("\n".join(files["lines"][:1] + ["\ufeff" + files["lines"][1]]) + "\n")
                      .encode())
    user_error(invoke("fit", inner, "--arm", "majority", "--out", tmp_path / "o.json"),
               "inner.jsonl:2:", "byte-order mark")
    assert invoke("fit", files["dir"] / "bom.jsonl", "--arm", "majority", "--out",
                  tmp_path / "m.json", "--no-progress").exit_code == 0


def test_errors_name_the_flag_not_the_python_parameter(tmp_path):
    out = user_error(invoke("simulate", "--questions", 0, "--out", tmp_path / "s.jsonl",
                            "--no-progress"), "error: --questions: must be an integer >= 1")
    assert "n_questions" not in out
    user_error(invoke("evaluate", example_traces_path(), "--reference", "nope",
                      "--no-progress"), "error: --reference: unknown arm 'nope'")
    user_error(invoke("evaluate", example_traces_path(), "--arms", "nope", "--no-progress"),
               "error: --arms: unknown arm 'nope'")


def test_a_keyword_spelling_becomes_the_flag_and_record_fields_stay(monkeypatch, tmp_path):
    import bda_jax.datasets
    import bda_jax.stopping

    def no_root(name, root=None, **kw):
        raise DataError("no shared data folder: pass root=, set BDA_SHARED_DATA", field="root")
    monkeypatch.setattr(bda_jax.datasets, "load_crowd", no_root)
    out = user_error(invoke("convert", "bluebirds", "--out", tmp_path / "c.jsonl",
                            "--no-progress"),
                     "error: --root: no shared data folder: pass --root, set BDA_SHARED_DATA")
    assert "root=" not in out

    def bad_record(*args, **kwargs):
        raise DataError("not a string", file="log.jsonl", line=3, field="gold")
    monkeypatch.setattr(bda_jax.stopping, "replay_summary", bad_record)
    user_error(invoke("stop", "replay", "--bundled", "gpqa_w4_head50", "--no-progress"),
               "error: log.jsonl:3: gold: not a string")


def _commands(group, name="bda"):
    for sub_name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            yield from _commands(sub, f"{name} {sub_name}")
        else:
            yield f"{name} {sub_name}", {o for p in sub.params for o in p.opts + p.secondary_opts}


# Deterministic commands take no --seed (a seed that changes nothing would be a dead flag);
# `stop live` (one JSON line per round read from stdin) shows no progress. Anything else
# missing an option fails.
NO_SEED = {"bda report", "bda convert", "bda stop live", "bda council run",
           "bda council method", "bda council ensemble", "bda council broadcast"}
NO_PROGRESS = {"bda stop live"}


def test_every_command_takes_the_common_options():
    commands = dict(_commands(typer.main.get_command(app)))
    assert len(commands) >= 15
    for name, opts in commands.items():
        want = {"--json", "--debug"} | ({"--seed"} - ({"--seed"} if name in NO_SEED else set())) \
            | (set() if name in NO_PROGRESS else {"--no-progress"})
        assert want <= opts, (name, want - opts)


def test_debug_after_the_command_prints_the_traceback(files):
    r = invoke("fit", files["dir"] / "labels.csv", "--out", files["dir"] / "o.json", "--debug")
    assert r.exit_code == 2 and "Traceback" in r.output


def test_simulate_sizes_that_are_not_integers_or_too_big_are_user_errors(tmp_path, monkeypatch):
    r = invoke("simulate", "--questions", "1e10", "--out", tmp_path / "s.jsonl")
    assert r.exit_code == 2 and "--questions" in r.output
    import bda_jax.simulate

    def too_big(*args, **kwargs):
        raise MemoryError("Unable to allocate 74.5 GiB")
    monkeypatch.setattr(bda_jax.simulate, "simulate_council", too_big)
    out = user_error(invoke("simulate", "--questions", 100, "--out", tmp_path / "s.jsonl",
                            "--no-progress"), "error: out of memory (Unable to allocate 74.5 GiB)")
    assert "internal error" not in out
    # a size beyond memory is refused before anything is simulated, with the estimate
    out = user_error(invoke("simulate", "--questions", 10**9, "--out", tmp_path / "s.jsonl",
                            "--no-progress"), "--questions", "needs about", "of memory")
    assert not (tmp_path / "s.jsonl").exists()


def test_the_simulation_estimate_covers_the_measured_peak():
    import tracemalloc

    from bda_jax.simulate import simulate_council
    tracemalloc.start()
    simulate_council(0, 300, [0.74, 0.68, 0.68], n_candidates=2, n_rounds=3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    estimate = simulation_bytes(300, 1, 3, 3)
    assert peak <= estimate <= 4 * peak, (peak, estimate)
    assert simulation_bytes(2 * 10**7, 1, 3, 3) == 600 * 2 * 10**7 * 9


def test_a_size_beyond_memory_is_refused_with_the_estimate():
    with pytest.raises(DataError, match=r"needs about 931322574.6 GiB of memory") as err:
        check_memory(10**18, "--questions", "10^18 questions")
    assert err.value.field == "--questions"
    check_memory(1, "--questions", "one byte")


def test_gold_not_a_candidate_warns_and_strict_gold_refuses(files, tmp_path):
    rows = [json.loads(x) for x in files["lines"]]
    labeled = [i for i, r in enumerate(rows) if r.get("gold")]
    rows[labeled[1]]["gold"] = "Ture"                      # a typo
    path = tmp_path / "typo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = invoke("fit", path, "--arm", "majority", "--out", tmp_path / "m.json", "--no-progress")
    assert r.exit_code == 0, r.output
    assert (f"warning: {path}:{labeled[1] + 1}: 1 of {len(rows)} task(s) have a gold answer "
            "that is not one of their candidates") in r.output
    user_error(invoke("fit", path, "--arm", "majority", "--out", tmp_path / "m.json",
                      "--strict-gold"), f"{path}:{labeled[1] + 1}:", "--strict-gold", "'Ture'")
