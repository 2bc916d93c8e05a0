"""Placeholders copied exactly: a decoding constraint over the tokenizer's placeholder pieces.

A SentencePiece vocabulary trained by clearformer keeps every frequent placeholder of the training
data (`%s`, `%d`, `{0}`, `%PRODUCTNAME`, `<b>`, ...; see `clearformer.tokenize.placeholders`) as one piece,
so a placeholder in a source sentence is one token id, and copying it is one decoding choice.
`PlaceholderConstraint` makes that choice compulsory, row by row:

* a placeholder piece may be produced only while the source still has one of it unused
  (none invented, none doubled);
* <eos> is forbidden while any placeholder piece of the source is still unused
  (none dropped);
* where <eos> would have been the best token but a placeholder is still owed, the best owed
  placeholder comes instead (a model that has "finished" rarely chooses the placeholder it
  skipped on its own: left free, it would write on until its length limit);
* a hypothesis with only as many tokens left before its length limit as it owes placeholders
  writes them now (a young model sometimes runs on, repeating itself, until the limit: its
  translation is poor either way, but it still holds every placeholder of the source).

Both are masks on the next-token logits; the rest of decoding is unchanged. Placeholders that are
not single pieces (rare ones, below the vocabulary's frequency threshold) are not constrained.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class PlaceholderConstraint:
    """Per-hypothesis counts of the placeholder pieces still to be produced.

    src_ids (sentences, src_len) and the placeholder piece ids (n_pieces,) -> `remaining`
    (rows, n_pieces), one row per hypothesis; `select` follows the hypotheses as they are kept,
    reordered and (for beams, after step 0) repeated.
    """

    def __init__(self, src_ids: torch.Tensor, piece_ids: torch.Tensor, eos_id: int,
                 limits: torch.Tensor | None = None) -> None:
        self.piece_ids = piece_ids.to(src_ids.device)
        self.eos_id = eos_id
        # remaining[s, j] = how often piece j occurs in sentence s's source
        self.remaining = (src_ids[:, :, None] == self.piece_ids[None, None, :]).sum(dim=1)
        self.limits = limits  # (rows,) tokens each hypothesis may generate in all, or None: no limit known

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, piece_ids: Sequence[int] | None, eos_id: int,
                  limits: torch.Tensor | None = None) -> PlaceholderConstraint | None:
        """The constraint for a batch (`limits` (batch,): the decoder's length limits), or None when there
        are no placeholder pieces or no source of the batch holds one (then decoding runs
        unconstrained, at no cost)."""
        if not piece_ids:
            return None
        constraint = cls(src_ids, torch.tensor(sorted(piece_ids), dtype=torch.long), eos_id, limits)
        return constraint if bool(constraint.remaining.any()) else None

    def forbidden(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, n_pieces) True where piece j must not come next; and (rows,) True where <eos> must not."""
        return self.remaining == 0, self.remaining.sum(dim=1) > 0

    def mask(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """Set the logits of forbidden tokens to -inf, in place: logits (rows, vocab) for the token at
        step t (0-based; needed to know how many tokens are left before the length limits)."""
        no_piece, no_eos = self.forbidden()
        owing = no_eos & (logits.argmax(dim=-1) == self.eos_id)  # would end, but a placeholder is owed
        if self.limits is not None and t is not None:  # only room left for the owed placeholders
            owing |= no_eos & (self.remaining.sum(dim=1) >= self.limits - t)
        pieces = logits[:, self.piece_ids].masked_fill(no_piece, float("-inf"))
        logits[:, self.piece_ids] = pieces
        logits[:, self.eos_id] = logits[:, self.eos_id].masked_fill(no_eos, float("-inf"))
        if bool(owing.any()):
            only_owed = torch.full_like(logits[owing], float("-inf"))
            only_owed[:, self.piece_ids] = pieces[owing]
            logits[owing] = only_owed
        return logits

    def chose(self, tokens: torch.Tensor) -> None:
        """Count the chosen tokens (rows,): a placeholder piece is used up."""
        self.remaining = self.remaining - (tokens[:, None] == self.piece_ids[None, :]).long()

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (as `DecoderState.select`)."""
        self.remaining = self.remaining.index_select(0, rows)
        if self.limits is not None:
            self.limits = self.limits.index_select(0, rows)
