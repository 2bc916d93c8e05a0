"""Attention: explicit path vs fused path, masks, gradcheck, and torch.nn.MultiheadAttention as a peer."""

from __future__ import annotations

import torch
from tolerance import assert_float32_close, float32_close, golden_close
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import (
    CrossAttention,
    MultiHeadAttention,
    causal_mask,
    combine_masks,
    explicit_attention,
    fast_attention,
    masked_softmax,
    padding_mask,
)
from clearformer.record import trace


def random_qkv(batch=3, heads=2, q_len=5, k_len=7, d=8, dtype=torch.float32):
    return (torch.randn(batch, heads, q_len, d, dtype=dtype), torch.randn(batch, heads, k_len, d, dtype=dtype),
            torch.randn(batch, heads, k_len, d, dtype=dtype))


def test_causal_mask_is_lower_triangular_and_handles_cached_queries():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    # two new queries at positions 3 and 4 of a 5-long sequence
    assert torch.equal(causal_mask(2, 5), torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool))


def test_padding_mask_blocks_pad_keys_only():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = padding_mask(ids, 0)
    assert mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    assert combine_masks(None, mask, None) is mask


def test_masked_softmax_gives_the_golden_causal_weights(golden):
    example = golden["seed_002_i_love_you"]["masked_example"]
    weights = masked_softmax(torch.tensor(example["scores"]), causal_mask(4))
    assert golden_close(weights, example["weights"], depth=4)  # a softmax over 4 keys
    assert torch.all(weights.triu(1) == 0)


def test_fully_blocked_row_gets_zero_weights_not_nan():
    weights = masked_softmax(torch.randn(2, 3), torch.tensor([[True, False, True], [False, False, False]]))
    assert torch.all(weights[1] == 0) and not torch.isnan(weights).any()


def test_explicit_and_fast_paths_agree_with_padding_and_causal_masks():
    q, k, v = random_qkv(q_len=6, k_len=6)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6], [1, 2, 3, 0, 0, 0], [1, 2, 3, 4, 5, 0]])
    for mask in (None, padding_mask(ids, 0), combine_masks(padding_mask(ids, 0), causal_mask(6))):
        explicit, _ = explicit_attention(q, k, v, mask)
        fast = fast_attention(q, k, v, mask)
        assert_float32_close(explicit, fast, depth=8 + 6)  # d_k, then 6 keys (tests/tolerance.py)


def test_explicit_path_records_every_intermediate_and_matches_the_definition():
    q, k, v = random_qkv(batch=1, heads=1, q_len=3, k_len=3, d=4, dtype=torch.float64)
    with trace.Recorder() as rec:
        out, weights = explicit_attention(q, k, v, causal_mask(3), recorder_prefix="attn")
    assert rec.names() == ["attn.scores", "attn.scaled", "attn.mask", "attn.weights", "attn.head_outputs"]
    scores = q @ k.transpose(-1, -2)
    assert torch.allclose(rec.get("attn.scores"), scores)
    assert torch.allclose(rec.get("attn.scaled"), scores / 2.0)
    expected = torch.softmax((scores / 2).masked_fill(~causal_mask(3), float("-inf")), -1) @ v
    assert torch.allclose(out, expected)


def test_gradcheck_float64():
    q, k, v = (t.requires_grad_() for t in random_qkv(batch=2, heads=2, q_len=3, k_len=4, d=3, dtype=torch.float64))
    mask = padding_mask(torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]), 0)
    assert torch.autograd.gradcheck(lambda a, b, c: explicit_attention(a, b, c, mask)[0], (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: fast_attention(a, b, c, mask), (q, k, v))
    mha = MultiHeadAttention(ModelConfig(d_model=6, n_heads=2)).double()
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    mha.explicit = True
    assert torch.autograd.gradcheck(lambda t: mha(t, mask=causal_mask(4)), (x,))


def copy_into_torch_mha(ours: MultiHeadAttention, peer: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        peer.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        peer.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        peer.out_proj.weight.copy_(ours.w_o.weight)
        peer.out_proj.bias.copy_(ours.w_o.bias)


def test_multi_head_attention_equals_torch_multihead_attention():
    ours = MultiHeadAttention(ModelConfig(d_model=16, n_heads=4)).eval()
    peer = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    copy_into_torch_mha(ours, peer)
    x = torch.randn(3, 6, 16)
    memory = torch.randn(3, 5, 16)
    src = torch.tensor([[1, 2, 3, 4, 5], [1, 2, 0, 0, 0], [1, 2, 3, 4, 0]])
    with torch.no_grad():
        # self-attention with a causal mask (torch's bool masks mean True = blocked)
        expected, _ = peer(x, x, x, attn_mask=~causal_mask(6))
        depth = 16 + 4 + 6 + 16  # projections, a head's width, the keys, W_O (tests/tolerance.py)
        assert float32_close(ours(x, mask=causal_mask(6)), expected, depth)
        # cross-attention (the same weights in a CrossAttention) with a padding mask
        cross = CrossAttention(ModelConfig(d_model=16, n_heads=4)).eval()
        cross.load_state_dict(ours.state_dict())
        expected, _ = peer(x, memory, memory, key_padding_mask=src == 0)
        assert float32_close(cross(x, memory, mask=padding_mask(src, 0)), expected, depth)
        # and the explicit (recording) path gives the same
        with trace.Recorder() as rec:
            assert float32_close(cross(x, memory, mask=padding_mask(src, 0)), expected, depth)
        assert rec.get("CrossAttention.weights").shape == (3, 4, 6, 5)


def test_cached_self_attention_equals_full_recomputation():
    mha = MultiHeadAttention(ModelConfig(d_model=8, n_heads=2)).eval()
    x = torch.randn(2, 5, 8)
    full = mha(x, mask=causal_mask(5))
    cache = mha.new_cache()
    steps = [mha(x[:, t:t + 1], mask=causal_mask(1, t + 1), cache=cache) for t in range(5)]
    assert_float32_close(torch.cat(steps, dim=1), full, depth=8 + 4 + 5 + 8)  # tests/tolerance.py
    assert cache.k.shape == cache.v.shape == (2, 2, 5, 4)  # every position so far
