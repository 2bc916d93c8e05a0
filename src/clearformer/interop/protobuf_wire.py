"""Protocol Buffers' wire format, the few primitives a SentencePiece model edit needs (no protobuf library).

A serialized message is a sequence of fields, each a key `field_number << 3 | wire_type` (a varint)
followed by its value: wire type 0 a varint, 2 a length-delimited byte string (a string, bytes or a
nested message: its length as a varint, then the bytes), 5 four little-endian bytes (a float).
Parsing merges: a repeated field's entries are appended in order, and a nested message given twice is
merged field by field. So appending fields to a serialized message is an edit of it
(interop/marian_bin_vocab.py adds, and removes, the `<pad>` piece of a Marian vocabulary so).
"""

from __future__ import annotations

import struct

VARINT, LENGTH_DELIMITED, FIXED32 = 0, 2, 5  # the wire types used here


def varint(number: int) -> bytes:
    """A non-negative integer as a base-128 varint, low 7 bits first, the high bit set on every byte but the last."""
    if number < 0:
        raise ValueError(f"a varint is non-negative, not {number}")
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def field_key(field_number: int, wire_type: int) -> bytes:
    """The key that starts a field."""
    return varint(field_number << 3 | wire_type)


def bytes_field(field_number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes or a nested message."""
    return field_key(field_number, LENGTH_DELIMITED) + varint(len(payload)) + payload


def varint_field(field_number: int, value: int) -> bytes:
    """An integer or enum field."""
    return field_key(field_number, VARINT) + varint(value)


def float_field(field_number: int, value: float) -> bytes:
    """A 32-bit float field."""
    return field_key(field_number, FIXED32) + struct.pack("<f", value)
