"""Linear layers at decoding time: the same y = x W^T + b, multiplied in the order that is faster for few rows.

A decoding step with a KV cache pushes only a few rows (one per hypothesis) through every linear
layer. For such a skinny x, MKL's `x @ W^T` runs well below this CPU's matmul rate (it appears to
re-pack the large weight on every call); the transpose, y^T = W x^T + b, runs faster.
On this project's 2-core CPU box (MKL on AMD EPYC, 2 threads) that made the 32-row products about
1.5x (256 -> 256) to 2x (256 -> 8000, the output projection) faster; `benchmarks/decode_speed.py`
measures the effect on whole decoding runs.

Training (gradients on) and large batches (the encoder, teacher forcing) take `nn.Linear` as is.
"""

from __future__ import annotations

import torch
from torch import nn

FEW_ROWS = 128  # beam 4 x 32 sentences; larger inputs (the encoder, training) were not measured to gain


def uses_transposed_product(x: torch.Tensor) -> bool:
    """Whether `decode_linear` would compute x's product as W x^T (inference on CPU, few rows)."""
    return (x.device.type == "cpu" and not torch.is_grad_enabled()
            and x.numel() <= FEW_ROWS * x.shape[-1])


def decode_linear(layer: nn.Linear, x: torch.Tensor, contiguous: bool = True) -> torch.Tensor:
    """layer(x) for x (..., in_features) -> (..., out_features), the same numbers up to rounding.

    With few rows the result is computed as (W x^T + b)^T; `contiguous=False` returns that as a
    transposed view (for the output projection, where a copy of (rows, vocab) would cost more
    than reading the view).
    """
    if not uses_transposed_product(x):
        return layer(x)
    flat = x.reshape(-1, x.shape[-1])
    if layer.bias is None:
        out_t = layer.weight @ flat.t()
    else:
        out_t = torch.addmm(layer.bias[:, None], layer.weight, flat.t())
    out = out_t.t().contiguous() if contiguous else out_t.t()
    return out.reshape(*x.shape[:-1], out.shape[-1])
