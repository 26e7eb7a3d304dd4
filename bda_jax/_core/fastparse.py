"""The fast trace reader: compiled JSON decoding and the protocol automaton over arrays.

:func:`bda_jax.read_traces` and :func:`bda_jax.tally_stream` read a file through this module
(docs/scale.md). A chunk of lines is decoded by msgspec into typed records whose types say what
the line-by-line reader accepts without a second look (string ids and agents, a known
lower-case force, an integer round in range, a confidence in [0, 1], no unknown key); the
automaton of :func:`bda_jax.resolve_trace` then runs over all the chunk's moves at once as
NumPy arrays (:class:`FastTasks`). A task that passes every check is *plain*: every move is
admissible, so strict and lenient reading agree and the arrays are exactly the automaton's.

Every other line -- one the decoder refuses (an integer id, an unknown key, ``NaN``, a
confidence out of range, a lone surrogate, ...), one whose JSON repeats a key, one with a move
the automaton would refuse or skip, a task whose candidates collide -- is read by the reference
path (``json`` with the repeated-key hook, :func:`bda_jax.parse_trace`,
:func:`bda_jax.resolve_trace`), in file order. So results, errors (file, line, task, move,
field, message) and lenient skips are those of the line-by-line reader, whatever the file.

Repeated keys: msgspec keeps the last value of a repeated key, so the decoder alone cannot see
one. The reader counts the string tokens of the text instead: once escaped backslashes and
escaped quotes are taken out, every ``"`` of a valid JSON line delimits a string, and a line
without a repeated key has exactly one string token per key and per string value of its
decoded record. A chunk whose count is off has its lines checked one by one, and a line whose
count is off goes to the reference path (which names the key).

Parse workers: a large regular file (:func:`auto_workers`; ``workers=`` of
:func:`bda_jax.tally_stream`, ``$BDA_JAX_PARSE_WORKERS``) is cut into segments of whole lines
(:data:`SEGMENT_BYTES`), and worker processes -- Python with NumPy and msgspec, started without
importing JAX -- decode, check and (with a package normalizer) resolve their segments' chunks
exactly as above, while this process finishes every chunk in file order (:meth:`_Reader.finish`:
duplicate task ids, the reference path for every other line, its errors and lenient skips) and,
with one or two workers, prepares a share of the segments itself (:data:`_OWN_PERIOD`). A
request is a byte range; a reply is msgpack (strings, numbers) plus raw array bytes, never a
pickle. A chunk is the same whichever process prepared it, so results, errors and warnings are
those of one process; a worker that stops leaves the rest of the file to this process (with a
:class:`RuntimeWarning`).
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import operator
import os
import queue
import signal
import stat
import struct
import subprocess
import sys
import threading
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Callable, Iterator, Literal, Sequence

import msgspec
import numpy as np
from msgspec import UNSET, UnsetType

from .errors import TraceError
from .io import decode_json_line, gc_paused
from .normalize import Normalizer, default_normalizer, identity_normalizer, memoized, normalize_id
if TYPE_CHECKING:
    from .counts import ResolvedBlock
from .workers import WORKER_THREADS, env_count, usable_cpus, worker_command
from .traces import (FORCES, MAX_ROUND, Trace, check_trace, lazy_trace, lazy_traces,
                     moves_from_columns, resolve_trace)

__all__ = ["FastTasks", "RowIds", "lookup_codes", "read_checked_traces", "stream_blocks", "check_workers", "auto_workers",
           "DEFAULT_CHUNK_LINES", "BLOCK_ARRAYS"]

#: Lines decoded and resolved at a time by :func:`read_checked_traces`.
DEFAULT_CHUNK_LINES = 2048
#: A chunk of fewer lines goes to the reference path whole: the arrays cost a few ms a chunk,
#: the reference path about 0.2 ms a task.
MIN_FAST_LINES = 16

#: The array fields of a :class:`~bda_jax._core.counts.ResolvedBlock` that
#: :meth:`FastTasks.resolved_columns` computes (the rest come from the chunk's columns).
BLOCK_ARRAYS = ("gold", "gold_missing", "m_off", "m_agent", "e_off", "e_agent", "e_cand",
                "e_sign", "e_round", "e_conf", "e_force", "e_id")

_NAN = float("nan")
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_FORCE_CODE = {f: k for k, f in enumerate(FORCES)}
_PROPOSE, _VOTE, _CONCEDE, _CHALLENGE, _RETRACT, _ABSTAIN = (
    _FORCE_CODE[f] for f in ("propose", "vote", "concede", "challenge", "retract", "abstain"))


_ROUND = Annotated[int, msgspec.Meta(ge=0, le=MAX_ROUND)]
_CONFIDENCE = Annotated[float, msgspec.Meta(ge=0, le=1)]


def _record_types(id_type=str, agent_type=str, answer_type=str):
    """The typed records of a task line and its moves. What they accept is what the fast path
    takes (anything else goes to the reference path): string ids and agents, a lower-case
    force, an integer round in [0, MAX_ROUND], a number in [0, 1] as confidence, no unknown
    key. Absent optional fields read as UNSET (a confidence as the ``_NAN`` object), null as
    None. The string types may be Literals of known values (:class:`_Decoders`)."""
    move = msgspec.defstruct("MoveRecord", [
        ("id", id_type), ("agent", agent_type), ("round", _ROUND), ("force", Literal[FORCES]),
        ("answer", answer_type | None | UnsetType, UNSET),
        ("target", id_type | None | UnsetType, UNSET),
        ("confidence", _CONFIDENCE | None, _NAN)], forbid_unknown_fields=True, gc=False)
    task = msgspec.defstruct("TaskRecord", [
        ("task_id", str), ("moves", list[move]),
        ("candidates", tuple[str, ...] | None | UnsetType, UNSET),
        ("gold", str | None | UnsetType, UNSET), ("cluster", str | None | UnsetType, UNSET)],
        forbid_unknown_fields=True, gc=False)
    return task


_TaskRecord = _record_types()
_DECODE = msgspec.json.Decoder(_TaskRecord).decode


class _Decoders:
    """Decoders whose move ids and targets, agents and answers are Literal types of the values
    seen so far in the file (at most ``limit`` of a kind; past that, plain strings): a known
    value decodes to the one shared string object, so a chunk allocates no string per move
    and its columns are coded by identity. A line with a value not seen yet fails the Literal
    decoder and is decoded again with plain strings; its values are learned for the next
    chunk. Same records either way (a Literal only narrows which strings are accepted)."""

    limit = 512

    def __init__(self):
        self.known: dict[str, set | None] = {"id": set(), "agent": set(), "answer": set()}
        self._one = _DECODE
        self._pending: list = []

    @property
    def one(self):
        """The decoder of one line (rebuilt here, when a chunk needs it, after learning)."""
        while self._pending:
            self._learn(*self._pending.pop())
        return self._one

    def learn(self, ids, agents, answers) -> None:
        """Values new to a chunk; learned before the next chunk is decoded."""
        self._pending.append((ids, agents, answers))

    def _learn(self, ids, agents, answers) -> None:
        changed = False
        for kind, values in (("id", ids), ("agent", agents), ("answer", answers)):
            known = self.known[kind]
            if known is None or not values:
                continue
            new = {v for v in values if v.__class__ is str} - known
            if new:
                changed = True
                if len(known) + len(new) > self.limit:
                    self.known[kind] = None
                else:
                    known |= new
        if changed:
            kind = lambda k: Literal[tuple(sorted(self.known[k]))] if self.known[k] else str
            task = _record_types(kind("id"), kind("agent"), kind("answer"))
            self._one = msgspec.json.Decoder(task).decode


class RowIds:
    """The move ids ``f"{prefix}{n}"`` for ``numbers`` [M] (e.g. ``"r17"``: row 17 of a crowd
    table), a read-only sequence whose strings are made when read (:meth:`moves_of`, an error
    message), not one per move up front. Distinct numbers give distinct ids."""

    __slots__ = ("prefix", "numbers")

    def __init__(self, prefix: str, numbers: np.ndarray):
        self.prefix, self.numbers = prefix, np.asarray(numbers, np.int64)

    def __len__(self) -> int:
        return int(self.numbers.size)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [f"{self.prefix}{n}" for n in self.numbers[k].tolist()]
        return f"{self.prefix}{int(self.numbers[k])}"

    def __iter__(self):
        prefix = self.prefix
        return (f"{prefix}{n}" for n in self.numbers.tolist())


class _Fallback(Exception):
    """The fast resolution cannot decide (a normalizer raised or returned a non-string)."""


def _string_tokens(data: bytes) -> int:
    """Number of string tokens of valid JSON text ``data`` (one or more whole lines)."""
    if b"\\" in data:          # escapes: drop escaped backslashes, then escaped quotes
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return int(np.count_nonzero(np.frombuffer(data, np.uint8) == 34)) // 2


def lookup_codes(code: dict, values: list) -> np.ndarray:
    """``[code[v] for v in values]`` as int64 (looked up in C)."""
    if len(values) > 1:
        return np.fromiter(operator.itemgetter(*values)(code), np.int64, len(values))
    return np.array([code[v] for v in values], np.int64)


class _Packed:
    """A code table ``value -> int`` kept also as ``value -> bytes`` (the code as a signed
    little-endian integer of ``width`` bytes), so that a column is coded by one C-level join
    of the bytes and one ``np.frombuffer`` (no Python int per value to convert)."""

    __slots__ = ("width", "table")

    def __init__(self, code: dict):
        top = max((abs(c) for c in code.values()), default=0)
        self.width = 1 if top < 1 << 7 else 2 if top < 1 << 15 else 4
        self.table = {v: c.to_bytes(self.width, "little", signed=True) for v, c in code.items()}

    def add(self, values, first: int) -> bool:
        """Give ``values`` the codes ``first, first + 1, ...``; False when they do not fit the
        width (the caller packs the table again)."""
        if first + len(values) > 1 << (8 * self.width - 1):
            return False
        w = self.width
        self.table.update(zip(values, (c.to_bytes(w, "little", signed=True)
                                       for c in range(first, first + len(values)))))
        return True

    def codes(self, values: list) -> np.ndarray:
        """``[code[v] for v in values]`` as int64 (KeyError for a value not in the table)."""
        if len(values) > 1:
            data = b"".join(operator.itemgetter(*values)(self.table))
        else:
            data = b"".join(self.table[v] for v in values)
        return np.frombuffer(data, _PACKED_DTYPES[self.width]).astype(np.int64)


_PACKED_DTYPES = {1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<i4")}
_FORCE_PACKED = _Packed(_FORCE_CODE)
_ROUND_PACKED = _Packed({r: r for r in range(127)})


def _expected_tokens(record: _TaskRecord) -> int:
    """String tokens (keys and string values) of the text of ``record`` if no key repeats."""
    n = 3 + sum(v is not UNSET for v in (record.candidates, record.gold, record.cluster))
    n += len(record.candidates) if record.candidates.__class__ is tuple else 0
    n += (record.gold.__class__ is str) + (record.cluster.__class__ is str)
    for m in record.moves:
        n += (7 + (m.answer is not UNSET) + (m.target is not UNSET) + (m.confidence is not _NAN)
              + (m.answer.__class__ is str) + (m.target.__class__ is str))
    return n


def _normalize_all(normalizer: Normalizer, values) -> list[str]:
    """``normalizer`` over ``values``; :class:`_Fallback` if it raises or returns a non-str."""
    try:
        keys = [normalizer(v) for v in values]
    except Exception as err:          # noqa: BLE001 -- the reference path raises it in order
        raise _Fallback from err
    if not all(k.__class__ is str for k in keys):
        raise _Fallback
    return keys


def _table(keys: np.ndarray, values: np.ndarray, size: int, dense: bool):
    """A lookup ``key -> value`` (-1: absent) for non-negative int64 ``keys`` < ``size``."""
    if dense:
        table = np.full(size, -1, np.int64)
        table[keys] = values
        return lambda q: table[q]
    order = np.argsort(keys, kind="stable")
    sorted_keys, sorted_values = keys[order], values[order]

    def lookup(q):
        i = np.searchsorted(sorted_keys, q)
        i_ok = np.minimum(i, max(sorted_keys.size - 1, 0))
        found = (i < sorted_keys.size) & (sorted_keys[i_ok] == q) if sorted_keys.size else \
            np.zeros(q.shape, bool)
        return np.where(found, sorted_values[i_ok] if sorted_keys.size else -1, -1)

    return lookup


def _blanks(values: list) -> list[bool]:
    """``[not s.strip() for s in values]`` for distinct strings, in C (``str.isspace``; ``""``
    is blank too)."""
    out = list(map(str.isspace, values))
    if "" in values:
        out[values.index("")] = True
    return out


class _Vocab:
    """Codes of the distinct values of a string column, kept across the chunks of one read:
    append-only (codes handed out stay valid, ``names`` lists already shared keep their
    meaning), started afresh past ``limit`` values. Subclasses derive per-value facts."""

    limit = 1 << 14

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.code: dict = {}
        self.names: list = []
        self._arrays: dict = {}
        self.fresh: list = []
        self.packed: _Packed | None = None       # packed when first used (after subclasses')

    def added(self, values: list) -> None:
        """Hook: ``values`` were just given the next codes."""

    def codes(self, *columns: list) -> list[np.ndarray]:
        """The int64 codes of each column (values not seen before are added first)."""
        self.fresh = []
        if self.packed is None:
            self.packed = _Packed(self.code)
        try:
            return [self.packed.codes(c) for c in columns]
        except KeyError:
            pass
        chain = itertools.chain
        fresh = [v for v in dict.fromkeys(chain(*columns)) if v not in self.code]
        if len(self.names) + len(fresh) > self.limit:
            self.reset()
            fresh = [v for v in dict.fromkeys(chain(*columns)) if v not in self.code]
        code, names = self.code, self.names
        code.update(zip(fresh, range(len(names), len(names) + len(fresh))))
        if self.packed is None or not self.packed.add(fresh, len(names)):
            self.packed = _Packed(code)
        names.extend(fresh)
        self.added(fresh)
        self._arrays = {}
        self.fresh = fresh
        return [self.packed.codes(c) for c in columns]

    def array(self, name: str, values: Callable[[], list], dtype) -> np.ndarray:
        """``np.array(values(), dtype)`` of a per-value list, cached until the next addition."""
        out = self._arrays.get(name)
        if out is None:
            out = self._arrays[name] = np.array(values(), dtype)
        return out


class _IdVocab(_Vocab):
    """Move ids and targets (one code space: a target names an id). -1: null, -2: absent."""

    def reset(self) -> None:
        super().reset()
        self.code.update({None: -1, UNSET: -2})
        self.blank: list[bool] = []

    def added(self, values) -> None:
        self.blank.extend(_blanks(values))


class _AgentVocab(_Vocab):
    """Agent ids as written; ``canon[code]``: the code of the canonical id (NFKC, stripped)
    in ``canon_names``, -1 for an id that is blank once stripped."""

    def reset(self) -> None:
        super().reset()
        self.canon: list[int] = []
        self.canon_names: list[str] = []
        self._canon_code: dict[str, int] = {}

    def added(self, values) -> None:
        for a in values:
            c = normalize_id(a)
            if not c:
                self.canon.append(-1)
                continue
            k = self._canon_code.get(c)
            if k is None:
                k = self._canon_code[c] = len(self.canon_names)
                self.canon_names.append(c)
            self.canon.append(k)


class _AnswerVocab(_Vocab):
    """Answers as written; ``values[code]``: the answer a move carries (None: absent, null or
    blank). Codes 0 and 1 are null and absent."""

    def reset(self) -> None:
        super().reset()
        self.code.update({None: 0, UNSET: 1})
        self.names.extend((None, UNSET))
        self.values: list = [None, None]

    def added(self, values) -> None:
        self.values.extend(None if b else a for a, b in zip(values, _blanks(values)))


def _coded(vocab: _Vocab, column) -> list[np.ndarray]:
    """``vocab.codes(column)``; a column given coded, ``(values, codes)``, is looked up by its
    distinct values only."""
    if column.__class__ is tuple:
        values, codes = column
        (lut,) = vocab.codes(list(values))
        return [lut[codes] if len(values) else np.zeros(len(codes), np.int64)]
    return vocab.codes(column)


class _Vocabs:
    """The vocabularies one reader shares across its chunks (``unbounded``: one use, never
    started afresh)."""

    def __init__(self, unbounded: bool = False):
        self.ids, self.agents, self.answers = _IdVocab(), _AgentVocab(), _AnswerVocab()
        if unbounded:
            for v in (self.ids, self.agents, self.answers):
                v.limit = float("inf")


class FastTasks:
    """The tasks of one chunk that the compiled decoder read, as columns, with every check of
    :func:`bda_jax.parse_trace` and the normalizer-free checks of the automaton done over all
    moves at once (``plain`` [T]: no check failed; the rest go to the reference path).

    Per move (M, tasks in file order): ``id_code`` / ``target_code`` (into ``id_names``; -1: no
    target), ``agent_code`` (into ``agent_names``, canonical ids), ``rounds``, ``force_code``,
    ``answer_code`` (into ``answer_values``, None: no answer), ``conf`` (NaN: none).
    :meth:`resolution` runs the normalizer-dependent rest of the automaton; :meth:`moves_of`
    builds a task's :class:`~bda_jax.Move` objects.
    """

    def __init__(self, path, linenos: Sequence[int], datas: Sequence[bytes],
                 records: Sequence[_TaskRecord], vocab: "_Vocabs | None" = None):
        mlists = [r.moves for r in records]
        ms = list(itertools.chain.from_iterable(mlists))
        self._build(path, linenos, list(map(len, mlists)),
                    [r.task_id for r in records], [r.candidates for r in records],
                    [r.gold for r in records], [r.cluster for r in records],
                    [m.id for m in ms], [m.agent for m in ms], [m.answer for m in ms],
                    [m.target for m in ms], [m.force for m in ms], [m.round for m in ms],
                    [m.confidence for m in ms], vocab, (datas, records))

    @classmethod
    def from_columns(cls, path, linenos, n_moves, task_ids, candidates, golds, ids, agents,
                     answers, forces, rounds, vocab: "_Vocabs | None" = None, *,
                     distinct_ids: bool = False) -> "FastTasks":
        """Tasks built in memory from checked columns (no target, confidence or cluster):
        ``n_moves`` [T] moves per task, then one entry per move (``forces``: names, or their
        indices in :data:`~bda_jax.FORCES` as an integer array; ``rounds``: a list or an
        integer array). The checks are those of the file path (and an agent id must already
        be canonical: such traces are not re-parsed); a task that fails one is left to
        :func:`bda_jax.resolve_trace`. ``agents`` and ``answers`` may also be given coded,
        ``(distinct values, int array of codes into them per move)``. ``distinct_ids``: the
        caller guarantees that ``ids`` are distinct non-blank strings (e.g. made from row
        numbers: a :class:`RowIds`, kept as it is), so they are not looked up one by one."""
        self = object.__new__(cls)
        M = len(ids)
        candidates = [tuple(c) if c.__class__ is list else c for c in candidates]
        self._build(path, linenos, n_moves, task_ids, candidates, golds, [UNSET] * len(task_ids),
                    ids, agents, answers, None, forces, rounds, np.full(M, np.nan),
                    vocab or _Vocabs(unbounded=True), None, canonical_agents=True,
                    distinct_ids=distinct_ids)
        return self

    def _build(self, path, linenos, n, tids, cands, golds, clusters, ids, agents, answers,
               targets, forces, rounds, confs, vocab, text, canonical_agents=False,
               distinct_ids=False):
        """The columns and checks (``targets`` None: no move has one; ``confs`` a list or a
        float array; ``text``: the lines and records, for the repeated-key count)."""
        self.path = path
        self.lineno = linenos
        T = self.T = len(tids)
        n = np.array(n, np.int64) if T else np.zeros(0, np.int64)
        off = self.off = np.zeros(T + 1, np.int64)
        np.cumsum(n, out=off[1:])
        M = self.M = len(ids)
        self.task_id = tids
        tix = self.tix = np.repeat(np.arange(T, dtype=np.int64), n)
        flat = np.arange(M, dtype=np.int64)
        bad_task = n == 0                                          # moves is empty

        # ---- codes of the string columns (shared vocabularies; see _Vocab)
        vocab = vocab or _Vocabs()
        ids_v, agents_v, answers_v = vocab.ids, vocab.agents, vocab.answers
        if distinct_ids:                      # one code per move, in order; no target
            id_code, tg_code = flat, np.full(M, -2, np.int64)
            id_names = ids if ids.__class__ is RowIds else list(ids)
        elif targets is None:
            (id_code,) = ids_v.codes(ids)
            tg_code, id_names = np.full(M, -2, np.int64), ids_v.names
        else:
            id_code, tg_code = ids_v.codes(ids, targets)
            id_names = ids_v.names
        self.id_code, self.target_code, self.id_names = id_code, tg_code, id_names
        (raw_agent,) = _coded(agents_v, agents)
        agent = self.agent_code = agents_v.array("canon", lambda: agents_v.canon, np.int64)[raw_agent]
        self.agent_names = agents_v.canon_names
        (a_code,) = _coded(answers_v, answers)
        fresh = (ids_v.fresh, agents_v.fresh, answers_v.fresh)
        self.fresh = fresh if any(fresh) else None   # values new to the vocabularies
        self.answer_code = a_code
        self.answer_values = answers_v.values
        force = self.force_code = (forces.astype(np.int8) if isinstance(forces, np.ndarray)
                                   else _FORCE_PACKED.codes(forces).astype(np.int8))
        if isinstance(rounds, np.ndarray):
            rnd = self.rounds = rounds.astype(np.int64)
        else:
            try:                                  # the usual rounds, 0 ... 126
                rnd = self.rounds = _ROUND_PACKED.codes(rounds)
            except KeyError:
                rnd = self.rounds = np.fromiter(rounds, np.int64, M)
        if isinstance(confs, np.ndarray):
            self.conf = confs.astype(np.float64)
        else:                  # absent: _NAN (the decoder takes no NaN); null: None
            try:
                self.conf = np.fromiter(confs, np.float64, M)
                n_null = 0
            except TypeError:
                n_null = confs.count(None)
                self.conf = np.fromiter([_NAN if c is None else c for c in confs], np.float64, M)
            n_conf = M - int(np.isnan(self.conf).sum()) + n_null     # confidence keys given

        # ---- candidate lists: one shared tuple per distinct list (``cand_table``), each
        # task's index into it (``cand_index``); None: no list given
        table: dict = {}
        cands = list(map(table.setdefault, cands, cands))
        distinct = list(table)
        self.cand_table = cand_table = [c if c.__class__ is tuple else None for c in distinct]
        cand_index = self.cand_index = lookup_codes(dict(zip(distinct, range(len(distinct)))), cands)
        if cand_table == distinct:          # every task gives a list: shared as they are
            self.candidates = cands
        else:
            self.candidates = (list(operator.itemgetter(*cand_index.tolist())(cand_table))
                               if T > 1 else [cand_table[int(k)] for k in cand_index])
        cand_len = np.array([0 if c is None else len(c) for c in cand_table], np.int64)

        # ---- repeated keys: the text has more string tokens than the records account for
        if text is not None:
            a_null, a_unset = int((a_code == 0).sum()), int((a_code == 1).sum())
            t_unset, t_null = int((tg_code == -2).sum()), int((tg_code == -1).sum())
            tokens = 3 * T + 7 * M + int(cand_len[cand_index].sum()) + n_conf
            tokens += 2 * (M - a_unset) - a_null + 2 * (M - t_unset) - t_null
            for column in (golds, clusters):
                unset = column.count(UNSET)
                tokens += 2 * (T - unset) - column.count(None)
            tokens += T - cands.count(UNSET)
            if _string_tokens(b"".join(text[0])) != tokens:
                datas, records = text
                for t, (data, record) in enumerate(zip(datas, records)):
                    if _string_tokens(data) != _expected_tokens(record):
                        bad_task[t] = True

        # ---- task fields (parse_trace)
        if T:
            bad_task |= np.fromiter(map(str.isspace, tids), bool, T)     # blank task id
            if "" in tids:
                bad_task[[t for t, tid in enumerate(tids) if not tid]] = True
        cand_ok = np.array([c is None or (bool(c) and all(x.strip() for x in c))
                            for c in cand_table], bool)
        if not cand_ok.all():
            bad_task |= ~cand_ok[cand_index]                  # empty, or a blank candidate
        gold_of = {g: (g if g.__class__ is str and g.strip() else None) for g in set(golds)}
        self.gold = list(map(gold_of.__getitem__, golds))
        n_unset, n_null = clusters.count(UNSET), clusters.count(None)
        if n_unset == T:
            self.cluster = [None] * T
        elif n_unset or n_null:
            self.cluster = cluster_t = [c if c.__class__ is str else None for c in clusters]
            for t, c in enumerate(cluster_t):
                if c is not None and not c.strip():
                    bad_task[t] = True
        else:                                  # every task names its cluster
            self.cluster = clusters
            bad_task |= np.fromiter(map(str.isspace, clusters), bool, T)     # blank cluster
            if "" in clusters:
                bad_task[[t for t, c in enumerate(clusters) if not c]] = True

        # ---- move fields (parse_trace)
        has_target = tg_code >= 0
        blank_id = None if distinct_ids else ids_v.array("blank", lambda: ids_v.blank, bool)
        bad_move = agent < 0                                       # agent blank once stripped
        if canonical_agents:       # in-memory moves are not re-parsed: ids must be canonical
            bad_move |= agents_v.array("raw", lambda: [
                c < 0 or agents_v.canon_names[c] != a for a, c in zip(agents_v.names,
                                                                      agents_v.canon)], bool)[
                raw_agent]
        if blank_id is not None and blank_id.any():
            bad_move |= blank_id[id_code] | has_target & blank_id[np.maximum(tg_code, 0)]
        present = answers_v.array("present", lambda: [a is not None for a in answers_v.values],
                                  bool)
        has_answer = present[a_code]
        pv = self.pv = (force == _PROPOSE) | (force == _VOTE)
        conc = force == _CONCEDE
        chal = force == _CHALLENGE
        ret = force == _RETRACT
        bad_move |= pv & (~has_answer | has_target)
        bad_move |= conc & ~has_target
        bad_move |= chal & (~has_target | has_answer)
        bad_move |= ret & ~(has_target | has_answer)
        bad_move |= (force == _ABSTAIN) & (has_answer | has_target)

        # ---- the automaton's checks that need no normalizer
        NID = max(len(id_names), 1)
        key = tix * NID + id_code
        dense = T * NID <= 4 * M + 65536
        if distinct_ids:
            pass                                                  # no id repeats
        elif dense:
            bad_move |= np.bincount(key, minlength=T * NID)[key] > 1   # duplicate_move_id
        else:
            sk = np.sort(key)
            repeated = sk[1:][sk[1:] == sk[:-1]]
            if repeated.size:
                bad_move |= np.isin(key, repeated)                # duplicate_move_id
        if has_target.any():
            position = _table(key, flat, T * NID, dense)
            tpos = np.where(has_target, position(tix * NID + np.maximum(tg_code, 0)), -1)
        else:
            tpos = np.full(M, -1, np.int64)
        target_ok = has_target & (tpos >= 0) & (tpos < flat)
        bad_move |= has_target & ~target_ok      # unknown_target, target_not_earlier
        tp = np.where(target_ok, tpos, flat)
        root = np.where(conc & target_ok, tpos, flat)             # concede chains
        while True:
            nxt = root[root]
            if np.array_equal(nxt, root):
                break
            root = nxt
        t_root = self.t_root = root[tp]
        t_answer = self.t_has_answer = target_ok & pv[t_root]
        bad_move |= (conc | chal | (ret & has_target)) & ~t_answer   # target_without_answer
        same = self.same_agent = target_ok & (agent[tp] == agent)
        bad_move |= ret & has_target & ~same                        # retract_not_own
        down = (rnd[1:] < rnd[:-1]) & (tix[1:] == tix[:-1])
        if down.any():                 # rounds go down somewhere: check them per agent
            sel = np.isin(tix, np.unique(tix[1:][down]))
            t_s, a_s, r_s = tix[sel], agent[sel], rnd[sel]
            order = np.lexsort((flat[sel], a_s, t_s))
            t_s, a_s, r_s = t_s[order], a_s[order], r_s[order]
            fall = (t_s[1:] == t_s[:-1]) & (a_s[1:] == a_s[:-1]) & (r_s[1:] < r_s[:-1])
            bad_task[t_s[1:][fall]] = True                          # round_decreasing
        self.has_target, self.conc, self.chal, self.ret = has_target, conc, chal, ret
        bad_task[tix[bad_move]] = True
        self.plain = ~bad_task
        self._resolutions: dict = {}

    # ------------------------------------------------------------------ the automaton, keyed
    def resolution(self, normalizer: Normalizer, abstain_candidate: str | None = None,
                   memo: Normalizer | None = None):
        """``(block, where)``: the :class:`ResolvedBlock` of the plain tasks as
        :func:`bda_jax.resolve_trace` would resolve them with ``normalizer`` and
        ``abstain_candidate``, and ``where`` [T] each task's position in it (-1: not plain,
        the reference path decides). ``None`` when the fast path cannot decide any task (a
        normalizer that raises, an ``abstain_candidate`` that is no answer). Cached per
        (normalizer, abstain_candidate); ``memo`` is ``normalizer`` memoized."""
        key = (normalizer, abstain_candidate)
        if key not in self._resolutions:
            out = self.resolved_columns(memo or memoized(normalizer), abstain_candidate)
            self.keep_resolution(key, None if out is None else (self.block(*out), out[1]))
        return self._resolutions[key]

    def keep_resolution(self, key, out) -> None:
        """Cache ``out`` (what :meth:`resolution` returns) under ``key`` (at most four kept)."""
        self._resolutions = {key: out} if len(self._resolutions) > 3 else \
            {**self._resolutions, key: out}

    def resolved_columns(self, norm: Normalizer, abstain_candidate: str | None):
        """``(columns, where)`` of :meth:`resolution` before the block is assembled
        (:meth:`block`), for the memoized normalizer ``norm``; ``None`` where the fast path
        cannot decide. ``columns``: ``candidates`` and ``keys`` per plain task, then the
        arrays of :data:`BLOCK_ARRAYS`."""
        try:
            return self._resolve(norm, abstain_candidate)
        except _Fallback:
            return None

    def block(self, columns: dict, where: np.ndarray):
        """The :class:`ResolvedBlock` of :meth:`resolved_columns`' result (task ids, clusters
        and sources of the plain tasks from this chunk's columns)."""
        from .counts import ResolvedBlock    # here: parse workers import this module without JAX
        ok = np.flatnonzero(where >= 0).tolist()
        if len(ok) == len(self.task_id):  # every task plain: the columns as they are
            pick = list
        elif len(ok) > 1:
            pick = lambda column, get=operator.itemgetter(*ok): list(get(column))
        else:
            pick = lambda column: [column[t] for t in ok]
        task_id, cluster = pick(self.task_id), pick(self.cluster)
        if None in cluster:               # no cluster given: the task id
            cluster = (list(task_id) if cluster.count(None) == len(cluster) else
                       [t if c is None else c for t, c in zip(task_id, cluster)])
        return ResolvedBlock(
            task_id=task_id, candidates=columns["candidates"], keys=columns["keys"],
            cluster=cluster, sources=list(zip(itertools.repeat(self.path), pick(self.lineno))),
            agent_names=self.agent_names, id_names=self.id_names,
            **{name: columns[name] for name in BLOCK_ARRAYS})

    def _resolve(self, norm: Normalizer, abstain):
        T, M = self.T, self.M
        tix, force, agent = self.tix, self.force_code, self.agent_code
        pv, conc, chal, ret, has_target = self.pv, self.conc, self.chal, self.ret, self.has_target
        bad_task = ~self.plain
        kcode: dict[str, int] = {}
        code_of = lambda s: kcode.setdefault(s, len(kcode))

        # answer keys (-1: no answer, or "" after normalizing: no answer either)
        values = self.answer_values
        used = [k for k in np.unique(self.answer_code).tolist() if values[k] is not None]
        akey = np.full(int(self.answer_code.max(initial=0)) + 1, -1, np.int64)
        for k, s in zip(used, _normalize_all(norm, [values[k] for k in used])):
            if s:
                akey[k] = code_of(s)
        mk = akey[self.answer_code]
        uk = None
        if abstain is not None:
            if abstain.__class__ is not str:
                raise _Fallback
            (uk_s,) = _normalize_all(norm, [abstain])
            if not uk_s:
                raise _Fallback
            uk = code_of(uk_s)

        # given candidate lists (per distinct list of cand_table; cand_index per task): keys
        # non-empty and distinct, else a task-level error
        table, ci = self.cand_table, self.cand_index
        sets = []                   # per list: (keys, key codes), or None (no list, or bad)
        for cs in table:
            if cs is None:
                sets.append(None)
                continue
            keys = _normalize_all(norm, cs)
            ok = all(keys) and len(set(keys)) == len(keys)
            sets.append((tuple(keys), tuple(map(code_of, keys))) if ok else None)
        fixed = np.array([cs is not None for cs in table], bool)[ci] if T else np.zeros(0, bool)
        list_ok = np.array([s is not None for s in sets], bool)
        bad_task |= fixed & ~list_ok[ci]
        golds = [g for g in dict.fromkeys(self.gold) if g is not None]
        gkey = dict(zip(golds, _normalize_all(norm, golds)))
        gcode = {g: code_of(k) if k else -1 for g, k in gkey.items()}
        gcode[None] = -1
        gold_code = lookup_codes(gcode, self.gold) if T else np.zeros(0, np.int64)
        NK = max(len(kcode), 1)

        bad = pv & (mk < 0)                                   # missing_answer (normalized)
        t_aof = np.where(self.t_has_answer, mk[self.t_root], -1)   # the target's answer key
        ret_t, ret_u = ret & has_target, ret & ~has_target
        bad |= (conc | ret_t) & (mk >= 0) & (mk != t_aof)      # answer_mismatch / not a candidate
        bad |= ret_u & (mk < 0)                               # missing_answer
        sign = np.zeros(M, np.int8)
        sign[pv] = 1
        sign[conc & ~self.same_agent] = 1                     # a self-concede carries nothing
        sign[chal | ret] = -1
        ckey = np.where(pv | ret_u, mk, np.where(conc | chal | ret_t, t_aof, -1))
        if ret_u.any():            # retract_unendorsed: an earlier own + of the same candidate
            flat = np.arange(M, dtype=np.int64)
            endorse = (sign > 0) & (ckey >= 0) & (agent >= 0)
            NA = max(len(self.agent_names), 1)
            comp = (tix * NA + np.maximum(agent, 0)) * NK + np.maximum(ckey, 0)
            first = _table(comp[endorse], flat[endorse], 0, False)   # earliest such move
            q = ret_u & (ckey >= 0)
            at = first(comp[q])
            earlier = np.zeros(M, bool)
            earlier[q] = (at >= 0) & (at < flat[q])
            bad |= ret_u & ~earlier
        bad_task[tix[bad]] = True

        # candidate slots: given lists (abstain appended if absent), or first-seen answers
        K_given = np.zeros(T, np.int64)
        slot_t, slot_k, slot_v = [], [], []
        fixed_idx = np.flatnonzero(fixed & ~bad_task)
        if fixed_idx.size:          # slot v of list l holds key code list_codes[list_off[l] + v]
            list_K = np.array([0 if s is None else len(s[1]) for s in sets], np.int64)
            list_off = np.zeros(len(sets) + 1, np.int64)
            np.cumsum(list_K, out=list_off[1:])
            list_codes = np.fromiter(itertools.chain.from_iterable(
                s[1] for s in sets if s is not None), np.int64, int(list_off[-1]))
            fci = ci[fixed_idx]
            K_given[fixed_idx] = list_K[fci]
            n_slots = list_K[fci]
            slot_t.append(np.repeat(fixed_idx, n_slots))
            slot_v.append(np.arange(int(n_slots.sum())) - np.repeat(np.cumsum(n_slots) - n_slots,
                                                                    n_slots))
            slot_k.append(list_codes[np.repeat(list_off[fci], n_slots) + slot_v[-1]])
        fs = pv & ~fixed[tix] & (mk >= 0) & ~bad_task[tix]
        if uk is not None:
            fs &= mk != uk
        fs_flat = np.flatnonzero(fs)
        groups, first = np.unique(tix[fs_flat] * NK + mk[fs_flat], return_index=True)
        order = np.argsort(fs_flat[first], kind="stable")
        g_task, g_key, g_first = groups[order] // NK, groups[order] % NK, fs_flat[first][order]
        g_slot = np.arange(g_task.size) - np.searchsorted(g_task, g_task)
        unknown_given = np.zeros(T, bool)
        if uk is not None:
            g_slot = g_slot + 1
            first_seen_idx = np.flatnonzero(~fixed & ~bad_task)
            slot_t.append(first_seen_idx)
            slot_k.append(np.full(first_seen_idx.size, uk, np.int64))
            slot_v.append(np.zeros(first_seen_idx.size, np.int64))
            if fixed_idx.size:
                has_uk = np.array([s is not None and uk in s[1] for s in sets], bool)[fci]
                unknown_given[fixed_idx[~has_uk]] = True       # appended after the candidates
                slot_t.append(fixed_idx[~has_uk])
                slot_k.append(np.full(int((~has_uk).sum()), uk, np.int64))
                slot_v.append(K_given[fixed_idx[~has_uk]])
        slot_t.append(g_task)
        slot_k.append(g_key)
        slot_v.append(g_slot)
        slot_t, slot_k, slot_v = (np.concatenate(x) if x else np.zeros(0, np.int64)
                                  for x in (slot_t, slot_k, slot_v))
        slot = _table(slot_t * NK + slot_k, slot_v, T * NK, T * NK <= 4 * M + 65536)
        # a propose / vote of a given list names one of its candidates (not the appended one)
        pvf = np.flatnonzero(pv & fixed[tix] & ~bad_task[tix])
        if pvf.size:
            s = slot(tix[pvf] * NK + np.maximum(mk[pvf], 0))
            miss = (s < 0) | unknown_given[tix[pvf]] & (s == K_given[tix[pvf]])
            bad_task[tix[pvf[miss]]] = True                        # answer_not_candidate
        bad_task |= ~fixed & (np.bincount(tix[pv & (mk >= 0)], minlength=T) == 0)   # no candidates
        if uk is not None:
            ab = force == _ABSTAIN
            sign[ab] = 1
            ckey[ab] = uk

        # ---- the block of the plain tasks
        ok = ~bad_task
        where = np.full(T, -1, np.int64)
        ok_idx = np.flatnonzero(ok)
        where[ok_idx] = np.arange(ok_idx.size)
        ok_move = ok[tix]
        e = np.flatnonzero((sign != 0) & ok_move)
        e_task = tix[e]
        e_cand = slot(e_task * NK + np.maximum(ckey[e], 0))
        e_sign = sign[e]
        e_conf = np.where(e_sign < 0, np.nan, self.conf[e])
        m_sel = np.flatnonzero(ok_move)
        off_new = lambda counts: np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        m_off = off_new(np.diff(self.off)[ok_idx])
        e_off = off_new(np.bincount(where[e_task], minlength=ok_idx.size)[:ok_idx.size]
                        if e.size else np.zeros(ok_idx.size, np.int64))

        names = list(kcode)
        g_lists: dict[int, list] = {}
        for t, k, f in zip(g_task.tolist(), g_key.tolist(), g_first.tolist()):
            g_lists.setdefault(t, []).append((names[k], self.answer_values[self.answer_code[f]]))
        # per list: its candidates and keys as a task shows them (abstain appended if absent)
        shown = [None if s is None else
                 (table[k], s[0]) if uk is None or uk in s[1] else
                 (table[k] + (abstain,), s[0] + (names[uk],)) for k, s in enumerate(sets)]
        ok_fixed = fixed[ok_idx]
        if ok_fixed.all():          # every plain task gives its list
            pairs = ([shown[k] for k in ci[ok_idx].tolist()] if ok_idx.size < 2 else
                     operator.itemgetter(*ci[ok_idx].tolist())(shown))
            candidates, keys = list(map(_FIRST, pairs)), list(map(_SECOND, pairs))
        else:
            candidates, keys = [], []
            for t, li in zip(ok_idx.tolist(), ci[ok_idx].tolist()):
                if fixed[t]:
                    cs, ks = shown[li]
                else:
                    pairs = g_lists.get(t, [])
                    ks = tuple(k for k, _ in pairs)
                    cs = tuple(d for _, d in pairs)
                    if uk is not None:
                        cs, ks = (abstain,) + cs, (names[uk],) + ks
                candidates.append(cs)
                keys.append(ks)
        gold = np.where(gold_code[ok_idx] >= 0,
                        slot(ok_idx * NK + np.maximum(gold_code[ok_idx], 0)), -1)
        gold_missing = (gold_code[ok_idx] >= 0) & (gold < 0)
        columns = dict(
            candidates=candidates, keys=keys, gold=gold.astype(np.int32),
            gold_missing=gold_missing, m_off=m_off, m_agent=agent[m_sel].astype(np.int32),
            e_off=e_off, e_agent=agent[e].astype(np.int32), e_cand=e_cand.astype(np.int32),
            e_sign=e_sign, e_round=self.rounds[e], e_conf=e_conf, e_force=force[e],
            e_id=self.id_code[e].astype(np.int32))
        return columns, where

    # ------------------------------------------------------------------ Move objects
    def moves_of(self, t: int) -> tuple:
        """Task ``t``'s :class:`~bda_jax.Move` objects (what :func:`bda_jax.parse_trace`
        builds from the line)."""
        s, e = int(self.off[t]), int(self.off[t + 1])
        ids, agents, values = self.id_names, self.agent_names, self.answer_values
        return moves_from_columns(
            [ids[c] for c in self.id_code[s:e].tolist()],
            [agents[c] for c in self.agent_code[s:e].tolist()],
            self.rounds[s:e].tolist(),
            [FORCES[f] for f in self.force_code[s:e].tolist()],
            [values[c] for c in self.answer_code[s:e].tolist()],
            [ids[c] if c >= 0 else None for c in self.target_code[s:e].tolist()],
            [None if c != c else c for c in self.conf[s:e].tolist()])


# ----------------------------------------------------------------------------------- reading
class _Lines:
    """The non-blank lines of a binary file, ``n`` at a time, numbered as
    :func:`~bda_jax._core.io.numbered_lines` numbers them (``\\n``, ``\\r\\n`` and a bare
    ``\\r`` end a line) but split a block of the file at a time. Blank here: ASCII whitespace
    only, which the reference reader skips too; every other line is judged by it."""

    BLOCK = 1 << 18

    def __init__(self, handle, keep_line: Callable[[int], bool] | None):
        self._handle, self._keep = handle, keep_line
        self._rest = b""
        self._lineno = 0
        self._linenos: list[int] = []
        self._datas: list[bytes] = []
        self._at = 0
        self._eof = False

    def _fill(self) -> None:
        block = self._handle.read(self.BLOCK)
        if block:
            data = self._rest + block
            raw = data.split(b"\n")
            self._rest = raw.pop()          # the line the next block completes
            if not raw:
                return
            if b"\r" in data:              # \r\n: drop the \r; a bare \r: more lines
                raw = [piece for r in raw for piece in (r[:-1] if r.endswith(b"\r") else r)
                       .split(b"\r")]
            del data
        else:
            self._eof = True
            raw = self._rest.split(b"\r") if self._rest else []
            self._rest = b""
        first = self._lineno + 1
        self._lineno += len(raw)
        keep = self._keep
        self._linenos = [n for n, d in enumerate(raw, first) if (keep is None or keep(n))
                         and (d[:1] == b"{" or d.strip())]
        self._datas = [raw[n - first] for n in self._linenos]
        self._at = 0

    def take(self, n: int) -> tuple[list[int], list[bytes]]:
        """Up to ``n`` more lines: (line numbers, bytes); empty at the end of the file."""
        linenos, datas = [], []
        while len(linenos) < n:
            if self._at >= len(self._linenos):
                if self._eof:
                    break
                self._fill()
                continue
            k = min(len(self._linenos), self._at + n - len(linenos))
            linenos += self._linenos[self._at:k]
            datas += self._datas[self._at:k]
            self._at = k
        return linenos, datas


class _Chunk:
    """A chunk of lines, prepared (decoded, checked as arrays, resolved) for
    :meth:`_Reader.finish`: ``linenos`` (its non-blank lines), ``kind[k]`` (line k's task in
    ``fast``, a :class:`FastTasks` or None; -1: the reference path reads the line),
    ``resolution`` (``fast.resolution(...)`` for the reader's normalizer: ``(block, where)``,
    or ``(columns, where)`` in a parse worker; None: the reference path reads every line),
    ``where`` (``resolution[1]`` as a list) and ``data(k)`` (line k's bytes)."""

    __slots__ = ("linenos", "kind", "fast", "resolution", "where", "data")

    def __init__(self, linenos, kind, fast, resolution, data):
        self.linenos, self.kind, self.fast, self.resolution = linenos, kind, fast, resolution
        self.where = resolution[1].tolist() if resolution is not None else None
        self.data = data


class _Reader:
    """Checks chunks of lines in file order: plain tasks from the fast path, every other
    line through the reference path (:func:`~bda_jax._core.traces.check_trace`).
    :meth:`prepare` raises nothing a file can cause (what it cannot decide goes to the
    reference path); :meth:`finish` raises the reference path's errors, line by line."""

    def __init__(self, path: str, normalizer: Normalizer, lenient: bool,
                 abstain_candidate: str | None, memo_slow: bool):
        self.path, self.normalizer, self.lenient = path, normalizer, lenient
        self.abstain = abstain_candidate
        self.memo = memoized(normalizer)
        self.slow_normalizer = self.memo if memo_slow else normalizer
        self.first_line: dict[str, int] = {}
        self.skipped: Counter = Counter()
        self.vocab = _Vocabs()
        self.decoders = _Decoders()

    def _decode(self, linenos, datas):
        """Records of the lines the compiled decoder takes; ``kind[k]``: line k's record, or
        -1 (the reference path reads it)."""
        if len(datas) < MIN_FAST_LINES:      # too few lines to pay for the arrays
            return [], [-1] * len(datas), [], []
        one = self.decoders.one
        try:
            return [one(data) for data in datas], range(len(datas)), linenos, datas
        except msgspec.MsgspecError:         # line by line (one line, one value: exact lines)
            pass
        records, kind, fast_linenos, fast_datas = [], [], [], []
        for lineno, data in zip(linenos, datas):
            try:
                records.append(one(data))
            except msgspec.MsgspecError:
                try:
                    records.append(_DECODE(data))     # a value not seen yet?
                except msgspec.MsgspecError:
                    kind.append(-1)
                    continue
            kind.append(len(fast_datas))
            fast_linenos.append(lineno)
            fast_datas.append(data)
        return records, kind, fast_linenos, fast_datas

    def prepare(self, linenos: list[int], datas: list[bytes], resolve: str = "block") -> _Chunk:
        """The chunk of these lines, decoded and checked; ``resolve``: ``"block"`` (resolved
        into a :class:`ResolvedBlock`), ``"columns"`` (resolved, the block not assembled: a
        parse worker) or ``"none"`` (a parse worker whose normalizer stays in the caller)."""
        records, kind, fast_linenos, fast_datas = self._decode(linenos, datas)
        fast = (FastTasks(self.path, fast_linenos, fast_datas, records, self.vocab) if records
                else None)
        del records
        if fast is not None and fast.fresh:
            self.decoders.learn(*fast.fresh)
        resolution = None
        if fast is not None and resolve == "block":
            resolution = fast.resolution(self.normalizer, self.abstain, self.memo)
        elif fast is not None and resolve == "columns":
            resolution = fast.resolved_columns(self.memo, self.abstain)
        return _Chunk(linenos, kind, fast, resolution, datas.__getitem__)

    def finish(self, ch: _Chunk, lo: int, hi: int, want_traces: bool):
        """``(block, traces, n_tasks)`` for lines ``lo:hi`` of a prepared chunk (``traces``
        None unless asked), in file order: a plain task once its id is known new, every other
        line through the reference path (which raises its error)."""
        path, fast, where, first_line = self.path, ch.fast, ch.where, self.first_line
        linenos, kind = ch.linenos, ch.kind
        if where is not None and -1 not in kind[lo:hi]:
            # the usual chunk: every line a plain task, no task id repeated or seen before
            js = kind[lo:hi]      # increasing (kind numbers the decoded lines in order)
            if js and js[-1] - js[0] == len(js) - 1:          # a run of decoded lines
                run = slice(js[0], js[-1] + 1)
                pick = lambda column: column[run]
                order = ch.resolution[1][run]
            else:
                pick = lambda column: [column[j] for j in js]
                order = ch.resolution[1][list(js)]
            tids = pick(fast.task_id)
            if len(order) and order.min() >= 0 and len(set(tids)) == len(tids) and \
                    first_line.keys().isdisjoint(tids):
                first_line.update(zip(tids, linenos[lo:hi]))
                block = ch.resolution[0].take(order)
                traces = lazy_traces(tids, pick(fast.candidates), pick(fast.gold),
                                     pick(fast.cluster), block.sources,   # (path, line) each
                                     fast, js) if want_traces else None
                return block, traces, len(order)
        order = []                # per task: position in the fast block, or ~k of slow[k]
        slow_resolved, slow_sources, traces = [], [], [] if want_traces else None
        for k in range(lo, hi):
            lineno, j = linenos[k], kind[k]
            if j >= 0 and where is not None and where[j] >= 0:
                task_id = fast.task_id[j]
                if task_id in first_line:
                    raise TraceError(f"duplicate task_id (first on line {first_line[task_id]})",
                                     file=path, line=lineno, task_id=task_id, field="task_id")
                first_line[task_id] = lineno
                order.append(where[j])
                if want_traces:
                    traces.append(lazy_trace(task_id, fast.candidates[j], fast.gold[j],
                                             fast.cluster[j], (path, lineno), (fast, j)))
                continue
            found, raw = decode_json_line(ch.data(k), path, lineno, TraceError)
            if not found:
                continue
            trace, resolved = check_trace(path, lineno, raw, first_line, self.slow_normalizer,
                                          self.lenient)
            if self.lenient:
                self.skipped.update(s.code for s in trace.skipped)
            if self.abstain is not None:
                resolved = resolve_trace(trace, normalizer=self.slow_normalizer,
                                         lenient=self.lenient, abstain_candidate=self.abstain)
            order.append(~len(slow_resolved))
            slow_resolved.append(resolved)
            slow_sources.append(trace.source)
            if want_traces:
                traces.append(trace)
        if not order:
            return None, traces, 0
        resolution = ch.resolution
        if not slow_resolved:
            return resolution[0].take(order), traces, len(order)
        from .counts import ResolvedBlock    # here: parse workers import this module without JAX
        n_fast = resolution[0].n_tasks if resolution is not None else 0
        pieces = [ResolvedBlock.from_resolved(slow_resolved, slow_sources)]
        if n_fast:
            pieces.insert(0, resolution[0])
        block = ResolvedBlock.concat(pieces)
        block = block.take([p if p >= 0 else n_fast + ~p for p in order])
        return block, traces, len(order)


def _open(path: str):
    try:
        return open(path, "rb")
    except OSError as err:
        raise TraceError(f"cannot open trace file: {err.strerror}", file=path) from None


# ------------------------------------------------------------------------------ parse workers
#: Processes that parse a file (``workers``: this one and ``workers - 1`` worker processes):
#: the automatic number is at most this many, and one worker per CPU this process may run on;
#: ``BDA_JAX_PARSE_WORKERS`` (a positive integer) replaces that cap, ``1`` turns the workers
#: off.
MAX_AUTO_WORKERS = 8
WORKERS_ENV = "BDA_JAX_PARSE_WORKERS"
#: A worker costs a Python start with NumPy and msgspec (about 0.25 s of CPU, 60 MB; no JAX):
#: the automatic choice uses one process per this many bytes of file, so a file under twice
#: this size is read in this process alone.
MIN_BYTES_PER_WORKER = 16 << 20
#: Bytes of the file a worker reads per request (whole lines: a segment ends after a ``\n``).
SEGMENT_BYTES = 4 << 20
#: Pipe buffer asked for a worker's replies (Linux caps it at /proc/sys/fs/pipe-max-size).
PIPE_BYTES = 1 << 20
#: This process parses one segment in this many itself when two or three processes parse a
#: file (it also finishes every chunk: about a third of what preparing one costs), none when
#: more do (finishing keeps it busy).
_OWN_PERIOD = {2: 3, 3: 9}
#: Requests each worker holds at a time (one being parsed, one queued).
_DEPTH = 2


def check_workers(workers) -> int | None:
    """A ``workers=`` argument (processes that parse the file: this one and ``workers - 1``
    worker processes): ``None`` (automatic, :func:`auto_workers`) or a positive integer, else
    :class:`~bda_jax.DataError` naming the field."""
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        from .errors import DataError
        raise DataError(f"workers must be a positive integer or None, got {workers!r}",
                        field="workers")
    return workers


def auto_workers(size: int) -> int:
    """The automatic ``workers`` for a regular file of ``size`` bytes (processes that parse
    it: this one and ``workers - 1`` worker processes): one per :data:`MIN_BYTES_PER_WORKER`
    bytes, at most one worker per CPU this process may run on (``os.sched_getaffinity``; this
    process finishes the chunks and prepares a small share) and :data:`MAX_AUTO_WORKERS` in
    all -- or at most ``$BDA_JAX_PARSE_WORKERS``; 1 (no worker: the file is read in this
    process) on one CPU and below twice :data:`MIN_BYTES_PER_WORKER`."""
    cap = env_count(WORKERS_ENV, 1)
    if cap is None:
        cpus = usable_cpus()
        cap = min(cpus + 1, MAX_AUTO_WORKERS) if cpus > 1 else 1
    return max(1, min(cap, size // MIN_BYTES_PER_WORKER))


def _pread(fd: int, n: int, at: int) -> bytes:
    """``n`` bytes of the file at offset ``at`` (fewer only at the end of the file)."""
    out = os.pread(fd, n, at)
    if len(out) < n:
        parts = [out]
        while n > 0 and out:
            n, at = n - len(out), at + len(out)
            out = os.pread(fd, n, at)
            parts.append(out)
        out = b"".join(parts)
    return out


def _segment_bounds(fd: int, size: int, step: int) -> list[int]:
    """Offsets ``0 = b0 < b1 < ... = size`` that cut the file into segments of about ``step``
    bytes, each ending just after a ``\\n`` (a line start under every line ending the reader
    accepts: ``\\n``, ``\\r\\n``, a bare ``\\r``); a file without one is one segment."""
    bounds = [0]
    while bounds[-1] + step < size:
        at = bounds[-1] + step - 1
        while True:
            block = os.pread(fd, 1 << 16, at)
            i = block.find(b"\n")
            if i >= 0 or not block:
                break
            at += len(block)
        end = at + i + 1 if block else size
        if end >= size:
            break
        bounds.append(end)
    bounds.append(size)
    return bounds


def _segment_lines(buf: bytes, at: int):
    """The lines of ``buf`` (whole lines of the file from offset ``at``) numbered and split as
    :class:`_Lines` numbers and splits them: ``(numbers, starts, lengths, datas)`` of the
    non-blank lines (numbers from 1 in the segment; starts and lengths in bytes, int64) and the
    number of lines in all."""
    pieces = buf.split(b"\n")
    rest = pieces.pop()                 # b"" unless the file ends without a line end
    if b"\r" not in buf:
        lines = pieces + [rest] if rest else pieces
        lengths = np.fromiter(map(len, lines), np.int64, len(lines))
        starts = np.empty(len(lines), np.int64)
        if lines:
            starts[0] = at
            np.cumsum(lengths[:-1] + 1, out=starts[1:])
            starts[1:] += at
    else:                               # \r\n: drop the \r; a bare \r: more lines
        lines, first = [], []
        pos = at
        for piece in pieces:
            body = piece[:-1] if piece.endswith(b"\r") else piece
            q = pos
            for line in body.split(b"\r"):
                lines.append(line)
                first.append(q)
                q += len(line) + 1
            pos += len(piece) + 1
        for line in rest.split(b"\r") if rest else ():
            lines.append(line)
            first.append(pos)
            pos += len(line) + 1
        lengths = np.fromiter(map(len, lines), np.int64, len(lines))
        starts = np.array(first, np.int64)
    if all(map(bytes.startswith, lines, itertools.repeat(b"{"))):     # no blank line
        return list(range(1, len(lines) + 1)), starts, lengths, lines, len(lines)
    keep = [k for k, d in enumerate(lines) if d[:1] == b"{" or d.strip()]
    if len(keep) == len(lines):
        return list(range(1, len(lines) + 1)), starts, lengths, lines, len(lines)
    return ([k + 1 for k in keep], starts[keep], lengths[keep], [lines[k] for k in keep],
            len(lines))


def _splits(n: int, size: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into the fewest near-equal runs of at most ``size`` (none if n == 0)."""
    count = -(-n // size)
    return [(n * i // count, n * (i + 1) // count) for i in range(count)]


#: Named normalizers a worker can apply itself (others stay in the calling process).
_NORMALIZERS = {"default": default_normalizer, "identity": identity_normalizer}
#: FastTasks arrays a worker sends (the rest are derived from them: :func:`_fast_from`).
_FAST_ARRAYS = ("off", "id_code", "target_code", "agent_code", "answer_code", "force_code",
                "rounds", "conf", "t_root", "t_has_answer", "same_agent", "plain")
_FRAME = struct.Struct("<QQ")


def _utf8(text: str) -> bool:
    """Whether ``text`` is valid Unicode (no lone surrogate), so UTF-8 can carry it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _WorkerGone(Exception):
    """A parse worker's reply ended early (the process exited)."""


def _tabled(values: list):
    """``values`` (objects, or None) as a table and an index [n] into it (-1: None): one entry
    per distinct object (a chunk's tasks share their candidate tuples), found by identity."""
    keys = list(map(id, values))
    distinct = dict(zip(keys, values))              # first seen first
    distinct.pop(id(None), None)
    position = dict(zip(distinct, range(len(distinct))))
    position[id(None)] = -1
    return list(distinct.values()), lookup_codes(position, keys) if keys else np.zeros(0, np.int64)


def _untabled(table: list, index: np.ndarray) -> list:
    """The values of :func:`_tabled` again (lists read back as tuples)."""
    table = [tuple(v) for v in table]
    return [table[i] if i >= 0 else None for i in index.tolist()]


def _narrow(a: np.ndarray) -> np.ndarray:
    """``a`` in the smallest signed integer type that holds its values (int64 codes and
    offsets are mostly small; :func:`_receive` casts them back)."""
    if a.dtype != np.int64 or not a.size:
        return a
    lo, hi = int(a.min()), int(a.max())
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return a.astype(dtype)
    return a


def _send(out, head: dict, arrays: dict) -> None:
    """One message: a frame (sizes), the msgpack ``head`` (strings, numbers; no pickle) and
    the raw bytes of ``arrays`` (1-d; int64 ones narrowed), their dtypes and sizes listed in
    the head."""
    body = [np.ascontiguousarray(_narrow(a)) for a in arrays.values()]
    head["arrays"] = [(name, b.dtype.str, b.size, a.dtype.str)
                      for (name, a), b in zip(arrays.items(), body)]
    h = msgspec.msgpack.encode(head)
    out.write(_FRAME.pack(len(h), sum(a.nbytes for a in body)))
    out.write(h)
    for a in body:
        if a.nbytes:
            out.write(a.view(np.uint8).data)
    out.flush()


class _Replies:
    """A worker's replies, taken off its pipe by a thread as they come (so that the worker
    never waits for this process to reach them; the replies held are bounded by the requests
    sent). :meth:`get` gives the next message's head and body bytes, and raises
    :class:`_WorkerGone` once the pipe ends (the worker exited)."""

    def __init__(self, stream):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True,
                                       name="bda_jax parse replies")
        self.thread.start()

    def _read(self, stream) -> None:
        try:
            while True:
                frame = stream.read(_FRAME.size)
                if len(frame) != _FRAME.size:
                    break
                nh, nb = _FRAME.unpack(frame)
                head, body = stream.read(nh), stream.read(nb)
                if len(head) != nh or len(body) != nb:
                    break
                self._queue.put((head, body))
        except (OSError, ValueError):       # the pipe closed under the read
            pass
        self._queue.put(None)

    def get(self) -> tuple[bytes, bytes]:
        item = self._queue.get()
        if item is None:
            self._queue.put(None)
            raise _WorkerGone
        return item


def _receive(replies: _Replies) -> tuple[dict, dict]:
    """One :func:`_send` message: the head and the arrays (each an owned, writable copy in
    the dtype it was sent from)."""
    h, body = replies.get()
    head = msgspec.msgpack.decode(h)
    arrays, at = {}, 0
    for name, sent, n, dtype in head.pop("arrays"):
        sent, dtype = np.dtype(sent), np.dtype(dtype)
        arrays[name] = (np.frombuffer(body, sent, n, at).astype(dtype) if n else
                        np.zeros(0, dtype))
        at += n * sent.itemsize
    return head, arrays


def _vocab_update(vocab: _Vocabs, sent: dict) -> dict:
    """The vocabulary entries added since the last message (``(False, new)``), or the whole
    list where the vocabulary started afresh (``(True, all)``); ``sent`` records what went."""
    out = {}
    for kind, values in (("id", vocab.ids.names), ("agent", vocab.agents.canon_names),
                         ("answer", vocab.answers.values)):
        last, n = sent.get(kind, (None, 0))
        out[kind] = (False, values[n:]) if last is values else (True, values)
        sent[kind] = (values, len(values))
    return out


def _message(ch: _Chunk, starts, lengths, vocab: _Vocabs, sent: dict, full: bool):
    """The ``(head, arrays)`` of one chunk a worker prepared: its lines (numbers in the
    segment, byte ranges), what the decoder took, the task ids and clusters, the resolved
    columns where the worker resolved them, and -- if ``full`` -- every
    :class:`FastTasks` column (lazy traces, a normalizer of the caller's)."""
    n = len(ch.linenos)
    arrays = {"lineno": np.array(ch.linenos, np.int64), "start": starts, "length": lengths,
              "kind": np.fromiter(ch.kind, np.int64, n)}
    head: dict = {"t": "chunk"}
    fast = ch.fast
    if fast is not None:
        head["vocab"] = _vocab_update(vocab, sent)
        head["task_id"], head["cluster"] = fast.task_id, fast.cluster
        head["full"] = full
        if full:
            arrays.update((name, getattr(fast, name)) for name in _FAST_ARRAYS)
            head["gold"] = fast.gold
            head["candidates"] = fast.cand_table          # (None: no list given)
            arrays["candidates"] = fast.cand_index
        if ch.resolution is not None:
            columns, where = ch.resolution
            arrays["where"] = where
            arrays.update(("r_" + name, columns[name]) for name in BLOCK_ARRAYS)
            head["r_candidates"], arrays["r_candidates"] = _tabled(columns["candidates"])
            head["r_keys"], arrays["r_keys"] = _tabled(columns["keys"])
        head["resolved"] = ch.resolution is not None
    return head, arrays


def _fast_from(path: str, head: dict, arrays: dict, linenos: list, kind: np.ndarray,
               names: dict) -> FastTasks:
    """The :class:`FastTasks` of a worker's message (what :meth:`FastTasks._build` set, the
    boolean force masks and task index derived again; without ``head["full"]``, only what
    :meth:`FastTasks.block` reads: a chunk of the stream); ``names``: this worker's
    vocabularies, brought up to date here."""
    for k, (fresh, values) in head["vocab"].items():
        if fresh:
            names[k] = values
        else:
            names[k].extend(values)
    self = object.__new__(FastTasks)
    self.path = path
    self.lineno = [n for n, j in zip(linenos, kind.tolist()) if j >= 0]
    self.task_id, self.cluster = head["task_id"], head["cluster"]
    self.id_names, self.agent_names, self.answer_values = names["id"], names["agent"], \
        names["answer"]
    self._resolutions = {}
    if not head["full"]:
        return self
    for name in _FAST_ARRAYS:
        setattr(self, name, arrays[name])
    T = self.T = len(self.off) - 1
    self.M = int(self.off[-1])
    self.tix = np.repeat(np.arange(T, dtype=np.int64), np.diff(self.off))
    force = self.force_code
    self.pv = (force == _PROPOSE) | (force == _VOTE)
    self.conc, self.chal, self.ret = force == _CONCEDE, force == _CHALLENGE, force == _RETRACT
    self.has_target = self.target_code >= 0
    self.gold = head["gold"]
    table = self.cand_table = [None if c is None else tuple(c) for c in head["candidates"]]
    index = self.cand_index = arrays["candidates"]
    self.candidates = (list(operator.itemgetter(*index.tolist())(table)) if T > 1 else
                       [table[k] for k in index.tolist()])
    self.fresh = None
    return self


def _serve(config: str) -> None:
    """A parse worker's loop (the process :func:`_pool_chunks` starts): each request on stdin
    (``start end``: a segment of whole lines) is answered on stdout with one message per chunk
    of its lines and an end message holding the segment's line count. It returns at the end
    of stdin, when the caller is done."""
    global MIN_FAST_LINES
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the caller stops its workers itself
    out, sys.stdout = sys.stdout.buffer, sys.stderr    # stdout carries the replies only
    cfg = msgspec.json.decode(config)
    MIN_FAST_LINES = cfg["min_fast_lines"]
    named = _NORMALIZERS.get(cfg["normalizer"])
    reader = _Reader(cfg["path"], named or default_normalizer, False, cfg["abstain"], True)
    resolve = "none" if named is None else "columns"
    sent: dict = {}
    gc.disable()                 # millions of short-lived acyclic objects (see tally_stream)
    fd = os.open(cfg["path"], os.O_RDONLY)
    try:
        for request in sys.stdin.buffer:
            start, end = map(int, request.split())
            numbers, starts, lengths, datas, n_lines = _segment_lines(
                _pread(fd, end - start, start), start)
            for a, b in _splits(len(numbers), cfg["chunk_lines"]):
                ch = reader.prepare(numbers[a:b], datas[a:b], resolve)
                _send(out, *_message(ch, starts[a:b], lengths[a:b], reader.vocab, sent,
                                     cfg["full"] or named is None))
            _send(out, {"t": "end", "lines": n_lines}, {})
    except BrokenPipeError:      # the caller stopped reading (an error, or it is done)
        pass
    finally:
        os.close(fd)
    # Every reply is flushed: exit now, without the interpreter's teardown (tens of ms that
    # the caller, waiting for its workers to end, would spend idle).
    sys.stderr.flush()
    os._exit(0)


def _start_workers(n: int, config: bytes) -> list:
    """``n`` worker processes (:func:`_serve`), each with a :class:`_Replies` reader as
    ``replies``."""
    procs = []
    env = dict(os.environ, **WORKER_THREADS)
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(
                worker_command(__name__, "_serve", config.decode()),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env))
            try:                  # fewer hand-overs per reply (Linux; else the default pipe)
                import fcntl
                fcntl.fcntl(procs[-1].stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031),
                            PIPE_BYTES)
            except (ImportError, OSError):
                pass
            procs[-1].replies = _Replies(procs[-1].stdout)
    except BaseException:
        _stop_workers(procs, False)
        raise
    return procs


def _stop_workers(procs: list, done: bool) -> None:
    """End the workers: idle ones (``done``) exit at the end of their stdin; others are
    killed (they may be parsing, or blocked on a reply nobody will read)."""
    for p in procs:
        try:
            p.stdin.close()
        except OSError:
            pass
    for p in procs:
        if done:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if p.poll() is None:
            p.kill()
            p.wait()
        if hasattr(p, "replies"):         # the pipe has ended: the reader thread returns
            p.replies.thread.join()
        p.stdout.close()


def _stopped(proc, err: Exception) -> str:
    """Why a worker's request or reply failed: its exit status, once it has exited."""
    try:
        return f"exit status {proc.wait(timeout=5)}"
    except subprocess.TimeoutExpired:
        return f"no reply ({type(err).__name__})"


def _owners(n_segments: int, n_procs: int) -> list[int]:
    """Who prepares each segment when ``n_procs`` processes parse the file: -1 this process
    (one segment in :data:`_OWN_PERIOD` ``[n_procs]``), else a worker, in turn."""
    period = _OWN_PERIOD.get(n_procs, 0)
    owners, w = [], 0
    for k in range(n_segments):
        if period and k % period == period - 1:
            owners.append(-1)
        else:
            owners.append(w)
            w = (w + 1) % (n_procs - 1)
    return owners


def _pool_chunks(path: str, fd: int, bounds: list[int], n_procs: int, reader: _Reader,
                 chunk_lines: int, full: bool) -> Iterator[_Chunk]:
    """The chunks of the file, in file order, prepared by ``n_procs`` processes: this one and
    ``n_procs - 1`` workers. Segment k (``bounds[k]:bounds[k+1]``) goes to a worker in turn --
    or, one in :data:`_OWN_PERIOD`, to this process -- which decodes, checks and (with a
    package normalizer, :data:`_NORMALIZERS`) resolves its chunks; ``reader`` then finishes
    every chunk in file order (the reference path, errors, duplicate task ids). Workers get
    byte ranges and send arrays and strings (no pickle); a chunk is what the in-process path
    prepares from the same lines, so results are identical (``full``: with every
    :class:`FastTasks` column, for lazy traces; else what a stream needs). Should a worker fail
    (it exits, or cannot start), the rest of the file is read in this process, with a
    :class:`RuntimeWarning`."""
    segments = list(zip(bounds[:-1], bounds[1:]))
    name = next((k for k, f in _NORMALIZERS.items() if f is reader.normalizer), None)
    abstain = reader.abstain
    sendable = abstain is None or abstain.__class__ is str and _utf8(abstain)
    if not sendable:
        name = None              # resolved here: the worker is not told this value
    config = msgspec.json.encode({"path": path, "normalizer": name,
                                  "abstain": abstain if sendable else None,
                                  "chunk_lines": chunk_lines, "min_fast_lines": MIN_FAST_LINES,
                                  "full": full})
    key = (reader.normalizer, abstain)
    owner = _owners(len(segments), min(n_procs, len(segments)))
    W = max(owner) + 1
    queues = [[k for k, o in enumerate(owner) if o == w] for w in range(W)]
    sent, answered = [0] * W, [0] * W            # requests sent to / answered by each worker
    procs, k, done, base, failure = [], 0, 0, 0, None
    try:
        try:
            if not sys.executable:
                raise OSError("no Python executable (sys.executable is empty)")
            procs = _start_workers(W, config)
        except OSError as err:
            failure = f"cannot start: {err}"
        names = [{"id": [], "agent": [], "answer": []} for _ in range(W)]
        while failure is None and k < len(segments):
            for v in range(W):                   # keep every worker's requests queued
                try:
                    while sent[v] < len(queues[v]) and sent[v] - answered[v] < _DEPTH:
                        procs[v].stdin.write(b"%d %d\n" % segments[queues[v][sent[v]]])
                        procs[v].stdin.flush()
                        sent[v] += 1
                except OSError as err:
                    failure = _stopped(procs[v], err)
                    break
            w = owner[k]
            if failure is not None:
                break
            if w < 0:                            # this process's own segment
                start, end = segments[k]
                numbers, _, _, datas, n_lines = _segment_lines(_pread(fd, end - start, start),
                                                               start)
                numbers = [base + i for i in numbers]
                for a, b in _splits(len(numbers), chunk_lines):
                    yield reader.prepare(numbers[a:b], datas[a:b])
                base, k = base + n_lines, k + 1
                continue
            try:
                head, arrays = _receive(procs[w].replies)
                if head["t"] == "end":
                    base += head["lines"]
                    k, done, answered[w] = k + 1, 0, answered[w] + 1
                    continue
                linenos = (arrays["lineno"] + base).tolist()
                kind = arrays["kind"]
                fast = resolution = None
                if "vocab" in head:
                    fast = _fast_from(path, head, arrays, linenos, kind, names[w])
                    if "where" in arrays:
                        columns = {f: arrays["r_" + f] for f in BLOCK_ARRAYS}
                        columns["candidates"] = _untabled(head["r_candidates"],
                                                          arrays["r_candidates"])
                        columns["keys"] = _untabled(head["r_keys"], arrays["r_keys"])
                        fast.keep_resolution(key, (fast.block(columns, arrays["where"]),
                                                   arrays["where"]))
                    elif head["resolved"] is False and name is not None:
                        fast.keep_resolution(key, None)
                    resolution = fast.resolution(reader.normalizer, abstain, reader.memo)
            except (_WorkerGone, ValueError, KeyError, msgspec.MsgspecError) as err:
                failure = _stopped(procs[w], err)
                break
            starts, lengths = arrays["start"], arrays["length"]
            done += 1
            yield _Chunk(linenos, kind.tolist(), fast, resolution,
                         lambda i, s=starts, n=lengths: _pread(fd, int(n[i]), int(s[i])))
    finally:
        _stop_workers(procs, failure is None and k == len(segments))
    if failure is None:
        return
    import warnings
    warnings.warn(f"{path}: a parse worker stopped ({failure}); the rest of the file is read "
                  "in this process", RuntimeWarning, stacklevel=4)
    for start, end in segments[k:]:
        numbers, _, _, datas, n_lines = _segment_lines(_pread(fd, end - start, start), start)
        numbers = [base + i for i in numbers]
        for a, b in _splits(len(numbers), chunk_lines)[done:]:
            yield reader.prepare(numbers[a:b], datas[a:b])
        base, done = base + n_lines, 0


def _chunks(path: str, reader: _Reader, chunk_lines: int, keep_line, workers: int | None,
            pool_chunk_lines: int, full: bool) -> Iterator[_Chunk]:
    """The prepared chunks of the file in order: read here (``chunk_lines`` lines at a time),
    or by parse workers (:func:`_pool_chunks`) when ``workers`` -- or the automatic choice
    (:func:`auto_workers`) -- is more than one, the file is a regular file of more than one
    segment and no ``keep_line`` filter applies."""
    with _open(path) as handle:
        fd = handle.fileno()
        info = os.fstat(fd)
        n = 1
        if keep_line is None and stat.S_ISREG(info.st_mode) and info.st_size and \
                hasattr(os, "pread"):
            n = auto_workers(info.st_size) if workers is None else workers
        bounds = _segment_bounds(fd, info.st_size, SEGMENT_BYTES) if n > 1 else []
        if len(bounds) > 2:
            yield from _pool_chunks(path, fd, bounds, n, reader, pool_chunk_lines, full)
            return
        lines = _Lines(handle, keep_line)
        while True:
            linenos, datas = lines.take(chunk_lines)
            if not linenos:
                return
            yield reader.prepare(linenos, datas)


def read_checked_traces(path, normalizer: Normalizer, lenient: bool,
                        chunk_lines: int = DEFAULT_CHUNK_LINES,
                        workers: int | None = None) -> list[Trace]:
    """The traces of :func:`bda_jax.read_traces` (before its empty-file check and lenient
    warning), read chunk by chunk with the garbage collector paused; ``workers``: processes
    that parse the file, this one included (None: :func:`auto_workers`; 1: this one alone)."""
    path = os.fspath(path)
    workers = check_workers(workers)
    reader = _Reader(path, normalizer, lenient, None, memo_slow=False)
    traces: list[Trace] = []
    with gc_paused():
        chunks = _chunks(path, reader, chunk_lines, None, workers, chunk_lines, True)
        with contextlib.closing(chunks):      # stops the parse workers, also on error
            for ch in chunks:
                traces.extend(reader.finish(ch, 0, len(ch.linenos), True)[1])
    return traces


def stream_blocks(path, chunk_tasks: int, normalizer: Normalizer, lenient: bool,
                  abstain_candidate: str | None, keep_line: Callable[[int], bool] | None,
                  skipped: Counter, workers: int | None = None) -> Iterator[ResolvedBlock]:
    """The tasks of a trace file as :class:`ResolvedBlock` parts of ``chunk_tasks`` tasks
    (the last one shorter), checked as :func:`bda_jax.read_traces` checks them. A part is
    yielded before any later line is finished, so errors come in file order, each after
    every earlier part; lines may be decoded ahead (by ``workers``, see
    :func:`read_checked_traces`). Lenient skips are counted into ``skipped`` by reason."""
    path = os.fspath(path)
    reader = _Reader(path, normalizer, lenient, abstain_candidate, memo_slow=True)
    reader.skipped = skipped
    pieces, n = [], 0
    for ch in _chunks(path, reader, min(chunk_tasks, DEFAULT_CHUNK_LINES), keep_line, workers,
                      DEFAULT_CHUNK_LINES, False):
        lo, size = 0, len(ch.linenos)
        while lo < size:
            hi = min(size, lo + chunk_tasks - n)
            block, _, k = reader.finish(ch, lo, hi, False)
            lo = hi
            if block is not None:
                pieces.append(block)
                n += k
            if n == chunk_tasks:
                yield pieces[0] if len(pieces) == 1 else type(pieces[0]).concat(pieces)
                pieces, n = [], 0
    if pieces:
        yield pieces[0] if len(pieces) == 1 else type(pieces[0]).concat(pieces)
