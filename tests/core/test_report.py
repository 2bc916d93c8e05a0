"""What is said about a model lives in one module (clearformer.report, issue 37): the `info` line, the cache's
size, and one count of training FLOPs for every architecture, checked against the formula written out by hand."""

from __future__ import annotations

import torch

from clearformer.config import ModelConfig, preset
from clearformer.model.build import build_model
from clearformer.model.lm import LanguageModel
from clearformer.model.rnn import RNNSeq2Seq
from clearformer.model.transformer import Transformer
from clearformer.report.flops import FlopCount
from clearformer.report.model import describe, info_lines, kv_cache_bytes, summary

SRC = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, 0, 0]])   # 4 and 2 real tokens (pad 0)
TGT = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10]])         # 3 and 4


def params(*modules) -> int:
    return sum(p.numel() for module in modules for p in module.parameters())


def test_translation_flops_are_the_formula_by_hand():
    model = build_model(preset("toy-translate", src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2,
                               d_ff=32, n_encoder_layers=2, n_decoder_layers=1, tie_embeddings="all"))
    assert isinstance(model, Transformer)
    c, s, t = model.config, torch.tensor([4.0, 2.0]), torch.tensor([3.0, 4.0])
    # Weights: the encoder per source token; the decoder and the output projection (the tied embedding) per
    # target token; the embedding lookups cost nothing. Attention: 2 products of d per (query, key) pair.
    weights = params(model.encoder) * s.sum() + params(model.decoder, model.output) * t.sum()
    pairs = c.n_encoder_layers * (s * s).sum() + c.n_decoder_layers * ((t * t).sum() + (t * s).sum())
    expected = 6 * (weights + 2 * c.d_model * pairs)
    assert FlopCount.of(model).batch(SRC, TGT, pad_id=0) == float(expected)


def test_the_gru_baselines_flops_are_the_formula_by_hand():
    model = build_model(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_encoder_layers=1,
                                    n_decoder_layers=2, architecture="rnn"))
    assert isinstance(model, RNNSeq2Seq)
    s, t = torch.tensor([4.0, 2.0]), torch.tensor([3.0, 4.0])
    tables = model.encoder.embed.weight.numel() + model.decoder.embed.weight.numel()
    encoder = params(model.encoder) - model.encoder.embed.weight.numel()
    decoder = params(model) - encoder - tables
    expected = 6 * (encoder * s.sum() + decoder * t.sum() + 2 * 16 * (t * s).sum())  # one head over the source
    assert FlopCount.of(model).batch(SRC, TGT, pad_id=0) == float(expected)


def test_a_language_models_flops_are_nanogpts():
    model = build_model(preset("lm-tiny", tgt_vocab_size=40, d_model=16, n_heads=4, d_ff=32, max_len=64,
                               positional="learned"))
    assert isinstance(model, LanguageModel)
    c = model.config
    n = params(model) - model.embed.positions.weight.numel()  # learned positions are only looked up
    assert FlopCount.of(model).per_token(32) == 6 * n + 12 * c.n_decoder_layers * c.n_heads * c.head_dim * 32
    assert FlopCount.of(model).batch(None, torch.zeros(3, 32, dtype=torch.long)) == \
        FlopCount.of(model).per_token(32) * 3 * 32


def test_the_info_report_reads_the_config():
    transformer = build_model(preset("toy-translate", src_vocab_size=20, tgt_vocab_size=20))
    rnn = ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, architecture="rnn")
    assert summary(transformer.config).startswith("d_model=") and summary(rnn).startswith("GRU encoder-decoder")
    assert kv_cache_bytes(rnn) is None and kv_cache_bytes(transformer.config)["layers"] == \
        transformer.config.n_decoder_layers
    info = describe(transformer, "toy")
    assert info["parameters"] == sum(info["parameters_by_part"].values()) == transformer.num_parameters()
    lines = info_lines(info, transformer.config)
    assert lines[0] == f"toy: {summary(transformer.config)}" and lines[-1].startswith("  KV cache")
    for cls in (Transformer, LanguageModel, RNNSeq2Seq):  # model/ holds the paper, not its reports
        assert not {"summary", "training_flops", "kv_cache_bytes"} & set(vars(cls)), cls.__name__
