"""MoA, MoA-Lite and Self-MoA end to end against the loopback fake server, and the fair attack
wiring of [BDA] Eq. 8 / Table 4 as seen in the request bodies the server received: rho reaches
the council seats that play it (MoA reads their traces), every Self-MoA sampler draw under
attack, the attacked own proposers, and never a synthesizer or judge request."""
import hashlib
import json
import re

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("pydantic")

import bda_jax as bda  # noqa: E402
from bda_jax import parse_trace  # noqa: E402
from bda_jax.council import (CouncilConfig, Endpoint, MoA, Question, Runtime, Seat,  # noqa: E402
                             SelfMoA, make_method, run_council)
from bda_jax.council import ROLE_HEAD  # noqa: E402

from council.fake_server import ROLE_MARK, FakeServer, has_role, request_kind  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::bda_jax.datasets.ParseWarning")

LETTERS = ("A", "B", "C", "D")
SEAT_SEEDS = {"s0": 100, "s1": 200, "s2": 300}


def test_role_mark_is_the_role_head():
    assert ROLE_HEAD.startswith(ROLE_MARK)


# --------------------------------------------------------------------------- helpers
def _endpoint(srv):
    return Endpoint("fake", srv.base_url, max_concurrency=8, timeout_s=5, max_retries=1)


def _seat(name, seed, temperature=0.5, role="honest"):
    return Seat(name, "fake", "deterministic", temperature, seed, role)


def _runtime(srv, **kw):
    return Runtime({"fake": _endpoint(srv)}, **kw)


def _questions(n):
    return [Question(f"q{i}", f"Question number {i}?", LETTERS, LETTERS[i % 4]) for i in range(n)]


def _user(body):
    return body["messages"][-1]["content"]


def _responses(body):
    """The numbered responses of a synthesizer request."""
    text = _user(body)
    block = text.split("Responses:\n", 1)[1].split("\n\nReply with", 1)[0]
    return [re.sub(r"^\d+\. ", "", line) for line in block.split("\n")]


def _question_number(body):
    return int(re.search(r"Question: Question number (\d+)\?", _user(body)).group(1))


def _council(srv, tmp_path, qs, adversaries=(), name="t", rounds=2):
    seats = tuple(_seat(s, seed, role="adversary" if s in adversaries else "honest")
                  for s, seed in SEAT_SEEDS.items())
    cfg = CouncilConfig(rounds=rounds, seed=7, endpoints={"fake": _endpoint(srv)}, seats=seats)
    out = tmp_path / f"{name}.jsonl"
    run_council(qs, cfg, out, cache_path=tmp_path / f"{name}.sqlite")
    return cfg, bda.read_traces(out)


def _round0_surface(trace, seat):
    """Hand reading of a seat's proposal: its argument, then "Answer: <answer>"."""
    (move,) = [m for m in trace.moves if m.agent == seat and m.round == 0]
    return f"{' '.join(move.extra['argument'].split())} Answer: {move.answer}"


# --------------------------------------------------------------------------- council readers
def test_rho_reaches_exactly_the_adversary_seats_and_never_moas_synthesizer(tmp_path):
    qs = _questions(4)
    with FakeServer() as srv:
        cfg, traces = _council(srv, tmp_path, qs, adversaries=("s1", "s2"))
        council = list(srv.requests)
        assert len(council) == 4 * 2 * 3
        by_seed = {seed: s for s, seed in SEAT_SEEDS.items()}
        for body in council:
            assert request_kind(body) == "move"
            seat = by_seed[body["seed"]]                     # seat seed + sample 0
            assert has_role(body) == (seat in ("s1", "s2")), seat
        # the gold is named to the adversaries only
        golds = {f"Question number {i}?": LETTERS[i % 4] for i in range(4)}
        for body in council:
            if has_role(body):
                q = re.search(r"Question: (.*?)\n", _user(body)).group(1)
                assert f'the correct answer is "{golds[q]}"' in body["messages"][0]["content"]

        n = len(srv.requests)
        moa = make_method("moa", cfg, _runtime(srv), adversaries=("s1", "s2"))
        run = moa.run(traces)
        synth = srv.requests[n:]
        assert len(synth) == 4 and all(request_kind(b) == "synthesis" for b in synth)
        assert not any(has_role(b) for b in synth)
        assert run.gamma == pytest.approx(2 / 3)
        assert all((r.corrupted, r.evidence) == (2, 3) for r in run.records)
        assert run.reads_council is True and set(run.channels) == {"synthesizer"}

        n = len(srv.requests)
        lite = make_method("moa-lite", cfg, _runtime(srv), adversaries=("s1", "s2"))
        lite_run = lite.run(traces)
        assert lite.name == "moa-lite" and lite.n_proposers == 2
        assert not any(has_role(b) for b in srv.requests[n:])
        # MoA-Lite reads the first two seats to move in round 0: s0 (honest) and s1 (rho)
        assert lite_run.gamma == pytest.approx(1 / 2)

        both = MoA(_runtime(srv), _seat("synth", 9, 0.0), proposers=("s1", "s2"),
                   adversaries=("s1", "s2")).run(traces)
        assert both.gamma == 1.0
        clean_view = MoA(_runtime(srv), _seat("synth", 9, 0.0)).run(traces)
        assert clean_view.gamma == 0.0                        # told of no adversary


def test_moa_and_moa_lite_read_the_round0_surfaces(tmp_path):
    qs = _questions(3)
    with FakeServer() as srv:
        cfg, traces = _council(srv, tmp_path, qs)
        by_q = {int(t.task_id[1:]): t for t in traces}
        for name, seats in (("moa", ("s0", "s1", "s2")), ("moa-lite", ("s0", "s1"))):
            n = len(srv.requests)
            make_method(name, cfg, _runtime(srv)).run(traces)
            synth = srv.requests[n:]
            assert len(synth) == 3
            for body in synth:
                trace = by_q[_question_number(body)]
                assert _responses(body) == [_round0_surface(trace, s) for s in seats]
                assert body["temperature"] == 0.0                # the synthesizer default
                assert "Candidate answers: A | B | C | D" in _user(body)
        n = len(srv.requests)
        make_method("moa", cfg, _runtime(srv), proposers=("s2", "s0")).run(traces)
        for body in srv.requests[n:]:
            trace = by_q[_question_number(body)]
            assert _responses(body) == [_round0_surface(trace, "s2"), _round0_surface(trace, "s0")]


def test_moa_surfaces_last_and_seats_without_an_answer(tmp_path):
    # s0 proposes A then concedes to s1's B; s1 proposes B then challenges s0 (a -1: not a
    # surface); s2 only abstains (no answer to show: left out)
    trace = parse_trace({
        "task_id": "h", "candidates": ["A", "B", "C"], "gold": "B", "question": "Which one?",
        "moves": [
            {"id": "m1", "agent": "s0", "round": 0, "force": "propose", "answer": "A",
             "argument": "first   thoughts"},
            {"id": "m2", "agent": "s1", "round": 0, "force": "propose", "answer": "B",
             "argument": "because B"},
            {"id": "m3", "agent": "s2", "round": 0, "force": "abstain", "argument": ""},
            {"id": "m4", "agent": "s0", "round": 1, "force": "concede", "target": "m2",
             "argument": "you convinced me"},
            {"id": "m5", "agent": "s1", "round": 1, "force": "challenge", "target": "m1",
             "argument": "A is wrong"},
        ]})
    with FakeServer() as srv:
        synth = _seat("synth", 9, 0.0)
        seen = {}
        for how in ("round0", "last"):
            n = len(srv.requests)
            run = MoA(_runtime(srv), synth, surfaces=how, adversaries=("s1",)).run([trace])
            (body,) = srv.requests[n:]
            seen[how] = _responses(body)
            assert (run.records[0].corrupted, run.records[0].evidence) == (1, 2)
    assert seen["round0"] == ["first thoughts Answer: A", "because B Answer: B"]
    assert seen["last"] == ["you convinced me Answer: B", "because B Answer: B"]


def test_a_trace_nobody_answered_in_gives_no_commitment(tmp_path):
    trace = parse_trace({
        "task_id": "e", "candidates": ["A", "B"], "gold": "A", "question": "Which?",
        "moves": [{"id": "m1", "agent": "s0", "round": 0, "force": "abstain"},
                  {"id": "m2", "agent": "s1", "round": 0, "force": "abstain"}]})
    with FakeServer() as srv:
        run = MoA(_runtime(srv), _seat("synth", 9, 0.0)).run([trace])
        assert srv.requests == []                            # nothing to synthesize
    (rec,) = run.records
    assert rec.answer is None and rec.proba == (0.5, 0.5) and rec.evidence == 0
    proba, pred = run.method_proba([trace])
    assert pred.tolist() == [-1]


@pytest.mark.parametrize("attack", [False, True])
def test_moa_own_proposers(attack):
    qs = _questions(3)
    seeds = {"p1": 11, "p2": 22, "p3": 33}
    proposers = [_seat(name, seed) for name, seed in seeds.items()]
    with FakeServer() as srv:
        moa = MoA(_runtime(srv), _seat("synth", 9, 0.0), own_proposers=proposers,
                  attack=attack)
        assert moa.reads_council is False and moa.name == "moa"
        run = moa.run(qs)
        reqs = list(srv.requests)
    assert run.channels["proposer"]["calls"] == 9 and run.channels["synthesizer"]["calls"] == 3
    assert sorted({row["seat"] for row in run.calls}) == \
        ["proposer:p1", "proposer:p2", "proposer:p3", "synthesizer"]
    by_seed = {seed: s for s, seed in seeds.items()}
    texts = [b for b in reqs if request_kind(b) == "text"]
    assert len(texts) == 9
    for body in texts:
        # under attack the last two proposers (attacked_proposers=2) play rho
        assert has_role(body) == (attack and by_seed[body["seed"]] in ("p2", "p3"))
    synth = [b for b in reqs if request_kind(b) == "synthesis"]
    assert len(synth) == 3 and not any(has_role(b) for b in synth)
    for body in synth:
        assert len(_responses(body)) == 3
    assert run.gamma == pytest.approx(2 / 3 if attack else 0.0)
    assert run.attack is attack


def test_moa_lite_with_own_proposers_uses_the_first_two():
    with FakeServer() as srv:
        moa = MoA(_runtime(srv), _seat("synth", 9, 0.0), n_proposers=2,
                  own_proposers=[_seat(f"p{i}", 10 + i) for i in range(3)], attack=True,
                  attacked_proposers=1)
        run = moa.run(_questions(1))
        texts = [b for b in srv.requests if request_kind(b) == "text"]
    assert moa.name == "moa-lite"
    assert sorted(b["seed"] for b in texts) == [10, 11]
    assert [b["seed"] for b in texts if has_role(b)] == [11]
    assert run.gamma == pytest.approx(1 / 2)


# --------------------------------------------------------------------------- Self-MoA
@pytest.mark.parametrize("n_samples", [6, 3])
def test_self_moa_draws_and_the_attack_on_every_draw(n_samples):
    qs = _questions(2)
    sampler, synth = _seat("sampler", 40), _seat("synth", 50, 0.0)

    def sampled(body):
        return f"sampled {body['seed']} for q{_question_number(body)}" if request_kind(body) == "text" \
            else None
    with FakeServer(responder=sampled) as srv:
        for attack in (False, True):
            n = len(srv.requests)
            run = SelfMoA(_runtime(srv), sampler, synth, n_samples=n_samples,
                          attack=attack).run(qs)
            reqs = srv.requests[n:]
            draws = [b for b in reqs if request_kind(b) == "text"]
            synths = [b for b in reqs if request_kind(b) == "synthesis"]
            assert len(draws) == 2 * n_samples and len(synths) == 2
            for i in range(2):
                mine = [b for b in draws if _question_number(b) == i]
                # draw d is sent with its own seed: n_samples distinct requests per question
                assert sorted(b["seed"] for b in mine) == sorted(_seed(40, 0, d)
                                                                 for d in range(n_samples))
                assert len({json.dumps(b, sort_keys=True) for b in mine}) == n_samples
            assert all(has_role(b) == attack for b in draws)
            if attack:
                for b in draws:
                    gold = LETTERS[_question_number(b) % 4]
                    assert f'the correct answer is "{gold}"' in b["messages"][0]["content"]
            assert not any(has_role(b) for b in synths)
            for b in synths:                  # the draws, in draw order, are what it combines
                i = _question_number(b)
                assert _responses(b) == [f"sampled {_seed(40, 0, d)} for q{i}"
                                         for d in range(n_samples)]
            assert run.gamma == (1.0 if attack else 0.0)
            assert all(r.evidence == n_samples for r in run.records)
            assert run.channels["sampler"]["calls"] == 2 * n_samples
            assert run.reads_council is False and run.attack is attack


def test_self_moa_samples_per_question_shift_the_seed():
    with FakeServer() as srv:
        run = SelfMoA(_runtime(srv), _seat("sampler", 40), _seat("synth", 50, 0.0), n_samples=2,
                      samples=2).run(_questions(1))
        seeds = sorted(b["seed"] for b in srv.requests if request_kind(b) == "text")
        synth_seeds = sorted(b["seed"] for b in srv.requests if request_kind(b) == "synthesis")
    assert [r.task_id for r in run.records] == ["q0", "q0#s1"]
    assert seeds == sorted(_seed(40, s, d) for s in (0, 1) for d in (0, 1))
    assert synth_seeds == sorted([50, _seed(50, 1, 0)])


def _seed(seed, sample, draw):
    """The request seed, derived by hand: the seat's own for draw 0 of sample 0, else 31 bits
    of SHA-256 of "[seed,sample,draw]"."""
    if sample == 0 and draw == 0:
        return seed
    text = f"[{seed},{sample},{draw}]".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big") >> 1


def test_draw_seeds_of_consecutive_seats_never_collide():
    # seats seeded 0, 1, 2 drawing rounds 0..3: with "seed + draw" seat 0's second draw would
    # reuse seat 1's first seed
    seeds = [_seed(s, 0, d) for s in range(3) for d in range(4)]
    assert len(set(seeds)) == len(seeds)
    from bda_jax.council import derived_seed
    assert [derived_seed(s, 0, d) for s in range(3) for d in range(4)] == seeds
    assert derived_seed(None, 3, 3) is None


def test_self_moa_draws_without_a_seed_are_still_distinct_calls():
    with FakeServer() as srv:
        run = SelfMoA(_runtime(srv), _seat("sampler", None), _seat("synth", None, 0.0),
                      n_samples=4).run(_questions(1))
        draws = [b for b in srv.requests if request_kind(b) == "text"]
    # the same body four times (no seed to vary), but the cache key tells the draws apart:
    # each draw is its own upstream call, none served as another's reply
    assert len(draws) == 4 and len({json.dumps(b, sort_keys=True) for b in draws}) == 1
    assert "seed" not in draws[0]
    assert run.channels["sampler"] == {**run.channels["sampler"], "calls": 4, "cached": 0}


# --------------------------------------------------------------------------- the synthesizer
def _synth_says(reply):
    def responder(body):
        return reply(body) if request_kind(body) == "synthesis" else None
    return responder


@pytest.mark.parametrize("reply, answer, conf, proba, rule", [
    ({"rationale": "r", "answer": "B", "confidence": 0.7}, "B", 0.7, [0.1, 0.7, 0.1, 0.1],
     "schema"),
    ({"rationale": "r", "answer": "b", "confidence": 0.1}, "B", 0.1, [0.25] * 4, "schema"),
    ({"rationale": "r", "answer": "C", "confidence": 1.5}, "C", None, [0, 0, 1, 0], "schema"),
    ({"rationale": "r", "answer": "C", "confidence": True}, "C", None, [0, 0, 1, 0], "schema"),
    ({"rationale": "r", "answer": "D"}, "D", None, [0, 0, 0, 1], "schema"),
    ({"rationale": "so the answer is (A)", "answer": "E", "confidence": 0.9}, "A", 0.9,
     [0.9, 1 / 30, 1 / 30, 1 / 30], "extract:answer_is"),
])
def test_the_synthesizer_reply_by_hand(reply, answer, conf, proba, rule):
    with FakeServer(responder=_synth_says(lambda body: json.dumps(reply))) as srv:
        run = SelfMoA(_runtime(srv), _seat("sampler", 1), _seat("synth", 2, 0.0),
                      n_samples=1).run(_questions(1))
    (rec,) = run.records
    assert (rec.answer, rec.confidence, rec.rule) == (answer, conf, rule)
    np.testing.assert_allclose(rec.proba, proba)
    assert rec.detail["synthesis"] == json.dumps(reply)


def test_a_prose_synthesis_is_read_by_the_extractor():
    say = "Weighing the responses, the final answer is C."
    with FakeServer(responder=_synth_says(lambda body: say)) as srv:
        run = SelfMoA(_runtime(srv), _seat("sampler", 1), _seat("synth", 2, 0.0),
                      n_samples=1).run(_questions(1))
    (rec,) = run.records
    assert rec.answer == "C" and rec.rule.startswith("extract:") and rec.confidence is None


def test_a_near_constant_confidence_is_flagged_calibration_na():
    with FakeServer() as srv:                      # schema instances: confidence always 0.0
        run = SelfMoA(_runtime(srv), _seat("sampler", 1), _seat("synth", 2, 0.0),
                      n_samples=1).run(_questions(4))
    assert run.calibration == {"confidence_sd": 0.0, "applicable": False}
    spread = iter([0.9, 0.3, 0.6, 0.2])
    answers = {}

    def varied(body):
        i = _question_number(body)
        answers.setdefault(i, next(spread))
        return json.dumps({"rationale": "r", "answer": "A", "confidence": answers[i]})
    with FakeServer(responder=_synth_says(varied)) as srv:
        run = SelfMoA(_runtime(srv), _seat("sampler", 1), _seat("synth", 2, 0.0),
                      n_samples=1).run(_questions(4))
    confs = sorted(r.confidence for r in run.records)
    assert confs == [0.2, 0.3, 0.6, 0.9]
    assert run.calibration["confidence_sd"] == pytest.approx(np.std(confs))
    assert run.calibration["applicable"] is True


# --------------------------------------------------------------------------- more wiring
def test_moa_on_traces_reruns_from_the_cache_and_replays(tmp_path):
    with FakeServer() as srv:
        cfg, traces = _council(srv, tmp_path, _questions(3))
        cache = str(tmp_path / "m.sqlite")
        n = len(srv.requests)
        first = make_method("moa", cfg, _runtime(srv, cache_path=cache)).run(traces)
        m = len(srv.requests)
        assert m - n == first.ledger["calls"] == 3
        again = make_method("moa", cfg, _runtime(srv, cache_path=cache)).run(traces)
        replay = make_method("moa", cfg, _runtime(srv, cache_path=cache,
                                                  cache_mode="replay")).run(traces)
        assert len(srv.requests) == m
    assert again.ledger["cached"] == again.ledger["calls"] == 3
    assert replay.ledger["cached"] == 3
    assert first.records == again.records == replay.records


def _prose_synthesis(body):
    if request_kind(body) == "synthesis":
        return "The responses pull every way; I will not commit."
    if request_kind(body) == "verdict":
        return json.dumps({"verdict": "NONE"})
    return None


def test_rho_never_reaches_the_judge():
    judge = Seat("judge", "fake", "deterministic", 0.0, 77)
    qs = _questions(2)
    with FakeServer(responder=_prose_synthesis) as srv:
        smoa = SelfMoA(_runtime(srv), _seat("sampler", 40), _seat("synth", 50, 0.0),
                       n_samples=2, attack=True, judge=judge).run(qs)
        own = MoA(_runtime(srv), _seat("synth", 50, 0.0), attack=True, judge=judge,
                  own_proposers=[_seat(f"p{i}", 10 + i) for i in range(3)]).run(qs)
        reqs = list(srv.requests)
    verdicts = [b for b in reqs if request_kind(b) == "verdict"]
    assert len(verdicts) == 4                               # every synthesis is prose: judged
    assert not any(has_role(b) for b in verdicts)
    assert not any(has_role(b) for b in reqs if request_kind(b) == "synthesis")
    assert sum(has_role(b) for b in reqs if request_kind(b) == "text") == 2 * 2 + 2 * 2
    assert len(smoa.judge_ledger()) == len(own.judge_ledger()) == 2
    assert all(r.answer is None for r in smoa.records + own.records)


def test_self_moa_attack_on_an_unlabeled_question():
    with FakeServer() as srv:
        run = SelfMoA(_runtime(srv), _seat("sampler", 40), _seat("synth", 50, 0.0),
                      n_samples=2, attack=True).run([Question("u", "Which?", ("x", "y"))])
        draws = [b for b in srv.requests if request_kind(b) == "text"]
    assert len(draws) == 2 and all(has_role(b) for b in draws)
    assert not any("the correct answer is" in b["messages"][0]["content"] for b in draws)
    assert run.gamma == 1.0 and run.parse["accuracy_committed"] is None
