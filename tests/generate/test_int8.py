"""generate/int8.py: int8 linear layers for decoding (the math, batch invariance, the shipped lattice) and
generate/shortlist.py's sliced output projection (the same tokens as the full one)."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from gen_helpers import tiny_config
from torch import nn

from clearformer.generate import DecodingOptions, greedy_decode, pad_batch
from clearformer.generate.int8 import (
    RESCORED,
    Int8Linear,
    Int8Output,
    quantize_int8,
    shipped_scale,
)
from clearformer.generate.options import search_tokens
from clearformer.generate.shortlist import ShortlistOutput, sliced_output, use_shortlist_output
from clearformer.model.transformer import Transformer
from clearformer.tokenize.shortlist import LexicalShortlist


def test_an_int8_layer_is_the_integer_product_scaled_back():
    torch.manual_seed(0)
    linear = nn.Linear(24, 40)
    layer = Int8Linear(linear)
    x = torch.randn(5, 3, 24)
    # The definition: each row's integers and their remainder in 1/127ths (both int8), the weight's integers, the
    # exact integer products (in float64), both scales.
    rows = x.reshape(-1, 24)
    peak = rows.abs().amax(dim=1, keepdim=True)
    steps = rows / peak * 127.0
    high = torch.round(steps)
    low = torch.round((steps - high) * 127.0)
    assert float(low.abs().max()) <= 64
    weight = linear.weight.detach().double()
    weight_scale = weight.abs().amax(dim=1) / 127
    q_w = torch.round(weight / weight_scale[:, None])
    expected = ((high.double() @ q_w.t() + low.double() @ q_w.t() / 127) * peak.double() / 127 * weight_scale
                + linear.bias.detach().double())
    got = layer(x).reshape(-1, 40).double()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)  # float32 scaling of exact integer sums
    # ... and the float layer up to the weight's int8 rounding (half a step of each weight) and the input's
    # rounding to 1/127 of an int8 step.
    bound = (rows.double().abs().sum(dim=1, keepdim=True) * weight_scale * 0.5
             + peak.double() / 127 / 127 * weight.abs().sum(dim=1) * 0.5) + 1e-4
    assert bool(((got - linear(x).reshape(-1, 40).double()).abs() <= bound).all())


def test_one_int8_row_per_input_is_the_coarser_product():
    """`passes = 1` (the output layer's ranking pass): the row's integers only."""
    torch.manual_seed(9)
    linear = nn.Linear(16, 8)
    layer = Int8Linear(linear, passes=1)
    rows = torch.randn(4, 16)
    peak = rows.abs().amax(dim=1, keepdim=True)
    q_x = torch.round(rows / peak * 127.0).double()
    weight = linear.weight.detach().double()
    weight_scale = weight.abs().amax(dim=1) / 127
    expected = (q_x @ torch.round(weight / weight_scale[:, None]).t()) * peak.double() / 127 * weight_scale
    torch.testing.assert_close(layer(rows).double(), expected + linear.bias.detach().double(), rtol=1e-5, atol=1e-5)


def test_the_output_layer_rescores_its_best_logits_in_float():
    """The int8 output layer's best RESCORED logits of each row are the float layer's, so its argmax is
    float32's wherever float32's best token is among int8's best; and a row's logits do not depend on its
    batch."""
    torch.manual_seed(10)
    linear = nn.Linear(32, 500)
    layer = Int8Output(linear)
    hidden = torch.randn(7, 32)
    logits, exact = layer(hidden), linear(hidden).detach()
    best = logits.topk(RESCORED, dim=1).indices
    torch.testing.assert_close(logits.gather(1, best), exact.gather(1, best), rtol=1e-5, atol=1e-5)
    assert torch.equal(logits.argmax(dim=1), exact.argmax(dim=1))
    for row in range(7):
        assert torch.equal(layer(hidden[row: row + 1])[0], logits[row])


def output_layers(linear: nn.Linear) -> list[Int8Output]:
    """The int8 output layer of `linear` with each integer product this machine has: oneDNN's (where it runs
    here: a CPU with VNNI) and `torch._int_mm`'s (everywhere)."""
    layers = [Int8Output(linear)]
    if layers[0].packed is not None:
        fallback = Int8Output(linear)
        fallback.packed = None
        layers.append(fallback)
    return layers


def test_the_output_layers_ranking_is_the_integer_product_scaled_back():
    """One int8 row per input row (its integers), the weight's integers, both scales and the bias: the same numbers
    from either integer product (oneDNN's takes the row as unsigned bytes, the integers + 128)."""
    torch.manual_seed(14)
    linear = nn.Linear(64, 700)
    x = torch.randn(2, 5, 64) * torch.logspace(-3, 3, 5)[:, None]
    rows = x.reshape(-1, 64)
    peak = rows.abs().amax(dim=1, keepdim=True)
    integers = torch.round(rows / peak * 127).double()
    with torch.inference_mode():
        for layer in output_layers(linear):
            expected = ((integers @ layer.weight.double().t()) * peak.double() / 127 * layer.scale.double()
                        + linear.bias.detach().double())
            got = layer.ranking(x)
            assert got.shape == (2, 5, 700)
            torch.testing.assert_close(got.reshape(-1, 700).double(), expected, rtol=1e-5, atol=1e-5)


def test_the_output_layer_gives_a_row_its_logits_alone_at_every_row_count():
    """Beam search's rows (sentences x beams, 1 to 128 and more) against each row alone: the same logits bit for
    bit, whatever blocking the integer product picks for its number of rows."""
    torch.manual_seed(15)
    hidden = torch.randn(130, 256)
    with torch.inference_mode():
        for layer in output_layers(nn.Linear(256, 3000)):
            alone = [layer(hidden[row: row + 1])[0] for row in range(hidden.shape[0])]
            for count in (2, 3, 4, 8, 16, 17, 32, 33, 64, 65, 128, 130):
                together = layer(hidden[:count])
                for row in range(count):
                    assert torch.equal(together[row], alone[row]), (layer.packed is None, count, row)


def test_the_onednn_product_needs_vnni_and_survives_a_copy(monkeypatch):
    """Without VNNI (x86 kernels would sum byte pairs in int16, which can saturate) the output layer uses
    `torch._int_mm`; a copy of the layer (copy.deepcopy: oneDNN's packed weight is opaque) packs again."""
    torch.manual_seed(16)
    linear = nn.Linear(32, 300)
    hidden = torch.randn(3, 32)
    layer = Int8Output(linear)
    with torch.inference_mode():
        assert torch.equal(copy.deepcopy(layer)(hidden), layer(hidden))
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: False)
    assert Int8Output(linear).packed is None


def test_a_row_gives_the_same_numbers_in_any_batch():
    """One scale per row and an integer product: a sentence's numbers cannot depend on its batch."""
    torch.manual_seed(1)
    layer = Int8Linear(nn.Linear(32, 16))
    batch = torch.randn(9, 32) * torch.logspace(-2, 2, 9)[:, None]  # rows of very different sizes
    together = layer(batch)
    for row in range(9):
        assert torch.equal(layer(batch[row: row + 1])[0], together[row])


def test_every_row_count_gives_a_row_its_numbers_alone():
    """Integer sums are exact in any order, whatever blocking the product picks for its number of rows."""
    torch.manual_seed(11)
    layer = Int8Linear(nn.Linear(48, 24))
    batch = torch.randn(41, 48)
    alone = [layer(batch[row: row + 1])[0] for row in range(batch.shape[0])]
    for count in (1, 2, 3, 16, 17, 32, 33, 41):
        together = layer(batch[:count])
        for row in range(count):
            assert torch.equal(together[row], alone[row]), (count, row)


def test_a_one_row_view_with_unit_strides_gives_the_same_numbers():
    """A (1, in) view with strides (1, 1) (a transposed one-row product, as generate/layout.py returns) once met
    a `_int_mm` that summed wrongly for it: the layer's integers go into a buffer of their own."""
    torch.manual_seed(13)
    layer = Int8Linear(nn.Linear(40, 300))
    row = torch.randn(40, 1).t()
    assert row.stride() == (1, 1)
    torch.testing.assert_close(layer(row), layer(row.clone(memory_format=torch.contiguous_format)), rtol=0, atol=0)
    assert torch.equal(layer(row), layer(torch.tensor(row.tolist())))
    with torch.inference_mode():  # and the output layer, on either integer product
        for output in output_layers(nn.Linear(40, 300)):
            assert torch.equal(output(row), output(torch.tensor(row.tolist())))


def test_a_weight_on_an_int8_lattice_keeps_its_integers():
    torch.manual_seed(2)
    integers = torch.randint(-127, 128, (12, 20), dtype=torch.int8)
    integers[0, 0] = 127
    scale = np.float32(127.0 / 0.37)  # intgemm's scale: W = q / scale
    linear = nn.Linear(20, 12)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(integers.numpy().astype(np.float32) / scale))
    assert shipped_scale(linear.weight.detach()) is not None
    layer = Int8Linear(linear)
    assert layer.shipped and torch.equal(layer.weight, integers)
    requantized = nn.Linear(20, 12)  # random float weights are not on a lattice: per-row scales
    assert shipped_scale(requantized.weight.detach()) is None and not Int8Linear(requantized).shipped


def test_an_int8_model_decodes_each_sentence_as_it_does_alone():
    torch.manual_seed(3)
    model = Transformer(tiny_config(40, d_model=32, n_heads=4, d_ff=64)).eval()
    summary = quantize_int8(model, requantize=True)  # every layer: the int8 path at its widest
    assert summary.layers == sum(isinstance(m, Int8Linear) for m in model.modules()) > 0
    assert not any(type(m) is nn.Linear for m in model.modules())
    assert isinstance(model.output.linear, Int8Output)  # the output layer rescores its best logits in float
    generator = torch.Generator().manual_seed(4)
    sources = [torch.randint(4, 39, (n,), generator=generator).tolist() for n in (3, 9, 5, 12, 1, 7)]
    options = DecodingOptions(max_extra=6)
    together = greedy_decode(model, pad_batch(sources, model.config.pad_id), options).sequences()
    for ids, out in zip(sources, together, strict=True):
        assert greedy_decode(model, pad_batch([ids], model.config.pad_id), options).sequences()[0] == out


def test_float_weights_stay_float_but_the_output_and_shipped_integers():
    """`translate --quantize int8`'s choice: the output projection in int8 (its best logits rescored), a layer whose
    weight is its file's int8 lattice in int8 with those integers, a float-trained layer left float (requantizing
    it moved translations: BENCHMARKS.md, "int8 against float32: where the translations move")."""
    torch.manual_seed(12)
    model = Transformer(tiny_config(40, d_model=32, n_heads=4, d_ff=64)).eval()
    ffn = model.encoder.layers[0].feed_forward.linear_1
    with torch.no_grad():  # as Firefox's students ship it: integers / one scale
        integers = torch.randint(-127, 128, ffn.weight.shape)
        integers[0, 0] = 127
        ffn.weight.copy_(integers / 300.0)
    summary = quantize_int8(model)
    assert isinstance(model.output.linear, Int8Output)
    layer = model.encoder.layers[0].feed_forward.linear_1
    assert isinstance(layer, Int8Linear) and layer.shipped and torch.equal(layer.weight, integers.to(torch.int8))
    int8 = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert (summary.layers, summary.shipped, len(int8)) == (2, 1, 2)
    assert type(model.encoder.layers[0].feed_forward.linear_2) is nn.Linear


def test_mla_is_refused():
    """MLA's absorbed decoding reads its up-projection's weight matrix itself: int8 layers would be bypassed."""
    from clearformer.config import MLAConfig, ModelConfig

    model = Transformer(ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=4, d_ff=32,
                                    n_encoder_layers=1, n_decoder_layers=2, positional="rope", attention="mla",
                                    mla=MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2,
                                                  v_head_dim=4)))
    with pytest.raises(ValueError, match="MLA"):
        quantize_int8(model)


def random_shortlist(vocab: int, seed: int) -> LexicalShortlist:
    """Each source id allows 4 random target ids; ids 0-3 always."""
    rng = np.random.default_rng(seed)
    lists = rng.integers(4, vocab, size=(vocab, 4))
    offsets = np.arange(0, 4 * vocab + 1, 4, dtype=np.int64)
    return LexicalShortlist(first_num=4, best_num=4, offsets=offsets, lists=lists.reshape(-1).astype(np.int64))


@pytest.mark.parametrize("quantized", [False, True])
def test_the_sliced_output_projection_gives_the_same_tokens(quantized):
    torch.manual_seed(5)
    vocab = 300
    model = Transformer(tiny_config(vocab, d_model=32, n_heads=4, d_ff=64, max_len=64)).eval()
    shortlist = random_shortlist(vocab, 6)
    generator = torch.Generator().manual_seed(7)
    sources = [torch.randint(4, vocab - 1, (n,), generator=generator).tolist() for n in (3, 9, 5, 12, 1, 7)]
    src = pad_batch(sources, model.config.pad_id)
    options = DecodingOptions(max_extra=8, with_scores=False)  # as `translate` decodes text
    full = copy.deepcopy(model)
    use_shortlist_output(model)
    if quantized:  # the sliced projection stays float: so does the full one it is compared with
        quantize_int8(model)
        output = full.output
        del full.output
        quantize_int8(full)
        full.output = output
    tokens = replace(search_tokens(model, None, options), shortlist=shortlist)
    assert greedy_decode(model, src, options, tokens).sequences() == greedy_decode(full, src, options,
                                                                                     tokens).sequences()
    assert sliced_output(model).ids is not None and len(sliced_output(model).ids) < vocab  # it did slice
    greedy_decode(model, src, options.but(with_scores=True), tokens)
    assert sliced_output(model).ids is None  # scores need every logit: no slice
    assert sliced_output(full) is None


def test_translate_quantize_int8_is_the_same_sentence_alone_and_in_a_batch(checkpoint, capsys):
    from clearformer.cli import main

    sentences = ["I love you", "the dog sleeps", "we eat bread", "you like music ."]
    assert main(["translate", "--checkpoint", str(checkpoint), "--quantize", "int8", "--threads", "1",
                 *sentences]) == 0
    together = capsys.readouterr().out.splitlines()
    for sentence, translation in zip(sentences, together, strict=True):
        assert main(["translate", "--checkpoint", str(checkpoint), "--quantize", "int8", sentence]) == 0
        assert capsys.readouterr().out.splitlines() == [translation]


def test_the_callers_model_keeps_its_layers(checkpoint):
    """The swaps happen on the translator's own model (a copy for int8; its own module tree for the slice)."""
    from clearformer.generate.translator import PyTorchTranslator, decoding_model
    from clearformer.load import load_model
    from clearformer.model.transformer import OutputProjection

    model, tokenizer, _ = load_model(checkpoint)
    shortlist = random_shortlist(len(tokenizer), 8)
    for quantize in ("none", "int8"):
        decoded = decoding_model(model, shortlist, quantize)
        assert decoded is not model and sliced_output(decoded) is not None
        # the slice stays float, and so do the float-trained layers: int8 has nothing to take here
        assert not any(isinstance(m, Int8Linear) for m in decoded.modules())
        assert isinstance(decoding_model(model, None, quantize).output.linear, Int8Output) == (quantize == "int8")
    said = []
    decoding_model(model, shortlist, "int8", said.append)  # nothing turned int8: the user is told, not left to guess
    assert len(said) == 1 and "no layer of this run turns int8" in said[0] and "float32" in said[0]
    decoding_model(model, None, "int8", said.append)  # the output projection turned: nothing to say
    assert len(said) == 1
    PyTorchTranslator.open(model, tokenizer, None).translate(["I love you"])
    assert isinstance(model.output, OutputProjection) and sliced_output(model) is None
    assert not any(isinstance(m, Int8Linear | ShortlistOutput) for m in model.modules())
