"""Every sentence of a mixed batch translates exactly as it does alone (issue 48) with Firefox's en-pt student:
the issue's "The 2 fish ate 15 apples" beside "Error registering Transmission as a %s handler: %s" (its
stand-ins once constrained the other sentence's numerals: "O peixe de dois comeu de 150 maçãs"), then batches
Hypothesis draws from the issue's sentences and parity sentences; greedy and beam 4, shortlist on."""

from __future__ import annotations

import pytest
from batch_support import MIXED, alone, batches, check_batch_invariance
from hypothesis import HealthCheck, given, settings

from clearformer.generate import DecodingOptions, translate
from clearformer.load import load_decoding_facts, load_model

# and a few of the parity sentences (tests/firefox/sentences.txt: this repository's documentation)
POOL = MIXED + ["Run the tests with pytest.", "The model is small enough for a laptop.", "Open the page in a browser.",
                "Every figure is written by a script.", "It translates a gettext catalogue."]
OPTIONS = {"greedy": DecodingOptions(), "beam 4": DecodingOptions(beam=4)}
_CACHE: dict = {}


@pytest.fixture(scope="module")
def student(firefox_runs):
    model, tokenizer, _ = load_model(firefox_runs["en-pt"])
    return model, tokenizer, load_decoding_facts(firefox_runs["en-pt"], tokenizer)


def single(student, search: str) -> dict[str, str]:
    if search not in _CACHE:
        _CACHE[search] = alone(*student[:2], POOL, OPTIONS[search], student[2])
    return _CACHE[search]


def test_the_issue_pair_translates_as_alone(student):
    pair = ["The 2 fish ate 15 apples", "Error registering Transmission as a %s handler: %s"]
    for options in OPTIONS.values():
        together = translate(*student[:2], pair, options, facts=student[2])
        assert together == [translate(*student[:2], [text], options, facts=student[2])[0] for text in pair]
    assert together[0] == "O 2 peixe comeu 15 maçãs"


@pytest.mark.parametrize("search", list(OPTIONS))
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(drawn=batches(POOL, most=8))
def test_a_sentence_translates_as_alone_in_any_batch(student, search, drawn):
    check_batch_invariance(*student[:2], single(student, search), drawn, OPTIONS[search], student[2])


@pytest.mark.slow
@pytest.mark.parametrize("search", list(OPTIONS))
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=batches(POOL, most=16))
def test_a_sentence_translates_as_alone_in_many_batches(student, search, drawn):
    check_batch_invariance(*student[:2], single(student, search), drawn, OPTIONS[search], student[2])
