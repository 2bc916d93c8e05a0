"""Linear layers at decoding time: the same y = x W^T + b, multiplied in the order that is faster for few rows.

A decoding step with a KV cache pushes only a few rows (one per hypothesis) through every linear
layer. For such a skinny x, MKL's `x @ W^T` runs well below this CPU's matmul rate (it appears to
re-pack the large weight on every call); the transpose, y^T = W x^T + b, runs faster.
On this project's 2-core CPU box (MKL on AMD EPYC, 2 threads) that made the 32-row products about
1.5x (256 -> 256) to 2x (256 -> 8000, the output projection) faster; `benchmarks/decode_speed.py`
measures the effect on whole decoding runs.

Training (gradients on) and large batches (the encoder, teacher forcing) take `nn.Linear` as is.

The output projection (d_model -> vocabulary, the largest weight of a step) goes further, through
`prepacked_linear`: oneDNN with the weight reordered once into the layout its kernel reads. Alone
the two run alike (0.9 ms for 32 rows x 256 -> 8000); inside a decoding loop, where the other layers'
weights have pushed this one out of the CPU caches, the prepacked weight streams from memory about
1.8x faster (2.2 ms -> 1.2 ms after a 36 MB cache flush, 2 threads), and whole decoding runs gained
5-8% (greedy and beam 4, interleaved A/B). CTranslate2 uses oneDNN's sgemm on this CPU as well.
The other layers measured no gain this way.
"""

from __future__ import annotations

import torch
from torch import nn

FEW_ROWS = 128  # beam 4 x 32 sentences; larger inputs (the encoder, training) were not measured to gain


def uses_transposed_product(x: torch.Tensor) -> bool:
    """Whether `decode_linear` would compute x's product as W x^T (inference on CPU, few rows)."""
    return x.is_cpu and not torch.is_grad_enabled() and x.numel() <= FEW_ROWS * x.shape[-1]


def decode_linear(layer: nn.Linear, x: torch.Tensor, contiguous: bool = True) -> torch.Tensor:
    """layer(x) for x (..., in_features) -> (..., out_features), the same numbers up to rounding.

    With few rows the result is computed as (W x^T + b)^T; `contiguous=False` returns that as a
    transposed view (for the output projection, where a copy of (rows, vocab) would cost more
    than reading the view).
    """
    if not uses_transposed_product(x):
        return layer(x)
    out = transposed_product(layer, x.reshape(-1, x.shape[-1]))
    if contiguous:
        out = out.contiguous()
    return out.reshape(*x.shape[:-1], out.shape[-1])


def transposed_product(layer: nn.Linear, flat: torch.Tensor) -> torch.Tensor:
    """flat (rows, in_features) -> layer(flat) computed as (W flat^T + b)^T: a transposed view (rows, out_features).

    No checks: for callers that know the input qualifies (`uses_transposed_product`).
    """
    bias = layer.bias
    if bias is None:
        return (layer.weight @ flat.t()).t()
    return torch.addmm(bias.unsqueeze(1), layer.weight, flat.t()).t()


def _prepacking_available() -> bool:
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


PREPACKING = _prepacking_available()


def prepacked_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """layer(x) for x (rows, in_features) -> (rows, out_features), the same numbers up to rounding.

    At a decoding step on CPU (see `uses_transposed_product`) the product runs through oneDNN with
    the weight prepacked; the packed copy lives on the layer (not in its state dict) and is packed
    again whenever the weight changed (a training step bumps the weight's version). Elsewhere, or
    without oneDNN, this is `decode_linear(layer, x, contiguous=False)`.
    """
    weight = layer.weight
    if not (PREPACKING and x.dim() == 2 and weight.dtype == torch.float32 and x.dtype == torch.float32
            and uses_transposed_product(x)):
        return decode_linear(layer, x, contiguous=False)
    key = (weight.data_ptr(), weight._version, tuple(weight.shape))
    if getattr(layer, "_prepacked_key", None) != key:
        # The batch size is only a hint for the layout; other row counts use the same packed weight.
        layer._prepacked = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), x.shape[0])
        layer._prepacked_key = key
    bias = layer.bias.detach() if layer.bias is not None else None
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), layer._prepacked, bias, "none", [], "")
