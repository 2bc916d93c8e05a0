"""Text in, text out: `translate(model, tokenizer, sentences, options)` batches sentences through the decoder.

Sentences are sorted by length before batching (so a batch holds sentences of similar length and
little padding), decoded, and put back in their original order. An empty sentence translates
to an empty string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from clearformer.generate import checks
from clearformer.generate.beam import beam_search
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import DecodingOptions, SearchTokens, search_tokens
from clearformer.generate.result import Translation
from clearformer.generate.source import Pieces, prepare_sources
from clearformer.tokenize import Masked
from clearformer.tokenize.sentences import split_long


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int,
              device: torch.device | str = "cpu") -> torch.Tensor:
    """Lists of ids -> (batch, longest) int64, right-padded with pad_id."""
    width = max((len(s) for s in sequences), default=0)
    batch = torch.full((len(sequences), max(width, 1)), pad_id, dtype=torch.long)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return batch.to(device)


def decode_ids(model, src_ids: torch.Tensor, options: DecodingOptions, tokens: SearchTokens) -> list[list[int]]:
    """Greedy (options.beam == 1) or beam search over a padded batch -> one list of output ids per sentence."""
    search = greedy_decode if options.beam == 1 else beam_search
    return search(model, src_ids, options, tokens).sequences()


def split_long_sources(sentences: Sequence[str]) -> tuple[list[str], list[int]]:
    """Inputs -> (pieces to translate, the input each piece belongs to): an input of more than 25 words
    is cut into its sentences, as the training data were (`clearformer.tokenize.sentences`)."""
    pieces, owners = [], []
    for index, text in enumerate(sentences):
        for piece in split_long(text):
            pieces.append(piece)
            owners.append(index)
    return pieces, owners


def join_pieces(translations: Sequence[str], owners: Sequence[int], count: int) -> list[str]:
    """The pieces' translations joined back into one translation per input (a space between sentences)."""
    joined: list[list[str]] = [[] for _ in range(count)]
    for text, owner in zip(translations, owners, strict=True):
        if text:
            joined[owner].append(text)
    return [" ".join(parts) for parts in joined]


def per_input_progress(progress: Callable[[int], None] | None, inputs: int, pieces: int):
    """A progress callback counting pieces -> one counting inputs (in proportion)."""
    if progress is None or inputs == pieces:
        return progress
    done = {"pieces": 0, "reported": 0}

    def report(n: int) -> None:
        done["pieces"] += n
        now = done["pieces"] * inputs // pieces
        if now > done["reported"]:
            progress(now - done["reported"])
            done["reported"] = now

    return report


def translate(model, tokenizer, sentences: list[str], options: DecodingOptions | None = None,
              progress: Callable[[int], None] | None = None) -> list[str]:
    """Translate every sentence with `options` (default: greedy); the output keeps the input order.

    `options.batch_size` counts sentences per batch (beam search decodes batch_size x beam rows at
    once); `progress(n)` is called after each batch with the number of sentences it held. With
    `placeholders="exact"` (the default) a translation copies every placeholder piece of its source
    exactly (`generate/constraints.py`; tokenizers without placeholder pieces are not constrained).
    With `split` (the default) an input of more than 25 words is translated sentence by sentence.
    Inputs are read by `generate.source.prepare_sources`, as every command reads them: a piece no model
    can use (too long, not UTF-8, only unknown words) is a one-line UserError naming it. A run that masks
    placeholders reads each piece masked and its translation comes back restored (`Pieces.restore`).
    """
    options = (options or DecodingOptions()).check()
    pieces = prepare_sources(tokenizer, sentences, model.config.max_len, options.split)
    return translate_pieces(model, tokenizer, pieces, options, progress)


def translate_pieces(model, tokenizer, pieces: Pieces, options: DecodingOptions | None = None,
                     progress: Callable[[int], None] | None = None) -> list[str]:
    """`translate` of inputs already read by `prepare_sources`: one translation per input (the texts of
    `translate_checked`)."""
    return [translation.text for translation in translate_checked(model, tokenizer, pieces, options, progress)]


def translate_checked(model, tokenizer, pieces: Pieces, options: DecodingOptions | None = None,
                      progress: Callable[[int], None] | None = None) -> list[Translation]:
    """`translate` of inputs already read by `prepare_sources`: one `Translation` per input, its notes what
    the post-check found (generate/checks.py).

    The pieces are sorted longest first (each batch holds pieces of similar length: little padding), each
    batch goes to the search itself (greedy_decode or beam_search: nothing between a command and the model's
    decoder but these two frames), and the translations come back in the inputs' order, placeholders
    restored and an input's sentences joined; an empty piece translates to "". Each sentence is decoded
    with its own facts (`SearchTokens.for_sources`), so its translation does not depend on its batch.
    """
    # Text needs no scores: greedy skips its pass over the vocabulary per step.
    options = (options or DecodingOptions()).but(with_scores=False)
    tokens = search_tokens(model, tokenizer, options)
    search = greedy_decode if options.beam == 1 else beam_search
    device = next(model.parameters()).device
    progress = per_input_progress(progress, pieces.count, len(pieces.sources))
    outputs = [""] * len(pieces.sources)
    forced = [False] * len(pieces.sources)
    todo = sorted((item for item in enumerate(pieces.sources) if item[1]), key=lambda item: -len(item[1]))
    if progress is not None and len(todo) < len(pieces.sources):
        progress(len(pieces.sources) - len(todo))
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(todo), options.batch_size):
            chunk = todo[start: start + options.batch_size]
            src_ids = pad_batch([ids for _, ids in chunk], tokens.pad_id, device)
            batch_tokens = tokens.for_sources([pieces.masks[index] for index, _ in chunk])
            decoded = search(model, src_ids, options, batch_tokens)
            for (index, _), ids, placed in zip(chunk, decoded.sequences(), decoded.forced_list(), strict=True):
                outputs[index], forced[index] = tokenizer.decode(ids), placed
            if progress is not None:
                progress(len(chunk))
    finally:
        model.train(was_training)
    return checks.translations(pieces.texts, pieces.owners, pieces.count, pieces.restore(outputs), pieces.masks,
                               forced)


def encode_sources(model, tokenizer, sentences: Sequence[str], split: bool = True
                   ) -> tuple[list[list[int]], list[int], list[Masked]]:
    """Inputs -> (source ids of each piece to translate, the input each piece belongs to, each piece as the
    model reads it, for `restore_pieces`), unchecked (`evaluate` scores every line of a corpus):
    `prepare_sources` without its check."""
    pieces = prepare_sources(tokenizer, sentences, model.config.max_len, split, check=False)
    return pieces.sources, pieces.owners, pieces.masks


def restore_pieces(masks: Sequence[Masked], translations: Sequence[str]) -> list[str]:
    """Each piece's translation with its placeholders put back (`tokenize.restore_placeholders`)."""
    return Pieces(masks=list(masks)).restore(translations)


def translate_ids(model, tokenizer, sources: list[list[int]], options: DecodingOptions | None = None,
                  progress: Callable[[int], None] | None = None) -> list[str]:
    """`translate` for sentences already encoded (lists of source ids; an empty list -> ""), each one input."""
    return translate_pieces(model, tokenizer, Pieces.whole(sources), options, progress)
