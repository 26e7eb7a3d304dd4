"""Ledger rows and totals: tokens, latency, retries, cache hits, cost per million tokens."""
import pytest

from bda_jax.council import ChatReply, ChatRequest, Ledger, Price


def _req(model, endpoint="local"):
    return ChatRequest(endpoint=endpoint, model=model, messages=({"role": "user", "content": "q"},),
                       temperature=0.0, seed=None, schema=None)


def test_rows_and_totals():
    led = Ledger({"a": Price(prompt_per_million=2.0, completion_per_million=10.0)})
    led.record(_req("a"), ChatReply("x", 1000, 200, 0.5, retries=1, model="a-v1"), task="t1", seat="s1")
    led.record(_req("a"), ChatReply("y", 3000, 100, 0.25), task="t1", seat="s2")
    led.record(_req("a"), ChatReply("z", 5000, 500, 0.75, cached=True), task="t2", seat="s1")
    rows = led.rows()
    assert [r["seat"] for r in rows] == ["s1", "s2", "s1"]
    assert rows[0] == {"task": "t1", "seat": "s1", "endpoint": "local", "model": "a", "reply_model": "a-v1",
                       "sample": 0, "prompt_tokens": 1000, "completion_tokens": 200, "latency_s": 0.5,
                       "retries": 1, "cached": False, "cost": pytest.approx(0.004)}
    # 1000*2/1e6 + 200*10/1e6 = 0.002 + 0.002; 3000*2/1e6 + 100*10/1e6 = 0.006 + 0.001; cached: 0
    assert rows[1]["cost"] == pytest.approx(0.007)
    assert rows[2]["cost"] == 0.0
    s = led.summary()
    assert s["calls"] == 3 and s["cached"] == 1
    assert s["prompt_tokens"] == 4000 and s["completion_tokens"] == 300    # upstream calls only
    assert s["latency_s"] == pytest.approx(0.75) and s["retries"] == 1
    assert s["cost"] == pytest.approx(0.011)
    assert s["cost_note"] is None and s["cost_unknown_models"] == []
    assert s["per_model"]["a"]["calls"] == 3
    rows[0]["task"] = "changed"                                           # rows() are copies
    assert led.rows()[0]["task"] == "t1"


def test_unknown_model_cost():
    led = Ledger({"a": Price(1.0, 1.0)})
    led.record(_req("a"), ChatReply("x", 500_000, 500_000, 0.1), task="t", seat="s")
    led.record(_req("zeta"), ChatReply("x", 10, 10, 0.1), task="t", seat="s")
    led.record(_req("beta"), ChatReply("x", 10, 10, 0.1), task="t", seat="s")
    assert led.rows()[1]["cost"] is None
    s = led.summary()
    assert s["cost"] == pytest.approx(1.0)                # priced models only
    assert s["per_model"]["zeta"]["cost"] is None and s["per_model"]["a"]["cost"] == pytest.approx(1.0)
    assert s["cost_unknown_models"] == ["beta", "zeta"]
    assert s["cost_note"] == "cost unknown for models ['beta', 'zeta']"


def test_no_price_table_and_empty_ledger():
    assert Ledger().summary()["calls"] == 0
    led = Ledger(None)
    led.record(_req("m"), ChatReply("x", 1, 1, 0.0), task="t", seat="s")
    assert led.summary()["cost_note"] == "cost unknown for models ['m']"
