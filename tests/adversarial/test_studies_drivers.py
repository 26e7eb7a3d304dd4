"""The clean-data study drivers (``benchmarks/study_label_efficiency.py``, ``study_transfer``,
``study_round_window``, ``study_seeds``, ``study_fix_break_k``): each run at a tiny size into a
temporary folder writes its JSON (schema, the study result it embeds, the paper's numbers, the
claims), its page (the paper's numbers beside ours, the figure linked) and its PNG figure; the
committed results, pages and figures are the drivers' own and agree with each other. The full
sizes, and the claims the simulator reproduces at them, run behind ``-m slow``.
"""
import json
import sys
from pathlib import Path

import pytest

from bda_jax.adversarial import (FixBreakByK, LabelEfficiency, RoundWindows, SeedSpread,
                                 TransferStudy, study_config)

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:            # the benchmarks package lives beside bda_jax
    sys.path.insert(0, str(ROOT))
from benchmarks import (study_fix_break_k, study_label_efficiency, study_pages,  # noqa: E402
                        study_round_window, study_seeds, study_transfer)

#: driver -> (module, page name, result class, tiny overrides of its quick preset)
DRIVERS = {
    "label_efficiency": (study_label_efficiency, "label-efficiency", LabelEfficiency,
                         dict(n_questions=20, arms=["bda-per-agent"], n_resamples=10,
                              councils=[{"label": "binary", "n_candidates": 2,
                                         "budgets": [10, 25, None]}])),
    "transfer": (study_transfer, "transfer", TransferStudy,
                 dict(n_questions=20, arms=["majority", "bda-per-agent"], n_resamples=10)),
    "round_window": (study_round_window, "round-window", RoundWindows,
                     dict(n_questions=20, arms=["majority", "bda-per-agent"], n_resamples=10)),
    "seeds": (study_seeds, "seeds", SeedSpread,
              dict(n_questions=20, arms=["majority", "bda-shared", "bda-per-agent"],
                   n_resamples=10)),
    "fix_break_k": (study_fix_break_k, "fix-break-k", FixBreakByK,
                    dict(n_questions=20, k_grid=[2], n_resamples=10)),
}


def check_outputs(name, root, real: bool):
    module, page, cls, _ = DRIVERS[name]
    files = study_pages.paths(root, name, page)
    doc = json.loads(files["json"].read_text())
    assert doc["schema_version"] == 1 and doc["kind"] == "bda_jax.benchmark.study"
    assert doc["study"] == name and {"seed", "config", "timing", "platform", "result",
                                     "paper"} <= set(doc)
    results = doc["result"] if name == "transfer" else {"": doc["result"]}
    for result in results.values():
        cls.from_json(result)                               # a study result of its kind
    if "claims" in doc:
        assert doc["claims"] and all({"claim", "holds", "detail"} <= set(c)
                                     for c in doc["claims"])
    text = files["page"].read_text()
    assert f"figures/{files['figure'].name}" in text
    assert f"python -m benchmarks.{module.__name__.split('.')[-1]}" in text
    assert files["figure"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if name in ("transfer", "fix_break_k"):
        assert (doc.get("real_data") == "found" or doc.get("real") is not None) == real
    return doc, text


@pytest.mark.parametrize("name", list(DRIVERS))
def test_driver_writes_json_page_and_figure(name, tmp_path):
    module, _, _, overrides = DRIVERS[name]
    extra = {"real": False} if name in ("transfer", "fix_break_k") else {}
    module.main(0, root=tmp_path, quick=True, **extra, **overrides)
    doc, _ = check_outputs(name, tmp_path, real=False)
    assert doc["quick"] is True and doc["config"]["n_questions"] == 20


@pytest.mark.parametrize("name", list(DRIVERS))
def test_committed_outputs_are_the_drivers(name):
    doc, text = check_outputs(name, ROOT, real=name in ("transfer", "fix_break_k"))
    assert doc["quick"] is False
    assert doc["config"] == study_config(DRIVERS[name][1])    # the full preset, as stated
    assert f"{doc['timing']['cpu_s']:.0f} CPU-s" in text


def test_driver_pages_carry_the_papers_numbers():
    pages = {n: (ROOT / "docs" / f"results-{p}.md").read_text()
             for n, (_, p, _, _) in DRIVERS.items()}
    assert "(0.707)" in pages["label_efficiency"] and "(0.355)" in pages["label_efficiency"]
    assert "0.791 vs 0.779" in pages["transfer"] and "3/3" in pages["transfer"]
    assert "(0.748)" in pages["round_window"] and "185 fixed, 168 broken" in pages["round_window"]
    assert "(0.751 ± 0.010)" in pages["seeds"] and "+0.0171" in pages["seeds"]
    assert "185:168 (1.10)" in pages["fix_break_k"] and "82:51 (1.61)" in pages["fix_break_k"]


# ----------------------------------------------------------------------------- full sizes

@pytest.mark.slow
@pytest.mark.parametrize("name", list(DRIVERS))
def test_full_driver_reproduces_the_committed_results(name, tmp_path):
    """The full preset rerun gives the committed numbers (same seed, same bits)."""
    module = DRIVERS[name][0]
    module.main(0, root=tmp_path)
    fresh = json.loads(study_pages.paths(tmp_path, name, DRIVERS[name][1])["json"].read_text())
    committed = json.loads(study_pages.paths(ROOT, name, DRIVERS[name][1])["json"].read_text())
    assert fresh["result"] == committed["result"]
    assert fresh.get("claims") == committed.get("claims")
