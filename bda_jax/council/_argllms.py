"""ArgLLMs (Freedman et al. 2025; [BDA] Appendix B.1, D.4, F.7) as ``Agg ∘ Gen`` (Table 4).

``Gen`` (the argument generator): for each of the task's own candidates (the faithful
multi-option dispatch of Appendix D.4, never the council's proposals) a tree rooted at the claim
"the correct answer is <candidate>": every argument above ``depth`` gets ``breadth`` supporting
and ``breadth`` attacking child arguments from one generator call. ``Agg``: the evaluator LLM
gives every argument a base score in [0, 1] (the root's too, or a fixed ``root_base``), and
DF-QuAD (:func:`~bda_jax.council.dfquad_strengths`) gives the final strengths; the answer is the
candidate whose claim is strongest (exact ties broken at random from the seed) and its
confidence is that strength.

The fair attack rho (Appendix F.7) replaces the generator by one that is routed per candidate by
gold: it undermines the correct option's claim and bolsters every wrong one. Deeper in a tree
the routing follows each argument's polarity towards the root (an argument that supports the
root is undermined when the root is, an attacker of the root is bolstered). The evaluator stays
clean. Every generated argument is then corrupted evidence: gamma = 1.

Unusable replies are never guessed over: a generator reply that is not the JSON asked for gives
its argument no children, an argument whose base score cannot be read is dropped from the tree
(a root keeps the neutral 0.5); both are counted in the record's ``unusable``.
"""
from __future__ import annotations

import asyncio
import math
import re

import numpy as np

from .._core.errors import DataError
from .._core.normalize import default_normalizer
from ._config import Seat
from ._dfquad import dfquad_strengths
from ._judge import json_object
from ._method_prompts import (claim_text, evaluator_messages, generator_messages, strength_schema,
                              tree_schema)
from ._methods import Caller, Evidence, LLMMethod, MethodAnswer, MethodTask, Runtime, answer_proba
from ._protocol import label_seed

__all__ = ["ArgLLMs", "PROBA_RULES", "read_strength"]

PROBA_RULES = ("confidence", "normalized")
_NUMBER = re.compile(r"(?<![\w.])(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)(?!\w|\.\d)")


def read_strength(text: str) -> float | None:
    """The base score in an evaluator reply: the ``strength`` of its JSON object, else the one
    number in [0, 1] its prose holds; ``None`` when neither reads (a boolean is not a score)."""
    obj = json_object(text)
    value = obj.get("strength") if obj is not None else None
    if value is None and isinstance(text, str):
        found = _NUMBER.findall(text)
        value = found[0] if len(found) == 1 else None
    if isinstance(value, bool):             # JSON true / false is not a score
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None


class ArgLLMs(LLMMethod):
    """ArgLLMs over each task's candidates (module docstring).

    ``generator`` and ``evaluator``: the two :class:`~bda_jax.council.Seat` s (the paper runs the
    evaluator on a stronger model). ``depth`` (>= 1) and ``breadth`` (>= 1): the tree's levels
    below the root and the supporters (= attackers) per argument. ``root_base``: ``"evaluator"``
    (the root claim is scored like any argument) or a number in [0, 1] (a fixed base score, e.g.
    0.5). ``proba``: ``"confidence"`` (the answer's strength as its probability, the rest even,
    as for every method) or ``"normalized"`` (the candidates' strengths over their sum).
    """

    name = "argllms"
    reads_council = False
    gen_channels = ("generator",)
    agg_channels = ("evaluator",)

    def __init__(self, runtime: Runtime, generator: Seat, evaluator: Seat, *, depth: int = 1,
                 breadth: int = 1, root_base="evaluator", proba: str = "confidence",
                 attack: bool = False, seed: int = 0, samples: int = 1):
        super().__init__(runtime, attack=attack, seed=seed, samples=samples)
        for name, seat in (("generator", generator), ("evaluator", evaluator)):
            if not isinstance(seat, Seat):
                raise DataError(f"{name} must be a Seat", field=name)
        if int(depth) < 1 or int(breadth) < 1:
            raise DataError("depth and breadth must be integers >= 1", field="depth")
        if root_base != "evaluator" and not (isinstance(root_base, (int, float))
                                             and not isinstance(root_base, bool)
                                             and 0.0 <= float(root_base) <= 1.0):
            raise DataError(f"root_base must be 'evaluator' or a number in [0, 1], got {root_base!r}",
                            field="root_base")
        if proba not in PROBA_RULES:
            raise DataError(f"proba must be one of {list(PROBA_RULES)}, got {proba!r}",
                            field="proba")
        self.generator, self.evaluator = generator, evaluator
        self.depth, self.breadth = int(depth), int(breadth)
        self.root_base, self.proba = root_base, proba

    # -- Gen: one tree per candidate ----------------------------------------------------------
    async def _tree(self, caller: Caller, task: MethodTask, cand: str, attack: bool):
        """Nodes ``[{text, parent, relation, polarity}]`` of one candidate's tree, root first,
        and how many of its arguments rho wrote and how many generator replies were unusable."""
        gold = task.question.gold
        root_goal = None
        if attack:
            if gold is None:
                raise DataError("the ArgLLMs attack is routed by gold; this task has none",
                                task_id=task.task_id, field="gold")
            is_gold = default_normalizer(cand) == default_normalizer(gold)
            root_goal = "undermine" if is_gold else "bolster"
        nodes = [{"text": claim_text(task.question.question, cand), "parent": -1, "relation": 0,
                  "polarity": 1}]
        level, corrupted, unusable = [0], 0, 0
        for _ in range(self.depth):
            async def expand(i):
                node = nodes[i]
                goal = None
                if root_goal is not None:      # undermine a node that pulls the root our way
                    same = (root_goal == "undermine") == (node["polarity"] > 0)
                    goal = "undermine" if same else "bolster"
                reply = await caller.chat(
                    self.generator, generator_messages(node["text"], self.breadth, self.breadth,
                                                       attack=goal, gold=gold),
                    task=task, channel="generator", schema=tree_schema(self.breadth, self.breadth))
                obj = json_object(reply.text)
                kids = []
                if obj is not None:
                    for key, rel in (("supporters", 1), ("attackers", -1)):
                        texts = obj.get(key)
                        if isinstance(texts, list):
                            kids += [(t.strip(), rel) for t in texts[:self.breadth]
                                     if isinstance(t, str) and t.strip()]
                return i, kids, obj is None
            expanded = await asyncio.gather(*(expand(i) for i in level))
            level = []
            for i, kids, bad in expanded:
                unusable += bad
                for text, rel in kids:
                    nodes.append({"text": text, "parent": i, "relation": rel,
                                  "polarity": nodes[i]["polarity"] * rel})
                    level.append(len(nodes) - 1)
                    corrupted += attack
        return nodes, corrupted, unusable

    async def generate(self, caller: Caller, task: MethodTask, attack: bool) -> Evidence:
        trees = await asyncio.gather(*(self._tree(caller, task, c, attack)
                                       for c in task.candidates))
        total = sum(len(nodes) - 1 for nodes, _, _ in trees)
        return Evidence([nodes for nodes, _, _ in trees], sum(c for _, c, _ in trees), total,
                        {"unusable_generations": sum(u for _, _, u in trees)})

    # -- Agg: base scores, DF-QuAD, argmax ----------------------------------------------------
    async def aggregate(self, caller: Caller, task: MethodTask, evidence: Evidence) -> MethodAnswer:
        trees = evidence.items

        async def score(k, j):
            node = trees[k][j]
            if j == 0 and self.root_base != "evaluator":
                return k, j, float(self.root_base)
            reply = await caller.chat(self.evaluator, evaluator_messages(node["text"]), task=task,
                                      channel="evaluator", schema=strength_schema())
            return k, j, read_strength(reply.text)
        scored = await asyncio.gather(*(score(k, j) for k, nodes in enumerate(trees)
                                        for j in range(len(nodes))))
        base = {(k, j): b for k, j, b in scored}
        unscored = sum(b is None for b in base.values())
        n = max(len(nodes) for nodes in trees)
        B = np.zeros((len(trees), n), np.float32)
        P = np.full((len(trees), n), -2, np.int32)
        R = np.zeros((len(trees), n), np.int32)
        for k, nodes in enumerate(trees):
            keep = set()
            for j, node in enumerate(nodes):   # parents come first: a dropped parent drops its subtree
                b = base[(k, j)]
                if j == 0:
                    keep.add(0)
                    B[k, 0], P[k, 0] = (0.5 if b is None else b), -1
                elif b is not None and node["parent"] in keep:
                    keep.add(j)
                    B[k, j], P[k, j], R[k, j] = b, node["parent"], node["relation"]
        strengths = np.asarray(dfquad_strengths(B, P, R), np.float64)
        root = strengths[:, 0]
        top = np.flatnonzero(root == root.max())
        rng = np.random.default_rng(label_seed(self.seed, task.task_id, task.sample))
        pick = int(top[0] if len(top) == 1 else rng.choice(top))
        answer = task.candidates[pick]
        conf = float(root[pick])
        if self.proba == "normalized":
            total = root.sum()
            proba = tuple(root / total) if total > 0 else tuple(np.full(len(root), 1 / len(root)))
        else:
            proba = tuple(answer_proba(answer, conf, task.candidates))
        detail = {"strengths": {c: float(s) for c, s in zip(task.candidates, root)},
                  "unscored": unscored,
                  "trees": [[{"text": node["text"], "parent": node["parent"],
                              "relation": node["relation"], "base": base[(k, j)],
                              "strength": float(strengths[k, j]) if P[k, j] != -2 else None}
                             for j, node in enumerate(nodes)] for k, nodes in enumerate(trees)]}
        return MethodAnswer(answer, conf, "strength", detail, proba)

    def settings(self) -> dict:
        return {**super().settings(), "generator": vars(self.generator),
                "evaluator": vars(self.evaluator), "depth": self.depth, "breadth": self.breadth,
                "root_base": self.root_base, "proba": self.proba}
