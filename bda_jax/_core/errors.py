"""One error root for every input bda_jax refuses (docs/architecture.md).

Every error carries *where* it happened: file, line, task id, move id and field, whichever
apply, so a user can go straight to the offending record.
"""
from __future__ import annotations

__all__ = ["BdaError", "TraceError", "DataError", "ArtifactError"]


class BdaError(Exception):
    """Root of every error bda_jax raises on bad input.

    Attributes ``file``, ``line``, ``task_id``, ``move_id`` and ``field`` locate the problem
    (``None`` where not applicable); ``reason`` is the bare message without the location.
    """

    def __init__(self, reason: str, *, file=None, line=None, task_id=None, move_id=None,
                 field=None):
        self.reason = reason
        self.file = None if file is None else str(file)
        self.line = line
        self.task_id = task_id
        self.move_id = move_id
        self.field = field
        super().__init__(self._format())

    @property
    def location(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(f"file {self.file}")
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.task_id is not None:
            parts.append(f"task {self.task_id!r}")
        if self.move_id is not None:
            parts.append(f"move {self.move_id!r}")
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts)

    def _format(self) -> str:
        loc = self.location
        return f"{loc}: {self.reason}" if loc else self.reason


class TraceError(BdaError):
    """A deliberation trace (JSON Lines file or in-memory record) is malformed or inadmissible."""


class DataError(BdaError):
    """Other user input is malformed: arrays, CSV rows, data frames, options."""


class ArtifactError(BdaError):
    """A saved model or result artifact cannot be read (schema, version, content)."""
