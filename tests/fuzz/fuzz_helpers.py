"""Shared pieces of the fuzz suite: bounded Hypothesis settings and strategies for user input.

Every test here feeds generated input to a parser a user reaches (CLI files, sentences, configs, HTTP
bodies) and accepts exactly two outcomes: a correct result, or a `UserError` (an HTTP 4xx) of one line.
Anything else (another exception, a traceback, a 500) fails the test. The runs are bounded and
reproducible: few examples, derandomized, no deadline (a busy 2-core machine is slow, not wrong).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Any code point, surrogates and control characters included (st.text() leaves surrogates out).
ANY_CHARACTER = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
WORDS = "I love you the cat Je t' aime le chat".split()
SENTENCES = st.one_of(
    st.text(ANY_CHARACTER, max_size=60),
    st.lists(st.sampled_from(WORDS + ["\t", "\x00", "\u200b", "\ud800", "é", "<unk>", "<eos>"]), max_size=20)
    .map(" ".join),
    st.integers(1_000, 100_000).map(lambda n: "love " * (n // 5)),  # huge
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(ANY_CHARACTER, max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)


def one_line(message: str) -> bool:
    return bool(message) and "\n" not in message.strip()


