"""Candidate-restricted extraction of word labels and the dispatching extractor ([BDA] Appendix
D.3): commitments are read, prose mentions never are; the answer comes back as the candidate."""
import pytest

from bda_jax.datasets import extract_answer, parse_label

TF = ["True", "False"]
YNM = ["yes", "no", "maybe"]


@pytest.mark.parametrize("text,labels,answer,rule", [
    ("Reasoning... Therefore: False", TF, "False", "final"),
    ("so it is **true**.", TF, "True", "final"),
    ('The answer is "maybe", given the evidence we have.', YNM, "maybe", "answer_is"),
    ("Verdict: no — the study was too small.", YNM, "no", "answer_is"),
    ("**Yes.** The trial met its endpoint, as reported.", YNM, "yes", "bold"),
    ("I lean towards yes because the effect replicated in two cohorts", YNM, "yes",
     "only_label"),
    ("The effect replicated, so yes, with some caveats about the sample", YNM, "yes",
     "only_label"),
])
def test_committed_labels_are_read(text, labels, answer, rule):
    assert parse_label(text, labels) == (answer, rule)


@pytest.mark.parametrize("text", [
    "yes and no: both are defensible",              # two labels, no commitment
    "I cannot tell from the abstract alone.",       # none
    "It is not yes-or-no; it depends.",             # hyphenated words are not the label
])
def test_no_commitment_reads_nothing(text):
    assert parse_label(text, YNM).answer is None


def test_extract_answer_dispatches_on_the_candidates():
    assert extract_answer("The sum is 1,024 in total.", ["1024", "2048"]).answer == "1024"
    assert extract_answer("The sum is 7.", ["1024", "2048"]).answer is None    # not a candidate
    assert extract_answer("Final answer: (B)", ["a", "b", "c"]).answer == "b"     # spelling kept
    assert extract_answer("The capital is Paris.", ["Paris", "Rome"]).answer == "Paris"
    assert extract_answer("Answer: FALSE", TF) == ("False", "final")
