"""Hardening of the `bda` command line (issue #19): an output never overwrites an input (exit 2
before anything is written), user strings print as data (never Rich markup; a lone surrogate
never crashes the output), stdin that is not UTF-8 JSON is a typed error naming `<stdin>:LINE`,
and `bda stop` refuses NaN answers and an `--empty-g` outside [0, 1]."""
import dataclasses
import json
import os
import shutil

from importlib import resources

import pytest

from bda_jax import DataError, read_traces, write_traces
from bda_jax.datasets import DASE_EXCERPTS
from bda_jax.simulate import simulate_council
from cli_calls import invoke, ok, user_error


EXAMPLE = resources.files("bda_jax.data") / "example_council.jsonl"

#: user strings that are Rich markup, an emoji code and a lone surrogate (a JSON "\udcff")
NASTY = ("[/bold]", "[link=x]", ":smile:", "\udcff")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A labeled trace file, a majority model fitted on it, a question set, a fake config, a
    broadcast log and a copy of a bundled DASE history: the inputs the commands read."""
    d = tmp_path_factory.mktemp("inputs")
    write_traces(simulate_council(0, 12, [0.74, 0.68, 0.68]), d / "traces.jsonl")
    ok(invoke("fit", d / "traces.jsonl", "--arm", "majority", "--out", d / "model.json",
              "--no-progress"))
    (d / "questions.jsonl").write_text('{"task_id": "q1", "question": "1+1?", "gold": "2"}\n')
    (d / "council.toml").write_text("this is not read: the output check comes first\n")
    from bda_jax import audit
    audit.write_broadcast_log(audit.simulate_broadcast(0, n_problems=4), d / "log.jsonl")
    shutil.copy(DASE_EXCERPTS["aime_w8_head20"], d / "safe_DASE_Bellman_History_8_x.jsonl")
    return d


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


# ============================================================================ class 2: outputs

#: (command line with {name} placeholders for the input files, the input it names as output)
SAME_AS_INPUT = [
    ("fit {traces} --arm majority --out {traces}", "TRACES"),
    ("predict {model} {traces} --out {traces}", "TRACES"),
    ("predict {model} {traces} --out {model}", "MODEL"),
    ("evaluate {traces} --arms majority --out {traces}", "TRACES"),
    ("evaluate {traces} --arms majority --cache {traces}", "TRACES"),
    ("evaluate {traces} --arms majority --reply-cache {traces}", "TRACES"),
    ("evaluate {traces} --arms moa --config {config} --out {config}", "--config"),
    ("convert {dase} --out {dase}", "DATASET"),
    ("audit {log} --card {log}", "LOG"),
    ("council run {questions} --config {config} --out {questions}", "QUESTIONS"),
    ("council run {questions} --config {config} --out {config}", "--config"),
    ("council run {questions} --config {config} --out {tmp}/o.jsonl --cache {questions}",
     "QUESTIONS"),
    ("council method moa {traces} --config {config} --out {traces}", "INPUTS"),
    ("council method moa {traces} --config {config} --out {tmp}/m.json --cache {config}",
     "--config"),
    ("council ensemble {questions} --config {config} --out {questions}", "QUESTIONS"),
    ("council ensemble {questions} --config {config} --out {tmp}/h.jsonl --cache {config}",
     "--config"),
    ("council broadcast {questions} --config {config} --out {questions}", "QUESTIONS"),
    ("council broadcast {questions} --config {config} --out {tmp}/b.jsonl --cache {questions}",
     "QUESTIONS"),
    ("council attack {questions} --config {config} --out {tmp}/a --cache {questions}",
     "QUESTIONS"),
    ("council compare {questions} --config {config} --out {tmp}/c --cache {config}", "--config"),
]


@pytest.mark.parametrize("line, label", SAME_AS_INPUT, ids=[c for c, _ in SAME_AS_INPUT])
def test_an_output_that_is_an_input_is_refused_before_anything_is_written(files, tmp_path,
                                                                           line, label):
    names = {"traces": files / "traces.jsonl", "model": files / "model.json",
             "questions": files / "questions.jsonl", "config": files / "council.toml",
             "log": files / "log.jsonl", "dase": files / "safe_DASE_Bellman_History_8_x.jsonl",
             "tmp": tmp_path}
    before = _snapshot(files)
    args = [a.format(**names) for a in line.split()]
    err = user_error(invoke(*args), f"the input {label}",
                     "an output never overwrites an input")
    assert _snapshot(files) == before, err
    assert list(tmp_path.iterdir()) == []                  # nothing written anywhere


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "dotted"])
def test_another_name_of_the_input_is_the_input(files, tmp_path, kind):
    link = tmp_path / "alias.jsonl"
    if kind == "symlink":
        link.symlink_to(files / "traces.jsonl")
    elif kind == "hardlink":
        os.link(files / "traces.jsonl", link)
    else:
        link = files / "." / ".." / files.name / "traces.jsonl"
    before = _snapshot(files)
    user_error(invoke("fit", files / "traces.jsonl", "--arm", "majority", "--out", link),
               "the input TRACES")
    user_error(invoke("predict", files / "model.json", link, "--out", files / "traces.jsonl"),
               "the input TRACES")
    assert _snapshot(files) == before


def test_a_file_written_beside_the_output_is_no_input_either(files, tmp_path):
    # `bda fit` keeps large arrays in OUT.npz: with --out t.json that is t.npz
    traces = tmp_path / "t.npz"
    shutil.copy(files / "traces.jsonl", traces)
    before = traces.read_bytes()
    user_error(invoke("fit", traces, "--arm", "majority", "--out", tmp_path / "t.json"),
               "writes", "t.npz", "the input TRACES")
    assert traces.read_bytes() == before and not (tmp_path / "t.json").exists()
    # a live council writes OUT.manifest.json and the default cache OUT.cache.sqlite
    q = tmp_path / "o.jsonl.cache.sqlite"
    q.write_text('{"task_id": "q1", "question": "?"}\n')
    user_error(invoke("council", "run", q, "--config", files / "council.toml", "--out",
                      tmp_path / "o.jsonl"), "o.jsonl.cache.sqlite", "the input QUESTIONS")
    assert q.read_text() == '{"task_id": "q1", "question": "?"}\n'


def test_study_and_evaluate_outputs_must_be_distinct(files, tmp_path):
    user_error(invoke("study", "dose-response", "--quick", "--out", tmp_path / "s.json",
                      "--cache", tmp_path / "s.json"), "--out and --cache name the same file")
    user_error(invoke("evaluate", files / "traces.jsonl", "--out", tmp_path / "r.json",
                      "--cache", tmp_path / "r.json"),
               "--out and --cache name the same file")
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_holding_an_input_is_refused(files, tmp_path):
    q = tmp_path / "questions.jsonl"
    q.write_text('{"task_id": "q1", "question": "?"}\n')
    for command in ("attack", "compare"):
        user_error(invoke("council", command, q, "--config", files / "council.toml", "--out",
                          tmp_path), "the input QUESTIONS", "lies inside the output folder")
        user_error(invoke("council", command, q, "--config", files / "council.toml", "--out",
                          q), "exists and is not a folder")
    assert [p.name for p in tmp_path.iterdir()] == ["questions.jsonl"]
    assert q.read_text() == '{"task_id": "q1", "question": "?"}\n'


def test_an_output_folder_may_hold_inputs_it_does_not_write(tmp_path):
    from bda_jax.cli._app import check_out_dir  # private: the check `bda demo` / `report` call
    results = tmp_path / "results.json"
    results.write_text("{}")
    check_out_dir(tmp_path, "--out", {"RESULTS": results}, writes=["index.html"])
    page = tmp_path / "index.html"
    page.write_text("{}")
    with pytest.raises(DataError, match="which is the input RESULTS"):
        check_out_dir(tmp_path, "--out", {"RESULTS": page}, writes=["index.html"])
    with pytest.raises(DataError, match="lies inside the output folder"):
        check_out_dir(tmp_path, "--out", {"RESULTS": results})


# ============================================================================ class 3: strings

@pytest.fixture(scope="module")
def nasty_traces(tmp_path_factory):
    """The bundled example council (so its compiled tallies are shared with tests/cli/test_cli.py)
    with markup and lone surrogates in every task id, agent name, candidate, answer and gold, in a
    file whose name is markup too."""
    d = tmp_path_factory.mktemp("nasty")

    spelled = {"(B)": "B", "b": "B", "$\\boxed{625}$": "625"}   # the example's raw spellings

    def answer(a):
        return None if a is None else f"[red]{spelled.get(a, a)}\udcff"
    traces = []
    for i, t in enumerate(read_traces(EXAMPLE)):
        moves = tuple(dataclasses.replace(m, agent=f"[/bold]{m.agent}", answer=answer(m.answer))
                      for m in t.moves)
        traces.append(dataclasses.replace(
            t, task_id=NASTY[i % len(NASTY)] + t.task_id, moves=moves,
            candidates=None if t.candidates is None else tuple(map(answer, t.candidates)),
            gold=answer(t.gold)))
    path = d / "[bold]council[x].jsonl"
    write_traces(traces, path)
    return path, traces


def _assert_nasty_printed(text):
    for s in NASTY[:3] + ("\\udcff", "[red]"):
        assert s in text, (s, text)


def test_demo_table_prints_markup_and_surrogates_as_themselves(nasty_traces):
    path, traces = nasty_traces
    text = ok(invoke("demo", "--table-only", "--traces", path)).stdout
    _assert_nasty_printed(text)
    assert "[bold]council[x].jsonl" in text                   # the title's file name
    doc = json.loads(ok(invoke("demo", "--table-only", "--traces", path, "--json")).stdout)
    assert [r["task_id"] for r in doc["table"]["rows"]] == [t.task_id for t in traces]


def test_fit_predict_evaluate_print_user_strings_as_data(nasty_traces, tmp_path):
    path, traces = nasty_traces
    model = tmp_path / "m.json"
    text = ok(invoke("fit", path, "--arm", "majority", "--out", model, "--no-progress")).stdout
    assert "agents [/bold]A1" in text
    _assert_nasty_printed(ok(invoke("predict", model, path)).stdout)
    doc = json.loads(ok(invoke("predict", model, path, "--json", "--out",
                               tmp_path / "p.jsonl")).stdout)
    assert [r["task_id"] for r in doc["predictions"]] == [t.task_id for t in traces]
    rows = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text("utf-8").splitlines()]
    assert [r["task_id"] for r in rows] == [t.task_id for t in traces]
    assert all(c.startswith("[red]") and c.endswith("\udcff") for r in rows
               for c in r["candidates"])
    text = ok(invoke("evaluate", path, "--arms", "majority", "--folds", 2, "--n-resamples", 5,
                     "--no-progress")).stdout
    assert "[bold]council[x].jsonl" in text


def test_progress_descriptions_are_not_markup(capsys):
    from bda_jax.cli._app import progress_bar  # private: the bar's text column is the fix
    with progress_bar(True, "arm [/bold] \udcff", total=2) as bar:
        bar.report("stage [link=x] [/red]", 1, 2)
    assert "stage [link=x] [/red]" in capsys.readouterr().err


def test_stop_replay_prints_answers_as_data(tmp_path):
    # the bundled AIME excerpt (its compiled replay is shared with tests/cli/test_cli.py) with
    # every non-empty answer wrapped in markup; the file name keeps W = 8
    path = tmp_path / "safe_DASE_Bellman_History_8_[bold].jsonl"
    rows = [json.loads(x) for x in DASE_EXCERPTS["aime_w8_head20"].read_text().splitlines()]
    for r in rows:
        for step in r["history"]:
            step["norms"] = [a if a == "empty" else f"[/bold]{a}[link=x]" for a in step["norms"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = ok(invoke("stop", "replay", path, "--no-gold", "--per-problem", "--empty-g", 0.5))
    assert "History_8_[bold].jsonl" in result.stdout and "[/bold]" in result.stdout
    assert "[link=x]" in result.stdout


def test_error_lines_and_json_errors_survive_markup_and_surrogates(tmp_path):
    bad = tmp_path / "bad\udcff[bold].jsonl"
    bad.write_text('{"task_id": "[/bold]\\udcff", "moves": [{"id": "1", "agent": "a", '
                   '"round": 0, "force": "shout"}]}\n')
    user_error(invoke("demo", "--table-only", "--traces", bad), "unknown force", "[/bold]")
    result = invoke("demo", "--table-only", "--traces", bad, "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["task_id"] == "[/bold]\udcff"
    log = tmp_path / "log.jsonl"
    log.write_text('{"kind": "poll", "problem": "[/bold]\\udcff", "outer_round": 0, "turn": 0, '
                   '"agent": "[link=x]", "score": 7}\n')
    result = invoke("audit", log, "--no-progress", "--json")
    user_error(result, f"{log}:1", "score")
    assert json.loads(result.stdout)["error"]["line"] == 1


# ============================================================================ stdin and stop live

FIRST = b'["a","a","b","b",null]\n'               # a good round: the error is on line 2


@pytest.mark.parametrize("line, fragment", [
    (b'["\xff\xfe","a","a","a","a"]', "not UTF-8 text: byte 0xff at column 3"),
    (b'["\\udcff","a","a","a","a"]', "answers[0]: answer '\\udcff' is not valid Unicode"),
    (b'[NaN,"a","a","a","a"]', "answers[0]: answer nan is not a finite number"),
    (b'["a",-Infinity,"a","a","a"]', "answers[1]: answer -inf is not a finite number"),
    (b'["a","a",1e999,"a","a"]', "answers[2]: answer inf is not a finite number"),
    (b'[' + b"1" * 5000 + b',"a","a","a","a"]', "invalid JSON: Exceeds the limit"),
    (b"[" * 100_000, "invalid JSON"),
])
def test_stop_live_refuses_bad_stdin_lines_naming_the_line(line, fragment):
    user_error(invoke("stop", "live", input=FIRST + line + b"\n"), "<stdin>:2", fragment)


def test_stop_live_accepts_a_utf8_bom_and_non_ascii():
    text = ok(invoke("stop", "live", "--W", 1, input='\ufeff["é","é","é","é","é"]\n'.encode())
              ).stdout
    # five equal answers (n = r = 5, no empty worker): g = 1 - I_{1/2}(6, 1) = 1 - 1/64 = 63/64,
    # V_R - V_L = 2g - 1 > 0 moves right to x = 1 = W: the right wall commits "é"
    assert text.splitlines()[0] == "problem 1 round 1: STOP right_wall answer é"


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "inf"])
def test_empty_g_outside_the_unit_interval_is_refused(value):
    user_error(invoke("stop", "live", "--empty-g", value, input='["a"]\n'), "--empty-g",
               "[0, 1]")
    user_error(invoke("stop", "replay", "--bundled", "aime_w8_head20", "--empty-g", value),
               "--empty-g", "[0, 1]")


def test_stop_live_checks_its_options_before_reading_stdin():
    # no input line at all: the bad option is still an error, not "no rounds read"
    user_error(invoke("stop", "live", "--W", 0, input=""), "--W", "positive integer")
    user_error(invoke("stop", "live", "--rule", "psychic", input=""), "--rule")


@pytest.mark.parametrize("problem, fragment", [
    ([{"idx": 1, "history": [{"step": 1, "norms": ["1"] * 5}]},
      {"idx": 1, "history": [{"step": 1, "norms": ["2"] * 5}]}], ":2: task 1: idx: idx 1 repeats"),
    ([{"idx": 1, "history": [{"step": 1, "norms": ["1"] * 5}, {"step": 1, "norms": ["1"] * 5}]}],
     ":1: task 1: history[1].step: step 1 where 2 was expected"),
])
def test_stop_replay_is_as_strict_as_the_importer(tmp_path, problem, fragment):
    path = tmp_path / "safe_DASE_Bellman_History_4_x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in problem))
    user_error(invoke("stop", "replay", path, "--no-gold"), f"{path}{fragment}")
