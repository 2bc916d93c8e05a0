"""Text <-> token ids. `load_tokenizer(dir)` reads whichever kind a checkpoint holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.safeio import read_json
from clearformer.tokenize.bytebpe import ByteLevelBPETokenizer
from clearformer.tokenize.marianmt import MarianMTTokenizer
from clearformer.tokenize.placeholders import RESERVED_COUNT, Masked, mask, mask_target, restore
from clearformer.tokenize.subword import SentencePieceTokenizer
from clearformer.tokenize.unwritable import carry_unwritable
from clearformer.tokenize.words import BOS, EOS, PAD, SPECIALS, UNK, WordTokenizer, detokenize, split_words


def mask_placeholders(tokenizer, text: str, carry: bool = False) -> Masked:
    """The sentence the model reads: with a masking tokenizer (its `mask_placeholders` fact) each
    placeholder becomes ｟ph{i}｠ (tokenize/placeholders.py); otherwise the text unchanged. `carry` (what
    translation reads; training keeps its data as it was): spans the vocabulary cannot write are masked too
    (tokenize/unwritable.py), so they come back as they were, never as "⁇"."""
    if not tokenizer.mask_placeholders:
        return Masked(text)
    stand_ins = tokenizer.stand_ins  # a vocabulary without reserved tokens: numerals stand in (tokenize/standins.py)
    limit = RESERVED_COUNT if stand_ins is None else len(stand_ins.texts)
    masked = mask(text, tokenizer.placeholder_patterns, limit=limit)
    if carry:
        masked = carry_unwritable(tokenizer, masked, limit)
    # each sentence its own stand-ins, among the numerals it does not hold
    return masked if stand_ins is None else stand_ins.assign(text, masked)


def restore_placeholders(masked: Masked, translation: str) -> str:
    """The translation the user gets: each ｟ph{i}｠ back to the source text it stands for (the pair of
    `mask_placeholders`; unchanged when nothing was masked)."""
    return restore(masked, translation)


def encode_source(tokenizer, text: str, carry: bool = False) -> list[int]:
    """The encoder input of one sentence: its token ids (of the masked sentence when the tokenizer
    masks placeholders), without <bos>, and with <eos> appended when the model was trained that way
    (the tokenizer's `source_eos`, tokenize/facts.py). An empty sentence stays empty.

    The one place sources become ids: training, `translate`, `evaluate` and `explain` all call it (`carry`:
    translation's reading, `mask_placeholders`).
    """
    ids = tokenizer.encode(mask_placeholders(tokenizer, text, carry).text)
    return ids + [tokenizer.eos_id] if tokenizer.source_eos and ids else ids


def encode_target(tokenizer, source: str, target: str, fold: Callable[[str], str] | None = None) -> list[int]:
    """A training target's ids, its placeholders masked by the source's (`mask_target`: the same
    placeholder text gets the same reserved token, so reordering is learnt). `fold` (tokenize/fold.py) first
    replaces the characters the vocabulary cannot write, before masking adds its reserved tokens."""
    if fold is not None:
        target = fold(target)
    if tokenizer.mask_placeholders:
        target = mask_target(target, mask_placeholders(tokenizer, source).originals, tokenizer.placeholder_patterns)
    return tokenizer.encode_target_text(target)


def load_tokenizer(directory: str | Path):
    """The tokenizer saved in a checkpoint directory (`tokenizer.json` says which kind)."""
    path = Path(directory) / "tokenizer.json"
    data = read_json(path, missing="missing (not a clearformer checkpoint?)")
    kind = data.get("kind") if isinstance(data, dict) else None
    try:
        if kind == "words":
            return WordTokenizer.from_dict(data)
        if kind == "sentencepiece":
            return SentencePieceTokenizer.load(Path(directory))
        if kind == "marian":  # imported from a Marian (opus-mt) model: clearformer import marian
            return MarianMTTokenizer.load(Path(directory))
        if kind == "gpt2":  # imported from GPT-2: clearformer lm import gpt2
            return ByteLevelBPETokenizer.load(Path(directory))
    except (KeyError, TypeError, ValueError) as error:
        raise UserError(f"{path}: damaged tokenizer ({error})") from None
    raise UserError(f"{path}: unknown tokenizer kind {kind!r}")


__all__ = ["BOS", "EOS", "PAD", "SPECIALS", "UNK", "WordTokenizer", "detokenize", "encode_source", "encode_target",
           "load_tokenizer", "mask_placeholders", "restore_placeholders", "split_words"]
