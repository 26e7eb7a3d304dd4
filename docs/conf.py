"""Sphinx configuration of the bda_jax docs site (`make docs`; docs/architecture.md, "Docs site").

Sources: the Markdown pages of docs/ (MyST), the four notebooks of notebooks/ (copied into the
gitignored docs/notebooks/ by docs/_ext/bda_sphinx.py and executed by myst-nb), the API pages
docs/api/*.rst (the ``bda-api`` directive, docs/_ext/bda_api.py) and the CLI reference
docs/cli-reference.rst (the ``bda-cli`` directive over the Typer app, docs/_ext/bda_cli_ref.py). Offline: no intersphinx, nothing fetched.

``BDA_DOCS_EXECUTE`` picks myst-nb's execution mode: ``cache`` (the default: a notebook runs
only when its code changed, outputs kept in build/docs/.jupyter_cache) or ``off`` (`make
docs-fast`: the notebooks are shown without outputs).
"""
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))

import bda_jax  # noqa: E402  (after the path set-up)

project = "bda_jax"
author = "the bda_jax authors"
copyright = "the bda_jax authors; Apache-2.0"
release = version = bda_jax.__version__

extensions = [
    "myst_nb",                 # Markdown (MyST, it loads myst-parser) and the executed notebooks
    "sphinx.ext.autodoc",      # the API reference, from the docstrings
    "sphinx.ext.autosummary",  # the summary table of each API section
    "sphinx.ext.napoleon",     # the few Google-style "Args:" / "Returns:" docstrings
    "sphinx.ext.mathjax",
    "bda_sphinx",              # docs/_ext: the bda-api and bda-cli directives, the notebook copies
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "jupyter_execute", "**/.ipynb_checkpoints"]
# a single backtick in a docstring is code, as in the Markdown pages
default_role = "code"
# quotes and ellipses only: "--out" in a help text or docstring stays two hyphens
smartquotes_action = "qe"
nitpicky = False
suppress_warnings = []

# MyST: GitHub-style anchors for the pages' "#section" links, $...$ math in the notebooks
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath"]

# myst-nb: every notebook executed at build time (a failing cell fails the build), its outputs
# kept by jupyter-cache so an unchanged notebook is not run again
nb_execution_mode = os.environ.get("BDA_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(ROOT / "build" / "docs" / ".jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# autodoc: members in source order, signatures with their annotations
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "class"
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "sphinx_book_theme"
html_title = f"bda_jax {release}"
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_static_path = []
