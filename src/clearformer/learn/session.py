"""A lesson in Python (the notebooks use it): record your sentence, look at the step, answer the question.

    from clearformer.learn.session import open_lesson
    lesson = open_lesson(4, "I love you")   # the trained toy model (trained once if missing) records it
    lesson.steps()                          # the lesson's steps: a Walkthrough (shown as the page in Jupyter)
    print(lesson.question.text())
    lesson.check(0.42)                      # True / False, with the hint when it is wrong
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from clearformer.explain.walkthrough import Walkthrough
from clearformer.learn.extras import extra_text
from clearformer.learn.lessons import LearnerRun, Lesson, StepView, lesson
from clearformer.learn.present import render_views
from clearformer.learn.questions import Question, is_right, step
from clearformer.learn.toy import DEFAULT_SENTENCE, record_sentence


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
        return replace(self.run.walk, title=f"Lesson {self.lesson.number}: {self.lesson.title} — "
                                            f"{self.run.sentence!r}", steps=unique)

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
