"""The released DASE log files ([DASE]; ``shared/data/dase_council_traces``, SOURCE.md there):
what every reader of them needs to know, in one place.

* **History files** (``safe_DASE_*_History_*.jsonl``, ``*_Forensics_*``): one problem per line,
  5 worker slots re-answering for up to 15 rounds; :func:`read_dase_history` validates and
  yields them as :class:`DaseRecord` (``idx``, benchmark, the raw ``norms`` per round, ``cert``).
* **Answers**: :func:`normalize_dase_answer` is the canonical form answers are compared in;
  :data:`GPQA_LETTERS` the GPQA candidates; :func:`dase_slot_models` the model of each slot and
  :func:`dase_file_settings` the stopping rule, W / k and L, both read from the file name.
* **Bundled excerpts**: :data:`DASE_EXCERPTS` (file paths by name).
* **Gold**: the logs carry none, but every method's answer has a 0/1 correctness flag and
  problems are aligned by ``idx`` across files, so :func:`recover_dase_gold` rebuilds it
  (docs/datasets.md) as a :class:`DaseGold`.
* **Baseline vote logs** (``safe_SC70_*_Logs.jsonl``, ``safe_IMSC70_*_Logs.jsonl``):
  :func:`load_dase_vote_log` -> :class:`DaseVoteLog`.

Histories become traces with :func:`bda_jax.datasets.load_dase_history`; the stopping rules
replay them with :func:`bda_jax.stopping.replay_history`.
"""
from __future__ import annotations

import csv
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np

from .._core.errors import DataError
from .._core.io import read_json_lines
from .._core.normalize import default_normalizer

__all__ = [
    "DASE_EXCERPTS", "DaseGold", "DaseRecord", "DaseVoteLog", "GPQA_LETTERS",
    "dase_file_settings", "dase_slot_models", "load_dase_vote_log", "normalize_dase_answer",
    "read_dase_history", "recover_dase_gold",
]

_DASE_DIR = Path(__file__).resolve().parent.parent / "data" / "dase_council_traces"
#: Bundled DASE history excerpts (Apache-2.0; see NOTICE): GPQA W = 4 (problems 1-50) and AIME
#: W = 8 (problems 1-20). Load with ``load_dase_history(DASE_EXCERPTS[name], ...)``.
DASE_EXCERPTS = {
    "gpqa_w4_head50": _DASE_DIR / "safe_DASE_Bellman_History_GPQA_4_alpha0_2.head50.jsonl",
    "aime_w8_head20": _DASE_DIR / "safe_DASE_Bellman_History_8_alpha0_2.head20.jsonl",
}
_EMPTY = ("empty", "")
#: The GPQA option letters, the candidates of every GPQA problem.
GPQA_LETTERS = ("A", "B", "C", "D")
_MODELS = {"qwen": "qwen3-next-80b-a3b-instruct", "llama70": "llama-3.3-70b-instruct",
           "llama8": "llama-3.1-8b-instruct"}


def dase_slot_models(name) -> tuple[str, ...]:
    """Model family of each of the 5 worker slots of a DASE log, inferred from its file name.

    Mixed councils (Bellman arena runs without ``qwen``/``8B`` in the name, and every ``qwll``
    run) are 3 x Qwen3-Next-80B in slots 0-2 and 2 x Llama-3.3-70B in slots 3-4; ``qwen``/``qw``
    runs and the DDM runs without ``qwll`` are 5 x Qwen3-Next-80B; ``8Bllama`` runs are
    5 x Llama-3.1-8B. The logs do not record this: it follows the paper's Table 1 and the logs'
    own agreement structure (in the mixed runs slots 0-2 agree with each other far more than
    with slots 3-4; in the ``qwll`` DDM runs ``qwen_guess``/``llama_guess`` are slots 2/4).

    >>> dase_slot_models("safe_DASE_Bellman_History_GPQA_4_alpha0_2.jsonl")[2:4]
    ('qwen3-next-80b-a3b-instruct', 'llama-3.3-70b-instruct')
    """
    stem = Path(str(name)).name
    if "8Bllama" in stem or "8B" in stem.split("_"):
        return (_MODELS["llama8"],) * 5
    if "qwll" in stem:
        return (_MODELS["qwen"],) * 3 + (_MODELS["llama70"],) * 2
    if "qwen" in stem or "_qw_" in stem or "DDM" in stem:
        return (_MODELS["qwen"],) * 5
    return (_MODELS["qwen"],) * 3 + (_MODELS["llama70"],) * 2


def _from_name(pattern_a: str, pattern_b: str, stem: str):
    m = re.search(pattern_a, stem) or re.search(pattern_b, stem)
    return int(m.group(1)) if m else None


def dase_file_settings(path) -> dict:
    """Stopping rule, W, k and L that a DASE history file name states (None where it says
    nothing): ``Bellman`` -> the spatial arena, ``DDM`` -> the heuristic streak rule
    (:func:`bda_jax.stopping.replay_history`); ``_4_``, ``_8_`` -> W; ``k4``, ``8k`` -> k;
    ``L15``, ``15L`` -> L.

    >>> dase_file_settings("safe_DASE_Bellman_History_8Bllama_8_L15_alpha0_2.jsonl")
    {'rule': 'spatial', 'W': 8, 'k': None, 'L': 15}
    >>> dase_file_settings("safe_DASE_Forensics_DDM_qw_8k_15L.jsonl")
    {'rule': 'heuristic', 'W': None, 'k': 8, 'L': 15}
    """
    stem = Path(str(path)).stem
    rule = "spatial" if "Bellman" in stem else "heuristic" if "DDM" in stem else None
    W = k = None
    if rule == "spatial":
        nums = re.findall(r"(?<=_)(\d+)(?=_)", stem.split("History", 1)[-1])
        W = int(nums[0]) if nums else None
    elif rule == "heuristic":
        k = _from_name(r"k(\d+)", r"(\d+)k", stem)
    return {"rule": rule, "W": W, "k": k, "L": _from_name(r"L(\d+)", r"_(\d+)L", stem)}



def normalize_dase_answer(answer: str, benchmark: str = "aime") -> str | None:
    """Canonical form of one DASE answer (``None`` for an empty one: ``"empty"`` in any case or
    width, blank, or empty after normalization -- an empty answer is no answer, as in the trace
    reader).

    The default normalizer (NFKC, ``$``, ``\\boxed{}``, case, ``(A)``), then: trailing backslashes
    dropped, integers without leading zeros or thousands commas; GPQA option letters in upper
    case. Applied until it no longer changes the string, so ``default_normalizer`` maps distinct
    canonical answers to distinct keys.

    >>> normalize_dase_answer("$\\\\boxed{625}$"), normalize_dase_answer("(b)", "gpqa")
    ('625', 'B')
    >>> normalize_dase_answer("empty") is None, normalize_dase_answer("1,000")
    (True, '1000')
    """
    if not isinstance(answer, str) or answer.strip() in _EMPTY:
        return None
    s = answer
    for _ in range(8):
        before = s
        s = default_normalizer(s).rstrip("\\").strip()
        if re.fullmatch(r"[+-]?\d+", s) or re.fullmatch(r"\d{1,3}(?:,\d{3})+", s):
            s = str(int(s.replace(",", "")))
        if s == before:
            break
    if not s or s == "empty":
        return None
    if benchmark == "gpqa" and re.fullmatch(r"[a-d]", s):
        return s.upper()
    return s


def _benchmark_of(path: Path, category=None) -> str:
    if isinstance(category, str) and category:
        return "gpqa" if category.upper().startswith("GPQA") else "aime"
    return "gpqa" if "GPQA" in path.name else "aime"


class DaseGold(dict):
    """Recovered gold answers, ``{idx: answer}``, with what the recovery saw.

    Attributes: ``benchmark``; ``n_problems`` (distinct idx seen); ``wrong`` ({idx: answers
    flagged incorrect}); ``ambiguous`` ({idx: several distinct answers flagged correct});
    ``conflicts`` ({idx: answers flagged both correct and incorrect}); ``unmapped`` (GPQA: {idx:
    answers flagged correct that are not an option letter, so the gold letter stays unknown});
    ``files`` (files read);
    ``skipped_files`` (files of another benchmark or without correctness flags).
    """

    def __init__(self, gold=(), **info):
        super().__init__(gold)
        self.benchmark = info.get("benchmark")
        self.n_problems = info.get("n_problems", 0)
        self.wrong = info.get("wrong", {})
        self.ambiguous = info.get("ambiguous", {})
        self.conflicts = info.get("conflicts", {})
        self.unmapped = info.get("unmapped", {})
        self.files = info.get("files", ())
        self.skipped_files = info.get("skipped_files", ())

    @property
    def n_recovered(self) -> int:
        return len(self)

    def summary(self) -> str:
        return (f"{self.benchmark}: gold recovered for {len(self)} of {self.n_problems} problems "
                f"from {len(self.files)} files ({len(self.ambiguous)} ambiguous, "
                f"{len(self.conflicts)} conflicting, {len(self.unmapped)} not an option letter)")


_CSV_PAIRS = (("DASE_Final", "DASE_Acc"), ("Consensus_S1", "S1_Acc"),
              ("Consensus_S1", "Consensus_Acc"), ("Qwen_Guess", "Qwen_Acc"),
              ("Llama_Guess", "Llama_Acc"), ("SC_Winner", "SC_Acc"))
_CERT_PAIRS = (("consensus", "final_acc"), ("consensus_s1", "s1_acc"),
               ("qwen_guess", "qwen_acc"), ("llama_guess", "llama_acc"))


def _flag(value, where, fld) -> int:
    if isinstance(value, bool) or value not in (0, 1, "0", "1", 0.0, 1.0):
        raise DataError(f"a correctness flag must be 0 or 1, got {value!r}", field=fld, **where)
    return int(float(value))


def _idx(value, where) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DataError(f"idx must be an integer, got {value!r}", field="idx", **where)
    try:
        out = int(value)
    except ValueError:
        raise DataError(f"idx must be an integer, got {value!r}", field="idx", **where) from None
    if out < 0:
        raise DataError(f"idx must be non-negative, got {out}", field="idx", **where)
    return out


def _jsonl_records(path: Path):
    """(line number, object) for each non-blank line; DataError on bad JSON, a repeated key
    (naming it and the record's ``idx``) or a non-object."""
    for lineno, obj in read_json_lines(path, DataError, ids={"task_id": "idx"}):
        if not isinstance(obj, dict):
            raise DataError(f"a record must be a JSON object, got {type(obj).__name__}",
                            file=path, line=lineno)
        yield lineno, obj


class DaseRecord(NamedTuple):
    """One problem (line) of a DASE history file, validated.

    ``line``: its 1-based line number; ``idx``: the problem id; ``benchmark``: ``"aime"`` or
    ``"gpqa"`` (the file's); ``rounds``: [R][n] the raw ``norms`` of each round (R >= 1, n answer
    strings, ``"empty"`` included; round t is the log's ``step`` t+1); ``cert``: the record's
    ``cert`` object (commit, correctness flags, tokens, cost; ``{}`` if absent); ``record``: the
    whole JSON object as read.
    """

    line: int
    idx: int
    benchmark: str
    rounds: tuple[tuple[str, ...], ...]
    cert: dict
    record: dict


def read_dase_history(path, *, n: int | None = 5, benchmark: str | None = None
                      ) -> Iterator[DaseRecord]:
    """Read a DASE history file (``safe_DASE_*_History_*.jsonl`` or ``*_Forensics_*``), one
    :class:`DaseRecord` per line, lazily.

    Every record must be a JSON object with a non-negative integer ``idx`` (unique in the file)
    and a non-empty ``history`` list whose rounds are objects with ``norms``, a list of ``n``
    answer strings (``n=None``: as many as the file's first round has, e.g. a live ensemble of
    other than five workers), and (optionally) ``step`` counting 1, 2, ... The benchmark is ``benchmark``
    if given, else read from the first record's ``category`` (``GPQA ...``) or the file name.
    Malformed records raise :class:`bda_jax.DataError` naming file, line, idx (as task id) and
    field; a file without any record raises too.

    >>> first = next(read_dase_history(DASE_EXCERPTS["gpqa_w4_head50"]))
    >>> first.idx, first.benchmark, first.rounds[0], first.cert["commit_reason"]
    (1, 'gpqa', ('C', 'C', 'C', 'D', 'D'), 'right_wall')
    """
    path = Path(path)
    seen_idx: dict[int, int] = {}
    for lineno, rec in _jsonl_records(path):
        where = dict(file=path, line=lineno, task_id=rec.get("idx"))
        if "idx" not in rec:
            raise DataError("the record has no 'idx'", field="idx", **where)
        idx = _idx(rec["idx"], where)
        if idx in seen_idx:
            raise DataError(f"idx {idx} repeats line {seen_idx[idx]}", field="idx", **where)
        seen_idx[idx] = lineno
        if benchmark is None:
            benchmark = _benchmark_of(path, rec.get("category"))
        history = rec.get("history")
        if not isinstance(history, list) or not history:
            raise DataError("'history' must be a non-empty list of rounds", field="history",
                            **where)
        rounds = []
        for t, step in enumerate(history):
            fld = f"history[{t}]"
            if not isinstance(step, dict):
                raise DataError("a round must be a JSON object", field=fld, **where)
            if "step" in step and step["step"] != t + 1:
                raise DataError(f"step {step['step']!r} where {t + 1} was expected (steps "
                                "must count 1, 2, ...)", field=fld + ".step", **where)
            norms = step.get("norms")
            if n is None and isinstance(norms, list) and norms:
                n = len(norms)
            if not isinstance(norms, list) or len(norms) != n:
                raise DataError(f"'norms' must be a list of {n} answers",
                                field=fld + ".norms", **where)
            for s, raw in enumerate(norms):
                if not isinstance(raw, str):
                    raise DataError(f"an answer must be a string, got {type(raw).__name__}",
                                    field=f"{fld}.norms[{s}]", **where)
            rounds.append(tuple(norms))
        cert = rec.get("cert") if isinstance(rec.get("cert"), dict) else {}
        yield DaseRecord(lineno, idx, benchmark, tuple(rounds), cert, rec)
    if not seen_idx:
        raise DataError("the file holds no record", file=path)


def _flag_observations(path: Path):
    """Yield (benchmark, idx, answer, flag) from one DASE results/log file; None if no flags."""
    if path.suffix == ".csv":
        try:
            handle = path.open(newline="", encoding="utf-8")
        except OSError as err:
            raise DataError(f"cannot open the file: {err.strerror}", file=path) from None
        with handle:
            reader = csv.DictReader(handle)
            pairs = [(a, f) for a, f in _CSV_PAIRS if a in (reader.fieldnames or ())
                     and f in (reader.fieldnames or ())]
            if not pairs:
                return
            for row_number, row in enumerate(reader, 1):
                where = dict(file=path, line=row_number + 1)
                idx = _idx(row["Idx"], where) if "Idx" in row else row_number
                where["task_id"] = idx
                bench = _benchmark_of(path, row.get("Category"))
                for a, f in pairs:
                    if row.get(a) is None or row.get(f) is None:
                        raise DataError("the row has fewer columns than the header",
                                        field=f, **where)
                    yield bench, idx, row[a], _flag(row[f], where, f)
        return
    for lineno, rec in _jsonl_records(path):
        where = dict(file=path, line=lineno, task_id=rec.get("idx"))
        if "idx" not in rec:
            raise DataError("the record has no 'idx'", field="idx", **where)
        idx = _idx(rec["idx"], where)
        bench = _benchmark_of(path, rec.get("category"))
        if isinstance(rec.get("cert"), dict):
            cert = rec["cert"]
            for a, f in _CERT_PAIRS:
                if a in cert and f in cert:
                    yield bench, idx, cert[a], _flag(cert[f], where, f"cert.{f}")
        elif "winner" in rec and "acc" in rec:
            yield bench, idx, rec["winner"], _flag(rec["acc"], where, "acc")


def _dase_files(paths) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(sorted(q for q in p.iterdir() if q.suffix in (".jsonl", ".csv")))
        elif p.exists():
            out.append(p)
        else:
            raise DataError("no such file or directory", file=p)
    if not out:
        raise DataError("no DASE .jsonl/.csv file found", file=", ".join(map(str, paths)))
    return out


def recover_dase_gold(paths, benchmark: str | None = None) -> DaseGold:
    """Rebuild DASE gold answers from the 0/1 correctness flags of every released file.

    ``paths``: a DASE log directory, a file, or a list of them (``.jsonl`` histories and logs,
    ``.csv`` results). Every (answer, flag) pair is collected by problem ``idx`` -- the history
    ``cert`` (``consensus``/``final_acc``, ``consensus_s1``/``s1_acc``, ``qwen_guess``/
    ``qwen_acc``, ``llama_guess``/``llama_acc``), the SC/IMSC logs (``winner``/``acc``) and the
    results CSVs (row order is idx order where there is no ``Idx`` column) -- and answers are
    compared after :func:`normalize_dase_answer`. A problem's gold is its answer flagged correct;
    when the original grader accepted several surface forms, the single integer among them for
    AIME (``184`` over a garbled interval that merely contains it); for GPQA only an option
    letter can be gold (an answer text graded correct leaves the letter unknown: ``unmapped``).
    Answers flagged both correct and incorrect are conflicts and recover nothing; so are several
    distinct correct integers.

    ``benchmark``: ``"aime"`` or ``"gpqa"``; files of the other benchmark are skipped (listed in
    ``skipped_files``). Default: the benchmark of the files, which must all agree. Returns a
    :class:`DaseGold` ``{idx: answer}``; ``.summary()`` says how many were recovered.
    """
    if benchmark not in (None, "aime", "gpqa"):
        raise DataError(f"benchmark must be 'aime' or 'gpqa', got {benchmark!r}",
                        field="benchmark")
    correct: dict[int, set[str]] = defaultdict(set)
    wrong: dict[int, set[str]] = defaultdict(set)
    seen: set[int] = set()
    used, skipped = [], []
    for path in _dase_files(paths):
        observations = list(_flag_observations(path))
        benches = {b for b, *_ in observations}
        if not observations:
            skipped.append(path.name)
            continue
        if len(benches) > 1:
            raise DataError(f"the file mixes benchmarks {sorted(benches)}", file=path)
        bench = benches.pop()
        if benchmark is None:
            benchmark = bench
        if bench != benchmark:
            skipped.append(path.name)
            continue
        used.append(path.name)
        for _, idx, answer, flag in observations:
            seen.add(idx)
            key = normalize_dase_answer(answer if isinstance(answer, str) else str(answer),
                                        benchmark)
            if key is None:
                continue
            (correct if flag else wrong)[idx].add(key)
    gold, ambiguous, conflicts, unmapped = {}, {}, {}, {}
    for idx in sorted(seen):
        good = correct.get(idx, set())
        clash = good & wrong.get(idx, set())
        if clash:
            conflicts[idx] = sorted(clash)
            good = good - clash
        if benchmark == "gpqa":
            letters = {g for g in good if g in GPQA_LETTERS}
            if good and not letters:      # graded correct, but not an option letter
                unmapped[idx] = sorted(good)
            good = letters
        elif len(good) > 1:
            good = {g for g in good if re.fullmatch(r"-?\d+", g)} or good
        if len(good) == 1:
            gold[idx] = next(iter(good))
        elif len(good) > 1:
            ambiguous[idx] = sorted(good)
    return DaseGold(gold, benchmark=benchmark, n_problems=len(seen),
                    wrong={i: sorted(w) for i, w in wrong.items()}, ambiguous=ambiguous,
                    conflicts=conflicts, unmapped=unmapped, files=tuple(used),
                    skipped_files=tuple(skipped))


@dataclass
class DaseVoteLog:
    """One SC70 / IMSC70 log: ``idx`` [B] problem ids, ``votes`` B lists of 70 raw answers
    (``None`` = empty), logged ``winner`` [B] (``None`` for no consensus) and ``acc`` [B] flags,
    ``cost`` [B] dollars, ``pool_inferences`` [B] (IMSC's 5 seeding calls; 0 for SC),
    ``benchmark`` (``"aime"``/``"gpqa"``)."""

    name: str
    benchmark: str
    idx: np.ndarray
    votes: list
    winner: list
    acc: np.ndarray
    cost: np.ndarray
    pool_inferences: np.ndarray
    extra: dict = field(default_factory=dict)


def load_dase_vote_log(path) -> DaseVoteLog:
    """Read a ``safe_SC70_*_Logs.jsonl`` / ``safe_IMSC70_*_Logs.jsonl`` file ([DASE] §4).

    The baseline logs hold, per problem, 70 sampled answers (``votes``) in the order they were
    drawn, the logged ``winner`` and its 0/1 ``acc`` flag, and the run's ``cost``
    (``cost_total`` in the first AIME SC70 run); empty votes (those :func:`normalize_dase_answer`
    maps to ``None``: ``"empty"``, blank, ``$$``, ...: an empty answer is no answer, as in every
    reader) read as ``None``, a ``"no_consensus"`` or empty winner as ``None``.

    Raises :class:`DataError` naming file, line, idx and field on a malformed record (bad JSON, a
    repeated key, a record that is not an object, a repeated or non-integer idx, an ``acc``
    other than 0/1, a ``cost`` that is not a number).
    """
    path = Path(path)
    idx, votes, winner, acc, cost, pool = [], [], [], [], [], []
    bench = None
    seen_idx: dict[int, int] = {}
    for lineno, rec in _jsonl_records(path):
        where = dict(file=path, line=lineno, task_id=rec.get("idx"))
        for key in ("idx", "votes", "winner", "acc"):
            if key not in rec:
                raise DataError(f"the record has no {key!r}", field=key, **where)
        i = _idx(rec["idx"], where)
        if i in seen_idx:
            raise DataError(f"idx {i} repeats line {seen_idx[i]}", field="idx", **where)
        seen_idx[i] = lineno
        v = rec["votes"]
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            raise DataError("'votes' must be a list of strings", field="votes", **where)
        cat = rec.get("category") or ""
        b = "gpqa" if str(cat).upper().startswith("GPQA") or "GPQA" in path.name else "aime"
        if bench is None:
            bench = b
        elif b != bench:
            raise DataError("the file mixes benchmarks", field="category", **where)
        w = rec["winner"]
        if w is not None and not isinstance(w, str):
            raise DataError(f"'winner' must be a string or null, got {type(w).__name__} {w!r}",
                            field="winner", **where)
        c = rec.get("cost", rec.get("cost_total"))
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float))):
            raise DataError(f"'cost' must be a number or null, got {type(c).__name__} {c!r}",
                            field="cost", **where)
        n_pool = rec.get("pool_inferences", 0)
        if isinstance(n_pool, bool) or not isinstance(n_pool, int) or n_pool < 0:
            raise DataError(f"'pool_inferences' must be a non-negative integer, got {n_pool!r}",
                            field="pool_inferences", **where)
        idx.append(i)
        votes.append([None if normalize_dase_answer(a, b) is None else a for a in v])
        winner.append(None if w is None or w.strip() == "no_consensus"
                      or normalize_dase_answer(w, b) is None else w)
        acc.append(_flag(rec["acc"], where, "acc"))
        cost.append(np.nan if c is None else float(c))
        pool.append(n_pool)
    if not idx:
        raise DataError("the file holds no record", file=path)
    return DaseVoteLog(path.name, bench, np.asarray(idx), votes, winner, np.asarray(acc),
                   np.asarray(cost, float), np.asarray(pool))
