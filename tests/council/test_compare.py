"""The compute-matched comparison ([DASE] §4-5, Figure 3) live against the loopback fake server:
every baseline at every budget recomputed by hand from the run histories, DASE's calls shared
with Debate-Sparse through the cache, one BH family, the files and the refusals."""
import hashlib
import json
import random
from collections import Counter

import pytest

pytest.importorskip("openai")

import bda_jax as bda  # noqa: E402
from bda_jax.council import (COMPARE_KIND, CouncilConfig, Endpoint, Question, Seat,  # noqa: E402
                             run_comparison)

from council.fake_server import FakeServer  # noqa: E402


def _responder(body):
    r = random.Random(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest())
    return "No idea." if r.random() < 0.1 else f"Reasoning.\nAnswer: {r.choice('AAABC')}"


def _plurality(answers):
    said = [a for a in answers if a != "empty"]
    if not said:
        return None
    counts = Counter(said)
    best = max(counts.values())
    return next(a for a in said if counts[a] == best)          # ties: first seen


def _hist(path):
    return [json.loads(line) for line in open(path)]


def test_every_budget_matches_a_hand_recount(tmp_path):
    qs = [Question(f"q{i}", f"Problem {i}?", ("A", "B", "C", "D"), "A") for i in range(8)]
    with FakeServer(responder=_responder) as srv:
        cfg = CouncilConfig(endpoints={"fake": Endpoint("fake", srv.base_url, max_concurrency=8,
                                                        timeout_s=10, max_retries=1)},
                            seats=tuple(Seat(f"s{i}", "fake", "deterministic", 0.7, i)
                                        for i in range(3)))
        res = run_comparison(qs, cfg, tmp_path / "cmp", max_rounds=3, W=(2,), L=6, n_boot=50)
        sent = [json.dumps(r, sort_keys=True) for r in srv.requests if "messages" in r]
    out = tmp_path / "cmp"
    rows = {(r["method"], r["budget"]): r for r in res.rows}
    sc, imsc = _hist(out / "sc.jsonl"), _hist(out / "imsc.jsonl")
    dd, ds = _hist(out / "debate-dense.jsonl"), _hist(out / "debate-sparse.jsonl")
    assert all(len(r["history"]) == 1 and len(r["history"][0]["norms"]) == 9 for r in sc)
    for R in (1, 2, 3):
        def acc(picks):
            return sum(p == "A" for p in picks) / len(picks)
        assert rows["sc", f"k={3 * R}"]["accuracy"] == acc(
            [_plurality(r["history"][0]["norms"][:3 * R]) for r in sc])
        assert rows["imsc", f"R={R}"]["accuracy"] == acc(
            [_plurality([a for h in r["history"][:R] for a in h["norms"]]) for r in imsc])
        for name, h in (("debate-dense", dd), ("debate-sparse", ds)):
            assert rows[name, f"R={R}"]["accuracy"] == acc(
                [_plurality(r["history"][R - 1]["norms"]) for r in h])
            assert rows[name, f"R={R}"]["inferences"] == 3 * R
    # round 1 is the same request under every injection: the same answers
    assert [r["history"][0]["norms"] for r in dd] == [r["history"][0]["norms"] for r in ds]
    dase = _hist(out / "dase-W2.jsonl")
    row = rows["dase-W2", "adaptive"]
    assert row["inferences"] == sum(3 * len(r["history"]) for r in dase) / 8
    assert row["accuracy"] == sum(r["cert"]["consensus"] == "A" for r in dase) / 8
    # DASE's rounds are Debate-Sparse's, byte for byte, while both run: served by the cache
    for d, s in zip(dase, ds):
        steps = min(len(d["history"]), 3)
        assert [h["norms"] for h in d["history"][:steps]] == [h["norms"] for h in s["history"][:steps]]
    assert len(set(sent)) == len(sent)                     # no request was paid twice
    part = res.dase["dase-W2"]["partition"]
    assert part["overall"]["n"] == 8
    assert sum(part[k]["n"] for k in part if k != "overall") == 8
    assert len(res.mcnemar) == 4 and all("p_bh" in m for m in res.mcnemar)
    assert all(m["p_bh"] >= m["p"] for m in res.mcnemar)
    doc = json.loads((out / "compare.json").read_text())
    assert doc["kind"] == COMPARE_KIND and doc["schema_version"] == 1
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert "| dase-W2 | adaptive |" in (out / "compare.md").read_text()


def test_comparison_needs_gold_and_a_budget(tmp_path):
    cfg = CouncilConfig(endpoints={"e": Endpoint("e", "http://127.0.0.1:9/v1")},
                        seats=(Seat("s", "e", "m"),))
    with pytest.raises(bda.DataError, match="gold"):
        run_comparison([Question("q", "x?", ("A", "B"))], cfg, tmp_path / "c")
    with pytest.raises(bda.DataError, match="max_rounds"):
        run_comparison([Question("q", "x?", ("A", "B"), "A")], cfg, tmp_path / "c",
                       max_rounds=0)
