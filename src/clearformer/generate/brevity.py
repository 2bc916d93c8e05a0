"""A brevity penalty on <eos>: a translation should be about as long as its source says.

A model trained for a few CPU minutes translates the start of a long sentence well and then ends
it: long sources come out well short of the reference length (BENCHMARKS.md, "Translation
quality"). The training pairs say how long a translation usually is: the length ratio r
(the tokenizer's `length_ratio`, tokenize/facts.py, read into `SearchTokens`), target tokens per
source token, measured by `clearformer train`.
A source of m tokens expects about r m, and ending a hypothesis of t tokens costs

    bonus(t) = -w * max(0, r m - t)^2 / (r m)         (added to log p(<eos>))

which is, up to a constant, the log-density of a length model t ~ Normal(r m, r m / (2 w)) on the
short side only: its variance grows with the expected length, so a short source may end a few
tokens early almost freely (short translations vary most, in proportion), while a long one that
stops at two thirds pays a lot. Nothing changes once t >= r m, and an empty translation is never
chosen (t = 0 costs -inf). Only <eos> moves, so a hypothesis long enough decodes exactly as
without it; greedy decoding and beam search both add it to the <eos> score before choosing, so
beam 1 equals greedy.

BLEU's (and Sockeye's) form w * log(t / (r m)) was tried first: it treats a shortfall in proportion
the same at every length, and no weight brought the longest sources near the reference length
without making the shortest ones too long (BENCHMARKS.md, "Translation length: length penalty and
brevity penalty on one trained model (valid)").

A model with no measured ratio (0: imported, or trained before the field) is not penalised.
"""

from __future__ import annotations

import torch

from clearformer.generate.options import DEFAULT_BREVITY, SearchTokens

__all__ = ["DEFAULT_BREVITY", "BrevityPenalty", "eos_bonus", "expected_lengths"]


def expected_lengths(src_ids: torch.Tensor, pad_id: int, ratio: float, source_eos: bool) -> torch.Tensor:
    """src_ids (batch, src_len) -> (batch,) float: ratio x the source's tokens (its <eos> not counted)."""
    tokens = (src_ids != pad_id).sum(dim=1) - int(source_eos)
    return ratio * tokens.clamp(min=1).float()


def eos_bonus(t: int, expected: torch.Tensor, weight: float) -> torch.Tensor:
    """The penalty for ending now, after t tokens: (rows,) <= 0, for rows expecting `expected` tokens."""
    if t == 0:
        return torch.full_like(expected, float("-inf"))
    return -weight * (expected - t).clamp(min=0.0) ** 2 / expected


class BrevityPenalty:
    """The brevity penalty of one batch: expected lengths per sentence, bonus per hypothesis row."""

    def __init__(self, expected: torch.Tensor, weight: float) -> None:
        self.expected = expected  # (batch,)
        self.weight = weight

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, tokens: SearchTokens, weight: float) -> BrevityPenalty | None:
        """None when switched off (weight 0) or the run has no measured length ratio."""
        if weight <= 0 or tokens.length_ratio <= 0:
            return None
        return cls(expected_lengths(src_ids, tokens.pad_id, tokens.length_ratio, tokens.source_eos), weight)

    def bonus(self, t: int, sentences: torch.Tensor, per_sentence: int = 1) -> torch.Tensor:
        """(rows,) the bonus for ending at step t; rows = the sentences `sentences` (original
        indices) x `per_sentence` hypotheses each, sentence-major."""
        bonus = eos_bonus(t, self.expected[sentences], self.weight)
        return bonus.repeat_interleave(per_sentence) if per_sentence > 1 else bonus
