"""Training FLOPs (forward + backward), the one count every MFU figure divides by (train/loop.py's progress
bar and metrics.csv, `clearformer learn capstone`, benchmarks/train_throughput.py).

As nanoGPT and the PaLM paper (appendix B) count them, 2 FLOPs per multiply-add and backward = 2 x forward:

    6 x (weights used in matrix products) per token
  + 6 x n_h (d_qk + d_v) x len_q x len_k per attention layer and sequence   (QK^T and weights x V)

"Used in matrix products": every parameter but the tables that are only looked up (token embeddings not
tied to the output projection, learned positions). An encoder-decoder's source side (its source
embedding and encoder) counts per real source token, the rest (target embedding, decoder, output) per real
target token; a language model has only the target side. Attention runs over the real tokens: the
encoder's self-attention src x src, the decoder's self-attention tgt x tgt and cross-attention tgt x src
(the GRU baseline: only its single-head attention over the source, d_qk = d_v = d_model). Causal masking is
not halved away, as in nanoGPT. With d_qk = d_v = d_head a language model's count is nanoGPT's
6 N + 12 L H Q T per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.embedding import LearnedPositionalEmbedding, TokenEmbedding

# The top-level parts of an encoder-decoder that read the source: their weights count per source token.
SOURCE_PARTS = ("src_embed", "encoder")
LOOKUP_TABLES = (TokenEmbedding, LearnedPositionalEmbedding, nn.Embedding)


def matmul_parameters(model: nn.Module) -> tuple[int, int]:
    """(source-side, target-side) parameters used in matrix products: every parameter of a module that is not
    a lookup table, each shared (tied) tensor counted once, on the side of the module that multiplies by it
    (a token embedding tied to the output projection counts as the projection's)."""
    seen: set[int] = set()
    source = target = 0
    for name, module in model.named_modules():
        if isinstance(module, LOOKUP_TABLES):
            continue
        for parameter in module.parameters(recurse=False):
            if id(parameter) in seen:
                continue
            seen.add(id(parameter))
            if name.split(".")[0] in SOURCE_PARTS:
                source += parameter.numel()
            else:
                target += parameter.numel()
    return source, target


def attention_width(config: ModelConfig) -> int:
    """n_h (d_qk + d_v): multiply-adds per (query, key) pair of one attention layer, all heads."""
    if config.architecture == "rnn":
        return 2 * config.d_model  # one head over the annotations: scores d, weighted sum d
    if config.attention == "mla":
        d_qk = config.mla.qk_nope_head_dim + config.mla.qk_rope_head_dim
        return config.n_heads * (d_qk + config.mla.v_head_dim)
    return 2 * config.n_heads * config.head_dim


@dataclass(frozen=True)
class FlopCount:
    """The constants of one model's count (`of(model)`), and the count of a batch from its token lengths."""

    source_weights: int
    target_weights: int
    width: int  # n_h (d_qk + d_v)
    encoder_layers: int  # with self-attention over the source (0 for a language model and the GRU)
    decoder_layers: int  # with self-attention over the target (0 for the GRU)
    cross_layers: int  # attending to the source (0 for a language model)

    @classmethod
    def of(cls, model: nn.Module) -> FlopCount:
        config = model.config
        source, target = matmul_parameters(model)
        recurrent = config.architecture == "rnn"
        return cls(source, target, attention_width(config),
                   encoder_layers=0 if recurrent else config.n_encoder_layers,
                   decoder_layers=0 if recurrent else config.n_decoder_layers,
                   cross_layers=(1 if recurrent else config.n_decoder_layers) if config.n_encoder_layers else 0)

    def per_sequence(self, src_len: torch.Tensor | float, tgt_len: torch.Tensor | float) -> torch.Tensor | float:
        """Training FLOPs of sequences of src_len real source and tgt_len real target tokens (tensors: each
        element one sequence)."""
        weights = self.source_weights * src_len + self.target_weights * tgt_len
        pairs = (self.encoder_layers * src_len * src_len + self.decoder_layers * tgt_len * tgt_len
                 + self.cross_layers * tgt_len * src_len)
        return 6 * (weights + self.width * pairs)

    def batch(self, src: torch.Tensor | None, tgt: torch.Tensor, pad_id: int | None = None) -> float:
        """Training FLOPs of a batch: src (batch, src_len) or None (a language model), tgt (batch, tgt_len)
        the positions that get a label; with `pad_id`, only the real (non-pad) tokens count."""
        def lengths(ids: torch.Tensor) -> torch.Tensor:
            real = ids != pad_id if pad_id is not None else torch.ones_like(ids, dtype=torch.bool)
            return real.sum(1).double()

        src_len = lengths(src) if src is not None else 0.0
        return float(torch.as_tensor(self.per_sequence(src_len, lengths(tgt))).sum())

    def per_token(self, seq_len: int) -> float:
        """A language model's training FLOPs per token of windows of `seq_len` (nanoGPT's figure)."""
        return self.per_sequence(0, seq_len) / seq_len
