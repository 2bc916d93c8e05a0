"""A lesson as terminal text: concept, snippet with its real output, the step on your sentence, the question."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from clearformer.explain.render import render
from clearformer.learn.lessons import LESSONS, LearnerRun, Lesson, StepView
from clearformer.learn.questions import Question, step
from clearformer.learn.snippets import SnippetRun

MAX_WIDTH = 100


def terminal_width() -> int:
    """The columns a lesson is laid out in: the terminal's (rich's Console knows it; 80 when not a terminal),
    at most MAX_WIDTH, so that no rule wraps and no line breaks mid-word."""
    from rich.console import Console

    return max(40, min(Console().width, MAX_WIDTH))


def lesson_list() -> str:
    lines = ["clearformer lessons (the seeds' order): `clearformer learn N` shows lesson N", ""]
    lines += [f"  {lesson.number:2d}. {lesson.title}" for lesson in LESSONS]
    lines += ["", "exercises: `clearformer learn exercise NAME` writes a starter file; "
                  "`clearformer learn check NAME FILE` checks it", "  (`clearformer learn exercises` lists them)"]
    return "\n".join(lines) + "\n"


def heading(text: str) -> str:
    width = terminal_width()
    if len(text) + 7 > width:  # a long heading (your sentence) wraps at words, under its own rule
        return f"\n{'=' * width}\n" + textwrap.fill(text, width) + "\n"
    return f"\n== {text} " + "=" * max(3, width - len(text) - 4) + "\n"


def render_views(run: LearnerRun, views: list[StepView]) -> str:
    """The recorded steps of `views`, printed as `clearformer explain` prints them."""
    parts = []
    for view in views:
        found = step(run.walk, view.name, view.decode_step)
        number = next(i for i, s in enumerate(run.walk.steps, start=1) if s is found)  # as the page numbers it
        if view.cols is not None:
            start, stop = view.cols
            found = replace(found, matrices=[replace(m, values=[row[start:stop] for row in m.values],
                                                     col_labels=m.col_labels[start:stop],
                                                     note=f"columns {start}..{stop - 1} of {len(m.col_labels)}")
                                             for m in found.matrices])
        sub = replace(run.walk, title="", source_tokens=[], result="", steps=[found])
        text = render(sub, decimals=4, head=view.head, max_cols=view.max_cols, max_rows=12, width=terminal_width(),
                      color=False, start=number)
        parts.append(text.lstrip("\n"))
    return "".join(parts)


def lesson_text(lesson: Lesson, snippet: SnippetRun, run: LearnerRun, question: Question,
                views: list[StepView], extra: str = "") -> str:
    out = [f"Lesson {lesson.number} of {len(LESSONS)}: {lesson.title}   (seeds {lesson.seeds})"]
    out.append(heading("Concept"))
    out.append(textwrap.fill(lesson.concept, terminal_width()))
    out.append(heading("See it work: clearformer's modules on the seeds' data"))
    out.append(textwrap.indent(snippet.source.rstrip(), "    "))
    out.append("\n--- output ---")
    out.append(snippet.output.rstrip())
    if views:
        out.append(heading(f"On your sentence: {run.sentence!r} -> {run.walk.result!r} (the trained toy model)"))
        out.append(render_views(run, views).rstrip())
    else:  # lesson 13: no step of the translator; its extra says what model reads the sentence
        out.append(heading(f"On your sentence: {run.sentence!r}"))
    if extra:  # lesson 12's beam table, lesson 13's language model, lesson 14's latent (learn/extras.py)
        out.append("")
        out.append(extra.rstrip())
    out.append(heading("Question"))
    out.append("\n".join(textwrap.fill(line, terminal_width(), subsequent_indent="     " if line.startswith("  ")
                                        else "") for line in question.text().splitlines()))
    out.append(heading("Practise it"))
    out.append(textwrap.fill(exercise_line(lesson), terminal_width()))
    return "\n".join(out) + "\n"


def exercise_line(lesson: Lesson) -> str:
    """The lesson's last line: the command that writes its exercise (learn/exercises.py)."""
    part = f" ({lesson.exercise_part})" if lesson.exercise_part else ""
    return (f"Write it yourself: `clearformer learn exercise {lesson.exercise}`{part}, then `clearformer learn check "
            f"{lesson.exercise} FILE`.")
