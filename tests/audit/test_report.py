"""The whole audit in one call ([Audit]): a broadcast log -> routing, calibration and
commitment metrics with denominators and cluster-bootstrap intervals -> a Trace-Audit Card."""
import dataclasses
import json
import math
import re

import numpy as np
import pytest

from bda_jax import DataError, TraceError
from bda_jax.audit import (AuditCard, audit_broadcast, audit_file, cluster_bootstrap, cra,
                           from_records, oracle_success, pcca, router_block_success,
                           simulate_broadcast, tier_stratified_folds, write_broadcast_log)


@pytest.fixture(scope="module")
def sim_report():
    log = simulate_broadcast(0, n_problems=30)          # 6 tiers of 5 problems, 240 blocks
    return log, audit_broadcast(log, n_boot=50, protocol_name="simulated broadcast",
                                protocol_version="test", agent_model=["sim-a", "sim-b"])


def _rows(markdown):
    """Metric-table rows of the card's Markdown by metric name (pipes inside cells escaped)."""
    cells = [re.split(r"(?<!\\)\|", line) for line in markdown.splitlines()]
    return {c[2].strip().replace("\\|", "|"): "|".join(c) for c in cells if len(c) == 9}


def test_simulated_card_round_trips_and_lists_every_metric_with_its_denominator(sim_report,
                                                                             tmp_path):
    log, report = sim_report
    card = report.card
    assert AuditCard.from_json(card.to_json()) == card
    card.write(tmp_path / "card.json")
    assert AuditCard.read(tmp_path / "card.json") == card
    names = [m.name for m in card.metrics]
    for expected in ("CRA", "HRWP", "MCR", "PCCA (tie-aware)", "CTR", "selected-invalid rate",
                     "router: runtime_argmax", "router: learned", "ECE (raw)",
                     "ECE (isotonic)", "AUROC (raw)", "PSDR", "PSIR", "PSDRg", "NPCS|D",
                     "source novel: share", "flag peer_echo: share"):
        assert expected in names
    rows = _rows(report.to_markdown())
    for m in card.metrics:
        assert m.denominator is not None and m.unit, m.name
        if m.denominator == 0:                 # an empty class: undefined, no interval
            assert m.value is None and m.ci_low is None and m.ci_high is None, m.name
            continue
        assert m.ci_low is not None and m.ci_low <= m.ci_high, m.name
        if m.numerator is not None and m.denominator > 0:
            assert m.value == pytest.approx(m.numerator / m.denominator, rel=1e-6), m.name
        den = f"{int(m.denominator):,}" if float(m.denominator).is_integer() else None
        line = rows[m.name]
        assert f"| {m.value:.3f} |" in line, m.name
        if den is not None:
            assert f"| {den} {m.unit} |" in line, m.name
    assert card.n_agents == 3 and card.agent_model == ["sim-a", "sim-b"]
    assert card.parse_rate.denominator == log.n_polls
    assert card.parse_rate.numerator == sum(c is not None for c in log.candidate)
    assert card.agent_pool == "heterogeneous"                  # two distinct agent models
    assert "| Agent pool | heterogeneous |" in card.to_markdown()
    assert "50 resamples" in card.ci_method
    # the routing rows are the routing module's own ratios
    by_name = {m.name: m for m in card.metrics}
    assert (by_name["CRA"].numerator, by_name["CRA"].denominator) == cra(log)[1:]
    assert by_name["PCCA (tie-aware)"].value == pytest.approx(pcca(log).value)
    # calibration counts only valid candidates with a stated score; estimates are the rows
    assert by_name["ECE (raw)"].denominator == int(log.valid.sum())
    for method in ("raw", "temperature", "isotonic"):
        row = report.calibration.row(method)
        assert by_name[f"ECE ({method})"].value == pytest.approx(row.ece, abs=1e-6)
        assert by_name[f"AUROC ({method})"].value == pytest.approx(row.auroc, abs=1e-6)
    n_right = int(log.correct[log.valid].sum())
    assert by_name["AUROC (raw)"].denominator == n_right * (int(log.valid.sum()) - n_right)


def test_per_tier_tables_split_the_denominators(sim_report):
    log, report = sim_report
    assert list(report.per_tier) == ["01", "02", "03", "04", "05", "06"]
    overall = {m.name: m for m in report.card.metrics}
    for name in ("CRA", "HRWP", "PSDR", "candidate accuracy"):
        tiers = [next(e for e in rows if e.name == name) for rows in report.per_tier.values()]
        assert sum(e.numerator for e in tiers) == overall[name].numerator
        assert sum(e.denominator for e in tiers) == overall[name].denominator
    md = report.to_markdown()
    assert "## Per tier" in md and md.count("\n| 0") == 6
    assert json.loads(json.dumps(report.to_dict()))["per_tier"]["02"][0]["name"] == \
        "selected-invalid rate"


def _poll(turn, agent, score, cand, correct, selected=False):
    return {"kind": "poll", "problem": "p1", "outer_round": 0, "turn": turn, "agent": agent,
            "score": score, "candidate": cand, "correct": correct, "selected": selected}


def _speak(turn, speaker, spoken, ok, incumbent=None, equivalence=None):
    return {"kind": "speak", "problem": "p1", "outer_round": 0, "turn": turn,
            "speaker": speaker, "spoken": spoken, "spoken_correct": ok, "incumbent": incumbent,
            "equivalence": equivalence}


# One problem, five turns, gold "x". earlier_public is left out, so it is derived from the
# earlier speak records: (a x), then (b x), then (a x), ...
#   turn  speaker poll -> spoken   earlier public (own | peers)   incumbent  class
#   0     a       x(1) -> x(1)     - | -                          -          not divergent
#   1     b       y(0) -> x(1)     - | x                          -          peer_echo, improves
#   2     a       z(0) -> x(1)     x | x                          -          self_revert (peer too)
#   3     b       x(1) -> w(0)     x | x, x                       w          incumbent_pull, degrades
#   4     a       q(0) -> v(0)     x, x | x, x                    -          judged equivalent
# valid pairs 5, divergent 3 (turns 1-3): PSDR 3/5, PSIR 2/3, PSDRg 1/3, NPCS|D 1/3;
# shift (1 + 1 - 1) / 5; peer-echo flags fire on turns 1 and 2: 2/3.
HAND = [
    _poll(0, "a", .9, "x", True, True), _poll(0, "b", .5, "y", False), _speak(0, "a", "x", True),
    _poll(1, "a", .4, "x", True), _poll(1, "b", .8, "y", False, True), _speak(1, "b", "x", True),
    _poll(2, "a", .9, "z", False, True), _poll(2, "b", .3, "x", True), _speak(2, "a", "x", True),
    _poll(3, "a", .2, "x", True), _poll(3, "b", .7, "x", True, True),
    _speak(3, "b", "w", False, incumbent="w"),
    _poll(4, "a", .6, "q", False, True), _poll(4, "b", .1, "x", True),
    _speak(4, "a", "v", False, equivalence="equivalent"),
]


def test_commitment_inputs_are_read_off_the_log_by_hand():
    report = audit_broadcast(from_records(HAND), n_boot=20, protocol_version="hand")
    m = {e.name: e for e in report.card.metrics}

    def parts(name):
        return m[name].value, m[name].numerator, m[name].denominator

    assert parts("PSDR") == (0.6, 3, 5)
    assert parts("PSIR") == (2 / 3, 2, 3) and parts("PSDRg") == (1 / 3, 1, 3)
    assert parts("NPCS|D") == (1 / 3, 1, 3)
    assert parts("unconditional shift (spoken - poll)") == (0.2, 1, 5)
    assert parts("poll accuracy") == (0.4, 2, 5) and parts("spoken accuracy") == (0.6, 3, 5)
    for cls in ("self_revert", "incumbent_pull", "peer_echo"):
        assert parts(f"source {cls}: share") == (1 / 3, 1, 3)
    assert parts("source novel: share") == (0.0, 0, 3)
    assert parts("source incumbent_pull: change in correctness") == (-1.0, -1, 1)
    assert parts("flag peer_echo: share") == (2 / 3, 2, 3)
    # routing: selected correct on turns 0 and 3 of 5 selected-valid blocks
    assert parts("CRA") == (0.4, 2, 5)
    # one problem is one cluster: every interval collapses onto the estimate
    assert m["CRA"].ci_low == m["CRA"].ci_high == 0.4
    # one problem cannot fill two folds: calibration and the learned router say why
    notes = report.card.notes
    assert "Calibration not computed" in notes and "Router learned not scored" in notes
    assert not any(e.axis == "calibration" for e in report.card.metrics)
    assert report.per_tier == {}


def test_polls_only_log_skips_commitment_and_checks_card_fields():
    polls = [r for r in HAND if r["kind"] == "poll"]
    report = audit_broadcast(from_records(polls), n_boot=20, routers=("runtime_argmax",))
    assert report.commitment is None and report.sources is None
    assert "No speak records" in report.card.notes
    assert not any(e.axis.startswith("commitment") for e in report.card.metrics)
    with pytest.raises(DataError) as e:
        audit_broadcast(from_records(polls), n_boot=20, colour="blue")
    assert e.value.field == "colour"
    with pytest.raises(DataError) as e:
        audit_broadcast(from_records(polls), n_boot=20, metrics=[])
    assert e.value.field == "metrics"
    assert math.isclose(audit_broadcast(from_records(polls), n_boot=20,
                                        routers=()).card.ci_level, 0.95)


def test_parse_rate_counts_parsed_candidates_and_the_labeled_share_is_separate():
    # HAND's 10 polls all parse and are labeled; add c in turn 0 with an unlabeled "z" and c in
    # turn 1 with no answer: parse rate 11 / 12 polls, labeled share 10 / 11 parsed candidates
    polls = [r for r in HAND if r["kind"] == "poll"]
    polls += [_poll(0, "c", .1, "z", None), _poll(1, "c", .1, None, None)]
    card = audit_broadcast(from_records(polls), n_boot=20, routers=()).card
    p = card.parse_rate
    assert (p.value, p.numerator, p.denominator, p.unit) == (11 / 12, 11, 12, "polls")
    labeled = next(m for m in card.metrics if m.name == "labeled share")
    assert (labeled.value, labeled.numerator, labeled.denominator) == (10 / 11, 10, 11)
    assert labeled.unit == "parsed candidates"


def test_agent_pool_is_derived_from_agent_model():
    polls = [r for r in HAND if r["kind"] == "poll"]
    log = from_records(polls)
    one = audit_broadcast(log, n_boot=20, routers=(), agent_model=["m", "m"]).card
    assert one.agent_pool == "homogeneous"
    assert audit_broadcast(log, n_boot=20, routers=()).card.agent_pool is None   # model unknown
    given = audit_broadcast(log, n_boot=20, routers=(), agent_model=["m"],
                            agent_pool="heterogeneous").card
    assert given.agent_pool == "heterogeneous"


def test_calibration_and_learned_router_share_one_fold_deal():
    # three problems lose every stated score, so the problems with a calibration candidate are
    # a subset: a deal over them alone would differ from the deal over all problems
    log = simulate_broadcast(1, n_problems=40)
    gone = np.isin(log.problem, ["p00003", "p00017", "p00029"])
    log = dataclasses.replace(log, score=np.where(gone, np.nan, log.score))
    report = audit_broadcast(log, n_boot=20, routers=("learned",))
    deal = tier_stratified_folds(log.problem, log.tier, n_folds=2, seed=0)
    assert np.array_equal(report.folds, deal)
    cand = log.valid & ~np.isnan(log.score)
    assert np.array_equal(report.calibration.folds, deal[cand])
    alone = tier_stratified_folds(log.problem[cand], log.tier[cand], n_folds=2, seed=0)
    assert not np.array_equal(alone, deal[cand])               # the old, separate deal
    learned = next(m for m in report.card.metrics if m.name == "router: learned")
    success = router_block_success(log, "learned", folds=deal)
    assert learned.numerator == pytest.approx(success.sum())


def test_gap_to_oracle_has_a_paired_interval_on_the_shared_resamples(sim_report):
    log, report = sim_report
    by = {m.name: m for m in report.card.metrics}
    oracle = by["router: oracle"]
    assert "gap to oracle: oracle" not in by
    for name in ("runtime_argmax", "random_valid", "majority_vote", "learned"):
        gap, router = by[f"gap to oracle: {name}"], by[f"router: {name}"]
        assert gap.denominator == router.denominator == oracle.denominator
        assert gap.numerator == pytest.approx(oracle.numerator - router.numerator)
        assert gap.value == pytest.approx(oracle.value - router.value)
    # paired: each resample's gap is the oracle's minus the router's on the same clusters;
    # the generic bootstrap of that difference, with the same seed, draws the same resamples
    success = router_block_success(log, "runtime_argmax")

    def gap_stat(w):
        o = oracle_success(log, weights=w)
        return o.value - np.sum(w * success) / o.denominator if o.denominator else math.nan

    ref = cluster_bootstrap(gap_stat, log.block_cluster, seed=0, n_boot=50)
    got = report.router_gaps["runtime_argmax"]
    assert (got.ci_low, got.ci_high) == pytest.approx((ref.ci_low, ref.ci_high), abs=1e-12)
    assert got.ci_low <= got.estimate <= got.ci_high


def test_audit_file_reads_on_the_score_scale_and_audits_like_audit_broadcast(tmp_path):
    log = simulate_broadcast(1, n_problems=12)
    hundred = dataclasses.replace(log, score=log.score * 100)
    path = tmp_path / "log.jsonl"
    write_broadcast_log(hundred, path)
    kw = dict(seed=2, n_boot=20, protocol_name="file")
    report = audit_file(path, score_scale=100, **kw)
    assert report.to_dict() == audit_broadcast(hundred, score_scale=100, **kw).to_dict()
    with pytest.raises(TraceError, match="score range"):
        audit_file(path, n_boot=20)                       # 0-100 scores on the default [0, 1]
    with pytest.raises(DataError, match="score scale") as err:
        audit_file(path, score_scale=0)
    assert err.value.field == "score_scale"

