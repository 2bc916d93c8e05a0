"""The lexical shortlist: which target tokens a search may choose for a given source, as Marian builds it.

A production student (Firefox Translations' "tiny" models) never scores its whole vocabulary: a table
learnt from word alignments lists, for every source id, the target ids it is likely to produce, and the
output layer is computed over

    ids 0 .. first_num-1 (the most frequent pieces, 0-49 in `lex.50.50.*.bin`)
    + each source id's list (not the source ids themselves: Marian's C++ generator adds them for a shared
      vocabulary, the package's engine does not, and the engine is the oracle)
    + padding: the lowest ids not yet chosen, from first_num on, until the count is a multiple of 8
      (intgemm multiplies 8 columns at a time; the engine once emitted such a padding piece)

as the package's engine builds it (Marian's `BinaryShortlistGenerator::generate` without `shared`). The
search sees it as one more decoding rule (`generate/rules.py`'s `DecodingRules`): every other token's logit
is -inf. The engine builds the set over the sentences of its batch; clearformer builds it per sentence (the
engine translating one sentence at a time, as `NativeDirection.translate` does), so a translation never
depends on which sentences share its batch. `--shortlist off` scores the whole vocabulary.
"""

from __future__ import annotations

import torch

from clearformer.tokenize.shortlist import LexicalShortlist


class ShortlistRule:
    """The decoding rule: per hypothesis, -inf on every token outside its sentence's candidate set.

    allowed (rows, vocab) bool, one row per hypothesis (built at the first step); `select` follows the
    hypotheses as the search keeps, reorders and (beam search) repeats them.
    """

    def __init__(self, candidates: list[torch.Tensor], device: torch.device) -> None:
        self.candidates = candidates  # each sentence's candidate ids, until the first step knows the width
        self.device = device
        self.allowed: torch.Tensor | None = None

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, shortlist: LexicalShortlist, pad_id: int) -> ShortlistRule:
        """src_ids (batch, src_len) padded with pad_id -> the rule for its sentences."""
        candidates = [torch.from_numpy(shortlist.candidates([i for i in ids if i != pad_id]))
                      for ids in src_ids.tolist()]
        return cls(candidates, src_ids.device)

    def rows(self, vocab_size: int) -> torch.Tensor:
        """allowed (rows, vocab_size) bool."""
        if self.allowed is None:
            self.allowed = torch.zeros(len(self.candidates), vocab_size, dtype=torch.bool)
            for row, ids in enumerate(self.candidates):
                self.allowed[row, ids[ids < vocab_size]] = True
            self.allowed = self.allowed.to(self.device)
        return self.allowed

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """logits (rows, vocab) -> the same, -inf outside each row's candidates (in place)."""
        return logits.masked_fill_(~self.rows(logits.shape[-1]), float("-inf"))

    def chose(self, tokens: torch.Tensor) -> None:
        """Nothing to count: the set depends on the source only."""

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (as `DecoderState.select`)."""
        if self.allowed is None:
            self.candidates = [self.candidates[i] for i in rows.tolist()]
        else:
            self.allowed = self.allowed.index_select(0, rows)
