"""DASE history files -> validated :class:`Trace` lists ([DASE]; docs/datasets.md).

Each problem's rounds of normalized slot answers become moves by :func:`revisions_to_moves`
(``moves="proposals"`` or ``"typed"``); gold is ``None``, a mapping, or recovered from the logs'
correctness flags (:func:`recover_dase_gold`). Every trace passes
:func:`bda_jax.resolve_trace` strictly and tallies with :func:`bda_jax.tally`.
"""
from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

from .._core.errors import DataError
from .._core.traces import Trace
from ._dase import (GPQA_LETTERS, dase_slot_models, normalize_dase_answer, read_dase_history,
                    recover_dase_gold)
from ._moves import MOVE_MAPPINGS, answers_said, revisions_to_moves
from ._parse_report import ParseWarning

__all__ = ["DaseTraces", "load_dase_history"]


class DaseTraces(list):
    """A ``list[Trace]`` from :func:`load_dase_history` with a ``report`` dict alongside."""

    report: dict


def load_dase_history(path, gold=None, *, benchmark: str | None = None, moves: str = "proposals",
                      one_vote_per_round: bool = False, slot_models: Sequence[str] | None = None,
                      agent_names: str = "slot", task_prefix: str | None = None,
                      all_empty: str = "skip") -> DaseTraces:
    """Read a DASE history file (``safe_DASE_*_History_*.jsonl`` or ``*_Forensics_*``).

    One trace per problem (line); round ``t`` (the log's ``step`` t+1) holds the five slots'
    ``norms``, normalized by :func:`normalize_dase_answer`. Empty answers (``"empty"`` or ``""``)
    make no move and are listed in ``extra["empty"]`` as ``[slot, round]``; for GPQA, answers that
    are not one of the letters A-D make no move either (``extra["off_candidate"]``).

    Candidates: ``A``-``D`` for GPQA; for AIME the distinct normalized answers said on that
    problem, first seen first. Gold is never added to the candidates (docs/trace-format.md: that
    would leak the label); a problem whose recovered gold nobody said is ``gold_missing``.

    ``gold``: ``None`` (unlabeled), ``"recover"`` (run :func:`recover_dase_gold` on the file's
    directory for its benchmark), or a mapping ``{idx: answer}`` (e.g. a :class:`DaseGold`).
    ``moves`` / ``one_vote_per_round``: see :func:`revisions_to_moves`. Agents are the slot ids
    ``slot0``..``slot4`` (``agent_names="slot+model"`` appends the model family, for pooling
    files); each slot's model family is in ``extra["slot_models"]`` (inferred by
    :func:`dase_slot_models` unless ``slot_models`` is given). Task ids are
    ``{task_prefix or benchmark}-{idx}``; the cluster is ``{benchmark}-{idx}`` in every file, so
    the same problem from several runs stays in one CV fold. ``all_empty="skip"`` leaves out a
    problem where no slot ever gave a usable answer (listed in ``report["skipped"]``);
    ``"error"`` raises instead. ``benchmark`` (``"aime"``/``"gpqa"``) overrides the detection
    from the records' ``category`` or the file name. The file is read by
    :func:`read_dase_history`: malformed records raise :class:`bda_jax.DataError` naming file,
    line, idx (as task id) and field.

    Returns a :class:`DaseTraces` (a ``list[Trace]``) whose ``report`` dict holds ``n_problems``,
    ``n_traces``, ``n_rounds``, ``answers`` / ``empty`` / ``off_candidate`` (slot-round
    counts), ``n_gold``, ``skipped`` and the slot models.
    """
    if moves not in MOVE_MAPPINGS:
        raise DataError(f"moves must be one of {MOVE_MAPPINGS}, got {moves!r}", field="moves")
    if agent_names not in ("slot", "slot+model"):
        raise DataError(f"agent_names must be 'slot' or 'slot+model', got {agent_names!r}",
                        field="agent_names")
    if all_empty not in ("skip", "error"):
        raise DataError(f"all_empty must be 'skip' or 'error', got {all_empty!r}",
                        field="all_empty")
    path = Path(path)
    models = tuple(slot_models) if slot_models is not None else dase_slot_models(path.name)
    inferred = slot_models is None
    gold_map: Mapping | None = None
    if isinstance(gold, str):
        if gold != "recover":
            raise DataError(f"gold must be None, 'recover' or a mapping, got {gold!r}",
                            field="gold")
    elif gold is not None and not isinstance(gold, Mapping):
        raise DataError(f"gold must be None, 'recover' or a mapping, got {type(gold).__name__}",
                        field="gold")
    else:
        gold_map = gold
    traces = DaseTraces()
    skipped: dict[int, str] = {}
    n_problems = 0
    counts = Counter()
    n_rounds = 0
    n_slots = len(models)
    names = [f"slot{s}" if agent_names == "slot" else f"slot{s}:{models[s]}"
             for s in range(n_slots)]
    for problem in read_dase_history(path, n=n_slots, benchmark=benchmark):
        n_problems += 1
        idx, bench, rec = problem.idx, problem.benchmark, problem.record
        where = dict(file=path, line=problem.line, task_id=rec.get("idx"))
        if benchmark is None:
            benchmark = bench
        if gold == "recover" and gold_map is None:
            gold_map = recover_dase_gold(path.parent, benchmark)
        rounds, extras = [], {}
        empty, off = [], []
        for t, norms in enumerate(problem.rounds):
            said: dict[str, str | None] = {}
            for s, raw in enumerate(norms):
                key = normalize_dase_answer(raw, bench)
                if key is None:
                    empty.append([names[s], t])
                    counts["empty"] += 1
                    key = None
                elif bench == "gpqa" and key not in GPQA_LETTERS:
                    off.append([names[s], t, raw])
                    counts["off_candidate"] += 1
                    key = None
                else:
                    counts["answers"] += 1
                    if raw != key:
                        extras[(names[s], t)] = {"raw": raw}
                said[names[s]] = key
            rounds.append(said)
        n_rounds += len(rounds)
        move_list = revisions_to_moves(rounds, names, moves=moves,
                                       one_vote_per_round=one_vote_per_round, extras=extras)
        if not move_list:
            if all_empty == "error":
                raise DataError("no slot gave a usable answer in any round", field="history",
                                **where)
            skipped[idx] = "no usable answer in any round"
            continue
        candidates = GPQA_LETTERS if bench == "gpqa" else answers_said(move_list)
        g = None
        if gold_map is not None and idx in gold_map:
            g = gold_map[idx]
            g = None if g is None else normalize_dase_answer(str(g), bench)
        extra = {"dase": {"file": path.name, "idx": idx, "category": rec.get("category"),
                          "cert": problem.cert},
                 "slot_models": dict(zip(names, models)), "slot_models_inferred": inferred,
                 "empty": empty, "moves_mapping": moves}
        if off:
            extra["off_candidate"] = off
        task_id = f"{task_prefix or bench}-{idx}"
        traces.append(Trace(task_id, tuple(move_list), candidates, g, cluster=f"{bench}-{idx}",
                            extra=extra))
    n_gold = sum(t.gold is not None for t in traces)
    traces.report = {"file": str(path), "benchmark": benchmark, "n_problems": n_problems,
                     "n_traces": len(traces), "skipped": skipped,
                     "n_rounds": n_rounds,
                     "answers": counts["answers"], "empty": counts["empty"],
                     "off_candidate": counts["off_candidate"], "n_gold": n_gold,
                     "slot_models": models, "slot_models_inferred": inferred}
    if skipped:
        warnings.warn(f"{path}: {len(skipped)} problem(s) without any usable answer were left "
                      f"out (idx {sorted(skipped)[:10]})", ParseWarning, stacklevel=2)
    return traces
