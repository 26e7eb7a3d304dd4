"""Chat requests, replies and the append-only reply cache ([BDA] §5, Appendix D.7: a council
run is a sequence of move requests; caching them makes a run resumable and replayable).

A :class:`ChatRequest` is everything that determines a reply (endpoint name, model, messages,
temperature, seed, JSON schema, sample index, max tokens); its :meth:`ChatRequest.key` is the
SHA-256 of its canonical JSON and keys the cache. :class:`ReplyCache` stores replies in one
SQLite table (WAL mode, one commit per put, ``INSERT OR IGNORE``), so a ``kill -9`` loses at most
the call in flight, a stored reply is never replaced, and two processes may share one file.

Speed (``benchmarks/bench_runner.py``, the replay): the canonical JSON of a request is composed
from its fields, equal character for character to ``canonical_json`` of
:meth:`ChatRequest.to_dict`: each scalar, string and ``{"role", "content"}`` message through
the JSON module's own encoders, a system message's text once, and for the requests made from
one template (:meth:`ChatRequest.with_messages`) everything around the messages, schema
included, once per template. A replay-only cache reads one snapshot of the file (one read
transaction) instead of taking SQLite's read lock per lookup.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, fields
from json.encoder import encode_basestring_ascii as _json_string
from json.scanner import make_scanner
from math import isfinite

from .._core.errors import ArtifactError, BdaError, DataError
from .._core.io import canonical_json

__all__ = ["ChatRequest", "ChatReply", "ReplyCache", "CacheMiss", "CACHE_MODES"]

CACHE_MODES = ("record", "replay", "off")

# The schema-version row: a reserved key (cache keys are 64 hex digits, so it cannot collide).
_SCHEMA_KEY = "bda_jax.council.reply_cache"
_SCHEMA_FORMAT = "bda_jax.council.reply_cache"
_SCHEMA_VERSION = 1


class CacheMiss(BdaError):
    """Replay-only mode found no cached reply for a request (names model, endpoint, task, seat)."""


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completion request, everything that determines its reply.

    ``messages`` is a tuple of chat messages (dicts with ``role`` and ``content``); ``schema`` is
    the JSON Schema sent as ``response_format`` (``None``: free text); ``sample`` is the sample
    index of the run ([BDA] §5: several seeds per question), part of the key so that samples
    with an identical prompt are distinct calls; ``draw`` numbers the draws of one prompt within
    one task (Self-MoA's six samples of one model), in the key only when non-zero, so requests
    without draws keep the keys they always had.
    """

    endpoint: str
    model: str
    messages: tuple[dict, ...]
    temperature: float
    seed: int | None
    schema: dict | None
    sample: int = 0
    max_tokens: int = 256
    draw: int = 0

    def to_dict(self) -> dict:
        """The request as a JSON-ready dict (``messages`` as a list)."""
        out = {
            "endpoint": self.endpoint,
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "temperature": self.temperature,
            "seed": self.seed,
            "schema": self.schema,
            "sample": self.sample,
            "max_tokens": self.max_tokens,
        }
        if self.draw:
            out["draw"] = self.draw
        return out

    def with_messages(self, messages) -> ChatRequest:
        """``dataclasses.replace(self, messages=tuple(messages))``, made faster for a caller that
        asks many prompts with one set of everything else (the runner: one template per seat and
        schema): the copy skips the frozen ``__init__``, and its canonical JSON is composed from
        this template's own text around the messages (made once per template) and the new
        messages' JSON. Equal to the ``replace`` result, key included. Like the messages, the
        template's schema must not be changed once the template is used."""
        made = self.__dict__.get("_made")
        if made is None:        # the copies' fields (every field but the messages) and JSON
            try:
                around = self._around()
            except (TypeError, ValueError) as exc:
                raise DataError(f"chat request is not JSON-serializable: {exc}",
                                field="messages") from exc
            made = self.__dict__["_made"] = {f.name: getattr(self, f.name) for f in fields(self)}
            made["_around"] = around
        state = made.copy()
        state["messages"] = tuple(messages)
        req = _NEW(ChatRequest)
        _SET(req, "__dict__", state)
        return req

    def canonical(self) -> str:
        """The canonical JSON of :meth:`to_dict` (what :meth:`key` hashes and the cache stores).
        Computed once per request object: a request is immutable, so its message dicts must not
        be changed once it is made."""
        memo = self.__dict__.get("_canonical")
        if memo is None:
            try:
                head, tail = self.__dict__.get("_around") or self._around()
                msgs = self.messages
                if len(msgs) == 2:          # a system and a user message: the usual request
                    memo = f"{head}{_json_message(msgs[0])},{_json_message(msgs[1])}{tail}"
                else:
                    memo = f'{head}{",".join(map(_json_message, msgs))}{tail}'
            except (TypeError, ValueError) as exc:
                raise DataError(f"chat request is not JSON-serializable: {exc}",
                                field="messages") from exc
            self.__dict__["_canonical"] = memo      # not a field: equality and repr unchanged
        return memo

    def _around(self) -> tuple[str, str]:
        """The canonical JSON of :meth:`to_dict` before and after the messages' items: keys
        sorted (draw, endpoint, max_tokens, messages, model, sample, schema, seed,
        temperature), each value as its own canonical JSON, so that ``head + ",".join(each
        message's canonical JSON) + tail`` is ``canonical_json(self.to_dict())``."""
        head = (f'{{"draw":{_json_value(self.draw)},"endpoint":' if self.draw else
                '{"endpoint":')
        return (f'{head}{_json_value(self.endpoint)},"max_tokens":'
                f'{_json_value(self.max_tokens)},"messages":[',
                f'],"model":{_json_value(self.model)},"sample":{_json_value(self.sample)},'
                f'"schema":{_json_value(self.schema)},"seed":{_json_value(self.seed)},'
                f'"temperature":{_json_value(self.temperature)}}}')

    def key(self) -> str:
        """SHA-256 hex digest (64 characters) of the canonical JSON of every field (computed once
        per request object, like :meth:`canonical`)."""
        memo = self.__dict__.get("_key")
        if memo is None:
            memo = self.__dict__["_key"] = hashlib.sha256(
                self.canonical().encode("utf-8")).hexdigest()
        return memo


@dataclass(frozen=True)
class ChatReply:
    """One reply: the message text as received (unjudged), usage tokens, wall latency in
    seconds, whether it came from the cache, how many retries it took, and the model name the
    server reported (``None`` when it reported none)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool = False
    retries: int = 0
    model: str | None = None


def _json_value(value) -> str:
    """``canonical_json(value)``; a plain string, integer, finite float or ``None`` without the
    encoder's set-up (the JSON module's own encoders of those values: equal text)."""
    kind = type(value)
    if kind is str:
        return _json_string(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is float and isfinite(value):
        return float.__repr__(value)
    return canonical_json(value)


#: system message text -> its message's canonical JSON (a seat's system message repeats from
#: task to task; started afresh past :data:`_SYSTEM_MEMO_SIZE` entries)
_SYSTEM_JSON: dict[str, str] = {}
_SYSTEM_MEMO_SIZE = 4096


def _json_message(message) -> str:
    """``canonical_json(dict(message))``; a dict of exactly two strings ``role`` and ``content``
    (every message of the council's prompts) composed directly, a system message's once."""
    if type(message) is dict and len(message) == 2:
        content, role = message.get("content"), message.get("role")
        if type(content) is str and type(role) is str:
            if role != "system":
                return f'{{"content":{_json_string(content)},"role":{_json_string(role)}}}'
            text = _SYSTEM_JSON.get(content)
            if text is None:
                if len(_SYSTEM_JSON) >= _SYSTEM_MEMO_SIZE:
                    _SYSTEM_JSON.clear()
                text = _SYSTEM_JSON[content] = \
                    f'{{"content":{_json_string(content)},"role":"system"}}'
            return text
    return canonical_json(dict(message))


_STORED_FIELDS = tuple(f.name for f in fields(ChatReply) if f.name != "cached")
_NEW = object.__new__
_SET = object.__setattr__
_SCAN = make_scanner(json.JSONDecoder())


def _decode(text: str):
    """``json.loads(text)``: a stored reply (canonical JSON: nothing around the value) is read
    by the decoder's own scanner without ``loads``' set-up; anything else goes to ``loads``."""
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, TypeError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _reply_to_json(reply: ChatReply) -> str:
    """The stored reply: every field but ``cached``, as canonical JSON."""
    return canonical_json({name: getattr(reply, name) for name in _STORED_FIELDS})


def _set_wal(conn: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """Switch ``conn``'s database to WAL. SQLite answers "database is locked" at once (without
    its busy handler) while another process is switching the same fresh file, so retry for up
    to ``wait_s`` seconds; then the error propagates."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class ReplyCache:
    """Append-only SQLite cache of chat replies keyed by :meth:`ChatRequest.key`.

    ``path``: the SQLite file (created if absent); ``None`` keeps an in-memory database for this
    process only. ``mode``: ``"record"`` (read hits, store new replies; the default),
    ``"replay"`` (read only; a miss raises :class:`CacheMiss`, so no request reaches the
    network; the lookups read one snapshot of the file, taken at the first, so replies another
    process stores meanwhile are not seen), ``"off"`` (nothing read or stored, no file opened).

    Storage: one table ``replies(key TEXT PRIMARY KEY, request JSON, reply JSON, created REAL)``
    in WAL mode; every put is committed at once; ``INSERT OR IGNORE`` means a stored reply is
    never replaced. A reserved row records the format and version; a file without it (another
    program's database) or with a newer version is refused with :class:`ArtifactError`.
    """

    def __init__(self, path: str | os.PathLike | None, mode: str = "record"):
        if mode not in CACHE_MODES:
            raise DataError(f"cache mode must be one of {list(CACHE_MODES)}, got {mode!r}", field="mode")
        self.mode = mode
        self.path = None if path is None else os.fspath(path)
        self._conn: sqlite3.Connection | None = None
        if mode != "off":
            self._conn = self._open()
            self._read = self._conn.cursor()         # the lookups' one cursor
            if mode == "replay":
                # nothing is written: every lookup reads one snapshot, taken at the first one
                # (one read transaction, not SQLite's read lock taken and dropped per lookup)
                self._conn.execute("BEGIN")

    # -- opening -----------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        target = ":memory:" if self.path is None else self.path
        where = self.path or ":memory:"
        if self.path is not None and self.mode == "replay" and not os.path.exists(self.path):
            raise ArtifactError("replay-only mode needs an existing cache file; none found", file=where)
        try:
            conn = sqlite3.connect(target, timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise ArtifactError(f"cannot open the reply cache: {exc}", file=where) from exc
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            if self.path is not None:
                _set_wal(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                tables = {r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not tables:
                    conn.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, request JSON, "
                                 "reply JSON, created REAL)")
                    conn.execute(
                        "INSERT OR IGNORE INTO replies (key, request, reply, created) VALUES (?, ?, ?, ?)",
                        (_SCHEMA_KEY, canonical_json({"format": _SCHEMA_FORMAT, "version": _SCHEMA_VERSION}),
                         None, time.time()))
                elif "replies" not in tables:
                    raise ArtifactError(
                        f"not a bda_jax reply cache (tables {sorted(tables)})", file=where)
                self._check_version(conn, where)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            conn.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise ArtifactError("the reply cache stayed locked by another process for 30 s",
                                    file=where) from exc
            raise ArtifactError(f"not a bda_jax reply cache: {exc}", file=where) from exc
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ArtifactError(f"not a bda_jax reply cache: {exc}", file=where) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _check_version(conn: sqlite3.Connection, where: str) -> None:
        try:
            row = conn.execute("SELECT request FROM replies WHERE key = ?", (_SCHEMA_KEY,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise ArtifactError(f"not a bda_jax reply cache: {exc}", file=where) from exc
        if row is None:
            raise ArtifactError("not a bda_jax reply cache (no schema-version row)", file=where)
        try:
            meta = json.loads(row[0])
            fmt, version = meta["format"], meta["version"]
        except (TypeError, ValueError, KeyError) as exc:
            raise ArtifactError("reply cache schema-version row is unreadable", file=where) from exc
        if fmt != _SCHEMA_FORMAT:
            raise ArtifactError(f"not a bda_jax reply cache (format {fmt!r})", file=where)
        if not isinstance(version, int) or version > _SCHEMA_VERSION:
            raise ArtifactError(
                f"reply cache version {version!r} is newer than this bda_jax reads ({_SCHEMA_VERSION})",
                file=where)

    # -- access ------------------------------------------------------------------------------
    def get(self, req: ChatRequest, *, task: str = "", seat: str = "") -> ChatReply | None:
        """The cached reply for ``req`` (``cached=True``), or ``None`` on a miss.

        In ``"replay"`` mode a miss raises :class:`CacheMiss` naming the model, the endpoint and
        (when given) the task and seat; in ``"off"`` mode every lookup misses.
        """
        if self._conn is None:
            if self.mode == "off":
                return None
            raise ArtifactError("the reply cache is closed", file=self.path)
        key = req.key()
        row = self._read.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            if self.mode == "replay":
                where = [f"model {req.model!r}", f"endpoint {req.endpoint!r}"]
                if seat:
                    where.append(f"seat {seat!r}")
                if req.sample:
                    where.append(f"sample {req.sample}")
                if req.draw:
                    where.append(f"draw {req.draw}")
                raise CacheMiss("replay-only: no cached reply for " + ", ".join(where),
                                file=self.path, task_id=task or None)
            return None
        try:
            d = _decode(row[0])
            # ChatReply(text=..., ..., cached=True) without the frozen __init__'s per-field
            # object.__setattr__ (the same fields, values and checks)
            reply = _NEW(ChatReply)
            reply.__dict__.update(text=d["text"], prompt_tokens=int(d["prompt_tokens"]),
                                  completion_tokens=int(d["completion_tokens"]),
                                  latency_s=float(d["latency_s"]), cached=True,
                                  retries=int(d.get("retries", 0)), model=d.get("model"))
            return reply
        except (TypeError, ValueError, KeyError) as exc:
            raise ArtifactError(f"cached reply {key} is unreadable: {exc}", file=self.path) from exc

    def put(self, req: ChatRequest, reply: ChatReply) -> bool:
        """Store ``reply`` for ``req``, committed at once; ``True`` if stored, ``False`` if a reply
        was already stored for that key (it is kept: the cache is append-only) or the mode does
        not store (``"off"``, ``"replay"``)."""
        if self.mode != "record":
            return False
        if self._conn is None:
            raise ArtifactError("the reply cache is closed", file=self.path)
        cur = self._conn.execute(
            "INSERT OR IGNORE INTO replies (key, request, reply, created) VALUES (?, ?, ?, ?)",
            (req.key(), req.canonical(), _reply_to_json(reply), time.time()))
        return cur.rowcount == 1

    def __len__(self) -> int:
        """Number of stored replies (the schema row not counted)."""
        if self._conn is None:
            return 0
        (n,) = self._conn.execute("SELECT COUNT(*) FROM replies WHERE key != ?", (_SCHEMA_KEY,)).fetchone()
        return int(n)

    def close(self) -> None:
        """Close the database (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> ReplyCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
