"""The decoding cache: what a one-token step reads that earlier steps, or the source, computed.

A small typed cache in the form of gpt-fast's `KVCache`: each attention layer's tensors behind one
`update`, and one generic `reorder` of rows. The model fills it; the code that decodes (generate/)
decides which rows go on.

    KVCache        keys and values of one attention layer, rows first, time second-to-last:
                     self-attention (MHA/GQA/MQA): k, v (rows, n_kv_heads, t, d_head), appended to
                       at every step;
                     cross-attention: k, v of the encoder output (rows, n_kv_heads, src_len, d_head),
                       computed once per source at the first step and only read after it.
    LatentCache    MLA's self-attention (model/latent.py): latent c_KV (rows, t, d_c) and the shared
                   rotary key k_rope (rows, t, d_h^R), appended to at every step.
    RecurrentCache the SSRU in place of self-attention (model/ssru.py): its cell (rows, d_model), replaced
                   at every step: nothing grows with the output.
    LayerCache     one decoder layer's: self_attention, and cross_attention (None without an encoder).
    DecoderCache   every decoder layer's, with `reorder(index)` over all of them.

`reorder(index)` keeps rows `index` in that order (a row may be kept twice, or dropped). What a
cross-attention layer keeps depends only on a row's source, so `reorder(index, source=False)` leaves
it where it is: right for a reorder that gives every row a row of the same source.

The tensors grow by `torch.cat`. `StaticKVCache` is the static-shape variant with the same
interface (buffers preallocated to a fixed number of rows and positions, written in place at the
position a device tensor names, as gpt-fast does for CUDA graphs): generate/graphs.py builds it.

Below: DeepSeek-V2's per-token cache sizes (Table 1 of arXiv 2405.04434) and the bytes the real
tensors hold, so a test can prove the two agree:
  MHA 2 n_h d_h,  GQA 2 n_g d_h,  MQA 2 d_h,  MLA d_c + d_h^R   elements per token and layer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from clearformer.config import ModelConfig, attention_variant


class TimeCache:
    """Tensors (rows, ..., t, width) that grow along time (dim -2) by `update`; rows reordered by `reorder`."""

    def tensors(self) -> list[torch.Tensor | None]:
        return [getattr(self, field.name) for field in dataclasses.fields(self)]

    def update(self, *new: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Append this step's tensors (one per field, in field order) along time; return everything so far."""
        for field, tensor in zip(dataclasses.fields(self), new, strict=True):
            old = getattr(self, field.name)
            setattr(self, field.name, tensor if old is None else torch.cat([old, tensor], dim=-2))
        return tuple(self.tensors())

    @property
    def filled(self) -> bool:
        """Whether anything was stored yet."""
        return self.tensors()[0] is not None

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (new_rows,) in that order."""
        for field in dataclasses.fields(self):
            tensor = getattr(self, field.name)
            if tensor is not None:
                setattr(self, field.name, tensor.index_select(0, index))

    def nbytes(self) -> int:
        """Bytes the stored tensors hold."""
        return sum(t.numel() * t.element_size() for t in self.tensors() if t is not None)


@dataclass
class KVCache(TimeCache):
    """Keys and values of one attention layer: k, v (rows, n_kv_heads, t, d_head)."""

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None


class StaticKVCache:
    """Keys and values of one attention layer in preallocated buffers k, v (capacity_rows, n_kv_heads,
    capacity_time, d_head), allocated at the first `update`, then only written in place.

    `update` writes this step's (rows, n_kv_heads, t, d_head) at the positions `cursor` (a (1,) long
    tensor on the device: the first position; the caller moves it, so a CUDA graph that replays the
    write reads the position from memory, not from Python) and returns the whole buffers: positions
    not written yet hold zeros and rows past the live ones hold stale copies, both for the caller's
    attention mask to hide (generate/graphs.py). `valid` (positions written so far, kept by the
    caller) bounds what `reorder` copies. Only reallocations (`reorder` to more rows than the
    buffers hold, `grow_time`) move the buffers; `generation` counts them, so a captured graph knows
    when it is stale.
    """

    def __init__(self, rows: int, time: int, cursor: torch.Tensor) -> None:
        self.capacity_rows, self.capacity_time = rows, time
        self.cursor = cursor
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.valid = 0
        self.generation = 0

    @property
    def filled(self) -> bool:
        """Whether anything was stored yet."""
        return self.k is not None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v (rows, n_kv_heads, t, d_head) at positions cursor .. cursor + t - 1, rows 0 .. rows - 1;
        return the whole buffers (capacity_rows, n_kv_heads, capacity_time, d_head)."""
        if self.k is None:
            shape = (self.capacity_rows, k.shape[1], self.capacity_time, k.shape[3])
            self.k, self.v = k.new_zeros(shape), v.new_zeros(shape)
        t = k.shape[2]
        positions = self.cursor if t == 1 else self.cursor + torch.arange(t, device=k.device)
        rows = k.shape[0]
        if rows == self.capacity_rows:
            self.k.index_copy_(2, positions, k)
            self.v.index_copy_(2, positions, v)
        else:
            self.k[:rows].index_copy_(2, positions, k)
            self.v[:rows].index_copy_(2, positions, v)
        return self.k, self.v

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (new_rows,) in that order, in place (rows new_rows.. keep stale values);
        more rows than the buffers hold reallocate them (generation + 1)."""
        if self.k is None:
            return
        if index.shape[0] > self.capacity_rows:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)
            self.capacity_rows = index.shape[0]
            self.generation += 1
            return
        time = max(self.valid, 1)
        for buffer in (self.k, self.v):
            buffer[: index.shape[0], :, :time] = buffer[:, :, :time].index_select(0, index)

    def grow_time(self, time: int) -> None:
        """Room for `time` positions (reallocates, keeping what was written; generation + 1)."""
        if time <= self.capacity_time:
            return
        if self.k is not None:
            grown = [b.new_zeros(b.shape[:2] + (time,) + b.shape[3:]) for b in (self.k, self.v)]
            for new, old in zip(grown, (self.k, self.v), strict=True):
                new[:, :, : old.shape[2]] = old
            self.k, self.v = grown
        self.capacity_time = time
        self.generation += 1

    def nbytes(self) -> int:
        """Bytes the buffers hold (preallocated: all of them, written or not)."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v) if t is not None)


@dataclass
class LatentCache(TimeCache):
    """MLA's self-attention: the latent c_KV (rows, t, d_c) and the rotary key k_rope (rows, t, d_h^R)."""

    latent: torch.Tensor | None = None
    k_rope: torch.Tensor | None = None


@dataclass
class RecurrentCache:
    """The SSRU's state (model/ssru.py): the last cell (rows, d_model), replaced at every step, not grown."""

    cell: torch.Tensor | None = None

    @property
    def filled(self) -> bool:
        return self.cell is not None

    def store(self, cell: torch.Tensor) -> None:
        self.cell = cell

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (new_rows,) in that order."""
        if self.cell is not None:
            self.cell = self.cell.index_select(0, index)

    def nbytes(self) -> int:
        return 0 if self.cell is None else self.cell.numel() * self.cell.element_size()


@dataclass
class LayerCache:
    """One decoder layer's caches: its self-attention's (or the SSRU's cell), and its cross-attention's (None
    without an encoder)."""

    self_attention: TimeCache | StaticKVCache | RecurrentCache
    cross_attention: KVCache | StaticKVCache | None = None


class DecoderCache:
    """Every decoder layer's `LayerCache`; `reorder` keeps rows of all of them (see the module docstring)."""

    def __init__(self, layers: list[LayerCache]) -> None:
        self.layers = layers

    def __getitem__(self, index: int) -> LayerCache:
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def reorder(self, index: torch.Tensor, source: bool = True) -> None:
        """Keep rows `index` (new_rows,) in that order; `source=False` leaves the cross-attention keys and
        values in place (they depend only on a row's source: for a reorder within rows of one source)."""
        for layer in self.layers:
            layer.self_attention.reorder(index)
            if source and layer.cross_attention is not None:
                layer.cross_attention.reorder(index)


def cache_elements_per_token(config: ModelConfig) -> int:
    """Elements one layer's self-attention cache holds for one token (the SSRU's cell does not grow: 0)."""
    if config.autoregressive_layer == "ssru":
        return 0
    if config.attention == "mla":
        return config.mla.kv_lora_rank + config.mla.qk_rope_head_dim
    return 2 * config.kv_heads * config.head_dim


def kv_cache_bytes_per_token(config: ModelConfig, dtype_bytes: int = 4) -> dict:
    """The decoder self-attention cache per generated token, by formula.

    Returns {"variant", "dtype_bytes", "elements_per_layer", "bytes_per_layer", "layers", "bytes_total",
    "mha_bytes_total" (the same model with plain MHA), "fraction_of_mha"}; for an encoder-decoder
    model also "cross_bytes_per_source_token" (cross-attention keys/values, computed once per
    source token).
    """
    elements = cache_elements_per_token(config)
    layers = config.n_decoder_layers
    mha_total = 2 * config.n_heads * config.head_dim * dtype_bytes * layers
    info = {
        "variant": attention_variant(config),
        "dtype_bytes": dtype_bytes,
        "elements_per_layer": elements,
        "bytes_per_layer": elements * dtype_bytes,
        "layers": layers,
        "bytes_total": elements * dtype_bytes * layers,
        "mha_bytes_total": mha_total,
        "fraction_of_mha": elements * dtype_bytes * layers / mha_total,
    }
    if config.n_encoder_layers > 0:
        info["cross_bytes_per_source_token"] = 2 * config.kv_heads * config.head_dim * dtype_bytes * layers
    return info


def describe_kv_cache(info: dict) -> str:
    """One line for `clearformer info`: total bytes per token, per layer, and the share of MHA's."""
    return (f"{info['bytes_total']:,} bytes per token ({info['variant'].upper()}: "
            f"{info['elements_per_layer']} numbers x {info['dtype_bytes']} bytes x {info['layers']} layers; "
            f"{100 * info['fraction_of_mha']:.1f}% of MHA's)")


def self_cache_bytes(cache: DecoderCache) -> list[int]:
    """Bytes held by each layer's self-attention cache."""
    return [layer.self_attention.nbytes() for layer in cache]


def measured_bytes_per_token(cache: DecoderCache, batch: int, tokens: int) -> list[float]:
    """Per-layer bytes per cached token, read from the real tensors after decoding `tokens` tokens."""
    return [size / (batch * tokens) for size in self_cache_bytes(cache)]
