"""Throughput of the one-coin BDA posterior kernel vs a SciPy reference and a streaming ceiling.

What is measured (all in one process, on JAX's default backend; the CPU by default):

* ``bda_jax``: :func:`bda_jax.onecoin_log_posterior` in float32 on a fixed, seeded workload of
  T = 1,000,000 tasks, I = 3 agents, K = 4 candidates with realistic small counts (each agent
  makes 1-3 informative moves: mostly positive endorsements -- proposals and concessions --
  and occasionally a challenge). The first call (trace + compile + run) is timed separately from
  the warm calls (median and min over ``--reps`` repetitions, each ended by
  ``block_until_ready``).
* ``scipy_reference``: the best straightforward vectorized NumPy/SciPy float64 evaluation of the
  same posterior, score[t, g] = sum_i betaln(alpha_i + c, beta_i + d) - (N - e) log(K - 1) with
  d = N - c, followed by a max-shifted log-softmax over K (median of ``--ref-reps`` runs). The
  maximum absolute difference between the two sets of probabilities is reported (expected
  below 1e-5).
* ``streaming_ceiling``: a jitted JAX function that reads the same three count tensors stored as
  int8 (N [T, I], e and c [T, I, K]), does only a linear combination per cell
  (w1 c + w2 (N - c) + w3 e summed over agents) and writes the normalized [T, K] log-softmax: the
  cost of one fused read of the inputs and one write of the output, i.e. what no kernel reading
  these counts can beat by much. Its sums over agents and candidates are unrolled, and it is
  timed in two spellings, log Z fused into the output (``streaming_ceiling_fused``) or
  materialized (``streaming_ceiling_barrier``, much faster at K = 10); ``streaming_ceiling`` is
  the faster of the two. The same arithmetic spelled with axis reductions is timed too
  (``streaming_naive``, context only). ``bench_kernels.py`` extends this to more shapes, the
  confusion kernel and a masked ceiling.
* ``large_counts``: the same comparison (bda_jax vs the SciPy reference) on a smaller workload
  (``--large-tasks``, default 100,000) whose counts exceed the kernel's lookup-table size
  (N up to ~10^6, near-tied candidates so that the posteriors are not all one-hot), which sends
  bda_jax down its float64 large-count path.

Ratios: ``speedup_vs_scipy`` = scipy median / bda_jax median; ``fraction_of_ceiling`` =
ceiling median / bda_jax median (1.0: bda_jax runs at the streaming ceiling).

Run (from the repository root)::

    python -m benchmarks.bench_onecoin                      # full size, writes the JSON below
    python -m benchmarks.bench_onecoin --tasks 100000 --out /tmp/onecoin.json   # a quick run

Results go to ``benchmarks/results/onecoin_cpu.json`` (schema_version 1) and a short summary is
printed. The workloads are deterministic (``--seed``); timings of course are not.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import scipy
from scipy.special import betaln

import bda_jax
from bda_jax._core.kernels import DEFAULT_TABLE_SIZE

SCHEMA_VERSION = 1
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "onecoin_cpu.json"

N_AGENTS = 3
N_CANDIDATES = 4
MU = (0.7, 0.6, 0.55)            # per-agent accuracy (prior mean of the one-coin Beta)
STRENGTH = 8.0                   # prior strength s: alpha = mu s, beta = (1 - mu) s
MAX_MOVES = 3                    # informative moves per agent per task: 1..MAX_MOVES
P_CHALLENGE = 0.2                # probability that a move is a challenge (negative endorsement)
LARGE_N_MAX = 1_000_000          # largest N in the large-count workload


# ------------------------------------------------------------------------------------- workloads

def pick_candidates(rng, gold, accuracy, want_gold, K):
    """Candidate per move: the gold one with probability ``accuracy`` if ``want_gold`` (else with
    probability 1 - accuracy), otherwise a uniformly chosen other candidate."""
    hit = rng.random(gold.shape) < np.where(want_gold, accuracy, 1.0 - accuracy)
    other = (gold + rng.integers(1, K, size=gold.shape)) % K
    return np.where(hit, gold, other)


def small_workload(T, seed, I=N_AGENTS, K=N_CANDIDATES):
    """Realistic small counts: every agent makes 1..MAX_MOVES informative moves per task.

    A move is a positive endorsement (propose / concede) of a candidate, or with probability
    P_CHALLENGE a challenge (rejection) of one; agent i endorses the task's hidden gold candidate
    with probability MU[i] and challenges a wrong one with probability MU[i]. Returns int32 N
    [T, I], e and c [T, I, K] with c = e + (rejections of the agent in the task - rejections of
    g), so that e <= c <= N and sum_g e <= N.
    """
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, K, size=(T, 1, 1))
    n_moves = rng.integers(1, MAX_MOVES + 1, size=(T, I))                       # N [T, I]
    shape = (T, I, MAX_MOVES)
    valid = np.arange(MAX_MOVES)[None, None, :] < n_moves[..., None]
    challenge = rng.random(shape) < P_CHALLENGE
    accuracy = np.asarray(MU)[None, :, None]
    cand = pick_candidates(rng, np.broadcast_to(gold, shape), accuracy, ~challenge, K)

    cell = (np.arange(T)[:, None, None] * I + np.arange(I)[None, :, None]) * K + cand
    pos, neg = valid & ~challenge, valid & challenge
    e = np.bincount(cell[pos], minlength=T * I * K).reshape(T, I, K)
    rej = np.bincount(cell[neg], minlength=T * I * K).reshape(T, I, K)
    c = e + rej.sum(-1, keepdims=True) - rej
    return n_moves.astype(np.int32), e.astype(np.int32), c.astype(np.int32)


def large_workload(T, seed, I=N_AGENTS, K=N_CANDIDATES, n_max=LARGE_N_MAX):
    """Counts above the lookup-table size: N log-uniform in [~table size, n_max], near-tied.

    Each agent's positive endorsements and rejections are spread almost evenly over the K
    candidates (a common base plus a perturbation of 0..3 per candidate), so log-odds between
    candidates are O(1)-O(10) while the individual log-Beta terms are ~1e6: the regime where
    float32 cancellation would fail and bda_jax uses its float64 path.
    """
    rng = np.random.default_rng(seed)
    lo, hi = np.log(DEFAULT_TABLE_SIZE / K), np.log((n_max - 8 * K) / K)
    per_cand = np.ceil(np.exp(rng.uniform(lo, hi, size=(T, I)))).astype(np.int64)  # per candidate
    base_rej = (per_cand * rng.uniform(0.0, 0.3, size=(T, I))).astype(np.int64)
    base_pos = per_cand - base_rej
    e = base_pos[..., None] + rng.integers(0, 4, size=(T, I, K))
    rej = base_rej[..., None] + rng.integers(0, 4, size=(T, I, K))
    N = e.sum(-1) + rej.sum(-1)
    c = e + rej.sum(-1, keepdims=True) - rej
    assert N.max() <= n_max and N.min() >= DEFAULT_TABLE_SIZE
    return N.astype(np.int32), e.astype(np.int32), c.astype(np.int32)


def priors(mu=MU, s=STRENGTH):
    mu = np.asarray(mu, np.float64)
    return mu * s, (1.0 - mu) * s


# ------------------------------------------------------------------------------------ methods

def scipy_log_posterior(N, e, c, alpha, beta):
    """Float64 NumPy/SciPy reference of Eq. (1)-(2): normalized log-posteriors [T, K]."""
    K = e.shape[-1]
    a = np.asarray(alpha, np.float64)[None, :, None]
    b = np.asarray(beta, np.float64)[None, :, None]
    c64 = c.astype(np.float64)
    d64 = N[..., None].astype(np.float64) - c64
    score = betaln(a + c64, b + d64).sum(axis=1)
    score -= (N[..., None] - e).sum(axis=1) * np.log(K - 1.0)
    score -= score.max(axis=-1, keepdims=True)
    score -= np.log(np.exp(score).sum(axis=-1, keepdims=True))
    return score


def _ceiling(N8, e8, c8, w, barrier):
    """Fused-read ceiling: one linear combination per cell of int8 counts, then log-softmax.

    score[t, g] = sum_i w1_i c + w2_i (N - c) + w3_i e; ``w`` is [3, I]. The agent sum and the
    candidate max / log-sum-exp are unrolled over the (static, small) I and K axes: XLA:CPU
    compiles a reduction over a short non-minor axis (``jnp.sum(axis=1)`` of [T, I, K]) or
    ``jax.nn.log_softmax`` over K = 4 into much slower loops (see :func:`streaming_naive`).
    """
    f = jnp.float32
    I, K = c8.shape[1], c8.shape[2]
    score = 0.0
    for i in range(I):
        n = N8[:, i].astype(f)[:, None]
        score = score + (w[0, i] - w[1, i]) * c8[:, i].astype(f) + w[1, i] * n \
            + w[2, i] * e8[:, i].astype(f)
    cols = [score[:, k] for k in range(K)]
    top = cols[0]
    for col in cols[1:]:
        top = jnp.maximum(top, col)
    log_z = top + jnp.log(sum(jnp.exp(col - top) for col in cols))
    if barrier:      # materialized: otherwise fused into, and recomputed for, every output cell
        log_z = jax.lax.optimization_barrier(log_z)
    return score - log_z[:, None]


@jax.jit
def streaming_ceiling(N8, e8, c8, w):
    """The ceiling with log Z fused into the output (see :func:`_ceiling`)."""
    return _ceiling(N8, e8, c8, w, False)


@jax.jit
def streaming_ceiling_barrier(N8, e8, c8, w):
    """The ceiling with log Z materialized (see :func:`_ceiling`)."""
    return _ceiling(N8, e8, c8, w, True)


@jax.jit
def streaming_naive(N8, e8, c8, w):
    """The same computation written with axis reductions (``sum(axis=1)``, ``log_softmax``):
    reported for context only, to show what the straightforward JAX spelling costs."""
    f = jnp.float32
    n = N8.astype(f)[..., None]
    c = c8.astype(f)
    e = e8.astype(f)
    w1, w2, w3 = (w[k][None, :, None] for k in range(3))
    score = jnp.sum(w1 * c + w2 * (n - c) + w3 * e, axis=1)
    return jax.nn.log_softmax(score, axis=-1)


# ------------------------------------------------------------------------------------- timing

def time_jax(fn, reps):
    """First call (trace + compile + run) and ``reps`` warm calls, each ended by
    ``block_until_ready``. Returns (timings dict, output of the first call)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    compile_s = time.perf_counter() - t0
    warm = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        warm.append(time.perf_counter() - t0)
    return {"compile_s": compile_s, "warm_median_s": statistics.median(warm),
            "warm_min_s": min(warm), "reps": reps}, out


def time_host(fn, reps):
    """``reps`` calls of a host (NumPy/SciPy) function: no compile step."""
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return {"compile_s": None, "warm_median_s": statistics.median(times),
            "warm_min_s": min(times), "reps": reps}, out


def with_throughput(timing, T):
    return {**timing, "tasks_per_s": T / timing["warm_median_s"]}


def agreement(log_p_bda, log_p_ref):
    p_bda = np.exp(np.asarray(log_p_bda, np.float64))
    p_ref = np.exp(log_p_ref)
    top2 = np.sort(log_p_ref, axis=-1)[:, -2:]
    untied = (top2[:, 1] - top2[:, 0]) > 1e-6
    return {"max_abs_diff_prob": float(np.abs(p_bda - p_ref).max()),
            "max_abs_diff_logprob_where_p_gt_1e-6": float(
                np.abs(np.asarray(log_p_bda, np.float64) - log_p_ref)[p_ref > 1e-6].max()),
            # exact ties (identical counts for two candidates) make argmax arbitrary: skip them
            "argmax_agree_fraction_untied": float(
                (np.asarray(log_p_bda).argmax(-1) == log_p_ref.argmax(-1))[untied].mean()),
            "tolerance_prob": 1e-5}


# --------------------------------------------------------------------------------------- main

def machine_info():
    dev = jax.devices()[0]
    return {"platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor(), "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "sched_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None,
            "jax": jax.__version__, "jaxlib": getattr(jax.lib, "__version__", None)
            or _jaxlib_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "bda_jax": bda_jax.__version__, "jax_backend": jax.default_backend(),
            "jax_device": str(dev), "jax_device_kind": dev.device_kind,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}


def _jaxlib_version():
    try:
        import jaxlib
        return jaxlib.__version__
    except Exception:          # pragma: no cover - informational only
        return None


def bench_small(T, seed, reps, ref_reps):
    alpha, beta = priors()
    N, e, c = small_workload(T, seed)
    counts = jax.tree.map(jnp.asarray, bda_jax.Counts.from_arrays(N=N, e=e, c=c))
    a32, b32 = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)

    bda_t, log_p = time_jax(lambda: bda_jax.onecoin_log_posterior(counts, a32, b32), reps)
    ref_t, log_p_ref = time_host(lambda: scipy_log_posterior(N, e, c, alpha, beta), ref_reps)

    mu = np.asarray(MU)
    w = jnp.asarray(np.stack([np.log(mu), np.log1p(-mu), np.full(N_AGENTS, np.log(3.0))]),
                    jnp.float32)
    N8, e8, c8 = (jnp.asarray(x.astype(np.int8)) for x in (N, e, c))
    fused_t, log_p_ceil = time_jax(lambda: streaming_ceiling(N8, e8, c8, w), reps)
    barrier_t, _ = time_jax(lambda: streaming_ceiling_barrier(N8, e8, c8, w), reps)
    ceil_t = min(fused_t, barrier_t, key=lambda t: t["warm_median_s"])
    naive_t, log_p_naive = time_jax(lambda: streaming_naive(N8, e8, c8, w), reps)
    ceil_naive_diff = float(np.abs(np.asarray(log_p_ceil) - np.asarray(log_p_naive)).max())

    workload = {"tasks": T, "agents": N_AGENTS, "candidates": N_CANDIDATES, "seed": seed,
                "mu": list(MU), "s": STRENGTH, "moves_per_agent": [1, MAX_MOVES],
                "p_challenge": P_CHALLENGE, "max_N": int(N.max()), "mean_N": float(N.mean()),
                "bda_dtype": "float32", "reference_dtype": "float64", "ceiling_input_dtype": "int8",
                "input_bytes_int32": int(N.nbytes + e.nbytes + c.nbytes),
                "input_bytes_int8": int(N8.nbytes + e8.nbytes + c8.nbytes)}
    methods = {"bda_jax": with_throughput(bda_t, T),
               "scipy_reference": with_throughput(ref_t, T),
               "streaming_ceiling": {**with_throughput(ceil_t, T),
                                     "spelling": "fused" if ceil_t is fused_t else "barrier"},
               "streaming_ceiling_fused": with_throughput(fused_t, T),
               "streaming_ceiling_barrier": with_throughput(barrier_t, T),
               "streaming_naive": with_throughput(naive_t, T)}
    ratios = {"speedup_vs_scipy": ref_t["warm_median_s"] / bda_t["warm_median_s"],
              "fraction_of_ceiling": ceil_t["warm_median_s"] / bda_t["warm_median_s"]}
    return {"workload": workload, "methods": methods, "ratios": ratios,
            "agreement": {**agreement(log_p, log_p_ref),
                          "ceiling_vs_naive_max_abs_diff_logprob": ceil_naive_diff}}


def bench_large(T, seed, reps, ref_reps):
    alpha, beta = priors()
    N, e, c = large_workload(T, seed)
    counts = jax.tree.map(jnp.asarray, bda_jax.Counts.from_arrays(N=N, e=e, c=c))
    a32, b32 = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)

    bda_t, log_p = time_jax(lambda: bda_jax.onecoin_log_posterior(counts, a32, b32), reps)
    ref_t, log_p_ref = time_host(lambda: scipy_log_posterior(N, e, c, alpha, beta), ref_reps)
    p_ref = np.exp(log_p_ref)
    workload = {"tasks": T, "agents": N_AGENTS, "candidates": N_CANDIDATES, "seed": seed,
                "mu": list(MU), "s": STRENGTH, "min_N": int(N.min()), "max_N": int(N.max()),
                "median_N": float(np.median(N)), "table_size": DEFAULT_TABLE_SIZE,
                "fraction_tasks_max_prob_below_0.99": float((p_ref.max(-1) < 0.99).mean()),
                "bda_dtype": "float32", "reference_dtype": "float64"}
    methods = {"bda_jax": with_throughput(bda_t, T),
               "scipy_reference": with_throughput(ref_t, T)}
    ratios = {"speedup_vs_scipy": ref_t["warm_median_s"] / bda_t["warm_median_s"]}
    return {"workload": workload, "methods": methods, "ratios": ratios,
            "agreement": agreement(log_p, log_p_ref)}


def summarize(res):
    s = res["small_counts"]
    m, r, a = s["methods"], s["ratios"], s["agreement"]
    w = s["workload"]
    lines = [f"one-coin BDA posterior, T={w['tasks']:,} I={w['agents']} K={w['candidates']} "
             f"on {res['machine']['jax_backend']} ({res['machine']['cpu_count']} cpus)"]

    def row(name, t):
        comp = "" if t["compile_s"] is None else f"  first call {t['compile_s']:.3f}s"
        return (f"  {name:<18} median {t['warm_median_s'] * 1e3:9.2f} ms  min "
                f"{t['warm_min_s'] * 1e3:9.2f} ms  {t['tasks_per_s'] / 1e6:8.2f} M tasks/s{comp}")

    lines += [row(k, v) for k, v in m.items()]
    lines.append(f"  speedup vs scipy {r['speedup_vs_scipy']:.1f}x, fraction of streaming "
                 f"ceiling {r['fraction_of_ceiling']:.2f}, max |dp| {a['max_abs_diff_prob']:.2e}")
    L = res["large_counts"]
    lw = L["workload"]
    lines.append(f"large counts, T={lw['tasks']:,}, N in [{lw['min_N']}, {lw['max_N']:,}]:")
    lines += [row(k, v) for k, v in L["methods"].items()]
    lines.append(f"  speedup vs scipy {L['ratios']['speedup_vs_scipy']:.2f}x, max |dp| "
                 f"{L['agreement']['max_abs_diff_prob']:.2e}")
    ok = all(x["agreement"]["max_abs_diff_prob"] < x["agreement"]["tolerance_prob"]
             for x in (s, L))
    lines.append("agreement: " + ("OK" if ok else "FAILED (max |dp| >= 1e-5)"))
    return "\n".join(lines), ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=1_000_000, help="tasks T (default 1,000,000)")
    p.add_argument("--large-tasks", type=int, default=100_000,
                   help="tasks of the large-count workload (default 100,000)")
    p.add_argument("--reps", type=int, default=10,
                   help="warm repetitions of the JAX methods (default 10, at least 7)")
    p.add_argument("--ref-reps", type=int, default=3,
                   help="repetitions of the SciPy reference (default 3, at least 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="JSON output path (default benchmarks/results/onecoin_cpu.json)")
    args = p.parse_args(argv)
    if args.reps < 7 or args.ref_reps < 3:
        p.error("--reps must be >= 7 and --ref-reps >= 3")
    if args.tasks < 1 or args.large_tasks < 1:
        p.error("--tasks and --large-tasks must be positive")

    res = {"schema_version": SCHEMA_VERSION,
           "benchmark": "onecoin_log_posterior",
           "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": machine_info(),
           "small_counts": bench_small(args.tasks, args.seed, args.reps, args.ref_reps),
           "large_counts": bench_large(args.large_tasks, args.seed + 1, args.reps, args.ref_reps)}
    text, ok = summarize(res)
    res["agreement_ok"] = ok

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(res, indent=2) + "\n")
    os.replace(tmp, args.out)
    print(text)
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
