"""The one-token decoding step over a static cache, replayed as a CUDA graph on a GPU.

At the sizes clearformer decodes, a GPU step is bound by kernel launches, not arithmetic (docs/gpu.md):
each token runs a few hundred small kernels, each launched by Python. A CUDA graph records those
launches once and replays them with one call. A graph replays fixed shapes at fixed addresses, so
the step runs over a `StaticKVCache` (model/cache.py) per attention layer: buffers preallocated to
the batch's rows and a number of positions, written in place at the position a device tensor holds.

    step 0 (eager):  the encoder output's keys and values fill the cross-attention buffers, and
                     <bos>'s the self-attention buffers at position 0;
    step t >= 1:     embed the new tokens (eager: their position is a Python int), copy them, the
                     source mask and t into static inputs, replay the graph of model.decoder
                     (mask: positions <= t), read rows 0 .. rows - 1; the search projects them.

The graph runs the model's own modules (model.decoder; model.tgt_embed outside it),
never a copy of a layer. Rows that left the batch (a finished sentence) stay in the buffers and are
computed and ignored: the graph's shape does not change. A beam search's first reorder widens the
rows (one per sentence -> beam per sentence) before any graph is recorded; a sentence longer than
the positions allocated doubles them and records a new graph.

`GraphStep(model, capture=False)` runs the very same static computation eagerly (the CPU, CI): the
tests hold it to the growing cache's logits (1e-5) and tokens, greedy and beam
(tests/generate/test_graphs.py). Attention with rotary positions or MLA's latent cache keeps the
eager step (their position enters the layers as a Python int): `supported` says which.
"""

from __future__ import annotations

import torch

from clearformer.model.cache import DecoderCache, LayerCache, StaticKVCache
from clearformer.model.transformer import Transformer
from clearformer.record import trace

FIRST_TIME = 64  # positions allocated first; doubled when a sentence reaches them


def supported(model) -> bool:
    """Whether the static step can run `model`: an encoder-decoder Transformer with multi-head (or
    grouped/multi-query) attention and positions added to the embeddings (not MLA, not the SSRU's cell)."""
    if not isinstance(model, Transformer):  # by type, not by probing (tests/core/test_contracts.py)
        return False
    config = model.config
    return (config.attention == "mha" and config.autoregressive_layer == "self_attention"
            and config.positional != "rope" and config.n_encoder_layers > 0)


def wants_graph(compile: str, device: torch.device) -> bool:
    """DecodingOptions.compile -> whether decoding uses this module: only when asked ("graph"; eagerly
    without CUDA). "auto" stays eager until the GPU window (benchmarks/gpu_window.sh, docs/gpu.md) has
    measured the captured step on real hardware: a default no GPU has run is not a default to ship."""
    del device  # the choice is the user's until measured; the signature keeps the edge's question
    return compile == "graph"


def applies(model, compile: str, device: torch.device) -> bool:
    """Whether a search over `model` on `device` decodes through `GraphStep`: wanted, supported, and no
    recorder or hook active (they see the eager modules)."""
    return wants_graph(compile, device) and supported(model) and not (trace.recording() or trace.intervening())


class GraphStep:
    """The search's decoder and its cache in one: called as a search calls `model.decode` with
    `DecoderState.inputs()`, (tokens (rows, 1), memory, src_mask (rows, 1, 1, src_len), cache (this
    object), position) -> decoder states (rows, 1, d_model), and reordered as `DecoderState.select`
    reorders a cache (`reorder(index, source)`).

    Built once over one model, where a run is opened for decoding (`PyTorchTranslator.open`, as the layout is:
    generate/layout.py); each search `begin`s it afresh. It decodes that model only: the model never changes
    under it, and a translator runs one search at a time."""

    def __init__(self, model, capture: bool | None = None) -> None:
        device = next(model.parameters()).device
        self.model = model
        self.capture = device.type == "cuda" if capture is None else capture
        self.cursor = torch.zeros(1, dtype=torch.long, device=device)  # the position the graph writes at
        self.captures = 0  # graphs recorded so far (a benchmark reports it)
        self.begin(model)

    def begin(self, model) -> GraphStep:
        """This step, ready for a new search over `model` (the one it was built for: a ValueError for another):
        no buffers, no graph yet (a search's rows and source length are its own)."""
        if model is not self.model:
            raise ValueError("this GraphStep was built for another model; build one per model, where it is loaded")
        self.cache: DecoderCache | None = None
        self.inputs: dict[str, torch.Tensor] = {}
        self.graph: torch.cuda.CUDAGraph | None = None
        self.hidden: torch.Tensor | None = None  # the graph's output buffer
        self.recorded = (-1, -1)  # (generation, rows) the graph was recorded for
        return self

    # -- the cache's side --------------------------------------------------------------------

    def allocate(self, rows: int, src_len: int) -> None:
        """The static caches of every decoder layer for `rows` rows and FIRST_TIME positions."""
        layers = []
        for _ in self.model.decoder.layers:
            self_cache = StaticKVCache(rows, FIRST_TIME, self.cursor)
            cross = StaticKVCache(rows, src_len, torch.zeros(1, dtype=torch.long, device=self.cursor.device))
            cross.valid = src_len
            layers.append(LayerCache(self_cache, cross))
        self.cache = DecoderCache(layers)

    def static_caches(self) -> list[StaticKVCache]:
        return [c for layer in self.cache for c in (layer.self_attention, layer.cross_attention)]

    def reorder(self, index: torch.Tensor, source: bool = True) -> None:
        """Keep rows `index` (new_rows,) in that order (DecoderCache.reorder's contract)."""
        if self.cache is not None:
            self.cache.reorder(index, source)

    # -- the step ---------------------------------------------------------------------------

    def __call__(self, tokens: torch.Tensor, memory: torch.Tensor | None, src_mask: torch.Tensor,
                 cache=None, position: int = 0) -> torch.Tensor:
        rows = tokens.shape[0]
        if self.cache is None:
            self.allocate(rows, memory.shape[1])
        capacity = self.cache[0].self_attention.capacity_time
        if position >= capacity:
            for layer in self.cache:
                layer.self_attention.grow_time(max(2 * capacity, position + 1))
        for layer in self.cache:
            layer.self_attention.valid = position + 1
        x = self.model.tgt_embed(tokens, offset=position)  # (rows, 1, d_model)
        self.cursor.fill_(position)
        if position == 0:  # rows == the buffers' rows: the cross-attention buffers are filled from memory
            return self.static_forward(x, memory, src_mask)
        self.load_inputs(x, src_mask)
        if not self.capture:
            return self.static_forward(self.inputs["x"], None, self.inputs["src_mask"])[:rows]
        if self.graph is None or self.recorded != (self.generation(), self.capacity_rows()):
            self.record()
        self.graph.replay()
        return self.hidden[:rows]

    def static_forward(self, x: torch.Tensor, memory: torch.Tensor | None, src_mask: torch.Tensor) -> torch.Tensor:
        """The model's decoder over the static caches: x (rows, 1, d_model) at position `cursor`, src_mask
        (rows, 1, 1, src_len) -> decoder states (rows, 1, d_model). Self-attention sees positions <= cursor;
        `memory` (step 0 only) fills the cross-attention buffers."""
        time = self.cache[0].self_attention.capacity_time
        self_mask = torch.arange(time, device=x.device)[None, :] <= self.cursor  # (1, time)
        return self.model.decoder(x, memory, self_mask, src_mask, self.cache, 0)

    def generation(self) -> int:
        return sum(c.generation for c in self.static_caches())

    def capacity_rows(self) -> int:
        return self.cache[0].self_attention.capacity_rows

    def load_inputs(self, x: torch.Tensor, src_mask: torch.Tensor) -> None:
        """Copy this step's inputs into the graph's static input buffers (rows past `rows` keep old values)."""
        rows, capacity = x.shape[0], self.capacity_rows()
        if "x" not in self.inputs or self.inputs["x"].shape[0] != capacity:
            self.inputs = {"x": x.new_zeros((capacity,) + x.shape[1:]),
                           # every key visible in unused rows: no row of the graph is all masked (NaN)
                           "src_mask": torch.ones((capacity,) + src_mask.shape[1:], dtype=src_mask.dtype,
                                                  device=src_mask.device)}
        self.inputs["x"][:rows] = x
        self.inputs["src_mask"][:rows] = src_mask

    def record(self) -> None:
        """Record the static step for the current buffers (a new graph after they moved)."""
        self.graph, self.hidden = self.capture_graph()
        self.recorded = (self.generation(), self.capacity_rows())
        self.captures += 1

    def capture_graph(self) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """The static step as a CUDA graph and its output buffer, after a warm-up on a side stream, as
        torch requires (the warm-up writes what the step itself writes: harmless)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.static_forward(self.inputs["x"], None, self.inputs["src_mask"])
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            hidden = self.static_forward(self.inputs["x"], None, self.inputs["src_mask"])
        return graph, hidden
