"""The tokenizer contract: what every tokenizer class (words.py, subword.py, marian.py, bytebpe.py) offers,
and all that the rest of clearformer may ask of one (no probing with getattr/hasattr).

    text  --encode-->  ids (no <bos>/<eos>: encode_source and the batches frame them)  --decode-->  text

The special ids are the vocabulary's; a vocabulary without one of them (GPT-2's has only <|endoftext|>)
gives that same id for each. The facts (source_eos, mask_placeholders, placeholder_patterns) are
tokenize/facts.py's; `placeholder_ids` is () when nothing is masked. A tokenizer is text <-> ids only: the run's
decoding facts (length ratio, length factor, shortlist) are generate/facts.py's `DecodingFacts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    kind: str  # what tokenizer.json says: "words", "sentencepiece", "marian", "gpt2"
    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int
    source_eos: bool
    mask_placeholders: bool
    placeholder_patterns: tuple[str, ...]

    @property
    def placeholder_ids(self) -> tuple[int, ...]:
        """The pieces a translation must copy exactly as often as its source has them (() = none)."""

    def __len__(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def tokenize(self, text: str) -> list[str]: ...

    def id_to_token(self, index: int) -> str: ...

    def token_to_id(self, token: str) -> int | None:
        """The id of one vocabulary entry; unk_id (or None) when the vocabulary has no such entry."""

    def unknown_words(self, text: str) -> list[str]:
        """The words of `text` the vocabulary cannot represent (always [] for byte-level and subword ones
        that can spell anything)."""

    def facts(self) -> dict: ...

    def save(self, directory: str | Path) -> None: ...
