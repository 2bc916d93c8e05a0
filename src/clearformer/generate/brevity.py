"""A brevity penalty on <eos>: a translation should be about as long as its source says.

A model trained for a few CPU minutes translates the start of a long sentence well and then ends
it: on en-fr-software, 25-minute translations of sources over 30 words came out at 0.55 of the
reference length (BENCHMARKS.md, "Translation quality"). The training pairs say how long a
translation usually is: `ModelConfig.length_ratio`, target tokens per source token, measured by
`clearformer train` (about 1.1 for English -> French pieces). Ending a hypothesis of t tokens
whose source has m tokens costs

    bonus(t) = weight * min(0, log(t / (ratio * m)))        (added to log p(<eos>))

like BLEU's own brevity penalty (and Sockeye's `--brevity-penalty-type constant`): nothing once
the hypothesis is as long as expected, more the shorter it is, -inf for an empty one. Only
<eos> moves, so a hypothesis long enough decodes exactly as without it; greedy decoding and beam
search both add it to the <eos> logit before choosing, so beam 1 equals greedy.

A model with no measured ratio (0: imported, or trained before the field) is not penalised.
"""

from __future__ import annotations

import torch

# On the 25-minute en-fr-software model, on the validation split: BENCHMARKS.md, "Translation length:
# the brevity penalty on one trained model". `--brevity 0` switches it off.
DEFAULT_BREVITY = 1.0


def expected_lengths(src_ids: torch.Tensor, pad_id: int, ratio: float, source_eos: bool) -> torch.Tensor:
    """src_ids (batch, src_len) -> (batch,) float: ratio x the source's tokens (its <eos> not counted)."""
    tokens = (src_ids != pad_id).sum(dim=1) - int(source_eos)
    return ratio * tokens.clamp(min=1).float()


def eos_bonus(t: int, expected: torch.Tensor, weight: float) -> torch.Tensor:
    """The penalty for ending now, after t tokens: (rows,) <= 0, for rows expecting `expected` tokens."""
    if t == 0:
        return torch.full_like(expected, float("-inf"))
    return weight * torch.log(t / expected).clamp(max=0.0)


class BrevityPenalty:
    """The brevity penalty of one batch: expected lengths per sentence, bonus per hypothesis row."""

    def __init__(self, expected: torch.Tensor, weight: float) -> None:
        self.expected = expected  # (batch,)
        self.weight = weight

    @classmethod
    def for_batch(cls, model, src_ids: torch.Tensor, weight: float) -> BrevityPenalty | None:
        """None when switched off (weight 0) or the model has no measured length ratio."""
        ratio = float(getattr(model.config, "length_ratio", 0.0) or 0.0)
        if weight <= 0 or ratio <= 0:
            return None
        return cls(expected_lengths(src_ids, model.config.pad_id, ratio, model.config.source_eos), weight)

    def bonus(self, t: int, sentences: torch.Tensor, per_sentence: int = 1) -> torch.Tensor:
        """(rows,) the bonus for ending at step t; rows = the sentences `sentences` (original
        indices) x `per_sentence` hypotheses each, sentence-major."""
        bonus = eos_bonus(t, self.expected[sentences], self.weight)
        return bonus.repeat_interleave(per_sentence) if per_sentence > 1 else bonus
