"""Multi-Head Latent Attention (MLA), as DeepSeek-V2 defines it (arXiv 2405.04434, section 2.1).

Plain multi-head attention caches, for every past token, a key and a value per head:
2 * n_h * d_h numbers per token and layer. MLA caches one small latent vector instead, from which
every head's key and value are re-created:

    c_KV   = W^DKV h                    (kv_lora_rank = d_c numbers: the latent, cached)
    k^C_i  = W^UK_i c_KV                (head i's keys, "up-projected", qk_nope_head_dim each)
    v^C_i  = W^UV_i c_KV                (head i's values, v_head_dim each)
    k^R    = RoPE(W^KR h)               (one rotary key shared by all heads, qk_rope_head_dim, cached)
    c_Q    = W^DQ h                     (optional query compression, q_lora_rank; 0 = none)
    q^C_i  = W^UQ_i c_Q,  q^R_i = RoPE(W^QR_i c_Q)
    score_ij = [q^C_i; q^R_i] . [k^C_i; k^R] / sqrt(qk_nope_head_dim + qk_rope_head_dim)

RoPE is "decoupled": the rotation sits in a separate small key part, so the position-free part
k^C_i = W^UK_i c_KV stays a plain matrix product. That is what makes the absorbed path possible:

    q^C_i . (W^UK_i c_KV) = ((W^UK_i)^T q^C_i) . c_KV          (fold W^UK into the query)
    sum_j w_j W^UV_i c_KV_j = W^UV_i (sum_j w_j c_KV_j)        (fold W^UV into the output)

so attention runs directly against the cached latents and nothing per-head is ever stored.
Both paths are here: `absorb=False` (naive: up-project keys and values, then attend) and
`absorb=True` (absorbed). Both read the same cache: the latent c_KV and the RoPE key, i.e.
d_c + d_h^R numbers per token and layer. As in DeepSeek's code the latent is RMS-normalised
before the up-projection (and cached after it), and the up-projection W^UKV has no bias, so that
it folds exactly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import ATTENTION_POINTS, attention, masked_softmax
from clearformer.model.cache import LatentCache
from clearformer.model.rope import RotaryEmbedding
from clearformer.record import trace
from clearformer.record.points import EmitsPoints


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g (no centring, no bias), as DeepSeek normalises its latents."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class AbsorbedAttention(nn.Module):
    """The absorbed path's attention in latent space, as a point of the model with a name of its own
    (`<mla>.absorbed`, given by `trace.name_modules` as every module's): its records (scores, scaled, mask,
    weights, head_outputs) are latent-space numbers, apart from the naive path's. No parameters."""


class MultiHeadLatentAttention(EmitsPoints, nn.Module):
    """Causal self-attention with a low-rank key/value latent; the same call signature as
    `MultiHeadAttention` (self-attention; it has no cross-attention form).

    Weights (names follow DeepSeek's code):
        wq (d_model -> n_h (d_nope + d_rope)), or wq_a (d_model -> q_lora_rank) + q_norm + wq_b;
        wkv_a (d_model -> d_c + d_rope): W^DKV and W^KR side by side; kv_norm on the latent;
        wkv_b (d_c -> n_h (d_nope + d_v)): W^UK_i and W^UV_i of every head, no bias;
        wo (n_h d_v -> d_model).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d_model, n_heads, bias = config.d_model, config.n_heads, config.bias
        sizes = config.mla  # kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        kv_lora_rank, q_lora_rank, v_head_dim = sizes.kv_lora_rank, sizes.q_lora_rank, sizes.v_head_dim
        qk_nope_head_dim, qk_rope_head_dim = sizes.qk_nope_head_dim, sizes.qk_rope_head_dim
        self.n_heads = n_heads
        self.kv_lora_rank = kv_lora_rank
        self.q_lora_rank = q_lora_rank
        self.nope_dim = qk_nope_head_dim
        self.rope_dim = qk_rope_head_dim
        self.v_dim = v_head_dim
        self.qk_dim = qk_nope_head_dim + qk_rope_head_dim
        self.scale = 1.0 / math.sqrt(self.qk_dim) if config.scale_attention else 1.0
        self.dropout = config.attention_dropout  # on the weights
        if q_lora_rank:
            self.wq_a = nn.Linear(d_model, q_lora_rank, bias=bias)
            self.q_norm = RMSNorm(q_lora_rank)
            self.wq_b = nn.Linear(q_lora_rank, n_heads * self.qk_dim, bias=bias)
        else:
            self.wq = nn.Linear(d_model, n_heads * self.qk_dim, bias=bias)
        self.wkv_a = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=bias)
        self.kv_norm = RMSNorm(kv_lora_rank)
        self.wkv_b = nn.Linear(kv_lora_rank, n_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.wo = nn.Linear(n_heads * v_head_dim, d_model, bias=bias)
        self.rotary = RotaryEmbedding(qk_rope_head_dim, config.max_len, config.rope_base) if qk_rope_head_dim else None
        self.explicit = False  # force the explicit (recordable) path even without a recorder
        self.absorb = False  # True: attend in latent space (the absorbed path), the same numbers
        self.absorbed = AbsorbedAttention()  # where the absorbed path records its attention

    def points(self) -> tuple[str, ...]:
        """The hook points it emits (record/points.py), as it is set now: the query latent with q_lora_rank, the
        rotary parts with rope dims, and the path's own (`absorb`: the latent-space attention under `absorbed.`)."""
        query = ("q_latent",) * bool(self.q_lora_rank) + ("Q_rope", "K_rope") * bool(self.rope_dim)
        if self.absorb:
            path = ("Q_absorbed", *(f"absorbed.{what}" for what in ATTENTION_POINTS), "head_outputs")
        else:
            path = ("K_nope", "V", "Q", "K", *ATTENTION_POINTS)
        return (*query, "latent", *path, "concat", "output")

    # -- pieces ----------------------------------------------------------------------------------

    def queries(self, x: torch.Tensor, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """x (batch, seq, d_model) -> q_nope (batch, heads, seq, d_nope), q_rope (..., d_rope)."""
        if self.q_lora_rank:
            q_latent = self.q_norm(self.wq_a(x))
            q_latent = trace.emit(self, "q_latent", q_latent)
            q = self.wq_b(q_latent)
        else:
            q = self.wq(x)
        batch, seq, _ = x.shape
        q = q.view(batch, seq, self.n_heads, self.qk_dim).transpose(1, 2)
        q_nope, q_rope = q.split([self.nope_dim, self.rope_dim], dim=-1)
        if self.rope_dim:
            q_rope = self.rotary(q_rope, position)
            q_rope = trace.emit(self, "Q_rope", q_rope)
        return q_nope, q_rope

    def latents(self, x: torch.Tensor, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """x (batch, seq, d_model) -> c_KV (batch, seq, d_c) normalised, k_rope (batch, seq, d_rope)."""
        compressed = self.wkv_a(x)
        latent, k_rope = compressed.split([self.kv_lora_rank, self.rope_dim], dim=-1)
        latent = self.kv_norm(latent)
        if self.rope_dim:
            k_rope = self.rotary(k_rope.unsqueeze(1), position).squeeze(1)
        return latent, k_rope

    def up_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W^UK (heads, d_nope, d_c) and W^UV (heads, d_v, d_c), views of wkv_b's weight."""
        weight = self.wkv_b.weight.view(self.n_heads, self.nope_dim + self.v_dim, self.kv_lora_rank)
        return weight[:, : self.nope_dim], weight[:, self.nope_dim:]

    def attend(self, q, k, v, mask, prefix) -> torch.Tensor:
        """Scaled dot-product attention with MLA's scale 1/sqrt(d_nope + d_rope), explicit when recording."""
        dropout = self.dropout if self.training else 0.0
        return attention(q, k, v, mask, dropout, self.scale, self.explicit, recorder_prefix=prefix)

    # -- the two paths ---------------------------------------------------------------------------

    def naive(self, q_nope, q_rope, latent, k_rope, mask) -> torch.Tensor:
        """Up-project every cached latent to per-head keys and values, then attend as MHA does.

        latent (batch, k_len, d_c), k_rope (batch, k_len, d_rope) -> heads (batch, heads, q_len, d_v).
        """
        batch, k_len, _ = latent.shape
        kv = self.wkv_b(latent).view(batch, k_len, self.n_heads, self.nope_dim + self.v_dim).transpose(1, 2)
        k_nope, v = kv.split([self.nope_dim, self.v_dim], dim=-1)
        k_nope = trace.emit(self, "K_nope", k_nope)
        v = trace.emit(self, "V", v)
        shared_rope = k_rope.unsqueeze(1).expand(batch, self.n_heads, k_len, self.rope_dim)
        q = torch.cat([q_nope, q_rope], dim=-1)
        k = torch.cat([k_nope, shared_rope], dim=-1)
        q = trace.emit(self, "Q", q)
        k = trace.emit(self, "K", k)
        return self.attend(q, k, v, mask, self)

    def absorbed_path(self, q_nope, q_rope, latent, k_rope, mask) -> torch.Tensor:
        """Attend in latent space: W^UK folded into the queries, W^UV applied after the weighted sum.

        Every head attends over the same keys [c_KV; k_rope] and values c_KV (like MQA with head size
        d_c + d_rope), so the heads are stacked as rows of one query matrix and each product is a
        single (heads * q_len) x k_len matrix product per batch item; nothing is expanded per head.
        Records go under `<name>.absorbed.*`; the weighted sums there are latent (d_c) vectors.
        Returns heads (batch, heads, q_len, d_v).
        """
        w_uk, w_uv = self.up_projections()
        q_absorbed = torch.einsum("bhsd,hdc->bhsc", q_nope, w_uk)
        q_absorbed = trace.emit(self, "Q_absorbed", q_absorbed)
        batch, heads, q_len, _ = q_absorbed.shape
        rows = heads * q_len
        scores = (q_absorbed.reshape(batch, rows, -1) @ latent.transpose(1, 2)
                  + q_rope.reshape(batch, rows, -1) @ k_rope.transpose(1, 2)).view(batch, heads, q_len, -1)
        prefix = self.absorbed
        scores = trace.emit(prefix, "scores", scores)
        scaled = scores * self.scale
        scaled = trace.emit(prefix, "scaled", scaled)
        if mask is not None:
            trace.emit(prefix, "mask", mask.expand(batch, 1, q_len, scores.shape[-1])[:, 0])
        weights = masked_softmax(scaled, mask)
        weights = trace.emit(prefix, "weights", weights, mask=mask)  # what-if: a head off, or uniform
        if self.training and self.dropout > 0:
            weights = F.dropout(weights, p=self.dropout)
        latent_heads = (weights.reshape(batch, rows, -1) @ latent).view(batch, heads, q_len, -1)
        latent_heads = trace.emit(prefix, "head_outputs", latent_heads)
        return torch.einsum("bhsc,hvc->bhsv", latent_heads, w_uv)

    # -- forward ---------------------------------------------------------------------------------

    def new_cache(self) -> LatentCache:
        """An empty cache for this layer's latents and rotary keys (`model/cache.py`), filled while decoding."""
        return LatentCache()

    def forward(self, query: torch.Tensor, mask: torch.Tensor | None = None, cache: LatentCache | None = None,
                position: int = 0) -> torch.Tensor:
        """query (batch, q_len, d_model), mask broadcastable to (batch, heads, q_len, k_len)
        -> (batch, q_len, d_model).

        `cache` (this layer's `LatentCache` while decoding) accumulates exactly what MLA needs: the
        latent (batch, t, d_c) and the rotary key k_rope (batch, t, d_rope; width 0 without RoPE).
        `position` is the absolute position of query[:, 0].
        """
        q_nope, q_rope = self.queries(query, position)
        latent, k_rope = self.latents(query, position)
        latent = trace.emit(self, "latent", latent)
        if self.rope_dim:
            k_rope = trace.emit(self, "K_rope", k_rope)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)
        if self.absorb:
            heads = self.absorbed_path(q_nope, q_rope, latent, k_rope, mask)
            heads = trace.emit(self, "head_outputs", heads)  # the naive path's attention recorded these already
        else:
            heads = self.naive(q_nope, q_rope, latent, k_rope, mask)
        batch, _, q_len, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(batch, q_len, self.n_heads * self.v_dim)
        concat = trace.emit(self, "concat", concat)
        output = self.wo(concat)
        output = trace.emit(self, "output", output)
        return output

