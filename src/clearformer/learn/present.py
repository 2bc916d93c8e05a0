"""A lesson as terminal text: concept, snippet with its real output, the step on your sentence, the question."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from clearformer.explain.render import render
from clearformer.learn.lessons import LESSONS, LearnerRun, Lesson, StepView
from clearformer.learn.questions import Question, step
from clearformer.learn.snippets import SnippetRun

WIDTH = 100


def lesson_list() -> str:
    lines = ["clearformer lessons (the seeds' order): `clearformer learn N` shows lesson N", ""]
    lines += [f"  {lesson.number:2d}. {lesson.title}" for lesson in LESSONS]
    lines += ["", "exercises: `clearformer learn exercise NAME` writes a starter file; "
                  "`clearformer learn check NAME FILE` checks it", "  (`clearformer learn exercises` lists them)"]
    return "\n".join(lines) + "\n"


def heading(text: str) -> str:
    return f"\n== {text} " + "=" * max(3, WIDTH - len(text) - 4) + "\n"


def render_views(run: LearnerRun, views: list[StepView]) -> str:
    """The recorded steps of `views`, printed as `clearformer explain` prints them."""
    parts = []
    for view in views:
        found = step(run.walk, view.name, view.decode_step)
        if view.cols is not None:
            start, stop = view.cols
            found = replace(found, matrices=[replace(m, values=[row[start:stop] for row in m.values],
                                                     col_labels=m.col_labels[start:stop],
                                                     note=f"columns {start}..{stop - 1} of {len(m.col_labels)}")
                                             for m in found.matrices])
        sub = replace(run.walk, title="", source_tokens=[], result="", steps=[found])
        text = render(sub, decimals=4, head=view.head, max_cols=view.max_cols, max_rows=12, width=WIDTH, color=False)
        parts.append(text.lstrip("\n"))
    return "".join(parts)


def lesson_text(lesson: Lesson, snippet: SnippetRun, run: LearnerRun, question: Question,
                views: list[StepView], extra: str = "") -> str:
    out = [f"Lesson {lesson.number} of {len(LESSONS)}: {lesson.title}   (seeds {lesson.seeds})"]
    out.append(heading("Concept"))
    out.append(textwrap.fill(lesson.concept, WIDTH))
    out.append(heading("See it work: clearformer's modules on the seeds' data"))
    out.append(textwrap.indent(snippet.source.rstrip(), "    "))
    out.append("\n--- output ---")
    out.append(snippet.output.rstrip())
    out.append(heading(f"On your sentence: {run.sentence!r} -> {run.walk.result!r} (the trained toy model)"))
    out.append(render_views(run, views).rstrip())
    if extra:  # lesson 12's beam table, lesson 14's latent (learn/extras.py)
        out.append("")
        out.append(extra.rstrip())
    out.append(heading("Question"))
    out.append(question.text())
    return "\n".join(out) + "\n"
