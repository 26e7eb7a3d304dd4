"""The result of a clean-data study: tidy tables, JSON round trip, Markdown and a PNG figure.

:class:`StudyResult` is what :func:`label_efficiency`, :func:`transfer_study`,
:func:`round_windows`, :func:`fix_break_by_k` and :func:`seed_spread` return (each a subclass
that knows its Markdown layout and its figure). Its ``table`` is tidy (one observation per row,
flat strict-JSON values), ``tables`` holds further tables by name, ``plot`` the data of the
figure and ``params`` the settings the study ran with, seeds included. :func:`markdown_table`,
:func:`mean_sd`, :func:`new_figure` and :func:`write_png` are the helpers those studies share.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from .._core.errors import ArtifactError, DataError
from .._core.io import atomic_write

__all__ = ["StudyResult", "markdown_table", "mean_sd", "new_figure", "write_png"]

SCHEMA_VERSION = 1
KIND = "bda_jax.study_result"


@dataclass
class StudyResult:
    """Result of a clean-data study (subclasses name theirs in ``STUDY``).

    ``table``: tidy rows. ``params``: the settings it ran with. ``tables``: further tables by
    name. ``plot``: the data of its figure (:meth:`plot_png`).
    """

    STUDY: ClassVar[str] = ""

    table: list[dict]
    params: dict
    tables: dict[str, list[dict]] = field(default_factory=dict)
    plot: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """``{"schema_version", "kind": "bda_jax.study_result", "study", "params", "table",
        "tables", "plot"}`` (strict JSON)."""
        return {"schema_version": SCHEMA_VERSION, "kind": KIND, "study": self.STUDY,
                "params": self.params, "table": self.table, "tables": self.tables,
                "plot": self.plot}

    @classmethod
    def from_json(cls, data: dict) -> "StudyResult":
        """Inverse of :meth:`to_json`; another schema version, kind or study is an
        :class:`~bda_jax.ArtifactError`."""
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION \
                or data.get("kind") != KIND:
            raise ArtifactError(f"not a {KIND} of schema version {SCHEMA_VERSION}",
                                field="schema_version")
        if data.get("study") != cls.STUDY:
            raise ArtifactError(f"a {data.get('study')!r} study, not {cls.STUDY!r}",
                                field="study")
        missing = [k for k in ("params", "table", "tables", "plot") if k not in data]
        if missing:
            raise ArtifactError(f"study result lacks {', '.join(missing)}", field=missing[0])
        return cls(data["table"], data["params"], data["tables"], data["plot"])

    def rows(self, table: str | None = None, **match) -> list[dict]:
        """The rows of ``table`` (default: the main table) whose fields equal ``match``."""
        source = self.table if table is None else self.tables[table]
        return [r for r in source if all(r.get(k) == v for k, v in match.items())]

    def row(self, table: str | None = None, **match) -> dict:
        """The one row matching ``match`` (:class:`KeyError` if none or several)."""
        rows = self.rows(table, **match)
        if len(rows) != 1:
            raise KeyError(f"{len(rows)} rows match {match}")
        return rows[0]

    def to_markdown(self) -> str:
        """The study's tables as Markdown (subclasses lay out their own)."""
        return markdown_table(self.table)

    def plot_png(self, path) -> str:
        """Write the study's figure to ``path`` (PNG, atomically); returns the path."""
        raise DataError(f"the {self.STUDY} study has no figure", field="figure")


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | None = None,
                   digits: int = 3, headers: Sequence[str] | None = None) -> str:
    """A Markdown table of ``rows`` (dicts) over ``columns`` (default: the first row's keys);
    floats with ``digits`` decimals, ``None`` as an em dash, ``headers`` replacing the column
    names in the header line."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0])
    head = list(headers) if headers is not None else columns

    def text(v):
        if isinstance(v, float):
            return "—" if not math.isfinite(v) else f"{v:.{digits}f}"
        return "—" if v is None else str(v)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(text(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def mean_sd(values: Sequence[Any], ddof: int = 1) -> tuple[float | None, float | None]:
    """Mean and standard deviation (``ddof``: 1, the sample SD; 0, the population SD) of the
    values that are not ``None``; ``(None, None)`` without any, SD ``None`` with too few."""
    v = np.asarray([x for x in values if x is not None], np.float64)
    if v.size == 0:
        return None, None
    sd = float(np.std(v, ddof=ddof)) if v.size > ddof else None
    return float(v.mean()), sd


def write_png(fig, path) -> str:
    """Save a matplotlib ``Figure`` to ``path`` as PNG, atomically and without a timestamp
    (the same figure gives the same bytes); returns the path."""
    path = os.fspath(path)
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", metadata={"Software": None}),
                 binary=True)
    return path


def new_figure(n_cols: int, n_rows: int = 1, width: float = 3.4, height: float = 2.9):
    """A matplotlib ``Figure`` (Agg canvas, no pyplot state) and its ``[n_rows, n_cols]``
    axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_cols, height * n_rows), dpi=110)
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    return fig, axes
