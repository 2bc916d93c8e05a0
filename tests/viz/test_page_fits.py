"""The page at 1100 and 1600 px, measured in Chromium (not by eye): no text is cut, no box hides what it holds
(scrollWidth against clientWidth), the one box that may scroll (the beam tree) shows its scroll bar, the step view
starts above the fold, every heatmap has its colour legend, and every count starts from 1."""

from __future__ import annotations

import pytest

from clearformer.explain.html import write_html
from clearformer.explain.search import explain_search
from clearformer.explain.translation import explain_translation
from clearformer.generate import DecodingOptions
from clearformer.learn.page import page_sections

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

WIDTHS = [1100, 1600]
SENTENCE = "She does not love you and I love you"  # eight source words and <eos>: wide attention rows

# Every element that holds more than it shows: hidden overflow, a scroll box (only the beam tree may scroll, and
# with a scroll bar one can see), text wider than its box (a column label running into the next one), and the
# page wider than the window.
CLIPPED = """(selector) => {
  const roots = [...document.querySelectorAll(selector)];
  const found = [];
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className ? '.' + e.className.split(' ').join('.') : '') +
    (e.textContent ? ' "' + e.textContent.slice(0, 30) + '"' : '');
  for (const root of roots) for (const e of [root, ...root.querySelectorAll('*')]) {
    if (!e.getClientRects().length || e instanceof SVGElement) continue;
    const style = getComputedStyle(e);
    if (e.scrollWidth <= e.clientWidth + 1 || e.clientWidth === 0) continue;
    if (['auto', 'scroll'].includes(style.overflowX)) {
      // Playwright's headless Chromium hides scroll bars (--hide-scrollbars): the tree says it scrolls instead
      if (!e.classList.contains('cf-beam-svg')) found.push('scrolls: ' + name(e));
      else if (e.offsetHeight - e.clientHeight < 6 && (e.dataset.scrolls !== 'true' ||
               !e.parentElement.querySelector('.cf-beam-scroll:not([hidden])'))) {
        found.push('scrolls and says nothing: ' + name(e));
      }
    } else if (e.closest('.cf-dense') === null) {
      found.push((style.overflowX === 'visible' ? 'spills: ' : 'cut: ') + name(e));
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) found.push('the page is wider than the window');
  return found;
}"""


def clipped(tab, selector: str) -> list[str]:
    return tab.evaluate(CLIPPED, selector)


@pytest.fixture(scope="module")
def pages(tiny_model, tmp_path_factory):
    model, tokenizer = tiny_model
    folder = tmp_path_factory.mktemp("pages")
    greedy = write_html(explain_translation(model, tokenizer, SENTENCE, DecodingOptions(max_new=6)),
                        folder / "greedy.html", sections=page_sections())   # the lessons beside the steps
    beam = write_html(explain_search(model, tokenizer, SENTENCE, DecodingOptions(beam=3, max_new=8)),
                      folder / "beam.html")
    return greedy, beam


@pytest.mark.parametrize("width", WIDTHS)
def test_no_step_of_the_page_is_clipped(page, pages, width):
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(pages[0].as_uri())
    page.wait_for_selector("#cf-view[data-step-name]")
    count = page.evaluate("Clearformer.state.walk.steps.length")
    problems = {}
    for index in range(count):
        page.evaluate(f"Clearformer.show({index})")
        found = clipped(page, "#cf-view, #cf-generation, #cf-summary, .cf-header")
        if found:
            problems[page.evaluate("Clearformer.state.walk.steps[Clearformer.state.index].name")] = found
    assert not problems, problems
    top = page.evaluate("document.getElementById('cf-matrices').getBoundingClientRect().top")
    assert top < 800 - 150, f"at {width} px the step's numbers start at {top} px: below the fold"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_beam_tree_uses_the_width_and_shows_its_scroll_bar(page, pages, width):
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(pages[1].as_uri())
    page.wait_for_selector("#cf-beam .cf-beam-node")
    assert clipped(page, "#cf-beam") == []
    tree, box = page.evaluate("[document.querySelector('#cf-beam .cf-beam-svg svg').getBoundingClientRect().width,"
                              " document.querySelector('#cf-beam .cf-beam-svg').clientWidth]")
    beam = page.evaluate("document.getElementById('cf-beam').clientWidth")
    assert box >= min(tree, beam - 40), (tree, box, beam)   # the tree gets the room it needs, up to the whole box


def test_every_heatmap_has_a_legend_and_counts_start_from_one(page, pages):
    page.goto(pages[0].as_uri())
    page.wait_for_selector("#cf-view[data-step-name]")
    count = page.evaluate("Clearformer.state.walk.steps.length")
    for index in range(0, count, 7):
        page.evaluate(f"Clearformer.show({index})")
        matrices = page.locator(".cf-matrix").count()
        assert page.locator(".cf-matrix > .cf-legend").count() == matrices
    options = page.eval_on_selector_all("#cf-decode option", "os => os.map(o => [o.value, o.textContent])")
    for value, text in options[1:]:
        assert text.startswith(f"{int(value) + 1} → "), (value, text)   # generation step t+1, as the title says
    assert len(options) >= 2
    page.select_option("#cf-decode", options[-1][0])
    assert f"Generation step {int(options[-1][0]) + 1}" in page.inner_text("#cf-where")
    assert page.inner_text("#cf-position").startswith("Step ")


def test_a_cross_attention_step_opens_lesson_9(page, pages):
    page.goto(pages[0].as_uri())
    page.wait_for_selector("#cf-view[data-step-name]")
    index = page.evaluate("Clearformer.state.walk.steps.findIndex(s => s.name.endsWith('cross_attention.weights'))")
    page.evaluate(f"Clearformer.show({index})")
    opened = page.eval_on_selector_all("#cf-lesson details", "ds => ds.map(d => [d.dataset.lesson, d.open])")
    assert opened[0] == ["9", True] and all(not is_open for _, is_open in opened[1:]), opened


@pytest.mark.parametrize("width", WIDTHS)
def test_patching_and_attribution_fit_and_say_completeness_per_word(page, live_server, width):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(live_server)
    page.wait_for_selector("#cf-view[data-step-name]")
    page.fill("#cf-sentence", "I love you")
    page.click("#cf-explain")
    page.wait_for_selector("#cf-result")
    page.fill("#cf-why-corrupted", "I love cat")
    page.click("#cf-why-patch")
    page.wait_for_selector("#cf-why-out .cf-why-patch")
    assert clipped(page, "#cf-why") == []
    assert page.locator("#cf-why-out .cf-matrix > .cf-legend").count() == page.locator("#cf-why-out .cf-matrix").count()
    page.click("#cf-why-attribute")
    page.wait_for_selector("#cf-why-out .cf-why-attribution")
    assert clipped(page, "#cf-why") == []
    menu = page.eval_on_selector_all("#cf-why-target option", "os => os.map(o => o.textContent)")
    assert menu[0].startswith("1: ")                                   # counted from 1, as the steps are
    lines = set()
    for value in page.eval_on_selector_all("#cf-why-target option", "os => os.map(o => o.value)"):
        page.select_option("#cf-why-target", value)
        line = page.inner_text("#cf-why-out .cf-why-completeness")
        assert line.startswith("completeness for “")
        lines.add(line)
    assert len(lines) == len(menu)                                     # one line per target word, each its own
