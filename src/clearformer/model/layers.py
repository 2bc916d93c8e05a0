"""The sublayers and layers: feed-forward, Add & Norm, encoder layer, decoder layer, and their stacks.

Shapes outside attention are always (batch, seq, d_model).
"""

from __future__ import annotations

import torch
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import CrossAttention, MultiHeadAttention
from clearformer.model.cache import DecoderCache, LayerCache
from clearformer.model.ssru import SSRU
from clearformer.model.variants import build_self_attention
from clearformer.record import trace
from clearformer.record.points import EmitsPoints

# The hidden layer's non-linearity: the paper's ReLU; GELU (BERT); its tanh approximation (GPT-2's
# "gelu_new"); SiLU, x * sigmoid(x) (Marian's "swish", used by the opus-mt translators).
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU}


class FeedForward(EmitsPoints, nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to every position separately (paper eq. 2)."""

    POINTS = ("hidden", "output")  # the hook points it emits (record/points.py)

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.linear_1 = nn.Linear(d_model, d_ff)
        self.linear_2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model) through a (batch, seq, d_ff) hidden layer."""
        hidden = self.activation(self.linear_1(x))
        hidden = trace.emit(self, "hidden", hidden)
        output = self.linear_2(self.dropout(hidden))
        output = trace.emit(self, "output", output)
        return output


class AddNorm(EmitsPoints, nn.Module):
    """A residual connection around a sublayer, with layer normalisation.

    post-norm (the paper):  LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm  (option):     x + Dropout(Sublayer(LayerNorm(x)))   (trains deep stacks without warmup)
    """

    POINTS = ("norm", "skip", "residual")  # either order: the same three points

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        """x (batch, seq, d_model), sublayer: a function of one (batch, seq, d_model) tensor."""
        if self.norm_first:
            normed = self.norm(x)
            normed = trace.emit(self, "norm", normed)
            skip = trace.emit(self, "skip", x)  # what-if: no residual
            out = skip + self.dropout(sublayer(normed))
            out = trace.emit(self, "residual", out)
            return out
        skip = trace.emit(self, "skip", x)  # what-if: no residual
        residual = skip + self.dropout(sublayer(x))
        residual = trace.emit(self, "residual", residual)
        out = self.norm(residual)
        out = trace.emit(self, "norm", out)
        return out


class EncoderLayer(EmitsPoints, nn.Module):
    """Self-attention then feed-forward, each wrapped in Add & Norm."""

    POINTS = ("output",)

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d_model, d_ff, dropout = config.d_model, config.d_ff, config.dropout
        norm_first, eps = config.norm_first, config.layer_norm_eps
        self.self_attention = MultiHeadAttention(config)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first, eps)
        self.feed_forward = FeedForward(d_model, d_ff, config.ffn_dropout, config.activation)
        self.add_norm_2 = AddNorm(d_model, dropout, norm_first, eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (batch, src_len, d_model), mask (batch, 1, 1, src_len) -> (batch, src_len, d_model)."""
        x = self.add_norm_1(x, lambda h: self.self_attention(h, mask=mask))
        return trace.emit(self, "output", self.add_norm_2(x, self.feed_forward))


class DecoderLayer(EmitsPoints, nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward; each with Add & Norm.

    The first sublayer is the layer's autoregressive one (config.autoregressive_layer): masked self-attention
    (`self_attention`), or the SSRU's recurrence (`recurrence`, model/ssru.py); the other slot is None.
    With `cross_attention=False` this is a GPT-style block (the decoder-only language model).
    """

    POINTS = ("output",)

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        d_model, d_ff, dropout = config.d_model, config.d_ff, config.dropout
        norm_first, eps = config.norm_first, config.layer_norm_eps
        if config.autoregressive_layer == "ssru":
            self.self_attention, self.recurrence = None, SSRU(config)
        else:
            self.self_attention = build_self_attention(config)  # config.attention: MHA/GQA/MQA or MLA
            self.recurrence = None
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first, eps)
        if cross_attention:
            self.cross_attention = CrossAttention(config)
            self.add_norm_2 = AddNorm(d_model, dropout, norm_first, eps)
        else:
            self.cross_attention = None
        self.feed_forward = FeedForward(d_model, d_ff, config.ffn_dropout, config.activation)
        self.add_norm_3 = AddNorm(d_model, dropout, norm_first, eps)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: LayerCache | None = None,
                position: int = 0) -> torch.Tensor:
        """x (batch, tgt_len, d_model), memory (batch, src_len, d_model),
        self_mask (tgt_len, k_len) or (batch, 1, tgt_len, k_len), memory_mask (batch, 1, 1, src_len)
        -> (batch, tgt_len, d_model).

        `cache` (this layer's `LayerCache` while decoding) keeps the self-attention keys and values
        of earlier positions and the cross-attention keys and values of the encoder output
        (computed at the first step; memory may then be None).
        """
        self_cache = None if cache is None else cache.self_attention
        cross_cache = None if cache is None else cache.cross_attention
        x = self.add_norm_1(x, lambda h: self.autoregressive(h, mask=self_mask, cache=self_cache, position=position))
        if self.cross_attention is not None:
            x = self.add_norm_2(x, lambda h: self.cross_attention(h, memory, mask=memory_mask, cache=cross_cache))
        return trace.emit(self, "output", self.add_norm_3(x, self.feed_forward))

    @property
    def autoregressive(self) -> nn.Module:
        """The sublayer that reads the earlier outputs: the self-attention, or the SSRU's recurrence."""
        return self.recurrence if self.self_attention is None else self.self_attention

    def new_cache(self) -> LayerCache:
        """This layer's empty decoding cache: its self-attention's (or the recurrence's cell), and its
        cross-attention's."""
        cross = None if self.cross_attention is None else self.cross_attention.new_cache()
        return LayerCache(self.autoregressive.new_cache(), cross)



class Encoder(EmitsPoints, nn.Module):
    """config.n_encoder_layers encoder layers; with pre-norm a final LayerNorm (post-norm layers
    already end normalised)."""

    POINTS = ("output",)

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (batch, src_len, d_model), mask (batch, 1, 1, src_len) -> memory (batch, src_len, d_model)."""
        for layer in self.layers:
            x = layer(x, mask)
        if self.final_norm is not None:
            x = self.final_norm(x)
        x = trace.emit(self, "output", x)
        return x


class Decoder(EmitsPoints, nn.Module):
    """config.n_decoder_layers decoder layers (without cross-attention for a language model); with
    pre-norm a final LayerNorm."""

    POINTS = ("output",)

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config, cross_attention) for _ in range(config.n_decoder_layers))
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: DecoderCache | None = None,
                position: int = 0) -> torch.Tensor:
        """x (batch, tgt_len, d_model) -> (batch, tgt_len, d_model); `cache`: a `DecoderCache` (one per layer)."""
        for index, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, memory_mask, None if cache is None else cache[index], position)
        if self.final_norm is not None:
            x = self.final_norm(x)
        x = trace.emit(self, "output", x)
        return x

    def new_cache(self) -> DecoderCache:
        """An empty decoding cache (`model/cache.py`), one `LayerCache` per layer."""
        return DecoderCache([layer.new_cache() for layer in self.layers])
