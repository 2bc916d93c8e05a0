"""Text <-> token ids. `load_tokenizer(dir)` reads whichever kind a checkpoint holds."""

from __future__ import annotations

import json
from pathlib import Path

from clearformer.errors import UserError
from clearformer.tokenize.words import BOS, EOS, PAD, SPECIALS, UNK, WordTokenizer, detokenize, split_words


def load_tokenizer(directory: str | Path):
    """The tokenizer saved in a checkpoint directory (`tokenizer.json` says which kind)."""
    path = Path(directory) / "tokenizer.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: missing (not a clearformer checkpoint?)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: unreadable tokenizer ({error})") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    try:
        if kind == "words":
            return WordTokenizer.from_dict(data)
        if kind == "sentencepiece":
            from clearformer.tokenize.subword import SentencePieceTokenizer

            return SentencePieceTokenizer.load(Path(directory))
    except (KeyError, TypeError, ValueError) as error:
        raise UserError(f"{path}: damaged tokenizer ({error})") from None
    raise UserError(f"{path}: unknown tokenizer kind {kind!r}")


__all__ = ["BOS", "EOS", "PAD", "SPECIALS", "UNK", "WordTokenizer", "detokenize", "load_tokenizer", "split_words"]
