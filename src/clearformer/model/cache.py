"""The decoder's cache: what a one-token decoding step reads that earlier steps or the source computed.

`DecoderCache` holds, for every decoder layer, a dict:
  cache[i]["self"]   the self-attention keys and values of every earlier position, one row per
                     hypothesis, appended to at each step:
                       MHA / GQA / MQA: "k", "v", each (rows, n_kv_heads, t, d_head)
                       MLA:             "latent" (rows, t, d_c), "k_rope" (rows, t, d_h^R)
  cache[i]["cross"]  the cross-attention keys and values of the encoder output, computed once per
                     source sentence at the first step (`MultiHeadAttention.memory_keys_values`) and
                     read by every hypothesis of that sentence:
                       "memory_k", "memory_v", each (sentences, n_kv_heads, src_len, d_head)
rows = sentences x hypotheses per sentence, sentence-major (the beams of a sentence are consecutive).
`select(rows, sentences)` follows a beam search: self entries take the hypotheses `rows`, cross
entries the sentences `sentences` (only when a sentence finished and left the batch).

The entries grow by `torch.cat`; a static-shape variant (buffers preallocated to the longest output,
written in place, for CUDA graphs) would keep the same dict layout and `select`.

Below: DeepSeek-V2's per-token cache sizes (Table 1 of arXiv 2405.04434) and the bytes the real
tensors hold, so a test can prove the two agree:
  MHA 2 n_h d_h,  GQA 2 n_g d_h,  MQA 2 d_h,  MLA d_c + d_h^R   elements per token and layer.
"""

from __future__ import annotations

import torch

from clearformer.config import ModelConfig, attention_variant


class DecoderCache:
    """One dict per decoder layer ({"self": {...}, "cross": {...}}, see the module docstring)."""

    def __init__(self, layers: int) -> None:
        self.layers = [{"self": {}, "cross": {}} for _ in range(layers)]

    def __getitem__(self, index: int) -> dict:
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        """Keep hypotheses `rows` (new_rows,) in that order and, when given, the sentences `sentences`
        (their indices among the current sentences; None = unchanged). A beam reorder moves only the
        self-attention entries; the cross-attention rows move only when a sentence leaves."""
        for layer in self.layers:
            for name, tensor in layer["self"].items():
                layer["self"][name] = tensor.index_select(0, rows)
            if sentences is not None:
                for name, tensor in layer["cross"].items():
                    layer["cross"][name] = tensor.index_select(0, sentences)


def cache_elements_per_token(config: ModelConfig) -> int:
    """Elements one layer's self-attention cache holds for one token."""
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


def self_cache_bytes(cache: list[dict]) -> list[int]:
    """Bytes held by each layer's self-attention cache (every tensor in cache[i]["self"])."""
    return [sum(t.numel() * t.element_size() for t in layer.get("self", {}).values()
                if isinstance(t, torch.Tensor)) for layer in cache]


def measured_bytes_per_token(cache: list[dict], batch: int, tokens: int) -> list[float]:
    """Per-layer bytes per cached token, read from the real tensors after decoding `tokens` tokens."""
    return [size / (batch * tokens) for size in self_cache_bytes(cache)]
