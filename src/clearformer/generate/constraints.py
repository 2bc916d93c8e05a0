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

Both are masks on the next-token logits (decoding rules, generate/rules.py); the rest of decoding is
unchanged. Placeholders that are
not single pieces (rare ones, below the vocabulary's frequency threshold) are not constrained; a
run that masks placeholders (tokenize/placeholders.py) has every one of them as a reserved token
｟ph{i}｠, a single piece, so there all are.

`RepeatBound` stops runaway repetition: a piece may come at most max(3, its longest run in the
source) times in a row. A young model that lost its place in the source (a number spelled digit by
digit, a placeholder it never saw as one piece) otherwise writes the same piece again and again until
its length limit (BENCHMARKS.md, "Placeholders: masked before the model, restored after"); with
the repeat forbidden, it has to choose another piece, most often <eos>. Placeholder pieces are left
to `PlaceholderConstraint`, which counts them.

Both are decoding rules in the shape generate/rules.py gives them: called on the (rows, vocab) logits of
step t, told the tokens chosen (`chose`) and the hypotheses kept (`select`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch


class PlaceholderConstraint:
    """Per-hypothesis counts of the placeholder pieces still to be produced.

    src_ids (sentences, src_len) and the placeholder piece ids (n_pieces,) -> `remaining`
    (rows, n_pieces), one row per hypothesis, and `bound` (rows,): whether the row is constrained at all
    (a sentence that owes no copies, `owing`, decodes exactly as it would alone, in a batch with none:
    its pieces neither forbidden nor forced); `forced` (rows,): whether the rule ever put a placeholder
    in where the model would have ended (the translation then holds it at a place the model did not
    choose: generate/checks.py notes it); `select` follows the hypotheses as they are kept, reordered and
    (for beams, after step 0) repeated.
    """

    def __init__(self, src_ids: torch.Tensor, piece_ids: torch.Tensor, eos_id: int,
                 limits: torch.Tensor | None = None) -> None:
        self.piece_ids = piece_ids.to(src_ids.device)
        self.eos_id = eos_id
        # remaining[s, j] = how often piece j occurs in sentence s's source
        self.remaining = (src_ids[:, :, None] == self.piece_ids[None, None, :]).sum(dim=1)
        self.limits = limits  # (rows,) tokens each hypothesis may generate in all, or None: no limit known
        self.bound = torch.ones(src_ids.shape[0], dtype=torch.bool, device=src_ids.device)
        self.forced = torch.zeros_like(self.bound)

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, piece_ids: Sequence[int] | None, eos_id: int,
                  limits: torch.Tensor | None = None,
                  owing: Sequence[bool] | None = None) -> PlaceholderConstraint | None:
        """The constraint for a batch (`limits` (batch,): the decoder's length limits; `owing` (batch,):
        which sentences owe their pieces, None: all), or None when there are no placeholder pieces or no
        sentence of the batch is bound by them (then decoding runs unconstrained, at no cost). A bound
        sentence without placeholders is still constrained, alone as in any batch: it writes none."""
        if not piece_ids:
            return None
        constraint = cls(src_ids, torch.tensor(sorted(piece_ids), dtype=torch.long), eos_id, limits)
        if owing is not None:  # numerals standing in: a sentence without placeholders keeps its numbers free
            constraint.bound = torch.tensor(owing, dtype=torch.bool, device=src_ids.device)
            constraint.remaining[~constraint.bound] = 0
        return constraint if bool(constraint.bound.any()) else None

    def forbidden(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, n_pieces) True where piece j must not come next; and (rows,) True where <eos> must not.
        A row that is not bound has neither: the same logits as without the rule (batch-invariance)."""
        return (self.remaining == 0) & self.bound[:, None], self.remaining.sum(dim=1) > 0

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
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
            self.forced |= owing
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
        self.bound, self.forced = self.bound.index_select(0, rows), self.forced.index_select(0, rows)
        if self.limits is not None:
            self.limits = self.limits.index_select(0, rows)


class ForeignNumerals:
    """Where numerals stand in for placeholders (tokenize/standins.py), a sentence's translation writes no digits
    but its own: a piece holding a digit run that is no part of a number of the sentence ("▁1:", "2:", "▁150"
    after "15") is forbidden in its rows. The stand-in pieces themselves are the placeholder rule's to count.

    allowed (rows, vocab) bool, built at the first step from each sentence's own numbers (`SearchTokens.numerals`;
    None: the sentence is left free); `select` follows the hypotheses.
    """

    def __init__(self, forbidden: list[list[int]], device: torch.device) -> None:
        self.forbidden = forbidden  # per sentence, the piece ids it may not write
        self.device = device
        self.blocked: torch.Tensor | None = None

    @classmethod
    def for_batch(cls, pieces: Sequence[tuple[int, str]], numerals: Sequence[Sequence[str] | None],
                  device: torch.device) -> ForeignNumerals | None:
        """The rule for one batch, or None when no sentence of it has stand-ins."""
        if not pieces or not any(own is not None for own in numerals):
            return None
        forbidden = [[] if own is None else [index for index, text in pieces if not is_own(text, own)]
                     for own in numerals]
        return cls(forbidden, device)

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        if self.blocked is None:
            self.blocked = torch.zeros(len(self.forbidden), logits.shape[-1], dtype=torch.bool)
            for row, ids in enumerate(self.forbidden):
                self.blocked[row, ids] = True
            self.blocked = self.blocked.to(self.device)
        return logits.masked_fill_(self.blocked, float("-inf"))

    def chose(self, tokens: torch.Tensor) -> None:
        """Nothing to count: the set depends on the source only."""

    def select(self, rows: torch.Tensor) -> None:
        if self.blocked is None:
            self.forbidden = [self.forbidden[i] for i in rows.tolist()]
        else:
            self.blocked = self.blocked.index_select(0, rows)


def is_own(piece: str, numbers: Sequence[str]) -> bool:
    """Whether every digit run of `piece` is part of one of the sentence's `numbers` ("15" of "2015")."""
    return all(any(run in number for number in numbers) for run in re.findall(r"\d+", piece))


MIN_RUN = 3  # a piece may always repeat this often in a row ("...", "000"); more only where the source does
# A span of 2..MAX_SPAN pieces may come twice in a row ("de la de la" is rare but French); the piece that would
# complete a third copy is refused unless the source holds that loop itself. Without this, a model kept from
# repeating one piece loops over two ("de code de code de code ...") to the length limit instead
# (BENCHMARKS.md, "Placeholders: masked before the model, restored after").
SPAN_COPIES, MAX_SPAN = 3, 8


def ends_in_loop(pieces: Sequence[int]) -> bool:
    """Whether `pieces` end in SPAN_COPIES copies in a row of one span of 2..MAX_SPAN pieces (what
    `RepeatBound` refuses to complete, unless the source holds the loop)."""
    return any(len(pieces) >= SPAN_COPIES * span
               and all(pieces[-i] == pieces[-i - span] for i in range(1, (SPAN_COPIES - 1) * span + 1))
               for span in range(2, MAX_SPAN + 1))


class RepeatBound:
    """Runaway repetition, bounded: runs of one piece, and loops of a span of 2..MAX_SPAN pieces.

    src_ids (sentences, src_len) -> `runs` (rows, src_len): the length of the run of src[j] that ends at
    position j; `last` and `count` (rows,): the last piece each hypothesis produced, and how many
    times in a row; `recent` (rows, <= SPAN_COPIES * MAX_SPAN): its last pieces, for the loops.
    `select` follows the hypotheses as `PlaceholderConstraint.select` does.
    """

    def __init__(self, src_ids: torch.Tensor, pad_id: int, exempt: Sequence[int] = ()) -> None:
        runs = torch.ones_like(src_ids)
        for j in range(1, src_ids.shape[1]):
            runs[:, j] = torch.where(src_ids[:, j] == src_ids[:, j - 1], runs[:, j - 1] + 1, 1)
        self.src = src_ids.masked_fill(src_ids == pad_id, -1)
        self.runs = runs
        self.exempt = torch.tensor(sorted(exempt), dtype=torch.long, device=src_ids.device)
        self.last = torch.full((src_ids.shape[0],), -1, dtype=torch.long, device=src_ids.device)
        self.count = torch.zeros_like(self.last)
        self.recent = src_ids.new_empty((src_ids.shape[0], 0))

    def allowed(self) -> torch.Tensor:
        """(rows,) how often the last piece may come in a row: max(MIN_RUN, its longest run in the source)."""
        in_source = (self.src == self.last[:, None]).long() * self.runs
        return in_source.amax(dim=1).clamp(min=MIN_RUN)

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """Set to -inf, in place, the logit of a piece that would run past its bound or close a loop."""
        if bool((self.count >= MIN_RUN).any()):  # rarely true: most steps have no run long enough to check
            stop = (self.count >= self.allowed()) & (self.last >= 0)
            rows = (stop & ~self.is_exempt(self.last)).nonzero()[:, 0]
            if rows.numel():
                logits[rows, self.last[rows]] = float("-inf")
        for rows, pieces in self.loop_closers():
            logits[rows, pieces] = float("-inf")
        return logits

    def is_exempt(self, pieces: torch.Tensor) -> torch.Tensor:
        """(rows,) bool: placeholder pieces, which the placeholder constraint counts instead."""
        if not self.exempt.numel():
            return torch.zeros_like(pieces, dtype=torch.bool)
        return (pieces[:, None] == self.exempt[None, :]).any(dim=1)

    def loop_closers(self):
        """For each span length L: (rows, piece) where the last SPAN_COPIES * L - 1 pieces repeat with period L,
        so that `piece` would complete SPAN_COPIES copies of the span, and the source has no such loop."""
        for span in range(2, MAX_SPAN + 1):
            width = SPAN_COPIES * span - 1
            if self.recent.shape[1] < width:
                break
            window = self.recent[:, -width:]
            periodic = (window[:, span:] == window[:, :-span]).all(dim=1)
            if not bool(periodic.any()):
                continue
            pieces = window[:, -span]
            rows = (periodic & ~self.is_exempt(pieces)).nonzero()[:, 0]
            keep = [r for r in rows.tolist() if not self.source_holds(r, window[r].tolist() + [pieces[r].item()])]
            if keep:
                keep_rows = torch.tensor(keep, dtype=torch.long, device=rows.device)
                yield keep_rows, pieces[keep_rows]

    def source_holds(self, row: int, loop: list[int]) -> bool:
        """Whether source row `row` contains the pieces `loop` in a row (a loop the input itself has)."""
        source, n = self.src[row].tolist(), len(loop)
        return any(source[i:i + n] == loop for i in range(len(source) - n + 1))

    def chose(self, tokens: torch.Tensor) -> None:
        """Count the chosen tokens (rows,)."""
        self.count = torch.where(tokens == self.last, self.count + 1, torch.ones_like(self.count))
        self.last = tokens.clone()
        self.recent = torch.cat([self.recent, tokens[:, None]], dim=1)[:, -SPAN_COPIES * MAX_SPAN:]

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows`."""
        self.src, self.runs = self.src.index_select(0, rows), self.runs.index_select(0, rows)
        self.last, self.count = self.last.index_select(0, rows), self.count.index_select(0, rows)
        self.recent = self.recent.index_select(0, rows)
