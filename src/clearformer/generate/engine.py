"""The fast inference engine: one-token decoder steps over the model's own parameters.

`model/` is written to be read: every call goes through the modules, and a cached decoding step
still recomputes the cross-attention keys and values from the encoder output and, in beam search,
reads a copy of the encoder output per beam. `Engine.step` computes the same numbers (logits equal to
1e-5, the same tokens: tests/generate/test_engine.py, tests/lm/test_lm_engine.py) with the weights
read from the model's modules at every step (no copy that a training step could leave stale), and
departs from the model in two places, each kept because it paid at least 5% in
`benchmarks/decode_speed.py --ab` (switched off against on, batch by batch, alternating; medians of
the per-pair ratios; BENCHMARKS.md, "Decoding engine"):

* `engine`: one token per hypothesis per step through plain functions over the layers' weights
  (`F.linear`, `F.layer_norm`, two small products for attention), with the cross-attention keys and
  values computed once from the encoder output. Against the model path (`model.decode` +
  `model.project` with the model's cache) on the 2-core machine at 2 threads: greedy 1.46x, beam 4
  1.25x faster (2026-11-25). The model path still runs whenever a `trace.Recorder` is active (the
  explain view records the real modules) and for models not built from `DecoderLayer`s.
* `skinny_products`: every product of a step, y = x W^T + b over a few rows x, computed as
  (W x^T + b)^T (`linear`): the same weights, the same numbers to float rounding. On the CPU with
  2 threads MKL spreads the second layout over both cores and runs the first on little more than
  one, so the step's largest product, the 8000 x 256 output projection, takes about half the time.
  Greedy 1.24x, beam 4 1.03x (2026-11-25, 2 threads). At 1 thread it buys nothing (0.985x / 0.973x,
  within noise), which is why an earlier 1-thread A/B under load measured it at 0.91-0.94x and it
  was dropped, then brought back.

In cross-attention the beams of a sentence read that sentence's one row of keys and values, stacked
as query rows by `few_query_attention` (the function that stacks a GQA group's heads in
self-attention). Reading `beam` copies instead measured 1.03x slower on the quiet machine (1.09x
under load): below the 5% bar, so its switch is gone, but the shared read stays because it is no
extra code (the copies would be).

Measured and dropped (did not pay 5% end-to-end; BENCHMARKS.md has the tables): self-attention caches
growing in place in buffers with room (0.94-0.98x: the caches here are short and beam search reorders
them every step), attention products as 3-d `bmm` with a precomputed additive mask (0.97-1.03x), one
logits buffer reused every step (0.88-1.00x), beam search's cache reorder done in the same copy as
the next append (beam 4 1.048x), block-wise argmax / top-k of the logits (0.99-1.00x),
glibc malloc tuning (0.98-1.03x, and no difference inside the benchmark's worker on 2026-11-25);
earlier, a oneDNN-prepacked output weight (a second copy of the weights, through private torch ops).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from clearformer import trace
from clearformer.model.attention import MultiHeadAttention, extend_cache
from clearformer.model.layers import AddNorm, DecoderLayer


@dataclass
class EngineSettings:
    """The engine's optimisations, each on by default; `decode_speed.py --ab` turns them off one by one
    (the tests too: every switch must leave the tokens unchanged)."""

    engine: bool = True
    skinny_products: bool = True


SETTINGS = EngineSettings()


def few_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                        mask: torch.Tensor | None = None) -> torch.Tensor:
    """One query per row against keys shared by consecutive rows and heads, without copying them.

    q (rows, heads, d), k (sources, kv_heads, t, d), v (sources, kv_heads, t, d_v), rows = sources x
    per_source (the beams of a sentence share its memory row), heads = kv_heads x group (GQA/MQA),
    mask (sources, 1, 1, t) or None -> (rows, heads, d_v). The queries reading one key head are stacked
    as rows of one product; two plain products beat the fused kernel for so few queries.
    """
    rows, heads, d = q.shape
    sources, kv_heads = k.shape[:2]
    per_source, group = rows // sources, heads // kv_heads
    stacked = q.view(sources, per_source, kv_heads, group, d).transpose(1, 2)
    stacked = stacked.reshape(sources, kv_heads, per_source * group, d)
    scores = (stacked @ k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (sources, kv_heads, per_source * group, d_v)
    out = out.view(sources, kv_heads, per_source, group, -1).transpose(1, 2)
    return out.reshape(rows, heads, -1)


class Engine:
    """Cached one-token decoding steps for a `Transformer` (with `memory`) or a `LanguageModel`.

    memory (sentences, src_len, d_model) and src_mask (sentences, 1, 1, src_len) from `model.encode`;
    `step(tokens, position)` feeds one token per hypothesis (rows = sentences x hypotheses each) and
    returns their next-token logits (rows, vocab); `select` keeps and reorders hypotheses. The
    self-attention caches are the model's own kind (a dict per layer, see `model.new_cache`).
    """

    def __init__(self, model: nn.Module, memory: torch.Tensor | None = None,
                 src_mask: torch.Tensor | None = None) -> None:
        self.model = model
        self.embed = model.tgt_embed if hasattr(model, "tgt_embed") else model.embed
        self.layers = list(model.decoder.layers)
        self.self_caches: list[dict] = [{} for _ in self.layers]
        self.src_mask = src_mask
        self.cross = [] if memory is None else [memory_keys(layer.cross_attention, memory) for layer in self.layers]

    @staticmethod
    def supports(model: nn.Module) -> bool:
        """Whether `model` is built from this project's decoder layers (anything else: the model path)."""
        layers = getattr(getattr(model, "decoder", None), "layers", None)  # the GRU baseline has none
        return isinstance(layers, nn.ModuleList) and all(isinstance(layer, DecoderLayer) for layer in layers)

    def adopt(self, cache: list[dict]) -> None:
        """Take over a model cache filled by a forward pass over a prompt (the LM's prefill)."""
        self.self_caches = [layer.get("self", {}) for layer in cache]

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        """tokens (rows,) at absolute `position` -> next-token logits (rows, vocab)."""
        h = self.embed(tokens[:, None], offset=position)[:, 0]
        for index, layer in enumerate(self.layers):
            h = self.layer_step(index, layer, h, position)
        final_norm = self.model.decoder.final_norm
        if final_norm is not None:
            h = F.layer_norm(h, final_norm.normalized_shape, final_norm.weight, final_norm.bias, final_norm.eps)
        return linear(self.model.output.linear, h)

    def layer_step(self, index: int, layer: DecoderLayer, h: torch.Tensor, position: int) -> torch.Tensor:
        """One decoder layer for h (rows, d_model): self-attention, cross-attention, feed-forward."""
        h = residual(layer.add_norm_1, h, lambda y: self.self_attention(index, layer.self_attention, y, position))
        if layer.cross_attention is not None:
            h = residual(layer.add_norm_2, h, lambda y: self.cross_attention(index, layer.cross_attention, y))
        ff = layer.feed_forward
        return residual(layer.add_norm_3, h, lambda y: linear(ff.linear_2, ff.activation(linear(ff.linear_1, y))))

    def self_attention(self, index: int, attention: nn.Module, h: torch.Tensor, position: int) -> torch.Tensor:
        """Masked self-attention of the newest token over the cache: h (rows, d_model) -> (rows, d_model).
        The newest query may see every cached key, so no mask is needed. MLA runs its own module."""
        cache = self.self_caches[index]
        if not isinstance(attention, MultiHeadAttention):
            return attention(h[:, None], cache=cache, position=position)[:, 0]
        rows, d_head = h.shape[0], attention.d_head
        q = linear(attention.w_q, h).view(rows, attention.n_heads, 1, d_head)
        k = linear(attention.w_k, h).view(rows, attention.n_kv_heads, 1, d_head)
        v = linear(attention.w_v, h).view(rows, attention.n_kv_heads, 1, d_head)
        if attention.rotary is not None:
            q, k = attention.rotary(q, position), attention.rotary(k, position)
        k, v = extend_cache(cache, "k", k, dim=2), extend_cache(cache, "v", v, dim=2)
        out = few_query_attention(q[:, :, 0], k, v, attention.scale)
        return linear(attention.w_o, out.reshape(rows, -1))

    def cross_attention(self, index: int, attention: MultiHeadAttention, h: torch.Tensor) -> torch.Tensor:
        """The newest token's attention over the source: h (rows, d_model) -> (rows, d_model)."""
        rows = h.shape[0]
        k, v = self.cross[index]  # one row per sentence, read by all of its beams
        q = linear(attention.w_q, h).view(rows, attention.n_heads, attention.d_head)
        out = few_query_attention(q, k, v, attention.scale, self.src_mask)
        return linear(attention.w_o, out.reshape(rows, -1))

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        """Keep hypotheses `rows` and, when given, sentences `sentences` (see `DecoderState.select`)."""
        self.self_caches = [{name: t.index_select(0, rows) for name, t in cache.items()}
                            for cache in self.self_caches]
        if sentences is not None and self.cross:
            self.cross = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.cross]
            self.src_mask = self.src_mask.index_select(0, sentences)


def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """layer(x) for x (rows, in_features) -> (rows, out_features), without the module call.

    On the CPU a decoding step's product has few rows (one per hypothesis) against a wide weight:
    with several threads MKL runs x W^T for such shapes at little more than one thread's speed, while
    the same numbers laid out as (W x^T + b)^T split the weight's rows across the threads. The result
    is that product's transposed view (rows, out_features); the next operation reads it as it is.
    """
    if not (SETTINGS.skinny_products and x.dim() == 2 and x.is_cpu):
        return F.linear(x, layer.weight, layer.bias)
    if layer.bias is None:
        return torch.mm(layer.weight, x.t()).t()
    return torch.addmm(layer.bias[:, None], layer.weight, x.t()).t()


def memory_keys(attention: MultiHeadAttention, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The cross-attention keys and values of one layer, each (sentences, kv_heads, src_len, d_head)."""
    sentences, src_len, _ = memory.shape
    split = (sentences, src_len, attention.n_kv_heads, attention.d_head)
    k = linear(attention.w_k, memory).view(split).transpose(1, 2).contiguous()
    return k, linear(attention.w_v, memory).view(split).transpose(1, 2).contiguous()


def residual(add_norm: AddNorm, x: torch.Tensor, sublayer) -> torch.Tensor:
    """`AddNorm.forward` at inference for x (rows, d_model): no dropout, no records."""
    norm = add_norm.norm
    if add_norm.norm_first:
        return x + sublayer(F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps))
    return F.layer_norm(x + sublayer(x), norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def use_engine(model: nn.Module, use_cache: bool = True) -> bool:
    """Whether a search runs the engine: not while a recorder is active (the explain view runs the
    model's own modules), not without the cache, and only for models built from DecoderLayers."""
    return (SETTINGS.engine and use_cache and not trace.recording() and not trace.intervening()
            and Engine.supports(model))
