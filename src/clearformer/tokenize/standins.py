"""Placeholders in a vocabulary not made for them: numeral pieces stand in for the reserved tokens.

A run trained here masks each placeholder as a reserved token `｟ph{i}｠`, one piece of its vocabulary
(tokenize/placeholders.py), and decoding copies each exactly (generate/constraints.py). A production
vocabulary (Marian's opus-mt, Firefox's students) has no such piece, and adding rows would change the
vocabulary the model ships with (its engine, its shortlist). So the i-th placeholder of a sentence is
given a piece the vocabulary already has and the model already copies: the numeral i + 1 ("▁1",
"1"; "▁2", "2"; ...). Numbers are what a translation model copies most faithfully, and a numeral sits
where a placeholder sits (`Delete %d files` reads `Delete 1 files`). Then the machinery of the
reserved tokens applies unchanged:

    mask:    "Copy %s to %s?"   -> "Copy ｟ph0｠ to ｟ph1｠?"            (tokenize/placeholders.py)
    encode:  ｟ph0｠ -> the piece "▁1", ｟ph1｠ -> "▁2"                  (`StandIns.pieces`)
    decode:  the copy constraint makes "▁1" and "▁2" come out once each (their ids are the
             tokenizer's placeholder_ids); each comes back as ｟ph{i}｠   (`StandIns.text`)
    restore: ｟ph0｠ -> "%s" ...                                          (`placeholders.restore`)

The form follows the text: a placeholder after a space (or first) takes the spaced piece "▁1", one
attached to a word ("'%s'") the bare "1", and the model's choice of form places the space in the
translation. Stand-ins are chosen per sentence among the numerals the sentence does not hold
(`assign`): "Page 1 of %d" masks %d as ｟ph1｠ (the piece "▁2"), and its own "1" stays the numeral it is
(a stand-in piece of the vocabulary, spelled back by `Masked.spelled`; decoding treats it as the sentence's
number, not as a placeholder owed: generate/options.py `own_stand_ins`), so a placeholder is masked in every
sentence with room for it and a translation never depends on which other sentences share its batch. A sentence
with more placeholders than free numerals is not masked (its numerals stay numerals). No sentence's translation
writes a number its source lacks, however the pieces join (generate/constraints.py `NumeralRuns`): the model
would otherwise glue a stand-in to a neighbour and leak it into the output ("manipulador 1: %s %s",
docs/placeholders.md), or join two of the sentence's own digits into a number it lacks ("IPv66").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from clearformer.tokenize.placeholders import RESERVED_COUNT, RESERVED_PATTERN, Masked

SPACE = "▁"  # SentencePiece's word-start mark
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class StandIns:
    """The numeral pieces of a vocabulary that stand in for ｟ph0｠, ｟ph1｠, ...: `texts[i]` ("1", "2", ...),
    `spaced[i]` ("▁1") and `attached[i]` ("1"), each None where the vocabulary lacks that form."""

    texts: tuple[str, ...]
    spaced: tuple[str | None, ...]
    attached: tuple[str | None, ...]
    numeral_pieces: tuple[str, ...] = ()  # every other piece of the vocabulary that holds a digit ("▁1:", "150")

    @classmethod
    def from_vocabulary(cls, vocabulary: Mapping[str, int]) -> StandIns | None:
        """The stand-ins a vocabulary offers (numerals 1, 2, ... with at least one form a single piece, up
        to RESERVED_COUNT); None when it has none."""
        texts, spaced, attached = [], [], []
        for number in range(1, 100):
            if len(texts) == RESERVED_COUNT:
                break
            text = str(number)
            forms = (SPACE + text if SPACE + text in vocabulary else None, text if text in vocabulary else None)
            if forms == (None, None):
                continue
            texts.append(text)
            spaced.append(forms[0])
            attached.append(forms[1])
        if not texts:
            return None
        forms = set(spaced) | set(attached)
        numeral = tuple(piece for piece in vocabulary if piece not in forms and any(c.isdigit() for c in piece))
        return cls(tuple(texts), tuple(spaced), tuple(attached), numeral)

    @property
    def pieces_used(self) -> tuple[str, ...]:
        """Every stand-in piece (both forms): the pieces the copy constraint counts."""
        return tuple(p for p in (*self.spaced, *self.attached) if p is not None)

    def assign(self, text: str, masked: Masked) -> Masked:
        """The stand-ins of one sentence: its placeholders (`masked`, ｟ph0｠.. in order) renumbered onto the
        numerals the sentence does not hold ("Page 1 of ｟ph0｠" -> "Page 1 of ｟ph1｠", whose "▁2" stands in for
        %d); a numeral of its own holds every numeral it contains ("15": 1, 5 and 15). The slots skipped keep
        their numeral as what they stand for. More placeholders than free numerals: nothing masked."""
        own = own_numerals(masked.text)
        free = [slot for slot, numeral in enumerate(self.texts) if not any(numeral in number for number in own)]
        used = len(masked.originals)
        if used > len(free):
            return Masked(text, (), self.texts)
        slots = free[:used]
        renumbered = RESERVED_PATTERN.sub(lambda match: f"｟ph{slots[int(match.group(1))]}｠", masked.text)
        originals = list(self.texts[: slots[-1] + 1]) if slots else []
        for index, slot in enumerate(slots):
            originals[slot] = masked.originals[index]
        return Masked(renumbered, tuple(originals), self.texts)

    def pieces(self, text: str, encode: Callable[[str], list[str]], known: Callable[[str], bool]) -> list[str]:
        """The pieces of a masked text: `encode` (text -> pieces) between the reserved tokens, a stand-in
        piece for each `｟ph{i}｠` (i beyond the stand-ins: its characters, as `encode` gives them)."""
        pieces: list[str] = []
        position = 0
        for match in RESERVED_PATTERN.finditer(text):
            pieces += self._segment(text[position:match.start()], pieces, encode, known)
            index = int(match.group(1))
            spaced_here = not pieces or text[:match.start()][-1:].isspace()
            pieces += self._form(index, spaced_here, known) if index < len(self.texts) else encode(match.group(0))
            position = match.end()
        return pieces + self._segment(text[position:], pieces, encode, known)

    def _form(self, index: int, spaced: bool, known: Callable[[str], bool]) -> list[str]:
        """The stand-in of ｟ph{index}｠: its spaced or attached form as the text wants; a vocabulary that splits
        digits from the word-start mark (split_digits: "▁" "2") gets the mark, then the attached form."""
        if spaced and self.spaced[index] is None and known(SPACE):
            return [SPACE, self.attached[index]]
        first, second = (self.spaced, self.attached) if spaced else (self.attached, self.spaced)
        return [first[index] if first[index] is not None else second[index]]

    @staticmethod
    def _segment(segment: str, before: list[str], encode, known) -> list[str]:
        """A stretch of text between stand-ins; one glued to the stand-in before it loses the word-start
        mark SentencePiece puts on every text it encodes ("%ds": "▁1" "s", not "▁1" "▁s")."""
        if not segment.strip():
            return []
        pieces = encode(segment)
        if before and not segment[0].isspace() and pieces:
            if pieces[0] == SPACE:
                pieces = pieces[1:]
            elif pieces[0].startswith(SPACE) and known(pieces[0][1:]):
                pieces = [pieces[0][1:], *pieces[1:]]
        return pieces

    def index(self, piece: str) -> int | None:
        """Which ｟ph{i}｠ a stand-in piece is (None for any other piece)."""
        for index, (spaced, attached) in enumerate(zip(self.spaced, self.attached, strict=True)):
            if piece in (spaced, attached):
                return index
        return None

    def text(self, pieces: list[str], decode: Callable[[list[str]], str]) -> str:
        """Target pieces -> text, each stand-in as ｟ph{i}｠ (after a space where it was the spaced form)."""
        out, run = [], []

        def flush() -> None:
            if run:
                words = decode(run)
                out.append((" " if out and run[0].startswith(SPACE) else "") + words)
                run.clear()

        for piece in pieces:
            index = self.index(piece)
            if index is None:
                run.append(piece)
                continue
            flush()
            out.append((" " if out and piece.startswith(SPACE) else "") + f"｟ph{index}｠")
        flush()
        return "".join(out)


def own_numerals(masked_text: str) -> tuple[str, ...]:
    """The digit runs of a masked sentence outside its reserved tokens: the numbers that are its own."""
    return tuple(_NUMBER.findall(RESERVED_PATTERN.sub(" ", masked_text)))
