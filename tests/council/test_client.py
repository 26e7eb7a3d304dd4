"""CouncilClient against the loopback fake server: one test per fault with its outcome, cache
hits, replay-only misses, the concurrency bound, the rate limit and the ledger."""
import asyncio
import json
import random
import time

import pytest

pytest.importorskip("openai")

from bda_jax import DataError  # noqa: E402
from bda_jax.council import (CacheMiss, ChatRequest, CouncilClient, Endpoint, Ledger, Price,  # noqa: E402
                             ReplyCache, UpstreamError)
from council.fake_server import FakeServer, instance_of  # noqa: E402

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["force", "answer", "argument"],
          "properties": {"force": {"type": "string", "enum": ["propose", "concede"]},
                         "answer": {"type": "string", "enum": ["A", "B", "C"]},
                         "argument": {"type": "string", "maxLength": 10}}}


def _req(model="deterministic", i=0, schema=SCHEMA, **kw):
    return ChatRequest(endpoint="local", model=model,
                       messages=({"role": "system", "content": "be brief"},
                                 {"role": "user", "content": f"question {i}"}),
                       temperature=0.0, seed=7, schema=schema, **kw)


def _client(srv, cache=None, ledger=None, **ep):
    ep.setdefault("timeout_s", 5.0)
    endpoint = Endpoint(name="local", base_url=srv.base_url, **ep)
    return CouncilClient({"local": endpoint}, cache if cache is not None else ReplyCache(None, mode="off"),
                         ledger, backoff_base_s=0.01, backoff_cap_s=0.05)


def _run(client, coro_fn):
    async def main():
        try:
            return await coro_fn(client)
        finally:
            await client.aclose()
    return asyncio.run(main())


def _valid(text):
    obj = json.loads(text)
    return (set(obj) == {"force", "answer", "argument"} and obj["force"] in ("propose", "concede")
            and obj["answer"] in ("A", "B", "C") and len(obj["argument"]) <= 10)


def test_deterministic_reply_request_and_usage():
    with FakeServer() as srv:
        r1 = _run(_client(srv), lambda c: c.complete(_req()))
        r2 = _run(_client(srv), lambda c: c.complete(_req()))
        body = srv.requests[0]
    assert _valid(r1.text) and r1.text == r2.text                 # same request, same answer
    assert r1.retries == 0 and not r1.cached and r1.model == "deterministic"
    assert r1.prompt_tokens > 0 and r1.completion_tokens > 0 and r1.latency_s > 0
    assert body["model"] == "deterministic" and body["seed"] == 7 and body["temperature"] == 0.0
    assert body["max_tokens"] == 256 and body["messages"][1] == {"role": "user", "content": "question 0"}
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "move", "schema": SCHEMA, "strict": True}}


def test_no_schema_no_seed_sends_neither():
    with FakeServer() as srv:
        reply = _run(_client(srv), lambda c: c.complete(ChatRequest(
            endpoint="local", model="deterministic", messages=({"role": "user", "content": "hi"},),
            temperature=0.5, seed=None, schema=None)))
        body = srv.requests[0]
    assert "response_format" not in body and "seed" not in body
    assert reply.text.startswith("a short argument")


def test_fault_429_retry_after_then_ok():
    with FakeServer() as srv:
        reply = _run(_client(srv), lambda c: c.complete(_req("fault-429")))
        n = len(srv.requests)
    assert reply.retries == 1 and _valid(reply.text) and n == 2


def test_fault_500_once_retried():
    with FakeServer() as srv:
        reply = _run(_client(srv), lambda c: c.complete(_req("fault-500")))
        n = len(srv.requests)
    assert reply.retries == 1 and _valid(reply.text) and n == 2


def test_fault_slow_beyond_timeout_retried():
    with FakeServer(slow_s=1.0) as srv:
        reply = _run(_client(srv, timeout_s=0.3), lambda c: c.complete(_req("fault-slow")))
        n = len(srv.requests)
    assert reply.retries == 1 and _valid(reply.text) and n == 2
    assert reply.latency_s < 0.3                                 # latency of the successful attempt


def test_fault_truncated_returned_unchanged():
    with FakeServer() as srv:
        reply = _run(_client(srv), lambda c: c.complete(_req("fault-truncated")))
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply.text)
    # the full answer would be the schema instance the server derives; the client passes half of it
    assert reply.retries == 0 and reply.text and reply.text[0] == "{"


def test_fault_offschema_returned_unchanged():
    with FakeServer() as srv:
        reply = _run(_client(srv), lambda c: c.complete(_req("fault-offschema")))
    assert json.loads(reply.text) == {"verdict": "off schema", "force": "shout"}
    assert reply.retries == 0


def test_unknown_model_is_one_line_upstream_error_no_retry():
    with FakeServer() as srv:
        with pytest.raises(UpstreamError) as ei:
            _run(_client(srv), lambda c: c.complete(_req("no-such-model"), task="t1", seat="s"))
        n = len(srv.requests)
        url = srv.base_url
    msg = str(ei.value)
    assert "\n" not in msg and n == 1
    assert f"endpoint 'local' ({url}), model 'no-such-model': 404 model not found" in msg
    assert ei.value.status == 404 and ei.value.task_id == "t1"


def test_401_fails_at_once(monkeypatch):
    monkeypatch.setenv("FAKE_KEY_FOR_TEST", "wrong")
    with FakeServer(api_key="right") as srv:
        with pytest.raises(UpstreamError, match="401 invalid api key") as ei:
            _run(_client(srv, api_key_env="FAKE_KEY_FOR_TEST"), lambda c: c.complete(_req()))
        n = len(srv.requests)
    assert n == 1 and ei.value.status == 401 and "\n" not in str(ei.value)


def test_api_key_is_sent(monkeypatch):
    monkeypatch.setenv("FAKE_KEY_FOR_TEST", "right")
    with FakeServer(api_key="right") as srv:
        reply = _run(_client(srv, api_key_env="FAKE_KEY_FOR_TEST"), lambda c: c.complete(_req()))
    assert _valid(reply.text)


def test_missing_api_key_variable_is_data_error_before_any_call(monkeypatch):
    monkeypatch.delenv("FAKE_KEY_ABSENT", raising=False)
    with FakeServer() as srv:
        with pytest.raises(DataError, match="FAKE_KEY_ABSENT") as ei:
            _run(_client(srv, api_key_env="FAKE_KEY_ABSENT"), lambda c: c.complete(_req()))
        n = len(srv.requests)
    assert n == 0 and ei.value.field == "endpoints.local.api_key_env"


def test_exhausted_retries_name_last_failure():
    with FakeServer() as srv:
        with pytest.raises(UpstreamError) as ei:
            _run(_client(srv, max_retries=0), lambda c: c.complete(_req("fault-500")))
        n = len(srv.requests)
    assert n == 1
    assert "model 'fault-500': gave up after 1 attempt, last: 500 internal error" in str(ei.value)


def test_connection_refused_retried_then_upstream_error():
    with FakeServer() as srv:
        url = srv.base_url                                   # a port nobody listens on after exit
    endpoint = Endpoint(name="local", base_url=url, timeout_s=1.0, max_retries=2)
    client = CouncilClient({"local": endpoint}, ReplyCache(None, mode="off"),
                           backoff_base_s=0.01, backoff_cap_s=0.02)
    with pytest.raises(UpstreamError, match="gave up after 3 attempts, last: connection error"):
        _run(client, lambda c: c.complete(_req()))


def test_backoff_is_full_jitter_seeded_from_the_key():
    client = CouncilClient({}, ReplyCache(None, mode="off"))
    key = _req().key()
    got = [client.backoff_delay(random.Random(int(key, 16)), k) for k in (1,)]
    rng = random.Random(int(key, 16))
    assert got == [rng.uniform(0.0, 0.5)]
    rng = random.Random(int(key, 16))
    delays = [client.backoff_delay(rng, k) for k in range(1, 8)]
    caps = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert all(0.0 <= d <= c for d, c in zip(delays, caps, strict=True))


def test_cache_hit_sends_no_request(tmp_path):
    path = tmp_path / "c.sqlite"
    with FakeServer() as srv:
        with ReplyCache(path) as cache:
            first = _run(_client(srv, cache), lambda c: c.complete(_req()))
        with ReplyCache(path) as cache:
            again = _run(_client(srv, cache), lambda c: c.complete(_req()))
        n = len(srv.requests)
    assert n == 1 and again.cached and not first.cached and again.text == first.text
    assert (again.prompt_tokens, again.completion_tokens) == (first.prompt_tokens, first.completion_tokens)


def test_replay_miss_raises_cache_miss_without_request(tmp_path):
    path = tmp_path / "c.sqlite"
    ReplyCache(path).close()
    with FakeServer() as srv:
        with ReplyCache(path, mode="replay") as cache:
            with pytest.raises(CacheMiss, match="model 'deterministic'.*seat 'gemma'") as ei:
                _run(_client(srv, cache), lambda c: c.complete(_req(), task="t3", seat="gemma"))
        n = len(srv.requests)
    assert n == 0 and ei.value.task_id == "t3"


def test_concurrency_bound_respected():
    with FakeServer(delay_s=0.1) as srv:
        async def go(c):
            return await asyncio.gather(*(c.complete(_req(i=i)) for i in range(8)))
        replies = _run(_client(srv, max_concurrency=2), go)
        peak = srv.max_in_flight
    assert len(replies) == 8 and peak == 2


def test_requests_per_minute_spacing():
    # 600 per minute: request starts 0.1 s apart, so the 4th cannot start before 0.3 s
    with FakeServer() as srv:
        async def go(c):
            t0 = time.perf_counter()
            await asyncio.gather(*(c.complete(_req(i=i)) for i in range(4)))
            return time.perf_counter() - t0
        elapsed = _run(_client(srv, max_concurrency=4, requests_per_minute=600), go)
        n = len(srv.requests)
    assert n == 4 and elapsed >= 0.3


def test_list_models():
    with FakeServer(models=("m1", "m2")) as srv:
        got = _run(_client(srv), lambda c: c.list_models("local"))
    assert got == ["m1", "m2"]


def test_unknown_endpoint_is_data_error():
    client = CouncilClient({}, ReplyCache(None, mode="off"))
    with pytest.raises(DataError, match="unknown endpoint 'local'"):
        _run(client, lambda c: c.complete(_req()))


def test_ledger_totals_through_the_client(tmp_path):
    ledger = Ledger({"deterministic": Price(prompt_per_million=1e6, completion_per_million=0.0)})
    with FakeServer() as srv, ReplyCache(tmp_path / "c.sqlite") as cache:
        client = _client(srv, cache, ledger)

        async def go(c):
            a = await c.complete(_req(i=0), task="t1", seat="s1")
            b = await c.complete(_req("fault-500", i=1), task="t1", seat="s2")
            hit = await c.complete(_req(i=0), task="t2", seat="s1")
            return a, b, hit
        a, b, hit = _run(client, go)
        bodies = list(srv.requests)
    s = ledger.summary()
    assert s["calls"] == 3 and s["cached"] == 1 and s["retries"] == 1
    assert s["prompt_tokens"] == a.prompt_tokens + b.prompt_tokens
    assert s["completion_tokens"] == a.completion_tokens + b.completion_tokens
    # the fake server counts len(text) // 4 + 1 prompt tokens over the joined message contents
    assert a.prompt_tokens == len("be brief question 0") // 4 + 1
    assert s["cost"] == pytest.approx(a.prompt_tokens * 1.0)          # fault-500 has no price
    assert s["cost_note"] == "cost unknown for models ['fault-500']"
    assert [(r["task"], r["seat"], r["cached"]) for r in ledger.rows()] == [
        ("t1", "s1", False), ("t1", "s2", False), ("t2", "s1", True)]
    assert hit.text == a.text and len(bodies) == 3                   # 1 + (500, ok); the hit sent nothing


def test_fake_server_instances_are_valid_for_nullable_and_anyof():
    schema = {"type": "object", "properties": {
        "t": {"type": ["string", "null"], "enum": ["m1", None]},
        "n": {"anyOf": [{"type": "integer", "minimum": 3}, {"const": "x"}]},
        "xs": {"type": "array", "items": {"type": "boolean"}, "minItems": 2}}}
    for d in ("a", "b", "c", "d"):
        v = instance_of(schema, d)
        assert v["t"] == "m1" and v["n"] in (3, "x") and len(v["xs"]) == 2


def test_identical_requests_in_flight_go_upstream_once():
    """Two identical requests at once (e.g. ArgLLMs scoring the same argument text under two
    candidates) make one upstream call; the second shares its reply, counted as cached."""
    with FakeServer(delay_s=0.2) as srv:
        ledger = Ledger()
        client = _client(srv, ReplyCache(None), ledger)

        async def both(c):
            return await asyncio.gather(c.complete(_req(i=1)), c.complete(_req(i=1)),
                                        c.complete(_req(i=2)))
        a, b, other = _run(client, both)
    assert len([r for r in srv.requests if "messages" in r]) == 2
    assert a.text == b.text and sorted([a.cached, b.cached]) == [False, True]
    assert ledger.summary()["calls"] == 3 and ledger.summary()["cached"] == 1


def test_lookup_answers_hits_without_the_event_loop(tmp_path):
    """``lookup`` is the synchronous first step of ``complete``: a miss is ``None`` and sends
    nothing, a hit is the stored reply (``cached=True``) with its ledger row; in replay-only
    mode a miss is a CacheMiss."""
    path = tmp_path / "c.sqlite"
    with FakeServer() as srv:
        ledger = Ledger()
        with ReplyCache(path) as cache:
            client = _client(srv, cache, ledger)
            assert client.lookup(_req(i=5), task="t", seat="s") is None
            assert len(srv.requests) == 0 and ledger.summary()["calls"] == 0
            first = _run(client, lambda c: c.complete(_req(i=5)))
            hit = client.lookup(_req(i=5), task="t", seat="s")
        n = len(srv.requests)
    assert n == 1 and hit.cached and hit.text == first.text
    assert [(r["task"], r["seat"], r["cached"]) for r in ledger.rows()] == [
        ("", "", False), ("t", "s", True)]
    with ReplyCache(path, mode="replay") as cache:
        client = CouncilClient({}, cache)
        assert client.lookup(_req(i=5)).text == first.text
        with pytest.raises(CacheMiss, match="seat 'gemma'"):
            client.lookup(_req(i=6), task="t", seat="gemma")


class _RawServer:
    """A one-route loopback server answering every POST with status 200 and a fixed body."""

    def __init__(self, body: bytes):
        import http.server
        import threading

        outer = self
        self.hits = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.hits += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("body, reason", [
    (b"<html>not json</html>", "unusable reply: the body is not JSON"),
    (b"[1, 2]", "unusable reply: a JSON list, not an object"),
    (b'{"choices": []}', "reply has no choices"),
])
def test_unusable_200_bodies_fail_at_once_with_one_line(body, reason):
    srv = _RawServer(body)
    try:
        with pytest.raises(UpstreamError) as ei:
            _run(_client(srv, max_retries=3), lambda c: c.complete(_req()))
    finally:
        srv.close()
    assert srv.hits == 1 and reason in str(ei.value) and "\n" not in str(ei.value)
    assert "endpoint 'local'" in str(ei.value) and "model 'deterministic'" in str(ei.value)


def test_a_reply_without_usage_or_model_counts_zero_tokens():
    srv = _RawServer(b'{"choices": [{"index": 0, "message": {"role": "assistant", '
                     b'"content": null}}]}')
    try:
        reply = _run(_client(srv), lambda c: c.complete(_req()))
    finally:
        srv.close()
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens, reply.model) == ("", 0, 0, None)
