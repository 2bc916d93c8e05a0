"""Token for token: clearformer decoding Firefox's students (greedy, shortlist on) against the package's own
engine, `Translator()._direction(d).translate(s)`, on 260 sentences per direction (sentences.txt).

The engine computes in float32 with the dequantized weights (its README: "f32 portável"), as clearformer
does, so every translation is equal, string and ids: that needed Marian's own sinusoid (timescales from 1
to 10000, `position_timescales="tensor2tensor"`: the paper's formula parted 19 of 260 en-pt translations
by position 20), the engine's length limit (2.5 x the source: a runaway line of dashes stops where the
engine's does), and the candidate set without the source ids (docs/firefox.md, "Token for token").
"""

from __future__ import annotations

import pytest
import torch
from conftest import engine_pairs, parity_sentences

from clearformer.generate import DecodingOptions, translate
from clearformer.load import load_decoding_facts, load_model
from clearformer.tokenize import encode_source


def parting(model, tokenizer, source: str, ours: str, theirs: str) -> tuple[int, float, float]:
    """(first differing step, our logit of our token there, our logit of the engine's token)."""
    a, b = tokenizer.encode(ours) + [tokenizer.eos_id], tokenizer.encode(theirs) + [tokenizer.eos_id]
    step = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
    with torch.no_grad():
        logits = model(torch.tensor([encode_source(tokenizer, source)]),
                       torch.tensor([[tokenizer.bos_id] + a[:step]]))[0, -1]
    return step, float(logits[a[step]]), float(logits[b[step]])


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("direction", ["en-pt", "pt-en"])
def test_greedy_translations_equal_the_engines(firefox_runs, engine, our_translations, direction):
    model, tokenizer, _ = load_model(firefox_runs[direction])
    sources = parity_sentences()[direction]
    assert len(sources) == 260
    expected = [engine(direction).translate(s) for s in sources]
    compared, lost = engine_pairs(tokenizer, sources, our_translations[direction], expected)
    assert len(compared) >= 240 and not lost, lost  # a carried span comes back as it was (issue 48)
    sources, ours, expected = (list(side) for side in zip(*compared, strict=True))
    equal = [a == b and tokenizer.encode(a) == tokenizer.encode(b) for a, b in zip(ours, expected, strict=True)]
    parted = [(s, a, b, parting(model, tokenizer, s, a, b))
              for s, a, b, same in zip(sources, ours, expected, equal, strict=True) if not same]
    report = "\n".join(f"{s!r}\n  ours   {a!r}\n  engine {b!r}\n  step {p[0]}: logits {p[1]:.4f} vs {p[2]:.4f}"
                       for s, a, b, p in parted)
    assert all(equal), report


def test_i_love_you_and_the_shortlist_switch(firefox_runs, engine):
    """The issue's "done when" sentence, in both directions; --shortlist off scores the whole vocabulary."""
    for direction, sentence in (("en-pt", "I love you."), ("pt-en", "Eu te amo.")):
        model, tokenizer, _ = load_model(firefox_runs[direction])
        facts = load_decoding_facts(firefox_runs[direction], tokenizer)  # the engine's length factor, shortlist
        assert translate(model, tokenizer, [sentence], facts=facts) == [engine(direction).translate(sentence)]
        assert facts.shortlist is not None
    model, tokenizer, _ = load_model(firefox_runs["en-pt"])
    batch = parity_sentences()["en-pt"][:16]
    facts = load_decoding_facts(firefox_runs["en-pt"], tokenizer)
    on = translate(model, tokenizer, batch, DecodingOptions(shortlist="on"), facts=facts)
    off = translate(model, tokenizer, batch, DecodingOptions(shortlist="off"), facts=facts)
    assert on == [engine("en-pt").translate(s) for s in batch]
    assert len(off) == 16


@pytest.mark.timeout(900)
def test_the_shortlist_as_a_slice_writes_what_the_mask_writes(firefox_runs, our_translations):
    """generate/shortlist.py: the output projection over the candidates only (what `translate` decodes with:
    `our_translations`) gives the tokens of the full projection with the shortlist as a mask, on every parity
    sentence, greedy, batched."""
    from clearformer.generate.translator import PyTorchTranslator

    for direction, sources in parity_sentences().items():
        model, tokenizer, _ = load_model(firefox_runs[direction])
        facts = load_decoding_facts(firefox_runs[direction], tokenizer)
        masked = PyTorchTranslator(model, tokenizer, facts=facts).translate(sources, DecodingOptions(batch_size=64))
        assert [t.text for t in masked] == our_translations[direction], direction
