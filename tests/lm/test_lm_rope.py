"""RoPE: each pair is rotated by position x theta_i, dot products depend only on relative position."""

from __future__ import annotations

import math

import torch

from clearformer.model.rope import RotaryEmbedding, rope_angles


def complex_rope(x: torch.Tensor, position: int, base: float = 10000.0) -> torch.Tensor:
    """Peer implementation (LLaMA / DeepSeek style): adjacent pairs as complex numbers times e^{i m theta}."""
    seq, dim = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.arange(position, position + seq, dtype=torch.float64)[:, None] * theta
    z = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_rotation_of_pairs_by_hand():
    rope = RotaryEmbedding(4, max_len=8, base=100.0)
    x = torch.tensor([1.0, 0.0, 0.0, 2.0]).view(1, 1, 1, 4)
    out = rope(x, position=3)[0, 0, 0]
    # pair 0 turns by 3 * 100^0 = 3 rad; pair 1 by 3 * 100^(-1/2) = 0.3 rad
    expected = [math.cos(3), math.sin(3), -2 * math.sin(0.3), 2 * math.cos(0.3)]
    torch.testing.assert_close(out, torch.tensor(expected), atol=1e-6, rtol=0)


def test_matches_complex_multiplication_peer():
    x = torch.randn(2, 3, 7, 16, dtype=torch.float64)
    rope = RotaryEmbedding(16, max_len=32).double()
    torch.testing.assert_close(rope(x, position=5), complex_rope(x, 5), atol=1e-6, rtol=1e-6)


def test_rotation_keeps_pair_lengths():
    x = torch.randn(1, 2, 9, 8)
    out = RotaryEmbedding(8)(x)
    torch.testing.assert_close(out.unflatten(-1, (-1, 2)).norm(dim=-1), x.unflatten(-1, (-1, 2)).norm(dim=-1))


def test_position_zero_is_identity():
    x = torch.randn(1, 1, 1, 8)
    torch.testing.assert_close(RotaryEmbedding(8)(x, 0), x)


def test_scores_depend_only_on_relative_position():
    rope = RotaryEmbedding(8, max_len=64).double()
    q = torch.randn(1, 1, 1, 8, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 8, dtype=torch.float64)

    def score(m: int, n: int) -> float:
        return float((rope(q, m) * rope(k, n)).sum())

    assert math.isclose(score(7, 3), score(4, 0), rel_tol=1e-9)
    assert math.isclose(score(20, 15), score(5, 0), rel_tol=1e-9)
    assert not math.isclose(score(7, 3), score(7, 4), rel_tol=1e-3)


def test_offset_equals_rows_of_the_full_sequence():
    rope = RotaryEmbedding(8, max_len=16)
    x = torch.randn(2, 2, 10, 8)
    torch.testing.assert_close(rope(x[:, :, 6:], position=6), rope(x)[:, :, 6:])


def test_table_extends_past_max_len():
    rope = RotaryEmbedding(8, max_len=4)
    x = torch.randn(1, 1, 3, 8)
    torch.testing.assert_close(rope(x, position=10), complex_rope(x, 10).float(), atol=1e-5, rtol=1e-5)
    assert rope.cos.shape[0] >= 13
    expected = torch.tensor([4.0, 4.0 / 100], dtype=torch.float64)
    torch.testing.assert_close(rope_angles(2, 4, offset=3)[1], expected)
