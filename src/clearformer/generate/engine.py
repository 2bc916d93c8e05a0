"""The fast inference engine: one-token decoder steps over the model's own parameters.

`model/` is written to be read: every call projects, splits heads, attends and concatenates through
the modules, with a plain `torch.cat` cache. A decoding step pushes only one token per hypothesis
through every layer, and at that size the general path's module calls, reshapes and mask handling
cost as much as its arithmetic. `Engine.step` computes the same numbers (tests/generate/test_engine.py:
logits equal to 1e-5, the same tokens) with the same weights read from the model at every step (no
copy that a training step could leave stale), and departs from the model where measurement said it
pays. Each optimisation has a switch in `SETTINGS`; `benchmarks/decode_speed.py --ab` times the
engine with and without each one, alternating, and BENCHMARKS.md holds the result:

* `engine`: the search runs `Engine.step` instead of `model.decode` + `model.project` with the
  model's cache (and the memory repeated per beam). Also the explain view's switch: under a
  `trace.Recorder` the search always runs the model's own modules.
* `shared_memory`: in cross-attention the beams of a sentence are stacked as query rows of that
  sentence's one memory row (`few_query_attention`) instead of reading `beam` copies of its keys
  and values.
* `in_place_cache`: self-attention keys and values grow in buffers with room along time
  (`KVBuffer`), so a step writes only its own token instead of copying the cache (`torch.cat`).
* `skinny_products`: a linear layer over a few rows runs as (W x^T + b)^T (`linear`).
* `block_topk`: argmax / top-k of the logits block by block (`generate/top.py`).

Measured and dropped (BENCHMARKS.md's history): a oneDNN-prepacked output weight (a second copy of
the weights through private torch ops); glibc malloc tuning (`clearformer.allocator`), which made no
difference in the decode benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from clearformer import trace
from clearformer.model.attention import MultiHeadAttention
from clearformer.model.layers import AddNorm, DecoderLayer

FEW_ROWS = 128  # beam 4 x 32 sentences: up to here a product runs as W x^T (see `linear`)
MIN_ROOM = 16  # positions a new KV buffer holds at least


@dataclass
class EngineSettings:
    """The engine's optimisations, each on by default; the benchmark turns them off one by one."""

    engine: bool = True
    shared_memory: bool = True
    in_place_cache: bool = True
    skinny_products: bool = True
    block_topk: bool = True


SETTINGS = EngineSettings()


def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """layer(x) for x (rows, in) -> (rows, out). For a few rows on CPU MKL runs x W^T well below its
    matmul rate (it re-packs the large weight each call); the transpose W x^T + b runs faster, and the
    result is returned as a transposed view (the next operation reads it as it is)."""
    if not (SETTINGS.skinny_products and x.is_cpu and x.shape[0] <= FEW_ROWS):
        return F.linear(x, layer.weight, layer.bias)
    if layer.bias is None:
        return (layer.weight @ x.t()).t()
    return torch.addmm(layer.bias.unsqueeze(1), layer.weight, x.t()).t()


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


class KVBuffer:
    """One layer's self-attention keys and values, (rows, kv_heads, t, d_head) each, in buffers with
    room along t when `SETTINGS.in_place_cache` (else each append reallocates, as `torch.cat` does).

    After a reorder (beam search, every step) the kept rows are compact and the next append grows by
    reallocation: copying the spare room along with the rows measured slower than that (profiled on
    beam 4 before this engine existed).
    """

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None) -> None:
        self.keys, self.values = keys, values
        self.length = 0 if keys is None else keys.shape[2]
        self.reordered = False

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v (rows, kv_heads, 1, d) -> every position so far, (rows, kv_heads, t + 1, d) views."""
        t = self.length
        if self.keys is None or self.keys.shape[2] == t:
            room = t + 1 if self.reordered or not SETTINGS.in_place_cache else max(MIN_ROOM, 2 * (t + 1))
            self.keys, self.values = (self._grown(old, new, room) for old, new in ((self.keys, k), (self.values, v)))
        self.keys[:, :, t:t + 1] = k
        self.values[:, :, t:t + 1] = v
        self.length = t + 1
        return self.keys[:, :, :t + 1], self.values[:, :, :t + 1]

    def _grown(self, old: torch.Tensor | None, new: torch.Tensor, room: int) -> torch.Tensor:
        buffer = new.new_empty(new.shape[0], new.shape[1], room, new.shape[3])
        if old is not None:
            buffer[:, :, :self.length] = old[:, :, :self.length]
        return buffer

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (new_rows,), in that order."""
        self.keys = self.keys[:, :, :self.length].index_select(0, rows)
        self.values = self.values[:, :, :self.length].index_select(0, rows)
        self.reordered = True


class Engine:
    """Cached one-token decoding steps for a `Transformer` (with `memory`) or a `LanguageModel`.

    memory (sentences, src_len, d_model) and src_mask (sentences, 1, 1, src_len) from `model.encode`;
    `step(tokens, position)` feeds one token per hypothesis (rows = sentences x hypotheses each) and
    returns their next-token logits (rows, vocab); `select` keeps and reorders hypotheses.
    """

    def __init__(self, model: nn.Module, memory: torch.Tensor | None = None,
                 src_mask: torch.Tensor | None = None) -> None:
        self.model = model
        self.embed = model.tgt_embed if hasattr(model, "tgt_embed") else model.embed
        self.layers = list(model.decoder.layers)
        self.self_caches: list = [KVBuffer() if isinstance(layer.self_attention, MultiHeadAttention) else {}
                                  for layer in self.layers]
        self.src_mask = src_mask
        self.cross = [] if memory is None else [self.memory_keys(layer.cross_attention, memory)
                                                for layer in self.layers]

    @staticmethod
    def supports(model: nn.Module) -> bool:
        """Whether `model` is built from this project's decoder layers (anything else: the model path)."""
        decoder = getattr(model, "decoder", None)
        return decoder is not None and all(isinstance(layer, DecoderLayer) for layer in decoder.layers)

    @staticmethod
    def memory_keys(attention: MultiHeadAttention, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The cross-attention keys and values of one layer, each (sentences, kv_heads, src_len, d_head)."""
        sentences, src_len, _ = memory.shape
        split = (sentences, src_len, attention.n_kv_heads, attention.d_head)
        k = attention.w_k(memory).view(split).transpose(1, 2).contiguous()
        return k, attention.w_v(memory).view(split).transpose(1, 2).contiguous()

    def adopt(self, cache: list[dict]) -> None:
        """Take over a model cache filled by a forward pass over a prompt (the LM's prefill)."""
        for index, layer_cache in enumerate(cache):
            entries = layer_cache.get("self", {})
            if isinstance(self.self_caches[index], KVBuffer):
                self.self_caches[index] = KVBuffer(entries["k"], entries["v"])
            else:
                self.self_caches[index] = entries

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
        A single newest query may see every cached key, so no mask is needed. MLA runs its own module."""
        cache = self.self_caches[index]
        if not isinstance(cache, KVBuffer):
            return attention(h[:, None], cache=cache, position=position)[:, 0]
        rows, d_head = h.shape[0], attention.d_head
        q = linear(attention.w_q, h).reshape(rows, attention.n_heads, 1, d_head)
        k = linear(attention.w_k, h).reshape(rows, attention.n_kv_heads, 1, d_head)
        v = linear(attention.w_v, h).reshape(rows, attention.n_kv_heads, 1, d_head)
        if attention.rotary is not None:
            q, k = attention.rotary(q, position), attention.rotary(k, position)
        k, v = cache.append(k, v)
        out = few_query_attention(q[:, :, 0], k, v, 1.0 / math.sqrt(d_head))
        return linear(attention.w_o, out.reshape(rows, -1))

    def cross_attention(self, index: int, attention: MultiHeadAttention, h: torch.Tensor) -> torch.Tensor:
        """The newest token's attention over the source: h (rows, d_model) -> (rows, d_model)."""
        rows = h.shape[0]
        k, v = self.cross[index]
        mask = self.src_mask
        if not SETTINGS.shared_memory and k.shape[0] < rows:  # every beam reads its own copy
            per_source = rows // k.shape[0]
            k, v, mask = (t.repeat_interleave(per_source, dim=0) for t in (k, v, mask))
        q = linear(attention.w_q, h).reshape(rows, attention.n_heads, attention.d_head)
        out = few_query_attention(q, k, v, 1.0 / math.sqrt(attention.d_head), mask)
        return linear(attention.w_o, out.reshape(rows, -1))

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        """Keep hypotheses `rows` and, when given, sentences `sentences` (see `DecoderState.select`)."""
        for index, cache in enumerate(self.self_caches):
            if isinstance(cache, KVBuffer):
                cache.select(rows)
            else:
                self.self_caches[index] = {name: t.index_select(0, rows) for name, t in cache.items()}
        if sentences is not None and self.cross:
            self.cross = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.cross]
            self.src_mask = self.src_mask.index_select(0, sentences)


def residual(add_norm: AddNorm, x: torch.Tensor, sublayer) -> torch.Tensor:
    """`AddNorm.forward` at inference for x (rows, d_model): no dropout, no records."""
    norm = add_norm.norm
    if add_norm.norm_first:
        return x + sublayer(F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps))
    return F.layer_norm(x + sublayer(x), norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def use_engine(model: nn.Module, use_cache: bool = True) -> bool:
    """Whether a search runs the engine: not while a recorder is active (the explain view runs the
    model's own modules), not without the cache, and only for models built from DecoderLayers."""
    return SETTINGS.engine and use_cache and not trace.recording() and Engine.supports(model)
