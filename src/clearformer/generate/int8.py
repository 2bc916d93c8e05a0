"""int8 decoding on the CPU: the linear layers' weights as 8-bit integers, and each product's input rows
quantized to 8-bit integers as it runs, the product itself in integers (`torch._int_mm`: int8 x int8 summed in
int32), then scaled back to float. Swapped in once where a run is loaded for decoding, as gpt-fast's
quantize.py swaps its layers; model/ keeps the paper's float layers, and training never sees these.

    y = (q_W x_hi + q_W x_lo / 127) s_x s_W + b,   s_x = max|x_row| / 127 (one scale per row)
        x_hi = round(x / s_x), x_lo = round((x / s_x - x_hi) * 127)      (both int8: |x_lo| <= 64)
        q_W = round(W / s_W), s_W = max|W_row| / 127 (one scale per output)

Why int8: a decoding step multiplies a few rows (one per hypothesis) by every weight matrix; the large ones (the
output projection above all) are read from memory at every step, and int8 weights are a quarter of float32's bytes
(BENCHMARKS.md, "Decoding speed (greedy and beam 4, KV cache, peers)"). Why a scale per input row, not torch's
dynamic quantization (`quantize_dynamic`, one scale for the whole input tensor): with one scale per tensor a
sentence's numbers depend on the other sentences of its batch, and a translation must never depend on its batch;
with one per row and the product in integers (exact), every row's result is the same in any batch, bit for bit.

Why each input row as two int8 rows (its integers and what they left, x_hi and x_lo, multiplied in the same
`_int_mm` call): one int8 row per input moved 41 of Firefox's student's 260 test translations away from float32's,
its weights being exact; the second row makes the input ~14-bit, which moves none (BENCHMARKS.md, "int8 against
float32: where the translations move").

Which layers (`quantize_int8`): the output projection, and every layer whose file shipped int8 integers. Firefox's
students ship their matrices in intgemm's int8 (W = q / scale, one scale per matrix, `interop/marian_bin.py`): a
weight on such a lattice is taken as those very integers with that scale, not requantized (`Int8Summary.shipped`),
so int8 arithmetic with two input rows changes none of its translations. A float-trained layer stays float:
requantizing its weights (a scale per output row) is what moved a trained run's translations (small-fr: 250 of
260 beam 4 kept, every layer in int8), and at these sizes the int8 layer is not faster than the float one (its
input's quantization and the output's scaling are tensor operations of their own: at 128 rows they cost more than
the integer product saves; one sentence at a time each operation's dispatch costs what the product does). The
output projection is the one that pays: the largest matrix, read at every step, a quarter of the bytes (faster
one sentence at a time, greedy and beam; slower at beam 4 over 32 sentences), and what int8 moves there is the
argmax among near-ties, so `Int8Output` recomputes each row's few best logits in float (the float matrix is the
embedding table in a tied model, kept anyway) before the search reads them: small-fr's translations are then
float32's (BENCHMARKS.md, the same section and "Decoding speed (greedy and beam 4, KV cache, peers)").
`requantize=True` turns every layer int8 (the benchmarks' comparison).

Which kernel: `torch._int_mm` everywhere, but the output projection's product goes through oneDNN's int8 kernel
(`torch.ops.onednn.qlinear_pointwise`, its weight packed once) on a CPU with VNNI: the same exact integer sums,
with the int32 -> float conversion and the weight's scales inside the kernel instead of passes of their own over
rows x vocabulary numbers (`Int8Output.ranking`). At beam 4's 128 rows `_int_mm` left its int8 output projection
no faster than the float one; one sentence at a time oneDNN's call costs more than `_int_mm`'s at the hidden
layers' sizes (BENCHMARKS.md, "int8 against float32: where the translations move"), so they keep `_int_mm`. The
kernel is a property of the machine, never of the batch: a row's logits are the same in any batch on either.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from clearformer.generate.shortlist import sliced_output
from clearformer.model.transformer import OutputProjection
from clearformer.record import trace

# How far from an integer W / scale may be and still count as the lattice a file shipped: float32 rounding of
# q / scale is ~1e-7 relative, a weight requantized from float is off by up to 0.5.
LATTICE_TOLERANCE = 1e-3
TINY = torch.finfo(torch.float32).tiny  # the scale of an all-zero row: its integers are 0 all the same
# 127 as a tensor: a Python number in a tensor operation is first copied into one (aten::_to_copy), which at
# one sentence costs as much as the operation (BENCHMARKS.md, "int8 against float32: where the translations move")
LEVELS = torch.tensor(127.0)
REMAINDER = torch.tensor(1.0 / 127.0)  # the second int8 row's weight: what the integers left, in 1/127ths


@dataclass(frozen=True)
class Int8Summary:
    """What `quantize_int8` did: layers turned int8, of which `shipped` kept the integers their file had."""

    layers: int
    shipped: int

    def __str__(self) -> str:
        kept = f", {self.shipped} with the int8 values their file ships" if self.shipped else ""
        return f"{self.layers} linear layers in int8{kept}"


def shipped_scale(weight: torch.Tensor) -> float | None:
    """The one scale s with weight = q * s for integers q in [-127, 127] and max|q| = 127 (intgemm's
    quantization, scale = max|W| / 127), when the weight lies on that lattice; else None."""
    peak = float(weight.abs().max())
    if peak == 0.0:
        return None
    scale = peak / 127.0
    steps = weight.double() / scale
    return scale if float((steps - steps.round()).abs().max()) < LATTICE_TOLERANCE else None


ZERO_POINT = 128  # oneDNN's int8 product takes its input as unsigned bytes: the integers x_int + 128


def onednn_weight(weight: torch.Tensor) -> torch.Tensor | None:
    """weight (out, in) int8 -> the same integers packed for oneDNN's int8 product (`torch.ops.onednn`, the kernels
    torch's own x86 int8 path runs), or None where this machine should use `torch._int_mm`: torch without oneDNN's
    int8 operators, or a CPU without VNNI. With VNNI each unsigned x signed byte product is summed straight into
    int32, exact; without it x86 kernels sum pairs of products in int16 first, which can saturate (255 x 127 x 2 >
    32,767), and a saturated sum would no longer be the integer product the module docstring promises. Exact
    integers are what keep a row's numbers the same in any batch (tests/generate/test_int8.py)."""
    vnni = getattr(torch.cpu, "_is_vnni_supported", None)  # private, and absent from older torch (>= 2.3 allowed)
    if weight.device.type != "cpu" or vnni is None or not vnni():
        return None
    try:
        return torch.ops.onednn.qlinear_prepack(weight, None)
    except (AttributeError, RuntimeError):  # a torch built without oneDNN's int8 operators
        return None


class Int8Linear(nn.Module):
    """A linear layer in int8: x (..., in) -> (..., out), as the `nn.Linear` it came from up to int8 rounding.

    weight (out, in) int8 (read transposed by `torch._int_mm`: the faster layout, measured), scale (out,)
    float32, bias (out,) or None; `shipped`: the integers are the ones the model's file shipped (one scale
    for the whole matrix); `passes`: each input row as 2 int8 rows (its integers and their remainder) or 1."""

    def __init__(self, linear: nn.Linear, passes: int = 2) -> None:
        super().__init__()
        self.passes = passes
        weight = linear.weight.detach().float()
        shipped = shipped_scale(weight)
        if shipped is not None:
            scale = torch.full((weight.shape[0],), shipped)
        else:
            scale = (weight.abs().amax(dim=1) / 127.0).clamp(min=TINY)
        integers = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
        self.in_features, self.out_features, self.shipped = linear.in_features, linear.out_features, shipped is not None
        self.register_buffer("weight", integers)
        self.register_buffer("scale", scale.float())
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        # s_W / 127: with the row's peak p, the product's scale is p s_W / 127 (s_x = p / 127), one multiply
        self.register_buffer("step_scale", self.scale / 127.0)
        self.weight_t = self.weight.t()  # (in, out): the layout `_int_mm` reads, a view made once, not per call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Few tensor operations on purpose: at one sentence a step multiplies 1 x 256 rows, and each
        # operation's dispatch costs about what the product does (BENCHMARKS.md, "Firefox's en-pt student").
        rows = x.reshape(-1, self.in_features)
        count = rows.shape[0]
        # the row's peak as amax of abs: linalg.vector_norm(inf) took 13x as long at 128 x 256 (same numbers)
        peak = rows.abs().amax(dim=1, keepdim=True).clamp_(min=TINY)
        steps = rows * (LEVELS / peak)  # x / s_x, in [-127, 127]
        high = steps.round()
        # The integers go into a buffer of their own, cast as they are written: torch 2.13's `_int_mm` returned
        # wrong sums for a one-row input viewed with strides (1, 1), as a transposed one-row view has.
        if self.passes == 2:  # the integers, then what they left in 1/127ths, as one new (2 x rows, in) buffer
            integers = torch.cat((high, steps.sub_(high).mul_(LEVELS).round_())).to(torch.int8)
        else:
            integers = torch.empty((count, self.in_features), dtype=torch.int8)
            integers[:] = high
        integer = torch._int_mm(integers, self.weight_t)  # (passes x rows, out) int32: hi rows, then lo rows
        # Three tensor operations over the output (int32 becomes float within the first): the two rows' sum, the
        # row's scale, the output's scale and bias
        out = torch.mul(integer, peak) if self.passes == 1 else torch.addcmul(integer[:count], integer[count:],
                                                                              REMAINDER).mul_(peak)
        out = out.mul_(self.step_scale) if self.bias is None else torch.addcmul(self.bias, out, self.step_scale)
        return out.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, shipped={self.shipped}, "
                f"passes={self.passes}")


# How many of a row's best int8 logits the output layer recomputes in float: beam search keeps 2 x beam
# candidates per row (beam 4: 8), greedy the first; BENCHMARKS.md, "int8 against float32: where the
# translations move", measured how many it takes.
RESCORED = 8


class Int8Output(Int8Linear):
    """The output projection's linear layer (vocab rows): logits in int8 (one int8 row per input: they only rank
    the vocabulary), then each row's `RESCORED` best recomputed in float, hidden . W[id] + b[id], from the float
    matrix (the embedding table itself in a tied model: no copy). The search's argmax and its beams' best
    candidates are float32's; the other logits (the softmax's normaliser) stay int8's.

    Each rescored logit is a sum over its own row (no matrix product whose blocking could follow the batch): a
    row's logits are the same in any batch."""

    def __init__(self, linear: nn.Linear, rescored: int = RESCORED) -> None:
        super().__init__(linear, passes=1)
        self.rescored = min(rescored, self.out_features)
        self.float_weight = linear.weight.detach()  # shares the storage: a tied table is not copied
        # oneDNN's int8 product, its weight packed once (`onednn_weight`; None: `torch._int_mm`); the weight's
        # zero points, all 0 (symmetric)
        self.packed = onednn_weight(self.weight)
        self.zero_points = torch.zeros(self.out_features, dtype=torch.long)

    def __getstate__(self) -> dict:
        # oneDNN's packed weight is opaque (no storage to copy): a copy of the model (copy.deepcopy) packs again
        return {**self.__dict__, "packed": None}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.packed = onednn_weight(self.weight)

    def ranking(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) -> the int8 logits (..., out): (q_W x_int) s_x s_W + b, one int8 row per input row.

        Where oneDNN's product runs (`onednn_weight`), the row's integers go in as unsigned bytes x_int + 128 (its
        kernel's input type, the zero point 128 taken off inside) and come back as floats already times s_W; the
        row's scale s_x and the bias follow in one operation written over them. The same integer sums as
        `torch._int_mm`'s, in less time at beam 4's 128 rows, where `_int_mm` also left the int32 ->
        float conversion and both scales as operations of their own over the whole vocabulary (BENCHMARKS.md, "int8
        against float32: where the translations move", fourth pass)."""
        if self.packed is None:
            return super().forward(x)
        rows = x.reshape(-1, self.in_features)
        peak = rows.abs().amax(dim=1, keepdim=True).clamp_(min=TINY)
        codes = torch.round(rows * (LEVELS / peak)).add_(ZERO_POINT).to(torch.uint8)  # x / s_x + 128, in [1, 255]
        logits = torch.ops.onednn.qlinear_pointwise(codes, 1.0, ZERO_POINT, self.packed, self.scale, self.zero_points,
                                                    None, 1.0, 0, torch.float32, "none", [], "")
        row_scale = peak * REMAINDER  # s_x = max|x_row| / 127
        if self.bias is None:
            logits.mul_(row_scale)
        else:  # written over the product: a fresh (rows, vocab) tensor costs its page faults again
            torch.addcmul(self.bias, logits, row_scale, out=logits)
        return logits.view(*x.shape[:-1], self.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.ranking(x)
        if self.rescored == 0:
            return logits
        flat, rows = logits.view(-1, self.out_features), x.reshape(-1, self.in_features)
        best = best_ids(flat, self.rescored)  # (rows, k)
        picked = best.view(-1)
        exact = (self.float_weight.index_select(0, picked).view(*best.shape, -1) * rows[:, None, :]).sum(dim=-1)
        if self.bias is not None:
            exact += self.bias.index_select(0, picked).view_as(best)
        flat.scatter_(1, best, exact)
        return logits


# The output layer finds each row's best logits block by block: the best k lie in the k blocks of BLOCK logits
# with the highest maxima (a block outside them has k higher logits elsewhere), so one topk over the blocks'
# maxima and one over their k x BLOCK logits replace a topk over the whole vocabulary (at beam 4's 128 rows of
# 8,000, 1 thread: 1.26 ms, against about 0.6 ms for the three; BENCHMARKS.md, "int8 against float32: where the
# translations move"). The same steps for any number of rows: a row's choice does not depend on its batch.
BLOCK = 32


def best_ids(logits: torch.Tensor, k: int) -> torch.Tensor:
    """logits (rows, width) -> (rows, k) int64: the ids of each row's k highest values, in no order."""
    rows, width = logits.shape
    blocks = width // BLOCK
    if blocks <= k:
        return logits.topk(k, dim=1, sorted=False).indices
    whole = logits[:, : blocks * BLOCK].reshape(rows, blocks, BLOCK)
    chosen = whole.amax(dim=2).topk(k, dim=1, sorted=False).indices  # (rows, k) block numbers
    ids = (chosen[:, :, None] * BLOCK + torch.arange(BLOCK)).view(rows, k * BLOCK)
    if width > blocks * BLOCK:  # the last, partial block: always a candidate
        ids = torch.cat((ids, torch.arange(blocks * BLOCK, width).expand(rows, -1)), dim=1)
    return ids.gather(1, logits.gather(1, ids).topk(k, dim=1, sorted=False).indices)


def quantize_int8(model: nn.Module, passes: int = 2, rescored: int = RESCORED, requantize: bool = False) -> Int8Summary:
    """Turn linear layers of `model` into their int8 form, in place, for decoding only (the int8 layers have no
    gradients): the output projection (but a sliced one) always, its `rescored` best logits per row recomputed
    in float; every other layer whose weight is the int8 lattice its file shipped (Firefox's students), with
    `passes` int8 rows per input row; a layer whose weight would have to be requantized from float stays float
    unless `requantize` (module docstring: rounding those weights moves translations, and at these sizes the
    int8 layer is not faster; benchmarks/int8_agreement.py measures the other settings). A model whose decoder
    reads a linear layer's weight matrix itself (MLA's absorbed path) is refused with ValueError: that read
    would miss the int8."""
    if model.config.attention == "mla":
        raise ValueError("int8: MLA's absorbed decoding reads its up-projection's weight matrix; decode it in float32")
    # A sliced output projection (generate/shortlist.py) multiplies a few float rows: its full form stays float
    # too, so that beam search and scores read the same logits as the slice.
    sliced = sliced_output(model)
    kept = set() if sliced is None else {id(module) for module in sliced.full.modules()}
    outputs = {id(module.linear) for module in model.modules() if isinstance(module, OutputProjection)}
    targets = [(name, module) for name, module in model.named_modules()
               if isinstance(module, nn.Linear) and id(module) not in kept
               and (id(module) in outputs or requantize or shipped_scale(module.weight.detach()) is not None)]
    shipped = 0
    for name, linear in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        layer = Int8Output(linear, rescored) if id(linear) in outputs else Int8Linear(linear, passes)
        trace.name_as(layer, linear)
        shipped += layer.shipped
        setattr(parent, child, layer)
    model.eval()
    return Int8Summary(len(targets), shipped)
