"""Scaled dot-product attention, its masks, and multi-head attention (self and cross).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + mask) V

Two paths give one answer:
  * the explicit path computes QK^T, the scaling, the mask, the softmax and the product with V
    as separate tensors, each of which the recorder can see;
  * the fast path calls torch's fused `scaled_dot_product_attention`.
Training and generation use the fast path; the explicit one runs whenever a recorder is active
(or `explicit=True`), and the tests prove both agree.

Masks are boolean, `True = may attend`, shaped to broadcast against
`(batch, heads, q_len, k_len)`, and built only by the functions in this file.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from clearformer import trace
from clearformer.model.kv_buffer import append_in_time
from clearformer.model.linear import decode_linear, transposed_product

# ----------------------------------------------------------------------------- masks


def causal_mask(q_len: int, k_len: int | None = None, device: torch.device | None = None) -> torch.Tensor:
    """Lower-triangular look-ahead mask, (q_len, k_len) bool.

    Query i may attend key j when j <= i + (k_len - q_len): with a KV cache the queries are the
    last q_len positions of a k_len-long sequence.
    """
    k_len = q_len if k_len is None else k_len
    offset = k_len - q_len
    rows = torch.arange(q_len, device=device).unsqueeze(1)
    cols = torch.arange(k_len, device=device).unsqueeze(0)
    return cols <= rows + offset


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Keys that are real tokens: ids (batch, k_len) -> (batch, 1, 1, k_len) bool."""
    return (ids != pad_id)[:, None, None, :]


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the masks given (None entries are ignored); None if there are none."""
    combined = None
    for mask in masks:
        if mask is not None:
            combined = mask if combined is None else combined & mask
    return combined


# ----------------------------------------------------------------------------- the explicit path


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """softmax over the last axis with blocked cells set to -inf first (so they get weight 0).

    A row with every cell blocked (a query with nothing to look at) gets all-zero weights instead
    of NaN.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    blocked = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(blocked, dim=-1)
    return torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                       dropout: float = 0.0, scale: float | None = None,
                       recorder_prefix: nn.Module | str = "attention") -> tuple[torch.Tensor, torch.Tensor]:
    """Attention step by step, recording each intermediate.

    q (batch, heads, q_len, d_k), k (batch, heads, k_len, d_k), v (batch, heads, k_len, d_v),
    mask broadcastable to (batch, heads, q_len, k_len) ->
    output (batch, heads, q_len, d_v), weights (batch, heads, q_len, k_len).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1)
    trace.emit(recorder_prefix, "scores", scores)
    scaled = scores * scale
    trace.emit(recorder_prefix, "scaled", scaled)
    if mask is not None:
        trace.emit(recorder_prefix, "mask", mask.expand(scores.shape[:1] + (1,) + scores.shape[2:])[:, 0])
    weights = masked_softmax(scaled, mask)
    trace.emit(recorder_prefix, "weights", weights)
    if dropout > 0.0:
        weights = F.dropout(weights, p=dropout)
    output = weights @ v
    trace.emit(recorder_prefix, "head_outputs", output)
    return output, weights


# Query rows up to which two plain products are used: measured faster than the fused kernel for one row
# (a decoding step); the stacked beams of a sentence (beam <= 8 rows) take the same path, not timed apart.
SMALL_QUERY = 8


def fast_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                   dropout: float = 0.0, scale: float | None = None) -> torch.Tensor:
    """The same as `explicit_attention`'s output, through torch's fused kernel.

    A few queries (a decoding step with a KV cache: one row, or the beams of a sentence stacked)
    take two small matrix products instead: for one row the fused kernel's tiling costs more than
    it saves (benchmarks/decode_speed.py).
    A query with every key blocked gets zeros, as from the fused kernel.
    """
    if q.shape[-2] <= SMALL_QUERY and dropout == 0.0:
        scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.nan_to_num(0.0)
        return weights @ v
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scale)


def grouped_fast_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           mask: torch.Tensor | None = None, dropout: float = 0.0) -> torch.Tensor:
    """Grouped-query attention through the fused kernel, without copying keys/values per query head.

    q (batch, heads, q_len, d), k/v (batch, kv_heads, k_len, d): query heads j*group .. j*group+group-1
    share kv head j, so they are stacked as rows, (batch, kv_heads, group * q_len, d), and attend to
    that one head (the mask is repeated to match). Returns (batch, heads, q_len, d_v), the same as
    repeating k/v `group` times.
    """
    batch, heads, q_len, d = q.shape
    kv_heads, k_len = k.shape[1], k.shape[2]
    group = heads // kv_heads
    rows = q.reshape(batch, kv_heads, group * q_len, d)
    if mask is not None:
        mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
        mask = mask.expand(mask.shape[0], mask.shape[1], q_len, k_len)
        if mask.shape[1] == 1:
            mask = mask.unsqueeze(2).expand(mask.shape[0], 1, group, q_len, k_len)
        mask = mask.reshape(mask.shape[0], -1, group * q_len, k_len)
    out = F.scaled_dot_product_attention(rows, k, v, attn_mask=mask, dropout_p=dropout)
    return out.reshape(batch, heads, q_len, v.shape[-1])


def shared_memory_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            mask: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-attention when `group` consecutive query rows read one memory row (beam search: the
    beams of a sentence all attend to that sentence's encoder output), without copying the
    memory's keys and values per beam.

    q (rows, heads, q_len, d) with rows = group * batch, k (batch, heads, k_len, d),
    v (batch, heads, k_len, d_v), mask broadcastable to (batch, 1, 1, k_len)
    -> (rows, heads, q_len, d_v), the same as repeating k, v and mask `group` times on dim 0.
    The beams are stacked as query rows of their sentence, (batch, heads, group * q_len, d).
    """
    rows, heads, q_len, d = q.shape
    batch = k.shape[0]
    group = rows // batch
    if group == 1:  # one query row per memory row: nothing to stack
        return fast_attention(q, k, v, mask)
    stacked = q.reshape(batch, group, heads, q_len, d).transpose(1, 2).reshape(batch, heads, group * q_len, d)
    out = fast_attention(stacked, k, v, mask)
    return out.reshape(batch, heads, group, q_len, -1).transpose(1, 2).reshape(rows, heads, q_len, -1)


def repeat_memory_rows(group: int, *tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    """Each tensor's rows (dim 0) repeated `group` times in place (row i -> rows i*group .. i*group+group-1);
    a tensor with one row (a broadcast mask) or None is left as it is."""
    return [t if t is None or t.shape[0] == 1 else t.repeat_interleave(group, dim=0) for t in tensors]


# ----------------------------------------------------------------------------- multi-head


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Self-attention passes the same sequence as `query` and `memory`; cross-attention passes the
    decoder states as `query` and the encoder output as `memory`. The per-head projections W_i are
    stored side by side in one (d_model -> heads * d_head) linear layer each, exactly the layout of
    `torch.nn.MultiheadAttention` split into three.

    With `n_kv_heads < n_heads` several query heads share one key/value head: grouped-query
    attention (GQA); `n_kv_heads = 1` is multi-query attention (MQA).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True,
                 dropout: float = 0.0, rotary: nn.Module | None = None) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.w_o = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.rotary = rotary
        self.explicit = False  # force the explicit path even without a recorder

    def steps_plainly(self) -> bool:
        """Whether `decode_step` may stand in for `forward`: plain multi-head attention (no GQA, no
        rotary positions) and no forced explicit path."""
        return self.rotary is None and self.n_kv_heads == self.n_heads and not self.explicit

    def decode_step(self, h: torch.Tensor, cache: dict, cross: bool = False,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        """One query row per hypothesis at a cached decoding step (inference, few rows):
        h (rows, d_model) -> (rows, d_model), the same numbers as `forward` on h[:, None].

        The same products and the same attention functions, without `forward`'s general plumbing (which
        costs more Python than arithmetic at this size). Self-attention appends the new key and value
        to `cache`; cross-attention (`cross=True`) reads the memory's keys and values that `forward`
        stored there at the first step, one row per sentence for `rows // sentences` consecutive
        hypotheses (the beams), with `mask` (sentences, 1, 1, src_len).
        """
        rows = h.shape[0]
        heads, d_head = self.n_heads, self.d_head
        q = transposed_product(self.w_q, h).reshape(rows, 1, heads, d_head).transpose(1, 2)
        if cross:
            out = shared_memory_attention(q, cache["k"], cache["v"], mask)  # (rows, heads, 1, d_head)
        else:
            k = transposed_product(self.w_k, h).reshape(rows, 1, heads, d_head).transpose(1, 2)
            v = transposed_product(self.w_v, h).reshape(rows, 1, heads, d_head).transpose(1, 2)
            k = cache["k"] = append_in_time(cache.get("k"), k, dim=2)
            v = cache["v"] = append_in_time(cache.get("v"), v, dim=2)
            out = fast_attention(q, k, v)
        return transposed_product(self.w_o, out.transpose(1, 2).reshape(rows, heads * d_head))

    def split_heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        """(batch, seq, heads * d_head) -> (batch, heads, seq, d_head)."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, heads, self.d_head).transpose(1, 2)

    def forward(self, query: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: dict | None = None, static_kv: bool = False, position: int = 0) -> torch.Tensor:
        """query (batch, q_len, d_model), memory (batch, k_len, d_model) or None for self-attention,
        mask broadcastable to (batch, heads, q_len, k_len) -> (batch, q_len, d_model).
        In cross-attention memory (and mask) may instead have batch / group rows, each read by
        `group` consecutive query rows (the beams of one sentence; see `shared_memory_attention`).

        `cache` (a dict this layer owns during incremental decoding) keeps keys and values:
        for self-attention new keys/values are appended each step; with `static_kv=True`
        (cross-attention) they are computed from `memory` once and reused. `position` is the
        absolute position of query[:, 0] (for rotary embeddings).
        """
        is_self = memory is None
        memory = query if is_self else memory
        # Rotary positions only make sense within one sequence: never in cross-attention.
        rotate = self.rotary is not None and is_self
        q = self.split_heads(decode_linear(self.w_q, query), self.n_heads)
        if rotate:
            q = self.rotary(q, position)
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            # Appended to a self-attention cache, the new keys/values are copied by the append itself.
            appended = cache is not None and not static_kv
            k = self.split_heads(decode_linear(self.w_k, memory, contiguous=not appended), self.n_kv_heads)
            v = self.split_heads(decode_linear(self.w_v, memory, contiguous=not appended), self.n_kv_heads)
            if rotate:
                k = self.rotary(k, position)
            if cache is not None:
                if not static_kv:  # appended in place, see kv_buffer
                    k = append_in_time(cache.get("k"), k, dim=2)
                    v = append_in_time(cache.get("v"), v, dim=2)
                else:
                    # split_heads returns a transposed view; stored as is, every later step's
                    # product with it would copy it again.
                    k, v = k.contiguous(), v.contiguous()
                cache["k"], cache["v"] = k, v
        trace.emit(self, "Q", q)
        trace.emit(self, "K", k)
        trace.emit(self, "V", v)
        dropout = self.dropout if self.training else 0.0
        # Beam search passes one memory row per sentence and `group` query rows (its beams).
        group = q.shape[0] // k.shape[0]
        if group > 1 and (self.explicit or trace.recording() or self.n_kv_heads != self.n_heads or dropout):
            k, v, mask = repeat_memory_rows(group, k, v, mask)
            group = 1
        if group > 1:
            heads = shared_memory_attention(q, k, v, mask)
        elif self.explicit or trace.recording():
            if self.n_kv_heads != self.n_heads:  # per-head scores and weights for the recorder
                group = self.n_heads // self.n_kv_heads
                k = k.repeat_interleave(group, dim=1)
                v = v.repeat_interleave(group, dim=1)
            heads, _ = explicit_attention(q, k, v, mask, dropout, recorder_prefix=self)
        elif self.n_kv_heads != self.n_heads:
            heads = grouped_fast_attention(q, k, v, mask, dropout)
        else:
            heads = fast_attention(q, k, v, mask, dropout)
        batch, _, q_len, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, q_len, self.n_heads * self.d_head)
        trace.emit(self, "concat", concat)
        output = decode_linear(self.w_o, concat, contiguous=False)  # read once, by the residual add
        trace.emit(self, "output", output)
        return output
