"""The lessons as the walkthrough page shows them: beside each step, the lesson that explains it.

`lesson_index()` is embedded in every page: the commands that write or serve one (commands/views.py,
serve/app.py, the lessons' notebooks) pass `page_sections()` to explain/html.py, which imports nothing of
learn/; the
page's `lessons.js` matches the current step's recorded name against each lesson's `steps`
(regular expressions, the same `Lesson.page_steps` the lessons module defines) and shows the
concept with the commands that go further (the terminal lesson, its exercise, its notebook).
"""

from __future__ import annotations

from clearformer.learn.exercises import EXERCISES
from clearformer.learn.lessons import LESSONS


def lesson_index() -> list[dict]:
    return [{"number": item.number, "title": item.title, "concept": item.concept, "steps": list(item.page_steps),
             "leads": list(item.page_leads),
             "command": f"clearformer learn {item.number}",
             "exercises": [f"clearformer learn exercise {e.name}" for e in EXERCISES if e.lesson == item.number],
             "notebook": f"notebooks/lesson-{item.number:02d}-{item.slug}.ipynb"}
            for item in LESSONS if item.page_steps]


def page_sections() -> dict:
    """What every page shows beside the steps (explain/html.py `render_page`'s `sections`): the lessons."""
    return {"lessons": lesson_index()}
