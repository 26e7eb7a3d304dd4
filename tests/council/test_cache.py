"""ReplyCache and ChatRequest.key: canonical keys, append-only storage, modes, version check,
two writer processes."""
import hashlib
import json
import multiprocessing
import sqlite3

import pytest

from bda_jax import ArtifactError, DataError
from bda_jax.council import CacheMiss, ChatReply, ChatRequest, ReplyCache


def _req(i=0, **kw):
    base = dict(endpoint="local", model="m", messages=({"role": "user", "content": f"q{i} é"},),
                temperature=0.7, seed=1, schema={"type": "object"}, sample=0, max_tokens=64)
    base.update(kw)
    return ChatRequest(**base)


def _reply(text="hello", **kw):
    base = dict(text=text, prompt_tokens=3, completion_tokens=5, latency_s=0.25, retries=1, model="m-1")
    base.update(kw)
    return ChatReply(**base)


def test_key_is_sha256_of_canonical_json_of_every_field():
    r = _req()
    # sorted keys, no spaces, non-ASCII escaped (the package's one canonical JSON)
    text = ('{"endpoint":"local","max_tokens":64,"messages":[{"content":"q0 \\u00e9","role":"user"}],'
            '"model":"m","sample":0,"schema":{"type":"object"},"seed":1,"temperature":0.7}')
    assert r.key() == hashlib.sha256(text.encode("ascii")).hexdigest()
    # every field changes the key
    variants = [_req(endpoint="other"), _req(model="m2"), _req(i=1), _req(temperature=0.0),
                _req(seed=None), _req(schema=None), _req(sample=1), _req(max_tokens=65)]
    keys = {v.key() for v in variants} | {r.key()}
    assert len(keys) == 1 + len(variants)


def test_key_rejects_unserializable_messages():
    with pytest.raises(DataError, match="JSON"):
        _req(messages=({"role": "user", "content": object()},)).key()


def test_roundtrip_and_append_only(tmp_path):
    path = tmp_path / "c.sqlite"
    with ReplyCache(path) as c:
        assert c.get(_req()) is None
        assert c.put(_req(), _reply("first")) is True
        assert c.put(_req(), _reply("second")) is False     # never replaced
        got = c.get(_req())
        assert got == ChatReply(text="first", prompt_tokens=3, completion_tokens=5, latency_s=0.25,
                                cached=True, retries=1, model="m-1")
        assert len(c) == 1
    with ReplyCache(path) as c:                               # persisted, reopened
        assert c.get(_req()).text == "first"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = conn.execute("SELECT key, request, reply FROM replies WHERE key = ?", (_req().key(),)).fetchall()
    assert len(rows) == 1 and json.loads(rows[0][1])["model"] == "m"
    conn.close()


def test_mode_off_stores_nothing(tmp_path):
    path = tmp_path / "c.sqlite"
    with ReplyCache(path, mode="off") as c:
        assert c.put(_req(), _reply()) is False
        assert c.get(_req()) is None
    assert not path.exists()


def test_memory_cache_when_path_none():
    with ReplyCache(None) as c:
        c.put(_req(), _reply())
        assert c.get(_req()).cached


def test_replay_miss_names_model_task_and_seat(tmp_path):
    path = tmp_path / "c.sqlite"
    with ReplyCache(path) as c:
        c.put(_req(0), _reply())
    with ReplyCache(path, mode="replay") as c:
        assert c.get(_req(0)).text == "hello"
        with pytest.raises(CacheMiss) as ei:
            c.get(_req(1, model="smollm2"), task="t7", seat="gemma")
        msg = str(ei.value)
        assert "'smollm2'" in msg and "'t7'" in msg and "'gemma'" in msg and "\n" not in msg
        assert ei.value.task_id == "t7"
        c.put(_req(1), _reply())                            # replay never writes
        with pytest.raises(CacheMiss, match="'m'"):
            c.get(_req(1))


def test_replay_needs_an_existing_file(tmp_path):
    with pytest.raises(ArtifactError, match="existing cache"):
        ReplyCache(tmp_path / "absent.sqlite", mode="replay")


def test_bad_mode():
    with pytest.raises(DataError, match="mode"):
        ReplyCache(None, mode="write")


def test_foreign_and_newer_files_are_refused(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ArtifactError, match="not a bda_jax reply cache"):
        ReplyCache(junk)

    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(ArtifactError, match="not a bda_jax reply cache"):
        ReplyCache(other)

    newer = tmp_path / "newer.sqlite"
    ReplyCache(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE replies SET request = ? WHERE key = ?",
                 ('{"format":"bda_jax.council.reply_cache","version":99}', "bda_jax.council.reply_cache"))
    conn.commit()
    conn.close()
    with pytest.raises(ArtifactError, match="newer") as ei:
        ReplyCache(newer)
    assert ei.value.file == str(newer)


def _writer(path, offset, n_own, n_shared, barrier):
    barrier.wait(60)                                        # both write at the same time
    with ReplyCache(path) as c:
        for i in range(n_own):
            c.put(_req(offset + i), _reply(f"own {offset + i}"))
        for i in range(n_shared):
            c.put(_req(-1 - i), _reply(f"shared {i}"))


def test_two_processes_share_one_cache(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(path, off, 200, 50, barrier)) for off in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with ReplyCache(path, mode="replay") as c:
        assert len(c) == 450
        for off in (0, 1000):
            for i in range(200):
                assert c.get(_req(off + i)).text == f"own {off + i}"
        for i in range(50):
            assert c.get(_req(-1 - i)).text == f"shared {i}"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
