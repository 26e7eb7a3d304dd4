# Quick start: `make demo` runs the main job on bundled data; `make test` runs the test suite.
# Both create .venv (Python >= 3.12; the repo's .python-version selects pyenv's 3.12.1).
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed

# The first make: about 2 minutes here (pip downloads JAX, SciPy, pandas, ... and prints each one).
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "bda_jax needs Python >= 3.12, got " + sys.version.split()[0] + " (set PYTHON=python3.12)")'
	@echo "==> [1/3] creating $(VENV) with $$($(PYTHON) --version)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] upgrading pip"
	$(VENV)/bin/python -m pip install -q --upgrade pip
	@echo "==> [3/3] installing bda_jax (editable) with its test and council dependencies (about 2 minutes on first use)"
	$(VENV)/bin/python -m pip install -e ".[test,council]"
	touch $(STAMP)
	@echo "==> $(VENV) ready"

.PHONY: demo test lint typecheck wheel-check bench fuzz docs docs-fast
demo: $(STAMP)
	$(VENV)/bin/bda demo

# pytest-xdist: one worker per core (PYTEST_XDIST_AUTO_NUM_WORKERS=N sets the number); each file,
# or group of files (XDIST_GROUPS in tests/conftest.py), runs on one worker. PYTEST_ARGS: more pytest
# options, e.g. PYTEST_ARGS="--durations=20" (.ci/run) or PYTEST_ARGS="-m slow" (the long studies)
test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -n auto --dist loadscope $(PYTEST_ARGS) bda_jax models tests

# ruff's short rule set ([tool.ruff] in pyproject.toml); the layering contract is a test
lint: $(STAMP)
	$(VENV)/bin/ruff check bda_jax models tests benchmarks

# mypy over the public surface ([tool.mypy] in pyproject.toml: every public __init__ and the
# NumPyro model modules), then README's Python blocks as a user's code against it
README_PY := build/readme-blocks
typecheck: $(STAMP)
	$(VENV)/bin/mypy
	@rm -rf $(README_PY)
	@$(VENV)/bin/python tests/integration/test_readme.py --write-python $(README_PY) >/dev/null
	$(VENV)/bin/mypy $(README_PY)

# the wheel as a user gets it: built, installed (not editable) in a fresh virtual environment,
# `bda --version` and `bda demo --quick` run from another folder, README's Python blocks
# type-checked against the installed package (its py.typed); .ci/run runs it
wheel-check: $(STAMP)
	bash .ci/wheel-check.sh

# every benchmark -> benchmarks/results/*.json + summary.json + SUMMARY.md (docs/performance.md);
# BENCH_ARGS=--quick for a smoke run, --with-nuts to include the ~15 min NUTS benchmark
bench: $(STAMP)
	$(VENV)/bin/python -m benchmarks $(BENCH_ARGS)

fuzz: $(STAMP)
	$(VENV)/bin/python -m benchmarks.fuzz_traces --mutations 100000

# the docs site (docs/conf.py, docs/architecture.md "Docs site") -> build/docs/html, offline, every
# warning an error. The four notebooks run at build time (a failing cell fails the build); their
# outputs are kept in a jupyter-cache (build/docs/.jupyter_cache), so a notebook whose code did not
# change is not run again. docs-fast: the smoke build, the notebooks shown without running them
# (build/docs/html-fast). SPHINXOPTS: more sphinx-build options, e.g. SPHINXOPTS="-n" (nitpicky)
DOCS_STAMP := $(VENV)/.docs-installed
SPHINXOPTS ?=
SPHINX := $(VENV)/bin/sphinx-build -W --keep-going -b html $(SPHINXOPTS)
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(VENV)/bin/python -m pip install -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(SPHINX) -d build/docs/doctrees docs build/docs/html

docs-fast: $(DOCS_STAMP)
	BDA_DOCS_EXECUTE=off $(SPHINX) -d build/docs/doctrees-fast docs build/docs/html-fast
