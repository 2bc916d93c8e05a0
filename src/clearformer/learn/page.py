"""The lessons as the walkthrough page shows them: beside each step, the lesson that explains it.

`lesson_index()` is embedded in every page (`explain --html` and `serve`, explain/html.py, which asks
for it through `add_page_section`: explain/ imports nothing of learn/); the
page's `lessons.js` matches the current step's recorded name against each lesson's `steps`
(regular expressions, the same `Lesson.page_steps` the lessons module defines) and shows the
concept with the commands that go further (the terminal lesson, its exercise, its notebook).
"""

from __future__ import annotations

from clearformer.explain.html import add_page_section
from clearformer.learn.exercises import EXERCISES
from clearformer.learn.lessons import LESSONS


def lesson_index() -> list[dict]:
    return [{"number": item.number, "title": item.title, "concept": item.concept, "steps": list(item.page_steps),
             "leads": list(item.page_leads),
             "command": f"clearformer learn {item.number}",
             "exercises": [f"clearformer learn exercise {e.name}" for e in EXERCISES if e.lesson == item.number],
             "notebook": f"notebooks/lesson-{item.number:02d}-{item.slug}.ipynb"}
            for item in LESSONS if item.page_steps]


add_page_section("lessons", lesson_index)  # every page shows the lessons (explain/html.py asks, never imports)
