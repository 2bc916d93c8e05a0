"""The model's linear layers: y = x W^T + b, with the product laid out for the rows it has.

`Linear` is `torch.nn.Linear` (the same parameters, names and initialisation) whose product picks
its memory layout. A decoding step multiplies a few rows (one per sequence decoded) by a wide weight, the
largest being the output projection (vocabulary x d_model). On the CPU with several threads the
math library runs x W^T for such shapes on little more than one thread, while the same numbers
computed as (W x^T + b)^T split the weight's rows across the threads (BENCHMARKS.md, "Decoding: each
switch on against off (alternating A/B)", switch `few_rows_layout`). It is a layout, not other math:
the same weights and the same sums, equal to float rounding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# At most this many rows take the transposed layout: a greedy batch's. Beam search's rows (32 sentences
# x 4 beams) ran slower with it, so 128 was lowered to 64 (BENCHMARKS.md, "Decoding: each switch on
# against off (alternating A/B)"). 0 turns the layout off (`benchmarks/decode_speed.py --ab few_rows_layout`).
FEW_ROWS = 64


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x W^T + b: x (..., in_features), weight (out_features, in_features) -> (..., out_features).

    For at most FEW_ROWS rows on the CPU, without gradients, computed as (W x^T + b)^T; the result is
    then that product's transposed view, which the next operation reads as it is.
    """
    rows = x.numel() // max(x.shape[-1], 1)
    # Only without gradients (decoding): training keeps nn.Linear's own numbers, bit for bit, so a run
    # resumed from a checkpoint of any release reaches the weights a straight run reaches.
    if not x.is_cpu or torch.is_grad_enabled() or x.dim() < 2 or rows > FEW_ROWS or rows == 0:
        return F.linear(x, weight, bias)
    flat = x.reshape(rows, x.shape[-1]).t()
    product = torch.mm(weight, flat) if bias is None else torch.addmm(bias[:, None], weight, flat)
    return product.t().view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """`nn.Linear` whose forward is `linear` above."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
