"""The one check of a source sentence, for every command (translate, explain) and the server.

`check_source` returns the encoder input of a sentence exactly as translation builds it
(`tokenize.encode_source`, with <eos> appended when the tokenizer's `source_eos` says so), or raises a
one-line `UserError` for a sentence no model can use: text that is not UTF-8, longer than
MAX_SENTENCE_CHARS characters, empty (nothing left after tokenizing), made only of unknown words,
or longer than the model's `max_len` tokens. The length counts the source's <eos> when it has one:
the encoder reads it at a position of its own, so it must fit in `max_len` like every other token.
"""

from __future__ import annotations

from collections.abc import Callable

from clearformer.errors import UserError
from clearformer.limits import MAX_SENTENCE_CHARS
from clearformer.tokenize import encode_source, mask_placeholders
from clearformer.validation import has_surrogates, shorten


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
    ids = encode_source(tokenizer, text)
    source_eos = tokenizer.source_eos
    words = ids[:-1] if source_eos and ids else ids
    if not words:
        raise UserError(f"{at}empty sentence (nothing to translate)")
    unknown_words = getattr(tokenizer, "unknown_words", None)
    # Words of the sentence the model reads (placeholders masked when the run masks them).
    unknown = unknown_words(mask_placeholders(tokenizer, text).text) if unknown_words else []
    if all(i == tokenizer.unk_id for i in words):
        shown = shorten(", ".join(unknown[:5]) or repr(text))
        raise UserError(f"{at}every word is unknown to the model's vocabulary ({shown})")
    if len(ids) > max_len:
        counted = " (its <eos> included)" if source_eos else ""
        raise UserError(f"{at}sentence of {len(ids)} tokens{counted} is longer than the model's maximum "
                        f"length ({max_len})")
    if unknown and warn is not None:
        warn(f"{at}unknown word(s) translated as <unk>: {shorten(', '.join(dict.fromkeys(unknown)))}")
    return ids
