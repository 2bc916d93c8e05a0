"""End to end in a real browser: Debian's chromium, driven by Playwright (no browser download).

The live tests start `clearformer serve` (see conftest.live_server), type a sentence, step through the
walkthrough with the keyboard and compare the numbers the page shows with the recorder's, recorded
here independently from the same checkpoint. Without chromium these tests skip, unless CI is set:
then a missing browser is a failure (install it with scripts/install-browser.sh).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from live_support import assert_bars_show, browser_tab, wait_for, wait_until
from tolerance import golden_close

from clearformer.explain.claim_links import claims_doc
from clearformer.explain.examples import run_example
from clearformer.explain.html import write_html
from clearformer.generate import DecodingOptions, search_tokens
from clearformer.generate.greedy import greedy_decode
from clearformer.record import trace
from clearformer.tokenize import encode_source

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

MAX_PRESSES = 400


@pytest.fixture
def page(browser):
    # The browser logs every 4xx answer; the one test that sends a bad sentence expects a 400 (and checks it).
    yield from browser_tab(browser, "Failed to load resource: the server responded with a status of 400")


# --- reading the page ---------------------------------------------------------------------------------------

def where(tab) -> tuple[str, int | None]:
    view = tab.locator("#cf-view")
    decode = view.get_attribute("data-decode-step")
    return view.get_attribute("data-step-name"), (int(decode) if decode else None)


def press_until(tab, key: str, name: str, decode_step: int | None = None) -> list[str]:
    """Press `key` until the page shows step `name` (at `decode_step`); return the names passed on the way."""
    passed = [where(tab)[0]]
    for _ in range(MAX_PRESSES):
        if where(tab) == (name, decode_step):
            return passed
        tab.keyboard.press(key)
        passed.append(where(tab)[0])
    raise AssertionError(f"never reached {name} at step {decode_step} with {key}")


def click_step(tab, name: str) -> None:
    """Click a step in the side list, opening its group first as a person would."""
    button = tab.locator(f'.cf-nav-step[title="{name}"]').first
    if not button.is_visible():
        button.locator("xpath=../summary").click()
    button.click()
    assert where(tab)[0] == name


def shown(tab, selector: str) -> tuple[np.ndarray, list[list[str]]]:
    """(exact values from data-value, rounded texts) of the heatmap cells under `selector`."""
    cells = tab.eval_on_selector_all(f"{selector} .cf-cell", "cells => cells.map(c => [+c.dataset.row, "
                                     "+c.dataset.col, c.dataset.value, c.textContent])")
    rows, cols = max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1
    values, texts = np.zeros((rows, cols)), [[""] * cols for _ in range(rows)]
    for row, col, value, text in cells:
        values[row, col] = float(value)
        texts[row][col] = text
    return values, texts


def assert_shows(tab, selector: str, expected: torch.Tensor) -> None:
    """The cells under `selector` hold exactly `expected` and show it rounded to 4 decimals."""
    values, texts = shown(tab, selector)
    expected = expected.double().numpy()
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-12)
    assert texts == [[f"{v:.4f}" for v in row] for row in expected]


# --- the live page ------------------------------------------------------------------------------------------

def recorded_translation(model, tokenizer, sentence: str):
    """The encoder's records, the greedy output ids, and the last decoding step's records with its
    cross-attention weights as every row so far (stacked here from each step's one cached row), recorded
    by `translate`'s own greedy decoder (not through the walkthrough code the server uses)."""
    ids = encode_source(tokenizer, sentence)
    limit = min(model.config.max_len - 1, 2 * len(ids) + 8)  # the server's bound on the generated length
    with trace.Recorder() as recorder:
        decoded = greedy_decode(model, torch.tensor([ids]), DecodingOptions(max_new=limit),
                                search_tokens(model, tokenizer))
    generated = [tokenizer.bos_id] + decoded.tokens[0, : int(decoded.lengths[0])].tolist()
    final = len(generated) - 2
    encoder, last = trace.Recorder(), trace.Recorder()
    encoder.records = [r for r in recorder.records if r.step is None]
    last.records = [r for r in recorder.records if r.step == final]
    rows = [recorder.get("decoder.layers.0.cross_attention.weights", t) for t in range(final + 1)]
    cross = torch.cat(rows, dim=-2)  # (1, heads, final + 1, src_len)
    return encoder, generated, last, cross


def test_type_a_sentence_and_step_through_to_its_translation(page, live_server, tiny_model, tmp_path):
    model, tokenizer = tiny_model
    page.goto(live_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    # A sentence the model cannot read is refused with the server's one-line message, shown on the page.
    page.fill("#cf-sentence", "zzz qqq")
    page.click("#cf-explain")
    wait_for(page, "#cf-status.cf-error", "the status line to show an error")
    assert "unknown" in page.inner_text("#cf-status")

    page.fill("#cf-sentence", "I love you")
    page.click("#cf-explain")
    wait_until(page, "the walkthrough of 'I love you'",
               "document.querySelector('#cf-summary h1').textContent === "
               "\"Translating 'I love you'\"")
    encoder, generated, last, cross = recorded_translation(model, tokenizer, "I love you")
    final = len(generated) - 2  # the decoding step that chose the last token

    # The seeds' order: tokens -> ids -> embeddings -> + PE -> X -> Q, K, V -> scores -> scaled -> softmax.
    page.locator("body").click(position={"x": 5, "y": 300})  # keyboard focus on the page, not the input
    passed = press_until(page, "ArrowRight", "encoder.layers.0.self_attention.weights")
    attention = [f"encoder.layers.0.self_attention.{n}" for n in ("Q", "K", "V", "scores", "scaled", "mask",
                                                                  "weights")]
    assert passed == ["src_embed.token_ids", "src_embed.tokens.lookup", "src_embed.tokens.scaled",
                      "src_embed.positions.PE", "src_embed.X", *attention]
    weights = encoder.get("encoder.layers.0.self_attention.weights")[0]
    for head in range(model.config.n_heads):
        assert_shows(page, f'#cf-matrices .cf-matrix[data-head="{head}"]', weights[head])
    page.select_option("#cf-head", "1")
    assert page.locator("#cf-matrices .cf-matrix").count() == 1
    page.select_option("#cf-head", "all")

    # The alignment panel grows by one row per generated word.
    for t in range(min(final, 2) + 1):
        page.select_option("#cf-decode", str(t))
        assert where(page)[1] == t
        assert page.locator("#cf-alignment .cf-row-label").count() == t + 1

    # To the end: the translation, then back to the last step's distribution and cross-attention.
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("End")
    assert where(page) == ("generate.chosen", final)
    words = [tokenizer.id_to_token(i) for i in generated[1:]]
    assert page.locator("#cf-produced .cf-token").all_inner_texts() == words
    assert page.inner_text("#cf-result") == tokenizer.decode(generated[1:])
    press_until(page, "ArrowLeft", "output.probabilities", final)
    probabilities = torch.softmax(last.get("output.logits")[0, -1].float(), dim=-1)  # what the view shows
    assert_bars_show(page, probabilities, tokenizer, words[-1])
    press_until(page, "ArrowLeft", "decoder.layers.0.cross_attention.weights", final)
    cross = cross[0]
    for head in range(model.config.n_heads):
        assert_shows(page, f'#cf-matrices .cf-matrix[data-head="{head}"]', cross[head])
    alignment, _ = shown(page, "#cf-alignment")
    np.testing.assert_allclose(alignment, cross.double().mean(0).numpy(), atol=1e-12)
    shot = tmp_path / "walkthrough.png"
    page.screenshot(path=shot)
    assert shot.stat().st_size > 10_000
    if os.environ.get("CLEARFORMER_TEST_ARTIFACTS"):  # CI can keep it: set this to a directory it uploads
        artifacts = Path(os.environ["CLEARFORMER_TEST_ARTIFACTS"])
        artifacts.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, artifacts / "viz-walkthrough.png")


def test_seed_example_on_the_live_page(page, live_server, golden):
    page.goto(live_server)
    wait_until(page, "the page to show seed example 002",
               "document.querySelector('#cf-summary h1').textContent.startsWith('Seed 002')")
    _, recorder = run_example("i-love-you")
    click_step(page, "self_attention.weights")
    assert_shows(page, "#cf-matrices", recorder.get("self_attention.weights")[0, 0])
    values, _ = shown(page, "#cf-matrices")
    assert golden_close(values, golden["seed_002_i_love_you"]["weights"])  # tests/tolerance.py
    click_step(page, "masked_example.weights")
    blocked = page.eval_on_selector_all("#cf-matrices .cf-cell",
                                        "cells => cells.map(c => !!c.dataset.blocked)")
    assert blocked == [j > i for i in range(4) for j in range(4)]  # the blank upper triangle
    page.hover('#cf-matrices .cf-cell[data-row="1"][data-col="0"]')
    expected = float(recorder.get("masked_example.weights")[0, 0, 1, 0])
    assert page.inner_text("#cf-tooltip") == f"Je · <START> = {expected!r}"


def test_exported_page_works_offline(page, tmp_path):
    walk, recorder = run_example("india-is-great")
    path = write_html(walk, tmp_path / "india.html")
    requests: list[str] = []
    page.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
    page.goto(path.as_uri())
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    assert requests == [path.as_uri()]  # nothing but the file itself: no CDN, no other file
    page.locator("body").click(position={"x": 5, "y": 300})
    press_until(page, "ArrowRight", "multi_head.weights")
    page.keyboard.press("ArrowLeft")
    assert where(page)[0] == "multi_head.scaled"
    page.click("#cf-next")
    page.select_option("#cf-head", "1")
    assert_shows(page, "#cf-matrices", recorder.get("multi_head.weights")[0, 1])
    assert page.inner_text("#cf-formula") == walk.find("multi_head.weights")[0].formula


# --- links to `clearformer claims` ---------------------------------------------------------------------------

def claim_shown(tab) -> tuple[str | None, str | None, str]:
    """(claim number, link target, text) of the claim box under the current step; (None, None, "") if hidden."""
    box = tab.locator("#cf-claim")
    if not box.is_visible():
        return None, None, ""
    docs = box.locator("a:not(.cf-claim-result)")  # none where the page cannot reach docs/claims.md
    href = docs.first.get_attribute("href") if docs.count() else None
    return box.get_attribute("data-claim"), href, box.inner_text()


CLAIM_STEPS = {"src_embed.positions.PE": "3", "encoder.layers.0.self_attention.scaled": "2",
               "encoder.layers.0.self_attention.concat": "4", "encoder.layers.0.add_norm_1.norm": "5",
               "encoder.output": "1", "encoder.layers.0.self_attention.weights": None, "src_embed.X": None}


def test_exported_translation_links_each_claim_from_its_step(page, tiny_model, tmp_path):
    from clearformer.explain.translation import explain_translation

    model, tokenizer = tiny_model
    walk = explain_translation(model, tokenizer, "I love you", DecodingOptions(max_new=2))
    path = write_html(walk, tmp_path / "t.html")
    page.goto(path.as_uri())
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    for name, number in CLAIM_STEPS.items():
        click_step(page, name)
        shown_number, href, text = claim_shown(page)
        assert shown_number == number, name
        if number:
            assert href == f"{claims_doc().as_uri()}#claim-{number}"  # the checkout's file (issue 32)
            assert f"Claim {number} measured" in text and f"clearformer claims {number} --quick" in text


def test_live_page_links_the_claims_from_the_seed_example(page, live_server):
    page.goto(live_server)
    wait_until(page, "the page to show seed example 002",
               "document.querySelector('#cf-summary h1').textContent.startsWith('Seed 002')")
    click_step(page, "self_attention.scaled")
    number, href, text = claim_shown(page)
    assert (number, href) == ("2", "docs/claims.html#claim-2") and "sqrt(d_k)" in text
    click_step(page, "embedding.positions.PE")
    assert claim_shown(page)[:2] == ("3", "docs/claims.html#claim-3")
    click_step(page, "self_attention.weights")
    assert claim_shown(page) == (None, None, "")


def test_the_claims_link_opens_docs_claims_rendered(page, live_server):
    """The step's link opens docs/claims.md as a page (markdown-it-py), at the claim's section, its figures in it."""
    page.goto(live_server)
    page.wait_for_function("document.querySelector('#cf-summary h1').textContent.startsWith('Seed 002')")
    click_step(page, "embedding.positions.PE")
    page.click("#cf-claim a")
    page.wait_for_selector("#claim-3", state="attached")
    assert page.url.endswith("docs/claims.html#claim-3")
    assert page.locator("h1").count() == 1 and page.locator("table").count() > 0 and "](" not in page.inner_text("body")
    assert "# The tutorials" not in page.inner_text("body")
    shown = page.eval_on_selector_all("img", "images => images.map(i => i.complete && i.naturalWidth > 0)")
    assert shown and all(shown)                                      # every figure shows (no broken image)


def test_a_claims_measured_results_are_linked_when_the_server_has_them(page, tmp_path):
    from clearformer.explain.html import render_page, walk_payload

    walk, _ = run_example("i-love-you")
    claims = {"2": {"json": "claims/claim2-scaling-quick.json", "figure": "claims/claim2-scaling-quick.png"}}
    path = tmp_path / "page.html"
    path.write_text(render_page({"config": {"live": False, "claims": claims}, "walk": walk_payload(walk)}))
    page.goto(path.as_uri())
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    click_step(page, "self_attention.scaled")
    links = page.eval_on_selector_all("#cf-claim a.cf-claim-result", "links => links.map(a => a.getAttribute('href'))")
    assert links == ["claims/claim2-scaling-quick.png", "claims/claim2-scaling-quick.json"]
    click_step(page, "embedding.positions.PE")  # claim 3 was not run: its docs link only
    assert claim_shown(page)[0] == "3" and page.locator("#cf-claim a.cf-claim-result").count() == 0


# --- no broken link (issue 32) ------------------------------------------------------------------------------

def every_link(tab) -> set[str]:
    """The absolute target of every link the page shows on any of its steps (each step shown in turn)."""
    count = tab.evaluate("window.Clearformer.state.walk.steps.length")
    links: set[str] = set()
    for index in range(int(count or 0)):
        tab.evaluate(f"window.Clearformer.show({index})")
        links |= set(tab.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"))
    return links


def assert_reachable(tab, links: set[str]) -> None:
    from urllib.parse import unquote, urlsplit

    for link in sorted(links):
        parts = urlsplit(link)
        if parts.scheme == "file":
            target = Path(unquote(parts.path))
            assert target.is_file(), link
            text = target.read_text(encoding="utf-8")
        elif parts.scheme in ("http", "https"):
            answer = tab.request.get(link)
            assert answer.status < 400, f"{link}: {answer.status}"
            text = answer.text()
        else:
            assert parts.scheme in ("data", "javascript", "mailto") or link.startswith("about:"), link
            continue
        if parts.fragment:  # the section the link names is there
            assert f'id="{parts.fragment}"' in text, link


def test_no_link_of_the_served_or_exported_page_is_broken(page, live_server, tiny_model, tmp_path):
    from clearformer.explain.translation import explain_translation

    page.goto(live_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    served = every_link(page)
    assert any(link.endswith("docs/claims.html#claim-2") for link in served)  # the seed example's claim link
    assert_reachable(page, served)
    model, tokenizer = tiny_model
    path = write_html(explain_translation(model, tokenizer, "I love you", DecodingOptions(max_new=2)),
                      tmp_path / "t.html")
    page.goto(path.as_uri())
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    exported = every_link(page)
    assert any("claims.md#claim-" in link for link in exported)
    assert_reachable(page, exported)
