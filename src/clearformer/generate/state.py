"""What autoregressive decoding carries from one step to the next, and what it returns.

`DecoderState` holds what the model's own decoder reads at each step (`inputs()`, given to
`model.decode` by the search itself, then `model.project`): with the model's cache (`model/cache.py`)
one token per hypothesis per step; without it (`use_cache=False`) the whole prefix again every step
(O(n^2) work, the way the Annotated Transformer decodes), to prove the cache changes nothing.

Rows are hypotheses: one per sentence for greedy decoding, `beam` per sentence for beam search,
ordered sentence-major. `select(rows, sentences)` keeps and reorders hypotheses (a beam continues
another beam's prefix) and, when given, sentences (a finished sentence leaves the batch). The model
sees only rows: the encoder output, its mask and the cross-attention keys and values (computed once
per sentence at the first step) are repeated to a sentence's beams when its beams first branch,
and are left in place by a reorder among the beams of each sentence (they are the same for all of
them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from clearformer.generate import graphs
from clearformer.generate.compiled import decoder_for
from clearformer.generate.options import PAPER_MAX_EXTRA, DecodingOptions, SearchTokens, search_tokens
from clearformer.generate.rules import DecodingRules
from clearformer.generate.shortlist import sliced_output
from clearformer.record import trace


def max_new_tokens(src_ids: torch.Tensor, tokens: SearchTokens, options: DecodingOptions, max_len: int) -> torch.Tensor:
    """How many tokens each sentence may generate: (batch,) int64, from its source length n (its non-<pad>
    ids, a source's <eos> counted).

    The paper's limit is n + 50. A run imported with its engine's rule (`tokens.max_length_factor`,
    Marian's `max-length-factor`: 2.5 for Firefox's students) stops at round(factor * n) instead, rounding
    halves up as the engine does (measured: 103 tokens after a 41-token source). An explicit
    `options.max_extra` gives n + max_extra either way; `options.max_new`, when given, replaces the
    source-dependent limit (benchmarks use it to generate a fixed number of tokens). A sentence never
    goes past the model's `max_len` positions (the decoder input at step t sits at position t).
    """
    lengths = (src_ids != tokens.pad_id).sum(dim=1)
    if options.max_new is not None:
        limit = torch.full_like(lengths, options.max_new)
    elif options.max_extra is None and tokens.max_length_factor > 0:
        limit = torch.floor(lengths.double() * tokens.max_length_factor + 0.5).long()
    else:
        limit = lengths + (PAPER_MAX_EXTRA if options.max_extra is None else options.max_extra)
    return limit.clamp(min=1, max=max_len)


class DecoderState:
    """The decoder's memory of earlier steps for `rows` hypotheses.

    memory (rows, src_len, d_model) and src_mask (rows, 1, 1, src_len) come from `model.encode`, one
    row per sentence at first; `prefix` (rows, steps_so_far + 1) holds <bos> and every token chosen
    so far, rows = sentences x hypotheses per sentence. With the cache, the memory is read at the
    first step only (the model's cache keeps what it needs of it) and then dropped.
    """

    def __init__(self, model, memory: torch.Tensor, src_mask: torch.Tensor, bos_id: int,
                 use_cache: bool = True) -> None:
        self.memory = memory
        self.src_mask = src_mask
        self.cache = model.new_cache() if use_cache else None
        self.prefix = torch.full((memory.shape[0], 1), bos_id, dtype=torch.long, device=memory.device)

    @property
    def position(self) -> int:
        """Absolute position of the newest decoder input token."""
        return self.prefix.shape[1] - 1

    def inputs(self) -> tuple:
        """The arguments of this step's `model.decode(tokens, memory, src_mask, cache, position)`: with the
        cache the newest token of every row (rows, 1) at its position, else the whole prefix (rows, t + 1)
        from position 0. The decoder's last position gives the next token's scores either way."""
        if self.cache is None:
            return self.prefix, self.memory, self.src_mask, None, 0
        memory, self.memory = self.memory, None  # after this step the cache holds the source's keys and values
        return self.prefix[:, -1:], memory, self.src_mask, self.cache, self.position

    def append(self, tokens: torch.Tensor) -> None:
        """Feed the chosen tokens (rows,) at the next step."""
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        """Keep hypotheses `rows` (new_rows,), in that order; `sentences` (not None) says the set of
        sentences changed (a sentence finished and left the batch).

        Self-attention keys and values follow their hypothesis. What depends only on the source (the
        encoder output, its mask, the cross-attention keys and values) moves only when the sentences
        changed or the number of rows did (the beams of a sentence branch out at the first step);
        a reorder among the beams of each sentence leaves it in place.
        """
        source = sentences is not None or rows.shape[0] != self.prefix.shape[0]
        self.prefix = self.prefix.index_select(0, rows)
        if source:
            self.src_mask = self.src_mask.index_select(0, rows)
            self.memory = None if self.memory is None else self.memory.index_select(0, rows)
        if self.cache is not None:
            self.cache.reorder(rows, source)


@dataclass
class Decoded:
    """The output of greedy decoding or beam search for a batch of sentences.

    tokens (batch, steps): the generated ids, <eos> included when one was produced, then <pad>.
    lengths (batch,): tokens generated per sentence (<eos> included).
    scores (batch,): the sum of log-probabilities of the tokens (greedy), or that sum divided by
        the length penalty (beam search; equal to the sum when alpha = 0); an <eos> that paid the
        brevity penalty (`generate/brevity.py`) counts with it.
    forced (batch,) bool or None: whether the placeholder rule put a placeholder into the sentence's
        output where the model would have ended (`PlaceholderConstraint.forced`; None: no such rule ran).
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    scores: torch.Tensor
    eos_id: int
    forced: torch.Tensor | None = None

    def forced_list(self) -> list[bool]:
        """`forced` as one bool per sentence (all False when no placeholder rule ran)."""
        return [False] * self.tokens.shape[0] if self.forced is None else self.forced.tolist()

    def sequences(self) -> list[list[int]]:
        """One list of ids per sentence, without <eos> and padding."""
        out = []
        for row, length in zip(self.tokens.tolist(), self.lengths.tolist(), strict=True):
            row = row[:length]
            out.append(row[:-1] if row and row[-1] == self.eos_id else row)
        return out


@dataclass
class SearchStart:
    """What greedy decoding and beam search both start from (`start_search`)."""

    options: DecodingOptions
    tokens: SearchTokens
    limits: torch.Tensor  # (batch,): tokens each sentence may generate
    steps: int  # the longest limit
    state: DecoderState  # one row per sentence, the source encoded
    rules: DecodingRules  # min length, brevity, repeats, placeholders (generate/rules.py)
    decode: Callable  # `model.decode`, or compiled (generate/compiled.py): decided here, once


def start_search(model, src_ids: torch.Tensor, options: DecodingOptions | None,
                 tokens: SearchTokens | None, graph: graphs.GraphStep | None = None) -> SearchStart:
    """The opening of every search over src_ids (batch, src_len): the options (default `DecodingOptions()`),
    checked; the token facts (default `search_tokens(model)`); each sentence's length limit; the source
    encoded (recorded with `recorder.step = None`) into a `DecoderState`; the decoding rules; the decoder.
    The model is decoded as given (its layout is applied once where it was loaded: generate/layout.py). With
    `options.compile` "graph" the decoder is the static step (generate/graphs.py): `graph`, the one the translator
    built once over this same model where it opened the run (`PyTorchTranslator.open`), begun afresh here; a
    search called without one (a test, a benchmark) builds its own, over the model it was given."""
    options = (DecodingOptions() if options is None else options).check()
    tokens = search_tokens(model) if tokens is None else tokens
    limits = max_new_tokens(src_ids, tokens, options, model.config.max_len)
    recorder = trace.active()
    if recorder is not None:
        recorder.step = None
    memory, src_mask = model.encode(src_ids)
    state = DecoderState(model, memory, src_mask, tokens.bos_id, options.use_cache)
    rules = DecodingRules.for_search(src_ids, tokens, options, limits)
    sliced = sliced_output(model)
    if sliced is not None:  # a run loaded with the sliced output projection (generate/shortlist.py)
        # Only where the slice changes no token: the argmax after the rules, no scores, no view reading logits.
        exact = options.beam == 1 and not options.with_scores and recorder is None and rules.shortlist is not None
        sliced.restrict(rules.shortlist.union() if exact else None)
    decode = decoder_for(model, options.compile)
    if options.use_cache and graphs.applies(model, options.compile, memory.device):
        step = graphs.GraphStep(model) if graph is None else graph.begin(model)
        decode = state.cache = step  # the static cache and its step (a CUDA graph on a GPU)
    return SearchStart(options, tokens, limits, int(limits.max()), state, rules, decode)
