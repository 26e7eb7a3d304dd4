"""The append-only cell cache behind resumable studies and the demo."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

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
    assert json.loads(lines[0]) == {"schema_version": 1, "kind": "bda_jax.cell_cache",
                                    "fingerprint": fingerprint("s", 1)}
    assert json.loads(lines[1]) == {"key": "a", "value": {"x": [1, 2]}}


def test_fingerprint_separates_inputs():
    assert fingerprint("s", 1) != fingerprint("s", 2)
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})


def test_refuses_another_study_and_bad_files(tmp_path):
    path = tmp_path / "c.jsonl"
    CellCache(path, "one").put("k", 1)
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(path, "two")
    assert err.value.line == 1 and err.value.field == "fingerprint" and str(path) in str(err.value)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"schema_version": 2, "kind": "bda_jax.cell_cache",
                                 "fingerprint": "one"}) + "\n")
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(newer, "one")
    assert err.value.field == "schema_version"
    other = tmp_path / "other.jsonl"
    other.write_text('{"kind": "something else"}\n')
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(other, "one")
    assert err.value.field == "kind"
    broken = tmp_path / "broken.jsonl"
    broken.write_text(path.read_text() + "{not json\n" + '{"key": "z", "value": 0}\n')
    with pytest.raises(bda.ArtifactError) as err:
        CellCache(broken, "one")
    assert err.value.line == 3
    badcell = tmp_path / "badcell.jsonl"
    badcell.write_text(path.read_text() + '{"key": 5, "value": 0}\n')
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
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    first = log.read_text().split()
    assert first[:2] == ["0", "1"] and len(first) in (3, 4)
    finished = len(CellCache(cache_path, "killed-study"))
    assert finished in (2, 3)
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    second = log.read_text().split()[len(first):]
    assert second == [str(i) for i in range(finished, 6)]
    cache = CellCache(cache_path, "killed-study")
    assert [cache[f"cell{i}"] for i in range(6)] == [{"cell": i} for i in range(6)]
