"""Word-level tokenization: the seeds' vocabulary, with <pad>, <unk>, <bos> (<START>) and <eos> (<END>).

Splitting keeps French elisions apart from the word they join ("t'aime" -> "t'", "aime", as the
seeds do) and punctuation apart from words; `detokenize` undoes both, so
encode -> decode gives back the sentence for every known word.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write_text
from clearformer.tokenize.facts import TokenizerFacts
from clearformer.tokenize.placeholders import RESERVED_TOKENS

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)

# An elided French article or pronoun (l', d', j', t', qu', ...) split off the next word; a word
# with inner apostrophes otherwise stays whole ("don't"); any other symbol is a token by itself.
_ELISION = r"(?:[lLdDjJtTmMsSnNcC]|[qQ]u|[jJ]usqu|[lL]orsqu|[pP]uisqu)['’](?=\w)"
# A reserved placeholder token (｟ph0｠, tokenize/placeholders.py) is one word.
_TOKEN = re.compile(rf"｟ph\d+｠|{_ELISION}|\w+(?:['’]\w+)*|[^\w\s]")
_NO_SPACE_BEFORE = set(",.;:!?)]}%")
_NO_SPACE_AFTER = set("([{")


def split_words(text: str) -> list[str]:
    """'Je t'aime.' -> ['Je', "t'", 'aime', '.']"""
    return _TOKEN.findall(text)


def detokenize(tokens: Iterable[str]) -> str:
    """Join word tokens back into text: no space after an elision or before closing punctuation."""
    out = ""
    previous = ""
    for token in tokens:
        glue = (not out or previous.endswith(("'", "’")) or previous in _NO_SPACE_AFTER
                or token in _NO_SPACE_BEFORE)
        out += token if glue else " " + token
        previous = token
    return out


class WordTokenizer(TokenizerFacts):
    """A fixed word vocabulary; ids 0-3 are <pad>, <unk>, <bos>, <eos> unless given otherwise."""

    kind = "words"

    def __init__(self, tokens: list[str], specials: dict[str, str] | None = None, facts: dict | None = None) -> None:
        if len(set(tokens)) != len(tokens):
            raise UserError("a vocabulary lists the same token twice")
        self.itos = list(tokens)
        self.stoi = {token: index for index, token in enumerate(self.itos)}
        names = {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS, **(specials or {})}
        missing = [symbol for symbol in names.values() if symbol not in self.stoi]
        if missing:
            raise UserError(f"the vocabulary lacks the special token(s) {', '.join(missing)}")
        self.specials = names
        self._placeholder_ids: tuple[int, ...] | None = None
        self.pad_id = self.stoi[names["pad"]]
        self.unk_id = self.stoi[names["unk"]]
        self.bos_id = self.stoi[names["bos"]]
        self.eos_id = self.stoi[names["eos"]]
        self.built_with(facts)  # source_eos, mask_placeholders, placeholder_patterns (tokenize/facts.py)

    @classmethod
    def build(cls, sentences: Iterable[str], min_count: int = 1, reserved: Iterable[str] = (),
              facts: dict | None = None) -> WordTokenizer:
        """Vocabulary of every word seen at least `min_count` times, most frequent first, after the
        specials and the `reserved` tokens (the placeholder tokens ｟ph0｠... of a masking run)."""
        counts = Counter(word for sentence in sentences for word in split_words(sentence))
        words = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        fixed = list(SPECIALS) + [t for t in dict.fromkeys(reserved) if t not in SPECIALS]
        return cls(fixed + [w for w in words if w not in set(fixed)], facts=facts)

    @property
    def placeholder_ids(self) -> tuple[int, ...]:
        """The reserved placeholder tokens' ids when this tokenizer masks (decoding copies them exactly);
        a test may set others."""
        if self._placeholder_ids is not None:
            return self._placeholder_ids
        if not self.mask_placeholders:
            return ()
        return tuple(self.stoi[t] for t in RESERVED_TOKENS if t in self.stoi)

    @placeholder_ids.setter
    def placeholder_ids(self, ids) -> None:
        self._placeholder_ids = tuple(ids)

    def __len__(self) -> int:
        return len(self.itos)

    def tokenize(self, text: str) -> list[str]:
        return split_words(text)

    def encode(self, text: str) -> list[int]:
        """Text -> ids (no <bos>/<eos>); unknown words become <unk> (see `unknown_words`)."""
        return [self.stoi.get(word, self.unk_id) for word in split_words(text)]

    def unknown_words(self, text: str) -> list[str]:
        return [word for word in split_words(text) if word not in self.stoi]

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, dropping <pad>, <bos> and <eos>."""
        skip = {self.pad_id, self.bos_id, self.eos_id}
        return detokenize(self.itos[i] for i in ids if i not in skip)

    def id_to_token(self, index: int) -> str:
        return self.itos[index]

    def token_to_id(self, token: str) -> int:
        return self.stoi.get(token, self.unk_id)

    # -- files ----------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {"kind": self.kind, "tokens": self.itos, "specials": self.specials, **self.facts()}

    def save(self, directory: str | Path) -> None:
        atomic_write_text(Path(directory) / "tokenizer.json", json.dumps(self.to_dict(), ensure_ascii=False) + "\n")

    @classmethod
    def from_dict(cls, data: dict) -> WordTokenizer:
        return cls(data["tokens"], data.get("specials"), data)
