"""Answer normalization (docs/trace-format.md): answers are compared after a normalizer.

The default strips whitespace, casefolds, unwraps ``\\boxed{...}`` and surrounding ``$``, and
removes parentheses around a single-letter option, so that ``625`` ≡ ``$\\boxed{625}$`` and
``A`` ≡ ``(A)`` ≡ `` a ``. Any ``Callable[[str], str]`` can replace it.
"""
from __future__ import annotations

import re
from typing import Callable

__all__ = ["default_normalizer", "identity_normalizer", "Normalizer"]

Normalizer = Callable[[str], str]

_BOXED = re.compile(r"^\\boxed\s*\{(.*)\}$", re.DOTALL)
_PAREN_LETTER = re.compile(r"^[\(\[]\s*([a-z])\s*[\)\]]$|^([a-z])\s*[\)\.]$")


def default_normalizer(answer: str) -> str:
    """Canonical form of an answer string.

    >>> default_normalizer(" $\\\\boxed{625}$ ") == default_normalizer("625")
    True
    >>> default_normalizer("(A)"), default_normalizer("b)"), default_normalizer("True")
    ('a', 'b', 'true')
    """
    s = answer.strip()
    changed = True
    while changed:  # peel nested wrappers: $\boxed{ $x$ }$
        changed = False
        if len(s) >= 2 and s.startswith("$") and s.endswith("$"):
            s, changed = s.strip("$").strip(), True
        m = _BOXED.match(s)
        if m:
            s, changed = m.group(1).strip(), True
    s = s.casefold()
    m = _PAREN_LETTER.match(s)
    if m:
        s = m.group(1) or m.group(2)
    return s


def identity_normalizer(answer: str) -> str:
    """Compare answers exactly as written."""
    return answer
