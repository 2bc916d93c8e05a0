"""generate/layout.py: the few-rows product layout is nn.Linear's math, training never takes it, and the search
swaps it into every linear layer of a model built plain (MLA's included), keeping tied weights tied."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from clearformer.config import MLAConfig, ModelConfig
from clearformer.generate import DecodingOptions, greedy_decode
from clearformer.generate.layout import FEW_ROWS, FewRowsLinear, use_few_rows_layout
from clearformer.model import build_model


def few_rows(in_features: int, out_features: int, bias: bool = True) -> FewRowsLinear:
    return use_few_rows_layout(nn.Sequential(nn.Linear(in_features, out_features, bias=bias)))[0]


@pytest.mark.parametrize("shape", [(1, 16), (3, 1, 16), (FEW_ROWS, 16), (FEW_ROWS + 1, 16), (4, 50, 16)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_layout_equals_nn_linear(shape, bias):
    torch.manual_seed(0)
    layer, x = few_rows(16, 40, bias), torch.randn(*shape)
    with torch.no_grad():
        got = layer(x)
        expected = nn.Linear.forward(layer, x)
    assert got.shape == (*shape[:-1], 40)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(got.contiguous().view(-1, 40), got.reshape(-1, 40))  # the view reads as a tensor


def test_with_gradients_it_is_nn_linear_bit_for_bit():
    torch.manual_seed(1)
    layer, x = few_rows(16, 40), torch.randn(2, 16)
    reference = torch.nn.Linear(16, 40)
    reference.load_state_dict(layer.state_dict())
    assert torch.equal(layer(x), reference(x))  # training: nn.Linear itself, so resumed runs match straight ones
    layer(x).sum().backward()
    assert layer.weight.grad is not None


@pytest.mark.parametrize("attention", ["mha", "mla"])
def test_the_search_swaps_every_linear_layer_of_a_plain_model(attention):
    torch.manual_seed(2)
    variant = dict(attention="mla", mla=MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, v_head_dim=8,
                                                  qk_rope_head_dim=0)) if attention == "mla" else {}
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                         n_decoder_layers=2, tie_embeddings="decoder", **variant)
    model = build_model(config).eval()
    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    assert linears and not any(isinstance(m, FewRowsLinear) for m in model.modules())  # model/ builds it plain
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    plain = greedy_decode(model, torch.tensor([[5, 6, 7, 8]]), DecodingOptions(max_new=5, min_length=5))
    assert all(isinstance(model.get_submodule(name), FewRowsLinear) for name in linears), linears
    assert model.output.linear.weight is model.tgt_embed.tokens.weight  # still tied
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[name], tensor) for name, tensor in model.state_dict().items())
    again = greedy_decode(model, torch.tensor([[5, 6, 7, 8]]), DecodingOptions(max_new=5, min_length=5))
    assert torch.equal(plain.tokens, again.tokens)
