"""A lesson in Python (the notebooks use it): record your sentence, look at the step, answer the question.

    from clearformer.learn.session import open_lesson
    lesson = open_lesson(4, "I love you")   # the trained toy model (trained once if missing) records it
    lesson.steps()                          # the lesson's steps: a Walkthrough (shown as the page in Jupyter)
    print(lesson.question.text())
    lesson.check(0.42)                      # True / False, with the hint when it is wrong
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from clearformer.explain.html import notebook_html
from clearformer.explain.walkthrough import Walkthrough
from clearformer.learn.extras import extra_text
from clearformer.learn.lessons import LearnerRun, Lesson, StepView, lesson
from clearformer.learn.page import page_sections
from clearformer.learn.present import render_views
from clearformer.learn.questions import Question, is_right, step
from clearformer.learn.toy import DEFAULT_SENTENCE, record_sentence


class LessonWalkthrough(Walkthrough):
    """A lesson's steps, which Jupyter shows as the page of `explain --html` with the lessons beside the steps."""

    def _repr_html_(self) -> str:
        return notebook_html(self, sections=page_sections())


@dataclass
class LessonSession:
    lesson: Lesson
    run: LearnerRun
    question: Question
    views: list[StepView]
    checkpoint: str | Path | None = None

    def steps(self) -> Walkthrough:
        """The walkthrough of your sentence limited to the steps this lesson asks about."""
        chosen = [step(self.run.walk, view.name, view.decode_step) for view in self.views]
        unique = list({id(s): s for s in chosen}.values())
        walk = replace(self.run.walk, title=f"Lesson {self.lesson.number}: {self.lesson.title} — "
                                            f"{self.run.sentence!r}", steps=unique)
        return LessonWalkthrough(**{item.name: getattr(walk, item.name) for item in fields(walk)})

    def steps_text(self) -> str:
        """The same steps as the terminal lesson prints them."""
        return render_views(self.run, self.views)

    def extra(self) -> None:
        """Lesson 12's beam table, lesson 14's MLA latent, on your sentence (printed); nothing for the others."""
        text = extra_text(self.lesson.extra.get("show"), self.run.sentence, self.checkpoint)
        if text:
            print(text, end="")

    def check(self, answer) -> bool | None:
        """Check `answer` (a number or a choice); prints the verdict (and the hint when it is wrong)."""
        if answer is None:
            print("Put your answer in `answer` and run the cell again.")
            return None
        right = is_right(self.question, str(answer))
        if right:
            print(f"Right: {self.question.shown_answer()}. {self.question.why}")
        else:
            print(f"Not quite. Hint: {self.question.hint}.")
        return right


def open_lesson(number: int, sentence: str = DEFAULT_SENTENCE, checkpoint: str | Path | None = None) -> LessonSession:
    item = lesson(number)
    run = record_sentence(sentence, checkpoint)
    question, views = item.ask(run)
    return LessonSession(item, run, question, views, checkpoint)


# ----------------------------------------------------------------------------- exercises in a notebook


def check_exercise(name: str, path: str | Path, timeout: float = 60.0) -> bool | None:
    """The notebook's exercise cell: `clearformer learn check NAME PATH` (the same checker, in a child process),
    its report printed; True when every case matches, None when the file cannot be used (the reason printed)."""
    from clearformer.errors import UserError
    from clearformer.learn.capstone_run import CAPSTONE, check_capstone
    from clearformer.learn.check import check_file, format_report
    from clearformer.learn.exercises import exercise

    try:
        report = (check_capstone(Path(path), timeout) if name == CAPSTONE
                  else check_file(exercise(name), Path(path), timeout))
    except UserError as error:
        print(f"cannot check it: {error}")
        return None
    print(format_report(report), end="")
    return report.ok


def write_missing_solutions(folder: str | Path = ".") -> list[str]:
    """Lesson 15's notebook: the worked solution of every exercise file not yet in `folder`, or still the untouched
    starter an earlier lesson's notebook wrote there (not the learner's work: learn/starters.py). A file the learner
    changed is never replaced."""
    from clearformer.learn.exercises import EXERCISES
    from clearformer.learn.solutions import solution_text
    from clearformer.learn.starters import is_untouched_starter
    from clearformer.store.atomic import atomic_write_text

    written, replaced = [], []
    for item in EXERCISES:
        path = Path(folder) / item.filename
        if not path.exists():
            atomic_write_text(path, solution_text(item.name), overwrite=False)
            written.append(item.filename)
        elif is_untouched_starter(item, path):
            atomic_write_text(path, solution_text(item.name))
            replaced.append(item.filename)
    if written:
        print("wrote the worked solutions of: " + ", ".join(written))
    if replaced:
        print("replaced the untouched starters (no block filled) of: " + ", ".join(replaced) +
              " with their worked solutions")
    if not written and not replaced:
        print("every exercise file is here already (yours are kept)")
    return written + replaced


def train_exercise(path: str | Path = "transformer.py", out: str | Path | None = None, steps: int | None = None,
                   overwrite: bool = False) -> int:
    """Lesson 15's notebook: `clearformer learn train PATH` (clearformer's trainer on your model, in a child)."""
    from clearformer.errors import UserError
    from clearformer.learn.capstone_run import train_capstone

    try:
        return train_capstone(Path(path), Path(out) if out else None, 1800.0, steps, overwrite)
    except UserError as error:
        print(f"cannot train it: {error}")
        return 2
