"""The demo's HTML report: self-contained, escaped, schema-checked, and rendered by a real browser.

The browser check opens a test copy of the page in headless Chromium (Debian: ``apt-get install
chromium``; or set ``BDA_CHROMIUM`` to a Chromium / Chrome binary). It is skipped, with the reason
shown, where no browser is installed.
"""
import base64
import copy
import json
import os
import re
import shutil
import subprocess

import pytest

from bda_jax import ArtifactError
from bda_jax import DataError
from bda_jax.report import (FIGURES, RESULTS_KIND, SCHEMA_VERSION, FigureRenderer, load_results,
                            queue_figures, render_report, validate_evaluation, validate_results)

EVIL = '<script>alert("x")</script>&'


def _arm(name, acc, ece, brier, conf_shift=0.0):
    return {"arm": name,
            "row": {"arm": name, "accuracy": acc, "ece_ew": ece, "ece_em": ece, "brier": brier / 2,
                    "brier_mc": brier, "nll": 0.4, "auroc": None, "n": 40},
            "ci": {"accuracy": [acc - 0.1, min(1.0, acc + 0.1)], "ece_ew": [0.0, ece + 0.05],
                   "brier_mc": [brier - 0.05, brier + 0.05], "n_resamples": 100, "n_units": 20},
            "vs_reference": {"accuracy": {"delta": 0.05, "ci_low": -0.02, "ci_high": 0.12,
                                          "p_win": 0.9, "n_resamples": 100, "n_units": 20}},
            "selected": [{"b": 0.52, "kappa": 1.0, "s": 8.0, "tau": 1.0}],
            "bins": {"count": [0, 0, 0, 0, 0, 10, 8, 7, 0, 15],
                     "confidence": [None] * 5 + [0.55 + conf_shift, 0.65, 0.75, None, 0.97],
                     "accuracy": [None] * 5 + [0.5, 0.7, 0.71, None, 0.93]}}


def tiny_results():
    """A small, hand-made results dict with every section the report draws."""
    block = {"name": "toy", "title": "Toy council " + EVIL, "n_tasks": 40, "n_agents": 3, "K": 2,
             "n_labeled": 40, "reference": "majority", "folds": 5,
             "arms": [_arm("majority", 0.6, 0.2, 0.5), _arm("bda-per-agent", 0.8, 0.05, 0.3),
                      _arm(EVIL, 0.7, 0.1, 0.4, 0.02)],
             "weights": {"agents": ["A1", "A2", EVIL], "reliability": [0.1, 0.7, 0.65],
                         "prior_mean": [0.2, 0.75, 0.7], "weight": [-1.4, 1.1, 0.85],
                         "n_moves": [90, 90, 90], "K": 2, "chance": 0.5,
                         "hyperparameters": {"b": 0.52, "kappa": 1.0, "s": 8.0},
                         "adversaries": ["A1"]},
             "coalition": {"attacked_tasks": 40, "compliance": 0.9, "genuine_flip_rate": 0.2,
                           "effective_corrupted_fraction": 0.5, "nominal_fraction": 0.33},
             "setup": {"n_questions": 20, "seeds_per_question": 2,
                       "reliabilities": [0.7, 0.7, 0.7], "adversaries": {"A1": 0.9}}}
    dose = {"arms": ["majority", "bda-per-agent"], "p_grid": [0.0, 0.5, 1.0],
            "regimes": ["persistent k=1"], "n_tasks": 40, "setup": "toy",
            "rows": [{"regime": "persistent k=1", "mode": "persistent", "k": 1, "p_wrong": p,
                      "arm": a, "accuracy": acc, "ece_ew": 0.1, "brier_mc": 0.3, "n": 40,
                      "redirect_rate": p}
                     for a, accs in (("majority", (0.8, 0.6, 0.4)),
                                     ("bda-per-agent", (0.8, 0.7, 1.0)))
                     for p, acc in zip((0.0, 0.5, 1.0), accs)]}
    sleeper = {"arms": ["majority", "bda-per-agent"], "f_grid": [0.0, 0.5, 1.0], "factor": 2.0,
               "reliabilities": [0.74, 0.68, 0.68], "compliance": 0.6, "setup": "toy",
               "n_tasks": {"reference": 10, "calibration": 10, "deployment": 10},
               "table": [{"f": f, "arm": a, "accuracy": acc, "ece_ew": 0.1, "brier_mc": 0.3,
                          "drift": 0.05 + 0.3 * f, "floor": 0.05, "drift_ratio": 1 + 5 * f,
                          "alarm": f > 0}
                         for f in (0.0, 1.0)
                         for a, acc in (("majority", 0.37), ("bda-per-agent", 0.3 + 0.5 * f))],
               # per-seat ratios: at f = 0.5 the mean (1.9) is under the 2x line, seat A1 is over
               "monitor": [{"f": f, "agents": ["A1", "A2", "A3"], "ratio": r,
                            "alarm": [v > 2.0 for v in r]}
                           for f, r in ((0.0, [1.0, 0.9, 1.1]), (0.5, [3.1, 1.4, 1.2]),
                                        (1.0, [7.0, 6.5, 4.5]))]}
    sleeper["table"] += [{"f": 0.5, "arm": a, "accuracy": 0.5, "ece_ew": 0.1, "brier_mc": 0.3,
                          "drift": 0.095, "floor": 0.05, "drift_ratio": 1.9, "alarm": True}
                         for a in ("majority", "bda-per-agent")]
    records = [{"idx": i, "commit": c, "answer": "A", "gold": "A" if i % 2 else None,
                "correct": bool(i % 2), "steps": 3, "final_x": x[-1], "g": [0.66, 0.89, 0.98],
                "x": x, "winner": ["A", "A", "A"], "flagged": c != "right_wall",
                "truncated": False}
               for i, (c, x) in enumerate([("right_wall", [1, 2, 3]), ("left_wall", [-1, -2, -3]),
                                           ("fallback", [1, 0, 1]), ("right_wall", [1, 2, 3])])]
    partition = {"right_wall": {"n": 2, "correct": 1, "accuracy": 0.5},
                 "left_wall": {"n": 1, "correct": 0, "accuracy": 0.0},
                 "fallback": {"n": 1, "correct": 0, "accuracy": 0.0},
                 "overall": {"n": 4, "correct": 1, "accuracy": 0.25}}
    dase = {"trajectories": 3, "source": "toy logs",
            "excerpts": [{"name": "toy", "title": "Toy arena W = 3", "benchmark": "gpqa",
                          "file": "toy<1>.jsonl", "n_gold": 2, "settings": {"W": 3},
                          "replays": [{"empty_g": 0.5, "records": records, "partition": partition,
                                       "routing_gap": {"gap": 0.5, "low": -0.5, "high": 1.0,
                                                       "coverage": 0.5}}],
                          "resimulate": {"empty_g": 0.5, "rows": [
                              {"W": 2, "mean_steps": 2.0, "partition": partition,
                               "routing_gap": {"gap": 0.1, "low": 0.0, "high": 0.2}}]}}]}
    return {"schema_version": SCHEMA_VERSION, "kind": RESULTS_KIND, "bda_jax_version": "test",
            "created": "2026-01-01T00:00:00+00:00", "config": {"seed": 0, "quick": True},
            "cache": {"file": "demo-cache.jsonl", "loaded": 1, "computed": 2, "total": 3},
            "datasets": {"toy": block}, "dose_response": dose, "sleeper": sleeper, "dase": dase,
            "timings_s": {"compute": 1.0}}


def _images(page):
    return re.findall(r'<img[^>]*\bsrc="([^"]*)"', page)


def test_render_is_self_contained_and_escaped(tmp_path):
    path = render_report(tiny_results(), tmp_path / "out")
    assert path == tmp_path / "out" / "index.html"
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    srcs = _images(page)
    # 3 reliability diagrams, weights, dose, sleeper, partition, trajectories
    assert len(srcs) == 8
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # no script, no external resource: the file can be mailed
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)="(?!data:|#)', page)
    assert "http://" not in page and "https://" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page
    assert "toy&lt;1&gt;.jsonl" in page
    assert "(coalition)" in page and "-1.400" in page       # the inverted seat is visible
    assert not list((tmp_path / "out").glob(".bda_tmp_*"))    # atomic write left no temp file


def test_render_optional_sections_absent(tmp_path):
    res = tiny_results()
    res["sleeper"] = res["dose_response"] = res["dase"] = None
    del res["datasets"]["toy"]["weights"]
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    assert len(_images(page)) == 3 and 'id="sleeper"' not in page


def test_load_results_round_trip(tmp_path):
    res = tiny_results()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(res), encoding="utf-8")
    assert load_results(path) == res


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("schema_version"), "schema_version"),
    (lambda r: r.update(schema_version=SCHEMA_VERSION + 1), "schema_version"),
    (lambda r: r.update(schema_version="1"), "schema_version"),
    (lambda r: r.update(kind="bda_jax.cell_cache"), "kind"),
    (lambda r: r.pop("datasets"), "datasets"),
    (lambda r: r["datasets"]["toy"]["arms"][1]["row"].pop("accuracy"),
     "datasets.toy.arms[1].row.accuracy"),
    (lambda r: r["datasets"]["toy"]["arms"][0]["row"].update(ece_ew="0.1"),
     "datasets.toy.arms[0].row.ece_ew"),
    (lambda r: r["datasets"]["toy"]["weights"]["weight"].pop(), "datasets.toy.weights.weight"),
    (lambda r: r["dose_response"]["rows"][0].pop("arm"), "dose_response.rows[0].arm"),
    (lambda r: r["dase"]["excerpts"][0]["replays"][0].pop("records"),
     "dase.excerpts[0].replays[0].records"),
])
def test_load_results_names_the_bad_field(tmp_path, mutate, field):
    res = tiny_results()
    mutate(res)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(res), encoding="utf-8")
    with pytest.raises(ArtifactError) as err:
        load_results(path)
    assert err.value.field == field and err.value.file == str(path)
    with pytest.raises(ArtifactError):
        render_report(res, tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_load_results_unreadable(tmp_path):
    with pytest.raises(ArtifactError, match="cannot open"):
        load_results(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1,\n  "kind": ', encoding="utf-8")
    with pytest.raises(ArtifactError) as err:
        load_results(bad)
    assert err.value.line == 2
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ArtifactError, match="JSON object"):
        load_results(bad)
    with pytest.raises(ArtifactError):
        validate_results(copy.deepcopy([]))


# --------------------------------------------------------------------------- edited results files
# (issue #19: every field the report reads is validated first; a bad one is one typed error
# naming it, exit 2 from `bda report`, never an AttributeError / KeyError / TypeError)

def _set(path):
    """A mutation that sets the value at ``path`` (keys and list indices) of a results dict."""
    def mutate(doc, value):
        node = doc
        for key in path[:-1]:
            node = node[key]
        if value is _DEL:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return mutate


_DEL = object()
_HUGE = 10 ** 400                    # a JSON integer beyond any float


def _case_id(path, value):
    return f"{_field(path)}={'deleted' if value is _DEL else type(value).__name__}"


def _field(path):
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


@pytest.fixture(scope="module")
def evaluation_doc():
    """A real `bda evaluate` document: two arms on a small simulated council (one supervised, so
    the bootstrap and the selected hyperparameters are filled)."""
    from bda_jax.report import evaluation_results
    from bda_jax.simulate import simulate_council

    traces = simulate_council(0, 20, [0.74, 0.68, 0.68])
    return evaluation_results(traces, ["majority", "best-member"], folds=2, n_resamples=20,
                              source="council.jsonl")


EVALUATION_EDITS = [
    (("table", 1, "accuracy"), "0.7"),
    (("table", 0, "ece_ew"), float("nan")),                 # json.dumps writes NaN
    (("table", 0, "brier_mc"), _HUGE),
    (("table", 0, "arm"), 3),
    (("table", 1), "best-member"),
    (("table",), _DEL),
    (("table",), []),
    (("bootstrap",), []),
    (("bootstrap", "best-member", "accuracy", "delta"), "large"),
    (("bootstrap", "best-member", "accuracy"), [0.1]),
    (("selected", "best-member"), {"member": 0}),
    (("selected", "best-member", 0), [0]),
    (("agents",), 3),
    (("n_tasks",), "20"),
    (("K_max",), -1),
    (("cells",), "cached"),
    (("schema_version",), 2),
]


@pytest.mark.parametrize("path, value", EVALUATION_EDITS,
                         ids=[_case_id(*case) for case in EVALUATION_EDITS])
def test_edited_evaluation_results_name_the_bad_field(evaluation_doc, tmp_path, path, value):
    assert load_results(_write(tmp_path, evaluation_doc))["datasets"]      # the original loads
    doc = copy.deepcopy(evaluation_doc)
    _set(path)(doc, value)
    bad = _write(tmp_path, doc)
    with pytest.raises(ArtifactError) as err:
        load_results(bad)
    assert err.value.field == _field(path) and err.value.file == str(bad), err.value
    with pytest.raises(ArtifactError):
        validate_evaluation(doc)


def _write(tmp_path, doc):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


DEMO_EDITS = [
    (("dose_response", "p_grid", 1), "0.5"),
    (("dose_response", "rows", 0, "p_wrong"), [0.5]),
    (("dose_response", "regimes"), "persistent k=1"),
    (("dose_response", "rows", 2, "accuracy"), _HUGE),
    (("datasets", "toy", "arms", 0, "vs_reference"), [1]),
    (("datasets", "toy", "arms", 0, "vs_reference", "accuracy", "delta"), "+5 pp"),
    (("datasets", "toy", "arms", 1, "ci"), [0.1, 0.2]),
    (("datasets", "toy", "arms", 1, "ci", "accuracy"), [0.1]),
    (("datasets", "toy", "arms", 2, "bins", "accuracy"), "high"),
    (("datasets", "toy", "arms", 2, "bins", "count"), [1, 2]),
    (("datasets", "toy", "arms", 0, "selected"), {"b": 0.5}),
    (("datasets", "toy", "arms", 0, "row"), _DEL),
    (("datasets", "toy", "arms", 0, "arm"), None),
    (("datasets", "toy", "weights", "n_moves"), [90]),
    (("datasets", "toy", "weights", "adversaries"), 5),
    (("datasets", "toy", "weights", "agents", 1), 2),
    (("datasets", "toy", "weights", "hyperparameters"), ["b"]),
    (("datasets", "toy", "setup", "adversaries"), ["A1"]),
    (("datasets", "toy", "coalition", "compliance"), "most"),
    (("datasets", "toy"), []),
    (("sleeper", "table", 0, "f"), "x"),
    (("sleeper", "table", 1, "arm"), ["majority"]),
    (("sleeper", "factor"), float("inf")),
    (("sleeper", "monitor", 1, "ratio"), [3.1]),
    (("sleeper", "monitor", 0, "alarm", 0), "yes"),
    (("datasets", "toy", "arms", 1, "ci", "method"), ["percentile"]),
    (("datasets", "toy", "arms", 1, "not_ranked"), True),
    (("datasets", "toy", "arms", 1, "calibration"), "constant"),
    (("dase", "trajectories"), "many"),
    (("dase", "excerpts", 0, "settings", "W"), float("inf")),
    (("dase", "excerpts", 0, "replays", 0, "routing_gap"), [1]),
    (("dase", "excerpts", 0, "replays", 0, "partition"), _DEL),
    (("dase", "excerpts", 0, "replays", 0, "records", 0, "g"), 5),
    (("dase", "excerpts", 0, "replays", 0, "records", 1), "a record"),
    (("dase", "excerpts", 0, "resimulate", "rows"), {"W": 2}),
    (("cache",), [1]),
    (("environment",), "python"),
    (("config",), _DEL),
]


@pytest.mark.parametrize("path, value", DEMO_EDITS, ids=[_case_id(*case) for case in DEMO_EDITS])
def test_edited_demo_results_name_the_bad_field(tmp_path, path, value):
    res = tiny_results()
    _set(path)(res, value)
    bad = _write(tmp_path, res)
    with pytest.raises(ArtifactError) as err:
        load_results(bad)
    assert err.value.field == _field(path) and err.value.file == str(bad), err.value
    with pytest.raises(ArtifactError):
        render_report(res, tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_bda_report_answers_a_bad_field_with_exit_2(evaluation_doc, tmp_path):
    from typer.testing import CliRunner

    from bda_jax.cli import app

    doc = copy.deepcopy(evaluation_doc)
    doc["bootstrap"]["best-member"]["accuracy"]["ci_low"] = "low"
    bad = _write(tmp_path, doc)
    result = CliRunner().invoke(app, ["report", str(bad), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "bootstrap.best-member.accuracy.ci_low" in lines[0], lines
    assert "Traceback" not in result.output and not (tmp_path / "r").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_load_results_never_opens_a_fifo(tmp_path):
    import signal

    def blocked(*_):
        raise AssertionError("load_results blocked on a FIFO")
    os.mkfifo(tmp_path / "results.json")
    old = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(5)
    try:
        with pytest.raises(ArtifactError, match="not a regular file"):
            load_results(tmp_path / "results.json")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------- user strings in figures

MATH = r"$\frac{$ [/bold]"       # unbalanced mathtext: typeset, it would crash the render
TEX = "$x^2$"                    # balanced mathtext: typeset, it would show as x²


def _spy_mathtext(monkeypatch):
    """Every string matplotlib hands to its mathtext parser."""
    import matplotlib.mathtext

    seen = []
    original = matplotlib.mathtext.MathTextParser.parse

    def parse(self, s, *args, **kwargs):
        seen.append(s)
        return original(self, s, *args, **kwargs)
    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", parse)
    return seen


def test_user_strings_in_figures_are_plain_text(tmp_path, monkeypatch):
    res = tiny_results()
    block = res["datasets"]["toy"]
    block["title"] = MATH
    for arm, name in zip(block["arms"], ("majority", MATH, TEX)):
        arm["arm"] = arm["row"]["arm"] = name
        if name != MATH:
            arm["bins"] = None                  # one reliability diagram is enough here
    block["weights"]["agents"] = [MATH, TEX, "_hidden"]
    block["weights"]["adversaries"] = [MATH]
    dose = res["dose_response"]
    dose["regimes"] = [MATH]
    dose["arms"] = [MATH, TEX]
    for row in dose["rows"]:
        row["regime"] = MATH
        row["arm"] = MATH if row["arm"] == "majority" else TEX
    sl = res["sleeper"]
    sl["arms"] = [MATH, TEX]
    for row in sl["table"]:
        row["arm"] = MATH if row["arm"] == "majority" else TEX
    replay = res["dase"]["excerpts"][0]["replays"][0]
    replay["empty_g"] = TEX
    for r in replay["records"]:
        r["commit"], r["idx"] = MATH, TEX
    seen = _spy_mathtext(monkeypatch)
    with FigureRenderer(0) as here:             # drawn in this process, where the spy is
        page = render_report(res, tmp_path, figures=here).read_text(encoding="utf-8")
    assert len(_images(page)) == 6
    assert not [s for s in seen if "frac" in s or "x^2" in s], seen
    assert r"$\frac{$ [/bold]" in page and "$x^2$" in page           # shown as typed


def test_council_plots_draw_arm_names_as_plain_text(tmp_path, monkeypatch):
    from bda_jax.council import plot_attack, plot_comparison

    seen = _spy_mathtext(monkeypatch)
    rows = [{"arm": arm, "condition": cond, "accuracy": 0.5, "gamma": 0.1}
            for arm in (MATH, TEX) for cond in ("clean", "attacked")]
    assert os.path.getsize(plot_attack(rows, tmp_path / "attack.png", chance=0.25)) > 0
    rows = [{"method": m, "inferences": 3.0, "accuracy": 0.5} for m in ("sc", "dase" + MATH,
                                                                         "dase" + TEX)]
    assert os.path.getsize(plot_comparison(rows, tmp_path / "compare.png")) > 0
    assert not [s for s in seen if "frac" in s or "x^2" in s], seen


# --------------------------------------------------------------------------- figure workers

def _figure_workers() -> list[int]:
    """Process ids of this process's figure workers (Linux /proc)."""
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return [p for p in pids if b"bda_jax.report._figures\0serve\0" in open(f"/proc/{p}/cmdline", "rb").read()]


@pytest.fixture(scope="module")
def page_drawn_here(tmp_path_factory):
    """tiny_results' page with every figure drawn in this process."""
    with FigureRenderer(0) as here:
        return render_report(tiny_results(), tmp_path_factory.mktemp("here"),
                             figures=here).read_bytes()


def test_figure_workers_draw_the_same_page(page_drawn_here, tmp_path, monkeypatch):
    """A page drawn by workers (all figures handed over first, as the demo does section by
    section; or render_report's own workers, the caller drawing alongside) is byte-identical to
    one drawn in this process; a user's matplotlib style changes neither."""
    import matplotlib

    res, page = tiny_results(), page_drawn_here
    with FigureRenderer(1) as there:
        for name in ("dose_response", "sleeper", "dase"):     # one section at a time
            queue_figures({name: res[name]}, there)
        queue_figures(res, there)                             # the rest, none twice
        assert render_report(res, tmp_path / "there", figures=there).read_bytes() == page
    monkeypatch.setenv("BDA_JAX_FIGURE_WORKERS", "2")
    monkeypatch.setitem(matplotlib.rcParams, "font.size", 23.0)
    monkeypatch.setitem(matplotlib.rcParams, "lines.linewidth", 9.0)
    assert render_report(res, tmp_path / "auto").read_bytes() == page
    assert _images(page.decode()) and set(FIGURES) == {"reliability", "weights", "dose",
                                                       "sleeper", "trajectories", "partition"}


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc (Linux)")
def test_a_stopped_or_failing_worker_leaves_its_figure_to_the_caller():
    dose = tiny_results()["dose_response"]
    with FigureRenderer(0) as here:
        expected = here("dose", dose)
    with FigureRenderer(1) as there:
        (pid,) = _figure_workers()
        os.kill(pid, 9)                        # killed before or while drawing
        there.submit("dose", dose)
        assert there("dose", dose) == expected
    assert not _figure_workers()               # ended with the renderer
    bad = {"rows": [{"regime": "r", "arm": "a"}]}       # no p_wrong: the figure raises
    with FigureRenderer(1) as there:
        there.submit("dose", bad)
        with pytest.raises(KeyError, match="p_wrong"):  # the caller's own error, not a reply
            there("dose", bad)
    assert not _figure_workers()


@pytest.mark.parametrize("value", ["-1", "two", "1.5", "²", "\u0663"])
def test_figure_workers_setting_is_checked(value, monkeypatch, tmp_path):
    monkeypatch.setenv("BDA_JAX_FIGURE_WORKERS", value)
    with pytest.raises(DataError, match="BDA_JAX_FIGURE_WORKERS"):
        render_report(tiny_results(), tmp_path / "never")
    assert not (tmp_path / "never").exists()
    with pytest.raises(DataError, match="workers"):
        FigureRenderer(-1)


# --------------------------------------------------------------------------- headless browser

def _chromium():
    for name in (os.environ.get("BDA_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome", "google-chrome-stable"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


_PROBE = """<img id="bda-canary" src="data:image/png;base64,AAAA" alt="broken on purpose">
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  var b = document.body;
  b.setAttribute('data-images-total', String(imgs.length));
  b.setAttribute('data-images-ok', String(ok.length));
  b.setAttribute('data-canary-ok', String(document.getElementById('bda-canary').naturalWidth > 0));
  b.setAttribute('data-h2', String(document.querySelectorAll('h2').length));
  b.setAttribute('data-notes', String(document.querySelectorAll('ul.notes li').length));
  b.setAttribute('data-flags', String(document.querySelectorAll('.flag').length));
  var caps = Array.prototype.slice.call(document.querySelectorAll('figcaption'));
  b.setAttribute('data-bin-captions', String(caps.filter(function (c) {
    return c.textContent.indexOf('tasks per bin') === 0 && c.offsetHeight > 0; }).length));
  // the wide figures (not the reliability grid) are shown at >= 95 % of their drawn size
  var wide = ok.filter(function (i) { return !i.closest('.grid'); });
  var scale = wide.map(function (i) { return i.clientWidth / i.naturalWidth; });
  b.setAttribute('data-min-scale', String(Math.round(100 * Math.min.apply(null, scale))));
});
</script>"""


def _browser(exe, tmp_path, *args):
    cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, timeout=90, text=True)


def test_report_renders_in_headless_chromium(tmp_path):
    exe = _chromium()
    if exe is None:
        pytest.skip("headless browser check skipped: no chromium on PATH "
                    "(Debian: apt-get install -y chromium; or set BDA_CHROMIUM)")
    res = tiny_results()
    arms = res["datasets"]["toy"]["arms"]
    arms[0]["calibration"] = {"min": 0.5, "max": 0.5, "spread": 0.0, "constant_confidence": True}
    arms[1]["row"]["accuracy"], arms[1]["ci"]["accuracy"] = 1.0, [1.0, 1.0]
    page_path = render_report(res, tmp_path / "report")
    page = page_path.read_text(encoding="utf-8")
    n_images = len(_images(page))
    # A test copy with a probe that records, on window load, how many images decoded; it adds one
    # deliberately broken image, so the probe is shown to detect a failure.
    probe = tmp_path / "report" / "probe.html"
    probe.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = _browser(exe, tmp_path, "--virtual-time-budget=10000", "--dump-dom",
                   probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:2000]
    attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(0)))
    assert attrs.get("data-images-total") == str(n_images + 1), attrs
    assert attrs.get("data-images-ok") == str(n_images), attrs      # every report image loads
    assert attrs.get("data-canary-ok") == "false", attrs              # and the probe can fail
    assert int(attrs.get("data-h2", 0)) == 4, attrs
    # the flags and notes of issue 22.5 are on the rendered page: one constant-confidence
    # flag, its note and the degenerate-accuracy note; a bin-count caption per diagram
    assert attrs.get("data-flags") == "1" and attrs.get("data-notes") == "2", attrs
    assert attrs.get("data-bin-captions") == "3", attrs
    assert int(attrs.get("data-min-scale", 0)) >= 95, attrs
    # the unmodified page renders to a non-trivial screenshot
    shot = tmp_path / "shot.png"
    res = _browser(exe, tmp_path, "--hide-scrollbars", "--window-size=1200,3000",
                   f"--screenshot={shot}", page_path.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


# --------------------------------------------------------------------------- honest statistics
# (issue 22.5: flagged constant-confidence arms, points inside intervals, bin counts, notes on
# degenerate results, the sleeper alarm's own statistic, papers cited by name)

def _metric_rows(page):
    """{arm cell text: [cell HTML, ...]} of the first metrics table of a page."""
    table = page[page.index("<th class=\"l\">arm</th>"):]
    table = table[: table.index("</table>")]
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1]):
        cells = re.findall(r"<td([^>]*)>(.*?)</td>", tr)
        rows[re.sub(r"<[^>]+>", "", cells[0][1]).split(" ")[0]] = cells
    return rows


def _bold(cell):
    return "best" in cell[0]


def test_constant_confidence_arm_is_flagged_and_never_ranked_on_ece(tmp_path):
    res = tiny_results()
    arms = res["datasets"]["toy"]["arms"]
    const = arms[0]                                          # majority: the lowest ECE now
    const["row"]["ece_ew"], const["ci"]["ece_ew"] = 0.01, [0.0, 0.04]
    const["calibration"] = {"n": 40, "min": 0.5, "max": 0.5, "spread": 0.0, "sd": 0.0,
                            "constant_confidence": True}
    arms[1]["calibration"] = {"n": 40, "min": 0.5, "max": 0.99, "spread": 0.49, "sd": 0.1,
                              "constant_confidence": False}
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    rows = _metric_rows(page)
    assert "constant confidence" in rows["majority"][0][1]
    assert not _bold(rows["majority"][3])                    # lowest ECE, but not ranked on it
    assert _bold(rows["bda-per-agent"][3])                   # 0.05: the best ranked ECE
    assert "it is not ranked on ECE" in page and "(constant conf.)" not in page.split("<img")[0]


def test_not_ranked_arm_gets_no_bold_and_its_reason(tmp_path):
    res = tiny_results()
    arm = res["datasets"]["toy"]["arms"][0]
    arm["row"]["accuracy"], arm["ci"]["accuracy"] = 0.95, [0.9, 1.0]    # the best accuracy
    arm["not_ranked"] = "the data states no confidences"
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    rows = _metric_rows(page)
    assert not any(_bold(c) for c in rows["majority"])
    assert _bold(rows["bda-per-agent"][1])                             # 0.8 ranks first
    assert "is not ranked: the data states no confidences" in page


def test_point_outside_its_interval_is_marked_and_not_ranked(tmp_path):
    res = tiny_results()
    arm = res["datasets"]["toy"]["arms"][1]                   # bda-per-agent, ECE 0.05
    arm["ci"]["ece_ew"] = [0.07, 0.12]                        # an old file's percentile interval
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    rows = _metric_rows(page)
    assert "†" in rows["bda-per-agent"][3][1] and not _bold(rows["bda-per-agent"][3])
    assert _bold(rows["majority"][1]) is False and _bold(rows["bda-per-agent"][1])
    assert "outside its interval" in page


def test_degenerate_accuracy_carries_a_note(tmp_path):
    res = tiny_results()
    block = res["datasets"]["toy"]                             # K = 2 with a coalition
    arm = block["arms"][1]
    arm["row"]["accuracy"], arm["ci"]["accuracy"] = 1.0, [1.0, 1.0]
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    assert "‡" in _metric_rows(page)["bda-per-agent"][1][1]
    assert "zero-width interval" in page and "by construction" in page
    block["coalition"], block["K"] = None, 3                    # no coalition: no construction
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    assert "zero-width interval" in page and "by construction" not in page


def test_reliability_diagrams_show_bin_counts(tmp_path):
    res = tiny_results()
    page = render_report(res, tmp_path).read_text(encoding="utf-8")
    count = res["datasets"]["toy"]["arms"][0]["bins"]["count"]
    # the caption's text, derived here from the counts: equal-width bins of 0.1
    parts = [f"[{m / 10:.1f}, {(m + 1) / 10:.1f}{']' if m == 9 else ')'}: {c}"
             for m, c in enumerate(count) if c]
    expected = f"tasks per bin ({sum(count)} in all): " + "; ".join(parts)
    assert expected == "tasks per bin (40 in all): [0.5, 0.6): 10; [0.6, 0.7): 8; " \
                       "[0.7, 0.8): 7; [0.9, 1.0]: 15"
    assert page.count(html_escape(expected)) == 3             # one caption per diagram


def html_escape(text):
    import html
    return html.escape(text, quote=True)


def test_sleeper_figure_plots_the_alarm_statistic(tmp_path, monkeypatch):
    import matplotlib.axes

    plotted = []
    original = matplotlib.axes.Axes.plot

    def plot(self, *args, **kwargs):
        plotted.append((kwargs.get("label"), list(args[1]) if len(args) > 1 else None))
        return original(self, *args, **kwargs)
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    res = tiny_results()
    with FigureRenderer(0) as here:             # drawn in this process, where the spy is
        page = render_report(res, tmp_path, figures=here).read_text(encoding="utf-8")
    largest = [max(m["ratio"]) for m in res["sleeper"]["monitor"]]
    assert largest == [1.1, 3.1, 7.0]
    assert ("largest seat ratio", largest) in plotted         # not the mean over seats
    assert not [lab for lab, _ in plotted if lab and "mean over seats" in str(lab)]
    sl = page[page.index('id="sleeper"'):]
    row = re.search(r"<td class=\"l\">0.5</td>(.*?)</tr>", sl).group(1)
    assert "1.90" in row and "3.10 (A1)" in row and row.endswith("<td>yes</td>")


def test_captions_cite_papers_by_name(tmp_path):
    page = render_report(tiny_results(), tmp_path).read_text(encoding="utf-8")
    text = re.sub(r'src="[^"]*"', "", page)
    assert "[BDA] Appendix F.3" in text and "[BDA] Appendix F.8, F.13" in text
    assert "[DASE]" in text
    assert not re.search(r"seed 0\d\d|\b00\d_|seeds/", text)


def test_evaluation_records_confidence_spread_and_flags_a_constant_arm(tmp_path):
    """`bda evaluate` on crowd labels (no stated confidences): the verbalized vote gives every
    task the uniform distribution over K = 2, confidence 0.5 throughout, and is flagged; the
    rendered page does not rank it on ECE."""
    from bda_jax.datasets import load_crowd, to_traces
    from bda_jax.report import evaluation_results

    traces = to_traces(load_crowd("bluebirds"))
    doc = evaluation_results(traces, ["verbalized"], folds=2, n_resamples=20)
    verb, maj = doc["calibration"]["verbalized"], doc["calibration"]["majority"]
    assert (verb["min"], verb["max"], verb["constant_confidence"]) == (0.5, 0.5, True)
    assert verb["n"] == doc["n_labeled"] == 108
    assert maj["constant_confidence"] is False
    assert maj["spread"] == pytest.approx(maj["max"] - maj["min"], abs=2e-6) and maj["spread"] > 0.1
    path = _write(tmp_path, doc)
    page = render_report(load_results(path), tmp_path / "r").read_text(encoding="utf-8")
    rows = _metric_rows(page)
    assert "constant confidence" in rows["verbalized"][0][1] and not _bold(rows["verbalized"][3])
