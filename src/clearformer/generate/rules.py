"""The decoding rules: what every search applies to each step's scores, in one call.

The shape is Transformers' logits processors (`LogitsProcessorList`): a list of rules, each a callable
on the (rows, vocab) next-token logits of step t that returns them with its rule applied (in place). Rows
are hypotheses (one per sentence for greedy decoding, `beam` per sentence for beam search,
sentence-major). Unlike Transformers' processors, which re-read the whole prefix each step, a rule that
counts keeps its own state per hypothesis: the search tells it the tokens chosen (`chose`) and the
hypotheses kept (`select`, as `DecoderState.select`).

    ShortlistRule         only the candidates of the run's lexical shortlist (generate/shortlist.py; --shortlist)
    MinLength             <eos> forbidden before `DecodingOptions.min_length` tokens
    BrevityPenalty        a bonus (<= 0) on <eos> for ending shorter than expected (generate/brevity.py)
    NumeralRuns           no number the source lacks, followed over the pieces a number is written in
    RepeatBound           no runaway repetition of a piece or a span (generate/constraints.py)
    PlaceholderConstraint every placeholder piece of the source copied exactly (generate/constraints.py)
    GlossaryConstraint    every glossary term of the source written as the glossary says (generate/glossary.py)

in that order. Greedy decoding and beam search both take log p(token) from the logits before the rules
(the rules forbid a token or move its score, they never renormalise), then call `rules(logits, t)`:
beam 1 is greedy, exactly.
"""

from __future__ import annotations

from typing import Protocol

import torch

from clearformer.generate.brevity import BrevityPenalty
from clearformer.generate.constraints import NumeralRuns, PlaceholderConstraint, RepeatBound
from clearformer.generate.glossary import GlossaryConstraint
from clearformer.generate.options import DecodingOptions, SearchTokens
from clearformer.generate.shortlist import ShortlistRule


class DecodingRule(Protocol):
    """One rule: logits (rows, vocab) of step t -> the same with the rule applied; told what was chosen and kept."""

    def __call__(self, logits: torch.Tensor, t: int) -> torch.Tensor: ...

    def chose(self, tokens: torch.Tensor) -> None: ...

    def select(self, rows: torch.Tensor) -> None: ...


class MinLength:
    """<eos> forbidden (-inf) before `min_length` tokens (benchmarks make every system write a fixed count)."""

    def __init__(self, eos_id: int, min_length: int) -> None:
        self.eos_id = eos_id
        self.min_length = min_length

    def __call__(self, logits: torch.Tensor, t: int) -> torch.Tensor:
        if t < self.min_length:
            logits[:, self.eos_id] = float("-inf")
        return logits

    def chose(self, tokens: torch.Tensor) -> None:
        """Nothing to count: the rule depends on the step only."""

    def select(self, rows: torch.Tensor) -> None:
        """Nothing per hypothesis."""


class DecodingRules:
    """The rules of one search, applied in order by one call; empty when none applies (then a no-op)."""

    def __init__(self, rules: list[DecodingRule], shortlist: ShortlistRule | None = None) -> None:
        self.rules = rules
        self.shortlist = shortlist  # also among `rules`: a sliced output projection reads its candidates

    @classmethod
    def for_search(cls, src_ids: torch.Tensor, tokens: SearchTokens, options: DecodingOptions | None = None,
                   limits: torch.Tensor | None = None) -> DecodingRules:
        """The rules for a batch src_ids (batch, src_len) with the search's `SearchTokens` (the placeholder
        pieces, the length ratio, whether the repeat bound applies) and `options` (min_length, brevity);
        `limits` (batch,): each sentence's length limit (the placeholder rule writes what it owes in time)."""
        options = DecodingOptions() if options is None else options
        rules: list[DecodingRule] = []
        shortlist = None
        if tokens.shortlist is not None:  # first: the other rules act among the candidates
            shortlist = ShortlistRule.for_batch(src_ids, tokens.shortlist, tokens.pad_id)
            rules.append(shortlist)
        if options.min_length > 0:
            rules.append(MinLength(tokens.eos_id, options.min_length))
        brevity = BrevityPenalty.for_batch(src_ids, tokens, options.brevity)
        if brevity is not None:
            rules.append(brevity)
        numerals = NumeralRuns.for_batch(tokens.numeral_pieces, tokens.numerals, tokens.neutral, src_ids.device,
                                         frozenset({tokens.bos_id, tokens.pad_id}), limits)
        if numerals is not None:  # no number but the sentence's own
            rules.append(numerals)
        if tokens.repeat_bound:
            rules.append(RepeatBound(src_ids, tokens.pad_id, tokens.placeholder_ids))
        placeholders = PlaceholderConstraint.for_batch(src_ids, tokens.placeholder_ids, tokens.eos_id, limits,
                                                       tokens.owing, tokens.free, tokens.final_marks, tokens.pad_id,
                                                       tokens.stand_in_ids)
        if placeholders is not None:
            rules.append(placeholders)
        terms = GlossaryConstraint.for_batch(tokens.terms, tokens.eos_id, limits, src_ids.device)
        if terms is not None:  # last: a piece it forces is not taken away by a rule after it
            rules.append(terms)
        return cls(rules, shortlist)

    def __call__(self, logits: torch.Tensor, t: int) -> torch.Tensor:
        """logits (rows, vocab) of step t -> with every rule applied, in order (in place)."""
        for rule in self.rules:
            logits = rule(logits, t)
        return logits

    def chose(self, tokens: torch.Tensor) -> None:
        """The tokens (rows,) chosen at this step."""
        for rule in self.rules:
            rule.chose(tokens)

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (new_rows,), in that order."""
        for rule in self.rules:
            rule.select(rows)

    def forced(self) -> torch.Tensor | None:
        """(rows,) bool: the hypotheses the placeholder rule wrote a placeholder into where the model would
        have ended (None: no placeholder rule in this search). The search reports it per sentence
        (`Decoded.forced`), so the translation is noted, never moved silently (generate/checks.py)."""
        for rule in self.rules:
            if isinstance(rule, PlaceholderConstraint):
                return rule.forced
        return None
