"""The council runner's own overhead: a real council against a zero-latency loopback server, and
the same run replayed from the reply cache.

What is measured (from the repository root, on the CPU; everything but the server in this one
process):

* ``server``: a zero-latency OpenAI-compatible server on 127.0.0.1 (``GET /v1/models``,
  ``POST /v1/chat/completions``), written here on raw ``asyncio`` streams (HTTP/1.1 keep-alive)
  and run in a **separate process** (``python -m benchmarks.bench_runner --serve``), so it does
  not share the client's GIL. Every chat answer is a valid move for the request's
  ``response_format`` schema (force, answer and target picked from the schema's enums by the
  SHA-256 of the messages: same request, same move), sent at once. ``GET /stats`` (not counted)
  reports the chat and model-list requests served and the most connections open at once, so
  the benchmark can prove that a replay sent nothing and that the live run used up to 32.
* ``live``: :func:`bda_jax.council.run_council` -- the public path a user takes, on
  :func:`~bda_jax.council.read_questions` and :func:`~bda_jax.council.read_config` -- with one
  endpoint pointing at the server (``max_concurrency = 32``), 3 seats, 3 rounds, over
  ``--questions`` questions (4 candidates), into a fresh (cold) reply cache: every move is one
  chat call that reaches the server (asserted from the server's count). Timed around the whole
  call (event loop, cache file, model list, traces, manifest). ``moves_per_s`` = moves written
  / wall seconds; ``moves_per_cpu_s`` uses this process's CPU time. Target >= 500 moves/s.
* ``replay``: the same run again, ``cache_mode="replay"``, on the cache the live run filled:
  every reply from the cache, zero requests reach the server (asserted), and the traces equal
  the live ones (latency and cache-hit extras aside). Target >= 20,000 moves/s.
* ``client_replay``: the client's share of a replay: :meth:`CouncilClient.lookup` (request
  key, SQLite read, reply decode, ledger row) of every stored request, built afresh as the
  runner builds it (:meth:`ChatRequest.with_messages` of one template per everything but the
  messages); the rest of ``replay`` is the protocol (prompts, reply parsing, moves, traces).
  Reported against the same 20,000/s; ``ratios.replay_over_client_replay`` (per rep too) is the
  replay's moves/s over these calls/s, in the same rep.
* ``reference``: raw server throughput with minimal clients in this process, at concurrency
  32, sending the very bodies the live run sent (read back from its cache): ``sdk_create``
  (``openai.AsyncOpenAI().chat.completions.create``), ``sdk_post`` (the SDK's generic
  ``post("/chat/completions", cast_to=bytes)``, the call the council client makes) and
  ``http`` (bare ``httpx2.AsyncClient`` POSTs, the transport under the SDK). ``ratios``: live
  moves/s over each reference's calls/s (1.0: the council costs nothing on top of that client).
* ``calibration``: this machine's time for the cache key of one request (canonical JSON and
  SHA-256 of ~2 KB): ``request_key_us`` through the package, ``canonical_sha_us`` through the
  standard library alone (the yardstick to scale the numbers to another machine).

Each measurement is the best of ``--reps`` runs, interleaved (others share these CPUs; the
1-minute load average is recorded).

Run::

    python -m benchmarks.bench_runner                   # writes the JSON below
    python -m benchmarks.bench_runner --questions 100 --reps 1 --out /tmp/runner.json   # quick

Writes ``benchmarks/results/runner_cpu.json`` (schema_version 1).
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import hashlib
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SCHEMA_VERSION = 1
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "runner_cpu.json"
CONCURRENCY = 32
SEATS = 3
ROUNDS = 3
CANDIDATES = ("A", "B", "C", "D")
LIVE_TARGET = 500.0
REPLAY_TARGET = 20_000.0
MODEL = "loopback"
_ARGUMENT = "a short argument for this move"


# ----------------------------------------------------------------------------- the server
def _pick(options: list, digest: bytes, salt: int):
    return options[(digest[salt] + 256 * digest[salt + 1]) % len(options)]


def loopback_move(body: dict) -> str:
    """A valid move (JSON text) for the chat request ``body``'s move schema: force, answer and
    target from the schema's enums, chosen by the SHA-256 of the messages."""
    schema = body["response_format"]["json_schema"]["schema"]
    props = schema["properties"]
    digest = hashlib.sha256(json.dumps(body["messages"]).encode()).digest()
    force = _pick(props["force"]["enum"], digest, 0)
    answers = [a for a in props["answer"].get("enum", ()) if a is not None]
    targets = [t for t in props["target"].get("enum", ()) if t is not None]
    answer = target = None
    if force in ("propose", "vote"):
        answer = _pick(answers, digest, 2) if answers else "42"
    elif force in ("concede", "challenge", "retract"):
        if targets:
            target = _pick(targets, digest, 4)
        else:                                   # cannot happen with a legal schema
            force, answer = "propose", _pick(answers, digest, 2)
    return json.dumps({"force": force, "answer": answer, "target": target,
                       "argument": _ARGUMENT})


def _http(status: int, payload: dict) -> bytes:
    data = json.dumps(payload).encode()
    reason = {200: "OK", 404: "Not Found"}[status]
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n").encode() + data


async def _serve() -> None:
    stats = {"chat": 0, "models": 0, "connections": 0, "max_connections": 0}

    def answer(method: str, path: str, body: bytes) -> bytes:
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path == "/stats":
            out = dict(stats)
            stats["max_connections"] = stats["connections"]     # a high-water mark per read
            return _http(200, out)
        if method == "GET" and path == "/v1/models":
            stats["models"] += 1
            return _http(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "bench"}]})
        if method == "POST" and path == "/v1/chat/completions":
            stats["chat"] += 1
            req = json.loads(body)
            content = loopback_move(req)
            return _http(200, {
                "id": f"chatcmpl-{stats['chat']}", "object": "chat.completion", "created": 0,
                "model": req["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": len(content) // 4,
                          "total_tokens": (len(body) + len(content)) // 4}})
        return _http(404, {"error": {"message": f"not found: {method} {path}"}})

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        stats["max_connections"] = max(stats["max_connections"], stats["connections"])
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    if line[:15].lower() == "content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length) if length else b""
                writer.write(answer(method, path, body))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            stats["connections"] -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)     # the port, to the parent
    async with server:
        await server.serve_forever()


def serve() -> None:
    """Run the server until killed (``python -m benchmarks.bench_runner --serve``); its first
    line on stdout is the port."""
    asyncio.run(_serve())


class LoopbackServer:
    """The zero-latency server in its own process; ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __enter__(self) -> LoopbackServer:
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_runner", "--serve"],
                                     cwd=ROOT, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the loopback server did not start (said {line!r})")
        self.port = int(line)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()


# ----------------------------------------------------------------------------- the council
def write_inputs(directory: Path, n_questions: int, base_url: str) -> tuple[Path, Path]:
    qpath = directory / "questions.jsonl"
    with open(qpath, "w", encoding="utf-8") as fh:
        for i in range(n_questions):
            fh.write(json.dumps({"task_id": f"q{i}", "question": f"Which letter is number {i}?",
                                 "candidates": list(CANDIDATES),
                                 "gold": CANDIDATES[i % len(CANDIDATES)]}) + "\n")
    seats = "".join(f'[[seats]]\nname = "s{i}"\nendpoint = "loop"\nmodel = "{MODEL}"\n'
                    f"temperature = 0.5\nseed = {i}\n\n" for i in range(SEATS))
    cpath = directory / "council.toml"
    cpath.write_text(f"rounds = {ROUNDS}\nsamples = 1\nseed = 7\n\n"
                     f'[endpoints.loop]\nbase_url = "{base_url}"\n'
                     f"max_concurrency = {CONCURRENCY}\ntimeout_s = 30\nmax_retries = 0\n\n"
                     f"{seats}")
    return qpath, cpath


def timed_council(questions, config, out: Path, cache: Path, mode: str) -> dict:
    """One :func:`run_council`, timed around the call (wall and this process's CPU)."""
    from bda_jax.council import run_council
    t0, c0 = time.perf_counter(), time.process_time()
    summary = run_council(questions, config, out, cache_path=cache, cache_mode=mode)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    moves = summary.n_tasks * SEATS * ROUNDS
    if summary.parse_failures or summary.reasks or summary.ledger["calls"] != moves:
        raise RuntimeError(f"{mode}: not one clean call per move: {summary.to_json()}")
    return {"wall_s": wall, "cpu_s": cpu, "moves": moves, "moves_per_s": moves / wall,
            "moves_per_cpu_s": moves / cpu, "calls": summary.ledger["calls"],
            "cached": summary.ledger["cached"]}


def traces_without_run_extras(path: Path) -> list:
    """The traces with the per-run move extras (latency, cache hit) dropped."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        for m in d["moves"]:
            m.pop("latency_s", None)
            m.pop("cache_hit", None)
        out.append(d)
    return out


# ----------------------------------------------------------------------------- the references
def cached_requests(cache: Path) -> list[dict]:
    """The requests stored in a reply cache (its documented table ``replies``), in the order
    they were stored, as the dicts :meth:`ChatRequest.to_dict` gives."""
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT request FROM replies WHERE length(key) = 64 ORDER BY rowid")
        return [json.loads(r[0]) for r in rows]


def chat_body(r: dict) -> dict:
    """The chat-completions body of a stored request (what the council client sends)."""
    body = {"model": r["model"], "messages": r["messages"], "temperature": r["temperature"],
            "max_tokens": r["max_tokens"]}
    if r["seed"] is not None:
        body["seed"] = r["seed"]
    body["response_format"] = {"type": "json_schema", "json_schema": {
        "name": "move", "schema": r["schema"], "strict": True}}
    return body


def _timed(coro_fn, n: int) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(coro_fn())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "calls": n, "calls_per_s": n / wall,
            "calls_per_cpu_s": n / cpu}


async def _pool(items: list, call) -> None:
    queue = iter(items)

    async def worker():
        for item in queue:
            await call(item)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def reference_sdk(base_url: str, bodies: list[dict], how: str) -> dict:
    """``len(bodies)`` chat calls at concurrency 32 through one ``openai.AsyncOpenAI``:
    ``how="create"``: ``chat.completions.create(**body)`` (the reply as its pydantic model);
    ``how="post"``: the generic ``post("/chat/completions", body=..., cast_to=bytes)`` the
    council client uses, the reply decoded with ``json.loads``."""
    import openai

    async def main():
        client = openai.AsyncOpenAI(base_url=base_url, api_key="not-needed", max_retries=0,
                                    timeout=30.0)
        auth = {"headers": {"Authorization": "Bearer not-needed"}}
        try:
            if how == "create":
                async def call(body):
                    resp = await client.chat.completions.create(**body)
                    assert resp.choices[0].message.content
            else:
                async def call(body):
                    raw = await client.post("/chat/completions", body=body, cast_to=bytes,
                                            options=auth)
                    assert json.loads(raw)["choices"][0]["message"]["content"]
            await _pool(bodies, call)
        finally:
            await client.close()

    return _timed(main, len(bodies))


def reference_http(base_url: str, bodies: list[dict]) -> dict:
    """The same calls as bare ``httpx2.AsyncClient`` POSTs of the JSON body (the transport the
    SDK rides on), 32 connections."""
    import httpx2

    async def main():
        limits = httpx2.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
        async with httpx2.AsyncClient(base_url=base_url, limits=limits, timeout=30.0) as client:
            async def call(body):
                r = await client.post("/chat/completions", content=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/json"})
                assert r.json()["choices"][0]["message"]["content"]
            await _pool(bodies, call)

    return _timed(main, len(bodies))


def client_replay(cache: Path, stored: list[dict]) -> dict:
    """The client's share of a replay: :meth:`CouncilClient.lookup` (request key, SQLite read,
    reply decode, ledger row) of every stored request, built afresh as the runner builds it
    (:meth:`ChatRequest.with_messages` of one template per everything but the messages, the
    templates made before the clock starts, as a run makes them once), from a replay-only
    cache."""
    from bda_jax.council import ChatRequest, CouncilClient, Ledger, ReplyCache

    fields = ("endpoint", "model", "temperature", "seed", "schema", "sample", "max_tokens")
    templates: dict[str, ChatRequest] = {}
    asks = []
    for r in stored:
        same = json.dumps([r[k] for k in fields], sort_keys=True)
        if same not in templates:
            templates[same] = ChatRequest(messages=(), **{k: r[k] for k in fields})
        asks.append((templates[same], r["messages"]))
    with ReplyCache(cache, mode="replay") as rc:
        client = CouncilClient({}, rc, Ledger())
        t0, c0 = time.perf_counter(), time.process_time()
        for template, messages in asks:
            if client.lookup(template.with_messages(messages), task="t", seat="s") is None:
                raise RuntimeError("a stored request missed")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "calls": len(stored), "calls_per_s": len(stored) / wall,
            "calls_per_cpu_s": len(stored) / cpu}


# ----------------------------------------------------------------------------- the run
def machine() -> dict:
    import openai

    import bda_jax
    out = {"platform": platform.platform(), "machine": platform.machine(),
           "python": platform.python_version(), "cpu_count": os.cpu_count(),
           "sched_affinity": len(os.sched_getaffinity(0)), "openai": openai.__version__,
           "sqlite": sqlite3.sqlite_version, "bda_jax": bda_jax.__version__,
           "load_average_1min": os.getloadavg()[0]}
    try:
        import jax
        out["jax"] = jax.__version__
    except ImportError:
        out["jax"] = None
    return out


def calibration(stored: list[dict]) -> dict:
    """This machine's speed at the one step every move pays whatever the code around it: the
    cache key of a stored request, best of 5, in microseconds. ``request_key_us``: the
    package's own :meth:`ChatRequest.key` of a request built afresh (it moves with the key's
    code: composing the canonical JSON field by field made it faster); ``canonical_sha_us``:
    the same text made by the standard library alone (``json.dumps`` with sorted keys, no
    spaces, ASCII) and its SHA-256, a yardstick no change of the package moves. Scale the
    moves/s of another machine by the ratio of ``canonical_sha_us``."""
    from bda_jax.council import ChatRequest

    fields = ("endpoint", "model", "temperature", "seed", "schema", "sample", "max_tokens")
    sample = stored[: min(len(stored), 2000)]
    best_s = best_std = float("inf")
    for _ in range(5):
        reqs = [ChatRequest(messages=tuple(r["messages"]), **{k: r[k] for k in fields})
                for r in sample]
        c0 = time.process_time()
        for req in reqs:
            req.key()
        best_s = min(best_s, time.process_time() - c0)
        c0 = time.process_time()
        for r in sample:
            hashlib.sha256(json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                                      allow_nan=False).encode("ascii")).hexdigest()
        best_std = min(best_std, time.process_time() - c0)
    return {"request_key_us": best_s / len(sample) * 1e6,
            "canonical_sha_us": best_std / len(sample) * 1e6, "requests": len(sample),
            "mean_request_json_chars": sum(len(json.dumps(r)) for r in sample) / len(sample)}


def best(runs: list[dict], key: str) -> dict:
    """The run with the highest ``key``, with every run's ``key`` beside it."""
    top = max(runs, key=lambda r: r[key])
    return {**top, "all_" + key: [r[key] for r in runs]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=500,
                    help="questions in the council run (9 moves each)")
    ap.add_argument("--reps", type=int, default=3, help="runs of each measurement (best kept)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--serve", action="store_true",
                    help="only run the loopback server (what the benchmark starts in a child)")
    args = ap.parse_args(argv)
    if args.serve:
        serve()
        return 0

    import openai  # noqa: F401  (imported once up front: the client imports it on first use)

    from bda_jax.council import read_config, read_questions

    runs: dict[str, list] = {k: [] for k in ("live", "replay", "client_replay", "sdk_create",
                                             "sdk_post", "http")}
    load = [os.getloadavg()[0]]
    with LoopbackServer() as server, tempfile.TemporaryDirectory(prefix="bda_runner_") as tmp:
        tmp = Path(tmp)
        qpath, cpath = write_inputs(tmp, args.questions, server.base_url)
        questions, config = read_questions(qpath), read_config(cpath)
        same_bits = True
        for rep in range(args.reps):       # interleaved: each rep sees the same machine load
            out, cache = tmp / f"live{rep}.jsonl", tmp / f"cache{rep}.sqlite"
            before = server.stats()
            live = timed_council(questions, config, out, cache, "record")
            after = server.stats()
            live["server_chat_calls"] = after["chat"] - before["chat"]
            live["server_max_open_connections"] = after["max_connections"]
            if live["server_chat_calls"] != live["moves"] or live["cached"]:
                raise RuntimeError(f"live run {rep}: not every move reached the server: {live}")
            runs["live"].append(live)

            before = server.stats()
            replay = timed_council(questions, config, tmp / f"replay{rep}.jsonl", cache, "replay")
            after = server.stats()
            replay["upstream_calls"] = (after["chat"] - before["chat"]) + \
                (after["models"] - before["models"])
            if replay["upstream_calls"] != 0 or replay["cached"] != replay["moves"]:
                raise RuntimeError(f"replay {rep} reached the server: {replay}")
            same_bits &= traces_without_run_extras(out) == traces_without_run_extras(
                tmp / f"replay{rep}.jsonl")
            runs["replay"].append(replay)

            stored = cached_requests(cache)
            if rep == 0:
                calib = calibration(stored)
            runs["client_replay"].append(client_replay(cache, stored))
            bodies = [chat_body(r) for r in stored]
            runs["sdk_create"].append(reference_sdk(server.base_url, bodies, "create"))
            runs["sdk_post"].append(reference_sdk(server.base_url, bodies, "post"))
            runs["http"].append(reference_http(server.base_url, bodies))
            load.append(os.getloadavg()[0])
            print(f"rep {rep}: live {live['moves_per_s']:,.0f} moves/s "
                  f"({live['moves_per_cpu_s']:,.0f}/cpu-s), replay {replay['moves_per_s']:,.0f} "
                  f"({replay['moves_per_cpu_s']:,.0f}/cpu-s), client replay "
                  f"{runs['client_replay'][-1]['calls_per_s']:,.0f} calls/s; references: sdk "
                  f"create {runs['sdk_create'][-1]['calls_per_s']:,.0f}, sdk post "
                  f"{runs['sdk_post'][-1]['calls_per_s']:,.0f}, http "
                  f"{runs['http'][-1]['calls_per_s']:,.0f} calls/s", flush=True)

    live, replay = best(runs["live"], "moves_per_s"), best(runs["replay"], "moves_per_s")
    ref = {k: best(runs[k], "calls_per_s") for k in ("sdk_create", "sdk_post", "http")}
    client = best(runs["client_replay"], "calls_per_s")
    live.update(target_moves_per_s=LIVE_TARGET, met=live["moves_per_s"] >= LIVE_TARGET)
    replay.update(target_moves_per_s=REPLAY_TARGET, met=replay["moves_per_s"] >= REPLAY_TARGET,
                  same_traces_as_live=bool(same_bits))
    client.update(target_calls_per_s=REPLAY_TARGET, met=client["calls_per_s"] >= REPLAY_TARGET)
    per_rep = [{"live_over_sdk_post": lv["moves_per_s"] / sp["calls_per_s"],
                "live_over_sdk_create": lv["moves_per_s"] / sc["calls_per_s"],
                "live_over_http": lv["moves_per_s"] / h["calls_per_s"],
                "replay_over_client_replay": rp["moves_per_s"] / cr["calls_per_s"]}
               for lv, sc, sp, h, rp, cr in zip(runs["live"], runs["sdk_create"],
                                                runs["sdk_post"], runs["http"], runs["replay"],
                                                runs["client_replay"])]
    result = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "runner",
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_1min_during": load,
        "workload": {"questions": args.questions, "seats": SEATS, "rounds": ROUNDS,
                     "candidates": len(CANDIDATES), "moves": live["moves"],
                     "concurrency": CONCURRENCY, "reps": args.reps,
                     "path": "bda_jax.council.run_council on read_questions / read_config"},
        "server": {"kind": "asyncio streams, HTTP/1.1 keep-alive, zero latency, valid moves",
                   "process": "separate (python -m benchmarks.bench_runner --serve): it does not "
                              "share the client's GIL",
                   "address": "127.0.0.1"},
        "calibration": calib,
        "live": live,
        "replay": replay,
        "client_replay": client,
        "reference": ref,
        "ratios": {
            "live_over_sdk_post": live["moves_per_s"] / ref["sdk_post"]["calls_per_s"],
            "live_over_sdk_create": live["moves_per_s"] / ref["sdk_create"]["calls_per_s"],
            "live_over_http": live["moves_per_s"] / ref["http"]["calls_per_s"],
            "replay_over_client_replay": replay["moves_per_s"] / client["calls_per_s"],
            "per_rep": per_rep,
            "note": "live / reference calls per second, best of each; replay moves/s over the "
                    "client's own lookups/s (1.0: the protocol around the client costs "
                    "nothing); per_rep pairs the runs of one rep (same machine load). 1.0: "
                    "the council costs nothing on top of that client."},
        "met": bool(live["met"] and replay["met"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"live {live['moves_per_s']:,.0f} moves/s (target {LIVE_TARGET:,.0f}, met "
          f"{live['met']}); replay {replay['moves_per_s']:,.0f} moves/s (target "
          f"{REPLAY_TARGET:,.0f}, met {replay['met']}; "
          f"{result['ratios']['replay_over_client_replay']:.2f} of the client's own lookups/s); "
          f"live / sdk post "
          f"{result['ratios']['live_over_sdk_post']:.2f}, live / sdk create "
          f"{result['ratios']['live_over_sdk_create']:.2f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
