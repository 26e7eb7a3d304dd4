"""The append-only cell cache behind resumable studies and the demo."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import bda_jax as bda
from bda_jax import CellCache, fingerprint


def test_round_trip_and_first_value_wins(tmp_path):
    path = tmp_path / "c.jsonl"
    cache = CellCache(path, fingerprint("s", 1))
    calls = []
    for _ in range(2):
        assert cache.get_or_compute("a", lambda: calls.append(1) or {"x": (1, 2)}) == {"x": [1, 2]}
    assert calls == [1] and len(cache) == 1 and "a" in cache and "b" not in cache
    with pytest.raises(KeyError):
        cache.put("a", 3)
    with pytest.raises(ValueError):            # NaN is not JSON; nothing is written
        cache.put("nan", float("nan"))
    again = CellCache(path, fingerprint("s", 1))
    assert list(again.keys()) == ["a"] and again["a"] == {"x": [1, 2]}
    lines = path.read_text().splitlines()
    fp = fingerprint("s", 1)
    assert json.loads(lines[0]) == {"schema_version": 2, "kind": "bda_jax.cell_cache",
                                    "fingerprint": fp}
    # the documented checksum: SHA-256 of the compact, key-sorted JSON of [fingerprint, key, value]
    digest = hashlib.sha256(('["' + fp + '","a",{"x":[1,2]}]').encode()).hexdigest()
    assert json.loads(lines[1]) == {"key": "a", "value": {"x": [1, 2]}, "sha256": digest}


def test_fingerprint_separates_inputs():
    assert fingerprint("s", 1) != fingerprint("s", 2)
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})


def test_fingerprint_sees_every_element_of_an_array():
    """repr elides the middle of a large array; the fingerprint must still change with it."""
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a) == fingerprint(np.zeros(5000))
    assert fingerprint(a) != fingerprint(a.astype(np.float32))          # dtype counts
    assert fingerprint(np.int64(3)) == fingerprint(3)


def test_refuses_another_study_and_bad_files(tmp_path):
    path = tmp_path / "c.jsonl"
    CellCache(path, "one").put("k", 1)
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(path, "two")
    assert err.value.line == 1 and err.value.field == "fingerprint" and str(path) in str(err.value)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"schema_version": 3, "kind": "bda_jax.cell_cache",
                                 "fingerprint": "one"}) + "\n")
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(newer, "one")
    assert err.value.field == "schema_version"
    other = tmp_path / "other.jsonl"
    other.write_text('{"kind": "something else"}\n')
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(other, "one")
    assert err.value.field == "kind"
    v1 = tmp_path / "v1.jsonl"
    v1.write_text(json.dumps({"schema_version": 1, "kind": "bda_jax.cell_cache",
                              "fingerprint": "one"}) + "\n" + '{"key": "k", "value": 1}\n')
    with pytest.raises(bda.ArtifactError) as err:     # no checksums: not trusted
        CellCache(v1, "one")
    assert err.value.field == "schema_version" and err.value.line == 1
    broken = tmp_path / "broken.jsonl"
    broken.write_text(path.read_text() + "{not json\n" + '{"key": "z", "value": 0}\n')
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(broken, "one")
    assert err.value.line == 3
    badcell = tmp_path / "badcell.jsonl"
    badcell.write_text(path.read_text() + '{"key": 5, "value": 0, "sha256": ""}\n')
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(badcell, "one")
    assert err.value.line == 3 and err.value.field == "key"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(bda.ArtifactError):
        CellCache(empty, "one")


def test_partial_last_line_is_dropped(tmp_path):
    path = tmp_path / "c.jsonl"
    cache = CellCache(path, "fp")
    cache.put("a", 1)
    good = path.read_bytes()
    path.write_bytes(good + b'{"key": "b", "val')       # a write cut short
    cache = CellCache(path, "fp")
    assert list(cache.keys()) == ["a"] and path.read_bytes() == good
    cache.put("b", 2)
    assert CellCache(path, "fp")["b"] == 2


WORKER = textwrap.dedent("""
    import sys, time
    from bda_jax import CellCache
    cache = CellCache(sys.argv[1], "killed-study")
    log = open(sys.argv[2], "a")
    for i in range(6):
        def compute():
            log.write(f"{i}\\n"); log.flush()
            time.sleep(0.3)
            return {"cell": i}
        cache.get_or_compute(f"cell{i}", compute)
        print(f"done {i}", flush=True)
""")


def test_sigkill_midway_then_resume(tmp_path):
    """Kill the study with SIGKILL after two cells, rerun it: finished cells are not recomputed,
    the cache stays readable and the rerun completes the grid."""
    script, cache_path, log = tmp_path / "w.py", tmp_path / "c.jsonl", tmp_path / "computed"
    script.write_text(WORKER)
    args = [sys.executable, str(script), str(cache_path), str(log)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    for _ in range(2):
        assert proc.stdout.readline().startswith("done")
    time.sleep(0.1)                            # inside the third cell's computation
    with pytest.raises(bda.DataError) as err:  # the live study holds its cache
        CellCache(cache_path, "killed-study")
    assert err.value.field == "lock" and f"process ({proc.pid})" in str(err.value)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    first = log.read_text().split()
    assert first[:2] == ["0", "1"] and len(first) in (3, 4)
    finished = len(CellCache(cache_path, "killed-study"))     # the kill left no stale lock
    assert finished in (2, 3)
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    second = log.read_text().split()[len(first):]
    assert second == [str(i) for i in range(finished, 6)]
    cache = CellCache(cache_path, "killed-study")
    assert [cache[f"cell{i}"] for i in range(6)] == [{"cell": i} for i in range(6)]


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_edited_cell_is_refused_or_reset(tmp_path):
    """An edited value fails its checksum: refused by default (naming line and field), started
    afresh with on_mismatch="reset"; never trusted."""
    path = tmp_path / "c.jsonl"
    cache = CellCache(path, "fp")
    cache.put("a", {"accuracy": 0.5})
    cache.put("b", 1)
    lines = _lines(path)
    lines[1] = lines[1].replace("0.5", "0.9")             # still valid JSON, wrong value
    path.write_text("".join(lines))
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(path, "fp")
    assert (err.value.line, err.value.field) == (2, "sha256") and "'a'" in str(err.value)
    cache = CellCache(path, "fp", on_mismatch="reset")
    assert len(cache) == 0 and cache.reset.startswith("replaced") and "checksum" in cache.reset
    assert cache.get_or_compute("a", lambda: {"accuracy": 0.5}) == {"accuracy": 0.5}
    assert len(_lines(path)) == 2                          # header + the recomputed cell


def test_cell_from_another_study_and_duplicates_are_refused(tmp_path):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    CellCache(one, "settings A").put("seed=0", 0.25)
    CellCache(two, "settings B").put("seed=1", 0.75)
    # a cell of settings A spliced into the cache of settings B: its checksum names A's inputs
    two.write_text(two.read_text() + _lines(one)[1])
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(two, "settings B")
    assert (err.value.line, err.value.field) == (3, "sha256")
    dup = tmp_path / "dup.jsonl"
    CellCache(dup, "settings A").put("seed=0", 0.25)
    dup.write_text(dup.read_text() + _lines(dup)[1])      # the same cell twice (two writers)
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(dup, "settings A")
    assert (err.value.line, err.value.field) == (3, "key") and "twice" in str(err.value)


def test_fresh_discards_and_reopen_in_one_process_takes_over(tmp_path):
    path = tmp_path / "c.jsonl"
    first = CellCache(path, "fp")
    first.put("a", 1)
    second = CellCache(path, "fp")                         # same process: the newest writes
    assert first.closed and not second.closed and second["a"] == 1
    with pytest.raises(bda.ArtifactError):
        first.put("b", 2)
    second.put("b", 2)
    with pytest.raises(bda.ArtifactError):                 # a failed open gives the lock back
        CellCache(path, "other inputs")
    assert not second.closed
    second.close()
    with CellCache(path, lambda: "fp", fresh=True) as fresh:
        assert len(fresh) == 0 and fresh.reset == "fresh"
    assert fresh.closed and CellCache(path, "fp").reset is None


HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(120)
""")


def test_a_second_process_is_refused_until_the_first_dies(tmp_path):
    """Another process holding the lock: opening raises DataError (field "lock") and changes
    nothing; after that process is SIGKILLed the lock is free (no stale lock)."""
    pytest.importorskip("fcntl")
    path = tmp_path / "c.jsonl"
    CellCache(path, "fp").put("a", 1)
    before = path.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path) + ".lock"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        calls = []
        with pytest.raises(bda.DataError) as err:
            CellCache(path, lambda: calls.append(1) or "fp", fresh=True)
        assert err.value.field == "lock" and str(path) in str(err.value)
        assert calls == [] and path.read_bytes() == before  # nothing computed, nothing touched
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    assert CellCache(path, "fp")["a"] == 1
