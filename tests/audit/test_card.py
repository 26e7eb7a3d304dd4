"""Trace-Audit Card ([Audit] Table 21, metric rows as in Table 6)."""
import json
import math
import os
import re

import pytest

from bda_jax import ArtifactError, DataError
from bda_jax import audit as A
from bda_jax.audit import SCHEMA_VERSION, AuditCard, MetricEntry


def _card(**over):
    """The audited configuration of [Audit] (Tables 6-8) as a card."""
    kw = dict(
        protocol_name="confidence-routed broadcast", protocol_version="1.0",
        agent_model=["openai/gpt-oss-120b"], agent_pool="homogeneous", n_agents=3,
        routing_rule="confidence argmax",
        tie_rule="first listed agent wins", confidence_scale="integer 0-100",
        paper_of_record="Jiang et al. 2026, confidence routing audit",
        decoding_temperature=0.0, speak_threshold=65, memory_regime="summary_plus_recent, window 5",
        approval_policy="unanimous approval; majority_revision", evaluator="gpt-oss-120b evaluator",
        judge="gpt-oss-120b equivalence judge", extraction_method="boxed answer, then judge",
        parse_rate=MetricEntry("parse rate", 0.984, 14129, 14359, unit="polls"),
        ci_method="problem-cluster bootstrap, 421 clusters",
        metrics=[
            MetricEntry("CRA", 0.506, 4795, 9467, 0.486, 0.527, axis="routing",
                        unit="sel-valid blocks"),
            MetricEntry("HRWP", 0.906, 4795, 5295, 0.896, 0.915, axis="routing",
                        unit="possible-hit blocks"),
            MetricEntry("ECE (raw)", 0.278, None, 23391, axis="calibration",
                        unit="valid poll candidates", note="10 equal-width bins"),
            MetricEntry("PSDR", 0.204, 1927, 9436, axis="commitment", unit="valid selected pairs"),
            MetricEntry("NPCS|D", -161 / 1927, -161, 1927, axis="commitment",
                        unit="divergent pairs"),
        ])
    kw.update(over)
    return AuditCard(**kw)


def test_json_round_trip_and_file_round_trip(tmp_path):
    card = _card()
    text = card.to_json()
    d = json.loads(text)
    assert d["schema_version"] == SCHEMA_VERSION and list(d)[0] == "schema_version"
    assert d["metrics"][3] == {"name": "PSDR", "value": 0.204, "numerator": 1927,
                               "denominator": 9436, "ci_low": None, "ci_high": None,
                               "note": None, "axis": "commitment",
                               "unit": "valid selected pairs"}
    assert AuditCard.from_json(text) == card
    path = tmp_path / "card.json"
    card.write(path)
    assert AuditCard.read(path) == card
    assert sorted(os.listdir(tmp_path)) == ["card.json"]          # no temporary file left
    card.write(tmp_path / "card.md")                               # .md -> Markdown
    assert (tmp_path / "card.md").read_text().startswith("# Trace-Audit Card")


def test_undefined_values_are_null_and_python_values_checked():
    card = _card(metrics=[MetricEntry.from_ratio("PSIR", A.ratio(0, 0), unit="divergent pairs")])
    d = json.loads(card.to_json())                                 # strict JSON: NaN -> null
    assert d["metrics"][0]["value"] is None and d["metrics"][0]["denominator"] == 0
    with pytest.raises(DataError) as e:
        _card(n_agents=0)
    assert e.value.field == "n_agents"
    with pytest.raises(DataError) as e:
        MetricEntry("x", 0.5, 1, -2)
    assert e.value.field == "metric.denominator"


def test_markdown_lists_every_metric_with_its_denominator():
    card = _card()
    md = card.to_markdown()
    cells = [re.split(r"(?<!\\)\|", line) for line in md.splitlines()]   # unescaped pipes
    rows = {c[2].strip(): "|".join(c) for c in cells if len(c) == 9}
    # CRA 0.506 = 4,795 / 9,467 sel-valid blocks, CI [0.486, 0.527]
    assert "| 0.506 | [0.486, 0.527] | 4,795 | 9,467 sel-valid blocks |" in rows["CRA"]
    for m in card.metrics:
        line = rows[m.name.replace("|", "\\|")]
        assert f"{int(m.denominator):,} {m.unit}" in line
        assert f"{m.value:.3f}" in line
    assert "| Parse rate | 0.984 (14,129 / 14,359 polls) |" in md
    assert "| Speak threshold | 65 |" in md and "95% CI" in md
    assert "| Agent pool | homogeneous |" in md


def test_card_from_commitment_metrics():
    m = A.commitment_metrics(["1", "2", "3"], ["1", "9", "3"], [1, 0, 1], [1, 1, 1])
    entries = [MetricEntry(**e, axis="commitment") for e in m.entries()]
    card = _card(metrics=entries)
    psdr = next(e for e in card.metrics if e.name == "psdr")
    assert (psdr.numerator, psdr.denominator) == (1, 3)
    assert AuditCard.from_json(card.to_json()) == card


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("protocol_name"), "protocol_name"),
    (lambda d: d.pop("schema_version"), "schema_version"),
    (lambda d: d.update(schema_version="9.9"), "schema_version"),
    (lambda d: d.update(colour="blue"), "colour"),
    (lambda d: d.update(n_agents="three"), "n_agents"),
    (lambda d: d.update(agent_model=[]), "agent_model"),
    (lambda d: d.update(agent_pool="mixed"), "agent_pool"),
    (lambda d: d.update(decoding_temperature=-1), "decoding_temperature"),
    (lambda d: d["metrics"][1].update(denominator=-5), "metrics[1].denominator"),
    (lambda d: d["metrics"][0].update(value="high"), "metrics[0].value"),
    (lambda d: d["metrics"][2].update(extra=1), "metrics[2].extra"),
    (lambda d: d["metrics"][0].pop("name"), "metrics[0].name"),
    (lambda d: d["metrics"][0].update(ci_low=0.9), "metrics[0].ci_low"),
    (lambda d: d.update(metrics={"a": 1}), "metrics"),
    (lambda d: d["parse_rate"].update(numerator=True), "parse_rate.numerator"),
])
def test_bad_card_json_names_the_field(mutate, field, tmp_path):
    d = json.loads(_card().to_json())
    mutate(d)
    with pytest.raises(ArtifactError) as e:
        AuditCard.from_json(json.dumps(d))
    assert e.value.field == field and field in str(e.value)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ArtifactError) as e:                     # from a file: file + field
        AuditCard.read(path)
    assert e.value.field == field and e.value.file == str(path)


def test_unparseable_card_text():
    with pytest.raises(ArtifactError) as e:
        AuditCard.from_json('{"schema_version": "0.1",')
    assert e.value.line == 1
    with pytest.raises(ArtifactError, match="NaN"):
        AuditCard.from_json('{"schema_version": "0.1", "ci_level": NaN}')
    with pytest.raises(ArtifactError, match="JSON object"):
        AuditCard.from_json("[1, 2]")
    with pytest.raises(ArtifactError):
        AuditCard.read("/nonexistent/dir/card.json")


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "card.json"
    _card().write(path)
    before = path.read_text()
    card = _card(protocol_version="2.0")

    def failing_to_json(self):
        raise RuntimeError("serializer failed")

    monkeypatch.setattr(AuditCard, "to_json", failing_to_json)
    with pytest.raises(RuntimeError):
        card.write(path)
    monkeypatch.undo()
    assert path.read_text() == before and sorted(os.listdir(tmp_path)) == ["card.json"]

    # a failure after the temporary file exists (the rename) also leaves no trace
    def failing_replace(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        card.write(path)
    monkeypatch.undo()
    assert path.read_text() == before and sorted(os.listdir(tmp_path)) == ["card.json"]
    assert math.isclose(AuditCard.read(path).ci_level, 0.95)


def test_agent_pool_is_optional_and_checked():
    d = json.loads(_card().to_json())
    d.pop("agent_pool")                                   # a card without it still reads
    assert AuditCard.from_json(json.dumps(d)).agent_pool is None
    with pytest.raises(DataError) as e:
        _card(agent_pool="both")
    assert e.value.field == "agent_pool"
