"""Tiny random-weight models for the decoding tests (no training needed)."""

from __future__ import annotations

import seeds
import torch
from torch import nn

from clearformer.config import ModelConfig, preset
from clearformer.model.attention import padding_mask
from clearformer.model.cache import DecoderCache
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
    torch.manual_seed(seeds.seed(seed))
    return Transformer(tiny_config(vocab, **overrides)).to(dtype).eval()


class TableModel(nn.Module):
    """A stand-in translation model whose next-token probabilities depend only on the last token.

    table (vocab, vocab): row = the last token, column = the next one's probability. The source is
    ignored (its padding, id 0, still masked); `config` carries pad_id 0 and whatever a test sets
    (e.g. max_len).
    """

    def __init__(self, table: torch.Tensor, **config) -> None:
        super().__init__()
        vocab = table.shape[0]
        self.config = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, **config)
        self.log_table = nn.Parameter(table.double().log(), requires_grad=False)

    def encode(self, src_ids):
        return torch.zeros(*src_ids.shape, 1, dtype=torch.float64), padding_mask(src_ids, 0)

    def new_cache(self):
        return DecoderCache([])  # no layers: nothing to keep between steps

    def decode(self, tgt_ids, memory, src_mask, cache=None, position=0):
        return nn.functional.one_hot(tgt_ids, self.log_table.shape[0]).double()

    def project(self, hidden):
        return hidden @ self.log_table

    def log_prob(self, tokens: list[int], bos: int = 2) -> float:
        """log p(tokens) under the table, starting after <bos>."""
        previous = [bos] + tokens[:-1]
        return float(sum(self.log_table[p, t] for p, t in zip(previous, tokens, strict=True)))
