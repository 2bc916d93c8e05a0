"""The whole encoder and decoder stacks against torch.nn.Transformer with copied weights."""

from __future__ import annotations

import pytest
import torch
from tolerance import depth_of, float32_close
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import causal_mask, padding_mask
from clearformer.model.layers import AddNorm
from clearformer.model.transformer import Transformer


def copy_attention(ours, peer: nn.MultiheadAttention) -> None:
    peer.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    peer.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    peer.out_proj.weight.copy_(ours.w_o.weight)
    peer.out_proj.bias.copy_(ours.w_o.bias)


def copy_norm(ours: AddNorm, peer: nn.LayerNorm) -> None:
    peer.weight.copy_(ours.norm.weight)
    peer.bias.copy_(ours.norm.bias)


def copy_ffn(ours, peer_layer) -> None:
    peer_layer.linear1.load_state_dict(ours.linear_1.state_dict())
    peer_layer.linear2.load_state_dict(ours.linear_2.state_dict())


def peer_for(model: Transformer) -> nn.Transformer:
    c = model.config
    peer = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff, dropout=0.0,
                          batch_first=True, norm_first=c.norm_first)
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, peer.encoder.layers, strict=True):
            copy_attention(ours.self_attention, theirs.self_attn)
            copy_ffn(ours.feed_forward, theirs)
            copy_norm(ours.add_norm_1, theirs.norm1)
            copy_norm(ours.add_norm_2, theirs.norm2)
        for ours, theirs in zip(model.decoder.layers, peer.decoder.layers, strict=True):
            copy_attention(ours.self_attention, theirs.self_attn)
            copy_attention(ours.cross_attention, theirs.multihead_attn)
            copy_ffn(ours.feed_forward, theirs)
            copy_norm(ours.add_norm_1, theirs.norm1)
            copy_norm(ours.add_norm_2, theirs.norm2)
            copy_norm(ours.add_norm_3, theirs.norm3)
        if c.norm_first:
            peer.encoder.norm.load_state_dict(model.encoder.final_norm.state_dict())
            peer.decoder.norm.load_state_dict(model.decoder.final_norm.state_dict())
        else:
            # nn.Transformer always ends its stacks with a LayerNorm; the paper's post-norm stack does not.
            peer.encoder.norm = None
            peer.decoder.norm = None
    return peer.eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_decoder_equal_torch_transformer(norm_first):
    config = ModelConfig(src_vocab_size=50, tgt_vocab_size=60, d_model=32, n_heads=4, n_encoder_layers=2,
                         n_decoder_layers=2, d_ff=64, norm_first=norm_first)
    model = Transformer(config).eval()
    peer = peer_for(model)
    src = torch.tensor([[5, 6, 7, 8, 9, 3], [5, 6, 7, 3, 0, 0], [9, 8, 3, 0, 0, 0]])
    tgt = torch.tensor([[2, 11, 12, 13, 14], [2, 15, 16, 0, 0], [2, 17, 0, 0, 0]])
    x_src = torch.randn(3, 6, 32)
    x_tgt = torch.randn(3, 5, 32)
    real = src != 0
    with torch.no_grad():
        memory = model.encoder(x_src, padding_mask(src, 0))
        expected_memory = peer.encoder(x_src, src_key_padding_mask=~real)
        # tests/tolerance.py: float32 rounding of the stacks' sums, in whatever order each BLAS adds them
        encoder_depth = depth_of(32, 64, encoder_layers=2)
        assert float32_close(memory[real], expected_memory[real], encoder_depth)
        out = model.decoder(x_tgt, memory, causal_mask(5), padding_mask(src, 0))
        expected = peer.decoder(x_tgt, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=~real)
        assert float32_close(out[tgt != 0], expected[tgt != 0], encoder_depth + depth_of(32, 64, decoder_layers=2))
        # and the whole model, embeddings included, through the peer
        logits = model(src, tgt)
        peer_hidden = peer(model.src_embed(src), model.tgt_embed(tgt), tgt_mask=~causal_mask(5),
                           src_key_padding_mask=~real, memory_key_padding_mask=~real)
        whole = depth_of(32, 64, encoder_layers=2, decoder_layers=2, vocabulary=True)
        assert float32_close(logits[tgt != 0], model.project(peer_hidden)[tgt != 0], whole)


def test_recording_path_gives_the_same_logits_as_the_fast_path():
    from clearformer.record import trace

    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2, n_encoder_layers=2,
                         n_decoder_layers=2, d_ff=32)
    model = Transformer(config).eval()
    src = torch.tensor([[4, 5, 6, 3], [7, 3, 0, 0]])
    tgt = torch.tensor([[2, 8, 9], [2, 10, 0]])
    with torch.no_grad():
        fast = model(src, tgt)
        with trace.Recorder() as rec:
            explicit = model(src, tgt)
    assert float32_close(fast[tgt != 0], explicit[tgt != 0],
                         depth_of(16, 32, encoder_layers=2, decoder_layers=2, vocabulary=True))
    names = rec.names()
    for expected in ("src_embed.token_ids", "src_embed.positions.PE", "src_embed.X",
                     "encoder.layers.0.self_attention.Q", "encoder.layers.0.self_attention.weights",
                     "encoder.layers.1.add_norm_2.norm", "encoder.layers.0.feed_forward.hidden",
                     "decoder.layers.0.self_attention.mask", "decoder.layers.1.cross_attention.weights",
                     "decoder.layers.1.add_norm_3.norm", "output.logits"):
        assert expected in names, expected
    weights = rec.get("decoder.layers.0.self_attention.weights")
    assert weights.shape == (2, 2, 3, 3) and torch.all(weights.triu(1) == 0)


def test_nothing_is_recorded_without_a_recorder():
    from clearformer.record import trace

    model = Transformer(ModelConfig(d_model=8, n_heads=2, d_ff=16))
    assert trace.active() is None
    model(torch.tensor([[4, 5]]), torch.tensor([[2, 6]]))  # no error, nothing kept
    assert trace.active() is None


def test_tied_embeddings_share_one_matrix():
    config = ModelConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2, d_ff=32, tie_embeddings="all")
    model = Transformer(config)
    assert model.src_embed.tokens.weight is model.tgt_embed.tokens.weight is model.output.linear.weight
    untied = Transformer(ModelConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2, d_ff=32))
    assert model.num_parameters() == untied.num_parameters() - 2 * 40 * 16
