"""What a run knows about decoding its own translations: one immutable record, held by the translator.

    DecodingFacts(length_ratio=1.07, max_length_factor=0.0, shortlist=None)

    length_ratio       target tokens per source token over the training pairs, measured by `clearformer train`;
                       the brevity rule (generate/brevity.py) expects a translation of about this many tokens
                       per source token; 0: not measured (imported models), no rule.
    max_length_factor  a translation stops at round(factor x source tokens), the rule of the engine an imported
                       model came from (Firefox's students: 2.5); 0: the paper's source length + 50.
    shortlist          the lexical shortlist the run's engine scores each sentence's candidates with (Firefox's
                       models ship one: tokenize/shortlist.py); None for every other run.

A run folder keeps them today where earlier runs did (tokenizer.json, shortlist.bin: tokenize/facts.py), so every
run, old or new, loads and translates exactly as before; `of(tokenizer)` reads them once, where a run is opened
for decoding (generate/translator.py), and the search reads this record only (`search_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass

from clearformer.tokenize.shortlist import LexicalShortlist


@dataclass(frozen=True)
class DecodingFacts:
    """A run's decoding facts (see the module docstring); the default: none (no brevity rule, the paper's limit,
    the whole vocabulary)."""

    length_ratio: float = 0.0
    max_length_factor: float = 0.0
    shortlist: LexicalShortlist | None = None

    @classmethod
    def of(cls, tokenizer) -> DecodingFacts:
        """The facts a run folder records beside its tokenizer (tokenize/facts.py), read once."""
        return cls(float(tokenizer.length_ratio), float(tokenizer.max_length_factor), tokenizer.shortlist)
