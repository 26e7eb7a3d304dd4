"""Tasks sharded over devices (issue 10): the sharded kernels equal the single-device ones.

Forced host devices must be configured before JAX is imported, so each check runs in a fresh
interpreter: one process with 8 CPU devices, and two processes with 2 devices each joined by
``jax.distributed`` (gloo CPU collectives, coordinator on localhost), each reading its shard of
a trace file with ``tally_stream`` — the multi-host recipe of docs/scale.md.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bda_jax as bda
from bda_jax.simulate import simulate_council

ROOT = Path(__file__).resolve().parents[2]
ALPHA, BETA = [7.0, 6.0, 8.0], [3.0, 4.0, 2.0]
AGENTS = ["A1", "A2", "A3"]


def _env(devices: int) -> dict:
    return dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
                JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))


def _confusion(K: int) -> np.ndarray:
    P = np.full((3, K, K), 0.25 / (K - 1))
    for i, acc in enumerate((0.75, 0.6, 0.8)):
        P[i] = (1 - acc) / (K - 1)
        np.fill_diagonal(P[i], acc)
    return P


def _close(got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.exp(got), np.exp(ref), rtol=0, atol=1e-6)


EIGHT_DEVICES = r"""
import json, sys
import jax, numpy as np
import bda_jax as bda
from bda_jax.simulate import simulate_council
from bda_jax import (shard_counts, sharded_confusion_log_posterior,
                     sharded_onecoin_log_posterior, task_mesh)
alpha, beta, P = (np.array(x) for x in json.loads(sys.argv[1]))
counts = bda.tally(simulate_council(1, 3001, [0.7, 0.6, 0.8], n_candidates=(2, 4), n_rounds=3))
T, I, K = counts.shape
lp = np.log(np.random.default_rng(0).dirichlet(np.ones(K), size=T)).astype(np.float32)
out = {"devices": jax.device_count(), "mesh": task_mesh().devices.size}
sharded, n = shard_counts(counts)
out["placed_on"] = len(sharded.N.sharding.device_set)
out["padded_T"] = sharded.N.shape[0]
runs = {
    "onecoin": (lambda: bda.onecoin_log_posterior(counts, alpha, beta, 0.5, lp),
                lambda: sharded_onecoin_log_posterior(counts, alpha, beta, 0.5, lp)),
    "confusion": (lambda: bda.confusion_log_posterior(counts, P, 0.7, np.log([0.4, 0.3, 0.2, 0.1])),
                  lambda: sharded_confusion_log_posterior(counts, P, 0.7,
                                                          np.log([0.4, 0.3, 0.2, 0.1]))),
}
# counts beyond the lookup tables: the float64 host path (pure_callback) inside the shard_map
e = [[600, 390, 0, 0], [100, 0, 50, 0], [5, 0, 0, 0]]
c = [[600, 400, 0, 0], [100, 60, 50, 0], [5, 0, 0, 0]]
big = bda.Counts.from_arrays(N=np.tile([[1000, 200, 5]], (13, 1)), e=np.tile([e], (13, 1, 1)),
                             c=np.tile([c], (13, 1, 1)))
runs["large_counts"] = (lambda: bda.onecoin_log_posterior(big, alpha, beta),
                        lambda: sharded_onecoin_log_posterior(big, alpha, beta))
for name, (single, multi) in runs.items():
    ref, got = np.asarray(single()), np.asarray(multi())
    np.save(sys.argv[2] + f"/{name}_ref.npy", ref)
    np.save(sys.argv[2] + f"/{name}_got.npy", got)
full = sharded_onecoin_log_posterior(counts, alpha, beta, padded=True)
out["padded_shape"] = list(full.shape)
out["padded_devices"] = len(full.sharding.device_set)
print("RESULT " + json.dumps(out))
"""


def test_eight_forced_host_devices_match_one_device(tmp_path):
    args = json.dumps([ALPHA, BETA, _confusion(4).tolist()])
    proc = subprocess.run([sys.executable, "-c", EIGHT_DEVICES, args, str(tmp_path)],
                          env=_env(8), cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))[7:])
    assert out["devices"] == 8 and out["mesh"] == 8 and out["placed_on"] == 8
    assert out["padded_T"] == 3008 and out["padded_shape"] == [3008, 4]
    assert out["padded_devices"] == 8
    for name in ("onecoin", "confusion", "large_counts"):
        _close(np.load(tmp_path / f"{name}_got.npy"), np.load(tmp_path / f"{name}_ref.npy"))


WORKER = r"""
import json, sys
import jax, numpy as np
process_id, port, path, out_file = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
alpha, beta, P, agents = json.loads(sys.argv[5])
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2,
                           process_id=process_id, initialization_timeout=120)
import bda_jax as bda
from bda_jax import sharded_confusion_log_posterior, sharded_onecoin_log_posterior
counts = bda.tally_stream(path, agents=agents,
                          shard=(jax.process_index(), jax.process_count()))
lp = sharded_onecoin_log_posterior(counts, np.array(alpha), np.array(beta))
lq = sharded_confusion_log_posterior(counts, np.array(P), 0.7)
np.savez(out_file, task_ids=np.array(counts.task_ids), onecoin=np.asarray(lp),
         confusion=np.asarray(lq), devices=jax.device_count(),
         local_devices=jax.local_device_count(), processes=jax.process_count())
jax.distributed.shutdown()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_with_jax_distributed_match_one_process(tmp_path):
    """2 processes x 2 CPU devices, one global mesh; each process tallies its shard of the file
    (lines = process index mod 2) and gets back its own tasks' rows."""
    path = tmp_path / "traces.jsonl"
    bda.write_traces(simulate_council(2, 2001, [0.7, 0.6, 0.8], n_candidates=(2, 4),
                                      n_rounds=3), path)
    args = json.dumps([ALPHA, BETA, _confusion(4).tolist(), AGENTS])
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(i), str(port), str(path),
                               str(tmp_path / f"out{i}.npz"), args], env=_env(2), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    try:
        logs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, logs):
        assert p.returncode == 0, err[-4000:]

    counts = bda.tally(bda.read_traces(path), agents=AGENTS)
    ref = {"onecoin": np.asarray(bda.onecoin_log_posterior(counts, ALPHA, BETA)),
           "confusion": np.asarray(bda.confusion_log_posterior(counts, _confusion(4), 0.7))}
    row = {t: k for k, t in enumerate(counts.task_ids)}
    seen = []
    for i in range(2):
        got = np.load(tmp_path / f"out{i}.npz")
        assert (int(got["devices"]), int(got["local_devices"]), int(got["processes"])) == (4, 2, 2)
        rows = [row[t] for t in got["task_ids"]]
        seen += rows
        for name in ("onecoin", "confusion"):
            _close(got[name], ref[name][rows])
    assert sorted(seen) == list(range(counts.shape[0]))


def test_one_device_and_bad_inputs():
    import jax
    from bda_jax import sharded_confusion_log_posterior, sharded_onecoin_log_posterior
    counts = bda.tally(simulate_council(3, 37, [0.7, 0.6, 0.8], n_candidates=3))
    _close(sharded_onecoin_log_posterior(counts, ALPHA, BETA),
           bda.onecoin_log_posterior(counts, ALPHA, BETA))
    with pytest.raises(bda.DataError) as info:
        sharded_onecoin_log_posterior(counts, [1.0, -1.0, 1.0], BETA)
    assert info.value.field == "alpha"
    with pytest.raises(bda.DataError) as info:
        sharded_confusion_log_posterior(counts, _confusion(3), tau=-1.0)
    assert info.value.field == "tau"
    with pytest.raises(bda.DataError) as info:
        sharded_onecoin_log_posterior(counts, ALPHA, BETA, mesh=jax.make_mesh((1,), ("x",)))
    assert info.value.field == "mesh"
