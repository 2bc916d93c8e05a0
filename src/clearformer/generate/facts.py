"""What a run knows about decoding its own translations: one immutable record, saved as its own file in the run
folder (decoding.json, beside config.json and tokenizer.json) and held by the translator.

    DecodingFacts(length_ratio=1.07, max_length_factor=0.0, shortlist=None)

    length_ratio       target tokens per source token over the training pairs, measured by `clearformer train`;
                       the brevity rule (generate/brevity.py) expects a translation of about this many tokens
                       per source token; 0: not measured (imported models, language models), no rule.
    max_length_factor  a translation stops at round(factor x source tokens, </s> included), the rule of Marian's
                       `max-length-factor` that an imported model's engine applies (Firefox's students: 2.5, from
                       the package's decoder config); 0: the paper's source length + 50 (generate/state.py
                       `max_new_tokens`). `--max-extra` replaces either.
    shortlist          the lexical shortlist the run's engine scores each sentence's candidates with (Firefox's
                       models ship one: tokenize/shortlist.py), kept as shortlist.bin, Marian's file as it came;
                       None for every other run.

The tokenizer is text <-> ids only (tokenize/); these are facts about decoding, not about text. Each producer
builds the record whole, once: `clearformer train` (train/setup.py, the ratio its corpus measured), the imports
(interop/marian_bin_import.py: the engine's factor and shortlist), averaging (the runs' own); nothing assigns
them afterwards (`frozen`; tests/generate/test_decoding_facts.py). `save` writes decoding.json (and
shortlist.bin) atomically with the rest of the run (store/checkpoint.py `save_model`); `read` reads them back
(load/), and a run folder of an earlier release, whose facts sit in tokenizer.json, is read from there, in
memory, the folder left as it is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.safeio import read_json_object
from clearformer.tokenize.shortlist import SHORTLIST_FILE, LexicalShortlist, read_shortlist

DECODING_FILE = "decoding.json"
LEGACY_FILE = "tokenizer.json"  # where runs of earlier releases keep these facts
MAX_LENGTH_FACTOR = 100.0  # far above any engine's (Marian's default is 3); the model's max_len caps it anyway


@dataclass(frozen=True)
class DecodingFacts:
    """A run's decoding facts (see the module docstring); the default: none (no brevity rule, the paper's limit,
    the whole vocabulary)."""

    length_ratio: float = 0.0
    max_length_factor: float = 0.0
    shortlist: LexicalShortlist | None = None

    def __post_init__(self) -> None:  # a ValueError for a fact out of range, whoever builds the record
        number("length_ratio", self.length_ratio, float("inf"))
        number("max_length_factor", self.max_length_factor, MAX_LENGTH_FACTOR)

    @classmethod
    def of(cls, data: dict, shortlist: LexicalShortlist | None) -> DecodingFacts:
        """The record from a JSON object's numbers (each absent one 0) and the shortlist read beside it."""
        return cls(number("length_ratio", data.get("length_ratio", 0.0), float("inf")),
                   number("max_length_factor", data.get("max_length_factor", 0.0), MAX_LENGTH_FACTOR), shortlist)

    def to_dict(self) -> dict:
        """decoding.json's object (the shortlist by file name, checksum and the vocabulary it covers)."""
        shortlist = None if self.shortlist is None else {
            "file": SHORTLIST_FILE, "sha256": hashlib.sha256(self.shortlist.data).hexdigest(),
            "vocab_size": self.shortlist.vocab_size}
        return {"length_ratio": self.length_ratio, "max_length_factor": self.max_length_factor,
                "shortlist": shortlist}

    def save(self, directory: str | Path) -> None:
        """decoding.json (and shortlist.bin, first: the JSON names its checksum) in `directory`, each atomically."""
        directory = Path(directory)
        if self.shortlist is not None:
            atomic_write_bytes(directory / SHORTLIST_FILE, self.shortlist.data)
        atomic_write_text(directory / DECODING_FILE, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def read(cls, directory: str | Path, vocab_size: int) -> DecodingFacts:
        """The facts of the run folder `directory` whose tokenizer has `vocab_size` ids: its decoding.json, or, in
        a folder of an earlier release, its tokenizer.json's (read in memory; the folder is not rewritten). A
        one-line UserError naming the file for a damaged one."""
        directory = Path(directory)
        path = directory / DECODING_FILE
        if not path.exists():
            return cls.legacy(directory, vocab_size)
        data = read_json_object(path)
        try:
            listed = data.get("shortlist")
            if listed is not None and not isinstance(listed, dict):
                raise ValueError(f"shortlist must be an object or null, not {listed!r}")
            shortlist = None if listed is None else load_shortlist(directory, listed.get("sha256"),
                                                                   checked_size(listed.get("vocab_size"), vocab_size))
            return cls.of(data, shortlist)
        except ValueError as error:
            raise UserError(f"{path}: {error}") from None

    @classmethod
    def legacy(cls, directory: Path, vocab_size: int) -> DecodingFacts:
        """An earlier release's run folder: the facts its tokenizer.json holds (none in a folder without one)."""
        path = directory / LEGACY_FILE
        if not path.exists():
            return cls()
        info = read_json_object(path)
        try:
            # Marian's shortlist covers the model's ids but the <pad> the import appended (interop/marian_bin_vocab.py)
            shortlist = None if info.get("shortlist") is None else load_shortlist(
                directory, info.get("shortlist_sha256"), vocab_size - 1)
            return cls.of(info, shortlist)
        except ValueError as error:
            raise UserError(f"{path}: {error}") from None



def number(name: str, value, most: float) -> float:
    """`value` as a float, or a ValueError naming the fact when it is not a number from 0 to `most`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= most:
        limit = ">= 0" if most == float("inf") else f"from 0 to {most:g}"
        raise ValueError(f"{name} must be a number {limit}, not {value!r}")
    return float(value)


def checked_size(size, vocab_size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= vocab_size:
        raise ValueError(f"the shortlist's vocab_size must be an id count from 1 to {vocab_size}, not {size!r}")
    return size


def load_shortlist(directory: Path, sha256, vocab_size: int) -> LexicalShortlist:
    """The run's shortlist.bin over `vocab_size` ids, checked against the SHA-256 its record names."""
    path = directory / SHORTLIST_FILE
    shortlist = read_shortlist(path, vocab_size)
    if hashlib.sha256(shortlist.data).hexdigest() != sha256:
        raise UserError(f"{path}: damaged (checksum differs from the one its run folder records)")
    return shortlist


NO_FACTS = DecodingFacts()  # a run without decoding facts: no brevity rule, the paper's limit, no shortlist
