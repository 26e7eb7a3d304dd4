"""Independent references and fixtures shared by the tests (never the code under test)."""
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "bda_jax" / "data" / "example_council.jsonl"
SHARED_DATA = REPO.parent / "shared" / "data"


def onecoin_reference(N, e, c, K, alpha, beta, tau=1.0, log_prior=None, factor=True):
    """Independent float64 NumPy/SciPy evaluation of [BDA] Eqs. (1)-(2), full Beta functions.

    N [T,I], e, c [T,I,Kmax], K [T]; returns normalized log-posteriors [T, Kmax] (-inf padding).
    """
    from scipy.special import betaln, logsumexp
    N, e, c = (np.asarray(x, np.float64) for x in (N, e, c))
    K = np.asarray(K)
    a = np.asarray(alpha, np.float64)[None, :, None]
    b = np.asarray(beta, np.float64)[None, :, None]
    d = N[..., None] - c
    log_f = betaln(a + c, b + d) - betaln(a, b)
    if factor:
        log_f = log_f - (N[..., None] - e) * np.log(np.maximum(K - 1, 1))[:, None, None]
    score = tau * log_f.sum(1)
    if log_prior is not None:
        score = score + log_prior
    mask = np.arange(e.shape[2])[None, :] < K[:, None]
    score = np.where(mask, score, -np.inf)
    return score - logsumexp(score, axis=1, keepdims=True)


def random_counts(rng, T, I, K, max_moves=6, ragged=True):
    """Random consistent count tensors: each agent makes positive endorsements and rejections."""
    Kt = rng.integers(2, K + 1, T) if ragged else np.full(T, K)
    mask = np.arange(K)[None, :] < Kt[:, None]
    moves = rng.integers(0, max_moves + 1, (T, I))
    pos_frac = rng.random((T, I))
    e = np.zeros((T, I, K), np.int64)
    rej = np.zeros((T, I, K), np.int64)
    for t in range(T):
        p = np.where(mask[t], 1.0, 0.0) / Kt[t]
        for i in range(I):
            n_pos = rng.binomial(moves[t, i], pos_frac[t, i])
            e[t, i] = rng.multinomial(n_pos, p)
            rej[t, i] = rng.multinomial(moves[t, i] - n_pos, p)
    c = e + (rej.sum(-1, keepdims=True) - rej) * mask[:, None, :]
    return moves, e, c, Kt


def simulate_labels(rng, T, W, K, prior, label_dist, p_answer=1.0):
    """Crowd labels in the sparse layout (task, worker, label arrays) and the truth [T]: truth
    ~ prior; worker w answers task t with probability p_answer, label ~ label_dist(w, t, z)."""
    truth = rng.choice(K, size=T, p=prior)
    task, worker, label = [], [], []
    for t in range(T):
        for w in range(W):
            if rng.random() < p_answer:
                task.append(t); worker.append(w)
                label.append(rng.choice(K, p=label_dist(w, t, truth[t])))
    return np.array(task), np.array(worker), np.array(label), truth


def traces_without_run_extras(path) -> list[dict]:
    """A trace file's tasks as JSON, without the per-move fields that differ between two runs of
    the same council (``latency_s``, ``cache_hit``): what "identical traces" means for a rerun."""
    import bda_jax
    return [{**t.to_json(), "moves": [{k: v for k, v in m.to_json().items()
                                       if k not in ("latency_s", "cache_hit")} for m in t.moves]}
            for t in bda_jax.read_traces(path)]


def load_fuzz_module():
    """benchmarks/fuzz_traces.py as a module (the mutation generator the fuzz tests share)."""
    import importlib.util
    import sys
    name = "_bda_fuzz_traces"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "fuzz_traces.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def outcome(run, label="ok"):
    """(label, value, warnings) or ("error", type, message, file, line, task, move, field) of a
    call, so that two readers' results, errors and warnings can be compared whole. JAX's notice
    of a compilation-cache entry another test process was still writing is not the reader's."""
    import warnings
    import bda_jax as bda
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = run()
        except bda.BdaError as err:
            return ("error", type(err).__name__, str(err), err.file, err.line, err.task_id,
                    err.move_id, err.field)
    return (label, value, [str(w.message) for w in caught
                           if "persistent compilation cache" not in str(w.message)])
