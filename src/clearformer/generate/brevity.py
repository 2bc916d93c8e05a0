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
    """The brevity penalty of one batch, a decoding rule (generate/rules.py): the expected length of every
    hypothesis row's sentence, and the bonus added to its <eos> score at each step."""

    def __init__(self, expected: torch.Tensor, weight: float, eos_id: int) -> None:
        self.expected = expected  # (rows,): one per hypothesis, following them by `select`
        self.weight = weight
        self.eos_id = eos_id

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, tokens: SearchTokens, weight: float) -> BrevityPenalty | None:
        """None when switched off (weight 0) or the run has no measured length ratio."""
        if weight <= 0 or tokens.length_ratio <= 0:
            return None
        return cls(expected_lengths(src_ids, tokens.pad_id, tokens.length_ratio, tokens.source_eos), weight,
                   tokens.eos_id)

    def __call__(self, logits: torch.Tensor, t: int) -> torch.Tensor:
        """logits (rows, vocab) for the token at step t, in place: the bonus for ending now added to <eos>."""
        logits[:, self.eos_id] += eos_bonus(t, self.expected, self.weight).to(logits.dtype)
        return logits

    def chose(self, tokens: torch.Tensor) -> None:
        """Nothing to count: the bonus depends on the step only."""

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (as `DecoderState.select`)."""
        self.expected = self.expected.index_select(0, rows)
