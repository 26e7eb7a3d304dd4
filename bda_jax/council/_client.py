"""The council's chat client ([BDA] §5, Appendix D.7: every move is one chat-completion call):
the official ``openai`` SDK's async client against any OpenAI-compatible ``base_url``, with a
reply cache in front, bounded concurrency and an optional rate limit per endpoint, our own
retries, and a ledger of every call.

Retries (the SDK's own are off): up to ``endpoint.max_retries + 1`` attempts on timeouts,
connection errors, HTTP 408, 409, 429 and 5xx; the wait before retry ``k`` (1-based) is
``Retry-After`` seconds where a 429/503 carries one, else full jitter
``uniform(0, min(8, 0.5 * 2**(k-1)))`` drawn from a ``random.Random`` seeded from the request
key, so a rerun waits the same. Any other 4xx (400, 401, 403, 404, 422, ...) cannot succeed and
raises :class:`UpstreamError` at once, one line naming endpoint, URL and model.

``openai`` is imported only when a request goes upstream, so replay-only runs and the rest of
the package work without it.

Speed (``benchmarks/bench_runner.py``): a request goes out through the SDK's generic
``AsyncOpenAI.post("/chat/completions", body=..., cast_to=bytes)`` -- the same transport,
headers, timeout and error classes as ``chat.completions.create`` (whose per-call
type-directed transform of the messages and schema, and pydantic model of the reply, cost more
CPU than the rest of the call), with the JSON body the create call would send and the reply
decoded here; the bearer key is sent explicitly. A cache hit is answered synchronously
(:meth:`CouncilClient.lookup`), so a replay never waits on the event loop.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import replace

from bda_jax._core.errors import BdaError, DataError

from ._cache import CacheMiss, ChatReply, ChatRequest, ReplyCache

__all__ = ["ChatRequest", "ChatReply", "CacheMiss", "UpstreamError", "CouncilClient"]

_RETRY_STATUS = frozenset({408, 409, 429})
_RETRY_AFTER_STATUS = frozenset({429, 503})


class UpstreamError(BdaError):
    """An endpoint refused or kept failing a request; the message is one line naming the
    endpoint, its URL and the model (``.endpoint``, ``.model``, ``.status`` hold them)."""

    def __init__(self, reason: str, *, endpoint: str, model: str | None, status: int | None = None,
                 task_id: str | None = None):
        self.endpoint = endpoint
        self.model = model
        self.status = status
        super().__init__(reason, task_id=task_id)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _status_detail(exc) -> str:
    """``"<status> <server's message>"`` for an ``openai.APIStatusError``."""
    body = getattr(exc, "body", None)
    msg = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
    elif isinstance(body, str) and body.strip():
        msg = body
    if not msg:
        msg = getattr(exc, "message", None) or str(exc)
    return f"{exc.status_code} {_one_line(msg)}"


#: the longest ``Retry-After`` wait honoured (a larger value waits this long, then retries)
RETRY_AFTER_MAX_S = 120.0


def _retry_after(exc) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form, at most
    :data:`RETRY_AFTER_MAX_S`), or ``None``."""
    try:
        value = exc.response.headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S) if seconds == seconds else None


class _RateLimiter:
    """Token spacing: successive requests start at least ``60 / requests_per_minute`` s apart."""

    def __init__(self, requests_per_minute: float):
        self.interval = 60.0 / float(requests_per_minute)
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


class CouncilClient:
    """Chat completions for a council run.

    ``endpoints``: ``Mapping[str, Endpoint]`` by name (objects with ``name``, ``base_url``,
    ``api_key_env``, ``max_concurrency``, ``requests_per_minute``, ``timeout_s``,
    ``max_retries``); ``cache``: a :class:`ReplyCache` (mode ``"off"`` for none); ``ledger``:
    a :class:`Ledger` that records every call (cache hits included), or ``None``.
    ``backoff_base_s`` and ``backoff_cap_s`` set the retry backoff (defaults 0.5 s and 8 s).
    """

    def __init__(self, endpoints: Mapping, cache: ReplyCache, ledger=None, *,
                 backoff_base_s: float = 0.5, backoff_cap_s: float = 8.0):
        self.endpoints = dict(endpoints)
        self.cache = cache
        self.ledger = ledger
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_cap_s = float(backoff_cap_s)
        self._clients: dict[str, tuple] = {}      # name -> (AsyncOpenAI, request options)
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._limiters: dict[str, _RateLimiter] = {}
        self._in_flight: dict[str, asyncio.Future] = {}

    # -- plumbing ----------------------------------------------------------------------------
    def _endpoint(self, name: str):
        try:
            return self.endpoints[name]
        except KeyError:
            raise DataError(f"unknown endpoint {name!r} (configured: {sorted(self.endpoints)})",
                            field="endpoint") from None

    def _client(self, name: str):
        """``(client, options)``: the ``openai.AsyncOpenAI`` client of endpoint ``name``
        (created on first use) and the request options of its calls (the bearer key)."""
        if name in self._clients:
            return self._clients[name]
        ep = self._endpoint(name)
        env = getattr(ep, "api_key_env", None)
        if env:
            key = os.environ.get(env)
            if not key:
                raise DataError(f"endpoint {name!r} needs an API key in the environment variable "
                                f"{env!r}, which is not set", field=f"endpoints.{name}.api_key_env")
        else:
            key = "not-needed"
        import openai

        client = openai.AsyncOpenAI(base_url=ep.base_url, api_key=key, timeout=float(ep.timeout_s),
                                    max_retries=0)
        self._clients[name] = client, {"headers": {"Authorization": f"Bearer {key}"}}
        return self._clients[name]

    def _gates(self, name: str):
        ep = self._endpoint(name)
        if name not in self._semaphores:
            self._semaphores[name] = asyncio.Semaphore(max(1, int(ep.max_concurrency)))
            rpm = getattr(ep, "requests_per_minute", None)
            if rpm:
                self._limiters[name] = _RateLimiter(rpm)
        return self._semaphores[name], self._limiters.get(name)

    def _fail(self, req: ChatRequest, what: str, task: str, status: int | None = None) -> UpstreamError:
        ep = self._endpoint(req.endpoint)
        return UpstreamError(f"endpoint {req.endpoint!r} ({ep.base_url}), model {req.model!r}: {what}",
                             endpoint=req.endpoint, model=req.model, status=status, task_id=task or None)

    def backoff_delay(self, rng: random.Random, retry: int) -> float:
        """Full-jitter wait before retry ``retry`` (1-based): ``uniform(0, min(cap, base * 2**(retry-1)))``."""
        return rng.uniform(0.0, min(self.backoff_cap_s, self.backoff_base_s * 2 ** (retry - 1)))

    # -- calls -------------------------------------------------------------------------------
    def lookup(self, req: ChatRequest, *, task: str = "", seat: str = "") -> ChatReply | None:
        """The cached reply to ``req`` (``cached=True``, recorded in the ledger), or ``None`` on
        a miss, without the event loop: the first step of :meth:`complete`, for callers that
        answer hits synchronously. Raises :class:`CacheMiss` on a miss in replay mode."""
        hit = self.cache.get(req, task=task, seat=seat)
        if hit is not None and self.ledger is not None:
            self.ledger.record(req, hit, task=task, seat=seat)
        return hit

    async def complete(self, req: ChatRequest, *, task: str = "", seat: str = "") -> ChatReply:
        """The reply to ``req``: from the cache if stored (``cached=True``; raises
        :class:`CacheMiss` on a miss in replay mode), else from the endpoint (stored in the
        cache, recorded in the ledger). A request identical to one still in flight waits for
        that one's reply instead of going upstream again (``cached=True``: no second paid
        call). The text is returned as received: judging it against the schema is the caller's
        job. Raises :class:`UpstreamError` (one line) when the
        endpoint refuses the request or every attempt failed, :class:`DataError` when the
        endpoint's API key variable is not set."""
        hit = self.lookup(req, task=task, seat=seat)
        if hit is not None:
            return hit
        key = req.key()
        pending = self._in_flight.get(key)
        if pending is not None:        # the same request is on its way: share its reply
            reply = replace(await asyncio.shield(pending), cached=True)
            if self.ledger is not None:
                self.ledger.record(req, reply, task=task, seat=seat)
            return reply
        future = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            reply = await self._fetch(req, task)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()          # retrieved: no "never retrieved" noise without waiters
            raise
        else:
            future.set_result(reply)
        finally:
            del self._in_flight[key]
        if self.ledger is not None:
            self.ledger.record(req, reply, task=task, seat=seat)
        return reply

    async def _fetch(self, req: ChatRequest, task: str) -> ChatReply:
        """The reply from upstream, stored in the cache (or the one another run stored first)."""
        reply = await self._upstream(req, task)
        if not self.cache.put(req, reply) and self.cache.mode == "record":
            stored = self.cache.get(req)           # another run stored one first: keep one truth
            if stored is not None:
                reply = ChatReply(text=stored.text, prompt_tokens=reply.prompt_tokens,
                                  completion_tokens=reply.completion_tokens, latency_s=reply.latency_s,
                                  cached=False, retries=reply.retries, model=stored.model)
        return reply

    async def _upstream(self, req: ChatRequest, task: str) -> ChatReply:
        import openai

        ep = self._endpoint(req.endpoint)
        client, options = self._client(req.endpoint)
        sem, limiter = self._gates(req.endpoint)
        body = {"model": req.model, "messages": [dict(m) for m in req.messages],
                "temperature": req.temperature, "max_tokens": req.max_tokens}
        if req.seed is not None:
            body["seed"] = req.seed
        if req.schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": str(req.schema.get("title") or "move"), "schema": req.schema,
                "strict": True}}
        rng = None                       # seeded from the key on the first retry only
        attempts = max(0, int(ep.max_retries)) + 1
        last = "no attempt made"
        for attempt in range(attempts):
            wait = None
            async with sem:
                if limiter is not None:
                    await limiter.wait()
                t0 = time.perf_counter()
                try:
                    resp = await client.post("/chat/completions", body=body, cast_to=bytes,
                                             options=options)
                except openai.APITimeoutError:
                    last = f"timed out after {float(ep.timeout_s):g} s"
                except openai.APIConnectionError as exc:
                    last = f"connection error: {_one_line(getattr(exc, 'message', exc))}"
                except openai.APIStatusError as exc:
                    status = int(exc.status_code)
                    last = _status_detail(exc)
                    if status not in _RETRY_STATUS and status < 500:
                        raise self._fail(req, last, task, status) from None
                    if status in _RETRY_AFTER_STATUS:
                        wait = _retry_after(exc)
                except openai.OpenAIError as exc:
                    raise self._fail(req, f"unusable reply: {_one_line(exc)}", task) from None
                else:
                    latency = time.perf_counter() - t0
                    return self._reply(req, resp, latency, attempt, task)
            if attempt + 1 < attempts:
                if wait is None:
                    rng = random.Random(int(req.key(), 16)) if rng is None else rng
                    wait = self.backoff_delay(rng, attempt + 1)
                await asyncio.sleep(wait)
        raise self._fail(req, f"gave up after {attempts} attempt{'s' if attempts > 1 else ''}, "
                              f"last: {last}", task)

    def _reply(self, req: ChatRequest, raw: bytes, latency: float, retries: int,
               task: str) -> ChatReply:
        """The reply from a chat completion's JSON body (``raw``): the first choice's message
        text (``""`` when it has none), the usage tokens (0 when absent), the model name."""
        try:
            resp = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise self._fail(req, "unusable reply: the body is not JSON", task) from None
        if not isinstance(resp, dict):
            raise self._fail(req, f"unusable reply: a JSON {type(resp).__name__}, not an object",
                             task)
        choices = resp.get("choices")
        if not choices or not isinstance(choices, list):
            raise self._fail(req, "reply has no choices", task)
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        text = (message.get("content") if isinstance(message, dict) else None) or ""
        usage = resp.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        try:
            prompt = int(usage.get("prompt_tokens") or 0)
            completion = int(usage.get("completion_tokens") or 0)
        except (TypeError, ValueError):
            raise self._fail(req, f"unusable reply: usage {_one_line(usage)}", task) from None
        model = resp.get("model")
        return ChatReply(text=str(text), prompt_tokens=prompt, completion_tokens=completion,
                         latency_s=float(latency), cached=False, retries=retries,
                         model=str(model) if model else None)

    async def list_models(self, endpoint: str) -> list[str]:
        """Model ids the endpoint reports at ``GET /models`` (in its order)."""
        import openai

        client, _ = self._client(endpoint)
        ep = self._endpoint(endpoint)
        try:
            page = await client.models.list()
            return [m.id async for m in page] if hasattr(page, "__aiter__") else [m.id for m in page.data]
        except openai.APIStatusError as exc:
            raise UpstreamError(f"endpoint {endpoint!r} ({ep.base_url}): listing models: "
                                f"{_status_detail(exc)}", endpoint=endpoint, model=None,
                                status=int(exc.status_code)) from None
        except openai.OpenAIError as exc:
            raise UpstreamError(f"endpoint {endpoint!r} ({ep.base_url}): listing models: "
                                f"{_one_line(exc)}", endpoint=endpoint, model=None) from None

    async def aclose(self) -> None:
        """Close every HTTP client (idempotent)."""
        clients, self._clients = self._clients, {}
        for c, _ in clients.values():
            await c.close()
