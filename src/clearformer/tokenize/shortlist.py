"""A lexical shortlist over a vocabulary (Firefox Translations' models ship one), and its file format.

The search uses it as a decoding rule (generate/shortlist.py, which says how the candidate set is built);
here is the table itself and Marian's binary file, `lex.50.50.enpt.s2t.bin`
(Marian's `BinaryShortlistGenerator`):

    u64 magic 0xF11A48D5013417F5, u64 checksum (boost's hash_combine over every u64 word after it)
    u64 first_num (the always-allowed ids 0 .. first_num-1), u64 best_num
    u64 offsets_len (= source vocabulary + 1), u64 lists_len
    u64 offsets[offsets_len], u32 lists[lists_len]: source id s allows lists[offsets[s]:offsets[s+1]]

A run keeps the file as `shortlist.bin` beside its SentencePiece model, byte for byte as it came.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clearformer.errors import UserError
from clearformer.store.safeio import read_bytes

SHORTLIST_FILE = "shortlist.bin"
MAX_SHORTLIST_FILE_BYTES = 1 << 30
SHORTLIST_MAGIC = 0xF11A48D5013417F5
SHORTLIST_HEADER = struct.Struct("<6Q")
U64_MASK = (1 << 64) - 1


@dataclass(eq=False)
class LexicalShortlist:
    """Marian's lexical table: source id s allows `lists[offsets[s]:offsets[s+1]]`; ids < first_num always.

    offsets (source_vocab + 1,) int64, lists (entries,) int64; `data` the file's bytes (written back as is).
    """

    first_num: int
    best_num: int
    offsets: np.ndarray
    lists: np.ndarray
    data: bytes = b""

    @property
    def vocab_size(self) -> int:
        return len(self.offsets) - 1

    def candidates(self, source_ids: Sequence[int], vocab_size: int | None = None) -> np.ndarray:
        """The sorted target ids the output layer scores for a source (its ids, </s> included)."""
        size = self.vocab_size if vocab_size is None else vocab_size
        chosen = np.zeros(size, dtype=bool)
        chosen[: min(self.first_num, size)] = True
        unique = np.unique(np.asarray(list(source_ids), dtype=np.int64))
        unique = unique[(unique >= 0) & (unique < self.vocab_size)]
        # Not the source ids themselves: Marian's C++ generator adds them when source and target share one
        # vocabulary, but the package's engine does not; adding them made "hash" (`▁has` `h`) copy `▁has`
        # where the engine writes "agu" (2 of 260 en-pt sentences part; docs/firefox.md, "Parity").
        for source in unique.tolist():
            chosen[self.lists[self.offsets[source]: self.offsets[source + 1]]] = True
        missing = -int(chosen[: self.vocab_size].sum()) % 8
        if missing:
            free = np.flatnonzero(~chosen[self.first_num: self.vocab_size])[:missing] + self.first_num
            chosen[free] = True
        return np.flatnonzero(chosen)



def shortlist_checksum(words: np.ndarray) -> int:
    """Marian's checksum: boost's hash_combine over the u64 words after the checksum field."""
    seed = 0
    for value in words.tolist():
        seed ^= (value + 0x9E3779B9 + ((seed << 6) & U64_MASK) + (seed >> 2)) & U64_MASK
    return seed


def read_shortlist(path: str | Path, vocab_size: int) -> LexicalShortlist:
    """A Marian binary shortlist over (at most) `vocab_size` ids, checked: magic, checksum, sizes, ids."""
    where = str(path)
    data = read_bytes(path, MAX_SHORTLIST_FILE_BYTES, missing="no such shortlist file")
    if len(data) < SHORTLIST_HEADER.size:
        raise UserError(f"{where}: truncated ({len(data)} bytes): not a Marian shortlist")
    magic, checksum, first, best, n_offsets, n_lists = SHORTLIST_HEADER.unpack_from(data, 0)
    if magic != SHORTLIST_MAGIC:
        raise UserError(f"{where}: not a Marian binary shortlist (magic {magic:#x})")
    if len(data) != SHORTLIST_HEADER.size + 8 * n_offsets + 4 * n_lists:
        raise UserError(f"{where}: {len(data):,} bytes, but its header describes "
                        f"{SHORTLIST_HEADER.size + 8 * n_offsets + 4 * n_lists:,}: truncated or damaged")
    words = np.frombuffer(data, "<u8", (len(data) - 16) // 8, 16)  # Marian hashes whole words only
    if shortlist_checksum(words) != checksum:
        raise UserError(f"{where}: checksum differs from its header: damaged file")
    offsets = np.frombuffer(data, "<u8", n_offsets, SHORTLIST_HEADER.size).astype(np.int64)
    lists = np.frombuffer(data, "<u4", n_lists, SHORTLIST_HEADER.size + 8 * n_offsets).astype(np.int64)
    if not 1 < n_offsets <= vocab_size + 1:
        raise UserError(f"{where}: lists for {n_offsets - 1:,} source ids, but the vocabulary has {vocab_size:,}")
    if n_offsets and (offsets[0] != 0 or offsets[-1] != n_lists or bool(np.any(np.diff(offsets) < 0))):
        raise UserError(f"{where}: offsets out of order: damaged file")
    if n_lists and int(lists.max()) >= vocab_size:
        raise UserError(f"{where}: target id {int(lists.max())} outside the vocabulary of {vocab_size:,}")
    return LexicalShortlist(int(first), int(best), offsets, lists, data)
