"""The one input path: inputs -> the pieces to translate, for every entry point, and the one check of a piece.

`prepare_sources` is what the command line (`translate`), the library's `generate.translate`, `explain`
(terminal, JSON, page), `serve` and the CTranslate2 engine all call: it cuts each input by the one
sentence rule (`tokenize.sentences.split_long`: an input of more than 25 words into its sentences, as
the training data were cut, unless `split` is off), encodes each piece once (`encode_source`) and checks
each piece with `check_source`, a failure naming the input and the piece ("sentence 3 of 7"). So a
paragraph gives the same pieces, hence the same translation, everywhere. Unknown words are named in one
warning line per input. `evaluate` reads a corpus through the same function without the check (a
scored line is never refused; too long sources are cut and counted).

`check_source` returns the encoder input of a sentence exactly as translation builds it
(`tokenize.encode_source`, with <eos> appended when the tokenizer's `source_eos` says so), or raises a
one-line `UserError` for a sentence no model can use: text that is not UTF-8, longer than
MAX_SENTENCE_CHARS characters, empty (nothing left after tokenizing), made only of unknown words,
or longer than the model's `max_len` tokens. The length counts the source's <eos> when it has one:
the encoder reads it at a position of its own, so it must fit in `max_len` like every other token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clearformer.errors import UserError
from clearformer.limits import MAX_SENTENCE_CHARS, has_surrogates, shorten
from clearformer.tokenize import Masked, encode_source, mask_placeholders, restore_placeholders
from clearformer.tokenize.placeholders import PlaceholderError
from clearformer.tokenize.sentences import LONG_PARAGRAPH_WORDS, split_long


def check_source(tokenizer, text: str, max_len: int, where: str | None = None,
                 warn: Callable[[str], None] | None = None) -> list[int]:
    """The encoder input of `text` (see the module docstring), or a one-line UserError.

    `where` ("file:line") prefixes the messages; `warn(message)` is told of unknown words in a
    sentence that has known ones too (they are translated as <unk>). Messages quote at most a
    short part of the user's text.
    """
    at = f"{where}: " if where else ""
    if has_surrogates(text):
        raise UserError(f"{at}not UTF-8 text")
    if len(text) > MAX_SENTENCE_CHARS:
        raise UserError(f"{at}sentence of {len(text):,} characters; at most {MAX_SENTENCE_CHARS:,}")
    try:
        ids = encode_source(tokenizer, text, carry=True)
    except PlaceholderError as error:  # a runaway user pattern, too many placeholders: where, then why
        raise UserError(f"{at}{error}") from None
    source_eos = tokenizer.source_eos
    words = ids[:-1] if source_eos and ids else ids
    if not words:
        raise UserError(f"{at}empty sentence (nothing to translate)")
    # Words of the sentence the model reads (placeholders masked when the run masks them).
    unknown = tokenizer.unknown_words(mask_placeholders(tokenizer, text, carry=True).text)
    # A piece that writes only a space (SentencePiece's "▁" before an <unk>) is no word the model knows either.
    # Read without carrying the spans the vocabulary cannot write (tokenize/unwritable.py): a sentence of such
    # spans only has nothing for the model to translate, whatever it would copy.
    plain = encode_source(tokenizer, text)
    if all(i == tokenizer.unk_id or not tokenizer.decode([i]).strip() for i in (plain[:-1] if source_eos else plain)):
        shown = shorten(", ".join(unknown[:5]) or repr(text))
        raise UserError(f"{at}every word is unknown to the model's vocabulary ({shown})")
    if len(ids) > max_len:
        counted = " (its <eos> included)" if source_eos else ""
        raise UserError(f"{at}sentence of {len(ids)} tokens{counted} is longer than the model's maximum "
                        f"length ({max_len})")
    if unknown and warn is not None:
        warn(unknown_words_line(unknown, where))
    return ids


def unknown_words_line(unknown: Sequence[str], where: str | None = None) -> str:
    """The one warning line naming the words a model did not know."""
    at = f"{where}: " if where else ""
    return f"{at}unknown word(s) translated as <unk>: {shorten(', '.join(dict.fromkeys(unknown)))}"


@dataclass
class Pieces:
    """The pieces to translate of `count` inputs: `texts[i]` (a sentence of its input, or the whole input),
    `sources[i]` its encoder input (ids, <eos> included when the model reads one; [] for an empty input),
    `owners[i]` the index of the input it belongs to, `masks[i]` the piece as the model reads it
    (`tokenize.mask_placeholders`: placeholders masked when the run masks them), whose pair
    `restore` puts each translation's placeholders back. `unknown[k]`: the unknown words of input k."""

    texts: list[str] = field(default_factory=list)
    sources: list[list[int]] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)
    masks: list[Masked] = field(default_factory=list)
    count: int = 0
    unknown: dict[int, list[str]] = field(default_factory=dict)
    unreadable: dict[int, str] = field(default_factory=dict)  # input -> why the model cannot read it (not translated)

    def restore(self, translations: Sequence[str]) -> list[str]:
        """Each piece's translation with its placeholders put back (`tokenize.restore_placeholders`)."""
        return [restore_placeholders(masked, text) for masked, text in zip(self.masks, translations, strict=True)]

    @classmethod
    def whole(cls, sources: Sequence[list[int]], masks: Sequence[Masked] | None = None) -> Pieces:
        """Sources already encoded, each its own input and its own piece; `masks`: how each was masked
        (`mask_placeholders`), None: nothing masked."""
        masks = [Masked("")] * len(sources) if masks is None else list(masks)
        return cls(texts=[""] * len(sources), sources=list(sources), owners=list(range(len(sources))),
                   masks=masks, count=len(sources))

    @classmethod
    def merged(cls, parts: Sequence[Pieces]) -> Pieces:
        """Several inputs' `Pieces` as one (one input each), so that they are decoded in the same batches."""
        merged = cls(count=len(parts))
        for index, part in enumerate(parts):
            merged.texts += part.texts
            merged.sources += part.sources
            merged.masks += part.masks
            merged.owners += [index] * len(part.sources)
            if part.unknown:
                merged.unknown[index] = part.unknown[0]
        return merged

    def of(self, index: int) -> list[int]:
        """The positions of input `index`'s pieces."""
        return [i for i, owner in enumerate(self.owners) if owner == index]


def piece_label(where: str | None, number: int, total: int) -> str | None:
    """How a message names a piece: "file:3, sentence 2 of 7" (or only the input's name when it is whole)."""
    if total == 1:
        return where
    return f"{where}, sentence {number} of {total}" if where else f"sentence {number} of {total}"


def prepare_sources(tokenizer, inputs: Sequence[str], max_len: int, split: bool = True, check: bool = True,
                    where: Callable[[int], str | None] | None = None,
                    warn: Callable[[str], None] | None = None, allow_empty: bool = True,
                    words: int = LONG_PARAGRAPH_WORDS) -> Pieces:
    """Inputs -> their `Pieces` (see the module docstring): split, encoded once, each piece checked.

    `check`: every non-empty piece through `check_source` (a one-line UserError naming `where(index)` and
    the piece); an empty (blank) input is one empty piece, which translates to "" (with `allow_empty` off,
    an "empty sentence" error: `explain` has nothing to show). `warn(line)` is told once per input of the
    words the model does not know. `words`: an input of more words than this is cut into its sentences (0: every
    input of two sentences or more, as the translator retries a translation that dropped one)."""
    pieces = Pieces(count=len(inputs))
    for index, text in enumerate(inputs):
        parts = split_long(text, words) if split else [text]
        name = where(index) if where else None
        for number, part in enumerate(parts, start=1):
            if check and (part.strip() or not allow_empty):
                ids = check_source(tokenizer, part, max_len, piece_label(name, number, len(parts)))
            else:
                ids = encode_source(tokenizer, part, carry=True)
            pieces.texts.append(part)
            pieces.masks.append(mask_placeholders(tokenizer, part, carry=True))
            pieces.sources.append(ids)
            pieces.owners.append(index)
        # the words the model reads as <unk> (spans carried through as placeholders are not among them)
        unknown = [word for i in range(len(pieces.masks) - len(parts), len(pieces.masks))
                   for word in tokenizer.unknown_words(pieces.masks[i].text)] if check and text.strip() else []
        if unknown:
            pieces.unknown[index] = list(dict.fromkeys(unknown))
            if warn is not None:
                warn(unknown_words_line(unknown, name))
    return pieces
