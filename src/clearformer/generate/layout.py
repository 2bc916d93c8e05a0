"""A decoding speed layout for the model's linear layers, swapped in by the search (as gpt-fast's
quantize.py swaps its layers): y = x W^T + b, with the product laid out for the rows it has.

A decoding step multiplies a few rows (one per sequence decoded) by a wide weight, the largest being
the output projection (vocabulary x d_model). On the CPU with several threads the math library runs
x W^T for such shapes on little more than one thread, while the same numbers computed as
(W x^T + b)^T split the weight's rows across the threads (BENCHMARKS.md, "Decoding: each switch on
against off (alternating A/B)", switch `few_rows_layout`). It is a layout, not other math: the same
weights and the same sums, equal to float rounding.

model/ builds plain `nn.Linear` layers, the paper's. `use_few_rows_layout(model)`, called when a search
starts (generate/state.py), turns each of them, MLA's (model/latent.py) included, into a `FewRowsLinear`:
the same module with the same parameters (a tied weight stays tied), whose forward picks the layout.
Training never takes it (it needs gradients off), so a model decoded during training trains on as
`nn.Linear` bit for bit.
"""

from __future__ import annotations

import torch
from torch import nn

# At most this many rows take the transposed layout: a greedy batch's. Beam search's rows (32 sentences
# x 4 beams) ran slower with it, so 128 was lowered to 64 (BENCHMARKS.md, "Decoding: each switch on
# against off (alternating A/B)"). 0 turns the layout off (`benchmarks/decode_speed.py --ab few_rows_layout`).
FEW_ROWS = 64


class FewRowsLinear(nn.Linear):
    """`nn.Linear` whose product, for at most FEW_ROWS rows on the CPU without gradients, is computed as
    (W x^T + b)^T; the result is then that product's transposed view, which the next operation reads as it is.

    x (..., in_features) -> (..., out_features), as nn.Linear."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(x.shape[-1], 1)
        # Only without gradients (decoding): training keeps nn.Linear's own numbers, bit for bit, so a run
        # resumed from a checkpoint of any release reaches the weights a straight run reaches.
        if not x.is_cpu or torch.is_grad_enabled() or x.dim() < 2 or rows > FEW_ROWS or rows == 0:
            return super().forward(x)
        flat = x.reshape(rows, x.shape[-1]).t()
        product = torch.mm(self.weight, flat) if self.bias is None else torch.addmm(self.bias[:, None], self.weight,
                                                                                     flat)
        return product.t().view(*x.shape[:-1], self.weight.shape[0])


def use_few_rows_layout(model: nn.Module) -> nn.Module:
    """Turn every plain `nn.Linear` of `model` into a `FewRowsLinear`, in place (the same parameters and
    state_dict; nothing to do the second time); returns the model."""
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = FewRowsLinear
    return model
