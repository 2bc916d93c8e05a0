"""Scaled dot-product attention, its masks, and multi-head attention (self and cross).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + mask) V

Two paths give one answer:
  * the explicit path computes QK^T, the scaling, the mask, the softmax and the product with V
    as separate tensors, each of which the recorder can see;
  * the fast path calls torch's fused `scaled_dot_product_attention`.
`attention` picks one: the explicit path whenever a recorder or an intervention is active (or
`explicit=True`), the fused one otherwise; the tests prove both agree. Decoding's fast one-token steps live in
`clearformer.generate.engine`, not here.

Masks are boolean, `True = may attend`, shaped to broadcast against
`(batch, heads, q_len, k_len)`, and built only by the functions in this file.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from clearformer import trace

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
    weights = trace.intervene(recorder_prefix, "weights", weights, mask)  # what-if: a head off, or uniform
    trace.emit(recorder_prefix, "weights", weights)
    if dropout > 0.0:
        weights = F.dropout(weights, p=dropout)
    output = weights @ v
    trace.emit(recorder_prefix, "head_outputs", output)
    return output, weights


def fast_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                   dropout: float = 0.0, scale: float | None = None) -> torch.Tensor:
    """The same as `explicit_attention`'s output, through torch's fused kernel (a query with every
    key blocked gets zeros)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scale)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              dropout: float = 0.0, scale: float | None = None, explicit: bool = False,
              recorder_prefix: nn.Module | str = "attention") -> torch.Tensor:
    """Attention(Q, K, V) -> (batch, heads, q_len, d_v): step by step (recorded) while a recorder is
    active or `explicit`, else fused. Shapes as in `explicit_attention`."""
    if explicit or trace.recording() or trace.intervening():
        return explicit_attention(q, k, v, mask, dropout, scale, recorder_prefix)[0]
    return fast_attention(q, k, v, mask, dropout, scale)


def extend_cache(cache: dict | None, name: str, new: torch.Tensor, dim: int) -> torch.Tensor:
    """Incremental decoding: `new` appended to cache[name] along the time axis `dim`, stored back and
    returned (everything so far); without a cache, `new` itself."""
    if cache is None:
        return new
    if name in cache:
        new = torch.cat([cache[name], new], dim=dim)
    cache[name] = new
    return new


# ----------------------------------------------------------------------------- multi-head


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Self-attention passes the same sequence as `query` and `memory`; cross-attention passes the
    decoder states as `query` and the encoder output as `memory`. The per-head projections W_i are
    stored side by side in one (d_model -> heads * d_head) linear layer each, exactly the layout of
    `torch.nn.MultiheadAttention` split into three.

    With `n_kv_heads < n_heads` several query heads share one key/value head: grouped-query
    attention (GQA); `n_kv_heads = 1` is multi-query attention (MQA).

    `scaled=False` drops the paper's 1/sqrt(d_k): scores = Q K^T (scale 1), for `clearformer claims 2`
    (ModelConfig.scale_attention).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True,
                 dropout: float = 0.0, rotary: nn.Module | None = None, scaled: bool = True) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        self.d_head = d_model // n_heads
        self.scale = 1.0 / math.sqrt(self.d_head) if scaled else 1.0  # the score scale: 1/sqrt(d_k), or 1
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.w_o = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.rotary = rotary
        self.explicit = False  # force the explicit path even without a recorder

    def split_heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        """(batch, seq, heads * d_head) -> (batch, heads, seq, d_head)."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, heads, self.d_head).transpose(1, 2)

    def forward(self, query: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: dict | None = None, position: int = 0) -> torch.Tensor:
        """query (batch, q_len, d_model), memory (batch, k_len, d_model) or None for self-attention,
        mask broadcastable to (batch, heads, q_len, k_len) -> (batch, q_len, d_model).

        `cache` (a dict, self-attention while decoding) keeps the keys and values of earlier
        positions: this call's are appended and attention reads them all. `position` is the
        absolute position of query[:, 0] (for rotary embeddings).
        """
        is_self = memory is None
        memory = query if is_self else memory
        q = self.split_heads(self.w_q(query), self.n_heads)         # Q = X W^Q
        k = self.split_heads(self.w_k(memory), self.n_kv_heads)     # K = M W^K
        v = self.split_heads(self.w_v(memory), self.n_kv_heads)     # V = M W^V
        if self.rotary is not None and is_self:  # positions rotate within one sequence only
            q, k = self.rotary(q, position), self.rotary(k, position)
        k = extend_cache(cache, "k", k, dim=2)
        v = extend_cache(cache, "v", v, dim=2)
        trace.emit(self, "Q", q)
        trace.emit(self, "K", k)
        trace.emit(self, "V", v)
        if self.n_kv_heads != self.n_heads:  # GQA / MQA: each key/value head serves `group` query heads
            group = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        dropout = self.dropout if self.training else 0.0
        heads = attention(q, k, v, mask, dropout, self.scale, explicit=self.explicit, recorder_prefix=self)
        batch, _, q_len, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, q_len, self.n_heads * self.d_head)
        trace.emit(self, "concat", concat)
        output = self.w_o(concat)                                   # Concat(head_1..head_h) W^O
        trace.emit(self, "output", output)
        return output
