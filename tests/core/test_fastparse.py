"""The fast trace reader (issue 20, docs/scale.md): ``read_traces``, ``tally`` and
``tally_stream`` give what the line-by-line reference reader gives -- the same traces (moves,
skipped moves, sources), the same counts (every array and ``info``), the same ``TraceError``
(message, file, line, task, move, field) and the same lenient warnings -- on generated files
with every protocol rule in play and on the fuzzer's mutated files.

The reference is ``_read_traces_reference`` (``json`` with the repeated-key hook,
``parse_trace`` and ``resolve_trace`` per line), and traces it returns are tallied through
``resolve_trace`` per trace (they carry no fast columns).
"""
import dataclasses
import json
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bda_jax as bda
from bda_jax import datasets
from bda_jax._core import fastparse  # private: the fast path's size threshold
from bda_jax._core.fastparse import read_checked_traces  # private: the chunk size knob
from bda_jax._core.traces import _read_traces_reference  # private: the reference reader
from bda_jax._core.traces import mark_field_checked  # private: in-memory traces, not re-parsed
from reference import EXAMPLE, load_fuzz_module, outcome

FIELDS = ("task", "agent", "N", "e", "c", "e0", "conf0", "mask", "K", "gold", "gold_missing",
          "cluster")
SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def every_chunk_fast(monkeypatch):
    """Small files take the fast path too (by default a chunk under MIN_FAST_LINES lines goes
    to the reference path whole), so these tests compare it on every file."""
    monkeypatch.setattr(fastparse, "MIN_FAST_LINES", 1)


def same_counts(a, b) -> bool:
    if type(a) is not type(b) or a.info != b.info:
        return False
    for f in FIELDS:
        if hasattr(a, f):
            x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(
                    x, y, equal_nan=x.dtype.kind == "f"):
                return False
    return True


def same_traces(a, b) -> bool:
    return a == b and all(
        (x.skipped, x.extra, x.source) == (y.skipped, y.extra, y.source) for x, y in zip(a, b))


TALLY_OPTIONS = [{}, {"abstain_candidate": "unknown"}, {"seat_key": "agent-force"},
                 {"layout": "pairs", "one_move_per_round": True},
                 {"normalizer": bda.identity_normalizer}]


def check_file(path, *, options=TALLY_OPTIONS, stream=True):
    """Fast and reference readers agree on ``path``, strict and lenient; so do their tallies
    (several options) and the stream. Returns the strict outcome kind."""
    kinds = []
    for lenient in (False, True):
        ref = outcome(lambda: _read_traces_reference(path, lenient=lenient))
        got = outcome(lambda: bda.read_traces(path, lenient=lenient))
        assert got[0] == ref[0], (ref, got)
        kinds.append(ref[0])
        if ref[0] == "error":
            assert got == ref
            continue
        assert same_traces(got[1], ref[1]) and got[2] == ref[2]
        small = read_checked_traces(path, bda.default_normalizer, lenient,
                                    chunk_lines=max(2, len(ref[1]) // 3))
        assert same_traces(small, ref[1])
        for opts in options:
            t_ref = outcome(lambda: bda.tally(ref[1], lenient=lenient, **opts))
            t_got = outcome(lambda: bda.tally(got[1], lenient=lenient, **opts))
            assert t_got[0] == t_ref[0], (opts, t_ref, t_got)
            if t_ref[0] == "error":
                assert t_got == t_ref, opts
                continue
            assert same_counts(t_got[1], t_ref[1]) and t_got[2] == t_ref[2], opts
            if stream:      # the stream reads with the tally's normalizer
                chunk = random.Random(str(opts)).choice([1, 2, 3, 1000])
                s = outcome(lambda: bda.tally_stream(path, lenient=lenient, chunk_tasks=chunk,
                                                     **opts))
                if "normalizer" in opts:
                    t_ref = outcome(lambda: bda.tally(_read_traces_reference(
                        path, lenient=lenient, normalizer=opts["normalizer"]), lenient=lenient,
                        **opts))
                assert s[0] == t_ref[0], (opts, t_ref, s)
                assert s[2:] == t_ref[2:] if s[0] == "error" else same_counts(s[1], t_ref[1])
    return kinds[0]


# ----------------------------------------------------------------------------- generated files
AGENTS = ["A1", "A2", " A3", "A3", "ａ4", "A5", "x\\y", "é"]
POOL = ["A", "B", "C", "unknown", "7", "café"]


def spellings(answer: str) -> list[str]:
    """Spellings the default normalizer maps to ``answer``'s key."""
    return [answer, answer, f" {answer.lower()} ", f"$\\boxed{{{answer}}}$", f"${answer}$",
            f"({answer})" if len(answer) == 1 else answer, answer.upper()]


def random_task(rng: random.Random, task_id) -> dict:
    """A task that respects the protocol (so the fast path takes it) with every rule of the
    automaton in play -- concede chains, self-concedes and self-challenges, retracts by target
    and by answer, given and first-seen candidates, spellings that normalize alike, nulls,
    confidences -- and, one time in four, one defect the automaton or the parser refuses."""
    agents = rng.sample(AGENTS, rng.randint(1, 4))
    given = rng.random() < 0.6
    cands = rng.sample(POOL, rng.randint(1, 4)) if given else None
    moves, answer_of, endorsed = [], {}, {}
    rnd = {a: 0 for a in agents}
    for k in range(rng.randint(1, 10)):
        agent = rng.choice(agents)
        rnd[agent] += rng.random() < 0.3
        move = {"id": f"m{k}", "agent": agent, "round": rnd[agent]}
        bearing = [m for m in moves if answer_of.get(m["id"]) is not None]
        own = [m for m in bearing if m["agent"].strip() == agent.strip()]
        mine = sorted(endorsed.get(agent.strip(), ()))
        force = rng.choice(["propose", "vote", "concede", "challenge", "retract", "abstain"])
        if force in ("concede", "challenge") and not bearing or force == "retract" and not (
                own or mine):
            force = "propose"
        move["force"] = force
        if force in ("propose", "vote"):
            key = rng.choice(cands or POOL)
            move["answer"] = rng.choice(spellings(key))
            answer_of[move["id"]] = key
            endorsed.setdefault(agent.strip(), set()).add(key)
        elif force == "concede":
            target = rng.choice(bearing)
            move["target"] = target["id"]
            answer_of[move["id"]] = answer_of[target["id"]]
            if rng.random() < 0.3:
                move["answer"] = rng.choice(spellings(answer_of[target["id"]]))
            if target["agent"].strip() != agent.strip():
                endorsed.setdefault(agent.strip(), set()).add(answer_of[target["id"]])
        elif force == "challenge":
            move["target"] = rng.choice(bearing)["id"]
        elif force == "retract":
            if own and (not mine or rng.random() < 0.5):
                move["target"] = rng.choice(own)["id"]
            else:
                move["answer"] = rng.choice(spellings(rng.choice(mine)))
        if rng.random() < 0.3:
            move["confidence"] = rng.choice([0.25, 1, 0, 0.5, 0.1 + 0.2, 1e-300])
        if rng.random() < 0.1:
            move[rng.choice(["answer", "target", "confidence"])
                 if force in ("challenge", "abstain") else "confidence"] = None
        moves.append(move)
    task = {"task_id": task_id, "moves": moves}
    if given:
        task["candidates"] = cands
    if rng.random() < 0.6:
        task["gold"] = rng.choice([rng.choice(spellings(rng.choice(POOL))), " ", None])
    if rng.random() < 0.5:
        task["cluster"] = rng.choice(["c1", "c2", "q 1"])
    if rng.random() < 0.25:
        defect(rng, task)
    return task


def defect(rng: random.Random, task: dict) -> None:
    """One thing the parser or the automaton refuses (or reads another way)."""
    moves = task["moves"]
    m = rng.choice(moves)
    kind = rng.randrange(16)
    if kind == 0:
        m["force"] = rng.choice(["Vote", " propose", "shout"])
    elif kind == 1:
        m["answer"] = rng.choice(["", " ", "$$", "\\boxed{}"])
    elif kind == 2:
        m["target"] = rng.choice(["zz", m["id"], moves[-1]["id"]])
    elif kind == 3:
        m["id"] = moves[0]["id"]
    elif kind == 4:
        m["round"] = rng.choice([-1, 1.0, True, 2**31])
        moves[-1]["round"] = 0
    elif kind == 5:
        m["id"] = rng.choice([7, " ", None])
    elif kind == 6:
        m["note"] = "free text"
    elif kind == 7:
        m["answer"] = "Q"
    elif kind == 8:
        task["candidates"] = rng.choice([["A", "(a)"], ["A", "$$"], [], ["A", 3]])
    elif kind == 9:
        m["confidence"] = rng.choice([1.5, -0.1, True, "0.5"])
    elif kind == 10:
        m["agent"] = rng.choice(["", " ", 5, None])
    elif kind == 11:
        task["extra"] = {"k": 1}
    elif kind == 12:
        task["task_id"] = rng.choice([" ", 12, None])
    elif kind == 13:
        moves.clear()
    elif kind == 14:
        task.pop("candidates", None)
        for x in moves:
            x.pop("answer", None)
    else:
        m["agent"] = moves[0]["agent"] + "\u0301"


def serialize(rng: random.Random, tasks: list) -> bytes:
    out = []
    for task in tasks:
        if rng.random() < 0.3:
            task = dict(rng.sample(list(task.items()), len(task)))
        sep = rng.choice([(", ", ": "), (",", ":"), (" , ", " : ")])
        line = json.dumps(task, ensure_ascii=rng.random() < 0.5, separators=sep)
        if rng.random() < 0.05:              # a repeated key, sometimes behind an escape
            key = rng.choice(['"agent"', '"round"', '"answer"', '"gold"', '"task_id"'])
            dup = rng.choice([key, '"\\u0061' + key[2:]]) if key[1] == "a" else key
            line = line.replace(key + sep[1], f"{dup}{sep[1]}null{sep[0]}{key}{sep[1]}", 1)
        out.append(line.encode("utf-8"))
        if rng.random() < 0.05:
            out.append(rng.choice([b"", b"   ", "\u00a0".encode()]))
    ending = rng.choice([b"\n", b"\n", b"\r\n", b"\r"])
    return ending.join(out) + (ending if rng.random() < 0.8 else b"")


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=30, **SETTINGS)
def test_generated_files_read_and_tally_alike(tmp_path, seed):
    rng = random.Random(seed)
    n = rng.randint(1, 6)
    ids = [f"t{k}" for k in range(n)]
    if rng.random() < 0.1:
        ids[-1] = ids[0]                          # a duplicate task id
    path = tmp_path / "gen.jsonl"
    path.write_bytes(serialize(rng, [random_task(rng, i) for i in ids]))
    check_file(path)


def test_a_large_plain_file_takes_the_fast_path_and_agrees(tmp_path):
    """Many plain tasks over several chunks (learned values, new agents late, first-seen and
    given candidates): equal to the reference, and every trace came from the fast path."""
    path = tmp_path / "plain.jsonl"
    path.write_text("\n".join(plain_lines(random.Random(5), 300)) + "\n")
    check_file(path, options=TALLY_OPTIONS[:3])
    traces = bda.read_traces(path)
    assert all("_chunk" in t.__dict__ and "moves" not in t.__dict__ for t in traces)
    ref = _read_traces_reference(path)
    assert traces[260].moves == ref[260].moves       # built on first access
    assert bda.resolve_trace(traces[9]) == bda.resolve_trace(ref[9])


def test_fuzzed_files_read_and_tally_alike(tmp_path):
    """The fuzzer's mutated files (bytes, types, targets, rounds, ids, repeated keys, ...)."""
    fuzz = load_fuzz_module()
    examples = fuzz.load_examples()
    rng = random.Random(2026)
    path = tmp_path / "case.jsonl"
    kinds = set()
    for _ in range(80):
        case = fuzz.make_case(rng, examples, max_tasks=3)
        path.write_bytes(case.data)
        kinds.add(check_file(path, options=TALLY_OPTIONS[:2], stream=False))
    assert kinds == {"ok", "error"}


@pytest.mark.parametrize("line, field", [
    ('{"task_id": "t", "task_id": "u", "moves": [{"id": "m", "agent": "a", "round": 0, '
     '"force": "abstain"}]}', "task_id"),
    ('{"task_id": "t", "moves": [{"id": "m", "agent": "a", "agent": "a", "round": 0, '
     '"force": "abstain"}]}', "agent"),
    ('{"task_id": "t", "moves": [{"id": "m", "agent": "a", "round": 0, "force": "propose", '
     '"answer": null, "answer": "A"}]}', "answer"),
    ('{"task_id": "t", "moves": [{"id": "m", "agent": "a\\"b", "round": 0, "force": '
     '"propose", "\\u0061nswer": "A\\\\", "answer": "B"}]}', "answer"),
    ('{"task_id": "t", "moves": [{"id": "m", "agent": "a", "round": 0, "force": "propose", '
     '"answer": "A", "confidence": 0.5, "confidence": null}]}', "confidence"),
])
def test_repeated_keys_are_refused_alike(tmp_path, line, field):
    """msgspec keeps a repeated key's last value; the token count sends the line to the
    reference reader, which names the key (also behind escapes and escaped quotes)."""
    good = ('{"task_id": "ok", "moves": [{"id": "m", "agent": "a", "round": 0, "force": '
            '"propose", "answer": "A"}]}')
    path = tmp_path / "dup.jsonl"
    path.write_text(good + "\n" + line + "\n")
    got = outcome(lambda: bda.read_traces(path))
    assert got == outcome(lambda: _read_traces_reference(path))
    assert got[0] == "error" and got[4] == 2 and got[7] == field
    assert outcome(lambda: bda.tally_stream(path))[:8] == got


def test_lazy_traces_behave_like_parsed_ones():
    fast, ref = bda.read_traces(EXAMPLE), _read_traces_reference(EXAMPLE)
    a, b = fast[0], ref[0]
    assert repr(a) == repr(b) and hash(a) == hash(b) and a.to_json() == b.to_json()
    c = fast[1]
    assert dataclasses.replace(c, gold="B") == dataclasses.replace(ref[1], gold="B")
    assert [m.__dict__ for m in fast[2].moves] == [m.__dict__ for m in ref[2].moves]
    with pytest.raises(AttributeError):
        a.no_such_field


def test_a_normalizer_that_raises_raises_alike(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"task_id": "t", "moves": [{"id": "m", "agent": "a", "round": 0, '
                    '"force": "propose", "answer": "boom"}]}\n')

    def norm(s):
        if s == "boom":
            raise ValueError("no")
        return s

    for read in (bda.read_traces, _read_traces_reference):
        with pytest.raises(ValueError, match="no"):
            read(path, normalizer=norm)
    with pytest.raises(ValueError, match="no"):
        bda.tally_stream(path, normalizer=norm)


def test_crowd_traces_tally_as_move_objects_do():
    """``to_traces`` keeps its moves as columns; the traces equal those built from Move
    objects and tally alike (the reference: the same moves as Move objects, resolved one
    trace at a time)."""
    for name in ("act_CF", "bluebirds"):
        data = datasets.load_crowd(name)
        traces = datasets.to_traces(data)
        ref = [mark_field_checked(bda.Trace(t.task_id, tuple(bda.Move(**m.__dict__)
                                                             for m in t.moves),
                                            t.candidates, t.gold, source=t.source))
               for t in datasets.to_traces(data)]
        assert traces == ref and all("_chunk" not in t.__dict__ for t in ref)
        for opts in ({}, {"layout": "pairs"}, {"abstain_candidate": "unknown"},
                     {"agents": sorted({m.agent for t in ref for m in t.moves})[::-1]}):
            assert same_counts(bda.tally(traces, **opts), bda.tally(ref, **opts)), (name, opts)


# ----------------------------------------------------------------------------- parse workers
@pytest.fixture
def small_segments(monkeypatch):
    """Segments of a few hundred bytes, so that a small file is spread over both workers."""
    monkeypatch.setattr(fastparse, "SEGMENT_BYTES", 900)


def plain_lines(rng: random.Random, n: int, prefix: str = "q") -> list[str]:
    """``n`` tasks the fast path takes (given and first-seen candidates, learned values, a
    seat name to normalize, seats new late in the file, concedes, challenges, retracts,
    confidences), as JSON lines."""
    lines = []
    for k in range(n):
        agents = ["A1", "A2", " A3"] + (["Late"] if k > n * 0.8 else [])
        moves = [{"id": f"m{i}", "agent": a, "round": 0, "force": "propose",
                  "answer": rng.choice(["7", "8"] if k % 21 == 0 else ["A", "B", "(c)"])}
                 for i, a in enumerate(agents)]
        for i, a in enumerate(agents):
            kind = rng.choice(["concede", "challenge", "vote", "abstain", "retract"])
            move = {"id": f"r{i}", "agent": a, "round": 1, "force": kind}
            if kind in ("concede", "challenge"):
                move["target"] = f"m{rng.randrange(len(agents))}"
            elif kind == "vote":
                move["answer"] = moves[i]["answer"]
            elif kind == "retract":
                move["target"] = f"m{i}"
            if rng.random() < 0.3:
                move["confidence"] = round(rng.random(), 3)
            moves.append(move)
        task = {"task_id": f"{prefix}{k}", "moves": moves, "gold": rng.choice(["A", "b", ""])}
        if k % 3:
            task["candidates"] = ["A", "B", "C"]
        lines.append(json.dumps(task, ensure_ascii=k % 2 == 0))
    return lines


def test_segments_split_lines_as_the_reader_does():
    """Cut at the segment bounds, a file's lines are numbered and split as the in-process
    reader numbers and splits them (\\n, \\r\\n, bare \\r, blank lines, no final line end),
    and each line's byte range holds its bytes."""
    import io
    rng = random.Random(3)
    for _ in range(60):
        pieces = [rng.choice([b'{"a": 1}', b"  ", b"", b"x", b"\xc2\xa0", b'{"b"\r2}']) * 2
                  for _ in range(rng.randint(0, 30))]
        data = b"".join(p + rng.choice([b"\n", b"\r\n", b"\r", b"\n\n"]) for p in pieces)
        data += rng.choice([b"", b"tail", b"\r"])
        lines = fastparse._Lines(io.BytesIO(data), None)
        lines.BLOCK = rng.choice([3, 64, 1 << 18])
        want = lines.take(10**6)
        bounds = [0]
        while bounds[-1] < len(data):   # the bounds _segment_bounds finds (checked below)
            at = data.find(b"\n", bounds[-1] + rng.randint(1, 40) - 1)
            bounds.append(len(data) if at < 0 else at + 1)
        got_numbers, got_datas, base = [], [], 0
        for start, end in zip(bounds[:-1], bounds[1:]):
            numbers, starts, lengths, datas, n = fastparse._segment_lines(data[start:end], start)
            assert [data[s:s + m] for s, m in zip(starts.tolist(), lengths.tolist())] == datas
            got_numbers += [base + i for i in numbers]
            got_datas += datas
            base += n
        assert (got_numbers, got_datas) == want, data


def test_segment_bounds_end_after_a_line_feed(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"ab\ncd\r\nef\rgh\n" * 50 + b"no end")
    data = path.read_bytes()
    with open(path, "rb") as f:
        for step in (1, 5, 13, 100, 10**6):
            bounds = fastparse._segment_bounds(f.fileno(), len(data), step)
            assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
            assert all(data[b - 1:b] == b"\n" for b in bounds[1:-1])
            assert all(b - a >= step for a, b in zip(bounds[:-2], bounds[1:-1]))
    assert fastparse._segment_bounds(0, 0, 10) == [0, 0]


def started_workers(monkeypatch) -> list:
    """Records how many workers each read starts (a read that fell back would warn)."""
    calls = []
    start = fastparse._start_workers

    def spy(n, config):
        calls.append(n)
        return start(n, config)

    monkeypatch.setattr(fastparse, "_start_workers", spy)
    return calls


def test_workers_read_like_one_process(tmp_path, monkeypatch, small_segments):
    """Traces read by three processes (two workers, through read_traces' automatic choice)
    equal the reference reader's, moves and sources included, and tally alike."""
    rng = random.Random(11)
    lines = plain_lines(rng, 240)
    lines[100:100] = ["", "   ", "\u00a0"]                 # blank lines, one only to Python
    path = tmp_path / "w.jsonl"
    path.write_bytes("\r\n".join(lines).encode())
    calls = started_workers(monkeypatch)
    monkeypatch.setattr(fastparse, "MIN_BYTES_PER_WORKER", 1)
    monkeypatch.setenv(fastparse.WORKERS_ENV, "3")
    got = outcome(lambda: bda.read_traces(path))
    ref = outcome(lambda: _read_traces_reference(path))
    assert calls == [2] and got[0] == ref[0] == "ok" and got[2] == ref[2] == []
    assert same_traces(got[1], ref[1]) and all("_chunk" in t.__dict__ for t in got[1])
    assert [t.moves for t in got[1][::37]] == [t.moves for t in ref[1][::37]]
    for opts in ({}, {"abstain_candidate": "unknown", "layout": "pairs"}):
        assert same_counts(bda.tally(got[1], **opts), bda.tally(ref[1], **opts)), opts
    # read_traces(workers=N): N processes whatever the environment says; 1 starts none
    for workers, started in ((2, [2, 1]), (1, [2, 1])):
        again = outcome(lambda: bda.read_traces(path, workers=workers))
        assert calls == started and again[0] == "ok" and same_traces(again[1], ref[1])
    with pytest.raises(bda.DataError, match="workers"):
        bda.read_traces(path, workers=0)


def test_workers_stream_like_one_process(tmp_path, monkeypatch, small_segments):
    """tally_stream in two or three processes equals workers=1, with a package normalizer
    (the workers resolve) and with the caller's own (resolved in this process)."""
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(plain_lines(random.Random(12), 200)) + "\n")
    calls = started_workers(monkeypatch)
    for workers, opts in [
            (3, {"abstain_candidate": "unknown", "layout": "pairs", "chunk_tasks": 77}),
            (2, {"normalizer": lambda s: s.strip("()").upper(), "chunk_tasks": 5000})]:
        one = outcome(lambda: bda.tally_stream(path, workers=1, **opts))
        two = outcome(lambda: bda.tally_stream(path, workers=workers, **opts))
        assert one[0] == two[0] == "ok" and one[2] == two[2] == []
        assert same_counts(one[1], two[1]), opts
    assert calls == [2, 1]


def test_workers_raise_the_first_error_in_file_order(tmp_path, monkeypatch, small_segments):
    """A file with problems late, in several segments: parse workers raise the reference
    reader's first error (strict), skip, count and warn as one process does (lenient); a
    task id repeated across segments is refused naming the first line."""
    rng = random.Random(13)
    lines = plain_lines(rng, 150)
    bad = json.loads(lines[90])
    bad["moves"][-1]["target"] = "nope"                  # unknown_target
    lines[90] = json.dumps(bad)
    lines[120] = lines[120].replace('"round": 1', '"round": -1', 1)    # refused by the decoder
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    ref = outcome(lambda: _read_traces_reference(path))
    got = outcome(lambda: read_checked_traces(path, bda.default_normalizer, False, workers=2))
    assert got == ref and got[0] == "error" and got[4] == 91 and got[7] == "target"
    one = outcome(lambda: bda.tally_stream(path, workers=1, lenient=True))
    two = outcome(lambda: bda.tally_stream(path, workers=2, lenient=True))
    assert one[0] == two[0] == "ok" and one[2] == two[2] != [] and same_counts(one[1], two[1])
    lines = plain_lines(rng, 150)
    lines[140] = lines[3]
    path.write_text("\n".join(lines) + "\n")
    got = outcome(lambda: bda.tally_stream(path, workers=3))
    assert got == outcome(lambda: bda.tally(_read_traces_reference(path)))
    assert got[0] == "error" and got[4] == 141 and "first on line 4" in got[2]


def test_a_worker_that_stops_leaves_the_rest_to_this_process(tmp_path, monkeypatch,
                                                             small_segments):
    """A worker that answers one request and exits, or cannot start: a RuntimeWarning, and
    the rest of the file is read here, with the same counts."""
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(plain_lines(random.Random(14), 120)) + "\n")
    one = bda.tally_stream(path, workers=1)
    command = fastparse.worker_command
    for program, reason in [
            (lambda boot: "import io, sys; sys.stdin = io.TextIOWrapper("
                          "io.BytesIO(sys.stdin.buffer.readline()))\n" + boot,
             "exit status 0"),
            (lambda boot: "raise SystemExit(3)", "exit status 3")]:
        def patched(*args, program=program):
            argv = command(*args)
            argv[argv.index("-c") + 1] = program(argv[argv.index("-c") + 1])
            return argv
        monkeypatch.setattr(fastparse, "worker_command", patched)
        with pytest.warns(RuntimeWarning, match=f"parse worker stopped \\({reason}\\)"):
            two = bda.tally_stream(path, workers=2)
        assert same_counts(one, two)


def test_worker_counts(tmp_path, monkeypatch):
    monkeypatch.delenv(fastparse.WORKERS_ENV, raising=False)
    step = fastparse.MIN_BYTES_PER_WORKER
    cpus = len(os.sched_getaffinity(0))
    cap = min(cpus + 1, fastparse.MAX_AUTO_WORKERS) if cpus > 1 else 1   # a worker per CPU
    assert fastparse.auto_workers(0) == fastparse.auto_workers(2 * step - 1) == 1
    assert fastparse.auto_workers(2 * step) == min(2, cap)
    assert fastparse.auto_workers(100 * step) == cap
    monkeypatch.setenv(fastparse.WORKERS_ENV, "3")
    assert fastparse.auto_workers(100 * step) == 3 and fastparse.auto_workers(step) == 1
    for bad in ("0", "two", "-1", "+3", "\u0663"):      # ASCII digits only (not Arabic-Indic 3)
        monkeypatch.setenv(fastparse.WORKERS_ENV, bad)
        with pytest.raises(bda.DataError) as info:
            fastparse.auto_workers(100 * step)
        assert info.value.field == fastparse.WORKERS_ENV
    path = tmp_path / "t.jsonl"
    path.write_text(plain_lines(random.Random(1), 1)[0])
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(bda.DataError) as info:
            bda.tally_stream(path, workers=bad)
        assert info.value.field == "workers"
    with pytest.raises(bda.DataError, match="shard") as info:
        bda.tally_stream(path, shard=(0, 2), workers=2)
    assert info.value.field == "workers"
