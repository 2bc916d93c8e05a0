"""The model, one module per step of the data path: embedding -> attention -> layers -> transformer;
`build_model(config)` builds whichever model a config describes."""

from clearformer.model.attention import (
    CrossAttention,
    MultiHeadAttention,
    attention,
    causal_mask,
    combine_masks,
    explicit_attention,
    fast_attention,
    masked_softmax,
    padding_mask,
)
from clearformer.model.build import build_model
from clearformer.model.cache import DecoderCache, KVCache, LatentCache, LayerCache
from clearformer.model.embedding import (
    InputEmbedding,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)
from clearformer.model.layers import AddNorm, Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward
from clearformer.model.transformer import OutputProjection, Transformer

__all__ = [
    "AddNorm", "CrossAttention", "Decoder", "DecoderCache", "DecoderLayer", "Encoder", "EncoderLayer", "FeedForward",
    "InputEmbedding",
    "KVCache", "LatentCache", "LayerCache", "LearnedPositionalEmbedding", "MultiHeadAttention", "OutputProjection",
    "SinusoidalPositionalEncoding", "TokenEmbedding", "Transformer", "attention", "build_model", "causal_mask",
    "combine_masks", "explicit_attention", "fast_attention", "masked_softmax", "padding_mask", "sinusoidal_table",
]
