"""What kind of file the user gave: the sniff behind the CLI's "this looks like a CSV" answers.

When a reader refuses an input file (a trace file, a model, a results file, a DASE history),
the command asks :func:`sniff_file_kind` what the file looks like from its first
:data:`SNIFF_BYTES` bytes and, when that is another kind than the one expected, answers with one
line naming the file, the kind seen and what to do (:func:`expect_file_kind`) instead of the
reader's decoder error. A file the sniff cannot tell apart from the expected kind keeps the
reader's own error, which names the line and field. A file that reads is never sniffed: the
sniff only rewrites refusals.
"""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FILE_KINDS", "SNIFF_BYTES", "expect_file_kind", "sniff_file_kind", "wrong_kind_hint"]

#: How many bytes of a file :func:`sniff_file_kind` reads.
SNIFF_BYTES = 64 * 1024

#: Every kind :func:`sniff_file_kind` returns, with the words the messages use for it.
FILE_KINDS = {
    "traces": "a bda_jax trace file (JSON Lines, one task per line)",
    "jsonl": "a JSON Lines file",
    "json-array": "a JSON array",
    "json": "a single JSON document (not JSON Lines)",
    "model": "a bda_jax model file (`bda fit --out`)",
    "results": "a bda_jax results file (`bda demo` / `bda evaluate --out`)",
    "dase-history": "a DASE history log",
    "csv": "a CSV file",
    "tsv": "a tab-separated file",
    "gzip": "gzip-compressed",
    "zip": "a zip archive (a model's .npz arrays, or another zip)",
    "binary": "binary data",
    "not-utf8": "text that is not UTF-8",
    "empty": "an empty file",
    "text": "plain text",
    "unknown": "a file that cannot be read",
}

_MODEL_KIND = "bda_jax.model"
_RESULTS_KINDS = ("bda_jax.demo_results", "bda_jax.evaluation")
_KIND_RE = re.compile(rb'"kind"\s*:\s*"([^"\\]{1,80})"')


def _object_kind(obj: dict) -> str:
    kind = obj.get("kind")
    if kind == _MODEL_KIND:
        return "model"
    if kind in _RESULTS_KINDS:
        return "results"
    if "task_id" in obj and ("moves" in obj or "candidates" in obj):
        return "traces"
    if "idx" in obj and ("cert" in obj or "history" in obj):
        return "dase-history"
    return "jsonl"


def sniff_file_kind(path) -> str:
    """What the file at ``path`` looks like, from its first :data:`SNIFF_BYTES` bytes: one key
    of :data:`FILE_KINDS`.

    ``"gzip"`` / ``"zip"`` by their magic bytes; ``"binary"`` for a NUL byte, ``"not-utf8"`` for
    other bytes that are not UTF-8; ``"empty"`` for whitespace only. A leading UTF-8 byte-order mark is skipped.
    Text whose first non-blank line is a whole JSON object is JSON Lines: ``"model"`` or
    ``"results"`` by its ``kind``, ``"traces"`` for a task record (``task_id`` with ``moves``
    or ``candidates``), ``"dase-history"`` for a DASE log record (``idx`` with ``cert`` or
    ``history``), else ``"jsonl"``. An object spread over several lines is ``"json"`` (or
    ``"model"`` / ``"results"`` by a ``"kind"`` key in the bytes read); text opening with ``[``
    is ``"json-array"`` unless every line is an array of its own (JSON Lines of arrays,
    ``"jsonl"``). Other text is ``"csv"`` (``"tsv"``) when its first line holds a comma or
    semicolon (a tab), else ``"text"``. A file that cannot be opened is ``"unknown"``."""
    try:
        with open(os.fspath(path), "rb") as handle:
            head = handle.read(SNIFF_BYTES)
            whole = len(head) < SNIFF_BYTES or not handle.read(1)
    except OSError:
        return "unknown"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if b"\x00" in head:
        return "binary"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:
        if whole or err.start < len(head) - 4:        # not a character cut at the end
            return "not-utf8"
        text = head[:err.start].decode("utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "empty"
    first = lines[0].strip()
    if first.startswith("{"):
        try:
            value = json.loads(first)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return _object_kind(value)
        found = _KIND_RE.search(head)
        kind = found.group(1).decode("utf-8", "replace") if found else None
        return ("model" if kind == _MODEL_KIND else "results" if kind in _RESULTS_KINDS
                else "json")
    if first.startswith("["):
        complete = lines if whole else lines[:-1]
        try:
            if len(complete) > 1 and all(isinstance(json.loads(line), list) for line in complete):
                return "jsonl"
        except (ValueError, RecursionError):
            pass
        return "json-array"
    if "\t" in first:
        return "tsv"
    if "," in first or ";" in first:
        return "csv"
    return "text"


#: What each expected input is called in the messages.
_EXPECTED = {
    "traces": "a trace file (JSON Lines, one task per line)",
    "model": "a model file (the .json `bda fit --out` writes)",
    "results": "a results JSON (`bda demo`'s results.json or `bda evaluate --out`)",
    "dase-history": "a DASE history log (safe_DASE_*.jsonl, JSON Lines)",
}
#: The kinds that may be the expected one: the reader's own error is kept for them (it names the
#: line, byte or field: a damaged model is still a model file).
_COMPATIBLE = {
    "traces": {"traces", "jsonl", "unknown", "empty", "not-utf8"},
    "model": {"model", "json", "jsonl", "unknown", "empty", "not-utf8"},
    "results": {"results", "json", "jsonl", "unknown", "empty", "not-utf8"},
    "dase-history": {"dase-history", "jsonl", "unknown", "empty", "not-utf8"},
}


def wrong_kind_hint(path, kind: str, expected: str, command: str | None = None) -> str | None:
    """The one-line answer for a file of ``kind`` given where ``expected`` (a key of
    ``_EXPECTED``) goes, or None when ``kind`` may be ``expected`` (the reader's own error then
    stands). ``command``: the command line to show in a hint (``"bda predict"``)."""
    if kind in _COMPATIBLE[expected]:
        return None
    name = str(path)
    want = _EXPECTED[expected]
    if kind == "gzip":
        return (f"gzip input: decompress it first (`gunzip -k {name}`), then pass the "
                f"uncompressed file; expected {want}")
    if kind in ("csv", "tsv"):
        what = "a CSV" if kind == "csv" else "a tab-separated file"
        if expected == "traces":
            return (f"this looks like {what}, not JSON Lines traces: convert it with "
                    "`bda convert` (`bda convert --list` names the crowd-label data sets it "
                    "reads; for other labels write one task per line, docs/trace-format.md)")
        if command == "bda convert":
            return (f"this looks like {what}; `bda convert FILE` reads DASE history logs, crowd-"
                    "label sets are converted by name (`bda convert --list`)")
        return f"this looks like {what}; expected {want}"
    if kind == "json-array":
        if expected in ("traces", "dase-history"):
            unit = "one task per line" if expected == "traces" else "one problem per line"
            return (f"expected JSON Lines, {unit}, got a JSON array: write each element on its "
                    f"own line (e.g. `jq -c '.[]' {name}`)")
        return f"got a JSON array; expected {want}, one JSON object"
    if kind == "model":
        if expected == "traces" and command == "bda predict":
            return ("this is a model file; the traces come second: "
                    "`bda predict MODEL TRACES`")
        return f"this is a model file (`bda fit --out`); expected {want}"
    if kind == "traces":
        if expected == "model" and command == "bda predict":
            return ("this is a trace file, not a model; the model comes first: "
                    "`bda predict MODEL TRACES`")
        if expected == "results":
            return ("this is a trace file; `bda report` renders a results JSON: make one with "
                    "`bda evaluate TRACES --out results.json` or `bda demo`")
        if expected == "dase-history":
            return (f"this is a bda_jax trace file, not a DASE history log; `{command or 'bda'}"
                    "` reads DASE history logs here (safe_DASE_*.jsonl)"
                    + ("; a trace file needs no converting" if command == "bda convert" else ""))
        return f"this is a trace file; expected {want}"
    if kind == "results":
        return f"this is a results file (render it with `bda report`); expected {want}"
    if kind == "zip":
        if expected == "model":
            return ("this is a zip archive (the model's .npz arrays?): pass the model's .json, "
                    "the .npz beside it is read from there")
        return f"this is a zip archive; expected {want}"
    if kind == "json":
        if expected in ("traces", "dase-history"):
            return (f"expected JSON Lines (one object per line), got one JSON document spread "
                    f"over several lines (e.g. `jq -c . {name}` writes it on one line)")
        return f"this JSON is not {want}"
    return f"this looks like {FILE_KINDS[kind]}; expected {want}"


@contextmanager
def expect_file_kind(path, expected: str, field: str, command: str | None = None):
    """Run a reader of ``path``: a :class:`~bda_jax.BdaError` it raises is replaced by a
    :class:`~bda_jax.DataError` naming ``path``, the kind :func:`sniff_file_kind` sees and what
    to do (:func:`wrong_kind_hint`) when the file is not of the ``expected`` kind; otherwise the
    reader's error passes unchanged. ``field``: the argument or option (``TRACES``,
    ``--calibration``) the error names."""
    from .. import BdaError, DataError
    try:
        yield
    except BdaError as err:
        if path is None:
            raise
        hint = wrong_kind_hint(path, sniff_file_kind(path), expected, command)
        if hint is None:
            raise
        raise DataError(hint, file=str(Path(path)), field=field) from err
