"""The lesson beside its steps on the page (`explain --html` and `serve`), in headless Chromium."""

from __future__ import annotations

import re

import httpx
import pytest
from live_support import browser_tab, serve, wait_for, wait_until

from clearformer.explain.examples import run_example
from clearformer.explain.html import write_html
from clearformer.explain.translation import explain_translation
from clearformer.learn.lessons import LESSONS, lesson
from clearformer.learn.page import lesson_index, page_sections
from clearformer.load import load_model

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)


def expected_lessons(name: str) -> list[int]:
    """The lessons the page shows beside step `name`: the one the step leads to (page_leads: a cross-attention step
    opens lesson 9, not lesson 4) first, then the others in order."""
    found = [item for item in LESSONS if any(re.search(p, name) for p in item.page_steps)]
    leading = [item for item in found if any(re.search(p, name) for p in item.page_leads)]
    return [item.number for item in leading + [item for item in found if item not in leading]]


@pytest.fixture(scope="module")
def toy_walk(toy_runs):
    model, tokenizer, _ = load_model(toy_runs / "toy-translate")
    return explain_translation(model, tokenizer, "I love you")


def test_every_step_of_a_translation_and_of_the_seed_examples_has_its_lesson(toy_walk):
    names = {s.name for s in toy_walk.steps}
    names |= {s.name for example in ("i-love-you", "india-is-great") for s in run_example(example)[0].steps}
    assert [name for name in sorted(names) if not expected_lessons(name)] == []
    assert {entry["number"] for entry in lesson_index()} >= {2, 3, 4, 5, 6, 7, 8, 9, 10}


@pytest.fixture
def tab(browser):
    yield from browser_tab(browser)


def open_step(tab, name: str) -> None:
    button = tab.locator(f'.cf-nav-step[title="{name}"]').first
    if not button.is_visible():
        button.locator("xpath=../summary").click()
    button.click()
    assert tab.locator("#cf-view").get_attribute("data-step-name") == name


def assert_lesson_panel(tab, name: str) -> None:
    numbers = expected_lessons(name)
    panel = tab.locator("#cf-lesson")
    assert panel.get_attribute("data-lessons") == ",".join(map(str, numbers)), name
    assert panel.is_visible()
    first = lesson(numbers[0])
    assert tab.locator("#cf-lesson details[open] summary").text_content() == f"Lesson {first.number}: {first.title}"
    assert tab.locator("#cf-lesson details[open] .cf-lesson-concept").text_content() == first.concept
    assert f"clearformer learn {first.number}" in panel.text_content()


STEPS = ["src_embed.positions.PE", "encoder.layers.0.self_attention.Q", "encoder.layers.0.self_attention.scaled",
         "encoder.layers.0.self_attention.concat", "encoder.layers.0.add_norm_2.norm", "encoder.output",
         "decoder.layers.0.self_attention.mask", "decoder.layers.1.cross_attention.weights",
         "output.probabilities", "generate.chosen"]


def test_the_exported_page_shows_the_lesson_beside_each_step(tab, toy_walk, tmp_path):
    path = write_html(toy_walk, tmp_path / "page.html", sections=page_sections())
    tab.goto(path.as_uri())
    for name in STEPS:
        open_step(tab, name)
        assert_lesson_panel(tab, name)
    tab.keyboard.press("Home")       # the first step, token ids: lesson 1
    assert tab.locator("#cf-lesson").get_attribute("data-lessons") == "1"


@pytest.fixture(scope="module")
def live(toy_runs, tmp_path_factory):
    yield from serve(toy_runs / "toy-translate", tmp_path_factory)


def test_the_live_page_shows_the_lessons_for_the_seed_example_and_a_typed_sentence(tab, live):
    assert httpx.get(live + "static/lessons.js").status_code == 200
    tab.goto(live)
    wait_for(tab, "#cf-nav .cf-nav-step", "the step navigation's entries")
    open_step(tab, "self_attention.scaled")              # the page opens on seed 002's example
    assert_lesson_panel(tab, "self_attention.scaled")
    tab.fill("#cf-sentence", "I love you")
    tab.click("#cf-explain")
    wait_until(tab, "the typed sentence's translation and walkthrough",
               "document.querySelector('#cf-result') && "
               "document.querySelector('#cf-summary h1').textContent.includes('Translating')")
    open_step(tab, "encoder.layers.0.self_attention.weights")
    assert_lesson_panel(tab, "encoder.layers.0.self_attention.weights")
