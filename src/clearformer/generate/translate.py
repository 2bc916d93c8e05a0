"""Text in, text out, for code: `translate(model, tokenizer, sentences, options)` -> one string per sentence.

The Python API's own call (README, "Use it from Python"): the one translator (`generate/translator.py`,
`PyTorchTranslator`) over a model and tokenizer already in hand, its `Translation` records as their texts.
Every command holds a translator itself (`clearformer.translator.load_translator`) and reads the records whole.
"""

from __future__ import annotations

from collections.abc import Callable

from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.options import DecodingOptions
from clearformer.generate.translator import PyTorchTranslator


def translate(model, tokenizer, sentences: list[str], options: DecodingOptions | None = None,
              progress: Callable[[int], None] | None = None, facts: DecodingFacts = NO_FACTS) -> list[str]:
    """Translate every sentence with `options` (default: greedy); the output keeps the input order.

    `options.batch_size` counts sentences per batch (beam search decodes batch_size x beam rows at
    once); `progress(n)` is called after each batch with the number of sentences it held. With
    `placeholders="exact"` (the default) a translation copies every placeholder piece of its source
    exactly (`generate/constraints.py`; tokenizers without placeholder pieces are not constrained).
    With `split` (the default) an input of more than 25 words is translated sentence by sentence.
    Inputs are read by `generate.source.prepare_sources`, as every command reads them: a piece no model
    can use (too long, not UTF-8, only unknown words) is a one-line UserError naming it. A run that masks
    placeholders reads each piece masked and its translation comes back restored (`Pieces.restore`).
    The model is left as it was given (its classes and its train/eval mode). `facts`: the run's decoding facts
    (generate/facts.py; `clearformer.load_decoding_facts(RUN, tokenizer)`), default none.
    """
    translator = PyTorchTranslator.open(model, tokenizer, None, facts=facts)
    return [result.text for result in translator.translate(sentences, options, progress)]
