"""Fuzzing the trace pipeline with Hypothesis (docs/trace-format.md).

Valid traces (the bundled example tasks and small protocol-respecting generated ones) are mutated
-- deleted keys, values of another JSON type, unknown forces, bad or decreasing rounds, duplicate /
missing / unknown / forward targets and ids, answers outside the candidates, candidates that
collide after normalization, empty lists, confidence out of range, reordered / duplicated moves,
empty and blank answers, Unicode respellings of one answer or one agent, markup-like strings
(``[/bold]``, ``$x$``) in task ids, answers and agent names, repeated keys, truncated text,
garbage bytes, ... -- written as a JSON Lines file and run through
``read_traces`` (strict and lenient), ``tally`` and ``onecoin_log_posterior``. Every outcome must
be valid counts with a finite, normalized posterior (-inf exactly on padding) or a ``TraceError``
with a message (and ``file`` when raised while reading) -- never another exception, never NaN;
a valid outcome also keeps the identities of docs/trace-format.md (canonical agent ids, no
blank answer, non-empty distinct candidate keys), and a file with a repeated key never reads.
The identity classes also run as one small seeded slice (``test_identity_slice``) with the
float64 reference as the kernel, so it needs no JAX compilation.

The mutation engine and the checks live in ``benchmarks/fuzz_traces.py`` (the standalone runner,
``python benchmarks/fuzz_traces.py --mutations 100000``); this file drives the same engine with
a Hypothesis-controlled ``random.Random`` so that failures shrink. To keep JAX compilations few,
the kernel sees the first few (T, I, K) shapes as they are and later ones padded to buckets
(padding agents without moves and masked candidate slots leave the posterior unchanged).
"""
import importlib.util
import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

_ROOT = Path(__file__).resolve().parents[2]


def _load_engine():
    name = "_bda_fuzz_traces"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _ROOT / "benchmarks" / "fuzz_traces.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module            # dataclasses look their module up while defined
        spec.loader.exec_module(module)
    return sys.modules[name]


fuzz = _load_engine()
EXAMPLES = fuzz.load_examples()
KERNEL = fuzz.Kernel(max_exact_shapes=4)
SETTINGS = dict(deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


def _report(case, res) -> str:
    lines = [f"mutations: {list(case.mutations)}", "file:", fuzz._preview(case.data, 4000)]
    for category, detail in res.failures:
        lines += [f"--- {category}", detail]
    return "\n".join(lines)


@settings(max_examples=25, **SETTINGS)
@given(rng=st.randoms(use_true_random=False),
       keep=st.lists(st.sampled_from(fuzz.VALID_PRESERVING), max_size=1))
def test_valid_traces_read_tally_and_score(rng, keep, tmp_path):
    """The starting points are valid: both modes give the same valid counts, nothing skipped."""
    case = fuzz.make_case(rng, EXAMPLES, max_tasks=2, mutations=keep, byte_mutation=None)
    res = fuzz.run_case(tmp_path / "valid.jsonl", case.data, KERNEL)
    note(_report(case, res))
    assert res.strict.kind == "valid", res.strict.detail
    assert res.lenient.kind == "valid" and res.lenient.skipped == 0, res.lenient.detail
    assert not res.failures, _report(case, res)
    assert not res.notes, res.notes


@settings(max_examples=150, **SETTINGS)
@given(rng=st.randoms(use_true_random=False),
       mutations=st.lists(st.sampled_from(fuzz.MUTATOR_NAMES), min_size=1, max_size=4),
       byte_mutation=st.sampled_from((None, None, None) + fuzz.BYTE_MUTATOR_NAMES))
def test_mutated_traces_give_counts_or_trace_error(rng, mutations, byte_mutation, tmp_path):
    """Strict and lenient: valid counts + finite normalized posterior, or a located TraceError."""
    case = fuzz.make_case(rng, EXAMPLES, max_tasks=2, mutations=mutations,
                          byte_mutation=byte_mutation)
    res = fuzz.run_case(tmp_path / "case.jsonl", case.data, KERNEL, informational=False)
    note(_report(case, res))
    for outcome in (res.strict, res.lenient):
        event(f"{outcome.mode}: {outcome.kind}")
    assert not res.failures, _report(case, res)
    for outcome in (res.strict, res.lenient):
        assert outcome.kind in ("valid", "trace_error")
        if outcome.kind == "trace_error":
            assert outcome.detail.strip()


_MOVE = (b'{"task_id": "t", "candidates": ["A", "B"], "moves": [{"id": "m1", "agent": "a", '
         b'"round": %s, "force": "propose", "answer": "A"%s}]}\n')
HARD_INPUTS = {   # minimal files the fuzzer once found outside the contract; each must stay inside
    "invalid_utf8": b'{"task_id": "t\xff", "candidates": ["A"], "moves": []}\n',
    "deep_nesting": b'{"task_id": "t", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    "int_literal_4301_digits": _MOVE % (b"1" * 4301, b""),
    "confidence_huge_int": _MOVE % (b"0", b', "confidence": 1' + b"0" * 400),
    "confidence_nan_literal": _MOVE % (b"0", b', "confidence": NaN'),
    "round_2_63": _MOVE % (b"9223372036854775808", b""),
    "lone_surrogate": _MOVE.replace(b'"answer": "A"', b'"answer": "\\ud800"') % (b"0", b""),
    "all_moves_skipped": (b'{"task_id": "t", "candidates": ["A"], "moves": [{"id": "m1", '
                          b'"agent": "a", "round": 0, "force": "attack"}]}\n'),
    "answer_only_in_skipped_move": (b'{"task_id": "t", "moves": [{"id": "m1", "agent": "a", '
                                    b'"round": 0, "force": "retract", "answer": "B"}]}\n'),
}
IDENTITY_INPUTS = {   # the identity classes of issue #19 (read and tally: the reference kernel)
    "blank_answer_propose": _MOVE.replace(b'"answer": "A"', b'"answer": " "') % (b"0", b""),
    "blank_answer_only_move": (b'{"task_id": "t", "moves": [{"id": "m1", "agent": "a", '
                               b'"round": 0, "force": "vote", "answer": "\\u3000"}]}\n'),
    "repeated_answer_key": _MOVE % (b"0", b', "answer": "B"'),
    "repeated_task_key": _MOVE.replace(b'"task_id": "t"', b'"task_id": "t", "task_id": "u"')
    % (b"0", b""),
    "nfc_and_nfd_agent": (_MOVE % (b"0", b"")).replace(
        b"}]}", b'}, {"id": "m2", "agent": "e\\u0301", "round": 1, "force": "vote", '
        b'"answer": "B"}, {"id": "m3", "agent": "\\u00e9", "round": 0, "force": "vote", '
        b'"answer": "A"}]}'),
    "markup_everywhere": (b'{"task_id": "[/bold]", "candidates": ["$x$", "[red]"], '
                          b'"gold": "[red]", "moves": [{"id": "{0}", "agent": "[/bold]", '
                          b'"round": 0, "force": "propose", "answer": "$$x$$"}]}\n'),
}


@pytest.mark.parametrize("name", sorted(HARD_INPUTS))
def test_hard_inputs_give_counts_or_trace_error(name, tmp_path):
    res = fuzz.run_case(tmp_path / f"{name}.jsonl", HARD_INPUTS[name], KERNEL, informational=False)
    assert not res.failures, "\n".join(f"{c}: {d}" for c, d in res.failures)


@pytest.mark.parametrize("name", sorted(IDENTITY_INPUTS))
def test_identity_inputs_give_counts_or_trace_error(name, tmp_path):
    res = fuzz.run_case(tmp_path / f"{name}.jsonl", IDENTITY_INPUTS[name], fuzz.reference_kernel,
                        informational=False)
    assert not res.failures, "\n".join(f"{c}: {d}" for c, d in res.failures)
    expect = {"blank_answer_propose": "trace_error", "blank_answer_only_move": "trace_error",
              "repeated_answer_key": "trace_error", "repeated_task_key": "trace_error",
              "nfc_and_nfd_agent": "trace_error",      # one agent: its round 0 follows round 1
              "markup_everywhere": "valid"}[name]
    assert res.strict.kind == expect, res.strict.detail


def test_pad_counts_leaves_the_posterior_unchanged(tmp_path):
    """The bucketing the fuzz kernel uses is exact: padded and unpadded posteriors agree."""
    import bda_jax
    path = tmp_path / "ex.jsonl"
    path.write_bytes(fuzz.EXAMPLE_PATH.read_bytes())
    counts = bda_jax.tally(bda_jax.read_traces(path))
    T, I, K = counts.e.shape
    direct = np.asarray(bda_jax.onecoin_log_posterior(counts, np.full(I, 2.0), np.full(I, 1.5)))
    padded = fuzz.Kernel(max_exact_shapes=0)(counts)
    fuzz.check_posterior(counts, direct)
    np.testing.assert_allclose(np.exp(padded), np.exp(direct), atol=1e-6)
    assert (padded[~np.asarray(counts.mask)] == -np.inf).all()


IDENTITY_SEEDS = range(120)


def test_identity_slice(tmp_path):
    """Empty answers, Unicode respellings of one answer / one agent, markup-like ids and a
    repeated key, seeded: no failure in either mode; a case of valid-preserving mutations reads
    valid, and its full Unicode respelling gives the same counts, agents and candidate keys."""
    checked = 0
    for seed in IDENTITY_SEEDS:
        rng = random.Random(seed)
        mutations = rng.sample(fuzz.IDENTITY_MUTATORS, rng.randint(1, 2))
        byte_mutation = "duplicate_key" if seed % 4 == 0 else None
        case = fuzz.make_case(rng, EXAMPLES, max_tasks=2, mutations=mutations,
                              byte_mutation=byte_mutation)
        res = fuzz.run_case(tmp_path / "case.jsonl", case.data, fuzz.reference_kernel,
                            informational=False)
        assert not res.failures, (seed, _report(case, res))
        if res.repeated_key is not None:
            assert res.strict.kind == res.lenient.kind == "trace_error", seed
        if case.unmutated:
            assert res.strict.kind == "valid", (seed, res.strict.detail)
            diff = fuzz.respelling_check(tmp_path / "again.jsonl", case.doc, random.Random(seed))
            assert diff is None, (seed, diff)
            checked += 1
    assert checked >= 5            # the slice does exercise the respelling property


def test_markup_strings_are_data(tmp_path):
    """Markup-like ids, answers and agent names come back verbatim, in counts and in errors."""
    import bda_jax
    path = tmp_path / "markup.jsonl"
    path.write_bytes(IDENTITY_INPUTS["markup_everywhere"])
    counts = bda_jax.tally(bda_jax.read_traces(path))
    assert counts.info.task_ids == ("[/bold]",) and counts.agents == ("[/bold]",)
    assert counts.info.candidates == (("$x$", "[red]"),)
    # "$$x$$" is the candidate "$x$" (both normalize to "x"); the gold is "[red]"
    assert np.asarray(counts.e).tolist() == [[[1, 0]]] and np.asarray(counts.gold).tolist() == [1]
    bad = json.loads(IDENTITY_INPUTS["markup_everywhere"])
    bad["moves"][0]["answer"] = "[/red]"
    path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(bda_jax.TraceError) as info:
        bda_jax.read_traces(path)
    err = info.value
    assert (err.task_id, err.move_id, err.field) == ("[/bold]", "{0}", "answer")
    assert "'[/red]'" in str(err) and "task '[/bold]'" in str(err)
