"""The sublayers and layers: feed-forward, Add & Norm, encoder layer, decoder layer, and their stacks.

Shapes outside attention are always (batch, seq, d_model).
"""

from __future__ import annotations

import torch
from torch import nn

from clearformer import trace
from clearformer.model.attention import MultiHeadAttention

# The hidden layer's non-linearity: the paper's ReLU; GELU (BERT); its tanh approximation (GPT-2's
# "gelu_new"); SiLU, x * sigmoid(x) (Marian's "swish", used by the opus-mt translators).
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU}


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to every position separately (paper eq. 2)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.linear_1 = nn.Linear(d_model, d_ff)
        self.linear_2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model) through a (batch, seq, d_ff) hidden layer."""
        hidden = self.activation(self.linear_1(x))
        trace.emit(self, "hidden", hidden)
        output = self.linear_2(self.dropout(hidden))
        trace.emit(self, "output", output)
        return output


class AddNorm(nn.Module):
    """A residual connection around a sublayer, with layer normalisation.

    post-norm (the paper):  LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm  (option):     x + Dropout(Sublayer(LayerNorm(x)))   (trains deep stacks without warmup)
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        """x (batch, seq, d_model), sublayer: a function of one (batch, seq, d_model) tensor."""
        if self.norm_first:
            normed = self.norm(x)
            trace.emit(self, "norm", normed)
            out = trace.intervene(self, "skip", x) + self.dropout(sublayer(normed))  # what-if: no residual
            trace.emit(self, "residual", out)
            return out
        residual = trace.intervene(self, "skip", x) + self.dropout(sublayer(x))  # what-if: no residual
        trace.emit(self, "residual", residual)
        out = self.norm(residual)
        trace.emit(self, "norm", out)
        return out


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in Add & Norm."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 bias: bool = True, activation: str = "relu", eps: float = 1e-5,
                 n_kv_heads: int | None = None, rotary: nn.Module | None = None, scaled: bool = True) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias, dropout, rotary, scaled)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first, eps)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.add_norm_2 = AddNorm(d_model, dropout, norm_first, eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (batch, src_len, d_model), mask (batch, 1, 1, src_len) -> (batch, src_len, d_model)."""
        x = self.add_norm_1(x, lambda h: self.self_attention(h, mask=mask))
        return self.add_norm_2(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward; each with Add & Norm.

    With `cross_attention=False` this is a GPT-style block (the decoder-only language model).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 bias: bool = True, activation: str = "relu", eps: float = 1e-5,
                 n_kv_heads: int | None = None, rotary: nn.Module | None = None,
                 cross_attention: bool = True, self_attention: nn.Module | None = None,
                 scaled: bool = True) -> None:
        super().__init__()
        self.self_attention = self_attention or MultiHeadAttention(d_model, n_heads, n_kv_heads, bias,
                                                                   dropout, rotary, scaled)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first, eps)
        if cross_attention:
            self.cross_attention = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias, dropout, scaled=scaled)
            self.add_norm_2 = AddNorm(d_model, dropout, norm_first, eps)
        else:
            self.cross_attention = None
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.add_norm_3 = AddNorm(d_model, dropout, norm_first, eps)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: dict | None = None,
                position: int = 0) -> torch.Tensor:
        """x (batch, tgt_len, d_model), memory (batch, src_len, d_model),
        self_mask (tgt_len, tgt_len) or (batch, 1, tgt_len, tgt_len), memory_mask (batch, 1, 1, src_len)
        -> (batch, tgt_len, d_model). `cache` (this layer's dict while decoding) keeps the
        self-attention keys and values of earlier positions under cache["self"].
        """
        self_cache = None if cache is None else cache.setdefault("self", {})
        x = self.add_norm_1(x, lambda h: self.self_attention(h, mask=self_mask, cache=self_cache,
                                                             position=position))
        if self.cross_attention is not None:
            x = self.add_norm_2(x, lambda h: self.cross_attention(h, memory, mask=memory_mask))
        return self.add_norm_3(x, self.feed_forward)


class Encoder(nn.Module):
    """N encoder layers; with pre-norm a final LayerNorm (post-norm layers already end normalised)."""

    def __init__(self, layers: list[EncoderLayer], d_model: int, norm_first: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d_model, eps=eps) if norm_first else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (batch, src_len, d_model), mask (batch, 1, 1, src_len) -> memory (batch, src_len, d_model)."""
        for layer in self.layers:
            x = layer(x, mask)
        if self.final_norm is not None:
            x = self.final_norm(x)
        trace.emit(self, "output", x)
        return x


class Decoder(nn.Module):
    """N decoder layers; with pre-norm a final LayerNorm."""

    def __init__(self, layers: list[DecoderLayer], d_model: int, norm_first: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d_model, eps=eps) if norm_first else None

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: list[dict] | None = None,
                position: int = 0) -> torch.Tensor:
        """x (batch, tgt_len, d_model) -> (batch, tgt_len, d_model); `cache` holds one dict per layer."""
        for index, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, memory_mask, None if cache is None else cache[index], position)
        if self.final_norm is not None:
            x = self.final_norm(x)
        trace.emit(self, "output", x)
        return x
