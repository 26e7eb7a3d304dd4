"""ArgLLMs end to end against the loopback fake server with scripted generator and evaluator
replies: the calls a tree of given depth and breadth costs, the DF-QuAD strengths, answer and
confidence against hand computations, unusable replies (an unscored argument is dropped with its
subtree, an unusable generation gives no children), seeded tie-breaks, and the fair attack rho
routed per candidate by gold ([BDA] Appendix F.7) that never reaches the evaluator."""
import hashlib
import json
import re

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

from bda_jax import DataError  # noqa: E402
from bda_jax.council import ArgLLMs, Endpoint, Question, Runtime, Seat  # noqa: E402
from bda_jax.council import read_strength  # noqa: E402

from council.fake_server import FakeServer, has_role, request_kind  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::bda_jax.datasets.ParseWarning")

UNDERMINE = "make the attacking arguments as compelling as you can"
BOLSTER = "make the supporting arguments as compelling as you can"


# --------------------------------------------------------------------------- helpers
def _endpoint(srv):
    return Endpoint("fake", srv.base_url, max_concurrency=8, timeout_s=5, max_retries=1)


def _seat(name, seed, temperature=0.5):
    return Seat(name, "fake", "deterministic", temperature, seed)


def _runtime(srv, **kw):
    return Runtime({"fake": _endpoint(srv)}, **kw)


def _method(srv, **kw):
    return ArgLLMs(_runtime(srv), _seat("gen", 60), _seat("eval", 70, 0.0), **kw)


def _claim(body):
    return re.search(r"Claim: (.*?)\n\nWrite", body["messages"][-1]["content"], re.S).group(1)


def _statement(body):
    return re.search(r"Statement: (.*?)\n\nHow likely", body["messages"][-1]["content"],
                     re.S).group(1)


def _root_candidate(claim):
    m = re.fullmatch(r'For the question ".*", the correct answer is "(.*)"\.', claim)
    return None if m is None else m.group(1)


class Script:
    """Scripted replies: an argument text is ``"<path>"`` (the root candidate, then ``+`` for a
    supporter and ``-`` for an attacker per level, e.g. ``"A+-"``), so every request can be mapped
    back to its node. ``strengths``: path -> the evaluator's reply (a number, or a raw string);
    paths not listed get 0.5. ``broken``: paths whose generator reply is not JSON."""

    def __init__(self, breadth=1, strengths=None, broken=(), raw=None):
        self.breadth = breadth
        self.strengths = dict(strengths or {})
        self.broken = set(broken)
        self.raw = dict(raw or {})

    @staticmethod
    def path(text):
        root = _root_candidate(text)
        return root if root is not None else text

    def __call__(self, body):
        kind = request_kind(body)
        if kind == "arguments":
            p = self.path(_claim(body))
            if p in self.broken:
                return "I would rather not."
            tags = [f"{i}" if self.breadth > 1 else "" for i in range(self.breadth)]
            return json.dumps({"supporters": [f"{p}+{t}" for t in tags],
                               "attackers": [f"{p}-{t}" for t in tags]})
        if kind == "strength":
            p = self.path(_statement(body))
            if p in self.raw:
                return self.raw[p]
            return json.dumps({"strength": self.strengths.get(p, 0.5)})
        return None


def _one(srv, candidates=("A", "B"), gold="A", **kw):
    q = Question("h", "Which one?", tuple(candidates), gold)
    run = _method(srv, **kw).run([q])
    return run, run.records[0]


# --------------------------------------------------------------------------- calls
@pytest.mark.parametrize("depth, breadth, root_base", [
    (1, 1, "evaluator"), (1, 1, 0.5), (2, 1, "evaluator"), (2, 2, 0.5), (1, 3, "evaluator"),
    (3, 1, 0.5),
])
def test_calls_per_candidate_follow_depth_and_breadth(depth, breadth, root_base):
    # one generator call per argument above the last level: sum_{l<depth} (2 breadth)^l; every
    # argument scored once (the root too when the evaluator scores it)
    gen = sum((2 * breadth) ** level for level in range(depth))
    nodes = sum((2 * breadth) ** level for level in range(depth + 1))
    scored = nodes if root_base == "evaluator" else nodes - 1
    qs = [Question(f"q{i}", f"Question {i}?", ("A", "B", "C"), "A") for i in range(2)]

    def distinct(body):                  # argument texts unique per question and node
        kind = request_kind(body)
        if kind != "arguments":
            return None
        tag = hashlib.sha256(_claim(body).encode()).hexdigest()[:10]
        return json.dumps({"supporters": [f"for {tag} {i}" for i in range(breadth)],
                           "attackers": [f"against {tag} {i}" for i in range(breadth)]})
    with FakeServer(responder=distinct) as srv:
        run = _method(srv, depth=depth, breadth=breadth, root_base=root_base).run(qs)
        kinds = [request_kind(b) for b in srv.requests]
    per_task = 3                          # candidates
    assert run.channels["generator"]["calls"] == 2 * per_task * gen
    assert run.channels["evaluator"]["calls"] == 2 * per_task * scored
    assert kinds.count("arguments") == 2 * per_task * gen
    assert kinds.count("strength") == 2 * per_task * scored
    assert run.ledger["calls"] == len(kinds) and run.ledger["cached"] == 0
    for rec in run.records:
        assert rec.evidence == per_task * (nodes - 1) and rec.corrupted == 0
        assert [len(tree) for tree in rec.detail["trees"]] == [nodes] * per_task
        assert rec.rule == "strength"


# --------------------------------------------------------------------------- DF-QuAD by hand
def test_depth_one_strengths_by_hand():
    script = Script(strengths={"A+": 0.8, "A-": 0.4, "B+": 0.3, "B-": 0.9})
    with FakeServer(responder=script) as srv:
        run, rec = _one(srv, root_base=0.5)
        # A: attackers 0.4 < supporters 0.8 -> 0.5 + (1 - 0.5)(0.8 - 0.4) = 0.7
        # B: attackers 0.9 >= supporters 0.3 -> 0.5 - 0.5 (0.9 - 0.3) = 0.2
        assert rec.detail["strengths"] == pytest.approx({"A": 0.7, "B": 0.2}, abs=1e-6)
        assert rec.answer == "A" and rec.confidence == pytest.approx(0.7, abs=1e-6)
        np.testing.assert_allclose(rec.proba, [0.7, 0.3], atol=1e-6)
        tree_a = rec.detail["trees"][0]
        assert [(n["text"], n["relation"], n["base"]) for n in tree_a[1:]] == \
            [("A+", 1, 0.8), ("A-", -1, 0.4)]
        assert tree_a[0]["base"] == 0.5 and tree_a[0]["parent"] == -1
        assert [n["strength"] for n in tree_a] == pytest.approx([0.7, 0.8, 0.4], abs=1e-6)
        assert rec.gold == "A" and run.parse["accuracy_committed"] == 1.0

        _, rec = _one(srv, root_base=0.5, proba="normalized")
        # the strengths over their sum: 0.7 / 0.9, 0.2 / 0.9
        np.testing.assert_allclose(rec.proba, [7 / 9, 2 / 9], atol=1e-6)
        assert rec.confidence == pytest.approx(0.7, abs=1e-6)


def test_the_evaluator_scores_the_root_claim_by_hand():
    script = Script(strengths={"A": 0.6, "B": 0.5, "A+": 0.8, "A-": 0.4, "B+": 0.3, "B-": 0.9})
    with FakeServer(responder=script) as srv:
        _, rec = _one(srv, root_base="evaluator")
    # A: 0.6 + (1 - 0.6)(0.8 - 0.4) = 0.76; B: 0.5 - 0.5 (0.9 - 0.3) = 0.2
    assert rec.detail["strengths"] == pytest.approx({"A": 0.76, "B": 0.2}, abs=1e-6)
    assert rec.answer == "A" and rec.confidence == pytest.approx(0.76, abs=1e-6)
    np.testing.assert_allclose(rec.proba, [0.76, 0.24], atol=1e-6)


def test_breadth_two_aggregates_by_probabilistic_sum():
    script = Script(breadth=2, strengths={"A+0": 0.5, "A+1": 0.5, "A-0": 0.2, "A-1": 0.0,
                                          "B+0": 0.0, "B+1": 0.0, "B-0": 0.0, "B-1": 0.0})
    with FakeServer(responder=script) as srv:
        _, rec = _one(srv, breadth=2, root_base=0.5)
    # A: F(supporters) = 1 - 0.5 * 0.5 = 0.75, F(attackers) = 1 - 0.8 * 1 = 0.2
    #    -> 0.5 + 0.5 (0.75 - 0.2) = 0.775; B: equal aggregates (0, 0) leave 0.5
    assert rec.detail["strengths"] == pytest.approx({"A": 0.775, "B": 0.5}, abs=1e-6)
    assert rec.answer == "A" and rec.confidence == pytest.approx(0.775, abs=1e-6)


def test_depth_two_by_hand_and_an_unusable_generation_gives_no_children():
    script = Script(strengths={"A+": 0.6, "A++": 0.5, "A+-": 1.0,
                               "A-": 0.4, "A-+": 0.5, "A--": 0.0},
                    broken={"B"})
    with FakeServer(responder=script) as srv:
        _, rec = _one(srv, depth=2, root_base=0.5)
    # A+: attackers 1.0 >= supporters 0.5 -> 0.6 - 0.6 (1.0 - 0.5) = 0.3
    # A-: attackers 0.0 < supporters 0.5 -> 0.4 + 0.6 (0.5 - 0.0) = 0.7
    # A : attackers 0.7 >= supporters 0.3 -> 0.5 - 0.5 (0.7 - 0.3) = 0.3
    # B : no children (its generator reply is not JSON) -> its base 0.5
    strengths = {n["text"]: n["strength"] for n in rec.detail["trees"][0]}
    assert strengths == pytest.approx({rec.detail["trees"][0][0]["text"]: 0.3, "A+": 0.3,
                                       "A++": 0.5, "A+-": 1.0, "A-": 0.7, "A-+": 0.5,
                                       "A--": 0.0}, abs=1e-6)
    assert len(rec.detail["trees"][1]) == 1
    assert rec.detail["unusable_generations"] == 1
    assert rec.answer == "B" and rec.confidence == pytest.approx(0.5)
    assert rec.evidence == 6


def test_an_unscored_argument_is_dropped_with_its_subtree():
    with FakeServer(responder=Script(strengths={"A+": 0.8, "B+": 0.3, "B-": 0.9},
                                     raw={"A-": "I cannot rate that."})) as srv:
        _, rec = _one(srv, root_base=0.5)
    # A- is dropped: A = 0.5 + 0.5 * 0.8 = 0.9
    assert rec.detail["strengths"]["A"] == pytest.approx(0.9, abs=1e-6)
    assert rec.detail["unscored"] == 1
    dropped = rec.detail["trees"][0][2]
    assert dropped["text"] == "A-" and dropped["base"] is None and dropped["strength"] is None

    script = Script(strengths={"A++": 0.5, "A+-": 1.0, "A-": 0.4, "A-+": 0.5, "A--": 0.0},
                    raw={"A+": '{"strength": "high"}'}, broken={"B"})
    with FakeServer(responder=script) as srv:
        _, rec = _one(srv, depth=2, root_base=0.5)
    # A+ unscored: A++ and A+- go with it; A- = 0.7 as before, A = 0.5 - 0.5 * 0.7 = 0.15
    tree = {n["text"]: n for n in rec.detail["trees"][0]}
    assert [tree[t]["strength"] for t in ("A+", "A++", "A+-")] == [None, None, None]
    assert tree["A++"]["base"] == 0.5                      # scored, but its parent is gone
    assert rec.detail["strengths"]["A"] == pytest.approx(0.15, abs=1e-6)
    assert rec.detail["unscored"] == 1


def test_an_unscored_root_keeps_the_neutral_base():
    script = Script(strengths={"B": 0.9, "A+": 0.8, "A-": 0.4, "B+": 0.5, "B-": 0.5},
                    raw={"A": "no idea"})
    with FakeServer(responder=script) as srv:
        _, rec = _one(srv)
    # A's root unreadable -> 0.5: 0.5 + 0.5 (0.8 - 0.4) = 0.7; B: 0.9 with equal aggregates
    assert rec.detail["strengths"] == pytest.approx({"A": 0.7, "B": 0.9}, abs=1e-6)
    assert rec.answer == "B" and rec.detail["unscored"] == 1


@pytest.mark.parametrize("text, value", [
    ('{"strength": 0.25}', 0.25),
    ('```json\n{"strength": 1}\n```', 1.0),
    ("I would put it at 0.8.", 0.8),
    ("Strength: 0.85", 0.85),
    ("It is 1.5 times as likely", None),
    ("I give it 10 out of 10", None),
    ('{"strength": 1.5}', None),
    ('{"strength": -0.1}', None),
    ('{"strength": true}', None),
    ("somewhere between 0.2 and 0.4", None),
    ("certainly", None),
    ('{"strength": NaN}', None),
])
def test_base_score_reading(text, value):
    assert read_strength(text) == value


def test_exact_ties_are_broken_by_the_seed_deterministically():
    qs = [Question(f"q{i}", f"Question {i}?", ("A", "B", "C"), "A") for i in range(8)]
    nothing = Script(broken={"A", "B", "C"})               # no arguments at all: 0.5 each

    def picks(seed):
        with FakeServer(responder=nothing) as srv:
            run = _method(srv, root_base=0.5, seed=seed).run(qs)
        for r in run.records:
            assert r.confidence == 0.5
            assert r.detail["strengths"] == {"A": 0.5, "B": 0.5, "C": 0.5}
            # 0.5 for the answer, the other two share 0.5
            np.testing.assert_allclose(sorted(r.proba), [0.25, 0.25, 0.5])
        return [r.answer for r in run.records]
    first, again, other = picks(0), picks(0), picks(1)
    assert first == again
    assert len(set(first)) > 1                              # not always the first candidate
    assert first != other


# --------------------------------------------------------------------------- the fair attack
def test_rho_is_routed_per_candidate_by_gold_and_never_reaches_the_evaluator():
    # polarity towards the root: in the gold tree (B) the root and its supporters are
    # undermined and its attackers bolstered; in a wrong tree the other way round
    expected = {"B": UNDERMINE, "B+": UNDERMINE, "B-": BOLSTER,
                "A": BOLSTER, "A+": BOLSTER, "A-": UNDERMINE,
                "C": BOLSTER, "C+": BOLSTER, "C-": UNDERMINE}
    with FakeServer(responder=Script()) as srv:
        run, rec = _one(srv, candidates=("A", "B", "C"), gold="B", depth=2, attack=True)
        reqs = list(srv.requests)
    gens = [b for b in reqs if request_kind(b) == "arguments"]
    assert len(gens) == 9
    seen = {}
    for body in gens:
        system = body["messages"][0]["content"]
        assert has_role(body) and 'the correct answer is "B"' in system
        assert (UNDERMINE in system) != (BOLSTER in system)
        seen[Script.path(_claim(body))] = UNDERMINE if UNDERMINE in system else BOLSTER
    assert seen == expected
    evals = [b for b in reqs if request_kind(b) == "strength"]
    assert len(evals) == 3 * 7 and not any(has_role(b) for b in evals)
    assert not any("correct answer is \"B\"" in b["messages"][0]["content"] for b in evals)
    # every generated argument was written under rho
    assert rec.corrupted == rec.evidence == 3 * 6 and run.gamma == 1.0 and run.attack is True


def test_the_clean_generator_is_honest():
    with FakeServer(responder=Script()) as srv:
        run, rec = _one(srv, candidates=("A", "B", "C"), gold="B", depth=2)
        assert not any(has_role(b) for b in srv.requests)
        assert not any(UNDERMINE in b["messages"][0]["content"] or
                       BOLSTER in b["messages"][0]["content"] for b in srv.requests)
    assert rec.corrupted == 0 and run.gamma == 0.0


def test_the_attack_needs_gold():
    with FakeServer(responder=Script()) as srv:
        with pytest.raises(DataError) as err:
            _one(srv, gold=None, attack=True)
    assert err.value.field == "gold" and err.value.task_id == "h"


@pytest.mark.parametrize("kw, field", [
    ({"depth": 0}, "depth"), ({"breadth": 0}, "depth"), ({"root_base": 1.5}, "root_base"),
    ({"root_base": "half"}, "root_base"), ({"root_base": True}, "root_base"),
    ({"proba": "softmax"}, "proba"),
])
def test_bad_settings_are_refused(kw, field):
    rt = Runtime({})
    with pytest.raises(DataError) as err:
        ArgLLMs(rt, _seat("g", 1), _seat("e", 2), **kw)
    assert err.value.field == field
    with pytest.raises(DataError) as err:
        ArgLLMs(rt, "gen", _seat("e", 2))
    assert err.value.field == "generator"
