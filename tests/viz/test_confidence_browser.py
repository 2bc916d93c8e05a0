"""The page's words by confidence in a real browser (Debian's chromium through Playwright), on the live page: the
numbers are those `clearformer translate --confidence --format json` prints for the same sentence and model (run
here as a command), every word is coloured and carries its number for hover, focus and screen readers, a low one
is also marked, and selecting a low word from the keyboard opens the logit lens and the attribution at its step
(greedy, and beam after the what-if panel reruns the sentence with a beam). The threshold is taken from the
shown numbers, so the test holds whichever words a seed's random model is unsure of."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from live_support import serve, wait_for, wait_until
from test_confidence_server import build_wordy
from test_viz_browser import shown

from clearformer.explain.why import attribute_report, lens_report
from clearformer.generate import DecodingOptions
from clearformer.serve.why import SERVER_STEPS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

SENTENCE = "I love you"
WORDS = """nodes => nodes.map(n => ({
    word: n.firstChild.textContent, confidence: +n.dataset.confidence, low: n.classList.contains('cf-conf-low'),
    tag: n.tagName, tabindex: n.tabIndex, title: n.title, label: n.getAttribute('aria-label'),
    weakest: +n.dataset.weakest, marked: !n.querySelector('.cf-conf-mark').hidden,
    active: n.getAttribute('aria-disabled') === 'false',
    coloured: (() => { const probe = document.createElement('span');
                       probe.style.backgroundColor = Clearformer.confidenceColour(+n.dataset.confidence);
                       return probe.style.backgroundColor === n.style.backgroundColor
                              && n.style.backgroundColor !== ''; })()}))"""


@pytest.fixture(scope="module")
def wordy_checkpoint(tiny_checkpoint, tmp_path_factory):
    return build_wordy(tiny_checkpoint, tmp_path_factory.mktemp("confidence") / "wordy")


@pytest.fixture(scope="module")
def wordy_server(wordy_checkpoint, tmp_path_factory):
    """`clearformer serve` of the tiny random model that writes words on every seed -> its base URL."""
    yield from serve(wordy_checkpoint, tmp_path_factory)


@pytest.fixture(scope="module")
def wordy_model(wordy_checkpoint):
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(wordy_checkpoint)
    return model, tokenizer


def command_json(checkpoint, tmp_path, sentence: str, *extra: str) -> tuple[dict, str]:
    """`clearformer translate --confidence --format json SENTENCE` on `checkpoint`: (its JSON line, its stderr)."""
    env = dict(os.environ, CLEARFORMER_RUNS=str(tmp_path / "runs"))
    done = subprocess.run([sys.executable, "-m", "clearformer.cli", "translate", "--checkpoint", str(checkpoint),
                           "--confidence", "--format", "json", *extra, sentence], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0]), done.stderr


def threshold_from(values: list[float]) -> float:
    """A threshold that makes the least confident word(s) low and, where the numbers differ, not all of them."""
    distinct = sorted(set(values))
    return round((distinct[0] + distinct[1]) / 2, 6) if len(distinct) > 1 else round(distinct[0] + 0.005, 6)


def set_threshold(page, threshold: float) -> None:
    page.fill("#cf-conf-threshold", str(threshold))
    page.dispatch_event("#cf-conf-threshold", "change")
    wait_until(page, "the words to be judged against the new threshold",
               f"document.querySelector('#cf-conf-threshold').value === '{threshold}'")


def check_words(page, expected: dict, threshold: float) -> list[dict]:
    words = page.eval_on_selector_all("#cf-conf-words .cf-conf-word", WORDS)
    assert [(w["word"], w["confidence"]) for w in words] == [(w["word"], w["confidence"]) for w in
                                                            expected["words"]]
    for word in words:
        low = word["confidence"] < threshold
        assert word["low"] is low and word["marked"] is low  # not colour alone: underlined and marked
        assert word["coloured"]
        assert f"confidence {word['confidence']:.2f}" in word["title"] and word["label"] == word["title"]
        # reachable from the keyboard: every word is a button, active (a link to its step) when it is low
        assert word["tag"] == "BUTTON" and word["active"] is low
    assert float(page.get_attribute("#cf-confidence-value", "data-confidence")) == expected["confidence"]
    return words


def open_by_keyboard(page, words: list[dict]) -> dict:
    """Tab from the threshold field to the first low word and press Enter: that word."""
    first = next(i for i, w in enumerate(words) if w["low"])
    page.focus("#cf-conf-threshold")
    visited = []
    for _ in range(len(words) + 3):
        page.keyboard.press("Tab")
        visited.append(page.evaluate("document.activeElement.dataset.index || document.activeElement.id"))
        if visited[-1] == str(first):
            break
    assert visited == [str(i) for i in range(first + 1)], "Tab reaches every word in order"
    page.keyboard.press("Enter")
    wait_for(page, "#cf-why-out .cf-why-at", "the lens and attribution of the low word's step")
    return words[first]


def check_views_at(page, word: dict, model, tokenizer, sentence: str, options: DecodingOptions) -> None:
    """The lens and the attribution are open at the word's weakest step, holding the commands' numbers."""
    step = word["weakest"]
    assert page.get_attribute("#cf-why-out .cf-why-at", "data-step") == str(step)
    lens = lens_report(model, tokenizer, sentence, options=options)
    assert page.get_attribute("#cf-why-out .cf-why-lens", "data-focus-step") == str(step)
    assert page.inner_text(".cf-why-tops th.cf-why-focus") == lens["steps"][step]["chosen"] == word["word"]
    values, _ = shown(page, "#cf-why-out .cf-why-lens")
    expected = [[s["layers"][layer]["p_chosen"] for s in lens["steps"]] for layer in range(len(model.decoder.layers))]
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)
    assert page.input_value("#cf-why-target") == str(step)
    report = attribute_report(model, tokenizer, sentence, "integrated-gradients", SERVER_STEPS, options=options)
    attention = attribute_report(model, tokenizer, sentence, "attention", options=options)["scores"]
    rows, _ = shown(page, "#cf-why-out .cf-why-attribution")
    for row, scores in zip(rows, (report["scores"][step], attention[step]), strict=True):
        np.testing.assert_allclose(row, np.array(scores) / np.abs(scores).max(), rtol=0, atol=1e-5)


def test_words_coloured_by_confidence_link_to_lens_and_attribution(page, wordy_server, wordy_checkpoint, wordy_model,
                                                                   tmp_path):
    model, tokenizer = wordy_model
    sentence = SENTENCE
    expected, warning = command_json(wordy_checkpoint, tmp_path, sentence)
    page.goto(wordy_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    page.fill("#cf-sentence", sentence)
    page.click("#cf-explain")
    wait_for(page, "#cf-confidence .cf-conf-word", "the translation's words by confidence")
    assert page.get_attribute("#cf-confidence-about", "data-fitted") == "false"
    assert "no fitted confidence weights" in page.inner_text("#cf-confidence-about")
    assert "no fitted confidence weights" in warning  # the page says what the command says
    assert page.is_visible("#cf-conf-legend")
    threshold = threshold_from([w["confidence"] for w in expected["words"]])
    set_threshold(page, threshold)
    words = check_words(page, expected, threshold)
    word = open_by_keyboard(page, words)
    check_views_at(page, word, model, tokenizer, sentence, DecodingOptions())
    # the walkthrough went to the generation step that chose the word's weakest piece, where it shows it (the
    # page's walkthrough is bounded in length: serve/explainer.py `page_limit`)
    if page.evaluate(f"Clearformer.state.byKey.has('generate.chosen@{word['weakest']}')"):
        wait_until(page, "the walkthrough to show the step of the word",
                   f"document.querySelector('#cf-view').dataset.decodeStep === '{word['weakest']}'")


def test_beam_words_link_to_the_beams_steps(page, wordy_server, wordy_checkpoint, wordy_model, tmp_path):
    model, tokenizer = wordy_model
    sentence = SENTENCE
    expected, _ = command_json(wordy_checkpoint, tmp_path, sentence, "--beam", "2")
    page.goto(wordy_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    page.fill("#cf-sentence", sentence)
    page.click("#cf-explain")
    wait_for(page, "#cf-whatif-beam", "the what-if panel")
    page.select_option("#cf-whatif-beam", "2")
    wait_until(page, "the beam's words by confidence",
               "(Clearformer.state.walk.confidence || {}).beam === 2 && document.querySelector('#cf-conf-words')")
    threshold = threshold_from([w["confidence"] for w in expected["words"]])
    set_threshold(page, threshold)
    words = check_words(page, expected, threshold)
    first = next(i for i, w in enumerate(words) if w["low"])
    page.click(f'#cf-conf-words .cf-conf-word[data-index="{first}"]')  # the mouse, this time
    wait_for(page, "#cf-why-out .cf-why-at", "the lens and attribution of the low word's step")
    check_views_at(page, words[first], model, tokenizer, sentence, DecodingOptions(beam=2))
