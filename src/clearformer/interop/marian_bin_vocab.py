"""Marian's SentencePiece vocabulary (`vocab.enpt.spm`), as a run of the Marian `.bin` format keeps it.

Marian's vocabulary has `</s>` at id 0 and `<unk>` at 1, and no padding id: Marian pads nothing and
starts decoding from a zero vector. A clearformer run pads batches and names a start id, so the run's
copy gets one CONTROL piece `<pad>` appended (id = the model's vocabulary size), named as the model's
pad and bos piece; its row of `Wemb` is zero and its output bias PAD_BIAS, so it is never chosen
(interop/marian_bin_import.py). `add_pad_piece` is the edit `import` makes, `remove_pad_piece` its
inverse, which `export --to marian-bin` makes: the exported vocabulary is the original, byte for byte.

This is not the vocabulary of the Hugging Face MarianMT translators (two SentencePiece models and a
vocab.json: tokenize/marianmt.py).
"""

from __future__ import annotations

from pathlib import Path

from clearformer.errors import UserError
from clearformer.interop.protobuf_wire import bytes_field, float_field, varint_field
from clearformer.limits import MAX_TOKENIZER_FILE_BYTES
from clearformer.store.safeio import read_bytes
from clearformer.tokenize.subword import SentencePieceTokenizer

PAD_PIECE = "<pad>"
# sentencepiece_model.proto: ModelProto.pieces = 1 (SentencePiece: piece 1, score 2, type 3; CONTROL = 3),
# ModelProto.trainer_spec = 2 (TrainerSpec: bos_piece 46, pad_piece 48).
PIECES, TRAINER_SPEC = 1, 2
PIECE, SCORE, TYPE, CONTROL = 1, 2, 3, 3
BOS_PIECE, PAD_PIECE_FIELD = 46, 48


def pad_piece_suffix() -> bytes:
    """The bytes `add_pad_piece` appends: the piece {<pad>, score 0, CONTROL}, and the trainer spec's bos and pad
    pieces set to it (a repeated field appends, a nested message merges: interop/protobuf_wire.py)."""
    piece = bytes_field(PIECE, PAD_PIECE.encode()) + float_field(SCORE, 0.0) + varint_field(TYPE, CONTROL)
    spec = bytes_field(BOS_PIECE, PAD_PIECE.encode()) + bytes_field(PAD_PIECE_FIELD, PAD_PIECE.encode())
    return bytes_field(PIECES, piece) + bytes_field(TRAINER_SPEC, spec)


def add_pad_piece(proto: bytes) -> bytes:
    """Marian's SentencePiece model with the CONTROL piece <pad> appended, named as its pad and bos piece."""
    return proto + pad_piece_suffix()


def remove_pad_piece(proto: bytes) -> bytes:
    """The inverse of `add_pad_piece`: Marian's original model, or a one-line error for a vocabulary that
    `import marian-bin` did not write."""
    suffix = pad_piece_suffix()
    if not proto.endswith(suffix):
        raise UserError("cannot export to marian-bin: the run's vocabulary is not one `import` wrote")
    return proto[: -len(suffix)]


def marian_spm_tokenizer(vocab_path: Path, vocab_size: int) -> SentencePieceTokenizer:
    """The run's tokenizer: Marian's SentencePiece model + <pad>, </s> after every source (as Marian appends
    it), placeholders masked by numeral stand-ins; or a one-line error for a file that is not such a model
    of `vocab_size` pieces with </s> at 0."""
    proto = read_bytes(vocab_path, MAX_TOKENIZER_FILE_BYTES, missing="no such SentencePiece vocabulary")
    try:
        # </s> after every source; the vocabulary has no reserved placeholder tokens: numerals stand in, and
        # decoding copies each placeholder exactly (tokenize/standins.py), which the engine itself does not always
        # do (BENCHMARKS.md, "Fine-tuning: adapting a model to software text", rows (a) and (a')).
        tokenizer = SentencePieceTokenizer(add_pad_piece(proto), facts={"source_eos": True}, mask_by_stand_ins=True)
    except (RuntimeError, OSError) as error:
        raise UserError(f"{vocab_path}: not a SentencePiece model ({str(error).splitlines()[0]})") from None
    if len(tokenizer) != vocab_size + 1 or tokenizer.pad_id != vocab_size or tokenizer.eos_id != 0:
        raise UserError(f"{vocab_path}: {len(tokenizer) - 1:,} pieces with </s> at {tokenizer.eos_id}; the model "
                        f"has {vocab_size:,} with </s> at 0 (another model's vocabulary?)")
    return tokenizer
