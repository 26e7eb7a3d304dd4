"""Text formatting of audit numbers for Markdown tables (the Trace-Audit Card and the per-tier
tables of :class:`~bda_jax.audit.AuditReport`).
"""
from __future__ import annotations

__all__ = ["fmt_count", "fmt_value", "md_cell"]


def md_cell(s: str) -> str:
    r"""Text safe inside a Markdown table cell: backslashes and pipes escaped, line breaks as
    spaces.

    >>> md_cell("a|b\nc")
    'a\\|b c'
    """
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def fmt_value(v) -> str:
    """An estimate or interval bound with three decimals; None (undefined) as "n/a".

    >>> fmt_value(0.20417), fmt_value(None)
    ('0.204', 'n/a')
    """
    return "n/a" if v is None else f"{v:.3f}"


def fmt_count(v) -> str:
    """A numerator or denominator: whole numbers with thousands separators, others with four
    significant digits; None as "n/a".

    >>> fmt_count(9436), fmt_count(12.34567), fmt_count(None)
    ('9,436', '12.35', 'n/a')
    """
    if v is None:
        return "n/a"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.4g}"
