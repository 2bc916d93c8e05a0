"""Rotary position embedding (RoPE, Su et al. 2021, "RoFormer").

Instead of adding a position vector to the embeddings, RoPE rotates every query and key: the
head vector is cut into pairs (x_0, x_1), (x_2, x_3), ... and pair i of the token at position m is
turned by the angle m * theta_i, with theta_i = base^(-2i/d):

    x'_2i   = x_2i cos(m theta_i) - x_2i+1 sin(m theta_i)
    x'_2i+1 = x_2i sin(m theta_i) + x_2i+1 cos(m theta_i)

A rotation keeps lengths, and the dot product of a query rotated to position m with a key rotated
to position n depends only on m - n: attention sees relative positions. Pairs are adjacent
(interleaved), as in the RoFormer paper and as clearformer's sinusoidal table interleaves sin/cos.
"""

from __future__ import annotations

import torch
from torch import nn


def rope_angles(length: int, dim: int, base: float = 10000.0, offset: int = 0,
                device: torch.device | None = None) -> torch.Tensor:
    """The angles m * theta_i for positions offset .. offset+length-1: (length, dim / 2), float64."""
    positions = torch.arange(offset, offset + length, dtype=torch.float64, device=device)
    theta = torch.pow(torch.tensor(base, dtype=torch.float64, device=device),
                      -torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    return positions[:, None] * theta[None, :]


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent pair of the last axis: x (..., seq, dim), cos/sin (seq, dim / 2) -> x's shape."""
    pairs = x.unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)


class RotaryEmbedding(nn.Module):
    """Applies RoPE to (batch, heads, seq, dim) queries or keys whose first row is at `position`.

    cos/sin tables for `max_len` positions are precomputed (in float64, stored as float32,
    non-persistent: they are a formula, not weights) and extended on demand for longer inputs.
    """

    def __init__(self, dim: int, max_len: int = 512, base: float = 10000.0) -> None:
        super().__init__()
        if dim % 2:
            raise ValueError(f"rotary embedding needs an even dimension, not {dim}")
        self.dim = dim
        self.base = base
        self._build(max_len, device=None)

    def _build(self, length: int, device: torch.device | None) -> None:
        angles = rope_angles(length, self.dim, self.base, device=device)
        self.register_buffer("cos", torch.cos(angles).float(), persistent=False)
        self.register_buffer("sin", torch.sin(angles).float(), persistent=False)

    def tables(self, length: int, position: int = 0, dtype: torch.dtype = torch.float32
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for positions position .. position+length-1, each (length, dim / 2)."""
        needed = position + length
        if dtype == torch.float64:  # exact tables for float64 checks, straight from the formula
            angles = rope_angles(length, self.dim, self.base, position, self.cos.device)
            return torch.cos(angles), torch.sin(angles)
        if needed > self.cos.shape[0]:
            self._build(max(needed, 2 * self.cos.shape[0]), device=self.cos.device)
        return self.cos[position:needed].to(dtype), self.sin[position:needed].to(dtype)

    def forward(self, x: torch.Tensor, position: int = 0) -> torch.Tensor:
        """x (batch, heads, seq, dim) -> the same shape, row j rotated to position `position + j`."""
        cos, sin = self.tables(x.shape[-2], position, x.dtype)
        return rotate_pairs(x, cos, sin)
