"""Placeholders copied exactly: a decoding constraint over the tokenizer's placeholder pieces.

A SentencePiece vocabulary trained by clearformer keeps every frequent placeholder of the training
data (`%s`, `%d`, `{0}`, `%PRODUCTNAME`, `<b>`, ...; see `clearformer.tokenize.placeholders`) as one piece,
so a placeholder in a source sentence is one token id, and copying it is one decoding choice.
`PlaceholderConstraint` makes that choice compulsory, row by row:

* a placeholder piece may be produced only while the source still has one of it unused
  (none invented, none doubled); where numerals stand in, a slot's two forms ("▁2", "2") are one
  placeholder, either of which pays for it (the model's choice of form places the space);
* <eos> is forbidden while any placeholder piece of the source is still unused
  (none dropped);
* where <eos> would have been the best token but a placeholder is still owed, the best owed
  placeholder comes instead (a model that has "finished" rarely chooses the placeholder it
  skipped on its own: left free, it would write on until its length limit);
* the source's final punctuation is where its sentence ends, as <eos> is: where a source ends with a
  sentence-final mark (`final_mark_pieces`: ".", "...", "?", "!", ":", ")"), the output's mark that would be its
  last (it has written one mark fewer than the source holds; a run of mark pieces, "." "." ".", is one
  mark) gives way to an owed placeholder as <eos> does. Else the placeholder lands after the sentence's end
  ("The document is not %s valid." -> "O documento não é válido. %s": BENCHMARKS.md, "Trust: corruptions
  ..."); a mark inside a line of two sentences is no end;
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
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from clearformer.tokenize.placeholders import RESERVED_PATTERN


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
                 limits: torch.Tensor | None = None, final_marks: Sequence[int] = (),
                 pad_id: int | None = None, slots: Sequence[frozenset[int]] = ()) -> None:
        self.piece_ids = piece_ids.to(src_ids.device)
        self.eos_id = eos_id
        # The pieces of one stand-in slot ("▁2" and "2", tokenize/standins.py) pay for each other: the model's choice
        # of form places the space (a source's "(2" may come out "classe 2)"). same (n_pieces, n_pieces): one slot;
        # lead (n_pieces,): the first piece of each slot, which counts what the slot owes.
        self.same, self.lead, self.marks = slot_tables(tuple(self.piece_ids.tolist()), tuple(slots),
                                                       tuple(final_marks), src_ids.device)
        # marks_left (rows,): the source's sentence-final marks the output has yet to write, where the source ends
        # with one (else 0: <eos> alone ends it); after_mark (rows,): the last token written was a mark
        self.marks_left = source_marks(src_ids, self.marks, eos_id, pad_id)
        self.after_mark = torch.zeros(src_ids.shape[0], dtype=torch.bool, device=src_ids.device)
        # remaining[s, j] = how often piece j (or another form of its slot) occurs in sentence s's source
        self.remaining = (src_ids[:, :, None] == self.piece_ids[None, None, :]).sum(dim=1) @ self.same
        self.limits = limits  # (rows,) tokens each hypothesis may generate in all, or None: no limit known
        self.bound = torch.ones(src_ids.shape[0], dtype=torch.bool, device=src_ids.device)
        self.forced = torch.zeros_like(self.bound)
        self.free = torch.zeros_like(self.remaining, dtype=torch.bool)  # (rows, n_pieces): a sentence's numerals

    @classmethod
    def for_batch(cls, src_ids: torch.Tensor, piece_ids: Sequence[int] | None, eos_id: int,
                  limits: torch.Tensor | None = None,
                  owing: Sequence[bool] | None = None,
                  free: Sequence[frozenset[int]] | None = None,
                  final_marks: Sequence[int] = (), pad_id: int | None = None,
                  slots: Sequence[frozenset[int]] = ()) -> PlaceholderConstraint | None:
        """The constraint for a batch (`limits` (batch,): the decoder's length limits; `owing` (batch,):
        which sentences owe their pieces, None: all; `free` (batch,): the pieces that are a sentence's own
        numerals where numerals stand in, neither owed nor forbidden here: `NumeralRuns` governs them;
        `final_marks`: the vocabulary's sentence-final punctuation pieces, `final_mark_pieces`; `slots`: the pieces of
        each stand-in slot, either of which pays for the other), or None
        when there are no placeholder pieces or no sentence of the batch is bound by them (then decoding runs
        unconstrained, at no cost). A bound sentence without placeholders is still constrained, alone as in any
        batch: it writes none."""
        if not piece_ids:
            return None
        constraint = cls(src_ids, torch.tensor(sorted(piece_ids), dtype=torch.long), eos_id, limits, final_marks,
                         pad_id, slots)
        if owing is not None:  # numerals standing in: a sentence without placeholders keeps its numbers free
            constraint.bound = torch.tensor(owing, dtype=torch.bool, device=src_ids.device)
            constraint.remaining[~constraint.bound] = 0
        if free is not None:
            constraint.free = torch.tensor([[int(piece) in own for piece in constraint.piece_ids.tolist()]
                                            for own in free], dtype=torch.bool, device=src_ids.device)
            constraint.remaining[constraint.free] = 0
        return constraint if bool(constraint.bound.any()) else None

    def forbidden(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, n_pieces) True where piece j must not come next; and (rows,) True where <eos> must not.
        A row that is not bound has neither: the same logits as without the rule (batch-invariance)."""
        return (self.remaining == 0) & self.bound[:, None] & ~self.free, self.owed() > 0

    def owed(self) -> torch.Tensor:
        """(rows,) how many placeholders each hypothesis still owes (a slot's forms counted once)."""
        return (self.remaining * self.lead).sum(dim=1)

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """Set the logits of forbidden tokens to -inf, in place: logits (rows, vocab) for the token at
        step t (0-based; needed to know how many tokens are left before the length limits)."""
        no_piece, no_eos = self.forbidden()
        best = logits.argmax(dim=-1)
        owing = no_eos & ((best == self.eos_id) | self.would_end_sentence(best))  # would end, but one is owed
        if self.limits is not None and t is not None:  # only room left for the owed placeholders
            owing |= no_eos & (self.owed() >= self.limits - t)
        pieces = logits[:, self.piece_ids].masked_fill(no_piece, float("-inf"))
        logits[:, self.piece_ids] = pieces
        logits[:, self.eos_id] = logits[:, self.eos_id].masked_fill(no_eos, float("-inf"))
        if bool(owing.any()):
            self.forced |= owing
            only_owed = torch.full_like(logits[owing], float("-inf"))
            only_owed[:, self.piece_ids] = pieces[owing].masked_fill(self.remaining[owing] == 0, float("-inf"))
            logits[owing] = only_owed
        return logits

    def would_end_sentence(self, best: torch.Tensor) -> torch.Tensor:
        """(rows,) True where the best token `best` (rows,) starts the output's last sentence-final mark."""
        if not self.marks.numel():
            return torch.zeros_like(best, dtype=torch.bool)
        return torch.isin(best, self.marks) & ~self.after_mark & (self.marks_left == 1)

    def chose(self, tokens: torch.Tensor) -> None:
        """Count the chosen tokens (rows,): a placeholder piece is used up; a mark that starts a run of marks is
        one of the source's sentence ends written."""
        self.remaining = (self.remaining - (tokens[:, None] == self.piece_ids[None, :]).long() @ self.same).clamp(min=0)
        if self.marks.numel():
            mark = torch.isin(tokens, self.marks)
            self.marks_left = (self.marks_left - (mark & ~self.after_mark).long()).clamp(min=0)
            self.after_mark = mark

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (as `DecoderState.select`)."""
        self.remaining = self.remaining.index_select(0, rows)
        self.marks_left, self.after_mark = self.marks_left.index_select(0, rows), self.after_mark.index_select(0, rows)
        self.bound, self.forced = self.bound.index_select(0, rows), self.forced.index_select(0, rows)
        self.free = self.free.index_select(0, rows)
        if self.limits is not None:
            self.limits = self.limits.index_select(0, rows)


def slot_tables(ids: tuple[int, ...], slots: tuple[frozenset[int], ...], final_marks: tuple[int, ...],
                device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`PlaceholderConstraint`'s vocabulary-level tensors for its pieces `ids` (n_pieces,): same (n_pieces,
    n_pieces), 1 where two pieces are one stand-in slot's; lead (n_pieces,), each slot's first piece; and the
    sentence-final marks (sorted). They depend on the vocabulary only: made once and shared by every batch (one
    sentence at a time they were rebuilt per sentence: BENCHMARKS.md, "Firefox's en-pt student")."""
    key = (ids, slots, final_marks, str(device))
    if key not in _SLOT_TABLES:
        if len(_SLOT_TABLES) >= MAX_TABLES:
            _SLOT_TABLES.clear()
        slot_of = [next((k for k, slot in enumerate(slots) if piece in slot), len(slots) + j)
                   for j, piece in enumerate(ids)]
        group = torch.tensor(slot_of, dtype=torch.long, device=device)
        _SLOT_TABLES[key] = ((group[:, None] == group[None, :]).long(),
                             torch.tensor([slot_of.index(k) == j for j, k in enumerate(slot_of)], dtype=torch.bool,
                                          device=device),
                             torch.tensor(sorted(final_marks), dtype=torch.long, device=device))
    return _SLOT_TABLES[key]


_SLOT_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


# A piece of these characters (after its word mark), ending with one that is not an opening bracket, ends a
# sentence or closes its last part: an owed placeholder comes before a source's closing parenthesis too ("%s() (%s
# class method)" -> "... (todo método de classe)%s" else; "()" is one piece of Firefox's, "(" ")" two). Not the
# apostrophe, which is also a word's spelling ("don't").
SENTENCE_FINAL, OPENING = ".!?:…)]}»\"", "([{«"


def final_mark_pieces(tokenizer) -> tuple[int, ...]:
    """The pieces of `tokenizer`'s vocabulary that write sentence-final punctuation only (".", "▁.", "...", "?",
    "!", ":", and the closing ")", "()", "]", '"'), for `PlaceholderConstraint`. Read once per tokenizer."""
    if tokenizer not in _FINAL_MARKS:
        _FINAL_MARKS[tokenizer] = tuple(
            index for index in range(len(tokenizer))
            if (text := tokenizer.id_to_token(index).lstrip("".join(WORD_MARKS)))
            and all(character in SENTENCE_FINAL + OPENING for character in text) and text[-1] in SENTENCE_FINAL)
    return _FINAL_MARKS[tokenizer]


def source_marks(src_ids: torch.Tensor, marks: torch.Tensor, eos_id: int, pad_id: int | None) -> torch.Tensor:
    """(sentences,) how many runs of sentence-final mark pieces each source (sentences, src_len) holds where its last
    piece (before <eos> and padding) is one, else 0."""
    is_mark = torch.isin(src_ids, marks)
    starts = is_mark & ~torch.cat([torch.zeros_like(is_mark[:, :1]), is_mark[:, :-1]], dim=1)
    text = src_ids != eos_id
    if pad_id is not None:
        text &= src_ids != pad_id
    positions = torch.arange(src_ids.shape[1], device=src_ids.device).expand_as(src_ids)
    last = torch.where(text, positions, -1).amax(dim=1)
    ends = is_mark.gather(1, last.clamp(min=0)[:, None])[:, 0] & (last >= 0)
    return torch.where(ends, starts.sum(dim=1), torch.zeros_like(last))


_FINAL_MARKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class NumeralRuns:
    """No numeral in a translation that its source lacks, checked on the number being written, not on each piece.

    A number is often written in several pieces: "IPv6" is "▁IPv" "6", and a piece of digits glued to a piece
    of digits (no word boundary between them) continues the same number. Each piece may be the sentence's own
    ("6") while the number they join into is not ("IPv66": BENCHMARKS.md, "Trust: corruptions ..."). So the
    rule follows each hypothesis's digit run, the digits written since the last non-digit or word boundary:

    * a digit may extend the run only while the run stays a prefix of one of the source's numbers ("1" of "15"),
      and only where the vocabulary can finish it, within the hypothesis's length limit;
    * the run may end (a non-digit piece, a piece starting a word, <eos>) only where it equals one of them.

    `pieces` are the vocabulary's pieces holding a digit, (id, starts a word, text without the word mark, ends a
    word) (`digit_pieces`); a word vocabulary's tokens each start and end a word. `numerals` (sentences,): each
    source's numbers (None: the sentence is left free); `neutral` (sentences,): the pieces that stand in for a
    placeholder of that sentence (tokenize/standins.py), which the placeholder rule counts: they end a run and
    are never forbidden here; `silent`: pieces that write nothing (<bos>, <pad>), across which a number goes on;
    `limits` (sentences,): the tokens each may generate. Where a hypothesis's unfinished number has no
    continuation left (the shortlist may hold none), the row is left free rather than left with no token at
    all: the post-check (generate/checks.py) still notes what comes out. `select` follows the hypotheses;
    `chose` extends or ends their runs.
    """

    def __init__(self, pieces: Sequence[tuple[int, bool, str, bool]], numerals: Sequence[Sequence[str] | None],
                 neutral: Sequence[frozenset[int]], device: torch.device, silent: frozenset[int] = frozenset(),
                 limits: torch.Tensor | None = None) -> None:
        # The vocabulary's digit pieces as a table, and what each key allows (`key`: it depends only on these
        # pieces and the key, never on the batch): made once per vocabulary and shared by every batch, so one
        # sentence at a time does not rebuild them (a measured share of a sentence's time: BENCHMARKS.md,
        # "Firefox's en-pt student").
        table = digit_table(pieces, device)
        self.pieces, self.ids = table.pieces, table.ids
        self.blocked_rows, self.continuing = table.blocked, table.continuing
        self.numbers = [None if own is None else frozenset(own) for own in numerals]
        self.prefixes = [None if own is None else frozenset(n[:k] for n in own for k in range(1, len(n) + 1))
                         for own in numerals]
        self.neutral, self.silent, self.device = list(neutral), silent, device
        self.limits = None if limits is None else limits.tolist()
        self.sentence = list(range(len(numerals)))  # the sentence of each hypothesis (row)
        self.run = [""] * len(numerals)  # each row's digit run so far ("": not inside a number)

    @classmethod
    def for_batch(cls, pieces: Sequence[tuple[int, bool, str, bool]], numerals: Sequence[Sequence[str] | None] | None,
                  neutral: Sequence[frozenset[int]] | None, device: torch.device, silent: frozenset[int] = frozenset(),
                  limits: torch.Tensor | None = None) -> NumeralRuns | None:
        """The rule for one batch, or None without digit pieces or without a sentence it binds."""
        if not pieces or numerals is None or all(own is None for own in numerals):
            return None
        neutral = neutral if neutral is not None else [frozenset()] * len(numerals)
        return cls(pieces, numerals, neutral, device, silent, limits)

    def after(self, sentence: int, run: str, starts: bool, text: str, ends: bool = False) -> str | None:
        """The run after writing a piece (`starts`/`ends`: it begins/ends a word; `text`: without the word mark),
        or None where the piece would make or end a number the source does not hold."""
        numbers, prefixes = self.numbers[sentence], self.prefixes[sentence]
        if starts:
            if run and run not in numbers:
                return None
            run = ""
        for character in text:
            if character.isdecimal():
                run += character
                if run not in prefixes:
                    return None
            else:
                if run and run not in numbers:
                    return None
                run = ""
        if ends and run and run not in numbers:
            return None
        return "" if ends else run

    def to_finish(self, sentence: int, run: str) -> int:
        """How many more pieces an unfinished run may need at most: a digit each (0: the run is finished)."""
        if not run or run in self.numbers[sentence]:
            return 0
        return min(len(n) - len(run) for n in self.numbers[sentence] if n.startswith(run))

    def key(self, sentence: int, run: str, left: int | None) -> tuple:
        """What a row's choices depend on: its sentence's numbers and stand-ins, its run, and the pieces it may
        still write where that is fewer than its longest number (most rows share a few keys)."""
        longest = max((len(n) for n in self.numbers[sentence]), default=0)
        near = left if left is not None and left < longest else None
        return self.numbers[sentence], self.neutral[sentence], run, near

    def allows(self, sentence: int, run: str, index: int, left: int | None = None) -> bool:
        """Whether piece `index` may follow `run` with `left` pieces to come after it (None: no limit): it makes no
        foreign number, and a number it leaves unfinished can be finished with the vocabulary's pieces in time
        (a "▁1" of "15" needs a "5" to follow)."""
        if index in self.neutral[sentence]:
            return True
        after = self.after(sentence, run, *self.pieces[index])
        if after is None or not self.to_finish(sentence, after):
            return after is not None
        return (left is None or left >= self.to_finish(sentence, after)) and bool(
            self._continuations(sentence, after, None if left is None else left - 1).numel())

    def _blocked(self, sentence: int, run: str, left: int | None) -> torch.Tensor:
        """(n_digit_pieces,) True where the piece may not come next, for a row of `sentence` whose run is `run`."""
        key = self.key(sentence, run, left)
        if key not in self.blocked_rows:
            refused = [not self.allows(sentence, run, index, left) for index in self.ids.tolist()]
            self.blocked_rows[key] = torch.tensor(refused, dtype=torch.bool, device=self.device)
        return self.blocked_rows[key]

    def _continuations(self, sentence: int, run: str, left: int | None) -> torch.Tensor:
        """The ids that may follow an unfinished run: digit pieces carrying it on towards one of the sentence's
        numbers (empty: the run cannot be finished)."""
        key = self.key(sentence, run, left)
        if key not in self.continuing:
            ids = [index for index, (starts, text, _) in self.pieces.items()
                   if not starts and text[:1].isdecimal() and index not in self.neutral[sentence]
                   and self.allows(sentence, run, index, left)]
            self.continuing[key] = torch.tensor(sorted(ids), dtype=torch.long, device=self.device)
        return self.continuing[key]

    def __call__(self, logits: torch.Tensor, t: int | None = None) -> torch.Tensor:
        """Set to -inf, in place, the pieces that would make or end a number the row's source does not hold."""
        bound = [row for row, sentence in enumerate(self.sentence) if self.numbers[sentence] is not None]
        if not bound:
            return logits
        blocked = torch.zeros((logits.shape[0], self.ids.numel()), dtype=torch.bool, device=self.device)
        lefts = {row: self.left(row, t) for row in bound}
        for row in bound:
            blocked[row] = self._blocked(self.sentence[row], self.run[row], lefts[row])
        logits[:, self.ids] = logits[:, self.ids].masked_fill(blocked, float("-inf"))
        for row in bound:
            sentence, run = self.sentence[row], self.run[row]
            if not self.to_finish(sentence, run):
                continue
            carry_on = torch.cat([self._continuations(sentence, run, lefts[row]),  # an unfinished number
                                  torch.tensor(sorted(self.neutral[sentence]), dtype=torch.long, device=self.device)])
            kept = logits[row, carry_on]
            if carry_on.numel() and bool(torch.isfinite(kept).any()):
                logits[row] = float("-inf")
                logits[row, carry_on] = kept
        return logits

    def left(self, row: int, t: int | None) -> int | None:
        """The pieces row `row` may write after the one chosen at step t (None: no limit known)."""
        if self.limits is None or t is None:
            return None
        return int(self.limits[self.sentence[row]]) - t - 1

    def chose(self, tokens: torch.Tensor) -> None:
        """Extend or end each row's run with its chosen token (rows,)."""
        for row, token in enumerate(tokens.tolist()):
            sentence, piece = self.sentence[row], self.pieces.get(token)
            if token in self.silent:
                continue
            if self.numbers[sentence] is None or piece is None or token in self.neutral[sentence]:
                self.run[row] = ""  # not a digit piece: any run ends here
                continue
            self.run[row] = self.after(sentence, self.run[row], *piece) or ""

    def select(self, rows: torch.Tensor) -> None:
        keep = rows.tolist()
        self.sentence = [self.sentence[i] for i in keep]
        self.run = [self.run[i] for i in keep]


@dataclass
class DigitTable:
    """`NumeralRuns`' view of a vocabulary's digit pieces: id -> (starts a word, text, ends a word), their ids
    (n_digit_pieces,), and its two caches, key -> blocked digit pieces and key -> continuation ids."""

    pieces: dict[int, tuple[bool, str, bool]]
    ids: torch.Tensor
    blocked: dict[tuple, torch.Tensor] = field(default_factory=dict)
    continuing: dict[tuple, torch.Tensor] = field(default_factory=dict)


# (id of the digit pieces, device) -> (those pieces, kept alive while their id is a key here; their table)
_TABLES: dict[tuple[int, str], tuple[Sequence, DigitTable]] = {}
MAX_KEYS = 4096  # keys kept per table: a server's sentences bring new numbers for ever
MAX_TABLES = 8


def digit_table(pieces: Sequence[tuple[int, bool, str, bool]], device: torch.device) -> DigitTable:
    """The one `DigitTable` of these digit pieces (`digit_pieces`) on `device`, made at its first batch; its caches
    are emptied when they pass MAX_KEYS keys."""
    slot = (id(pieces), str(device))
    found = _TABLES.get(slot)
    if found is None or found[0] is not pieces:
        if len(_TABLES) >= MAX_TABLES:
            _TABLES.clear()
        table = DigitTable({index: (starts, text, ends) for index, starts, text, ends in pieces},
                           torch.tensor([index for index, *_ in pieces], dtype=torch.long, device=device))
        found = _TABLES[slot] = (pieces, table)
    for cache in (found[1].blocked, found[1].continuing):
        if len(cache) > MAX_KEYS:
            cache.clear()
    return found[1]


_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def digit_pieces(tokenizer) -> tuple[tuple[int, bool, str, bool], ...]:
    """(id, starts a word, text without the word mark, ends a word) of every piece of `tokenizer`'s vocabulary
    that writes a digit, for `NumeralRuns`: SentencePiece's "▁15" starts a word, "5" continues one; a word
    vocabulary's tokens each stand apart (tokenize/words.py puts spaces between them); a byte piece "<0x35>"
    writes "5". Reserved placeholder tokens ｟ph0｠ are no numerals. Read once per tokenizer."""
    if tokenizer in _DIGIT_PIECES:
        return _DIGIT_PIECES[tokenizer]
    words = tokenizer.kind == "words"
    found = []
    for index in range(len(tokenizer)):
        text = tokenizer.id_to_token(index)
        if not any(character.isdecimal() for character in text) or RESERVED_PATTERN.fullmatch(text):
            continue
        byte = _BYTE.fullmatch(text)
        if byte:
            if 0x30 <= int(byte.group(1), 16) <= 0x39:
                found.append((index, False, chr(int(byte.group(1), 16)), False))
            continue
        found.append((index, words or text.startswith(WORD_MARKS), text if words else text.lstrip("".join(WORD_MARKS)),
                      words))
    _DIGIT_PIECES[tokenizer] = tuple(found)
    return _DIGIT_PIECES[tokenizer]


WORD_MARKS = ("▁", "Ġ")  # SentencePiece's and GPT-2's word-start marks
_DIGIT_PIECES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
