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

import weakref

import torch
from torch import nn

from clearformer.record import trace
from clearformer.tokenize.shortlist import LexicalShortlist


class ShortlistRule:
    """The decoding rule: per hypothesis, -inf on every token outside its sentence's candidate set.

    forbidden (rows, vocab) bool, one row per hypothesis (built at the first step); `select` follows the
    hypotheses as the search keeps, reorders and (beam search) repeats them.
    """

    def __init__(self, candidates: list[torch.Tensor], device: torch.device) -> None:
        self.candidates = candidates  # each sentence's candidate ids, until the first step knows the width
        self.device = device
        self.forbidden: torch.Tensor | None = None

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, shortlist: LexicalShortlist, pad_id: int) -> ShortlistRule:
        """src_ids (batch, src_len) padded with pad_id -> the rule for its sentences."""
        candidates = [torch.from_numpy(shortlist.candidates([i for i in ids if i != pad_id]))
                      for ids in src_ids.tolist()]
        return cls(candidates, src_ids.device)

    def rows(self, vocab_size: int) -> torch.Tensor:
        """forbidden (rows, vocab_size) bool: kept negated, so that a step masks without a new tensor."""
        if self.forbidden is None:
            self.forbidden = torch.ones(len(self.candidates), vocab_size, dtype=torch.bool)
            for row, ids in enumerate(self.candidates):
                self.forbidden[row, ids[ids < vocab_size]] = False
            self.forbidden = self.forbidden.to(self.device)
        return self.forbidden

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """logits (rows, vocab) -> the same, -inf outside each row's candidates (in place)."""
        return logits.masked_fill_(self.rows(logits.shape[-1]), float("-inf"))

    def union(self) -> torch.Tensor:
        """Every candidate of the batch's sentences, sorted: the rows a sliced output projection computes."""
        return torch.unique(torch.cat(self.candidates)).to(self.device) if self.forbidden is None \
            else (~self.forbidden.all(dim=0)).nonzero()[:, 0]

    def chose(self, tokens: torch.Tensor) -> None:
        """Nothing to count: the set depends on the source only."""

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (as `DecoderState.select`)."""
        if self.forbidden is None:
            self.candidates = [self.candidates[i] for i in rows.tolist()]
        else:
            self.forbidden = self.forbidden.index_select(0, rows)


class ShortlistOutput(nn.Module):
    """The output projection as Marian computes it under a shortlist: only the candidate rows of W multiplied
    (`OutputProjection.logits_of`), written into a (..., vocab) tensor of -inf. A speed layout, swapped in for
    the model's `output` where a run with a shortlist is opened for decoding (`use_shortlist_output`), never
    inside model/: at a decoding step of one sentence the full projection (32,001 x 256 for Firefox's students)
    is most of the work (BENCHMARKS.md, "Firefox's en-pt student").

    The search restricts it (`restrict(ids)`) only where that changes no token: greedy decoding without scores
    and without a recorder, where the next token is the argmax of the logits after the rules, and the shortlist
    rule puts -inf outside the candidates anyway. Beam search and scores need log p over the whole vocabulary
    (the normaliser), the views need every logit: there `restrict(None)` leaves the full projection.
    """

    def __init__(self, full: nn.Module) -> None:
        super().__init__()
        self.full = full  # the model's OutputProjection
        self.ids: torch.Tensor | None = None

    def restrict(self, ids: torch.Tensor | None) -> None:
        """Compute only the rows `ids` (sorted target ids) from now on; None: every row."""
        self.ids = None if ids is None else ids[ids < self.full.linear.out_features]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (batch, tgt_len, d_model) -> logits (batch, tgt_len, vocab)."""
        if self.ids is None:
            return self.full(hidden)
        logits = hidden.new_full((*hidden.shape[:-1], self.full.linear.out_features), float("-inf"))
        return logits.index_copy_(-1, self.ids, self.full.logits_of(hidden, self.ids))


# The models whose output projection was swapped, and their `ShortlistOutput`: the search looks its model up
# here (a model that was never swapped is simply not in it) instead of asking the model what it holds.
_SLICED: weakref.WeakKeyDictionary[nn.Module, ShortlistOutput] = weakref.WeakKeyDictionary()


def use_shortlist_output(model: nn.Module) -> ShortlistOutput:
    """Swap `model.output` (a Transformer's `OutputProjection`, whose `linear` holds W and b) for a
    `ShortlistOutput` around it, once, where a run with a shortlist is loaded for decoding; the same
    parameters (a tied W stays the embedding table). Do it before `generate/int8.py`'s `quantize_int8`, so
    that the rows are sliced from the float weights."""
    if model in _SLICED:
        return _SLICED[model]
    full = model.output
    model.output = ShortlistOutput(full)
    trace.name_as(model.output, full)
    _SLICED[model] = model.output
    return model.output


def sliced_output(model: nn.Module) -> ShortlistOutput | None:
    """The model's `ShortlistOutput`, if `use_shortlist_output` swapped one in."""
    return _SLICED.get(model)
