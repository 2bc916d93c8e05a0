"""What autoregressive decoding carries from one step to the next, and what it returns.

`DecoderState` hides how the next-token logits are computed:

* through the engine (`generate/engine.py`, the default): one token per hypothesis per step over
  the model's own weights, with the cross-attention keys and values computed once from the encoder
  output, one row per sentence (its beams share it);
* through the model's own modules (while a `trace.Recorder` is active, so the explain view sees
  the real path; or with the engine switched off): `model.decode` with the model's cache (one
  token per step) and `model.project`, which records `output.logits` and `output.probabilities`;
  the encoder output is repeated for every beam of its sentence;
* without a cache (`use_cache=False`): the decoder over the whole prefix again every step (O(n^2)
  work, the way the Annotated Transformer decodes), to prove the cache changes nothing.

Every path gives the same tokens (tests/generate/test_engine.py). Rows are hypotheses: one per
sentence for greedy decoding, `beam` per sentence for beam search, ordered sentence-major.
`select(rows, sentences)` keeps and reorders hypotheses (a beam continues another beam's prefix)
and, when given, sentences (a finished sentence leaves the batch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clearformer.generate.engine import Engine, use_engine


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

    memory (sentences, src_len, d_model) and src_mask (sentences, 1, 1, src_len) come from
    `model.encode`; `prefix` (rows, steps_so_far + 1) holds <bos> and every token chosen so far,
    rows = sentences x hypotheses per sentence.
    """

    def __init__(self, model, memory: torch.Tensor, src_mask: torch.Tensor, bos_id: int,
                 use_cache: bool = True) -> None:
        self.model = model
        self.memory = memory
        self.src_mask = src_mask
        self.engine = Engine(model, memory, src_mask) if use_engine(model, use_cache) else None
        self.cache = model.new_cache() if use_cache and self.engine is None else None
        self.use_cache = use_cache
        self.prefix = torch.full((memory.shape[0], 1), bos_id, dtype=torch.long, device=memory.device)

    @property
    def position(self) -> int:
        """Absolute position of the newest decoder input token."""
        return self.prefix.shape[1] - 1

    def logits(self) -> torch.Tensor:
        """Scores for the next token of every row: (rows, tgt_vocab), possibly a transposed view."""
        if self.engine is not None:
            return self.engine.step(self.prefix[:, -1], self.position)
        per_sentence = self.prefix.shape[0] // self.memory.shape[0]  # the beams of each sentence
        memory = self.memory.repeat_interleave(per_sentence, dim=0)
        src_mask = self.src_mask.repeat_interleave(per_sentence, dim=0)
        if self.use_cache:
            hidden = self.model.decode(self.prefix[:, -1:], memory, src_mask, self.cache, position=self.position)
        else:
            hidden = self.model.decode(self.prefix, memory, src_mask)
        return self.model.project(hidden[:, -1:])[:, 0]

    def append(self, tokens: torch.Tensor) -> None:
        """Feed the chosen tokens (rows,) at the next step."""
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> None:
        """Keep hypotheses `rows` (new_rows,), in that order, and sentences `sentences` (their
        indices among the current sentences, in order; None = the sentences are unchanged).

        Decoder self-attention keys/values follow their hypothesis; the encoder output, its mask and
        the engine's cross-attention keys/values depend only on the sentence: they are reindexed only
        when the set of sentences changed, never on a beam reorder.
        """
        self.prefix = self.prefix.index_select(0, rows)
        if sentences is not None:
            self.memory = self.memory.index_select(0, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)
        if self.engine is not None:
            self.engine.select(rows, sentences)
        for layer in self.cache or []:
            entries = layer.get("self", {})
            for name, tensor in entries.items():
                entries[name] = tensor.index_select(0, rows)


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
