"""Hugging Face MarianMT's tokenization (the opus-mt translators): two SentencePiece models over one shared
vocabulary (not the single SentencePiece model of Marian's C++ `.bin` models: interop/marian_bin_vocab.py).

The source text is cut into pieces by `source.spm`, the target text by `target.spm`; `vocab.json`
gives every piece of either side its id (pieces it lacks become <unk>). This is what Transformers'
`MarianTokenizer` does, so an imported model reads exactly the ids it was trained on.

Marian's special ids: <pad> (usually the last id) is also the decoder's start token, so here
`bos_id == pad_id`: decoding starts from <pad>, as in Marian. </s> ends every sequence; the model
was trained with it appended to every source (the tokenizer says `source_eos=True`: tokenize/facts.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from clearformer.errors import UserError
from clearformer.tokenize.facts import TokenizerFacts
from clearformer.tokenize.files import load_files, read_vocabulary, save_files
from clearformer.tokenize.placeholders import RESERVED_TOKENS
from clearformer.tokenize.standins import StandIns

FILES = {"source": "source.spm", "target": "target.spm", "vocab": "vocab.json"}
LANGUAGE_CODE = re.compile(r">>.+?<<")  # a leading >>fra<< picks the target language of multilingual models


class MarianMTTokenizer(TokenizerFacts):
    """The tokenizer interface of clearformer (encode/decode, ids, save/load) over Marian's files."""

    kind = "marian"

    def __init__(self, source_spm: bytes, target_spm: bytes, vocab: dict[str, int],
                 pad: str = "<pad>", unk: str = "<unk>", eos: str = "</s>", start: str | None = None,
                 facts: dict | None = None, mask_by_stand_ins: bool = False) -> None:
        self.files = {"source": bytes(source_spm), "target": bytes(target_spm)}
        try:
            self.source = spm.SentencePieceProcessor(model_proto=self.files["source"])
            self.target = spm.SentencePieceProcessor(model_proto=self.files["target"])
        except RuntimeError as error:
            raise UserError(f"not a SentencePiece model ({str(error).splitlines()[0]})") from None
        self.vocab = dict(vocab)
        self.itos = sorted(self.vocab, key=self.vocab.__getitem__)
        start = pad if start is None else start
        for name, token in (("pad", pad), ("unk", unk), ("eos", eos), ("start", start)):
            if token not in self.vocab:
                raise UserError(f"vocab.json lacks the {name} token {token!r}")
        self.specials = {"pad": pad, "unk": unk, "eos": eos, "start": start}
        self.pad_id, self.unk_id, self.eos_id = self.vocab[pad], self.vocab[unk], self.vocab[eos]
        # The decoder's start token: <pad> in Marian's models; a model clearformer exported keeps its <bos>.
        self.bos_id = self.vocab[start]
        # A production vocabulary has no reserved placeholder tokens: numerals stand in (tokenize/standins.py).
        self.stand_ins = None if RESERVED_TOKENS[0] in self.vocab else StandIns.from_vocabulary(self.vocab)
        self.built_with(facts, mask_by_stand_ins)  # source_eos, masking (tokenize/facts.py)

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def placeholder_ids(self) -> tuple[int, ...]:
        """The reserved placeholder tokens' ids when this tokenizer masks (a run clearformer exported)."""
        if not self.mask_placeholders:
            return ()
        if self.stand_ins is not None:  # the numeral pieces standing in for ｟ph{i}｠ (tokenize/standins.py)
            return tuple(self.vocab[piece] for piece in self.stand_ins.pieces_used)
        return tuple(self.vocab[t] for t in RESERVED_TOKENS if t in self.vocab)

    def pieces(self, text: str, side: spm.SentencePieceProcessor) -> list[str]:
        """Text -> pieces of one side's SentencePiece model; a masked placeholder ｟ph{i}｠ becomes its stand-in."""
        if self.stand_ins is None or not self.mask_placeholders or "｟" not in text:
            return side.encode(text, out_type=str)
        return self.stand_ins.pieces(text, lambda part: side.encode(part, out_type=str), self.vocab.__contains__)

    def tokenize(self, text: str) -> list[str]:
        """Source text -> pieces; a leading language code (>>fra<<) stays one token, as in MarianTokenizer."""
        match = LANGUAGE_CODE.match(text)
        code = [match.group(0)] if match else []
        rest = text[match.end():] if match else text
        return code + self.pieces(rest.strip() if match else rest, self.source)

    def encode(self, text: str) -> list[int]:
        """Source text -> ids (no </s>: `encode_source` appends it)."""
        return [self.vocab.get(piece, self.unk_id) for piece in self.tokenize(text)]

    def encode_target_text(self, text: str) -> list[int]:
        """Target text -> ids through the target SentencePiece model (fine-tuning's labels)."""
        return [self.vocab.get(piece, self.unk_id) for piece in self.pieces(text, self.target)]

    def decode(self, ids: Iterable[int]) -> str:
        """Target ids -> text through the target SentencePiece model, dropping <pad>, the start token and </s>;
        a stand-in piece comes back as the ｟ph{i}｠ it stands for (restored by the caller)."""
        skip = {self.pad_id, self.bos_id, self.eos_id}
        pieces = [self.itos[int(i)] for i in ids if int(i) not in skip and 0 <= int(i) < len(self.itos)]
        if self.stand_ins is not None and self.mask_placeholders:
            return self.stand_ins.text(pieces, self.target.decode_pieces)
        return self.target.decode_pieces(pieces)

    def id_to_token(self, index: int) -> str:
        return self.itos[int(index)]

    def token_to_id(self, token: str) -> int:
        return self.vocab.get(token, self.unk_id)

    def unknown_words(self, text: str) -> list[str]:
        """Source pieces that the shared vocabulary lacks (they become <unk>)."""
        return [piece for piece in self.tokenize(text) if piece not in self.vocab]

    def save(self, directory: str | Path) -> None:
        import json

        vocab = json.dumps(self.vocab, ensure_ascii=False, indent=1).encode("utf-8")
        save_files(directory, self.kind, {"source": (FILES["source"], self.files["source"]),
                                          "target": (FILES["target"], self.files["target"]),
                                          "vocab": (FILES["vocab"], vocab)},
                   vocab_size=len(self), specials=self.specials, **self.facts())

    @classmethod
    def load(cls, directory: str | Path) -> MarianMTTokenizer:
        info, files = load_files(directory, ("source", "target", "vocab"))
        specials = info.get("specials") if isinstance(info.get("specials"), dict) else {}
        vocab = read_vocabulary(files["vocab"], str(Path(directory) / FILES["vocab"]))
        return cls(files["source"], files["target"], vocab, **{k: v for k, v in specials.items()
                                                              if k in ("pad", "unk", "eos", "start")}, facts=info)
