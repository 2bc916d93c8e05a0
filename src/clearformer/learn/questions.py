"""Guiding questions and their checks.

A question is either a number read off a recorded step (checked to a stated tolerance) or a choice.
The numbers are read from the walkthrough recorded on the learner's own sentence, so the check is
exact for any sentence; the hint names the step that holds the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from clearformer.errors import UserError
from clearformer.explain.walkthrough import Step, Walkthrough


@dataclass
class Question:
    prompt: str
    kind: str                      # "number" or "choice"
    answer: float | str            # the number, or the right choice's text
    hint: str                      # where the answer is: the step, the row, the column
    tolerance: float = 0.0         # numbers: |given - answer| <= tolerance is right
    choices: list[str] = field(default_factory=list)
    why: str = ""                  # one sentence shown once the answer is right (or given away)

    def __post_init__(self) -> None:
        if self.kind == "number" and self.tolerance > 0:
            self.tolerance = refusing_rounded(float(self.answer), self.tolerance)

    def describe_tolerance(self) -> str:
        if self.kind != "number":
            return ""
        if self.tolerance == 0:
            return "a whole number"
        return f"to within ±{self.tolerance:.2g}"

    def text(self) -> str:
        """The question as printed: the prompt, then the choices or the tolerance."""
        lines = [self.prompt]
        if self.kind == "choice":
            lines += [f"  {chr(ord('a') + i)}) {choice}" for i, choice in enumerate(self.choices)]
            lines.append("Answer with a letter or the choice itself.")
        else:
            lines.append(f"Answer with a number ({self.describe_tolerance()}).")
        return "\n".join(lines)

    def shown_answer(self) -> str:
        if self.kind == "choice":
            return f"{chr(ord('a') + self.choices.index(self.answer))}) {self.answer}"
        if self.tolerance == 0:
            return f"{self.answer:.0f}"
        return f"{self.answer:.4f}" if self.tolerance >= 5e-5 else f"{self.answer:.4g}"


def refusing_rounded(answer: float, tolerance: float) -> float:
    """`tolerance`, narrowed from the answer's own scale so that the answer rounded to one decimal (or to a
    whole number, or 0: all multiples of 0.1) is refused whatever the answer: at most half the answer's distance
    from its rounding. The lessons choose answers far from a round number (lessons.py `pick`), so this bites
    only where no candidate is (0.9007 with a tolerance of 1e-3 is asked to within 3.5e-4)."""
    distance = abs(answer - round(answer, 1))
    return min(tolerance, distance / 2) if distance > 0 else tolerance  # a round answer is itself right


def parse_answer(question: Question, text: str) -> float | str:
    """The learner's answer as a number or a choice; a UserError (exit 2) when it is neither."""
    given = text.strip()
    if question.kind == "number":
        try:
            value = float(given.replace(",", "."))
        except ValueError:
            raise UserError(f"answer {given[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise UserError(f"answer {given[:40]!r} is not a finite number")
        return value
    letters = {chr(ord("a") + i): choice for i, choice in enumerate(question.choices)}
    if given.lower() in letters:
        return letters[given.lower()]
    for choice in question.choices:
        if given.lower() == choice.lower():
            return choice
    options = ", ".join(f"{letter}) {choice}" for letter, choice in letters.items())
    raise UserError(f"answer {given[:40]!r} is not one of the choices: {options}")


def is_right(question: Question, text: str) -> bool:
    given = parse_answer(question, text)
    if question.kind == "number":
        return abs(given - float(question.answer)) <= question.tolerance + 1e-12
    return given == question.answer


# ----------------------------------------------------------------------------- reading a walkthrough


def step(walk: Walkthrough, name: str, decode_step: int | None = None) -> Step:
    """The recorded step called `name` (at generation step `decode_step`)."""
    for candidate in walk.steps:
        if candidate.name == name and candidate.decode_step == decode_step:
            return candidate
    raise KeyError(f"the recording has no step {name!r}" + (f" at generation step {decode_step + 1}"
                                                             if decode_step is not None else ""))


def cell(found: Step, row: int, col: int, head: int | None = None) -> float:
    matrices = [m for m in found.matrices if head is None or m.head == head]
    return float(matrices[0].values[row][col])


def where(found: Step, head: int | None = None, row: str | None = None, col: str | None = None) -> str:
    """'Step "Scaled scores" (encoder.layers.0.self_attention.scaled), head 0, row 'I', column 'love''."""
    text = f'the step "{found.title}" ({found.name}'
    if found.decode_step is not None:
        text += f", generation step {found.decode_step + 1}"
    text += ")"
    if head is not None:
        text += f", head {head}"
    if row is not None:
        text += f", row {row!r}"
    if col is not None:
        text += f", column {col!r}"
    return text
