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
from bda_jax.report import (RESULTS_KIND, SCHEMA_VERSION, load_results, render_report,
                            validate_results)

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
    sleeper = {"arms": ["majority", "bda-per-agent"], "f_grid": [0.0, 1.0], "factor": 2.0,
               "reliabilities": [0.74, 0.68, 0.68], "compliance": 0.6, "setup": "toy",
               "n_tasks": {"reference": 10, "calibration": 10, "deployment": 10},
               "table": [{"f": f, "arm": a, "accuracy": acc, "ece_ew": 0.1, "brier_mc": 0.3,
                          "drift": 0.05 + 0.3 * f, "floor": 0.05, "drift_ratio": 1 + 5 * f,
                          "alarm": f > 0}
                         for f in (0.0, 1.0)
                         for a, acc in (("majority", 0.37), ("bda-per-agent", 0.3 + 0.5 * f))]}
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
    (lambda r: r["dose_response"]["rows"][0].pop("arm"), "dose_response.rows[0]"),
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
    assert not (tmp_path / "never" / "index.html").exists()


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
    page_path = render_report(tiny_results(), tmp_path / "report")
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
    # the unmodified page renders to a non-trivial screenshot
    shot = tmp_path / "shot.png"
    res = _browser(exe, tmp_path, "--hide-scrollbars", "--window-size=1200,3000",
                   f"--screenshot={shot}", page_path.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
