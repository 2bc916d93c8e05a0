"""Subword tokenization with SentencePiece: one joint vocabulary for source and target.

A word the vocabulary lacks is split into known pieces ("crtscts" -> "▁c" "rt" "s" "c" "ts"), and
with byte fallback a character it has never seen becomes its UTF-8 bytes, so nothing is ever
<unk>. Because source and target share the pieces, a rare identifier can be copied piece by
piece from the source into the translation.

Ids 0-3 are <pad>, <unk>, <bos>, <eos>, as in the word tokenizer. A checkpoint stores the
SentencePiece model as `tokenizer.model` beside a `tokenizer.json` that says kind "sentencepiece"
and holds the model's SHA-256, so a damaged file is caught when loading.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from clearformer.errors import UserError
from clearformer.limits import MAX_TOKENIZER_FILE_BYTES
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.safeio import read_bytes, read_json_object
from clearformer.tokenize.facts import TokenizerFacts
from clearformer.tokenize.placeholders import RESERVED_TOKENS
from clearformer.tokenize.standins import StandIns
from clearformer.tokenize.words import BOS, EOS, PAD, UNK

MODEL_FILE = "tokenizer.model"
JSON_FILE = "tokenizer.json"
MAX_TRAINING_SENTENCES = 2_000_000


class SentencePieceTokenizer(TokenizerFacts):
    """The same interface as `WordTokenizer` (ids, encode/decode, save/load), backed by SentencePiece."""

    kind = "sentencepiece"

    def __init__(self, model_proto: bytes, placeholders: Iterable[str] = (), facts: dict | None = None,
                 mask_by_stand_ins: bool = False) -> None:
        """`facts`: source_eos, mask_placeholders, placeholder_patterns (tokenize/facts.py `built_with`)."""
        self.model_proto = bytes(model_proto)
        # Placeholders kept as single pieces (user-defined symbols; see clearformer.tokenize.placeholders).
        self.placeholders = tuple(placeholders)
        self.processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self.pad_id = self.processor.pad_id()
        self.unk_id = self.processor.unk_id()
        self.bos_id = self.processor.bos_id()
        self.eos_id = self.processor.eos_id()
        self.specials = {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS}
        self.piece_ids = tuple(self.processor.piece_to_id(p) for p in self.placeholders)
        missing = [p for p, i in zip(self.placeholders, self.piece_ids, strict=True) if i == self.unk_id]
        if missing:
            raise UserError(f"the SentencePiece model lacks the placeholder piece(s) {missing[:3]}")
        # A vocabulary made elsewhere (Firefox's students) has no reserved tokens ｟ph{i}｠: numerals stand in
        # for them when the run masks placeholders (tokenize/standins.py).
        if self.processor.piece_to_id(RESERVED_TOKENS[0]) == self.unk_id:
            self.stand_ins = StandIns.from_vocabulary(
                {self.processor.id_to_piece(i): i for i in range(self.processor.get_piece_size())})
        self.built_with(facts, mask_by_stand_ins)

    @property
    def placeholder_ids(self) -> tuple[int, ...]:
        """The pieces decoding copies exactly: the placeholder pieces (reserved tokens included), or the
        stand-ins of a vocabulary without reserved tokens when the run masks placeholders."""
        if self.mask_placeholders and self.stand_ins is not None:
            return tuple(self.processor.piece_to_id(piece) for piece in self.stand_ins.pieces_used)
        return self.piece_ids

    # -- training -------------------------------------------------------------------------------

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int = 8000, model_type: str = "unigram",
              byte_fallback: bool = True, character_coverage: float = 1.0, seed: int = 1,
              threads: int = 2, placeholders: Iterable[str] = (), facts: dict | None = None) -> SentencePieceTokenizer:
        """Learn a vocabulary of about `vocab_size` pieces from `sentences` (in memory, no temp file).

        `placeholders` (e.g. `%s`, `{0}`, `<b>`) become user-defined symbols: always one piece each,
        wherever they occur, so that decoding can copy them as a whole (`generate/constraints.py`).
        The vocabulary size is a soft limit: a small corpus gets fewer pieces rather than an error.
        Corpora over 2M sentences are subsampled with `seed` (SentencePiece itself is then run
        without its own, unseeded, sampling, so the same corpus always gives the same vocabulary).
        """
        sentences = [s for s in sentences if s.strip()]
        if not sentences:
            raise UserError("cannot train a SentencePiece vocabulary on no sentences")
        if len(sentences) > MAX_TRAINING_SENTENCES:
            import random

            sentences = random.Random(seed).sample(sentences, MAX_TRAINING_SENTENCES)
        model = io.BytesIO()
        placeholders = [p for p in placeholders if p and not any(c.isspace() for c in p)]
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocab_size,
                model_type=model_type, character_coverage=character_coverage, byte_fallback=byte_fallback,
                split_digits=True, hard_vocab_limit=False, input_sentence_size=0,
                shuffle_input_sentence=False,
                pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece=PAD, unk_piece=UNK, bos_piece=BOS,
                eos_piece=EOS, num_threads=threads, minloglevel=2,
                **({"user_defined_symbols": placeholders} if placeholders else {}))
        except RuntimeError as error:
            raise UserError(f"SentencePiece training failed: {str(error).splitlines()[0]}") from None
        return cls(model.getvalue(), placeholders, facts)

    # -- the tokenizer interface --------------------------------------------------------------

    def __len__(self) -> int:
        return self.processor.get_piece_size()

    def uses_stand_ins(self, text: str | None = None) -> bool:
        return self.mask_placeholders and self.stand_ins is not None and (text is None or "｟" in text)

    def tokenize(self, text: str) -> list[str]:
        """Text -> pieces, e.g. 'Je t'aime' -> ['▁Je', '▁t', "'", 'aime']."""
        if self.uses_stand_ins(text):
            return self.stand_ins.pieces(text, lambda part: self.processor.encode(part, out_type=str),
                                         lambda piece: self.processor.piece_to_id(piece) != self.unk_id)
        return self.processor.encode(text, out_type=str)

    def encode(self, text: str) -> list[int]:
        """Text -> ids (no <bos>/<eos>)."""
        if self.uses_stand_ins(text):
            return [self.processor.piece_to_id(piece) for piece in self.tokenize(text)]
        return self.processor.encode(text, out_type=int)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, dropping <pad>, <bos> and <eos>; a stand-in comes back as its ｟ph{i}｠."""
        skip = {self.pad_id, self.bos_id, self.eos_id}
        kept = [int(i) for i in ids if int(i) not in skip]
        if self.uses_stand_ins():
            return self.stand_ins.text([self.processor.id_to_piece(i) for i in kept], self.processor.decode_pieces)
        return self.processor.decode(kept)

    def id_to_token(self, index: int) -> str:
        return self.processor.id_to_piece(int(index))

    def token_to_id(self, token: str) -> int:
        return self.processor.piece_to_id(token)

    def unknown_words(self, text: str) -> list[str]:
        """Pieces that became <unk> (none with byte fallback)."""
        pieces = self.tokenize(text)
        return [piece for piece, i in zip(pieces, self.encode(text), strict=True) if i == self.unk_id]

    # -- files ----------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {"kind": self.kind, "model": MODEL_FILE, "vocab_size": len(self),
                "sha256": hashlib.sha256(self.model_proto).hexdigest(), "specials": self.specials,
                "placeholders": list(self.placeholders), **self.facts()}

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        atomic_write_bytes(directory / MODEL_FILE, self.model_proto)
        atomic_write_text(directory / JSON_FILE, json.dumps(self.to_dict(), ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> SentencePieceTokenizer:
        directory = Path(directory)
        info = read_json_object(directory / JSON_FILE, missing="missing (not a clearformer checkpoint?)")
        path = directory / Path(str(info.get("model", MODEL_FILE))).name  # never outside the checkpoint
        proto = read_bytes(path, MAX_TOKENIZER_FILE_BYTES, missing="missing SentencePiece model")
        expected = info.get("sha256")
        if expected and hashlib.sha256(proto).hexdigest() != expected:
            raise UserError(f"{path}: damaged (checksum differs from {JSON_FILE})")
        placeholders = info.get("placeholders", [])
        if not isinstance(placeholders, list) or not all(isinstance(p, str) for p in placeholders):
            raise UserError(f"{directory / JSON_FILE}: \"placeholders\" must be a list of strings")
        try:
            return cls(proto, placeholders, info)
        except (RuntimeError, OSError) as error:
            raise UserError(f"{path}: not a SentencePiece model ({str(error).splitlines()[0]})") from None
        except UserError as error:  # a placeholder that tokenizer.json lists is not in the model
            raise UserError(f"{directory / JSON_FILE}: {error}") from None
        except ValueError as error:  # a fact of the wrong type
            raise UserError(f"{directory / JSON_FILE}: {error}") from None
