"""Results files and reports: the ``bda demo`` main job, the ``bda evaluate`` results document
and the self-contained HTML report that renders either.

* ``run_demo`` (settings: ``demo_config``) runs the package end to end on bundled data (a real
  crowd set, a simulated council under attack, the dose-response and sleeper studies, the DASE
  excerpts) into ``results.json`` and ``index.html``, resumable from the cell cache
  ``CACHE_NAME`` in its folder; ``posterior_table`` is its first part, the one-coin posterior
  of a trace set under a shared prior ([BDA] Eqs. 1-3).
* ``evaluation_results`` evaluates arms one resumable cell at a time into the document of
  ``bda evaluate --out`` (kind ``EVALUATION_KIND``).
* ``load_results`` reads either results file (a regular file of at most ``RESULTS_MAX_BYTES``;
  ``evaluation_as_report`` converts an evaluation);
  ``validate_results`` checks the whole report schema (``SCHEMA_VERSION``, ``RESULTS_KIND``) and
  ``validate_evaluation`` the whole ``bda evaluate`` document, each naming the first bad field
  in an ``ArtifactError``; ``render_report`` validates, then writes ``index.html`` (user strings
  HTML-escaped, and drawn as plain text in the figures, never as mathtext).
* ``FigureRenderer`` draws the report's figures (the kinds of ``FIGURES``) in background
  processes (``auto_figure_workers``) while the caller goes on; ``queue_figures`` hands it the
  figures of a results dict or of one section, so ``bda demo`` draws each section's figures
  while the next sections compute.
* ``confidence_flags`` (``CONSTANT_CONFIDENCE_SPREAD``): whether an arm's confidences are
  constant or nearly so; a flagged arm is never ranked on calibration.
* ``strict_json``: the one converter of results to strict JSON values. The files are written
  with ``bda_jax.atomic_write`` and resumed through ``bda_jax.CellCache``.
"""
from ._demo import CACHE_NAME, demo_config, run_demo
from ._evaluation import (CONSTANT_CONFIDENCE_SPREAD, EVALUATION_KIND, confidence_flags,
                          evaluation_results)
from ._figures import FIGURES, FigureRenderer, auto_figure_workers
from ._html import (RESULTS_MAX_BYTES, evaluation_as_report, load_results, queue_figures,
                    render_report)
from ._validate import RESULTS_KIND, SCHEMA_VERSION, validate_evaluation, validate_results
from ._json import strict_json
from ._table import posterior_table

__all__ = ["CACHE_NAME", "CONSTANT_CONFIDENCE_SPREAD", "EVALUATION_KIND", "confidence_flags", "RESULTS_KIND", "RESULTS_MAX_BYTES", "SCHEMA_VERSION",
           "demo_config", "evaluation_as_report", "evaluation_results", "FIGURES",
           "FigureRenderer", "auto_figure_workers", "queue_figures",
           "load_results", "posterior_table", "render_report",
           "run_demo", "strict_json", "validate_evaluation", "validate_results"]
