"""A decoding speed layout for the model's linear layers, applied once where a run is loaded for decoding (as
gpt-fast's quantize.py `convert_for_runtime` swaps its layers): y = x W^T + b, with the product laid out for
the rows it has.

A decoding step multiplies a few rows (one per sequence decoded) by a wide weight, the largest being
the output projection (vocabulary x d_model). On the CPU with several threads the math library runs
x W^T for such shapes on little more than one thread, while the same numbers computed as
(W x^T + b)^T split the weight's rows across the threads (BENCHMARKS.md, "Decoding: each switch on
against off (alternating A/B)", switch `few_rows_layout`). It is a layout, not other math: the same
weights and the same sums, equal to float rounding.

model/ builds plain `nn.Linear` layers, the paper's. `for_decoding(model)`, called once where a run is
loaded for decoding (the translator, `generate/translator.py`; `lm generate`; `explain`; the server), returns
the model as decoding runs it: a copy of its module tree that shares every parameter and buffer with the model
(no weight copied, a tied weight still tied, training the model changes what the copy decodes), in which each
plain `nn.Linear`, MLA's (model/latent.py) included, is a `FewRowsLinear` whose forward picks the layout. The
model given is never changed: a caller's model keeps its classes (tests/generate/test_layout.py). The search
itself (generate/state.py) decodes whatever model it is given, and changes nothing.
"""

from __future__ import annotations

import copy
import itertools

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


def for_decoding(model: nn.Module) -> nn.Module:
    """`model` as decoding runs it (see the module docstring): a copy of the module tree sharing every parameter
    and buffer, each plain `nn.Linear` a `FewRowsLinear`; `model` itself when it has no plain `nn.Linear` left
    (already converted: applying it twice does nothing). `model` is left as it was."""
    if not any(type(module) is nn.Linear for module in model.modules()):
        return model
    shared = {id(tensor): tensor for tensor in itertools.chain(model.parameters(), model.buffers())}
    runtime = copy.deepcopy(model, shared)
    for parent in list(runtime.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                swapped = FewRowsLinear.__new__(FewRowsLinear)
                swapped.__dict__ = child.__dict__  # the copy's own state (its parameters: the model's)
                setattr(parent, name, swapped)
    return runtime
