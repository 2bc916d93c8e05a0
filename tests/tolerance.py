"""The suite's one rule for comparing float32 numbers that two computations of the same math produce.

Two float32 computations of the same formula (ours and a peer's with copied weights, the fused and the explicit
path, a cached step and the full pass, a golden value worked out by hand) differ by rounding only, and how much
depends on the machine: each sum of n terms may be added in any order and with or without fused multiply-adds
(oneDNN, MKL and OpenBLAS block, vectorise and thread their products differently, for AVX2 or AVX-512). Whatever
the order, a float32 sum of n terms is off by at most n * u * (the sum of the terms' sizes), u = 2**-24 float32's
unit roundoff (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 3.1: gamma_n). The rule:

    atol = depth * EPSILON * scale      (rtol 0; EPSILON = 2 * u = 2**-23, float32's machine epsilon)

- depth: how many float32 terms are summed along the longest chain of reductions from the inputs to the values
  compared: a d-long dot product is d; an attention layer, its projections' width + the keys attended + the
  head's width + its output projection's width; a feed-forward block, d_model + d_ff; a stack, its layers' sum.
  `depth_of` adds them up for a Transformer's sizes.
- scale: the size of the values compared, at least 1 (a value near zero carries the error of the larger terms
  that cancelled into it); by default the expected values' largest magnitude.
- EPSILON rather than u: a factor of 2 for the error the inputs of each sum already carry (a softmax or a layer
  norm passes its input's relative error on, a little amplified).

A tolerance from this rule holds on any BLAS build, yet stays thousands of times below what a real defect costs
(a wrong mask, scale or weight moves the values by tenths). A golden value stored with 6 decimals adds its own
rounding (GOLDEN_ROUNDING). Values compared in float64 or bit for bit (the same kernels on the same data: a
resumed run, a copied weight) keep their exact or float64 tolerances: the rule is for float32 rounding only.
"""

from __future__ import annotations

import torch

EPSILON = torch.finfo(torch.float32).eps  # 2**-23
GOLDEN_ROUNDING = 5e-7  # tests/golden/seed_examples.json keeps 6 decimals
# The depth of the seeds' worked examples (golden/seed_examples.json): the longest chain of float32 sums is X
# (token + position: 1), Q or K (d_k = 4 terms), the scores (4), the softmax over <= 4 keys, the weights times
# V (<= 4 rows), W_O (<= 4).
SEED_EXAMPLES_DEPTH = 1 + 4 + 4 + 4 + 4 + 4


def float32_atol(depth: int, scale: float = 1.0) -> float:
    """The rule's absolute tolerance: depth * EPSILON * max(scale, 1)."""
    return depth * EPSILON * max(float(scale), 1.0)


def depth_of(d_model: int, d_ff: int = 0, keys: int = 0, encoder_layers: int = 0, decoder_layers: int = 0,
             vocabulary: bool = False) -> int:
    """The rule's depth for a Transformer of these sizes: per attention block d_model (Q, K, V projections)
    + `keys` (the weights times V) + d_model (the scores, summed over the heads' widths) + d_model (W_O); per
    feed-forward block d_model + d_ff; a decoder layer has two attention blocks; `vocabulary`: the output
    projection's d_model more (logits). keys defaults to d_model (a bound for the sentences tests use)."""
    attention = 3 * d_model + (keys or d_model)
    feed_forward = d_model + d_ff
    return (encoder_layers * (attention + feed_forward) + decoder_layers * (2 * attention + feed_forward)
            + (d_model if vocabulary else 0))


def transformer_depth(config) -> int:
    """depth_of for a clearformer ModelConfig's logits (keys bounded by d_model, as for the tests' sentences)."""
    return depth_of(config.d_model, config.d_ff, encoder_layers=config.n_encoder_layers,
                    decoder_layers=config.n_decoder_layers, vocabulary=True)


def _scale(expected, scale: float | None) -> float:
    if scale is not None:
        return scale
    values = torch.as_tensor(expected).detach()
    return float(values.abs().max()) if values.numel() else 1.0


def assert_float32_close(actual, expected, depth: int, scale: float | None = None, msg: str | None = None) -> None:
    """assert_close with the rule's tolerance (scale: the expected values' largest magnitude unless given)."""
    atol = float32_atol(depth, _scale(expected, scale))
    actual, expected = torch.as_tensor(actual).detach(), torch.as_tensor(expected).detach()
    if actual.dtype != expected.dtype:
        actual, expected = actual.double(), expected.double()
    torch.testing.assert_close(actual, expected, atol=atol, rtol=0, msg=msg)


def float32_close(actual, expected, depth: int, scale: float | None = None) -> bool:
    """The rule as a boolean (for `assert not ...`, or an assertion that names what differed)."""
    atol = float32_atol(depth, _scale(expected, scale))
    return torch.allclose(torch.as_tensor(actual).double(), torch.as_tensor(expected).double(), atol=atol, rtol=0)


def golden_close(actual, expected, depth: int = SEED_EXAMPLES_DEPTH) -> bool:
    """A float32 computation against a golden value stored with 6 decimals: the rule plus the stored rounding."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    atol = GOLDEN_ROUNDING + float32_atol(depth, _scale(expected, None))
    return torch.allclose(torch.as_tensor(actual, dtype=torch.float64), expected, atol=atol, rtol=0)
