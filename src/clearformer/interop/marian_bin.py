"""Marian's binary model format (`model.npz`'s sibling `.bin`), read and written.

The model file, version 1 (what Firefox Translations ships, e.g. `model.enpt.intgemm.alphas.bin`):

    u64 version (1), u64 n (tensors)
    n x (u64 name length, u64 type, u64 shape length, u64 data length)
    the names (NUL-terminated, padded to their length), the shapes (int32 each)
    u64 p, then p padding bytes: the data starts at a multiple of 256
    the data, tensor after tensor (each data length already includes its own padding)

Types: 0x0404 float32; 0x4101 int8 "intgemm 8-bit alpha": the int8 values, then one float32 scale
(scale = 127 / max|W|; W = int8 / scale); 0x0101 a byte string (the entry `special:model.yml`, the
model's own YAML config). The int8 `*_W*` matrices are stored transposed, out x in, the layout of a
torch `Linear.weight`; `Wemb` is stored as it is, vocab x d_model. The `*_QuantMultA` entries are the
int8 engine's fixed activation scales (`Wemb_QuantMultA` holds garbage); clearformer keeps them only to
write a file back.

The lexical shortlist beside it (`lex.*.bin`) is read by tokenize/shortlist.py.

Every reader check is a one-line `UserError` naming the file: a damaged or foreign file is refused,
never half-read. Sizes are checked against the file's length before anything is allocated.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write_bytes
from clearformer.store.safeio import read_bytes

MAX_MODEL_FILE_BYTES = 2 << 30  # a Marian model clearformer can hold in memory; Firefox's tiny one is 17 MB
MAX_TENSORS = 10_000
FLOAT32 = 0x0404
INT8_ALPHA = 0x4101  # intgemm 8-bit with the scale ("alpha") after the values
BYTES = 0x0101
TYPE_NAMES = {FLOAT32: "float32", INT8_ALPHA: "intgemm8 alpha", BYTES: "bytes"}
ALIGN = 256
CONFIG_ENTRY = "special:model.yml"
# The smallest int8 scale whose values (at most 127 / scale) stay finite float32: below it dequantizing overflows.
MIN_INT8_SCALE = 127.0 / float(np.finfo(np.float32).max)


@dataclass
class MarianTensor:
    """One entry: its name, type, shape and values (float32 dequantized; for int8 also the int8 values and
    the scale they were stored with)."""

    name: str
    type: int
    shape: tuple[int, ...]
    values: np.ndarray | bytes
    quantized: np.ndarray | None = None
    scale: float | None = None


@dataclass
class MarianModel:
    """A Marian `.bin`: the tensors by name (config entry excepted) and the model's YAML config text."""

    tensors: dict[str, MarianTensor]
    config_text: str
    path: str = ""
    config: dict = field(default_factory=dict)

    def float(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """Tensor `name` as float32 (int8 dequantized), or a UserError naming the file if missing or misshaped."""
        tensor = self.tensors.get(name)
        if tensor is None or not isinstance(tensor.values, np.ndarray):
            raise UserError(f"{self.path}: tensor {name!r} is missing (not a model of this architecture?)")
        if shape is not None and tensor.values.size != math.prod(shape):
            raise UserError(f"{self.path}: tensor {name!r} has shape {tensor.shape}, expected {shape}")
        return tensor.values.reshape(shape) if shape is not None else tensor.values


def _take(data: bytes, offset: int, size: int, where: str) -> int:
    if offset + size > len(data):
        raise UserError(f"{where}: truncated (needs {offset + size:,} bytes, has {len(data):,}): not a complete "
                        f"Marian model")
    return offset + size


def _headers(data: bytes, where: str) -> tuple[list[tuple[str, int, tuple[int, ...], int]], int]:
    """[(name, type, shape, data length)] and the offset of the first tensor's data."""
    _take(data, 0, 16, where)
    version, count = struct.unpack_from("<QQ", data, 0)
    if version != 1:
        raise UserError(f"{where}: not a Marian binary model of version 1 (first word {version})")
    if count == 0 or count > MAX_TENSORS:
        raise UserError(f"{where}: {count} tensors: not a Marian model clearformer reads (at most {MAX_TENSORS})")
    offset = _take(data, 16, 32 * count, where)
    heads = [struct.unpack_from("<4Q", data, 16 + 32 * i) for i in range(count)]
    names = []
    for name_len, *_ in heads:
        start, offset = offset, _take(data, offset, name_len, where)
        try:
            names.append(data[start:offset].rstrip(b"\0").decode("utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"{where}: a tensor name is not UTF-8: damaged file") from None
    shapes = []
    for _, _, shape_len, _ in heads:
        start, offset = offset, _take(data, offset, 4 * shape_len, where)
        shapes.append(tuple(struct.unpack_from(f"<{shape_len}i", data, start)))
    _take(data, offset, 8, where)
    (padding,) = struct.unpack_from("<Q", data, offset)
    offset = _take(data, offset + 8, padding, where)
    if offset % ALIGN:
        raise UserError(f"{where}: data does not start at a multiple of {ALIGN} bytes: damaged file")
    return [(n, h[1], s, h[3]) for n, h, s in zip(names, heads, shapes, strict=True)], offset


def _tensor(name: str, kind: int, shape: tuple[int, ...], blob: bytes, where: str) -> MarianTensor:
    if any(d < 0 for d in shape):
        raise UserError(f"{where}: tensor {name!r} has a negative dimension {shape}")
    count = math.prod(shape) if shape else 0  # Python's integers: numpy's product wraps around at 2**63
    if kind == FLOAT32:
        if len(blob) < 4 * count:
            raise UserError(f"{where}: tensor {name!r} holds {len(blob)} bytes, {4 * count} needed")
        return MarianTensor(name, kind, shape, np.frombuffer(blob, "<f4", count).copy())
    if kind == INT8_ALPHA:
        if len(blob) < count + 4:
            raise UserError(f"{where}: tensor {name!r} holds {len(blob)} bytes, {count + 4} needed")
        values = np.frombuffer(blob, np.int8, count).copy()
        (scale,) = struct.unpack_from("<f", blob, count)
        if name.endswith("_QuantMultA"):  # the engine's activation scale; Wemb's holds garbage
            return MarianTensor(name, kind, shape, values, values, scale)
        if not math.isfinite(scale) or scale < MIN_INT8_SCALE:  # checked before dividing: no overflow, no warning
            raise UserError(f"{where}: tensor {name!r} has the int8 scale {scale:g} (a finite number of at least "
                            f"{MIN_INT8_SCALE:.3g} expected): damaged file")
        return MarianTensor(name, kind, shape, values.astype(np.float32) / np.float32(scale), values, scale)
    if kind == BYTES:
        return MarianTensor(name, kind, shape, bytes(blob[:count]))
    raise UserError(f"{where}: tensor {name!r} has type {kind:#06x}; clearformer reads float32 ({FLOAT32:#06x}), "
                    f"int8 alpha ({INT8_ALPHA:#06x}) and bytes ({BYTES:#06x})")


def read_marian_bin(path: str | Path) -> MarianModel:
    """A Marian `.bin` model file (see the module docstring), every check a one-line UserError."""
    where = str(path)
    data = read_bytes(path, MAX_MODEL_FILE_BYTES, missing="no such Marian model file")
    heads, offset = _headers(data, where)
    tensors = {}
    for name, kind, shape, size in heads:
        start, offset = offset, _take(data, offset, size, where)
        tensors[name] = _tensor(name, kind, shape, data[start:offset], where)
    config = tensors.pop(CONFIG_ENTRY, None)
    if config is None or not isinstance(config.values, bytes):
        raise UserError(f"{where}: no {CONFIG_ENTRY} entry: not a Marian model with its config")
    try:
        text = config.values.rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: {CONFIG_ENTRY} is not UTF-8: damaged file") from None
    return MarianModel(tensors, text, where, parse_marian_yaml(text, where))


def parse_marian_yaml(text: str, where: str, entry: str = CONFIG_ENTRY) -> dict:
    """Marian's flat YAML (`key: value`, `key: [a, b]`, and `key:` followed by `  - item` lines) as a dict of
    strings and lists of strings (Marian writes nothing deeper); `entry` names the text in an error (the model's
    own `special:model.yml`, or a decoder config)."""
    config: dict = {}
    last = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") and last is not None:
            if not isinstance(config[last], list):
                config[last] = []
            config[last].append(line.strip()[2:].strip())
            continue
        key, colon, value = line.partition(":")
        if not colon or line[0].isspace():
            raise UserError(f"{where}: {entry} line {number}: not a Marian config line ({line[:40]!r})")
        last = key.strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):  # a flow list: [32000, 32000], []
            config[last] = [item.strip().strip('"') for item in value[1:-1].split(",") if item.strip()]
        else:
            config[last] = value.strip('"')
    return config


def write_marian_bin(path: str | Path, tensors: list[MarianTensor], config_text: str) -> None:
    """Write `tensors` (float32 or int8 alpha, in the given order) and the YAML config as a version-1 `.bin`."""
    items = [*tensors, MarianTensor(CONFIG_ENTRY, BYTES, (len(config_text.encode()) + 1,),
                                    config_text.encode() + b"\0")]
    blobs = [_blob(t) for t in items]
    names = [t.name.encode() + b"\0" for t in items]
    header = struct.pack("<QQ", 1, len(items))
    header += b"".join(struct.pack("<4Q", len(n), t.type, len(t.shape), len(b))
                       for n, t, b in zip(names, items, blobs, strict=True))
    header += b"".join(names) + b"".join(struct.pack(f"<{len(t.shape)}i", *t.shape) for t in items)
    padding = -(len(header) + 8) % ALIGN
    header += struct.pack("<Q", padding) + b"\0" * padding
    atomic_write_bytes(Path(path), header + b"".join(blobs))


def _blob(tensor: MarianTensor) -> bytes:
    """A tensor's data bytes, padded to a multiple of 256 (as Marian writes them)."""
    if tensor.type == FLOAT32:
        raw = np.ascontiguousarray(tensor.values, "<f4").tobytes()
    elif tensor.type == INT8_ALPHA:
        raw = np.ascontiguousarray(tensor.quantized, np.int8).tobytes() + struct.pack("<f", tensor.scale)
    else:
        raw = bytes(tensor.values)
    return raw + b"\0" * (-len(raw) % ALIGN)


def quantize_int8(name: str, shape: tuple[int, ...], values: np.ndarray) -> MarianTensor:
    """intgemm's 8-bit alpha quantization of a float matrix: scale = 127 / max|W|, q = round(W * scale)."""
    values = np.asarray(values, np.float32)
    peak = float(np.abs(values).max())
    scale = np.float32(127.0 / peak) if peak > 0 else np.float32(1.0)
    quantized = np.clip(np.rint(values * scale), -127, 127).astype(np.int8)
    return MarianTensor(name, INT8_ALPHA, shape, quantized.astype(np.float32) / scale, quantized, float(scale))
