"""The reply schema (OpenAI strict structured outputs) and parse_reply's checks."""
import json

import pytest

from bda_jax.council import IllegalMove, LegalMoves, MoveReply, ReplyError, move_schema, parse_reply

R0 = LegalMoves(("propose",), ("4", "5", "6"), ())
R1 = LegalMoves(("propose", "concede", "challenge", "retract"), ("4", "5", "6"),
                ("m1", "m2", "m3"), ("m1",))
OPEN = LegalMoves(("propose", "abstain"), (), (), (), True)


def strict_ok(schema):
    """OpenAI's strict-mode rules, checked recursively: every object closed, every property
    required; types from the supported set."""
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == sorted(schema["properties"])
    for prop in schema["properties"].values():
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        assert set(types) <= {"string", "null"}
        if "enum" in prop:
            for v in prop["enum"]:
                assert (v is None and "null" in types) or (isinstance(v, str)
                                                          and "string" in types)
    json.dumps(schema, allow_nan=False)


def test_schema_round_one():
    s = move_schema(R1)
    strict_ok(s)
    assert s == {
        "type": "object",
        "properties": {
            "force": {"type": "string", "enum": ["propose", "concede", "challenge", "retract"],
                      "description": "the kind of move"},
            "answer": {"type": ["string", "null"], "enum": ["4", "5", "6", None],
                       "description": "the answer, for propose or vote; null otherwise"},
            "target": {"type": ["string", "null"], "enum": ["m1", "m2", "m3", None],
                       "description": "the id of the move conceded to, challenged or "
                                      "retracted; null otherwise"},
            "argument": {"type": "string", "maxLength": 400,
                         "description": "a short reason, shown to the other agents"},
        },
        "required": ["force", "answer", "target", "argument"],
        "additionalProperties": False,
    }


def test_schema_round_zero_and_open():
    s = move_schema(R0)
    strict_ok(s)
    assert s["properties"]["target"] == {"type": "null", "description": "always null now"}
    assert s["properties"]["answer"]["enum"] == ["4", "5", "6", None]
    o = move_schema(OPEN)
    strict_ok(o)
    assert o["properties"]["answer"]["type"] == ["string", "null"]
    assert "enum" not in o["properties"]["answer"]
    assert o["properties"]["force"]["enum"] == ["propose", "abstain"]
    only_targets = move_schema(LegalMoves(("concede",), ("4",), ("m1",)))
    assert only_targets["properties"]["answer"]["type"] == "null"


def test_schema_needs_a_legal_force():
    with pytest.raises(IllegalMove, match="no move is legal"):
        move_schema(LegalMoves((), ("4",), ()))


def text(**kw):
    body = {"force": "propose", "answer": None, "target": None, "argument": "x"}
    body.update(kw)
    return json.dumps(body)


def test_parse_good_replies():
    assert parse_reply(text(answer="5"), R0) == MoveReply("propose", "5", None, "x")
    fenced = "\n ```json\n" + text(force="concede", target="m2", argument="ok") + "\n```\n"
    assert parse_reply(fenced, R1) == MoveReply("concede", None, "m2", "ok")
    bare_fence = "```\n" + text(answer="4") + "\n```"
    assert parse_reply(bare_fence, R0).answer == "4"
    # the field a force does not take is dropped, whatever it holds
    assert parse_reply(text(force="challenge", answer="4", target="m3"), R1) == \
        MoveReply("challenge", None, "m3", "x")
    assert parse_reply(text(answer="5", target="m1"), R1).target is None
    assert parse_reply(text(force="retract", target="m1"), R1).target == "m1"
    assert parse_reply(text(force="abstain", answer="Paris"), OPEN) == \
        MoveReply("abstain", None, None, "x")
    assert parse_reply(text(answer=" Paris "), OPEN).answer == "Paris"
    # candidates matched through the normalizer, returned as written in the question
    assert parse_reply(text(answer="$5$"), R0).answer == "5"


@pytest.mark.parametrize("raw, legal, reason", [
    ("", R0, "empty reply"),
    ("{\"force\": \"propose\"", R0, "not JSON"),
    ("Sure! Here it is", R0, "not JSON"),
    ("[1]", R0, "not a JSON object"),
    (text(answer="5", extra=1), R0, "unexpected key 'extra'"),
    (json.dumps({"force": "propose", "answer": "5", "target": None}), R0, "missing argument"),
    (json.dumps({"force": "propose", "target": None, "argument": ""}), R0, "missing answer"),
    (text(force=3), R0, "force must be a string"),
    (text(force="concede", target="m1"), R0, "force 'concede' not legal"),
    (text(force="vote", answer="5"), R1, "force 'vote' not legal"),
    (text(answer=None), R0, "missing answer"),
    (text(answer=5), R0, "answer must be a string"),
    (text(answer="7"), R0, "answer '7' not a candidate"),
    (text(answer="  "), OPEN, "answer is empty"),
    (text(answer="5", argument=None), R0, "argument must be a string"),
    (text(answer="5", argument="y" * 401), R0, "longer than 400"),
    (text(force="concede"), R1, "missing target"),
    (text(force="concede", target=2), R1, "target must be a string"),
    (text(force="concede", target="m9"), R1, "target 'm9' not legal"),
    (text(force="concede", target="m1"), R1, "your own move"),
    (text(force="challenge", target="m1"), R1, "your own move"),
    (text(force="retract", target="m2"), R1, "not your own move"),
])
def test_parse_refusals_give_a_short_reason(raw, legal, reason):
    with pytest.raises(ReplyError) as info:
        parse_reply(raw, legal)
    assert reason in str(info.value)
    assert len(str(info.value)) < 120


def test_argument_at_the_limit_is_accepted():
    assert len(parse_reply(text(answer="5", argument="y" * 400), R0).argument) == 400
