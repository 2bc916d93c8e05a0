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
