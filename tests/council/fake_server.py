"""A loopback fake OpenAI-compatible server for the council tests.

``FakeServer`` (a context manager) serves ``GET /v1/models`` and ``POST /v1/chat/completions``
on 127.0.0.1 (port chosen by the OS) from a daemon thread and stops at context exit. A chat
answer is a valid instance of the request's ``response_format`` JSON schema, chosen
deterministically from the SHA-256 of the request body (same body, same answer); without a
schema it is a short text. Faults are chosen by the model name:

- ``deterministic``: answers normally;
- ``fault-429``: 429 with ``Retry-After: 0`` on the first try of each distinct body, then OK;
- ``fault-500``: 500 on the first try of each distinct body, then OK;
- ``fault-slow``: the first try of each distinct body sleeps ``slow_s`` seconds (longer than
  the client's timeout in the tests) before answering, then OK;
- ``fault-truncated``: every answer's message content is JSON cut short (not valid JSON);
- ``fault-offschema``: every answer's content is valid JSON that breaks the schema;
- any other model: 404 ``{"error": {"message": "model not found"}}``.

With ``api_key`` set, a request without ``Authorization: Bearer <api_key>`` gets 401. The server
records every received chat body in ``.requests``, arrival times (``time.perf_counter``) in
``.arrivals``, and the most chat requests in flight at once in ``.max_in_flight``; ``delay_s``
delays every chat answer (to make requests overlap).

``responder`` (optional): a callable ``responder(body) -> str | None`` given each decoded chat
body of a served model; a string it returns is the answer's message content (the faults above
still apply to it), ``None`` keeps the schema instance. Tests use it to script replies.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeServer", "MODELS", "ROLE_MARK", "has_role", "instance_of", "request_kind"]

MODELS = ("deterministic", "fault-429", "fault-500", "fault-slow", "fault-truncated", "fault-offschema")

_TEXT = "a short argument for this answer"
#: the opening of the adversary role rho in every channel's prompt (bda_jax.council.ROLE_HEAD)
ROLE_MARK = "Private instructions, for you alone"


def request_kind(body: dict) -> str | None:
    """The JSON-schema name of a recorded chat body ("move", "synthesis", "arguments",
    "strength", "verdict") or "text" for a free-text request."""
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name") if fmt else "text"


def has_role(body: dict) -> bool:
    """Whether a recorded chat body carries the adversary role in any message."""
    return any(ROLE_MARK in str(m.get("content", "")) for m in body["messages"])


def _pick(options, digest: str, path: str):
    h = hashlib.sha256(f"{digest}|{path}".encode()).digest()
    return options[int.from_bytes(h[:8], "big") % len(options)]


def instance_of(schema: dict, digest: str, root: dict | None = None, path: str = "$"):
    """A valid instance of the JSON schema ``schema`` (the subset structured outputs use:
    object/array/string/number/integer/boolean/null, enum, const, anyOf/oneOf, $ref into
    ``$defs``); every choice is made from ``digest`` and the JSON path, so it is deterministic.
    Nullable fields get a non-null value where the schema allows one (as a model following the
    field descriptions would fill them); the runner drops what a force does not take."""
    root = schema if root is None else root
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return instance_of(node, digest, root, path)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:                    # null only where nothing else is allowed
        options = [v for v in schema["enum"] if v is not None] or [None]
        return _pick(options, digest, path)
    for comb in ("anyOf", "oneOf"):
        if comb in schema:
            return instance_of(_pick(schema[comb], digest, path + "|" + comb), digest, root, path)
    typ = schema.get("type", "object")
    if isinstance(typ, list):
        non_null = [t for t in typ if t != "null"]
        typ = non_null[0] if non_null else "null"
    if typ == "object":
        props = schema.get("properties", {})
        return {k: instance_of(v, digest, root, f"{path}.{k}") for k, v in props.items()}
    if typ == "array":
        n = max(1, int(schema.get("minItems", 1)))
        n = min(n, int(schema.get("maxItems", n)))
        return [instance_of(schema.get("items", {}), digest, root, f"{path}[{i}]") for i in range(n)]
    if typ == "string":
        text = _TEXT[: int(schema.get("maxLength", len(_TEXT)))]
        return text.ljust(int(schema.get("minLength", 0)), "x")
    if typ == "integer":
        return int(schema.get("minimum", 0))
    if typ == "number":
        return float(schema.get("minimum", 0.0))
    if typ == "boolean":
        return _pick([False, True], digest, path)
    return None


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args):                     # quiet
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None):
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):   # the client gave up (timeout)
            pass

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models" and self.server.fake.serves_model_list:
            self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.server.models]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": "not found"}})
            return
        fake = self.server.fake
        with fake._lock:
            fake.requests.append(json.loads(raw))
            fake.arrivals.append(time.perf_counter())
            fake._in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
        try:
            self._chat(raw)
        finally:
            with fake._lock:
                fake._in_flight -= 1

    def _chat(self, raw: bytes):
        fake = self.server.fake
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._send(401, {"error": {"message": "invalid api key"}})
            return
        body = json.loads(raw)
        model = body.get("model")
        if model not in fake.models:
            self._send(404, {"error": {"message": "model not found"}})
            return
        digest = hashlib.sha256(raw).hexdigest()
        with fake._lock:
            fake._tries[digest] = tries = fake._tries.get(digest, 0) + 1
        if model == "fault-429" and tries == 1:
            self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
            return
        if model == "fault-500" and tries == 1:
            self._send(500, {"error": {"message": "internal error"}})
            return
        if model == "fault-slow" and tries == 1:
            time.sleep(fake.slow_s)
        if fake.delay_s:
            time.sleep(fake.delay_s)
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
        if schema is None:
            content = f"{_TEXT} ({digest[:8]})"
        else:
            content = json.dumps(instance_of(schema, digest))
        if fake.responder is not None:
            scripted = fake.responder(body)
            if scripted is not None:
                content = str(scripted)
        if model == "fault-truncated":
            content = content[: max(1, len(content) // 2)]
        elif model == "fault-offschema":
            content = json.dumps({"verdict": "off schema", "force": "shout"})
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        p, c = _tokens(prompt), _tokens(content)
        self._send(200, {
            "id": f"chatcmpl-{digest[:12]}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        })


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128      # the default 5 drops bursts of connects (1 s SYN retries)
    fake: FakeServer
    models: tuple[str, ...]


class FakeServer:
    """The fake server; ``with FakeServer() as srv: ... srv.base_url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, *, models=MODELS, slow_s: float = 1.0, delay_s: float = 0.0,
                 api_key: str | None = None, serves_model_list: bool = True, responder=None):
        self.responder = responder                      # body -> content or None (scripted)
        self.serves_model_list = serves_model_list      # False: GET /v1/models is a 404
        self.models = tuple(models)
        self.slow_s = slow_s
        self.delay_s = delay_s
        self.api_key = api_key
        self.requests: list[dict] = []
        self.arrivals: list[float] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._tries: dict[str, int] = {}
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._httpd.models = self.models
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
