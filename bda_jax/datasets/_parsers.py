"""Candidate-restricted answer parsers for free-text LLM responses ([BDA] Appendix D.3).

:func:`parse_number` reads a numeric answer (GSM8K, arithmetic), :func:`parse_letter` an option
letter (MMLU, GPQA), :func:`parse_label` a word label (True/False, yes/no/maybe);
:func:`extract_answer` picks the parser a task's candidates call for. All return :class:`Parsed` (the answer, ``None`` when nothing committed was
found, and the rule that fired). :func:`canonical_number` is the exact canonical form numbers are
compared in. How well a file parsed is the :class:`bda_jax.datasets.ParseReport`.
"""
from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from typing import Mapping, NamedTuple, Sequence

from .._core.normalize import nfkc

__all__ = ["Parsed", "canonical_number", "extract_answer", "parse_label", "parse_letter",
           "parse_number"]


class Parsed(NamedTuple):
    """An extracted answer (``None`` when nothing committed was found) and the rule that fired."""

    answer: str | None
    rule: str | None


_NUM = (r"(?<![\w.])[-\u2212]?\$?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+(?![\d.]))?"
        r"|(?<![\w.])[-\u2212]?\.\d+")
_NUM_RE = re.compile(_NUM)
_FRAC_RE = re.compile(r"^\s*([-\u2212]?)\s*\\[dt]?frac\s*\{\s*([-\u2212]?[\d.,]+)\s*\}\s*"
                      r"\{\s*([\d.,]+)\s*\}")
_ANSWER_IS_NUM = re.compile(r"(?i:answer|result|total)[ \t]*(?:is|=|:|would be|will be)[ \t]*:?"
                            r"[ \t]*(?:\*\*)?[ \t]*(?:approximately[ \t]+)?(" + _NUM + r")"
                            r"(?![\d.,]*\d)(?!\s*[-+*/\u00d7=^]\s*[\d(])")  # a whole number, not
                                                                        # an expression's first


def canonical_number(text: str) -> str | None:
    """Canonical string of a number literal: commas and ``$`` dropped, exact value kept.

    Integers print as integers, terminating decimals in plain decimal notation without trailing
    zeros, other fractions as ``p/q`` in lowest terms, so ``0.5 == 1/2`` and ``18.00 == 18``.

    >>> canonical_number("1,234"), canonical_number("-18.50"), canonical_number("6/4")
    ('1234', '-18.5', '1.5')
    >>> canonical_number("2/3"), canonical_number("abc")
    ('2/3', None)
    """
    s = text.replace("\u2212", "-").replace("$", "").replace(",", "").replace(" ", "")
    try:
        value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        out = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
        return out.rstrip("0").rstrip(".") if "." in out else out
    return f"{value.numerator}/{value.denominator}"


def _boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` (balanced braces), ordered by where they start."""
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, start = 0, m.end() - 1
        for pos in range(start, len(text)):
            ch = text[pos]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    out.append(text[start + 1:pos])
                    break
    return out


def _number_in(fragment: str) -> str | None:
    frac = _FRAC_RE.match(fragment.replace("\\left", "").replace("\\right", ""))
    if frac:
        num, den = canonical_number(frac.group(2)), canonical_number(frac.group(3))
        if num is not None and den is not None and Fraction(den) != 0:
            value = Fraction(num) / Fraction(den) * (-1 if frac.group(1) else 1)
            return canonical_number(str(value))
    nums = _NUM_RE.findall(fragment.replace("{,}", ","))
    for raw in reversed(nums):
        value = canonical_number(raw)
        if value is not None:
            return value
    return None


def parse_number(text: str) -> Parsed:
    """Extract a numeric answer from free text (GSM8K, arithmetic).

    Rules, first that yields a number wins: the last ``\\boxed{...}`` (the last number inside it,
    or a ``\\frac{p}{q}`` filling it); a ``#### n`` line; "answer/result/total is n" (last
    occurrence); the last number in the text. Commas, ``$`` and trailing zeros are dropped, a
    leading minus is kept (a minus right after a digit is subtraction, not a sign), fractions
    are exact (:func:`canonical_number`).

    >>> parse_number("so she earns $\\\\boxed{1,234}$ dollars.")
    Parsed(answer='1234', rule='boxed')
    >>> parse_number("6 + 3 - 10 = -1. The result is -1.")
    Parsed(answer='-1', rule='answer_is')
    >>> parse_number("The final value: 552-70 = 482").answer
    '482'
    >>> parse_number("no digits here")
    Parsed(answer=None, rule=None)
    """
    if not isinstance(text, str):
        return Parsed(None, None)
    for content in reversed(_boxed(text)):
        value = _number_in(content)
        if value is not None:
            return Parsed(value, "boxed")
    hashes = re.findall(r"####\s*(" + _NUM + ")", text)
    if hashes and canonical_number(hashes[-1]) is not None:
        return Parsed(canonical_number(hashes[-1]), "hashes")
    said = _ANSWER_IS_NUM.findall(text)
    if said and canonical_number(said[-1]) is not None:
        return Parsed(canonical_number(said[-1]), "answer_is")
    value = _number_in(text)
    if value is not None:
        return Parsed(value, "last_number")
    return Parsed(None, None)


def _letter_rules(letters: str):
    L = f"[{letters}]"
    return [
        # the requested format: the response ends with the option letter, e.g. "(B)" or "**B**"
        ("final", re.compile(rf"[(\[]\s*({L})\s*[)\]][ \t*_.!]*$|(?:^|\n)[ \t>#]*"
                             rf"(?:(?i:answer)\s*:?\s*)?[*_]*\s*({L})\s*[*_]*[ \t.!]*$")),
        ("answer_is", re.compile(rf"(?i:answer|option|choice)(?:\s+\w+){{0,2}}?\s*"
                                 rf"(?:is|:|would be|=)\s*:?\s*(?:\*\*|__)?\s*"
                                 rf"(?i:option\s+|choice\s+)?[(\[]?({L})\b(?![-'])")),
        ("bold", re.compile(rf"\*\*\s*(?i:option\s+|choice\s+)?[(\[]?\s*({L})\s*[)\]]?"
                            rf"(?:[\s.:)][^*\n]*)?\*\*")),
        ("line_start", re.compile(rf"(?m)^[ \t>*_#]*\(\s*({L})\s*\)")),
    ]


def parse_letter(text: str, letters: Sequence[str] = "ABCD",
                 options: Mapping[str, str] | None = None) -> Parsed:
    """Extract a committed option letter, restricted to ``letters`` (MMLU, GPQA).

    Rules, first that fires wins: the response *ends* with the option ("(B)", "**B**",
    "Answer: B"); "answer/option/choice is (B)" (last occurrence); a bolded option ("**(B) ...**",
    "**Option B**", last occurrence); the last line that starts with "(B)"; a quoted option text
    ("B) <text of option B>", or the literal placeholder "(X) <text of option B>" that some models
    copy from the prompt) when ``options`` maps letters to their texts; finally a parenthesized
    letter, but only if exactly one distinct letter is parenthesized in the whole response. A bare
    capital letter in prose is never read (that is the sub-chance artifact of Appendix D.3).

    >>> parse_letter("Long reasoning about (A) and (C)... so the answer is **(B)**.").answer
    'B'
    >>> parse_letter("Therefore the answer is B, not A.")
    Parsed(answer='B', rule='answer_is')
    >>> parse_letter("(X) I cannot decide between (A) and (C) here.")
    Parsed(answer=None, rule=None)
    """
    if not isinstance(text, str):
        return Parsed(None, None)
    letters = "".join(letters).upper()
    body = text.strip()
    for name, pattern in _letter_rules(letters):
        found = [g if isinstance(g, str) else "".join(g) for g in pattern.findall(body)]
        if found:
            return Parsed(found[-1].upper(), name)
    if options:
        hits = set()
        for letter, option in options.items():
            option = option.strip().rstrip(".,").strip()
            if letter in letters and len(option) >= 3 and re.search(
                    rf"(?:(?<![A-Za-z]){re.escape(letter)}\)|\(X\))\s*{re.escape(option)}",
                    body, re.I):
                hits.add(letter)
        if len(hits) == 1:
            return Parsed(hits.pop(), "option_text")
    paren = set(re.findall(rf"\(\s*([{letters}])\s*\)", body))
    if len(paren) == 1:
        return Parsed(paren.pop(), "only_paren")
    return Parsed(None, None)


def parse_label(text: str, labels: Sequence[str]) -> Parsed:
    """Extract a committed word label, restricted to ``labels`` (e.g. True/False, yes/no/maybe),
    compared after NFKC and case-insensitively (fullwidth ``ＴＲＵＥ`` is ``True``); the label is
    returned as spelled in ``labels``.

    Rules, first that fires wins: the response *ends* with a label ("... **False**.", "Answer:
    yes"); "answer is <label>" (last occurrence); a bolded label (last occurrence); finally a
    label that is the only one of ``labels`` appearing as a whole word anywhere in the response.
    Nothing else is read (a "no" in prose next to a "yes" commits to neither).

    >>> parse_label("It is plainly correct, so the answer is TRUE.", ["True", "False"])
    Parsed(answer='True', rule='final')
    >>> parse_label("No doubt, yes and no are both defensible here.", ["yes", "no", "maybe"])
    Parsed(answer=None, rule=None)
    """
    if not isinstance(text, str) or not labels:
        return Parsed(None, None)
    by_key = {nfkc(str(lab)).strip().casefold(): str(lab) for lab in labels}
    by_key.pop("", None)                  # an empty label can never be committed to
    if not by_key:
        return Parsed(None, None)
    alt = "|".join(sorted((re.escape(k) for k in by_key), key=len, reverse=True))
    word = rf"(?<![\w-])({alt})(?![\w-])"
    body = nfkc(text).strip()

    def label_of(found: str) -> str:
        """The label a case-insensitive match stands for (``re.I`` also matches letters whose
        casefold differs, e.g. dotless ``ı`` for ``i``)."""
        key = found.casefold()
        if key in by_key:
            return by_key[key]
        return next(lab for k, lab in by_key.items() if re.fullmatch(re.escape(k), found, re.I))

    rules = [
        ("final", re.compile(rf"{word}[\s*_\"'.!)\]]*$", re.I)),
        ("answer_is", re.compile(rf"(?i:answer|verdict|label)\s*(?:is|:|would be|=)\s*:?\s*"
                                 rf"(?:\*\*|__|[\"'(])?\s*{word}", re.I)),
        ("bold", re.compile(rf"\*\*\s*{word}\s*[.!]?\s*\*\*", re.I)),
    ]
    for name, pattern in rules:
        found = pattern.findall(body)
        if found:
            return Parsed(label_of(found[-1]), name)
    seen = {label_of(m) for m in re.findall(word, body, re.I)}
    if len(seen) == 1:
        return Parsed(seen.pop(), "only_label")
    return Parsed(None, None)


def extract_answer(text: str, candidates: Sequence[str]) -> Parsed:
    """The candidate a free-text reply commits to, read by the parser its candidates call for:
    single option letters -> :func:`parse_letter`; numbers -> :func:`parse_number`, kept only
    when it equals a candidate (compared by :func:`canonical_number`); anything else (word labels,
    short phrases) -> :func:`parse_label`. The answer is the candidate as spelled in
    ``candidates``, or ``None`` ([BDA] Appendix D.3: nothing is guessed).

    >>> extract_answer("Adding them gives 42.", ["41", "42", "43"])
    Parsed(answer='42', rule='last_number')
    >>> extract_answer("I'd say (C).", ["A", "B", "C", "D"])
    Parsed(answer='C', rule='final')
    """
    cands = [str(c) for c in candidates]
    if cands and all(len(c.strip()) == 1 and c.strip().isalpha() for c in cands):
        found = parse_letter(text, "".join(c.strip().upper() for c in cands))
        if found.answer is None:
            return found
        spelled = {c.strip().upper(): c for c in cands}
        return Parsed(spelled[found.answer], found.rule)
    canon = [canonical_number(c) for c in cands]
    if cands and all(c is not None for c in canon):
        found = parse_number(text)
        value = None if found.answer is None else canonical_number(found.answer)
        for cand, key in zip(cands, canon):
            if value is not None and value == key:
                return Parsed(cand, found.rule)
        return Parsed(None, None)
    return parse_label(text, cands)
