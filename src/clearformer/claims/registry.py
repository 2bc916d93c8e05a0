"""The five claims: number, short name, the claim as the tutorials state it, where, and its module."""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    number: int
    slug: str  # names the result files: claimN-slug[-quick].json / .png
    statement: str
    sources: str  # the seed tutorials (the material this project started from) that state it
    module: str
    measures: str

    def load(self):
        """The claim's module: run(quick=...), summary(results), figure(results)."""
        return importlib.import_module(self.module)


CLAIMS = (
    Claim(1, "parallel", "Transformers process all tokens in parallel, unlike RNNs which go step by step",
          "seed 000; seed 002 'Parallel Computation'", "clearformer.claims.parallel",
          "training-step time vs sequence length 8..512, GRU seq2seq + attention vs Transformer"),
    Claim(2, "scaling", "Scale by sqrt(d_k): large dot products push softmax into regions with tiny gradients",
          "seed 000", "clearformer.claims.scaling",
          "softmax entropy, softmax gain and gradient reaching Q and K, with and without 1/sqrt(d_k), d_k 4..512; "
          "the toy model trained with and without it"),
    Claim(3, "positions", "Without position information, the model can't distinguish word order",
          "seeds 000, 002", "clearformer.claims.positions",
          "'dog bites man' vs 'man bites dog': encoder rows permuted, next-token probabilities; 4 kinds"),
    Claim(4, "heads", "Multiple heads capture different patterns", "seeds 000, 001", "clearformer.claims.heads",
          "heads' attention-map diversity (Jensen-Shannon) and per-head ablation cost, trained toy model"),
    Claim(5, "residuals", "Residual connections and layer normalisation help gradients flow",
          "seeds 000, 002, 003", "clearformer.claims.residuals",
          "gradient norm per layer at init and after training: post- vs pre-norm, with/without residuals, "
          "6 and 12 layers"),
)


def claim(number: int) -> Claim:
    """The claim numbered `number` (KeyError if there is none)."""
    for entry in CLAIMS:
        if entry.number == number:
            return entry
    raise KeyError(number)
