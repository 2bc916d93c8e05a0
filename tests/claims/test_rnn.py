"""The GRU encoder-decoder baseline (model/rnn.py): the Transformer's interface, its math, and decoding."""

from __future__ import annotations

import pytest
import torch
from seeds import seed

from clearformer.claims.common import quick_train, toy_data, valid_nll
from clearformer.config import ModelConfig
from clearformer.generate import DecodingOptions
from clearformer.generate.beam import beam_search
from clearformer.generate.greedy import greedy_decode
from clearformer.model.attention import masked_softmax
from clearformer.model.rnn import RNNSeq2Seq
from clearformer.record.trace import Recorder


def small_model(**fields) -> RNNSeq2Seq:
    config = ModelConfig(**{**dict(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_encoder_layers=2,
                                   n_decoder_layers=2, architecture="rnn"), **fields})
    return RNNSeq2Seq(config).eval()


SRC = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
TGT = torch.tensor([[2, 5, 6], [2, 7, 0]])


def test_forward_has_the_transformers_shapes():
    model = small_model()
    memory, src_mask = model.encode(SRC)
    assert memory.shape == (2, 4, 16) and src_mask.shape == (2, 1, 1, 4)
    assert model(SRC, TGT).shape == (2, 3, 20)
    assert model.decode(TGT, memory, src_mask).shape == (2, 3, 16)


def test_padding_changes_nothing_of_a_sentence():
    model = small_model()
    alone = model.encode(SRC[1:, :2])[0]
    padded = model.encode(SRC)[0]
    torch.testing.assert_close(padded[1:, :2], alone)
    assert padded[1, 2:].abs().max() == 0  # padded positions: zeros, never attended
    logits_alone = model(SRC[1:, :2], TGT[1:, :2])
    torch.testing.assert_close(model(SRC, TGT)[1:, :2], logits_alone)


def test_the_encoder_is_torch_bidirectional_gru_on_the_embeddings():
    """Peer check: the encoder output equals nn.GRU's own forward on the unpadded sentence."""
    model = small_model()
    sentence = SRC[:1]
    expected, _ = model.encoder.gru(model.encoder.embed(sentence))
    torch.testing.assert_close(model.encode(sentence)[0], expected)


def test_luong_attention_is_its_formula():
    """a = softmax(h W_a M^T) over real keys; h~ = tanh(W_c [a M ; h])."""
    model = small_model()
    memory, src_mask = model.encode(SRC)
    states = torch.randn(2, 3, 16)
    attention = model.decoder.cross_attention
    scores = torch.einsum("bqd,bkd->bqk", states @ attention.w_a.weight.T, memory)
    scores = scores.masked_fill(~src_mask[:, 0], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    expected = torch.tanh(torch.cat([weights @ memory, states], -1) @ attention.w_c.weight.T + attention.w_c.bias)
    torch.testing.assert_close(attention(states, memory, src_mask), expected)
    torch.testing.assert_close(masked_softmax(scores.nan_to_num(), src_mask[:, 0]), weights)


def test_cached_steps_equal_teacher_forcing():
    model = small_model()
    memory, src_mask = model.encode(SRC)
    whole = model.decode(TGT, memory, src_mask)
    cache = model.new_cache()
    steps = [model.decode(TGT[:, t:t + 1], memory, src_mask, cache, position=t) for t in range(TGT.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole)


def test_greedy_and_beam_search_drive_it():
    model = small_model()
    cached = greedy_decode(model, SRC, DecodingOptions(max_new=5))
    uncached = greedy_decode(model, SRC, DecodingOptions(max_new=5, use_cache=False))
    assert torch.equal(cached.tokens, uncached.tokens)
    beam = beam_search(model, SRC, DecodingOptions(beam=3, max_extra=3))
    assert len(beam.sequences()) == 2
    uncached_beam = beam_search(model, SRC, DecodingOptions(beam=3, max_extra=3, use_cache=False))
    assert beam.sequences() == uncached_beam.sequences()


def test_its_own_cache_keeps_the_state_and_the_memory():
    model = small_model()
    memory, src_mask = model.encode(SRC)
    cache = model.new_cache()
    model.decode(TGT[:, :1], memory, src_mask, cache)
    assert cache.memory is memory and cache.state.shape == (2, model.config.n_decoder_layers, model.config.d_model)
    cache.reorder(torch.tensor([1, 1, 0]), source=False)  # the state follows its rows, the memory stays
    assert cache.state.shape[0] == 3 and cache.memory is memory
    cache.reorder(torch.tensor([1, 0]))
    torch.testing.assert_close(cache.memory, memory.flip(0))


def test_the_recorder_sees_the_alignment_as_one_head():
    model = small_model()
    with Recorder() as recorder:
        model(SRC, TGT)
    weights = recorder.get("decoder.cross_attention.weights")
    assert weights.shape == (2, 1, 3, 4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1, 3))
    assert weights[1, :, :, 2:].abs().max() == 0


def test_tied_embeddings_share_one_matrix():
    model = small_model(tie_embeddings="all")
    assert model.output.linear.weight is model.decoder.embed.weight is model.encoder.embed.weight


@pytest.mark.slow
def test_it_learns_the_toy_phrase_set():
    data = toy_data()
    vocab = len(data.tokenizer)
    torch.manual_seed(seed(0))
    model = small_model(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=32, n_encoder_layers=1,
                        n_decoder_layers=1, pad_id=data.tokenizer.pad_id)
    before = valid_nll(model, data)
    quick_train(model, data, seconds=20, max_steps=40)
    assert valid_nll(model, data) < 0.7 * before
