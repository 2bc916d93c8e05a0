"""model/linear.py: the few-rows product layout is nn.Linear's math, and training never takes it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from clearformer.model.linear import FEW_ROWS, Linear, linear


@pytest.mark.parametrize("shape", [(1, 16), (3, 1, 16), (FEW_ROWS, 16), (FEW_ROWS + 1, 16), (4, 50, 16)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_layout_equals_nn_linear(shape, bias):
    torch.manual_seed(0)
    x, weight = torch.randn(*shape), torch.randn(40, 16)
    b = torch.randn(40) if bias else None
    with torch.no_grad():
        got = linear(x, weight, b)
    assert got.shape == (*shape[:-1], 40)
    torch.testing.assert_close(got, F.linear(x, weight, b), rtol=1e-5, atol=1e-5)
    assert torch.equal(got.contiguous().view(-1, 40), got.reshape(-1, 40))  # the view reads as a tensor


def test_with_gradients_it_is_nn_linear_bit_for_bit():
    torch.manual_seed(1)
    layer, x = Linear(16, 40), torch.randn(2, 16)
    reference = torch.nn.Linear(16, 40)
    reference.load_state_dict(layer.state_dict())
    assert torch.equal(layer(x), reference(x))  # training: F.linear itself, so resumed runs match straight ones
    layer(x).sum().backward()
    assert layer.weight.grad is not None
