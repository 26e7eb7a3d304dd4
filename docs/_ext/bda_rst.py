"""reStructuredText repairs for text the docs site did not write as reST: the CLI's help texts
(:func:`escape_help`) and the ``|x|`` of the docstrings' math (:func:`escape_bars`).

This module imports no Sphinx (``tests/integration/test_docs_site.py`` tests it directly).
"""
from __future__ import annotations

import re

#: an inline literal or code span (``x`` or `x`): left as it is by every escape
CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
#: ``|x|`` as reST reads it, a substitution reference: in a docstring it is always an absolute
#: value or a norm (``|acc_m - conf_m|``), never a substitution
_BARS = re.compile(r"(?<![\w|\\])\|(?=\S)([^|]*?\S)\|(?![\w|])")


def escape_help(text: str) -> str:
    """A help text as reST: code spans stay code; elsewhere ``\\``, ``*``, ``|`` and a word-final
    ``_`` (``safe_DASE_*.jsonl``), which reST reads as markup, are escaped."""
    out = []
    for i, part in enumerate(CODE_SPAN.split(text)):
        if i % 2:
            out.append(part)
        else:
            part = part.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|")
            out.append(re.sub(r"(?<=\w)_(?!\w)", r"\\_", part))
    return "".join(out)


def escape_bars(lines: list[str]) -> None:
    """Escape ``|x|`` in the prose of docstring ``lines``, in place; inline literals, doctest lines
    and the literal block after a ``::`` are left alone."""
    literal_indent = None          # the indent of the paragraph that opened a ``::`` block
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        if stripped.startswith((">>>", "...")):
            continue
        parts = CODE_SPAN.split(line)
        lines[i] = "".join(p if k % 2 else _BARS.sub(r"\\|\1\\|", p) for k, p in enumerate(parts))
        if stripped.endswith("::"):
            literal_indent = indent
