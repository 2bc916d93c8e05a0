"""decode_linear: the faster product order for decoding steps gives nn.Linear's numbers."""

import pytest
import torch
from torch import nn

from clearformer.model.linear import FEW_ROWS, decode_linear, uses_transposed_product


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(32, 1, 64), (4, 3, 64), (7, 64), (FEW_ROWS + 1, 1, 64)])
def test_decode_linear_equals_linear(bias, shape):
    torch.manual_seed(0)
    layer = nn.Linear(64, 200, bias=bias)
    x = torch.randn(*shape)
    expected = layer(x)
    with torch.inference_mode():
        for contiguous in (True, False):
            out = decode_linear(layer, x, contiguous=contiguous)
            assert out.shape == expected.shape
            torch.testing.assert_close(out, expected.detach(), atol=1e-5, rtol=1e-5)


def test_which_order_is_used():
    x = torch.randn(32, 1, 64)
    assert not uses_transposed_product(x)  # gradients on: training takes nn.Linear as is
    with torch.no_grad():
        assert uses_transposed_product(x)
        assert not uses_transposed_product(torch.randn(FEW_ROWS + 1, 64))
        layer = nn.Linear(64, 10)
        view = decode_linear(layer, x[:, 0], contiguous=False)
        assert not view.is_contiguous() and decode_linear(layer, x[:, 0]).is_contiguous()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows", [1, 32, 128, FEW_ROWS + 1])
def test_prepacked_linear_equals_linear(bias, rows):
    from clearformer.model.linear import prepacked_linear

    torch.manual_seed(0)
    layer = nn.Linear(64, 300, bias=bias)
    x = torch.randn(rows, 64)
    expected = layer(x).detach()
    with torch.inference_mode():
        out = prepacked_linear(layer, x)
        assert out.shape == expected.shape
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        # packed for one row count, used for another
        torch.testing.assert_close(prepacked_linear(layer, x[:3]), expected[:3], atol=1e-5, rtol=1e-5)


def test_prepacked_weight_follows_training_and_stays_out_of_the_state_dict():
    from clearformer.model.linear import PREPACKING, prepacked_linear

    torch.manual_seed(0)
    layer = nn.Linear(16, 40)
    x = torch.randn(8, 16)
    with torch.inference_mode():
        before = prepacked_linear(layer, x)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    layer(x).square().sum().backward()
    optimizer.step()  # changes the weight in place
    with torch.inference_mode():
        after = prepacked_linear(layer, x)
        torch.testing.assert_close(after, layer(x), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(before, after)
    assert set(layer.state_dict()) == {"weight", "bias"}
    if PREPACKING:
        assert hasattr(layer, "_prepacked")
    y = prepacked_linear(layer, x)  # gradients on: the plain product, which backpropagates
    assert y.requires_grad
