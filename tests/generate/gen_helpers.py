"""Tiny random-weight models for the decoding tests (no training needed)."""

from __future__ import annotations

import torch

from clearformer.config import preset
from clearformer.model.transformer import Transformer

SENTENCES = [
    "I love you", "I love the cat", "the dog sleeps", "we eat bread", "you like music .",
    "Je t'aime", "J'aime le chat", "le chien dort", "nous mangeons du pain", "tu aimes la musique .",
]


def tiny_config(vocab: int, **overrides):
    """A two-layer model small enough to decode in milliseconds."""
    sizes = dict(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=16, n_heads=2, d_ff=32, max_len=32)
    return preset("toy-translate", **{**sizes, **overrides})


def random_model(vocab: int = 30, seed: int = 0, dtype=torch.float64, **overrides) -> Transformer:
    """A random Transformer in eval mode. float64 by default so that cached and uncached paths,
    which sum in different orders, cannot flip an argmax on a near-tie."""
    torch.manual_seed(seed)
    return Transformer(tiny_config(vocab, **overrides)).to(dtype).eval()
