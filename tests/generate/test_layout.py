"""generate/layout.py: the few-rows product layout is nn.Linear's math, training never takes it, and `for_decoding`
gives it to every linear layer of a model built plain (MLA's included), once, in a copy of the module tree that
shares the weights (tied weights stay tied): the model given, a caller's, keeps its classes and is never changed."""

from __future__ import annotations

import pytest
import torch
from tolerance import assert_float32_close
from torch import nn

from clearformer.config import MLAConfig, ModelConfig
from clearformer.generate import DecodingOptions, greedy_decode
from clearformer.generate.layout import FEW_ROWS, FewRowsLinear, for_decoding
from clearformer.model import build_model


def few_rows(in_features: int, out_features: int, bias: bool = True) -> FewRowsLinear:
    return for_decoding(nn.Sequential(nn.Linear(in_features, out_features, bias=bias)))[0]


@pytest.mark.parametrize("shape", [(1, 16), (3, 1, 16), (FEW_ROWS, 16), (FEW_ROWS + 1, 16), (4, 50, 16)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_layout_equals_nn_linear(shape, bias):
    torch.manual_seed(0)
    layer, x = few_rows(16, 40, bias), torch.randn(*shape)
    with torch.no_grad():
        got = layer(x)
        expected = nn.Linear.forward(layer, x)
    assert got.shape == (*shape[:-1], 40)
    assert_float32_close(got, expected, depth=16)  # a 16-term dot product (tests/tolerance.py)
    assert torch.equal(got.contiguous().view(-1, 40), got.reshape(-1, 40))  # the view reads as a tensor


def test_with_gradients_it_is_nn_linear_bit_for_bit():
    torch.manual_seed(1)
    layer, x = few_rows(16, 40), torch.randn(2, 16)
    reference = torch.nn.Linear(16, 40)
    reference.load_state_dict(layer.state_dict())
    assert torch.equal(layer(x), reference(x))  # training: nn.Linear itself, so resumed runs match straight ones
    layer(x).sum().backward()
    assert layer.weight.grad is not None


def classes(model: nn.Module) -> dict[str, type]:
    return {name: type(module) for name, module in model.named_modules()}


@pytest.mark.parametrize("attention", ["mha", "mla"])
def test_for_decoding_lays_out_every_linear_layer_of_a_copy_sharing_the_weights(attention):
    torch.manual_seed(2)
    variant = dict(attention="mla", mla=MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, v_head_dim=8,
                                                  qk_rope_head_dim=0)) if attention == "mla" else {}
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                         n_decoder_layers=2, tie_embeddings="decoder", **variant)
    model = build_model(config).eval()
    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    assert linears and not any(isinstance(m, FewRowsLinear) for m in model.modules())  # model/ builds it plain
    before = classes(model)
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    plain = greedy_decode(model, torch.tensor([[5, 6, 7, 8]]), DecodingOptions(max_new=5, min_length=5))
    assert classes(model) == before  # the search changes nothing

    runtime = for_decoding(model)
    assert classes(model) == before  # the model given keeps its classes
    assert all(isinstance(runtime.get_submodule(name), FewRowsLinear) for name in linears), linears
    assert for_decoding(runtime) is runtime  # once
    assert runtime.output.linear.weight is runtime.tgt_embed.tokens.weight  # still tied
    for name, parameter in model.named_parameters():  # shared, not copied
        assert runtime.get_parameter(name) is parameter
    assert state.keys() == runtime.state_dict().keys()
    assert all(torch.equal(state[name], tensor) for name, tensor in runtime.state_dict().items())
    laid_out = greedy_decode(runtime, torch.tensor([[5, 6, 7, 8]]), DecodingOptions(max_new=5, min_length=5))
    assert torch.equal(plain.tokens, laid_out.tokens)
    with torch.no_grad():  # training the model changes what the copy decodes: the same tensors
        model.output.linear.weight.add_(1.0)
    assert torch.equal(runtime.output.linear.weight, model.output.linear.weight)


def test_the_python_api_leaves_the_callers_model_as_it_was():
    """`clearformer.translate(model, ...)`: the model passed in has the same classes, mode and weights after."""
    import clearformer
    from clearformer.tokenize import WordTokenizer

    tokenizer = WordTokenizer.build(["I love you", "je t'aime", "the dog sleeps", "le chien dort"])
    torch.manual_seed(3)
    config = ModelConfig(src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16, n_heads=2,
                         d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    model = build_model(config).train()
    before, state = classes(model), {k: v.clone() for k, v in model.state_dict().items()}
    first = clearformer.translate(model, tokenizer, ["I love you", "the dog"], DecodingOptions(beam=2, max_new=4))
    assert classes(model) == before and model.training
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    again = clearformer.translate(model, tokenizer, ["I love you", "the dog"], DecodingOptions(beam=2, max_new=4))
    assert first == again and classes(model) == before
