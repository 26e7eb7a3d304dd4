"""Offline importers for public crowdsourcing label sets: (task, worker, label) plus gold.

Every loader returns a :class:`CrowdData`: ``labels`` is a pandas DataFrame with string columns
``task``, ``worker``, ``label`` (crowd-kit's surface: one row per label, file order), ``gold`` a
string Series indexed by task (only tasks that have both labels and gold), ``candidates`` the
label set every task shares. :func:`to_traces` turns it into one :class:`~bda_jax.Trace` per task
(one round-0 ``propose`` per label), so the usual path ``tally -> kernels`` applies.

Formats read (all files UTF-8, LF or CRLF line ends, blank lines ignored):

=====================  ===========================================================================
loader                 files and columns
=====================  ===========================================================================
:func:`load_zheng`     Zheng et al. (2017) ``answer.csv`` (header ``question|id|item|task, worker,
                       answer|label``) and ``truth.csv`` (header ``question|q|..., truth``);
                       labels are integers, ids free strings
:func:`load_zhang`     Zhang et al. (2016) ``<name>_crowd.txt`` (``item worker label``, whitespace,
                       no header, 1-based integers) and ``<name>_truth.txt`` (``item label``;
                       repeated consistent rows allowed)
:func:`load_snow`      Snow et al. (2008) ``*.standardized.tsv`` (header with ``!amt_worker_ids``,
                       ``orig_id``, ``response``, ``gold``; gold repeated on every row);
                       only the categorical sets (rte, temp, wsd) are accepted
:func:`load_active_crowd`  ActiveCrowdToolkit CSV, no header: ``worker, task, label[, gold[, x]]``
                       (a fifth column, present in some files, is ignored); ``.csv.gz`` too
:func:`load_crowdscale`  CrowdScale 2013 ``label.csv`` (``item,worker,label``) and ``truth.csv``
                       (``item,truth``), 0-based integers throughout
:func:`load_bluebirds` CUBAM's ``labels.yaml`` (``{worker: {image: true|false}}``) and ``gt.yaml``
                       (``{image: true|false}``); ``true`` -> label ``"1"``, ``false`` -> ``"0"``
=====================  ===========================================================================

Policies (keyword options of every loader):

* ``duplicates``: what to do with several rows of one (task, worker) pair. ``"keep"`` (default,
  crowd-kit's behaviour: every row is a vote), ``"first"`` / ``"last"`` (keep that row in file
  order, drop the others), ``"error"`` (:class:`~bda_jax.DataError` naming the file, the line of
  the second row, the task and field ``worker``). :attr:`CrowdData.duplicates` records the count
  (rows beyond the first of their pair) and the policy.
* ``candidates``: the label set, in the given order. Default: the distinct labels of the label
  file, sorted numerically when all are integers (every format here), else as strings. A label
  or gold value outside a given set raises :class:`~bda_jax.DataError`; so does a gold value that
  no worker ever gave when the set is inferred (pass ``candidates`` to allow it).
* ``max_classes`` (default 20): when the label set is inferred, more distinct labels than this
  is taken as a numeric rating (e.g. Zheng's ``f201_Emotion``, scores in [-100, 100]) and
  refused: these loaders are for categorical labels only. The Snow et al. affect, valence and
  wordsim files are refused by name (:data:`SNOW_NUMERIC`).
* Gold for tasks nobody labelled is validated, then left out of ``gold`` and counted in
  ``notes["gold_without_labels"]``; two different gold values for one task raise.

Malformed input (missing file, wrong column count, empty field, a non-integer where the format
requires integers, conflicting gold, a label outside ``candidates``) raises
:class:`~bda_jax.DataError` with ``file``, ``line`` (1-based, the header counts as line 1),
``task_id`` and ``field`` (``"task"``, ``"worker"``, ``"label"`` or ``"gold"``) set where they
apply.

:func:`load_crowd` maps short names (:func:`list_crowd`) to files under the shared data folder
(``root``, else ``$BDA_SHARED_DATA``, else ``../shared/data`` beside the repository); the
bundled sets (``bluebirds`` and the ``act_*`` ActiveCrowdToolkit files) need no folder:

>>> data = load_crowd("act_CF")
>>> data.labels.shape, len(data.gold), data.candidates
((1720, 3), 300, ('0', '1', '2', '3', '4'))
>>> traces = to_traces(data)
>>> len(traces), len(traces[0].moves) >= 1, traces[0].candidates == data.candidates
(300, True, True)
"""
from __future__ import annotations

import bisect
import csv
import dataclasses
import gzip
import io
import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .._core.errors import DataError
from .._core.normalize import default_normalizer, normalize_id
from .._core.fastparse import FastTasks, RowIds
from .._core.io import gc_paused
from .._core.traces import FORCES, Trace, lazy_traces

__all__ = [
    "CrowdData", "Duplicates", "DUPLICATE_POLICIES", "load_zheng", "load_zhang", "load_snow",
    "load_active_crowd", "load_crowdscale", "load_bluebirds", "load_crowd", "list_crowd",
    "shared_data_root", "to_traces", "SNOW_NUMERIC",
]

DUPLICATE_POLICIES = ("keep", "first", "last", "error")
_BUNDLED = Path(__file__).resolve().parents[1] / "data"
_INT = re.compile(r"[+-]?[0-9]+")
_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]*")
_LINE_END = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class Duplicates:
    """Duplicate (task, worker) rows found in a label file and what was done with them.

    ``rows``: rows beyond the first of their (task, worker) pair; ``pairs``: pairs with more than
    one row; ``policy``: one of :data:`DUPLICATE_POLICIES`; ``dropped``: rows the policy removed.
    """

    rows: int
    pairs: int
    policy: str
    dropped: int


@dataclass(frozen=True, eq=False)
class CrowdData:
    """A categorical crowd label set with (partial) gold.

    ``labels``: DataFrame, columns ``task``, ``worker``, ``label`` (strings), one row per label in
    file order (after the duplicates policy), a fresh RangeIndex. ``gold``: Series of label
    strings indexed by task (index name ``"task"``), only tasks that have labels and gold, in the
    gold file's order. ``candidates``: the label set every task shares (module docstring: order).
    ``source``: the label file read. ``duplicates``: a :class:`Duplicates` record. ``notes``:
    loader details (``gold_source``, ``gold_without_labels``, ...).
    """

    name: str
    labels: pd.DataFrame
    gold: pd.Series
    candidates: tuple[str, ...]
    source: str
    duplicates: Duplicates
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def n_tasks(self) -> int:
        return int(self.labels["task"].nunique())

    @property
    def n_workers(self) -> int:
        return int(self.labels["worker"].nunique())

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return (f"CrowdData({self.name!r}: {self.n_tasks} tasks, {self.n_workers} workers, "
                f"{self.n_labels} labels, K={len(self.candidates)}, gold {len(self.gold)}, "
                f"duplicates {self.duplicates.rows} ({self.duplicates.policy}))")


# ----------------------------------------------------------------------------------- raw rows


@dataclass
class _Column:
    """One column of a table: stripped values and the 1-based line of each row."""

    file: str
    lines: list[int]
    values: list[str]


def _open(path: Path):
    try:
        if path.suffix == ".gz":
            handle = gzip.open(path, "rt", encoding="utf-8-sig", newline="")
        else:
            handle = open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise DataError("file not found", file=path) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a file", file=path) from None
    except OSError as err:
        raise DataError(f"cannot open: {err.strerror or err}", file=path) from None
    return handle


def _read_rows(path: Path, delimiter: str | None) -> list[tuple[int, list[str]]]:
    """(line, stripped fields) of every non-blank row; ``delimiter=None`` splits on whitespace.

    Unquoted files (all of the formats here) are split with ``str.split``, one pass per line;
    a comma file containing a double quote goes through :mod:`csv` (quoted fields).
    """
    with _open(path) as handle:
        try:
            text = handle.read()
        except UnicodeDecodeError:
            raise DataError("not valid UTF-8", file=path, line=_bad_utf8_line(path)) from None
        except (OSError, EOFError) as err:   # e.g. a corrupt .gz
            raise DataError(f"cannot read: {err}", file=path) from None
    if "\x00" in text:
        raise DataError("contains NUL bytes (not a text file?)", file=path,
                        line=len(_LINE_END.split(text[:text.index("\x00")])))
    lines = _LINE_END.split(text)
    if delimiter is None:
        return [(i, f) for i, f in enumerate((t.split() for t in lines), 1) if f]
    if delimiter == "," and '"' in text:
        return _read_quoted(path, text)
    if " " in text or (delimiter != "\t" and "\t" in text):     # fields may need stripping
        rows = [(i, [f.strip() for f in t.split(delimiter)]) for i, t in enumerate(lines, 1)]
        return [(i, f) for i, f in rows if any(f)]
    # no field needs stripping: a row is blank when it holds delimiters only, and when every
    # row has one width the fields are split once, as columns (no list per row)
    keep = [i for i, t in enumerate(lines, 1) if t.strip(delimiter)]
    kept = lines if len(keep) == len(lines) else [lines[i - 1] for i in keep]
    widths = set(map(str.count, kept, itertools.repeat(delimiter)))
    if len(widths) == 1:
        width = widths.pop() + 1
        fields = delimiter.join(kept).split(delimiter)
        return _Rows(keep, [fields[k::width] for k in range(width)])
    return [(i, t.split(delimiter)) for i, t in zip(keep, kept)]


class _Rows:
    """Rows of one width as columns: ``lines`` (1-based line of each row) and ``columns``
    (one list of fields per column). Indexes and slices like the list of ``(line, fields)``
    pairs it stands for; :func:`_columns` takes its columns as they are."""

    def __init__(self, lines: list[int], columns: list[list[str]]):
        self.lines, self.columns = lines, columns

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return _Rows(self.lines[k], [c[k] for c in self.columns])
        return self.lines[k], [c[k] for c in self.columns]


def _read_quoted(path: Path, text: str) -> list[tuple[int, list[str]]]:
    out: list[tuple[int, list[str]]] = []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 0
    try:
        for row in reader:
            line = reader.line_num
            fields = [f.strip() for f in row]
            if any(fields):
                out.append((line, fields))
    except csv.Error as err:
        raise DataError(f"malformed CSV: {err}", file=path, line=line + 1) from None
    return out


def _bad_utf8_line(path: Path) -> int | None:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as raw:
            for line, data in enumerate(raw, 1):
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    return line
    except OSError:
        pass
    return None


def _columns(path: Path, rows, names: Sequence[str], counts: Sequence[int],
             task_col: int) -> list[_Column]:
    """Split rows into columns; every row must have one of ``counts`` fields (the first row's)."""
    file = str(path)
    if not rows:
        raise DataError("the file holds no data rows", file=file)
    width = len(rows[0][1])
    if width not in counts:
        line, fields = rows[0]
        raise DataError(f"expected {' or '.join(map(str, counts))} columns ({', '.join(names)}), "
                        f"found {width}", file=file, line=line)
    if isinstance(rows, _Rows):                 # one width, already columns
        return [_Column(file, rows.lines, list(col)) for col in rows.columns]
    for line, fields in rows:
        if len(fields) != width:
            task = fields[task_col] if len(fields) > task_col else None
            raise DataError(f"expected {width} columns ({', '.join(names[:width])}) like the "
                            f"first row, found {len(fields)}", file=file, line=line, task_id=task)
    lines = [line for line, _ in rows]
    return [_Column(file, lines, list(col)) for col in zip(*(f for _, f in rows))]


def _header(path: Path, rows, expected: Sequence[tuple[str, ...]]) -> list:
    """Check and drop the header row: column i must be one of ``expected[i]`` (any case)."""
    if not rows:
        raise DataError("the file is empty", file=path)
    line, fields = rows[0]
    names = [f.casefold() for f in fields]
    ok = len(names) == len(expected) and all(n in alts for n, alts in zip(names, expected))
    if not ok:
        want = ", ".join("|".join(alts) for alts in expected)
        raise DataError(f"expected a header row '{want}', found {','.join(fields)!r}",
                        file=path, line=line, field="header")
    return rows[1:]


def _nonempty(col: _Column, what: str, tasks: _Column | None) -> None:
    if "" in col.values:
        i = col.values.index("")
        raise DataError(f"empty {what}", file=col.file, line=col.lines[i],
                        task_id=None if tasks is None or what == "task" else tasks.values[i],
                        field=what)


def _integers(col: _Column, what: str, tasks: _Column | None, minimum: int | None = None,
              note: str = "") -> None:
    """Require integer values (>= minimum); rewrite them in canonical form (``"01"`` -> ``"1"``).

    Checks run on the distinct values (few, even for 200k rows); rows are visited only to name
    the first offending line or to rewrite non-canonical spellings.
    """
    _nonempty(col, what, tasks)
    values = col.values
    distinct = set(values)
    odd = {v for v in distinct if not _CANONICAL_INT.fullmatch(v)}
    bad = {v for v in odd if not _INT.fullmatch(v)}
    reason = f"{what} must be an integer{note}, got {{!r}}"
    if not bad and minimum is not None:
        bad = {v for v in distinct if int(v) < minimum}
        reason = f"{what} must be an integer >= {minimum}{note}, got {{!r}}"
    if bad:
        i = next(k for k, v in enumerate(values) if v in bad)
        raise DataError(reason.format(values[i]), file=col.file, line=col.lines[i],
                        task_id=None if tasks is None or what == "task" else tasks.values[i],
                        field=what)
    if odd:
        canon = {v: str(int(v)) for v in odd}
        col.values = [canon.get(v, v) for v in values]


def _no_gold(file: str) -> _Column:
    return _Column(file, [], [])


# ----------------------------------------------------------------------------------- assembly
def _canonical_ids(values: list) -> tuple[list, int | None]:
    """``values`` read through :func:`~bda_jax._core.normalize.normalize_id` (NFKC, stripped:
    one agent, one id, as in the trace reader), and the position of the first that becomes
    empty (None if none). Only the distinct non-ASCII or padded values are rewritten."""
    canon = {v: normalize_id(v) for v in set(values)
             if isinstance(v, str) and (not v.isascii() or v != v.strip())}
    canon = {v: c for v, c in canon.items() if c != v}
    if not canon:
        return values, None
    out = [canon.get(v, v) for v in values]
    empty = next((k for k, v in enumerate(out) if v == ""), None)
    return out, empty


def _agent_ids(worker: _Column) -> list:
    values, empty = _canonical_ids(worker.values)
    if empty is not None:
        raise DataError(f"worker {worker.values[empty]!r} is empty as an agent id", file=worker.file,
                        line=worker.lines[empty], field="worker")
    return values


def _assemble(name: str, task: _Column, worker: _Column, label: _Column, gold_task: _Column,
              gold: _Column, *, duplicates: str, candidates, max_classes: int,
              notes: dict | None = None) -> CrowdData:
    """Common back end: duplicates policy, candidate set, gold checks, frames."""
    if duplicates not in DUPLICATE_POLICIES:
        raise DataError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {duplicates!r}",
                        field="duplicates")
    file = task.file
    notes = dict(notes or {})
    worker.values = _agent_ids(worker)
    frame = pd.DataFrame({"task": task.values, "worker": worker.values, "label": label.values})

    # -- duplicates
    extra = frame.duplicated(["task", "worker"], keep="first").to_numpy()
    n_rows = int(extra.sum())
    n_pairs = int(frame[extra].drop_duplicates(["task", "worker"]).shape[0]) if n_rows else 0
    keep = np.ones(len(frame), bool)
    if n_rows and duplicates == "error":
        k = int(np.flatnonzero(extra)[0])
        t, w = frame["task"].iat[k], frame["worker"].iat[k]
        first = int(np.flatnonzero((frame["task"].to_numpy() == t)
                                   & (frame["worker"].to_numpy() == w))[0])
        raise DataError(f"worker {w!r} labels this task twice (first on line {task.lines[first]}); "
                        f"{n_rows} duplicate row(s) in all; pass duplicates='keep', 'first' or "
                        "'last'", file=file, line=task.lines[k], task_id=t, field="worker")
    if duplicates == "first":
        keep = ~extra
    elif duplicates == "last":
        keep = ~frame.duplicated(["task", "worker"], keep="last").to_numpy()
    dup = Duplicates(n_rows, n_pairs, duplicates, int((~keep).sum()))

    # -- candidates
    label_values = frame["label"].to_numpy(object)
    if candidates is not None:
        cands = tuple(str(c) for c in candidates)
        if not cands or len(set(cands)) != len(cands):
            raise DataError(f"candidates must be a non-empty list without repeats, got {cands}",
                            field="candidates")
        outside = ~pd.Series(label_values).isin(cands).to_numpy()
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            raise DataError(f"label {label_values[k]!r} is not one of the candidates "
                            f"{list(cands)}", file=file, line=label.lines[k],
                            task_id=task.values[k], field="label")
    else:
        distinct = list(dict.fromkeys(label_values.tolist()))
        if all(_INT.fullmatch(v) for v in distinct):
            distinct.sort(key=int)
        else:
            distinct.sort()
        cands = tuple(distinct)
        if len(cands) > max_classes:
            raise DataError(f"{len(cands)} distinct labels ({cands[0]} .. {cands[-1]}): this "
                            "looks like a numeric rating, not a categorical label set, and is "
                            f"refused (more than max_classes={max_classes}; raise max_classes "
                            "or pass candidates= if the labels really are categories)",
                            file=file, field="label")

    # -- gold: every row checked, consistent per task, restricted to labelled tasks
    cand_set = set(cands)
    gold_of: dict[str, str] = {}
    gold_line: dict[str, int] = {}
    for i, (t, g) in enumerate(zip(gold_task.values, gold.values)):
        if not g:
            continue                       # inline formats: an empty gold cell = unknown
        if g not in cand_set:
            raise DataError(f"gold label {g!r} is not one of the candidates {list(cands)}",
                            file=gold.file, line=gold.lines[i], task_id=t, field="gold")
        if t in gold_of:
            if gold_of[t] != g:
                raise DataError(f"gold {g!r} contradicts gold {gold_of[t]!r} given on line "
                                f"{gold_line[t]}", file=gold.file, line=gold.lines[i],
                                task_id=t, field="gold")
            continue
        gold_of[t] = g
        gold_line[t] = gold.lines[i]
    frame = frame[keep].reset_index(drop=True)
    labelled = set(frame["task"].unique().tolist())
    kept = {t: g for t, g in gold_of.items() if t in labelled}
    notes["gold_without_labels"] = len(gold_of) - len(kept)
    gold_series = pd.Series(list(kept.values()), index=pd.Index(list(kept.keys()), name="task"),
                            name="gold", dtype=frame["label"].dtype)
    return CrowdData(name, frame, gold_series, cands, file, dup, MappingProxyType(notes))


def _common(duplicates, candidates, max_classes):
    if not isinstance(max_classes, int) or max_classes < 1:
        raise DataError(f"max_classes must be a positive integer, got {max_classes!r}",
                        field="max_classes")
    return dict(duplicates=duplicates, candidates=candidates, max_classes=max_classes)


# ----------------------------------------------------------------------------------- loaders
_TASK_NAMES = ("question", "q", "id", "item", "task", "example")
_WORKER_NAMES = ("worker", "worker_id", "workerid", "annotator", "performer")
_LABEL_NAMES = ("answer", "label", "response")
_TRUTH_NAMES = ("truth", "gold", "label", "answer", "true_label")


def _two_files(label_path: Path, truth_path: Path | None, *, int_ids: bool, minimum: int | None,
               name: str, options: dict, notes: dict) -> CrowdData:
    """Headed ``task,worker,label`` CSV plus optional headed ``task,truth`` CSV."""
    note = " (ids are 0-based integers in this format)" if int_ids else ""
    rows = _header(label_path, _read_rows(label_path, ","),
                   (_TASK_NAMES, _WORKER_NAMES, _LABEL_NAMES))
    task, worker, label = _columns(label_path, rows, ("task", "worker", "label"), (3,), 0)
    if int_ids:
        _integers(task, "task", None, minimum, note)
        _integers(worker, "worker", task, minimum, note)
    else:
        _nonempty(task, "task", None)
        _nonempty(worker, "worker", task)
    _integers(label, "label", task, minimum, note)
    if truth_path is None:
        gtask, gold = _no_gold(str(label_path)), _no_gold(str(label_path))
    else:
        rows = _header(truth_path, _read_rows(truth_path, ","), (_TASK_NAMES, _TRUTH_NAMES))
        gtask, gold = _columns(truth_path, rows, ("task", "gold"), (2,), 0)
        if int_ids:
            _integers(gtask, "task", None, minimum, note)
        else:
            _nonempty(gtask, "task", None)
        _integers(gold, "gold", gtask, minimum, note)
        notes["gold_source"] = str(truth_path)
    return _assemble(name, task, worker, label, gtask, gold, notes=notes, **options)


@gc_paused()
def load_zheng(path_or_dir, name: str | None = None, *, truth=None, duplicates: str = "keep",
               candidates: Sequence[str] | None = None, max_classes: int = 20) -> CrowdData:
    """Read a dataset in the format of Zheng et al. (2017), "Truth inference in crowdsourcing".

    ``path_or_dir``: a folder holding ``answer.csv`` and ``truth.csv`` (both required), or the
    answer file itself (gold from ``truth=``, a path, if given). ``answer.csv`` has a header
    (``question``, ``id``, ``item`` or ``task``; ``worker``; ``answer`` or ``label``) and one row
    per label; ``truth.csv`` a header (``question`` or ``q`` ...; ``truth``) and one row per gold
    task; in a folder, ``truth=`` replaces ``truth.csv``. Ids are free strings; labels must be
    integers (Zheng's class indices 0..K-1). ``name`` defaults to the folder's name. Options:
    module docstring. Numeric sets such as ``f201_Emotion`` exceed ``max_classes`` and are
    refused.
    """
    path = Path(path_or_dir)
    if path.is_dir():
        label_path, truth_path = path / "answer.csv", path / "truth.csv"
        if truth is not None:
            truth_path = Path(truth)
        default_name = path.name
    else:
        label_path, truth_path = path, None if truth is None else Path(truth)
        default_name = path.parent.name or path.stem
    return _two_files(label_path, truth_path, int_ids=False, minimum=None,
                      name=name or default_name, notes={"format": "zheng2017"},
                      options=_common(duplicates, candidates, max_classes))


@gc_paused()
def load_crowdscale(dir, name: str | None = None, *, duplicates: str = "keep",
                    candidates: Sequence[str] | None = None,
                    max_classes: int = 20) -> CrowdData:
    """Read the CrowdScale 2013 re-pack: ``label.csv`` (``item,worker,label``) and ``truth.csv``
    (``item,truth``) in ``dir``, every id and label a 0-based integer (negative values raise)."""
    path = Path(dir)
    return _two_files(path / "label.csv", path / "truth.csv", int_ids=True, minimum=0,
                      name=name or path.name, notes={"format": "crowdscale2013"},
                      options=_common(duplicates, candidates, max_classes))


@gc_paused()
def load_zhang(path, truth_path=None, *, name: str | None = None, duplicates: str = "keep",
               candidates: Sequence[str] | None = None, max_classes: int = 20) -> CrowdData:
    """Read a Zhang et al. (2016) "Spectral methods meet EM" file pair.

    ``path``: ``<name>_crowd.txt``, no header, whitespace-separated ``item worker label``, all
    1-based integers (0 or negative raises). ``truth_path``: ``item label`` rows; ``None`` uses
    the sibling ``<name>_truth.txt`` when it exists (else no gold). Repeated truth rows must
    agree (``dog_truth.txt`` repeats each item once per label). Labels keep the file's 1-based
    values (``"1"`` .. ``"K"``).
    """
    path = Path(path)
    stem = path.name[:-len("_crowd.txt")] if path.name.endswith("_crowd.txt") else path.stem
    if truth_path is None:
        sibling = path.with_name(f"{stem}_truth.txt")
        truth_path = sibling if path.name.endswith("_crowd.txt") and sibling.exists() else None
    options = _common(duplicates, candidates, max_classes)
    note = " (1-based integers in this format)"
    rows = _read_rows(path, None)
    task, worker, label = _columns(path, rows, ("item", "worker", "label"), (3,), 0)
    _integers(task, "task", None, 1, note)
    _integers(worker, "worker", task, 1, note)
    _integers(label, "label", task, 1, note)
    notes: dict[str, Any] = {"format": "zhang2016"}
    if truth_path is None:
        gtask, gold = _no_gold(str(path)), _no_gold(str(path))
    else:
        truth_path = Path(truth_path)
        gtask, gold = _columns(truth_path, _read_rows(truth_path, None), ("item", "label"),
                               (2,), 0)
        _integers(gtask, "task", None, 1, note)
        _integers(gold, "gold", gtask, 1, note)
        notes["gold_source"] = str(truth_path)
    return _assemble(name or stem, task, worker, label, gtask, gold, notes=notes, **options)


#: Snow et al. (2008) files that hold numeric ratings, not categories (refused by name).
SNOW_NUMERIC = ("anger", "disgust", "fear", "joy", "sadness", "surprise", "valence", "wordsim")
_SNOW_COLUMNS = ("!amt_annotation_ids", "!amt_worker_ids", "orig_id", "response", "gold")


@gc_paused()
def load_snow(path, *, name: str | None = None, duplicates: str = "keep",
              candidates: Sequence[str] | None = None, max_classes: int = 20) -> CrowdData:
    """Read one Snow et al. (2008) ``<set>.standardized.tsv`` file (tab-separated, header).

    Columns (by header name): ``!amt_worker_ids`` -> worker, ``orig_id`` -> task, ``response``
    -> label, ``gold`` -> gold (repeated on each row; rows of one task must agree; an empty cell
    is unknown). Labels and gold must be integers. The numeric-rating files (affect, valence,
    wordsim: :data:`SNOW_NUMERIC`) are refused with a :class:`~bda_jax.DataError`.
    """
    path = Path(path)
    stem = path.name.split(".")[0]
    if stem.casefold() in SNOW_NUMERIC:
        raise DataError(f"snow2008 {stem!r} holds numeric ratings, not categorical labels; only "
                        "the categorical sets (rte, temp, wsd) can be loaded", file=path,
                        field="response")
    options = _common(duplicates, candidates, max_classes)
    rows = _read_rows(path, "\t")
    if not rows:
        raise DataError("the file is empty", file=path)
    line, header = rows[0]
    where = {}
    for col in ("!amt_worker_ids", "orig_id", "response", "gold"):
        if col not in header or header.count(col) != 1:
            raise DataError(f"expected one header column {col!r} (header: {header})",
                            file=path, line=line, field="header")
        where[col] = header.index(col)
    cols = _columns(path, rows[1:], header, (len(header),), where["orig_id"])
    task, worker = cols[where["orig_id"]], cols[where["!amt_worker_ids"]]
    label, gold = cols[where["response"]], cols[where["gold"]]
    _nonempty(task, "task", None)
    _nonempty(worker, "worker", task)
    _integers(label, "label", task)
    if any(gold.values):
        filled = _Column(gold.file, [l for l, v in zip(gold.lines, gold.values) if v],
                         [v for v in gold.values if v])
        _integers(filled, "gold", None)
        it = iter(filled.values)
        gold.values = [next(it) if v else v for v in gold.values]
    return _assemble(name or stem, task, worker, label, task, gold,
                     notes={"format": "snow2008"}, **options)


@gc_paused()
def load_active_crowd(path, *, name: str | None = None, duplicates: str = "keep",
                      candidates: Sequence[str] | None = None,
                      max_classes: int = 20) -> CrowdData:
    """Read an ActiveCrowdToolkit CSV (no header): ``worker, task, label[, gold[, extra]]``.

    Every row has the first row's width (3, 4 or 5 columns). Labels and gold are integers; an
    empty gold cell means unknown; rows of one task must agree on gold; the fifth column (an
    undocumented per-judgement integer in some files) is ignored. ``.csv.gz`` is read directly.
    """
    path = Path(path)
    options = _common(duplicates, candidates, max_classes)
    cols = _columns(path, _read_rows(path, ","), ("worker", "task", "label", "gold", "extra"),
                    (3, 4, 5), 1)
    worker, task, label = cols[:3]
    _nonempty(task, "task", None)
    _nonempty(worker, "worker", task)
    _integers(label, "label", task)
    if len(cols) >= 4:
        gold = cols[3]
        filled = [i for i, v in enumerate(gold.values) if v]
        sub = _Column(gold.file, [gold.lines[i] for i in filled],
                      [gold.values[i] for i in filled])
        _integers(sub, "gold", _Column(gold.file, sub.lines, [task.values[i] for i in filled]))
        for i, v in zip(filled, sub.values):
            gold.values[i] = v
    else:
        gold = _Column(str(path), task.lines, [""] * len(task.values))
    stem = path.name.split(".")[0]
    return _assemble(name or stem, task, worker, label, task, gold,
                     notes={"format": "active_crowd_toolkit"}, **options)


# ----------------------------------------------------------------------------------- CUBAM YAML
_YAML_TOKEN = re.compile(r"[{}:,]|[^\s{}:,]+")
_YAML_BAD = re.compile(r"[\"'\[\]&*!|>%@`]")


def _read_yaml_map(path: Path):
    """A restricted reader for CUBAM's YAML: nested mappings of plain scalars, nothing else.

    Returns a list of (key, line, value) where value is a plain-scalar string or such a list
    (one level of nesting). Anything else (quotes, sequences, anchors, ...) raises DataError.
    """
    with _open(path) as handle:
        try:
            text = handle.read()
        except UnicodeDecodeError:
            raise DataError("not valid UTF-8", file=path) from None
    text = re.sub(r"(?m)(^|\s)#.*$", r"\1", text)       # comments
    starts = [m.start() for m in re.finditer("\n", text)]
    tokens = [(m.group(), bisect.bisect_left(starts, m.start()) + 1)
              for m in _YAML_TOKEN.finditer(text)]
    if not tokens:
        raise DataError("the file is empty", file=path)
    pos = 0

    def fail(reason, line=None):
        if line is None:
            line = tokens[min(pos, len(tokens) - 1)][1]
        raise DataError(f"unsupported or malformed YAML: {reason}", file=path, line=line)

    def peek():
        return tokens[pos][0] if pos < len(tokens) else None

    def scalar():
        nonlocal pos
        tok = peek()
        if tok is None or tok in "{}:,":
            fail(f"expected a plain scalar, found {tok!r}")
        if _YAML_BAD.search(tok) or tok in ("---", "..."):
            fail(f"{tok!r} (only plain scalars and {{...}} mappings are read)")
        pos += 1
        return tok, tokens[pos - 1][1]

    def expect(sym):
        nonlocal pos
        if peek() != sym:
            fail(f"expected {sym!r}, found {peek()!r}")
        pos += 1

    def value(depth):
        return flow(depth + 1) if peek() == "{" else scalar()[0]

    def entries(depth, closing):
        out = []
        while peek() not in (closing, None):
            if depth > 2:
                fail("mappings nested more than two levels")
            key, line = scalar()
            expect(":")
            out.append((key, line, value(depth)))
            if closing == "}" and peek() == ",":
                expect(",")
        return out

    def flow(depth):
        expect("{")
        out = entries(depth, "}")
        expect("}")
        return out

    result = flow(1) if peek() == "{" else entries(1, None)
    if pos != len(tokens):
        fail(f"unexpected {peek()!r} after the mapping")
    return result


def _yaml_bool(value, path, line, task, what):
    if isinstance(value, list) or value.casefold() not in ("true", "false"):
        raise DataError(f"expected true or false, got {value!r}", file=path, line=line,
                        task_id=task, field=what)
    return "1" if value.casefold() == "true" else "0"


@gc_paused()
def load_bluebirds(dir=None, *, name: str = "bluebirds", duplicates: str = "keep",
                   candidates: Sequence[str] | None = ("0", "1"),
                   max_classes: int = 20) -> CrowdData:
    """Read the Bluebirds set (Welinder et al. 2010) from CUBAM's ``labels.yaml`` and ``gt.yaml``.

    ``dir=None`` reads the copies bundled with bda_jax (BSD, from welinder/cubam; see NOTICE).
    ``labels.yaml`` maps worker -> {image: true|false}; ``gt.yaml`` maps image -> true|false.
    Labels are ``"1"`` (true) and ``"0"`` (false), the coding of Zheng et al.'s ``d_Duck`` copy
    of the same data; rows come worker by worker in file order. 108 images x 39 workers.
    """
    folder = _BUNDLED / "bluebirds" if dir is None else Path(dir)
    options = _common(duplicates, candidates, max_classes)
    lpath, gpath = folder / "labels.yaml", folder / "gt.yaml"
    lines, tasks, workers, labels = [], [], [], []
    for worker, wline, images in _read_yaml_map(lpath):
        if not isinstance(images, list):
            raise DataError(f"worker {worker!r} must map to {{image: true|false}}, got "
                            f"{images!r}", file=lpath, line=wline, field="label")
        for image, line, val in images:
            lines.append(line)
            tasks.append(image)
            workers.append(worker)
            labels.append(_yaml_bool(val, lpath, line, image, "label"))
    glines, gtasks, golds = [], [], []
    for image, line, val in _read_yaml_map(gpath):
        glines.append(line)
        gtasks.append(image)
        golds.append(_yaml_bool(val, gpath, line, image, "gold"))
    if not tasks:
        raise DataError("no labels in the file", file=lpath)
    file = str(lpath)
    return _assemble(name, _Column(file, lines, tasks), _Column(file, lines, workers),
                     _Column(file, lines, labels), _Column(str(gpath), glines, gtasks),
                     _Column(str(gpath), glines, golds),
                     notes={"format": "cubam-yaml", "gold_source": str(gpath),
                            "bundled": dir is None}, **options)


# ----------------------------------------------------------------------------------- registry
def _ints(a, b):
    return tuple(str(i) for i in range(a, b + 1))


@dataclass(frozen=True)
class _Entry:
    loader: Callable[..., CrowdData]
    path: str                      # under the shared root, or under bda_jax/data when bundled
    candidates: tuple[str, ...]
    bundled: bool = False


_ACT = {"CF": _ints(0, 4), "CF_amt": _ints(0, 4), "MS": _ints(1, 10), "SP": _ints(0, 1),
        "SP_amt": _ints(0, 1), "ZenCrowd_all": _ints(0, 1), "ZenCrowd_in": _ints(0, 1),
        "ZenCrowd_us": _ints(0, 1)}
_REGISTRY: dict[str, _Entry] = {
    "bluebirds": _Entry(load_bluebirds, "bluebirds", _ints(0, 1), bundled=True),
    "d_duck": _Entry(load_zheng, "bluebirds", _ints(0, 1)),
    "d_product": _Entry(load_zheng, "zheng_d_product", _ints(0, 1)),
    "d_sentiment": _Entry(load_zheng, "zheng_d_sentiment", _ints(0, 1)),
    "s4_dog": _Entry(load_zheng, "zheng_s4_dog", _ints(0, 3)),
    "s4_face": _Entry(load_zheng, "zheng_s4_face", _ints(0, 3)),
    "s4_relevance": _Entry(load_zheng, "zheng_s4_relevance", _ints(0, 3)),
    "s5_adult": _Entry(load_zheng, "zheng_s5_adult", _ints(0, 3)),
    "zhang_bluebird": _Entry(load_zhang, "zhang2016_spectral/bluebird_crowd.txt", _ints(1, 2)),
    "zhang_rte": _Entry(load_zhang, "zhang2016_spectral/rte_crowd.txt", _ints(1, 2)),
    "zhang_trec": _Entry(load_zhang, "zhang2016_spectral/trec_crowd.txt", _ints(1, 2)),
    "zhang_dog": _Entry(load_zhang, "zhang2016_spectral/dog_crowd.txt", _ints(1, 4)),
    "zhang_web": _Entry(load_zhang, "zhang2016_spectral/web_crowd.txt", _ints(1, 5)),
    "snow_rte": _Entry(load_snow, "snow2008/rte.standardized.tsv", _ints(0, 1)),
    "snow_temp": _Entry(load_snow, "snow2008/temp.standardized.tsv", _ints(1, 2)),
    "snow_wsd": _Entry(load_snow, "snow2008/wsd.standardized.tsv", _ints(1, 3)),
    **{f"act_{k}": _Entry(load_active_crowd, f"active_crowd_toolkit/{k}.csv.gz", v, bundled=True)
       for k, v in _ACT.items()},
    "crowdscale_fact": _Entry(load_crowdscale, "crowdscale2013_fact_eval", _ints(0, 2)),
}
_NUMERIC_NAMES = {"f201_emotion": "zheng_f201_emotion (scores in [-100, 100])",
                  **{f"snow_{s}": f"snow2008/{s}.standardized.tsv" for s in SNOW_NUMERIC}}


def list_crowd(bundled: bool | None = None) -> tuple[str, ...]:
    """Names :func:`load_crowd` accepts (``bundled=True``: only those shipped with bda_jax)."""
    return tuple(n for n, e in _REGISTRY.items() if bundled is None or e.bundled == bundled)


def shared_data_root(root=None) -> Path:
    """The shared data folder: ``root``, else ``$BDA_SHARED_DATA``, else ``../shared/data``
    beside the repository checkout; :class:`~bda_jax.DataError` if none exists."""
    if root is not None:
        found = Path(root)
        if not found.is_dir():
            raise DataError("the data root is not a folder", file=found, field="root")
        return found
    env = os.environ.get("BDA_SHARED_DATA")
    if env:
        found = Path(env)
        if not found.is_dir():
            raise DataError("BDA_SHARED_DATA does not name a folder", file=found, field="root")
        return found
    found = Path(__file__).resolve().parents[3] / "shared" / "data"
    if found.is_dir():
        return found
    raise DataError(f"no shared data folder: pass root=, set BDA_SHARED_DATA, or place it at "
                    f"{found}", field="root")


def load_crowd(name: str, root=None, *, duplicates: str = "keep") -> CrowdData:
    """Load a registered data set by name (:func:`list_crowd`), with its label set pinned.

    Bundled sets (``bluebirds``, ``act_*``) always read bda_jax's own copies and ignore
    ``root``; the others read ``root`` / ``$BDA_SHARED_DATA`` / ``../shared/data``
    (:func:`shared_data_root`). Names match case-insensitively. Numeric sets (``f201_emotion``,
    ``snow_anger`` ...) raise :class:`~bda_jax.DataError`.
    """
    key = {n.casefold(): n for n in _REGISTRY}.get(str(name).casefold())
    if key is None:
        numeric = _NUMERIC_NAMES.get(str(name).casefold())
        if numeric:
            raise DataError(f"{name!r} ({numeric}) holds numeric ratings, not categorical "
                            "labels; the crowd loaders read categorical label sets only",
                            field="name")
        raise DataError(f"unknown crowd data set {name!r}; known: {', '.join(_REGISTRY)}",
                        field="name")
    entry = _REGISTRY[key]
    base = _BUNDLED if entry.bundled else shared_data_root(root)
    path = base / entry.path
    if entry.loader is load_bluebirds:
        data = load_bluebirds(path, duplicates=duplicates, candidates=entry.candidates)
    else:
        data = entry.loader(path, duplicates=duplicates, candidates=entry.candidates)
    notes = dict(data.notes, bundled=entry.bundled)
    return dataclasses.replace(data, name=key, notes=MappingProxyType(notes))


# ----------------------------------------------------------------------------------- traces
@gc_paused()
def to_traces(data: CrowdData) -> list[Trace]:
    """One :class:`~bda_jax.Trace` per task: each label becomes a round-0 ``propose`` move.

    Tasks come in order of first appearance in ``data.labels``; moves in row order, move id
    ``"r<i>"`` for row ``i`` of ``data.labels`` (0-based position), agent = worker read as an
    agent id (NFKC, stripped: :func:`~bda_jax._core.normalize.normalize_id`, as the trace reader
    does, so two spellings of one worker are one agent; every loader here already stores them so). Every trace
    shares ``candidates = data.candidates`` (so :func:`bda_jax.tally` records a ``vocab``) and
    carries the task's gold where known. The columns are checked here (non-empty strings, labels
    and gold among the candidates), so the traces are marked as parsed and :func:`bda_jax.tally`
    does not re-validate them move by move; their moves are kept as columns (built into
    :class:`~bda_jax.Move` objects on first access) that :func:`bda_jax.tally` resolves all at
    once (docs/scale.md).
    """
    cands = tuple(data.candidates)
    keys = [default_normalizer(c) for c in cands]
    if len(set(keys)) != len(keys):
        raise DataError(f"candidates {list(cands)} collide after answer normalization "
                        "(e.g. differ only in case)", field="candidates")
    labels = data.labels
    if len(labels) == 0:
        raise DataError("no labels to convert", field="labels")
    coded = {}
    for col in ("task", "worker", "label"):      # a hand-built CrowdData is checked here too
        codes, uniques = pd.factorize(labels[col].to_numpy(object))     # first seen; NA: -1
        uniques = uniques.tolist()
        if codes.min() < 0 or not all(isinstance(u, str) for u in uniques) or "" in uniques:
            raise DataError(f"column {col!r} must hold non-empty strings", field=col)
        coded[col] = codes, uniques
    if not set(coded["label"][1]) <= set(cands) or not data.gold.isin(cands).all():
        raise DataError(f"a label or gold value is not one of the candidates {list(cands)}",
                        field="candidates")
    codes, tasks = coded["task"]
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(tasks))).tolist()
    canon, empty = _canonical_ids(coded["worker"][1])
    if empty is not None:
        raise DataError("a worker is empty as an agent id (NFKC, stripped)", field="worker")
    workers = (canon, coded["worker"][0][order])       # per move: codes into the distinct ones
    answers = (coded["label"][1], coded["label"][0][order])
    gold = data.gold.to_dict()
    golds = list(map(gold.get, tasks))
    source = (str(data.source), None)
    M = len(order)
    # The columns were checked above, so the moves are not re-parsed: they stay columns (the
    # Move objects are built when a trace's ``moves`` is first read) and bda_jax.tally runs the
    # automaton over all of them at once (a task the fast checks refuse is resolved as usual).
    columns = FastTasks.from_columns(
        source[0], [None] * len(tasks), np.diff(np.concatenate([[0], ends])).tolist(), tasks,
        [cands] * len(tasks), golds, RowIds("r", order), workers, answers,
        np.full(M, FORCES.index("propose"), np.int8), np.zeros(M, np.int64),
        distinct_ids=True)          # "r<row>": one id per row, made when read
    repeat = itertools.repeat
    return lazy_traces(tasks, repeat(cands), golds, repeat(None), repeat(source), columns,
                       range(len(tasks)))
