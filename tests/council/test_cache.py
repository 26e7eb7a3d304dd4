"""ReplyCache and ChatRequest.key: canonical keys, append-only storage, modes, version check,
two writer processes."""
import dataclasses
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
    with pytest.raises(DataError, match="JSON"):                   # NaN is not JSON either
        _req(temperature=float("nan")).key()
    with pytest.raises(DataError, match="JSON"):
        _req(schema={"x": object()}).with_messages(())


def _canonical(value) -> str:
    """The canonical JSON, written out here from its definition (sorted keys, no spaces, ASCII
    only, no NaN): the reference the composed text must equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


ODD_MESSAGES = (
    {"role": "system", "content": "quotes \" \\ tab\t nl\n nul\x00 é ☃ 😀 lone \ud800 end"},
    {"role": "user", "content": ""},
    {"role": "user", "content": "x", "name": "extra key"},          # not the two-key form
    {"content": [{"type": "text", "text": "parts"}], "role": "user"},  # content not a string
    {"role": "assistant"},
)


@pytest.mark.parametrize("fields", [
    {},
    dict(messages=ODD_MESSAGES),
    dict(temperature=0, seed=None, schema=None, sample=3, max_tokens=10**30, draw=2),
    dict(temperature=0.1 + 0.2, seed=-(2**70), endpoint="é p", model="m\u2028"),
    dict(temperature=True, schema={"b": [1.5, None, {"z": 1e300, "a": "ÿ"}], "a": {}}),
])
def test_composed_canonical_json_is_the_canonical_json_of_to_dict(fields):
    """The key's text is composed field by field (and, for a template's copies, around the
    messages); it equals the canonical JSON of the whole request, character for character."""
    r = _req(**fields)
    assert r.canonical() == _canonical(r.to_dict())
    assert r.key() == hashlib.sha256(_canonical(r.to_dict()).encode("ascii")).hexdigest()
    template = _req(**{**fields, "messages": ()})
    for messages in (r.messages, ODD_MESSAGES[:2], ()):
        copy = template.with_messages(list(messages))
        plain = dataclasses.replace(template, messages=tuple(messages))
        assert copy == plain and repr(copy) == repr(plain)
        assert copy.canonical() == plain.canonical() == _canonical(plain.to_dict())
        assert copy.key() == plain.key()


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


def test_replay_reads_one_snapshot_taken_at_its_first_lookup(tmp_path):
    path = tmp_path / "c.sqlite"
    with ReplyCache(path) as rec:
        rec.put(_req(0), _reply("a"))
        with ReplyCache(path, mode="replay") as rep:
            rec.put(_req(1), _reply("b"))           # before the first lookup: in the snapshot
            assert rep.get(_req(0)).text == "a" and rep.get(_req(1)).text == "b"
            rec.put(_req(2), _reply("c"))           # after it: not seen by this replay
            with pytest.raises(CacheMiss):
                rep.get(_req(2))
        with ReplyCache(path, mode="replay") as rep:
            assert rep.get(_req(2)).text == "c"


def test_stored_replies_read_as_json_loads_reads_them(tmp_path):
    """A reply stored by put is canonical JSON; one written otherwise in the documented table
    (spaces around the value) reads all the same; one that is not a reply is an ArtifactError
    naming its key."""
    path = tmp_path / "c.sqlite"
    with ReplyCache(path) as c:
        c.put(_req(0), _reply("x"))
    spaced = ' {"text": "y", "prompt_tokens": 1, "completion_tokens": 2, "latency_s": 0.5} '
    conn = sqlite3.connect(path)
    for i, reply in ((1, spaced), (2, '{"text": "y"} and more'), (3, '{"text": "y"}'), (4, "[1]")):
        conn.execute("INSERT INTO replies VALUES (?, ?, ?, ?)",
                     (_req(i).key(), _req(i).canonical(), reply, 0.0))
    conn.commit()
    conn.close()
    with ReplyCache(path, mode="replay") as c:
        assert c.get(_req(0)) == ChatReply("x", 3, 5, 0.25, cached=True, retries=1, model="m-1")
        assert c.get(_req(1)) == ChatReply("y", 1, 2, 0.5, cached=True, retries=0, model=None)
        for i in (2, 3, 4):
            with pytest.raises(ArtifactError, match=f"cached reply {_req(i).key()}"):
                c.get(_req(i))


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
