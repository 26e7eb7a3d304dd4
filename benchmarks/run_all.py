"""Run every benchmark and write one summary: ``benchmarks/results/summary.json`` and
``benchmarks/results/SUMMARY.md`` (``make bench`` runs this).

Benchmarks (each a script of its own, run here in a subprocess with the same interpreter):

==================== ===================================== ========================================
name                 script                                result JSON
==================== ===================================== ========================================
onecoin              bench_onecoin.py                      onecoin_cpu.json
kernels              bench_kernels.py                      kernels_cpu.json
nested_cv            bench_nested_cv.py                    nested_cv_cpu.json
nested_cv_confusion  bench_nested_cv_confusion.py          nested_cv_confusion_cpu.json
stream_tally         bench_stream_tally.py (if present)    stream_tally_cpu.json
cli                  bench_cli.py (cold / warm ``bda``)     cli_cpu.json
runner               bench_runner.py (council client)      runner_cpu.json
suite                bench_suite.py (``make test``; full    suite_cpu.json
                     runs only)
crowd_em             crowdkit_synthetic.py (crowd-kit's     crowdkit_synthetic.json,
                     venv), then bench_crowd_em.py         crowd_em_cpu.json
nuts                 bench_nuts_ds.py (``--with-nuts``)    nuts_ds_cpu.json
==================== ===================================== ========================================

* ``crowd_em`` needs crowd-kit's own virtual environment (``--crowdkit-venv``, default
  ``$CROWDKIT_VENV`` or ``../crowdkit-venv`` next to the repository): crowd-kit is timed there
  first, then bda_jax right after it, for an honest ratio. Without it (or with
  ``--skip-crowd``) the benchmark is skipped with the reason printed and its committed JSON is
  summarized instead. It takes several minutes.
* ``nuts`` takes ~15 minutes on 2 cores: only with ``--with-nuts``; otherwise its committed
  JSON is summarized.
* A benchmark that is not rerun is summarized from its committed JSON, and the table says so
  ("from <file>, <date>"). One that fails is reported as failed (its log is kept) and the
  script exits non-zero after summarizing the rest.

``--quick``: a smoke run (a few minutes): small workloads for onecoin, kernels, both nested CVs
and the streaming tally, written with the summary to ``--out-dir`` (default
``$TMPDIR/bda_bench_quick``), never over the committed results; crowd_em and nuts are read from
the committed JSONs. Numbers from a quick run are not the results. Each benchmark's output
goes to ``$TMPDIR/bda_bench_logs/<name>.log``.

``--device gpu``: the bda_jax runs get ``JAX_PLATFORMS=cuda`` (the benchmarks themselves are
unchanged; JAX picks the platform) and write ``*_gpu.json``, ``summary_gpu.json`` and
``SUMMARY_gpu.md``; without a visible GPU they fail instead of running on the CPU.
``--summarize-only`` reruns nothing. A full CPU run into ``benchmarks/results`` also rewrites
README's performance table (between its two marker comments) from the summary rows.

Run from the repository root::

    python -m benchmarks                 # full run, updates benchmarks/results/
    python -m benchmarks --quick         # smoke
    python -m benchmarks --only kernels,nested_cv_confusion
    python -m benchmarks --with-nuts     # everything, NUTS included
    python -m benchmarks --summarize-only   # summary + README table from the committed JSONs
    python -m benchmarks --device gpu --only kernels,nested_cv,crowd_em   # on a GPU
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SCHEMA_VERSION = 1


# ------------------------------------------------------------------------------ the benchmarks

def _spec():
    """name -> (result JSON names, full-run argv list, quick-run argv list, timeout s).
    Each argv entry is a list of arguments after the interpreter; "{out}" is replaced by the
    output directory, "{crowdkit}" by crowd-kit's interpreter."""
    spec = {
        "onecoin": (["onecoin_cpu.json"],
                    [["-m", "benchmarks.bench_onecoin", "--out", "{out}/onecoin_cpu.json"]],
                    [["-m", "benchmarks.bench_onecoin", "--tasks", "100000", "--large-tasks",
                      "10000", "--reps", "7", "--ref-reps", "3",
                      "--out", "{out}/onecoin_cpu.json"]], 1800),
        "kernels": (["kernels_cpu.json"],
                    [["-m", "benchmarks.bench_kernels", "--out", "{out}/kernels_cpu.json"]],
                    [["-m", "benchmarks.bench_kernels", "--quick", "--out",
                      "{out}/kernels_cpu.json"]], 3600),
        "nested_cv": (["nested_cv_cpu.json"],
                      [["-m", "benchmarks.bench_nested_cv", "--out", "{out}/nested_cv_cpu.json"]],
                      [["-m", "benchmarks.bench_nested_cv", "--questions", "300", "--reps", "3",
                        "--out", "{out}/nested_cv_cpu.json"]], 1800),
        "nested_cv_confusion": (
            ["nested_cv_confusion_cpu.json"],
            [["-m", "benchmarks.bench_nested_cv_confusion", "--out",
              "{out}/nested_cv_confusion_cpu.json"]],
            [["-m", "benchmarks.bench_nested_cv_confusion", "--questions", "300", "--reps", "3",
              "--loop-reps", "1", "--out", "{out}/nested_cv_confusion_cpu.json"]], 1800),
    }
    if (HERE / "bench_stream_tally.py").exists():
        spec["stream_tally"] = (
            ["stream_tally_cpu.json"],
            [["-m", "benchmarks.bench_stream_tally", "--out", "{out}/stream_tally_cpu.json"]],
            [["-m", "benchmarks.bench_stream_tally", "--moves", "300000", "--reference-moves",
              "100000", "--out", "{out}/stream_tally_cpu.json"]], 3600)
    spec["cli"] = (["cli_cpu.json"],
                   [["-m", "benchmarks.bench_cli", "--out", "{out}/cli_cpu.json"]],
                   [["-m", "benchmarks.bench_cli", "--quick", "--reps", "1", "--out",
                     "{out}/cli_cpu.json"]], 3600)
    spec["runner"] = (["runner_cpu.json"],
                      [["-m", "benchmarks.bench_runner", "--out", "{out}/runner_cpu.json"]],
                      [["-m", "benchmarks.bench_runner", "--questions", "100", "--reps", "1",
                        "--out", "{out}/runner_cpu.json"]], 1800)
    spec["suite"] = (["suite_cpu.json"],
                     [["-m", "benchmarks.bench_suite", "--out", "{out}/suite_cpu.json"]], None,
                     1800)
    # crowd-kit writes its own record (appended) and bda_jax's script its fixed path
    spec["crowd_em"] = (["crowd_em_cpu.json"],
                        [["{crowdkit}", "-m", "benchmarks.crowdkit_synthetic"],
                         ["-m", "benchmarks.bench_crowd_em", "--out", "{out}/crowd_em_cpu.json"]],
                        None, 5400)
    spec["nuts"] = (["nuts_ds_cpu.json"],
                    [["-m", "benchmarks.bench_nuts_ds", "--out", "{out}/nuts_ds_cpu.json"]], None,
                    5400)
    return spec


def _crowdkit_python(path_arg):
    venv = Path(path_arg or os.environ.get("CROWDKIT_VENV") or ROOT.parent / "crowdkit-venv")
    py = venv / "bin" / "python"
    return py if py.exists() else None, venv


DEVICES = {"cpu": "cpu", "gpu": "cuda"}     # --device -> JAX_PLATFORMS of the benchmark runs


def _for_device(name: str, device: str) -> str:
    """A result file name for ``device``: ``X_cpu.json`` -> ``X_gpu.json`` under --device gpu."""
    return name.replace("_cpu.json", f"_{device}.json") if device != "cpu" else name


def run_benchmark(name, argvs, out_dir, log_dir, timeout, crowdkit_py, device="cpu"):
    """Run one benchmark's commands in order; returns a run record. The bda_jax commands run
    with ``JAX_PLATFORMS`` set for ``device`` (unchanged code: JAX picks the platform), so a
    GPU run fails loudly where no GPU is visible instead of falling back to the CPU."""
    env = dict(os.environ)
    log = log_dir / f"{name}.log"
    t0 = time.perf_counter()
    rc = 0
    with open(log, "w") as fh:
        for argv in argvs:
            args = [_for_device(a.replace("{out}", str(out_dir)), device) for a in argv]
            if args[0] == "{crowdkit}":
                cmd = [str(crowdkit_py)] + args[1:]
                run_env = dict(env)
            else:
                cmd = [sys.executable] + args
                run_env = dict(env, JAX_PLATFORMS=DEVICES[device])
            fh.write(f"$ {' '.join(cmd)}\n")
            fh.flush()
            try:
                rc = subprocess.run(cmd, cwd=ROOT, env=run_env, stdout=fh,
                                    stderr=subprocess.STDOUT, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                fh.write(f"\n[run_all] timed out after {timeout} s\n")
                rc = 124
            if rc != 0:
                break
    return {"name": name, "ran": True, "rc": rc, "seconds": time.perf_counter() - t0,
            "log": str(log)}


# --------------------------------------------------------------------------------- summaries

def _fmt_s(x):
    if x is None:
        return "—"
    if x < 1.0:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def _fmt_rate(x, unit="tasks/s"):
    if x < 1e4:
        return f"{x:,.0f} {unit}"
    return f"{x / 1e6:.1f} M {unit}" if x >= 1e6 else f"{x / 1e3:.0f} k {unit}"


def _yes(flag):
    return "—" if flag is None else ("yes" if flag else "**no**")


def _machine(d):
    m = d.get("machine") or d.get("platform") or {}
    cpus = m.get("cpu_count") or m.get("cpus")
    backend = m.get("jax_backend") or m.get("backend") or "cpu"
    jaxv = m.get("jax")
    bits = [f"{backend} ×{cpus}" if cpus else backend]
    if jaxv:
        bits.append(f"jax {jaxv}")
    return ", ".join(bits)


def _date(d, path=None):
    for k in ("timestamp", "date"):
        if d.get(k):
            return str(d[k])[:10]
    if path is not None:        # no date inside: the file's modification date (UTC)
        mtime = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
        return mtime.date().isoformat() + " (file date)"
    return "?"


def _row(**kw):
    base = dict(benchmark="", workload="", ours_warm="", compile="—", reference="—",
                ratio="—", target="—", met=None, machine="", source="")
    base.update(kw)
    return base


def rows_onecoin(d):
    out = []
    s = d["small_counts"]
    w, m, r = s["workload"], s["methods"], s["ratios"]
    T, I, K = w["tasks"], w["agents"], w["candidates"]
    met = r["speedup_vs_scipy"] >= 8 and r["fraction_of_ceiling"] >= 0.5
    out.append(_row(
        benchmark="one-coin kernel (bench_onecoin)",
        workload=f"[{T:,}, {I}, {K}] small counts (int32), float32",
        ours_warm=f"{_fmt_s(m['bda_jax']['warm_median_s'])} "
                  f"({_fmt_rate(m['bda_jax']['tasks_per_s'])})",
        compile=_fmt_s(m["bda_jax"]["compile_s"]),
        reference=f"SciPy betaln f64 {_fmt_s(m['scipy_reference']['warm_median_s'])}; "
                  f"ceiling {_fmt_rate(m['streaming_ceiling']['tasks_per_s'])}",
        ratio=f"{r['speedup_vs_scipy']:.0f}× SciPy; {r['fraction_of_ceiling']:.2f} of ceiling",
        target="≥ 8× reference; ≥ 0.5 of ceiling", met=met))
    L = d.get("large_counts")
    if L:
        lw, lm = L["workload"], L["methods"]
        out.append(_row(
            benchmark="one-coin kernel, large counts (bench_onecoin)",
            workload=f"[{lw['tasks']:,}, {lw['agents']}, {lw['candidates']}] N ≤ "
                     f"{lw['max_N']:,} (float64 path)",
            ours_warm=_fmt_s(lm["bda_jax"]["warm_median_s"]),
            compile=_fmt_s(lm["bda_jax"]["compile_s"]),
            reference=f"SciPy betaln f64 {_fmt_s(lm['scipy_reference']['warm_median_s'])}",
            ratio=f"{L['ratios']['speedup_vs_scipy']:.1f}× SciPy"))
    return out


def rows_kernels(d):
    out = []
    for c in d["cases"]:
        T, I, K = c["shape"]
        name = {"onecoin": "one-coin", "confusion": "confusion"}[c["kernel"]]
        ratio = f"{c['speedup_vs_reference']:.1f}× ref"
        ref = f"f64 {_fmt_s(c['reference']['warm_median_s'])}"
        if "fraction_of_ceiling" in c:
            ratio += f"; {c['fraction_of_ceiling']:.2f} of ceiling"
            ref += f"; ceiling {_fmt_rate(c['ceiling']['tasks_per_s'])}"
        targeted = c.get("targeted", False)
        met = all(c["meets"].values()) if targeted else c["meets"]["agreement"]
        target = ("≥ 8× ref; ≥ 0.5 of ceiling; |Δp| < 1e-5" if targeted
                  else "|Δp| < 1e-5 (speed: context)")
        out.append(_row(
            benchmark=f"{name} kernel ({c['case']} counts)",
            workload=f"[{T:,}, {I}, {K}] {c['count_dtype']}, max count {c['counts']['max']:,}",
            ours_warm=f"{_fmt_s(c['bda_jax']['warm_median_s'])} "
                      f"({_fmt_rate(c['bda_jax']['tasks_per_s'])})",
            compile=_fmt_s(c["bda_jax"]["compile_s"]), reference=ref,
            ratio=ratio + f"; |Δp| {c['agreement']['max_abs_diff_prob']:.0e}",
            target=target, met=met))
        u = c.get("user_path")
        if u and "fraction_of_ceiling" in u:
            out.append(_row(
                benchmark=f"{name} kernel, user path",
                workload=f"[{T:,}, {I}, {K}] host int32 → Counts.from_arrays "
                         f"({_fmt_s(u['from_arrays_s'])}) → repeated calls",
                ours_warm=f"{_fmt_s(u['warm_median_s'])} ({_fmt_rate(u['tasks_per_s'])})",
                compile=_fmt_s(u["compile_s"]) + " (first call)",
                reference=f"ceiling {_fmt_rate(c['ceiling']['tasks_per_s'])}; device path "
                          f"{_fmt_s(c['bda_jax']['warm_median_s'])}",
                ratio=f"{u['fraction_of_ceiling']:.2f} of ceiling",
                target="≥ 0.5 of ceiling" if targeted else "— (context)",
                met=(c["meets"].get("user_path_fraction_of_ceiling_0.5") if targeted else None)))
    return out


def rows_nested(d):
    w = d["workload"]
    arm = "confusion" if "confusion" in d.get("benchmark", "") else "per-agent"
    warm = d["bda_jax"]["warm_median_s"]
    speed = d["speedup_vs_loop"]
    agree = d["agreement"]
    return [_row(
        benchmark=f"nested CV, BDA {arm} grid",
        workload=f"{w['traces']:,} traces, {w['outer_folds']}×{w['inner_folds']} folds × "
                 f"{w['grid_rows']} rows ({w['fits']:,} fits)",
        ours_warm=_fmt_s(warm), compile=_fmt_s(d["bda_jax"]["first_call_s"]) + " (first call)",
        reference=f"Python loop {_fmt_s(d['python_loop']['run_s'])}",
        ratio=f"{speed:.1f}×; same rows: {agree['same_selected_rows']}; "
              f"|Δp| {agree['max_abs_diff_proba']:.0e}",
        target="≤ 2 s warm; ≥ 20×",
        met=warm <= 2.0 and speed >= 20 and agree["same_selected_rows"])]


def rows_crowd(d):
    out = []
    for r in d["rows"]:
        out.append(_row(
            benchmark=f"crowd EM: {r['method']}",
            workload="synthetic DS 20,000 × 5, K = 4",
            ours_warm=_fmt_s(r["seconds_warm_median"]),
            compile=_fmt_s(r["seconds_first_call"]) + " (first call)",
            reference=(f"crowd-kit 1.4.2 {_fmt_s(r['crowdkit_seconds'])} "
                       f"({str(r.get('crowdkit_run'))[:10]})" if r.get("crowdkit_seconds")
                       else "—"),
            ratio=(f"{r['speedup']:.1f}×; acc {r['accuracy']:.4f} vs "
                   f"{r['crowdkit_accuracy']:.4f}" if r.get("speedup") else "—")))
    return out


def rows_nuts(d):
    out = []
    for method, r in d["runs"].items():
        ref = d.get("funsor_reference", {}).get("runs", {}).get(
            d.get("reference_method", {}).get(method, method), {})
        speed = d.get("speedup_warm", {}).get(method)
        met = bool(r.get("meets_15s") and r.get("meets_rhat_1.01") and (speed or 0) >= 4)
        out.append(_row(
            benchmark=f"NUTS Dawid–Skene ({method} chains)",
            workload="20,000 × 5, K = 4; 2 chains × (500 + 500)",
            ours_warm=_fmt_s(r["warm_s"]),
            compile=_fmt_s(r.get("compile_s_est")) + " (est.)",
            reference=f"funsor-enumerated {_fmt_s(ref.get('warm_s'))}" if ref else "—",
            ratio=(f"{speed:.1f}×; r̂ {r['max_rhat']:.4f}" if speed else "—"),
            target="≤ 15 s warm; r̂ ≤ 1.01; ≥ 4×", met=met))
    return out


def _value(r):
    v, unit = r["value"], r.get("unit", "")
    if isinstance(v, bool):
        return "yes" if v else "no"
    if unit.endswith("/s"):
        return _fmt_rate(v, unit)
    if unit == "s":
        return _fmt_s(v)
    return f"{v:,.0f} {unit}" if isinstance(v, (int, float)) else str(v)


def rows_stream(d):
    """Parsing (bench_stream_tally, schema 2): one summary row per result row."""
    w = d["workload"]
    line = d.get("line_by_line_reference", {})
    out = []
    for r in d["rows"]:
        ratio = (f"{r['ratio_to_line_by_line']:.1f}× the line-by-line reader"
                 if "ratio_to_line_by_line" in r else "—")
        crowd = d.get("crowd", {})
        if "moves" in r:
            workload = f"{r['moves']:,} moves"
        elif crowd and crowd.get("name", "?") in r["row"]:
            workload = f"{crowd['labels']:,} crowd labels"
        else:
            workload = f"{w['n_moves']:,} moves JSONL ({w['file_mib']:.0f} MiB)"
        out.append(_row(benchmark=f"parsing: {r['row']}", workload=workload,
                        ours_warm=_value(r),
                        reference=(f"line-by-line {_fmt_rate(line['moves_per_s'], 'moves/s')}"
                                   if "ratio_to_line_by_line" in r and line else "—"),
                        ratio=ratio, target=r["target"], met=r["met"]))
    return out


def rows_cli(d):
    """Cold / warm CLI (bench_cli): the persistent compilation cache. Schema 2 times the default
    ``bda fit`` (the ``auto`` arm; ``--arm bda-per-agent`` alongside for context) and may have no
    demo row (``--fit-only``); schema 1 timed ``--arm bda-per-agent`` alone."""
    f, m = d["fit"], d["demo"]
    n = d["workload"]["fit_traces"]["n_tasks"]
    if d.get("schema_version", 1) >= 2:
        arm = "default arm (auto)"
        context = f"; --arm bda-per-agent {_fmt_s(f['per_agent']['warm_s'])}"
    else:
        arm, context = "bda-per-agent", ""
    rows = [
        _row(benchmark="bda fit, warm cache", workload=f"{n} tasks, {arm}",
             ours_warm=_fmt_s(f["warm_s"]) + " (best)", compile=f"cold {_fmt_s(f['cold_s'])}",
             reference=f"no cache {_fmt_s(f['uncached_s'])}{context}",
             ratio=f"{f['uncached_s'] / f['warm_s']:.1f}× uncached", target="< 3 s warm",
             met=f["met"])]
    if m is not None:
        rows.append(_row(benchmark="bda demo --no-resume, second run", workload="bundled data",
                         ours_warm=_fmt_s(m["warm_s"]), compile=f"first {_fmt_s(m['cold_s'])}",
                         reference=f"first run {_fmt_s(m['cold_s'])}",
                         ratio=f"{m['speedup']:.1f}×", target="≥ 3× faster than the first",
                         met=m["speedup"] >= 3))
    return rows


def rows_runner(d):
    """Council runner overhead (bench_runner): live against a zero-latency loopback server, and
    cache replay."""
    w, live, rep, ref = d["workload"], d["live"], d["replay"], d["reference"]
    work = (f"{w['questions']} questions × {w['seats']} seats × {w['rounds']} rounds "
            f"({w['moves']:,} moves), concurrency {w['concurrency']}")
    return [
        _row(benchmark="council runner, live (loopback, zero latency)", workload=work,
             ours_warm=_fmt_rate(live["moves_per_s"], "moves/s") + " (best)",
             reference=f"SDK post {_fmt_rate(ref['sdk_post']['calls_per_s'], 'calls/s')}; "
                       f"SDK create {_fmt_rate(ref['sdk_create']['calls_per_s'], 'calls/s')}",
             ratio=f"{d['ratios']['live_over_sdk_post']:.2f} of SDK post",
             target="≥ 500 moves/s", met=live["met"]),
        _row(benchmark="council runner, cache replay", workload=work + ", every reply cached",
             ours_warm=_fmt_rate(rep["moves_per_s"], "moves/s") + " (best)",
             reference=f"client lookup alone "
                       f"{_fmt_rate(d['client_replay']['calls_per_s'], 'calls/s')}",
             ratio=f"0 upstream calls; same traces: {rep['same_traces_as_live']}",
             target="≥ 20,000 moves/s", met=rep["met"])]


def rows_suite(d):
    """The default test suite's wall time (bench_suite), README's test command."""
    o = d.get("outcomes", {})
    top = d.get("slowest_20") or [{"test": "?", "seconds": 0.0}]
    return [_row(benchmark="default test suite (make test)",
                 workload=f"{o.get('passed', 0):,} passed, {o.get('skipped', 0)} skipped; "
                          f"slowest {top[0]['test'].rsplit('::', 1)[-1]} {top[0]['seconds']:.0f} s",
                 ours_warm=_fmt_s(d["wall_s"]),
                 reference=f"sum of test times {_fmt_s(o.get('sum_of_test_seconds'))}"
                           + _speed_note(d.get("machine_speed")),
                 target=f"≤ {d['target_s']:.0f} s on 2 cores", met=d["met"])]


def _speed_note(speed) -> str:
    """The machine's speed that hour (bench_suite's fixed Python loop and XLA compile)."""
    if not speed:
        return ""
    return (f"; machine: Python loop {speed['python_loop_s']:.2f} s, "
            f"XLA compile {speed['xla_compile_s']:.2f} s")


SUMMARIZERS = {"onecoin": rows_onecoin, "kernels": rows_kernels, "nested_cv": rows_nested,
               "nested_cv_confusion": rows_nested, "stream_tally": rows_stream, "cli": rows_cli,
               "runner": rows_runner, "suite": rows_suite,
               "crowd_em": rows_crowd, "nuts": rows_nuts}


def summarize(name, path, ran_now):
    d = json.loads(path.read_text())
    rows = SUMMARIZERS[name](d)
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    source = "run now" if ran_now else f"from {rel}, {_date(d, path)}"
    if name == "crowd_em" and not ran_now:
        source += " (crowd-kit times: its run dates in the reference column)"
    for r in rows:
        r["machine"] = _machine(d)
        r["source"] = source
        r["name"] = name
    return rows


def slowest_tests(out_dir: Path) -> list[dict]:
    """The 20 slowest tests of the suite run summarized (``suite_cpu.json``'s ``slowest_20``:
    this run's if it ran, else the committed one's); empty without one."""
    for folder in (out_dir, RESULTS):
        path = folder / "suite_cpu.json"
        if path.exists():
            return json.loads(path.read_text()).get("slowest_20") or []
    return []


def markdown(rows, runs, mode, generated, slowest=()):
    cols = ["benchmark", "workload", "ours_warm", "compile", "reference", "ratio", "target",
            "met", "machine", "source"]
    head = ["benchmark", "workload", "ours (warm)", "compile", "reference", "ratio", "target",
            "met?", "machine", "source"]
    esc = lambda x: str(x).replace("|", "\\|")
    lines = [f"# Benchmark summary ({mode} run, {generated})", "",
             "Written by `benchmarks/run_all.py` (`make bench`). Timings are wall-clock on a "
             "shared machine; ratios are measured in the same process (see "
             "[docs/performance.md](../../docs/performance.md)). \"from <file>, <date>\": not "
             "rerun this time, summarized from the committed JSON.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(esc(_yes(r[c]) if c == "met" else r[c]) for c in cols)
                     + " |")
    notes = [f"- {r['name']}: {r['reason']}" for r in runs if r.get("reason")]
    failed = [f"- {r['name']}: exit code {r['rc']}, log {r['log']}" for r in runs
              if r.get("ran") and r.get("rc")]
    if slowest:
        lines += ["", "The default suite's 20 slowest tests (`suite_cpu.json`):", "",
                  "| test | seconds |", "|---|---|"]
        lines += [f"| {esc(t['test'])} | {t['seconds']:.1f} |" for t in slowest]
    if notes:
        lines += ["", "Not rerun:", ""] + notes
    if failed:
        lines += ["", "Failed:", ""] + failed
    return "\n".join(lines) + "\n"


README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- performance table: benchmarks/run_all.py -->", "<!-- end of table -->"


def readme_table(rows) -> str:
    """README's performance table: the summary rows users read first -- every row with a target,
    and the peer comparisons -- each with its target and whether it is met (SUMMARY.md has all
    rows, the context rows of large counts and other count dtypes too)."""
    esc = lambda x: str(x).replace("|", "\\|")
    lines = ["| benchmark | workload | bda_jax (warm) | reference · ratio | target | met? |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "context" in r["target"] or "large counts" in r["benchmark"]:
            continue
        ref = r["reference"] if r["ratio"] in ("—", "") else f"{r['reference']} · {r['ratio']}"
        lines.append("| " + " | ".join(esc(x) for x in (r["benchmark"], r["workload"],
                                                         r["ours_warm"], ref, r["target"],
                                                         _yes(r["met"]))) + " |")
    return "\n".join(lines)


def write_readme_table(rows, generated, readme=README) -> None:
    """Replace the table between README's markers with :func:`readme_table` (a full CPU run
    into benchmarks/results only; other runs leave README alone)."""
    text = readme.read_text()
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        print(f"[run_all] {readme}: no table markers; README left as it is", flush=True)
        return
    body = (f"{TABLE_START}\n\n_Regenerated {generated[:10]} from benchmarks/results/summary.json._"
            f"\n\n{readme_table(rows)}\n\n")
    readme.write_text(text[:start] + body + text[end:])


# ---------------------------------------------------------------------------------------- main

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run into --out-dir")
    p.add_argument("--with-nuts", action="store_true", help="also run bench_nuts_ds.py (~15 min)")
    p.add_argument("--skip-crowd", action="store_true", help="do not run the crowd-kit benchmark")
    p.add_argument("--crowdkit-venv", default=None,
                   help="crowd-kit's virtual environment (default $CROWDKIT_VENV or "
                        "../crowdkit-venv)")
    p.add_argument("--only", default=None, help="comma-separated benchmark names to run")
    p.add_argument("--summarize-only", action="store_true",
                   help="run nothing: rebuild the summary and README's table from the committed "
                        "JSONs")
    p.add_argument("--device", choices=sorted(DEVICES), default="cpu",
                   help="platform of the bda_jax runs (JAX_PLATFORMS); results go to *_<device>.json "
                        "and SUMMARY_<device>.md (gpu needs a CUDA build of jaxlib)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where results, logs and the summary go (default: benchmarks/results; "
                        "--quick: $TMPDIR/bda_bench_quick)")
    args = p.parse_args(argv)

    spec = _spec()
    if args.only:
        unknown = set(args.only.split(",")) - set(spec)
        if unknown:
            p.error(f"unknown benchmark(s) {sorted(unknown)}; known: {sorted(spec)}")
    out_dir = args.out_dir or (Path(tempfile.gettempdir()) / "bda_bench_quick" if args.quick
                               else RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.gettempdir()) / "bda_bench_logs"      # not next to the results
    log_dir.mkdir(exist_ok=True)
    crowdkit_py, venv = _crowdkit_python(args.crowdkit_venv)
    mode = "quick" if args.quick else "full"
    generated = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    runs, rows = [], []
    for name, (jsons, full_argv, quick_argv, timeout) in spec.items():
        reason = None
        if args.summarize_only:
            reason = "not rerun (--summarize-only)"
        elif args.only and name not in args.only.split(","):
            reason = "not selected (--only)"
        elif name == "nuts" and not args.with_nuts:
            reason = "slow (~15 min): rerun with --with-nuts"
        elif name == "crowd_em" and args.skip_crowd:
            reason = "--skip-crowd"
        elif name == "crowd_em" and crowdkit_py is None:
            reason = f"crowd-kit's virtual environment not found at {venv}"
        elif args.quick and quick_argv is None:
            reason = "not part of --quick"
        if reason:
            print(f"[run_all] {name}: skipped ({reason}); summarizing the committed JSON",
                  flush=True)
            runs.append({"name": name, "ran": False, "reason": reason})
        else:
            print(f"[run_all] {name}: running ...", flush=True)
            rec = run_benchmark(name, quick_argv if args.quick else full_argv, out_dir, log_dir,
                                timeout, crowdkit_py, args.device)
            status = "ok" if rec["rc"] == 0 else f"FAILED (exit {rec['rc']}, see {rec['log']})"
            print(f"[run_all] {name}: {status} in {rec['seconds']:.0f} s", flush=True)
            runs.append(rec)
        ran_ok = runs[-1].get("ran") and runs[-1].get("rc") == 0
        for js in jsons:
            path = (out_dir if ran_ok else RESULTS) / _for_device(js, args.device)
            if not path.exists():
                print(f"[run_all] {name}: no {path}", flush=True)
                continue
            try:
                rows += summarize(name, path, ran_ok)
            except (KeyError, TypeError, ValueError) as err:
                print(f"[run_all] {name}: cannot summarize {path}: {err!r}", flush=True)

    summary = {"schema_version": SCHEMA_VERSION, "generated": generated, "mode": mode,
               "python": sys.version.split()[0], "loadavg_end": list(os.getloadavg()),
               "runs": runs, "rows": rows}
    summary["device"] = args.device
    tail = "" if args.device == "cpu" else f"_{args.device}"
    (out_dir / f"summary{tail}.json").write_text(json.dumps(summary, indent=1) + "\n")
    md = markdown(rows, runs, mode, generated, slowest_tests(out_dir))
    (out_dir / f"SUMMARY{tail}.md").write_text(md)
    print(md)
    print(f"wrote {out_dir / f'summary{tail}.json'} and {out_dir / f'SUMMARY{tail}.md'}")
    if out_dir == RESULTS and args.device == "cpu":
        write_readme_table(rows, generated)
        print(f"regenerated the performance table of {README}")
    return 1 if any(r.get("ran") and r.get("rc") for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
