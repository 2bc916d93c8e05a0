"""The batch-invariance property (issue 48): every sentence of a mixed batch translates exactly as it does alone.

`check_batch_invariance(model, tokenizer, pool, options, draw)` translates sentences of `pool` one at a time
(once each, remembered), then in mixed batches Hypothesis draws (which sentences, in which order, which batch
size), and asserts each batch's translations equal the sentences' translations alone. Used by the decoding
tests (own word and SentencePiece runs), the interop tests (an imported Marian) and the Firefox tests.
"""

from __future__ import annotations

from hypothesis import strategies as st

from clearformer.errors import UserError
from clearformer.generate import DecodingOptions, translate
from clearformer.generate.facts import NO_FACTS, DecodingFacts

# Sentences that mix what changed a translation by its batch or corrupted it (issue 48): placeholders, numerals
# of their own, a placeholder beside a numeral, characters a production vocabulary cannot write, two sentences.
MIXED = ["The 2 fish ate 15 apples", "Error registering Transmission as a %s handler: %s", "%s (%s attribute)",
         "Page 1 of %d", "Copy %s to %s?", "Connection timed out. Please try again later.", "-C <dir>",
         "Delete %d files from {0}?", "<b>Connections</b>", "UTF-8 name: %s", "Loading…", "I love you"]


def alone(model, tokenizer, pool: list[str], options: DecodingOptions,
          facts: DecodingFacts = NO_FACTS) -> dict[str, str]:
    """Each sentence of `pool` translated in a batch of its own; a sentence the model cannot read at all (a word
    vocabulary knows no word of "-C <dir>": one line, as `translate` refuses it) is left out."""
    translations = {}
    for text in pool:
        try:
            translations[text] = translate(model, tokenizer, [text], options.but(batch_size=1), facts=facts)[0]
        except UserError:
            continue
    return translations


def batches(pool: list[str], most: int = 12):
    """A Hypothesis strategy: (sentences drawn from `pool` with repeats, in any order; a batch size)."""
    return st.tuples(st.lists(st.sampled_from(pool), min_size=2, max_size=most), st.integers(1, 8))


def check_batch_invariance(model, tokenizer, single: dict[str, str], drawn, options: DecodingOptions,
                           facts: DecodingFacts = NO_FACTS) -> None:
    """`drawn` (sentences, batch size) translated together, by the run's decoding `facts`: each exactly as alone
    (`single`)."""
    sentences, batch_size = drawn
    sentences = [text for text in sentences if text in single] or list(single)[:2]
    together = translate(model, tokenizer, sentences, options.but(batch_size=batch_size), facts=facts)
    for sentence, translation in zip(sentences, together, strict=True):
        assert translation == single[sentence], (sentence, batch_size, sentences)
