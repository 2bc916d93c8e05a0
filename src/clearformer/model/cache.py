"""What the decoding cache of each attention variant holds, in bytes per token.

The cache itself lives in the attention modules (one dict per layer, see `new_cache()`):
  MHA / GQA / MQA: cache["self"]["k"], ["v"], each (batch, n_kv_heads, t, d_head)
  MLA:             cache["self"]["latent"] (batch, t, d_c), cache["self"]["k_rope"] (batch, t, d_h^R)
(`clearformer.generate.engine` keeps the same tensors in buffers that grow in place; the bytes
counted here are those of the tokens cached, not a buffer's spare room.)
This module gives DeepSeek-V2's per-token formulas (Table 1 of arXiv 2405.04434) and measures
the real tensors, so a test can prove the two agree:
  MHA 2 n_h d_h,  GQA 2 n_g d_h,  MQA 2 d_h,  MLA d_c + d_h^R   elements per token and layer.
"""

from __future__ import annotations

import torch

from clearformer.config import ModelConfig, attention_variant


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
