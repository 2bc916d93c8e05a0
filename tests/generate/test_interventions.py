"""What-if interventions (`trace.Intervention`, `clearformer.explain.interventions`): each one against the model it
stands for, built by hand (a copied model with edited weights, or the formula), and the weights untouched."""

from __future__ import annotations

import copy

import pytest
import torch
from gen_helpers import random_model

from clearformer.errors import UserError
from clearformer.explain.interventions import parse_interventions, summarize, valid_interventions
from clearformer.generate import DecodingOptions
from clearformer.generate.beam import beam_search
from clearformer.generate.greedy import greedy_decode
from clearformer.model.attention import MultiHeadAttention
from clearformer.record import trace

SRC = torch.tensor([[4, 9, 7, 12, 5, 3], [6, 8, 3, 0, 0, 0]])
TGT = torch.tensor([[2, 11, 5, 7, 9], [2, 6, 13, 4, 0]])


def logits_with(model, names=(), src=SRC, tgt=TGT):
    with trace.Interventions(parse_interventions(model, names)):
        return model(src, tgt)


def state(model) -> dict:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


@pytest.fixture
def model():
    return random_model(30, seed=3)


def test_no_intervention_changes_nothing(model):
    plain = model(SRC, TGT)
    assert torch.equal(logits_with(model, []), plain)  # an empty list: not even the path changes
    # An intervention that multiplies by one, registered at every point, leaves every recorded number as it
    # was on the explicit path (the one attention takes under an intervention, as under the recorder).
    identity = [trace.Intervention("x1", c.module, c.point, "identity") for c in valid_interventions(model).values()]
    original = trace.Intervention.apply
    trace.Intervention.apply = lambda self, value, mask=None: (value * 1 if self.kind == "identity"
                                                               else original(self, value, mask))
    try:
        with trace.Recorder() as reference:
            model(SRC, TGT)
        with trace.Recorder() as changed, trace.Interventions(identity):
            model(SRC, TGT)
    finally:
        trace.Intervention.apply = original
    assert changed.names() == reference.names()
    for ours, theirs in zip(changed.records, reference.records, strict=True):
        assert torch.equal(ours.value, theirs.value), ours.name
    torch.testing.assert_close(reference.get("output.logits"), plain.detach(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["encoder.layers.0.self_attention.head.1", "decoder.layers.1.self_attention.head.0",
                                  "decoder.layers.0.cross_attention.head.1"])
def test_head_off_equals_zero_columns_of_w_o(model, name):
    before = state(model)
    ablated = logits_with(model, [name])
    edited = copy.deepcopy(model)
    attention = edited.get_submodule(name.rsplit(".head.", 1)[0])
    head = int(name.rsplit(".", 1)[1])
    with torch.no_grad():
        attention.w_o.weight[:, head * attention.d_head:(head + 1) * attention.d_head] = 0
    torch.testing.assert_close(ablated, edited(SRC, TGT), rtol=0, atol=1e-6)
    assert not torch.allclose(ablated, model(SRC, TGT), atol=1e-6)  # the head mattered
    after = model.state_dict()
    assert all(torch.equal(after[key], value) for key, value in before.items())  # weights unchanged


def test_dropping_positions_equals_a_zero_table(model):
    before = state(model)
    ablated = logits_with(model, ["encoder.positions", "decoder.positions"])
    edited = copy.deepcopy(model)
    edited.src_embed.positions.table.zero_()
    edited.tgt_embed.positions.table.zero_()
    torch.testing.assert_close(ablated, edited(SRC, TGT), rtol=0, atol=1e-6)
    only_source = logits_with(model, ["encoder.positions"])
    edited.tgt_embed.positions.table.copy_(model.tgt_embed.positions.table)
    torch.testing.assert_close(only_source, edited(SRC, TGT), rtol=0, atol=1e-6)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())


def test_dropping_a_residual_equals_the_layer_without_it(model):
    name = "decoder.layers.1.add_norm_2.residual"
    layer = model.decoder.layers[1]
    memory, src_mask = model.encode(SRC)
    x = torch.randn(2, TGT.shape[1], 16, dtype=torch.float64)
    with trace.Interventions(parse_interventions(model, [name])):
        ablated = layer.add_norm_2(x, lambda h: layer.cross_attention(h, memory, mask=src_mask))
    by_hand = layer.add_norm_2.norm(layer.cross_attention(x, memory, mask=src_mask))  # Norm(Sublayer(x)), no x +
    torch.testing.assert_close(ablated, by_hand, rtol=0, atol=1e-12)
    assert not torch.allclose(logits_with(model, [name]), model(SRC, TGT))


def test_uniform_weights_equal_a_hand_computation(model):
    name = "decoder.layers.0.cross_attention.head.1.uniform"
    with trace.Recorder() as recorder, trace.Interventions(parse_interventions(model, [name])):
        model(SRC, TGT)
    weights = recorder.get("decoder.layers.0.cross_attention.weights")  # (batch, heads, tgt, src)
    real = (SRC != 0).double()  # sentence 2 has 3 real tokens: 1/3 on each, 0 on its padding
    expected = (real / real.sum(dim=1, keepdim=True))[:, None, :].expand(-1, TGT.shape[1], -1)
    torch.testing.assert_close(weights[:, 1], expected, rtol=0, atol=1e-12)
    with trace.Recorder() as plain:
        model(SRC, TGT)
    assert torch.equal(weights[:, 0], plain.get("decoder.layers.0.cross_attention.weights")[:, 0])  # head 0 as is
    # The head's output is then the mean of its values over the real source tokens.
    values = recorder.get("decoder.layers.0.cross_attention.V")[:, 1]  # (batch, src, d_head)
    outputs = recorder.get("decoder.layers.0.cross_attention.head_outputs")[:, 1]
    torch.testing.assert_close(outputs, expected @ values, rtol=0, atol=1e-12)


def test_uniform_causal_self_attention(model):
    with trace.Recorder() as recorder, trace.Interventions(
            parse_interventions(model, ["decoder.layers.1.self_attention.head.0.uniform"])):
        model(SRC, TGT)
    weights = recorder.get("decoder.layers.1.self_attention.weights")[0, 0]
    causal = torch.tril(torch.ones(5, 5, dtype=torch.float64))
    torch.testing.assert_close(weights, causal / causal.sum(dim=1, keepdim=True), rtol=0, atol=1e-12)


@pytest.mark.parametrize("decode", ["greedy", "beam"])
def test_searches_run_the_intervention(model, decode):
    """Decoding with a head off (the cached one-token steps) gives the tokens of the edited model."""
    name = "decoder.layers.0.cross_attention.head.0"
    edited = copy.deepcopy(model)
    attention = edited.decoder.layers[0].cross_attention
    with torch.no_grad():
        attention.w_o.weight[:, : attention.d_head] = 0
    run = (lambda m: greedy_decode(m, SRC, DecodingOptions(max_new=8))) if decode == "greedy" else \
        (lambda m: beam_search(m, SRC, DecodingOptions(beam=3, max_new=8)))
    with trace.Interventions(parse_interventions(model, [name])):
        ablated = run(model)
    expected = run(edited)
    assert torch.equal(ablated.tokens, expected.tokens)
    torch.testing.assert_close(ablated.scores, expected.scores, rtol=0, atol=1e-9)
    assert torch.equal(run(model).tokens, run(copy.deepcopy(model)).tokens)  # and nothing stays switched off


def test_unknown_name_lists_the_valid_ones(model):
    with pytest.raises(UserError) as error:
        parse_interventions(model, ["decoder.layers.0.cross_attention.head.7"])
    message = str(error.value)
    assert "\n" not in message
    assert "did you mean decoder.layers.0.cross_attention.head." in message
    assert "decoder.layers.{0-1}.cross_attention.head.{0-1}[.uniform]" in message
    assert "encoder.positions" in message
    with pytest.raises(UserError):
        parse_interventions(model, ["encoder.layers.0.cross_attention.head.0"])  # the encoder has none


def test_names_and_their_summary(model):
    names = list(valid_interventions(model))
    assert "decoder.layers.1.cross_attention.head.1.uniform" in names
    assert "encoder.layers.0.add_norm_2.residual" in names
    assert summarize(names) == [
        "encoder.positions", "decoder.positions", "encoder.layers.{0-1}.self_attention.head.{0-1}[.uniform]",
        "encoder.layers.{0-1}.add_norm_{1-2}.residual", "decoder.layers.{0-1}.self_attention.head.{0-1}[.uniform]",
        "decoder.layers.{0-1}.add_norm_{1-3}.residual", "decoder.layers.{0-1}.cross_attention.head.{0-1}[.uniform]"]
    heads = sum(isinstance(m, MultiHeadAttention) for m in model.modules()) * model.config.n_heads
    assert sum(name.endswith(tuple(f"head.{h}" for h in range(2))) for name in names) == heads


def test_translate_ablate_on_the_command_line(checkpoint, capsys):
    from test_translate_cli import run_cli

    from clearformer.generate import translate
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(checkpoint)
    names = ["decoder.layers.0.cross_attention.head.1", "encoder.positions"]
    args = ["translate", "--checkpoint", str(checkpoint), "--beam", "3", "I love the cat"]
    code, out, _ = run_cli(args + [x for n in names for x in ("--ablate", n)], capsys)
    assert code == 0
    with trace.Interventions(parse_interventions(model, names)):
        assert out == translate(model, tokenizer, ["I love the cat"], DecodingOptions(beam=3))[0] + "\n"
    code, _, err = run_cli(args + ["--ablate", "decoder.layers.0.cross_attention.head.9"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "did you mean decoder.layers.0.cross_attention.head." in err and "encoder.positions" in err


def test_parallel_calls_keep_their_own_interventions(model):
    """A server answers requests in threads: an intervention lives in its own call's context only."""
    from concurrent.futures import ThreadPoolExecutor

    name = ["decoder.layers.0.cross_attention.head.1"]
    plain, ablated = model(SRC, TGT), logits_with(model, name)

    def run(index: int) -> bool:
        got = logits_with(model, name if index % 2 else [])
        return torch.equal(got, ablated if index % 2 else plain)

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(16)))
