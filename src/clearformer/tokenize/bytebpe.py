"""GPT-2's byte-level BPE (vocab.json + merges.txt), run by the Hugging Face `tokenizers` library.

Every byte of the text maps to a printable character first (a space becomes "Ġ"), then BPE merges
those characters into the 50,257 tokens of GPT-2's vocabulary, so no text is ever unknown. Its one
special token, <|endoftext|>, separates documents: it serves here as <eos>, as the start of a prompt
(`lm generate` and `lm explain` put it first) and as the never-used <pad>.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.safeio import decode_utf8
from clearformer.tokenize.facts import TokenizerFacts
from clearformer.tokenize.files import load_files, read_vocabulary, save_files

FILES = {"vocab": "vocab.json", "merges": "merges.txt"}
END_OF_TEXT = "<|endoftext|>"


def require_tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise UserError("GPT-2's tokenizer needs the `tokenizers` library: pip install 'clearformer[hf]'") from None
    return tokenizers


class ByteLevelBPETokenizer(TokenizerFacts):
    """The tokenizer interface of clearformer over GPT-2's vocab.json and merges.txt."""

    kind = "gpt2"

    def __init__(self, vocab_json: bytes, merges_txt: bytes, end_of_text: str = END_OF_TEXT,
                 facts: dict | None = None) -> None:
        tokenizers = require_tokenizers()
        self.files = {"vocab": bytes(vocab_json), "merges": bytes(merges_txt)}
        vocab = read_vocabulary(self.files["vocab"], FILES["vocab"])
        if end_of_text not in vocab:
            raise UserError(f"vocab.json lacks the end-of-text token {end_of_text!r}")
        merges = [tuple(line.split(" ")) for line in decode_utf8(merges_txt, FILES["merges"]).splitlines()
                  if line and not line.startswith("#version")]
        if any(len(pair) != 2 for pair in merges):
            raise UserError("merges.txt: every line must be two tokens separated by one space")
        model = tokenizers.models.BPE(vocab, merges)
        self.backend = tokenizers.Tokenizer(model)
        self.backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        self.backend.decoder = tokenizers.decoders.ByteLevel()
        self.backend.add_special_tokens([tokenizers.AddedToken(end_of_text, special=True)])
        self.end_of_text = end_of_text
        self.size = len(vocab)
        self.eos_id = self.bos_id = self.pad_id = self.unk_id = vocab[end_of_text]
        self.specials = {"eos": end_of_text}
        self.built_with(facts)  # tokenize/facts.py

    def __len__(self) -> int:
        return self.size

    def tokenize(self, text: str) -> list[str]:
        return self.backend.encode(text).tokens

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=True)

    def id_to_token(self, index: int) -> str:
        return self.backend.id_to_token(int(index))

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def unknown_words(self, text: str) -> list[str]:
        return []  # byte-level: every text has tokens

    def save(self, directory: str | Path) -> None:
        save_files(directory, self.kind, {role: (FILES[role], self.files[role]) for role in FILES},
                   vocab_size=len(self), specials=self.specials, **self.facts())

    @classmethod
    def load(cls, directory: str | Path) -> ByteLevelBPETokenizer:
        info, files = load_files(directory, ("vocab", "merges"))
        specials = info.get("specials") if isinstance(info.get("specials"), dict) else {}
        return cls(files["vocab"], files["merges"], str(specials.get("eos", END_OF_TEXT)), info)

