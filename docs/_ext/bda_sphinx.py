"""The Sphinx extension of the docs site (docs/conf.py loads it).

- ``bda-api`` directive: ``.. bda-api:: bda_jax.audit`` writes the package's whole API reference
  (:func:`bda_api.api_rst`: every ``__all__`` name, grouped by defining module) and parses it in
  place; the page is rebuilt when any defining module's source changes.
- ``bda-cli`` directive: the CLI reference (:func:`bda_cli_ref.cli_rst`), from the Typer app.
- The notebooks: at ``config-inited`` the notebooks of ``notebooks/`` are copied into the
  gitignored ``docs/notebooks/`` (:func:`bda_notebooks.copy_notebooks`), where myst-nb runs them.
- Cross-references: a short name that Python's scoping misses links to the one public object
  of that name (:func:`resolve_short_name`).
- Markdown pages: a raw HTML anchor (``<a id="x"></a>``) is a link target (:func:`html_anchors`).
- Autodoc: ``|x|`` (an absolute value in the docstrings' math) is not a substitution
  (:func:`bda_rst.escape_bars`); a named tuple's fields keep their own comments but not Python's generated
  "Alias for field number N" text.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode
from sphinx.util.parsing import nested_parse_to_nodes

import bda_api
import bda_cli_ref
import bda_notebooks
import bda_rst

ROOT = Path(__file__).resolve().parents[2]


class BdaApi(SphinxDirective):
    """``.. bda-api:: PACKAGE``: the API reference of one public package (docs/api/)."""
    required_arguments = 1

    def run(self):
        package = self.arguments[0]
        if package not in bda_api.public_packages():
            raise self.error(f"{package} is not a public package of bda_jax: "
                             f"{', '.join(bda_api.public_packages())}")
        for entry in bda_api.entries(package):
            for name in {entry.home, entry.qualname.rpartition(".")[0]}:
                path = getattr(importlib.import_module(name), "__file__", None)
                if path:
                    self.env.note_dependency(path)
        text = bda_api.api_rst(package)
        return nested_parse_to_nodes(self.state, text, source=f"<bda-api {package}>",
                                     allow_section_headings=True)


class BdaCli(SphinxDirective):
    """``.. bda-cli::``: every command, argument and option of ``bda`` (docs/cli-reference.rst),
    from the Typer app (:func:`bda_cli_ref.cli_rst`); rebuilt when a command module changes."""

    def run(self):
        for path in sorted((ROOT / "bda_jax" / "cli").glob("*.py")):
            self.env.note_dependency(str(path))
        return nested_parse_to_nodes(self.state, bda_cli_ref.cli_rst(), source="<bda-cli>",
                                     allow_section_headings=True)


def skip_field_aliases(app, what, name, obj, skip, options):
    """Skip a named tuple field whose only doc is Python's "Alias for field number N"."""
    doc = getattr(obj, "__doc__", None) or ""
    if isinstance(obj, property) or type(obj).__name__ == "_tuplegetter":
        if doc.startswith("Alias for field number"):
            return True
    return None


def escape_docstring_bars(app, what, name, obj, options, lines) -> None:
    """``autodoc-process-docstring``: :func:`bda_rst.escape_bars`."""
    bda_rst.escape_bars(lines)


_HTML_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"\s*>')


def html_anchors(app: Sphinx, doctree) -> None:
    """A raw HTML anchor in a Markdown page (``<a id="selection"></a>``, GitHub's way to name a
    spot that is not a heading) is a link target on the site too: ``[Selection](#selection)``
    resolves. The anchor is already in the HTML; only the label is registered."""
    std = app.env.domains.standard_domain
    for raw in doctree.findall(nodes.raw):
        if "html" not in raw.get("format", "").split():
            continue
        for name in _HTML_ANCHOR.findall(raw.astext()):
            std.anonlabels[name] = (app.env.docname, name)
            std.labels[name] = (app.env.docname, name, name)


def resolve_short_name(app: Sphinx, env, node, contnode):
    """A docstring's ``:class:`Counts``` read in a subpackage (``bda_jax.datasets``) does not find
    ``bda_jax.Counts`` by Python's scoping; link it when exactly one public, fully documented
    object of the site has that last name. Anything else stays unresolved (plain text)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    last = target.rsplit(".", 1)[-1]
    objects = env.domains.python_domain.objects
    found = [name for name, obj in objects.items()
             if name.rsplit(".", 1)[-1] == last and not obj.aliased
             and not any(part.startswith("_") for part in name.split(".")[:-1])]
    if len(found) != 1:
        return None
    obj = objects[found[0]]
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, found[0])


def setup(app: Sphinx) -> dict:
    app.add_directive("bda-api", BdaApi)
    app.add_directive("bda-cli", BdaCli)
    app.connect("config-inited", lambda app, config: bda_notebooks.copy_notebooks())
    app.connect("autodoc-skip-member", skip_field_aliases)
    app.connect("autodoc-process-docstring", escape_docstring_bars)
    app.connect("doctree-read", html_anchors)
    app.connect("missing-reference", resolve_short_name)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
