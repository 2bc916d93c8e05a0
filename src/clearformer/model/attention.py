"""Scaled dot-product attention, its masks, and multi-head attention (self and cross).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + mask) V

Two paths give one answer:
  * the explicit path computes QK^T, the scaling, the mask, the softmax and the product with V
    as separate tensors, each of which the recorder can see;
  * the fast path calls torch's fused `scaled_dot_product_attention`.
`attention` picks one: the explicit path whenever a recorder or an intervention is active (or
`explicit=True`), the fused one otherwise; the tests prove both agree. With fewer key/value heads
than query heads (GQA/MQA) each key/value head serves a group of consecutive query heads.

Decoding runs these same modules one token at a time with a `KVCache` per attention layer
(`model/cache.py`): self-attention appends this step's keys and values to it; cross-attention
computes the encoder output's keys and values at the first step and reads them at every later one.

Masks are boolean, `True = may attend`, shaped to broadcast against
`(batch, heads, q_len, k_len)`, and built only by the functions in this file.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.cache import KVCache
from clearformer.model.rope import RotaryEmbedding
from clearformer.record import trace
from clearformer.record.points import EmitsPoints

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


def shared_heads(k: torch.Tensor, heads: int) -> torch.Tensor:
    """Keys or values (batch, kv_heads, k_len, d) -> (batch, heads, k_len, d): key/value head j read by
    query heads j * group .. (j + 1) * group - 1 (GQA/MQA; unchanged when kv_heads == heads)."""
    return k if k.shape[1] == heads else k.repeat_interleave(heads // k.shape[1], dim=1)


# The points the explicit path emits under its prefix (every attention's, MLA's absorbed path's too): the
# mask is recorded expanded, a view (record/trace.py).
ATTENTION_POINTS = ("scores", "scaled", "mask", "weights", "head_outputs")


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                       dropout: float = 0.0, scale: float | None = None,
                       recorder_prefix: nn.Module | str = "attention") -> tuple[torch.Tensor, torch.Tensor]:
    """Attention step by step, recording each intermediate.

    q (batch, heads, q_len, d_k), k (batch, kv_heads, k_len, d_k), v (batch, kv_heads, k_len, d_v)
    (kv_heads divides heads), mask broadcastable to (batch, heads, q_len, k_len) ->
    output (batch, heads, q_len, d_v), weights (batch, heads, q_len, k_len).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    k, v = shared_heads(k, q.shape[1]), shared_heads(v, q.shape[1])
    scores = q @ k.transpose(-2, -1)
    scores = trace.emit(recorder_prefix, "scores", scores)
    scaled = scores * scale
    scaled = trace.emit(recorder_prefix, "scaled", scaled)
    if mask is not None:
        trace.emit(recorder_prefix, "mask", mask.expand(scores.shape[:1] + (1,) + scores.shape[2:])[:, 0])
    weights = masked_softmax(scaled, mask)
    weights = trace.emit(recorder_prefix, "weights", weights, mask=mask)  # what-if: a head off, or uniform
    if dropout > 0.0:
        weights = F.dropout(weights, p=dropout)
    output = weights @ v
    output = trace.emit(recorder_prefix, "head_outputs", output)
    return output, weights


def fast_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                   dropout: float = 0.0, scale: float | None = None) -> torch.Tensor:
    """The same as `explicit_attention`'s output, through torch's fused kernel (a query with every
    key blocked gets zeros; key/value heads shared by groups of query heads as there)."""
    gqa = k.shape[1] != q.shape[1]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scale, enable_gqa=gqa)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              dropout: float = 0.0, scale: float | None = None, explicit: bool = False,
              recorder_prefix: nn.Module | str = "attention") -> torch.Tensor:
    """Attention(Q, K, V) -> (batch, heads, q_len, d_v): step by step (recorded) while a recorder is
    active or `explicit`, else fused. Shapes as in `explicit_attention`."""
    if explicit or trace.recording() or trace.intervening():
        return explicit_attention(q, k, v, mask, dropout, scale, recorder_prefix)[0]
    return fast_attention(q, k, v, mask, dropout, scale)


# ----------------------------------------------------------------------------- multi-head


class MultiHeadAttention(EmitsPoints, nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    This class is self-attention: `forward(x, mask, cache, position)` attends from x to x. Cross-attention
    is `CrossAttention` below, `forward(query, memory, mask, cache)`: the caller says which by the module
    it builds, and no flag at call time chooses. The per-head projections W_i are
    stored side by side in one (d_model -> heads * d_head) linear layer each, exactly the layout of
    `torch.nn.MultiheadAttention` split into three.

    With `n_kv_heads < n_heads` several query heads share one key/value head: grouped-query
    attention (GQA); `n_kv_heads = 1` is multi-query attention (MQA).

    Built from the config: d_model, n_heads, n_kv_heads, bias, attention_dropout (on the weights),
    scale_attention (False drops the paper's 1/sqrt(d_k): scores = Q K^T, for `clearformer claims 2`)
    and, for self-attention with positional="rope", rotary positions of d_head dimensions.
    """

    POINTS = ("Q", "K", "V", *ATTENTION_POINTS, "concat", "output")  # the hook points it emits (record/points.py)

    positions_rotate = True  # with positional="rope": positions rotate within one sequence, not across two

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d_model, n_heads, bias = config.d_model, config.n_heads, config.bias
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = config.kv_heads
        self.d_head = d_model // n_heads
        self.scale = 1.0 / math.sqrt(self.d_head) if config.scale_attention else 1.0  # 1/sqrt(d_k), or 1
        self.dropout = config.attention_dropout  # on the weights
        self.w_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=bias)
        self.w_o = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        rope = config.positional == "rope" and self.positions_rotate
        self.rotary = RotaryEmbedding(self.d_head, config.max_len, config.rope_base) if rope else None
        self.explicit = False  # force the explicit path even without a recorder

    def split_heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        """(batch, seq, heads * d_head) -> (batch, heads, seq, d_head)."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, heads, self.d_head).transpose(1, 2)

    def new_cache(self) -> KVCache:
        """An empty cache for this layer's keys and values (`model/cache.py`), filled while decoding."""
        return KVCache()

    def memory_keys_values(self, memory: torch.Tensor | None,
                           cache: KVCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention's K = M W^K and V = M W^V, each (batch, n_kv_heads, src_len, d_head), for
        memory (batch, src_len, d_model). While decoding, `cache` keeps them: computed at the first
        step, read at every later one (memory may then be None)."""
        if cache is not None and cache.filled:
            return cache.k, cache.v
        k = self.split_heads(self.w_k(memory), self.n_kv_heads)
        v = self.split_heads(self.w_v(memory), self.n_kv_heads)
        return (k, v) if cache is None else cache.update(k, v)

    def self_keys_values(self, query: torch.Tensor, q: torch.Tensor, cache: KVCache | None,
                         position: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's rotated q and K, V of every position so far: while decoding this call's are
        appended to the cache's k and v, (batch, n_kv_heads, t, d_head) each."""
        k = self.split_heads(self.w_k(query), self.n_kv_heads)      # K = X W^K
        v = self.split_heads(self.w_v(query), self.n_kv_heads)      # V = X W^V
        if self.rotary is not None:  # positions rotate within one sequence only
            q, k = self.rotary(q, position), self.rotary(k, position)
        return (q, k, v) if cache is None else (q, *cache.update(k, v))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: KVCache | None = None,
                position: int = 0) -> torch.Tensor:
        """Self-attention: x (batch, q_len, d_model), mask broadcastable to (batch, heads, q_len, k_len)
        -> (batch, q_len, d_model). `cache` (while decoding) keeps the keys and values of earlier
        positions, this call's are appended and attention reads them all; `position` is the absolute
        position of x[:, 0] (for rotary embeddings)."""
        q = self.split_heads(self.w_q(x), self.n_heads)             # Q = X W^Q
        q, k, v = self.self_keys_values(x, q, cache, position)
        return self.attend(q, k, v, mask)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The heads' attention and W^O: q (batch, heads, q_len, d_head), k and v (batch, n_kv_heads, k_len,
        d_head) -> (batch, q_len, d_model)."""
        q = trace.emit(self, "Q", q)
        k = trace.emit(self, "K", k)
        v = trace.emit(self, "V", v)
        dropout = self.dropout if self.training else 0.0
        heads = attention(q, k, v, mask, dropout, self.scale, self.explicit, recorder_prefix=self)
        batch, _, q_len, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, q_len, self.n_heads * self.d_head)
        concat = trace.emit(self, "concat", concat)
        output = self.w_o(concat)                                   # Concat(head_1..head_h) W^O
        output = trace.emit(self, "output", output)
        return output


class CrossAttention(MultiHeadAttention):
    """Multi-head attention from the decoder's states (queries) to the encoder's output (keys and values):
    the same weights and math as `MultiHeadAttention`, without rotary positions (they rotate within one
    sequence). Built from the config as `MultiHeadAttention`."""

    positions_rotate = False

    def forward(self, query: torch.Tensor, memory: torch.Tensor | None, mask: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """query (batch, q_len, d_model), memory (batch, src_len, d_model), mask broadcastable to
        (batch, heads, q_len, src_len) -> (batch, q_len, d_model). `cache` (while decoding) keeps the
        keys and values of the encoder output, computed at the first step (memory may then be None)."""
        q = self.split_heads(self.w_q(query), self.n_heads)         # Q = X W^Q
        k, v = self.memory_keys_values(memory, cache)
        return self.attend(q, k, v, mask)
