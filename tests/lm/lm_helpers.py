"""Tiny language-model configs for the LM tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

import dataclasses

import torch
from seeds import seed

from clearformer.config import preset, variant_overrides
from clearformer.model.lm import LanguageModel

SUBJECTS = ["the dog", "the cat", "a man", "the woman", "the king", "my son"]
VERBS = ["ran to", "walked into", "looked at", "came to", "went into"]
PLACES = ["the house", "the city", "the field", "the river", "the temple"]


def tiny_config(variant: str = "mha", positional: str = "rope", **overrides):
    """A 2-layer, 4-head, d_model=16 language model config for `variant`."""
    fields = variant_overrides(variant, 16, 4)
    if variant == "mla" and positional != "rope":
        fields["mla"] = dataclasses.replace(fields["mla"], qk_rope_head_dim=0)
    fields.update(overrides)
    return preset("lm-tiny", tgt_vocab_size=40, d_model=16, n_heads=4, d_ff=32, max_len=64,
                  positional=positional, **fields)


def tiny_model(variant: str = "mha", positional: str = "rope", dtype=torch.float64, **overrides):
    torch.manual_seed(seed(0))
    return LanguageModel(tiny_config(variant, positional, **overrides)).to(dtype).eval()
