"""The "why did it say that" panel in a real browser (Debian's chromium through Playwright), on the live page:
the logit lens, patching and attribution of the sentence typed, each heatmap holding the numbers
`clearformer lens`, `patch` and `attribute` compute here independently; and the exported page's commands."""

from __future__ import annotations

import numpy as np
import pytest
from live_support import browser_tab, wait_for, wait_until
from test_viz_browser import shown

from clearformer.explain.html import write_html
from clearformer.explain.search import explain_search
from clearformer.explain.why import attribute_report, lens_report, patch_report
from clearformer.generate import DecodingOptions
from clearformer.serve.why import SERVER_STEPS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

SENTENCE, CORRUPTED = "I love you", "I love cat"


def test_live_page_shows_lens_patching_and_attribution(page, live_server, tiny_model):
    model, tokenizer = tiny_model
    page.goto(live_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    page.fill("#cf-sentence", SENTENCE)
    page.click("#cf-explain")
    wait_for(page, "#cf-result", "the translation to show")
    # The lens: layers x steps of p(chosen), the top tokens beneath.
    page.click("#cf-why-lens")
    wait_for(page, "#cf-why-out .cf-why-lens", "the logit lens report")
    lens = lens_report(model, tokenizer, SENTENCE)
    values, _ = shown(page, "#cf-why-out")
    expected = np.array([[s["layers"][l]["p_chosen"] for s in lens["steps"]] for l in range(len(model.decoder.layers))])
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)
    tops = page.eval_on_selector_all(".cf-why-tops td", "cells => cells.map(c => c.textContent)")
    assert tops == [s["layers"][l]["top"] for l in range(len(model.decoder.layers)) for s in lens["steps"]]
    # Patching: the encoder positions' heatmap and the whole-stack points (encoder.output restores 1).
    page.fill("#cf-why-corrupted", CORRUPTED)
    page.click("#cf-why-patch")
    wait_for(page, "#cf-why-out .cf-why-patch", "the activation patching report")
    report = patch_report(model, tokenizer, SENTENCE, CORRUPTED)
    restored = {p["name"]: p["restored"] for p in report["points"]}
    first, _ = shown(page, "#cf-why-out .cf-matrix:nth-of-type(1)")
    np.testing.assert_allclose(first[0], [restored[f"encoder.layers.0.output[{p}]"]
                                          for p in range(len(report["source_tokens"]))], rtol=0, atol=1e-6)
    whole = page.eval_on_selector_all("#cf-why-out .cf-matrix:nth-of-type(3) .cf-cell",
                                      "cells => cells.map(c => [c.dataset.colLabel, +c.dataset.value])")
    assert abs(dict(whole)["encoder.output"] - 1) < 1e-4  # float32 and a random model's small gap; 1e-6: test_why.py
    # Attribution beside cross-attention, for the target word chosen.
    page.click("#cf-why-attribute")
    wait_for(page, "#cf-why-out .cf-why-attribution", "the attribution report")
    report = attribute_report(model, tokenizer, SENTENCE, "integrated-gradients", SERVER_STEPS)
    attention = attribute_report(model, tokenizer, SENTENCE, "attention")["scores"]
    page.select_option("#cf-why-target", "1")
    values, _ = shown(page, "#cf-why-out")
    for row, scores in zip(values, (report["scores"][1], attention[1]), strict=True):
        np.testing.assert_allclose(row, np.array(scores) / np.abs(scores).max(), rtol=0, atol=1e-5)
    assert "completeness" in page.inner_text("#cf-why-out")


@pytest.fixture
def refused_page(browser):
    yield from browser_tab(browser, allowed_error="Failed to load resource: the server responded with a status of 400")


def test_live_page_patch_refusal_is_one_line(refused_page, live_server):
    page = refused_page
    page.goto(live_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    page.fill("#cf-sentence", SENTENCE)
    page.fill("#cf-why-corrupted", "I love the cat")
    page.click("#cf-why-patch")
    wait_until(page, "the why panel to refuse sentences of different lengths",
               "document.querySelector('#cf-why-status').textContent.includes('same number of tokens')")


def test_exported_page_shows_the_commands(page, tiny_model, tmp_path):
    model, tokenizer = tiny_model
    walk = explain_search(model, tokenizer, SENTENCE, DecodingOptions(max_new=4))
    page.goto(write_html(walk, tmp_path / "why.html").as_uri())
    wait_for(page, "#cf-why", "the why panel")
    assert f'clearformer lens "{SENTENCE}"' in page.inner_text("#cf-why")
