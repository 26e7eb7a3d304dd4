"""Answer and id normalization (docs/trace-format.md): answers are compared after a normalizer.

The default first applies Unicode normalization NFKC (so the NFC and NFD spellings of ``é``,
fullwidth ``Ａ`` and ``A``, ``ﬁ`` and ``fi`` are one answer), then strips whitespace, casefolds,
unwraps ``\\boxed{...}`` and surrounding ``$``, and removes parentheses around a single-letter
option, so that ``625`` ≡ ``$\\boxed{625}$`` and ``A`` ≡ ``(A)`` ≡ `` a `` ≡ ``（Ａ）``. Any
``Callable[[str], str]`` can replace it. It is the one answer identity of the package: every
reader that compares answers (traces, the DASE files through :func:`bda_jax.datasets.
normalize_dase_answer`, which builds on it, broadcast logs, crowd label sets, council replies)
calls this function.

:func:`normalize_id` is the identity of agent ids: NFKC, then surrounding whitespace stripped
(case is kept: ``GPT`` and ``gpt`` are two agents).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Callable

__all__ = ["default_normalizer", "identity_normalizer", "memoized", "normalize_id", "nfkc",
           "Normalizer"]

Normalizer = Callable[[str], str]

#: Distinct strings a :func:`memoized` normalizer remembers before it starts afresh.
MEMO_SIZE = 1 << 16

_BOXED = re.compile(r"^\\boxed\s*\{(.*)\}$", re.DOTALL)
_PAREN_LETTER = re.compile(r"^[\(\[]\s*([a-z])\s*[\)\]]$|^([a-z])\s*[\)\.]$")


def nfkc(text: str) -> str:
    """Unicode normalization form NFKC of ``text`` (ASCII text is returned as it is: NFKC never
    changes it).

    >>> nfkc("Ｂ"), nfkc("e\\u0301") == "\\u00e9"
    ('B', True)
    """
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def normalize_id(value: str) -> str:
    """Canonical form of an agent id: NFKC, then surrounding whitespace stripped. Case and inner
    whitespace are kept. Two ids are one agent exactly when their canonical forms are equal.

    >>> normalize_id(" gemma "), normalize_id("ｇｅｍｍａ"), normalize_id("GEMMA")
    ('gemma', 'gemma', 'GEMMA')
    """
    return (value if value.isascii() else unicodedata.normalize("NFKC", value)).strip()


def default_normalizer(answer: str) -> str:
    """Canonical form of an answer string: NFKC, strip, peel ``$...$`` and ``\\boxed{...}``,
    casefold (and NFKC again: casefolding can leave a decomposed letter), ``(a)`` -> ``a``.

    An answer whose canonical form is ``""`` (blank, ``$$``, ``\\boxed{}``) carries no answer
    for every reader (docs/trace-format.md). The function is idempotent:
    ``default_normalizer(default_normalizer(x)) == default_normalizer(x)``.

    >>> default_normalizer(" $\\\\boxed{625}$ ") == default_normalizer("625")
    True
    >>> default_normalizer("(A)"), default_normalizer("b)"), default_normalizer("True")
    ('a', 'b', 'true')
    >>> default_normalizer("（Ａ）"), default_normalizer("Cafe\\u0301") == default_normalizer("café")
    ('a', True)
    """
    ascii_ = answer.isascii()          # NFKC never changes ASCII (and casefold keeps it ASCII)
    s = (answer if ascii_ else unicodedata.normalize("NFKC", answer)).strip()
    changed = True
    while changed:  # peel nested wrappers: $\boxed{ $x$ }$
        changed = False
        if len(s) >= 2 and s.startswith("$") and s.endswith("$"):
            s, changed = s.strip("$").strip(), True
        m = _BOXED.match(s)
        if m:
            s, changed = m.group(1).strip(), True
    s = s.casefold() if ascii_ else unicodedata.normalize("NFKC", s.casefold())
    m = _PAREN_LETTER.match(s)
    if m:
        s = m.group(1) or m.group(2)
    return s


def identity_normalizer(answer: str) -> str:
    """Compare answers exactly as written."""
    return answer


def memoized(normalizer: Normalizer, size: int = MEMO_SIZE) -> Normalizer:
    """``normalizer`` with a bounded cache (``size`` distinct strings, then cleared): answers
    repeat across tasks ("A", "True", ...), so most calls become one dict lookup. A normalizer
    is a pure function of its string (docs/trace-format.md), so the answers are unchanged.

    >>> calls = []
    >>> norm = memoized(lambda s: calls.append(s) or s.lower())
    >>> norm("A"), norm("A"), calls
    ('a', 'a', ['A'])
    """
    cache: dict[str, str] = {}

    def normalize(answer: str) -> str:
        try:
            return cache[answer]
        except KeyError:
            if len(cache) >= size:
                cache.clear()
            key = cache[answer] = normalizer(answer)
            return key

    return normalize
