"""What the exercises are checked against: clearformer's own modules, called in one place.

Every exercise's expected values come from the code that trains and translates (attention.py,
embedding.py, the model's LayerNorm and head split, train/loss.py, generate/), never from a second
implementation written for the checker. The calls that depend on a module's constructor or on a
decoding signature are kept here, so a change there is one edit.
"""

from __future__ import annotations

import torch

from clearformer.config import ModelConfig
from clearformer.generate.beam import candidates
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import DecodingOptions
from clearformer.model.attention import causal_mask, explicit_attention
from clearformer.model.embedding import sinusoidal_table
from clearformer.model.transformer import Transformer
from clearformer.train.loss import label_smoothed_loss


def positional_encoding(seq_len: int, d_model: int) -> torch.Tensor:
    return sinusoidal_table(seq_len, d_model, dtype=torch.float64)


def attention(q, k, v, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    return explicit_attention(q, k, v, mask)


def causal(size: int) -> torch.Tensor:
    return causal_mask(size)


def encoder_layer(d_model: int, n_heads: int, eps: float = 1e-5):
    """The first encoder layer of a clearformer Transformer of this width (random weights, float64)."""
    config = ModelConfig(d_model=d_model, n_heads=n_heads, d_ff=2 * d_model, layer_norm_eps=eps)
    return Transformer(config).double().encoder.layers[0]


def layer_norm(x, gamma, beta, eps=1e-5) -> torch.Tensor:
    """The model's own Add & Norm LayerNorm, holding gamma and beta."""
    norm = encoder_layer(x.shape[-1], 1, eps).add_norm_1.norm
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


def split_heads(x, n_heads: int) -> torch.Tensor:
    """MultiHeadAttention's own split: (batch, seq, d_model) -> (batch, heads, seq, d_head)."""
    return encoder_layer(x.shape[-1], n_heads).self_attention.split_heads(x, n_heads)


def merge_heads(x) -> torch.Tensor:
    """(batch, heads, seq, d_head) -> (batch, seq, heads * d_head): MultiHeadAttention.forward's concat line."""
    batch, heads, seq, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * d_head)


def smoothed_loss(logits, labels, pad_id: int, smoothing: float = 0.1) -> torch.Tensor:
    """The training loss per non-pad token: clearformer's summed loss divided by the token count."""
    total, _, count = label_smoothed_loss(logits, labels, pad_id, smoothing)
    return total / max(count, 1)


def greedy(model, src_ids: torch.Tensor, max_new_tokens: int) -> list[int]:
    """clearformer's greedy decoder (as `translate` runs it): the generated ids, <eos> included if produced."""
    decoded = greedy_decode(model, src_ids, DecodingOptions(max_new=max_new_tokens, with_scores=False))
    return decoded.tokens[0, : int(decoded.lengths[0])].tolist()


def beam_step(log_probs, beam_scores, beam_size: int):
    """One step of clearformer's beam search: the best `beam_size` extensions (scores, source beams, tokens)."""
    scores, beams, tokens = candidates(log_probs.clone(), beam_scores[None], beam_size)
    return scores[0, :beam_size], beams[0, :beam_size], tokens[0, :beam_size]
