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
from clearformer.store.safeio import CHUNK_BYTES, opened

SHORTLIST_FILE = "shortlist.bin"
CHECKSUM_WORDS = 1 << 16  # the checksum's part: 64 Ki words (a few MB of Python integers)
SHORTLIST_MAGIC = 0xF11A48D5013417F5
SHORTLIST_HEADER = struct.Struct("<6Q")
U64_MASK = (1 << 64) - 1


@dataclass(eq=False)
class LexicalShortlist:
    """Marian's lexical table: source id s allows `lists[offsets[s]:offsets[s+1]]`; ids < first_num always.

    offsets (source_vocab + 1,) int64, lists (entries,) uint32; `data` the file's bytes (written back as is).
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
    """Marian's checksum: boost's hash_combine over the u64 words after the checksum field. Each step needs the
    one before, so it runs word by word, over bounded parts (CHECKSUM_WORDS at a time: the Python integers
    of one part, never of the whole file)."""
    seed = 0
    for start in range(0, len(words), CHECKSUM_WORDS):
        for value in words[start:start + CHECKSUM_WORDS].tolist():
            seed ^= (value + 0x9E3779B9 + ((seed << 6) & U64_MASK) + (seed >> 2)) & U64_MASK
    return seed


def _read_exactly(stream, size: int, where: str) -> bytes:
    """`size` bytes of the stream, read in bounded chunks; a short file is one line."""
    chunks, total = [], 0
    while total < size:
        try:
            chunk = stream.read(min(CHUNK_BYTES, size - total))
        except OSError as error:
            raise UserError(f"{where}: unreadable ({error.strerror or error})") from None
        if not chunk:
            raise UserError(f"{where}: truncated or damaged (ends before the {size:,} bytes its header describes)")
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _checked_header(header: bytes, vocab_size: int, where: str) -> tuple[int, int, int, int, int]:
    """(checksum, first_num, best_num, offsets, entries) of a header whose sizes fit the vocabulary: every
    size is checked before the rest of the file is read (a damaged header costs no memory)."""
    magic, checksum, first, best, n_offsets, n_lists = SHORTLIST_HEADER.unpack(header)
    if magic != SHORTLIST_MAGIC:
        raise UserError(f"{where}: not a Marian binary shortlist (magic {magic:#x})")
    if n_offsets != vocab_size + 1:
        raise UserError(f"{where}: lists for {n_offsets - 1:,} source ids, but the model's vocabulary has "
                        f"{vocab_size:,}: another model's shortlist, or a damaged file")
    if not (first <= vocab_size and 0 < best <= vocab_size):
        raise UserError(f"{where}: first_num {first:,} / best_num {best:,} do not fit the vocabulary of "
                        f"{vocab_size:,}: damaged file")
    if n_lists > vocab_size * best:  # every source id lists at most best_num target ids
        raise UserError(f"{where}: {n_lists:,} entries, more than best_num {best} per source id: damaged file")
    return checksum, first, best, n_offsets, n_lists


def read_shortlist(path: str | Path, vocab_size: int) -> LexicalShortlist:
    """A Marian binary shortlist over `vocab_size` ids (lists for each, ids below it), checked: magic, sizes
    against the vocabulary (before the rest is read), offsets, checksum, ids; each problem one line naming the file."""
    where = str(path)
    with opened(path, missing="no such shortlist file") as stream:
        header = stream.read(SHORTLIST_HEADER.size)
        if len(header) < SHORTLIST_HEADER.size:
            raise UserError(f"{where}: truncated ({len(header)} bytes): not a Marian shortlist")
        checksum, first, best, n_offsets, n_lists = _checked_header(header, vocab_size, where)
        offset_bytes = _read_exactly(stream, 8 * n_offsets, where)
        offsets = np.frombuffer(offset_bytes, "<u8").astype(np.int64)
        lengths = np.diff(offsets)
        if offsets[0] != 0 or offsets[-1] != n_lists or bool(np.any(lengths < 0)) or int(lengths.max()) > best:
            raise UserError(f"{where}: offsets out of order (or more than best_num {best} ids for a source id): "
                            f"damaged file")
        list_bytes = _read_exactly(stream, 4 * n_lists, where)  # now known to be at most best_num per source id
        if stream.read(1):
            raise UserError(f"{where}: longer than the {len(header) + len(offset_bytes) + len(list_bytes):,} bytes "
                            f"its header describes: truncated or damaged")
    data = header + offset_bytes + list_bytes
    if shortlist_checksum(np.frombuffer(data, "<u8", (len(data) - 16) // 8, 16)) != checksum:  # whole words only
        raise UserError(f"{where}: checksum differs from its header: damaged file")
    lists = np.frombuffer(list_bytes, "<u4")
    if n_lists and int(lists.max()) >= vocab_size:
        raise UserError(f"{where}: target id {int(lists.max())} outside the vocabulary of {vocab_size:,}")
    return LexicalShortlist(int(first), int(best), offsets, lists, data)
