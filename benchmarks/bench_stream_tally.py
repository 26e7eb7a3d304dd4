"""Reading and tallying a 10M-move JSON Lines trace file: throughput and peak memory (issue 20).

Targets (2 cores, this machine; best of ``--repeats`` runs, 3 by default):

* ``tally_stream`` (``dense`` and ``pairs``) over the 10M-move file, with the default (automatic)
  number of parse workers: >= 1 M moves/s, peak RSS of the process plus its parse workers
  <= 1 GiB;
* ``tally(read_traces(path))`` on the first ``--reference-moves`` moves: >= 1 M moves/s;
* the crowd readers on the largest registered crowd set: ``load_crowd`` and ``to_traces`` +
  ``tally`` (both layouts) >= 1 M labels/s;
* equal results: the streamed counts equal ``tally(read_traces(...))`` and the fast reader's
  traces and counts equal the line-by-line reference reader's (``_read_traces_reference``).

The line-by-line reference (``json`` + ``parse_trace`` + ``resolve_trace`` per task, what
``read_traces`` ran before the fast reader) is timed on the same prefix in the same way; the
ratio fast / reference is reported. The crowd rows time ``load_crowd`` on the largest
registered crowd set found in the shared data folder, and ``to_traces`` + ``tally`` on it, in
the dense layout (a [T, I, K] grid: 42,624 x 57 x 3 cells for 216,725 labels on
crowdscale_fact) and in the pair layout crowd data takes (docs/architecture.md).
The machine is shared: ``load_average`` is recorded before and after.

What is measured:

* A seeded, valid trace file is written under ``/tmp`` (not the repository) by a direct writer
  (``write_council_jsonl``): councils of I = 5 agents, K = 4 candidates, 3 rounds; round 0 every
  agent proposes (half state a confidence), rounds 1-2 every agent votes, concedes to or
  challenges another agent's proposal, or (rarely) abstains. 15 moves per task, gold and a
  cluster per task; 666,667 tasks = 10,000,005 moves (823 MiB).
* ``stream``: :func:`bda_jax.tally_stream` over the whole file, in a fresh subprocess per layout
  (``dense`` [T, I, K] tensors and ``pairs``), timed inside the child around the call only,
  with the default ``workers`` (``workers``: how many parse worker processes the automatic
  choice starts for this file on this machine). Peak RSS is the child's ``ru_maxrss`` as
  returned by ``os.wait4`` for that child (the interpreter, NumPy and JAX imports included;
  ``baseline_rss_mb`` is the child's RSS after its imports, before the tally), plus each parse
  worker's ``VmHWM`` sampled every 50 ms while it runs (``workers_peak_rss_mb``; their
  ``ru_maxrss`` would count the pages shared with the child before ``exec``):
  ``total_peak_rss_mb``. ``meets_2GB``: total peak RSS <= 2 GiB. ``stream_dense_workers_1``:
  the dense stream with ``workers=1`` (one process; ``--one-process-repeats`` runs), whose
  speed the dense row's ``ratio_to_workers_1`` divides by.
* ``in_memory_reference``: ``tally(read_traces(prefix))`` on the first ``--reference-moves``
  moves, in a subprocess the same way (its memory grows with the number of tasks:
  ``rss_per_move_bytes``); ``line_by_line_reference``: the same with the reference reader.
* ``equal_to_tally``: on the first 3,000 tasks, the streamed counts equal
  ``tally(read_traces(...))`` in every array and in ``info``.

Run (from the repository root)::

    python -m benchmarks.bench_stream_tally                  # 10M moves, writes the JSON below
    python -m benchmarks.bench_stream_tally --moves 1000000 --out /tmp/stream.json   # quick

Writes ``benchmarks/results/stream_tally_cpu.json`` (schema_version 2: ``rows`` lists each
target with its measured value and ``met``).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bda_jax._core import fastparse  # private: the parse workers' automatic count

SCHEMA_VERSION = 2
TARGET_MOVES_PER_S = 1_000_000
TARGET_RSS_MB = 1024
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "stream_tally_cpu.json"
DEFAULT_DIR = Path("/tmp/bda_stream_bench")

AGENTS = ("A1", "A2", "A3", "A4", "A5")
CANDIDATES = ("A", "B", "C", "D")
MOVES_PER_TASK = 15              # 5 agents x 3 rounds
ACCURACY = (0.75, 0.7, 0.65, 0.6, 0.55)


# ------------------------------------------------------------------------------- the trace file
def write_council_jsonl(path: Path, n_tasks: int, seed: int, block: int = 10_000) -> None:
    """Write ``n_tasks`` valid council traces (15 moves each) as JSON Lines, fast: the random
    choices are drawn with NumPy per block of tasks, the text is assembled from templates."""
    rng = np.random.default_rng(seed)
    I, K = len(AGENTS), len(CANDIDATES)
    acc = np.asarray(ACCURACY)
    cand_json = json.dumps(list(CANDIDATES))
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", encoding="utf-8") as f:
        for start in range(0, n_tasks, block):
            n = min(block, n_tasks - start)
            gold = rng.integers(0, K, n)
            right = rng.random((n, I)) < acc
            wrong = (gold[:, None] + rng.integers(1, K, (n, I))) % K
            ans0 = np.where(right, gold[:, None], wrong)                 # round-0 answers
            conf = rng.integers(30, 100, (n, I))
            stated = rng.random((n, I)) < 0.5
            kind = rng.choice(4, size=(n, 2, I), p=[0.35, 0.3, 0.3, 0.05])  # vote/concede/chal/abst
            other = (np.arange(I)[None, None, :] + rng.integers(1, I, (n, 2, I))) % I
            vote = np.where(rng.random((n, 2, I)) < acc, gold[:, None, None],
                            (gold[:, None, None] + rng.integers(1, K, (n, 2, I))) % K)
            lines = []
            for t in range(n):
                tid = start + t
                moves = []
                for i in range(I):
                    c = f', "confidence": 0.{conf[t, i]}' if stated[t, i] else ""
                    moves.append(f'{{"id": "m{i + 1}", "agent": "{AGENTS[i]}", "round": 0, '
                                 f'"force": "propose", "answer": "{CANDIDATES[ans0[t, i]]}"{c}}}')
                mid = I
                for r in (0, 1):
                    for i in range(I):
                        mid += 1
                        head = f'{{"id": "m{mid}", "agent": "{AGENTS[i]}", "round": {r + 1}, '
                        k = kind[t, r, i]
                        if k == 0:
                            body = f'"force": "vote", "answer": "{CANDIDATES[vote[t, r, i]]}"}}'
                        elif k == 1:
                            body = f'"force": "concede", "target": "m{other[t, r, i] + 1}"}}'
                        elif k == 2:
                            body = f'"force": "challenge", "target": "m{other[t, r, i] + 1}"}}'
                        else:
                            body = '"force": "abstain"}'
                        moves.append(head + body)
                lines.append(f'{{"task_id": "t{tid}", "candidates": {cand_json}, '
                             f'"gold": "{CANDIDATES[gold[t]]}", "cluster": "q{tid // 2}", '
                             f'"moves": [{", ".join(moves)}]}}\n')
            f.write("".join(lines))
    os.replace(tmp, path)


# ------------------------------------------------------------------------------- measurements
_CHILD = r"""
import json, os, resource, sys, threading, time
import jax
import numpy as np
import bda_jax as bda
mode, path, layout = sys.argv[1], sys.argv[2], sys.argv[3]
workers = None if sys.argv[4] == "auto" else int(sys.argv[4])
def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith(key))
    except (OSError, StopIteration):
        return None
# the parse workers' peak RSS (VmHWM), sampled while they run: their ru_maxrss would count the
# pages they shared with this process before exec
worker_hwm, done = {}, threading.Event()
def sample():
    me = os.getpid()
    while not done.wait(0.05):
        try:
            with open(f"/proc/{me}/task/{me}/children") as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            hwm = status_kb(pid, "VmHWM:")
            if hwm is not None:
                worker_hwm[pid] = max(worker_hwm.get(pid, 0), hwm)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start_rss = status_kb("self", "VmRSS:")
t0, c0 = time.perf_counter(), time.process_time()
if mode == "stream":
    counts = bda.tally_stream(path, layout=layout, workers=workers)
elif mode == "reference":      # the line-by-line reader (private: the benchmark's reference)
    from bda_jax._core.traces import _read_traces_reference
    counts = bda.tally(_read_traces_reference(path), layout=layout)
else:
    counts = bda.tally(bda.read_traces(path), layout=layout)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
done.set()
sampler.join()
children = resource.getrusage(resource.RUSAGE_CHILDREN)
out = {"wall_s": wall, "cpu_s": cpu, "n_tasks": int(counts.shape[0]),
       "shape": list(counts.shape), "informative_moves": int(np.asarray(counts.N).sum()),
       "baseline_rss_kb": start_rss, "workers_started": len(worker_hwm),
       "workers_peak_rss_kb": sorted(worker_hwm.values()),
       "workers_cpu_s": children.ru_utime + children.ru_stime,
       "result_bytes": int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(counts)))}
print("RESULT " + json.dumps(out))
"""


def run_child(mode: str, path: Path, layout: str, workers: str = "auto") -> dict:
    """One tally in a fresh interpreter. Its peak RSS is ``ru_maxrss`` from ``os.wait4`` on that
    child alone (RUSAGE_CHILDREN would be the maximum over every child reaped so far); the parse
    workers' peak RSS is sampled in the child (``workers_peak_rss_mb``, one entry per worker)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, mode, str(path), layout, workers],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {layout}: the child failed with exit code {proc.returncode}")
    result = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[7:])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024          # Linux: kilobytes
    result["workers_peak_rss_mb"] = [kb / 1024 for kb in result.pop("workers_peak_rss_kb")]
    result["total_peak_rss_mb"] = result["peak_rss_mb"] + sum(result["workers_peak_rss_mb"])
    result["baseline_rss_mb"] = result.pop("baseline_rss_kb") / 1024
    result["result_mb"] = result.pop("result_bytes") / 2**20
    return result


def best_of(repeats: int, mode: str, path: Path, layout: str, n_moves: int,
            workers: str = "auto") -> dict:
    """``run_child`` ``repeats`` times: the fastest run's numbers, every run's wall time, and the
    largest peak RSS of all runs (this process, and this process plus its parse workers)."""
    runs = [run_child(mode, path, layout, workers) for _ in range(repeats)]
    best = dict(min(runs, key=lambda r: r["wall_s"]))
    best["walls_s"] = [r["wall_s"] for r in runs]
    best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    best["total_peak_rss_mb"] = max(r["total_peak_rss_mb"] for r in runs)
    best["moves"] = n_moves
    best["moves_per_s"] = n_moves / best["wall_s"]
    best["moves_per_cpu_s"] = n_moves / best["cpu_s"]
    return best


def crowd_rows(repeats: int) -> dict | None:
    """``load_crowd`` on the registered crowd set of the shared data folder with the most
    labels, and ``to_traces`` + ``tally`` on it: best of ``repeats``, labels per second."""
    import bda_jax as bda
    from bda_jax import datasets
    try:
        datasets.shared_data_root()
    except bda.BdaError:
        return None
    best_name, data = None, None
    for name in sorted(datasets.list_crowd(bundled=False)):
        try:
            d = datasets.load_crowd(name)
        except bda.BdaError:
            continue
        if data is None or len(d.labels) > len(data.labels):
            best_name, data = name, d
    if data is None:
        return None
    n = len(data.labels)
    load = min(_timed(lambda: datasets.load_crowd(best_name)) for _ in range(repeats))
    tally = min(_timed(lambda: bda.tally(datasets.to_traces(data))) for _ in range(repeats))
    pairs = min(_timed(lambda: bda.tally(datasets.to_traces(data), layout="pairs"))
                for _ in range(repeats))
    return {"name": best_name, "labels": n, "load_s": load, "load_labels_per_s": n / load,
            "to_traces_tally_s": tally, "to_traces_tally_labels_per_s": n / tally,
            "to_traces_tally_pairs_s": pairs, "to_traces_tally_pairs_labels_per_s": n / pairs}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def head_file(src: Path, dst: Path, n_lines: int) -> None:
    with open(src, "rb") as f, open(dst, "wb") as g:
        for k, line in enumerate(f):
            if k >= n_lines:
                break
            g.write(line)


def check_equal(path: Path) -> bool:
    """Streamed counts == tally(read_traces(...)) == the line-by-line reference's on a small
    file, every array and info; the fast reader's traces == the reference reader's."""
    import bda_jax as bda
    from bda_jax._core.traces import _read_traces_reference  # private: the reference reader
    fast, slow = bda.read_traces(path), _read_traces_reference(path)
    ok = fast == slow and all(a.source == b.source for a, b in zip(fast, slow))
    for layout in ("dense", "pairs"):
        ref = bda.tally(slow, layout=layout)
        got = bda.tally_stream(path, layout=layout, chunk_tasks=257)
        ok &= _equal_counts(ref, bda.tally(fast, layout=layout))
        ok &= _equal_counts(ref, got)
    return bool(ok)


def _equal_counts(ref, got) -> bool:
    ok = type(ref) is type(got) and ref.info == got.info
    for f in ("task", "agent", "N", "e", "c", "e0", "conf0", "mask", "K", "gold",
              "gold_missing", "cluster"):
        if hasattr(ref, f):
            a, b = np.asarray(getattr(ref, f)), np.asarray(getattr(got, f))
            ok &= a.dtype == b.dtype and np.array_equal(a, b, equal_nan=(f == "conf0"))
    return bool(ok)


def machine() -> dict:
    import jax
    import bda_jax
    return {"platform": platform.platform(), "machine": platform.machine(),
            "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "sched_affinity": len(os.sched_getaffinity(0)), "numpy": np.__version__,
            "jax": jax.__version__, "bda_jax": bda_jax.__version__,
            "parse_workers_env": os.environ.get(fastparse.WORKERS_ENV)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--moves", type=int, default=10_000_000, help="moves in the file (~)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where the file is written")
    ap.add_argument("--reference-moves", type=int, default=1_000_000)
    ap.add_argument("--layouts", default="dense,pairs")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (best kept)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--one-process-repeats", type=int, default=1,
                    help="runs of tally_stream dense with workers=1 (the one-process reference "
                         "of the workers' speed-up; 0: skip)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    args.dir.mkdir(parents=True, exist_ok=True)
    n_tasks = -(-args.moves // MOVES_PER_TASK)
    path = args.dir / f"council_{n_tasks}_seed{args.seed}.jsonl"
    t0 = time.perf_counter()
    if not path.exists():
        write_council_jsonl(path, n_tasks, args.seed)
    gen_s = time.perf_counter() - t0
    n_moves = n_tasks * MOVES_PER_TASK
    print(f"file {path}: {n_tasks} tasks, {n_moves} moves, {path.stat().st_size / 2**20:.0f} MiB "
          f"(written in {gen_s:.1f} s)", flush=True)

    small = args.dir / "head_3000.jsonl"
    head_file(path, small, 3000)
    equal = check_equal(small)
    print(f"equal_to_tally on 3000 tasks: {equal}", flush=True)

    load_before = os.getloadavg()
    auto = fastparse.auto_workers(path.stat().st_size)
    stream = {}
    for layout in args.layouts.split(","):
        r = best_of(args.repeats, "stream", path, layout, n_moves)
        r["workers"] = auto if auto > 1 else 1
        r["meets_2GB"] = r["total_peak_rss_mb"] <= 2048
        r["meets_1GB"] = r["total_peak_rss_mb"] <= TARGET_RSS_MB
        stream[layout] = r
        print(f"stream {layout} ({r['workers']} parse workers): {r['wall_s']:.1f} s, "
              f"{r['moves_per_s']:,.0f} moves/s, peak RSS {r['peak_rss_mb']:.0f} MiB + workers "
              f"{sum(r['workers_peak_rss_mb']):.0f} MiB (baseline {r['baseline_rss_mb']:.0f}, "
              f"result {r['result_mb']:.0f} MiB)", flush=True)
    one = None
    if args.one_process_repeats > 0 and "dense" in stream:
        one = best_of(args.one_process_repeats, "stream", path, "dense", n_moves, workers="1")
        print(f"stream dense, workers=1: {one['wall_s']:.1f} s, {one['moves_per_s']:,.0f} moves/s",
              flush=True)

    ref_tasks = -(-args.reference_moves // MOVES_PER_TASK)
    ref_path = args.dir / f"head_{ref_tasks}.jsonl"
    head_file(path, ref_path, ref_tasks)
    ref_moves = ref_tasks * MOVES_PER_TASK
    ref = best_of(args.repeats, "in_memory", ref_path, "dense", ref_moves)
    ref["rss_per_move_bytes"] = (ref["peak_rss_mb"] - ref["baseline_rss_mb"]) * 2**20 / ref_moves
    print(f"in-memory read_traces+tally on {ref_moves} moves: {ref['moves_per_s']:,.0f} moves/s, "
          f"peak RSS {ref['peak_rss_mb']:.0f} MiB (~{ref['rss_per_move_bytes']:.0f} B/move)",
          flush=True)
    slow = best_of(1, "reference", ref_path, "dense", ref_moves)
    slow["rss_per_move_bytes"] = (slow["peak_rss_mb"] - slow["baseline_rss_mb"]) * 2**20 / ref_moves
    print(f"line-by-line reference read_traces+tally on {ref_moves} moves: "
          f"{slow['moves_per_s']:,.0f} moves/s", flush=True)
    crowd = crowd_rows(args.repeats)
    if crowd:
        print(f"crowd {crowd['name']} ({crowd['labels']:,} labels): load "
              f"{crowd['load_labels_per_s']:,.0f} labels/s, to_traces+tally "
              f"{crowd['to_traces_tally_labels_per_s']:,.0f} labels/s", flush=True)
    load_after = os.getloadavg()

    def row(name, value, unit, target, met, **extra):
        return {"row": name, "value": value, "unit": unit, "target": target, "met": bool(met),
                **extra}

    rows = [row(f"tally_stream {layout}", r["moves_per_s"], "moves/s",
                f">= {TARGET_MOVES_PER_S:,} moves/s", r["moves_per_s"] >= TARGET_MOVES_PER_S,
                workers=r["workers"], ratio_to_line_by_line=r["moves_per_s"] / slow["moves_per_s"],
                **({"ratio_to_workers_1": r["moves_per_s"] / one["moves_per_s"]}
                   if one and layout == "dense" else {}))
            for layout, r in stream.items()]
    rows += [row(f"tally_stream {layout} peak RSS (this process + parse workers)",
                 r["total_peak_rss_mb"], "MiB", f"<= {TARGET_RSS_MB} MiB", r["meets_1GB"],
                 this_process_mb=r["peak_rss_mb"], workers_mb=r["workers_peak_rss_mb"])
             for layout, r in stream.items()]
    ref_workers = fastparse.auto_workers(ref_path.stat().st_size)
    rows.append(row("read_traces + tally (in memory)", ref["moves_per_s"], "moves/s",
                    f">= {TARGET_MOVES_PER_S:,} moves/s", ref["moves_per_s"] >= TARGET_MOVES_PER_S,
                    moves=ref_moves, workers=ref_workers, ratio_to_line_by_line=ref["moves_per_s"] / slow["moves_per_s"]))
    rows.append(row("equal results (stream = tally = line-by-line reference)", equal, "bool",
                    "every array, info and trace equal", equal))
    if crowd:
        rows.append(row(f"load_crowd {crowd['name']}", crowd["load_labels_per_s"], "labels/s",
                        f">= {TARGET_MOVES_PER_S:,} labels/s",
                        crowd["load_labels_per_s"] >= TARGET_MOVES_PER_S))
        rows.append(row(f"to_traces + tally {crowd['name']}",
                        crowd["to_traces_tally_labels_per_s"], "labels/s",
                        f">= {TARGET_MOVES_PER_S:,} labels/s",
                        crowd["to_traces_tally_labels_per_s"] >= TARGET_MOVES_PER_S))
        rows.append(row(f"to_traces + tally(layout='pairs') {crowd['name']}",
                        crowd["to_traces_tally_pairs_labels_per_s"], "labels/s",
                        f">= {TARGET_MOVES_PER_S:,} labels/s",
                        crowd["to_traces_tally_pairs_labels_per_s"] >= TARGET_MOVES_PER_S))

    result = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "stream_tally",
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average": {"before": list(load_before), "after": list(load_after)},
        "workload": {"n_tasks": n_tasks, "n_moves": n_moves, "agents": len(AGENTS),
                     "candidates": len(CANDIDATES), "rounds": 3, "seed": args.seed,
                     "file_mib": path.stat().st_size / 2**20, "generator": "write_council_jsonl",
                     "repeats": args.repeats},
        "rows": rows,
        "met": all(r["met"] for r in rows),
        "stream": stream,
        "stream_dense_workers_1": one,
        "meets_2GB": all(r["meets_2GB"] for r in stream.values()),
        "meets_1GB": all(r["meets_1GB"] for r in stream.values()),
        "equal_to_tally": equal,
        "in_memory_reference": ref,
        "line_by_line_reference": slow,
        "crowd": crowd,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    if not args.keep:
        for p in (path, small, ref_path):
            p.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
