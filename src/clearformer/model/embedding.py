"""Token embeddings and position information: the first two steps of the data path.

    token ids (batch, seq) -> TokenEmbedding -> (batch, seq, d_model)
                            + positions      -> X (batch, seq, d_model)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from clearformer.record import trace
from clearformer.record.points import EmitsPoints


class TokenEmbedding(EmitsPoints, nn.Module):
    """A lookup table of one d_model vector per token id (row i = vector of token i).

    Looking a row up equals multiplying a one-hot vector by the table. With `scale=True` the
    vectors are multiplied by sqrt(d_model), as in the paper (section 3.4), so that they are not
    drowned by the positional encoding when the table is initialised with std d_model^-0.5.
    """

    def points(self) -> tuple[str, ...]:
        """The row looked up, and its scaled copy where the embedding is scaled by sqrt(d_model)."""
        return ("lookup", "scaled") if self.scale else ("lookup",)

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True, pad_id: int | None = 0) -> None:
        super().__init__()
        self.d_model = d_model
        self.scale = scale
        self.pad_id = pad_id
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # std d_model^-0.5: with the sqrt(d_model) scale the model sees unit variance, and a table
        # tied to the output projection starts with logits near 0 (first loss near ln(vocab)).
        nn.init.normal_(self.weight, std=self.d_model**-0.5)
        if self.pad_id is not None and self.pad_id < self.weight.shape[0]:
            with torch.no_grad():
                self.weight[self.pad_id].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, seq) int64 -> (batch, seq, d_model)."""
        vectors = nn.functional.embedding(ids, self.weight)
        vectors = trace.emit(self, "lookup", vectors)
        if self.scale:
            vectors = vectors * math.sqrt(self.d_model)
            vectors = trace.emit(self, "scaled", vectors)
        return vectors


def sinusoidal_table(length: int, d_model: int, base: float = 10000.0,
                     device: torch.device | None = None, dtype: torch.dtype = torch.float32,
                     layout: str = "interleaved", timescales: str = "paper") -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)).

    Returns (length, d_model), even columns sine and odd columns cosine (interleaved, as in the
    paper). Computed in float64 so that long tables stay exact to float32 precision; returned in
    `dtype` (float64 for the worked-example checker, which compares up to 8+ written decimals).
    layout="halves" puts every sine first and every cosine after (Marian's table: column i = sin,
    column d/2 + i = cos): the same numbers, permuted.
    timescales="tensor2tensor" turns pair i at pos / base^(i/(d/2 - 1)) instead of pos / base^(i/(d/2)):
    the frequencies then run from 1 down to exactly 1/base (tensor2tensor's timing signal, which Marian's
    C++ engine computes, and so Firefox's students were trained with). The paper's slowest pair stops one
    step short of 1/base.
    """
    position = torch.arange(length, dtype=torch.float64, device=device).unsqueeze(1)
    pair = torch.arange((d_model + 1) // 2, dtype=torch.float64, device=device)  # i: one per sine column
    exponent = pair / max(d_model // 2 - 1, 1) if timescales == "tensor2tensor" else 2 * pair / d_model
    angle = position / torch.pow(torch.tensor(base, dtype=torch.float64), exponent)
    table = torch.zeros(length, d_model, dtype=torch.float64, device=device)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    if layout == "halves":
        table = torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)
    return table.to(dtype)


class SinusoidalPositionalEncoding(EmitsPoints, nn.Module):
    """Fixed sine/cosine positions added to the embeddings (no parameters).

    The table is a non-persistent buffer precomputed for `max_len` positions; a longer input
    extends it on the fly, since the formula is defined for every position.
    """

    POINTS = ("PE",)  # the hook point it emits (record/points.py)

    def __init__(self, d_model: int, max_len: int = 512, base: float = 10000.0, layout: str = "interleaved",
                 timescales: str = "paper") -> None:
        super().__init__()
        self.d_model = d_model
        self.base = base
        self.layout = layout  # "interleaved" (the paper) or "halves" (Marian)
        self.timescales = timescales  # "paper", or "tensor2tensor" (Marian's C++ engine)
        self.register_buffer("table", self._table(max_len), persistent=False)

    def _table(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        # Kept in float64 and cast where it is added: a float32 model adds the very float32 numbers it always
        # did, and a model turned float64 (`.double()`: the lessons' checker) has the exact table, not float32's
        # rounding of it (which the checker's trained toy run amplified past its 1e-5 through the layers).
        return sinusoidal_table(length, self.d_model, self.base, device=device, dtype=torch.float64,
                                layout=self.layout, timescales=self.timescales)

    def encoding(self, length: int, offset: int = 0) -> torch.Tensor:
        """The (length, d_model) rows for positions offset .. offset+length-1."""
        needed = offset + length
        if needed > self.table.shape[0]:
            self.table = self._table(max(needed, 2 * self.table.shape[0]), self.table.device)
        return self.table[offset:needed]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (batch, seq, d_model) -> x + PE[offset : offset+seq]."""
        pe = self.encoding(x.shape[1], offset).to(x.dtype)
        pe = trace.emit(self, "PE", pe)  # what-if: no positions
        return x + pe


class LearnedPositionalEmbedding(EmitsPoints, nn.Module):
    """One trained vector per position 0 .. max_len-1 (BERT/GPT style); cannot go past max_len."""

    POINTS = ("PE",)

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, std=d_model**-0.5)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (batch, seq, d_model) -> x + P[offset : offset+seq]."""
        end = offset + x.shape[1]
        if end > self.max_len:
            raise ValueError(f"sequence of {end} positions is longer than the learned table ({self.max_len})")
        pe = self.weight[offset:end]
        pe = trace.emit(self, "PE", pe)  # what-if: no positions
        return x + pe


class NoPositions(nn.Module):
    """No absolute positions (used with RoPE, which rotates queries and keys instead)."""

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return x


def build_positions(kind: str, d_model: int, max_len: int, layout: str = "interleaved",
                    timescales: str = "paper") -> nn.Module:
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len, layout=layout, timescales=timescales)
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, max_len)
    return NoPositions()  # "rope" and "none": attention handles (or skips) positions


class InputEmbedding(EmitsPoints, nn.Module):
    """Token embedding + positions + dropout: X = E[ids] (* sqrt(d)) + PE."""

    def points(self) -> tuple[str, ...]:
        """The ids, the sum, and position 0's zero vector where it has one (`start`: Marian's decoder)."""
        return ("token_ids", "X", "start") if self.zero_start else ("token_ids", "X")

    @classmethod
    def from_config(cls, config, vocab_size: int, zero_start: bool = False) -> InputEmbedding:
        """One side's embedding of `vocab_size` tokens, sized and switched by a ModelConfig (`zero_start`:
        the decoder side of a config with zero_start)."""
        tokens = TokenEmbedding(vocab_size, config.d_model, config.scale_embedding, config.pad_id)
        positions = build_positions(config.positional, config.d_model, config.max_len, config.position_layout,
                                    config.position_timescales)
        return cls(tokens, positions, config.dropout, zero_start)

    def __init__(self, tokens: TokenEmbedding, positions: nn.Module, dropout: float = 0.0,
                 zero_start: bool = False) -> None:
        super().__init__()
        self.tokens = tokens
        self.positions = positions
        self.dropout = nn.Dropout(dropout)
        self.zero_start = zero_start  # position 0 reads a zero vector, not its token's row (Marian's decoder)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """ids (batch, seq) -> X (batch, seq, d_model); `offset` = position of ids[:, 0]."""
        ids = trace.emit(self, "token_ids", ids)
        vectors = self.tokens(ids)
        if self.zero_start and offset == 0:
            vectors = torch.cat([torch.zeros_like(vectors[:, :1]), vectors[:, 1:]], dim=1)
            vectors = trace.emit(self, "start", vectors)
        x = self.positions(vectors, offset)
        x = trace.emit(self, "X", x)
        return self.dropout(x) if self.training else x
