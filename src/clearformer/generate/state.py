"""What autoregressive decoding carries from one step to the next, and what it returns.

`DecoderState` runs the model's own decoder (`model.decode`, then `model.project`): with the
model's cache (`model/cache.py`) one token per hypothesis per step; without it (`use_cache=False`)
the decoder over the whole prefix again every step (O(n^2) work, the way the Annotated Transformer
decodes), to prove the cache changes nothing. `generate/compiled.py` may hand the same step to
`torch.compile`.

Rows are hypotheses: one per sentence for greedy decoding, `beam` per sentence for beam search,
ordered sentence-major. `select(rows, sentences)` keeps and reorders hypotheses (a beam continues
another beam's prefix) and, when given, sentences (a finished sentence leaves the batch). The model
sees only rows: the encoder output, its mask and the cross-attention keys and values (computed once
per sentence at the first step) are repeated to a sentence's beams when its beams first branch,
and are left in place by a reorder among the beams of each sentence (they are the same for all of
them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clearformer.generate import graphs
from clearformer.generate.compiled import decode_step
from clearformer.record import trace


def max_new_tokens(src_ids: torch.Tensor, pad_id: int, max_extra: int, max_len: int,
                   max_new: int | None = None) -> torch.Tensor:
    """How many tokens each sentence may generate: (batch,) int64.

    The paper's limit is source length + 50 (`max_extra`); a sentence never goes past the model's
    `max_len` positions (the decoder input at step t sits at position t). `max_new`, when given,
    replaces the source-dependent limit (benchmarks use it to generate a fixed number of tokens).
    """
    if max_new is not None:
        limit = torch.full((src_ids.shape[0],), max_new, dtype=torch.long, device=src_ids.device)
    else:
        limit = (src_ids != pad_id).sum(dim=1) + max_extra
    return limit.clamp(min=1, max=max_len)


class DecoderState:
    """The decoder's memory of earlier steps for `rows` hypotheses.

    memory (rows, src_len, d_model) and src_mask (rows, 1, 1, src_len) come from `model.encode`, one
    row per sentence at first; `prefix` (rows, steps_so_far + 1) holds <bos> and every token chosen
    so far, rows = sentences x hypotheses per sentence. With the cache, the memory is read at the
    first step only (the model's cache keeps what it needs of it) and then dropped.
    """

    def __init__(self, model, memory: torch.Tensor, src_mask: torch.Tensor, bos_id: int,
                 use_cache: bool = True, compile: str = "off") -> None:
        self.model = model
        self.memory = memory
        self.src_mask = src_mask
        self.cache = model.new_cache() if use_cache else None
        self.step = decode_step(model, compile) if use_cache else None
        if use_cache and graphs.wants_graph(compile, memory.device) and graphs.supported(model) \
                and not (trace.recording() or trace.intervening()):
            self.step = self.cache = graphs.GraphStep(model)  # static cache; a CUDA graph on a GPU
        self.prefix = torch.full((memory.shape[0], 1), bos_id, dtype=torch.long, device=memory.device)

    @property
    def position(self) -> int:
        """Absolute position of the newest decoder input token."""
        return self.prefix.shape[1] - 1

    def logits(self) -> torch.Tensor:
        """Scores for the next token of every row: (rows, tgt_vocab)."""
        if self.cache is None:
            hidden = self.model.decode(self.prefix, self.memory, self.src_mask)
            return self.model.project(hidden[:, -1:])[:, 0]
        logits = self.step(self.prefix[:, -1:], self.memory, self.src_mask, self.cache, self.position)
        self.memory = None  # the cache holds the source's keys and values now
        return logits

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
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    scores: torch.Tensor
    eos_id: int

    def sequences(self) -> list[list[int]]:
        """One list of ids per sentence, without <eos> and padding."""
        out = []
        for row, length in zip(self.tokens.tolist(), self.lengths.tolist(), strict=True):
            row = row[:length]
            out.append(row[:-1] if row and row[-1] == self.eos_id else row)
        return out
