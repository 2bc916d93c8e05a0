"""The beam tree and the what-if reruns in a real browser (Debian's chromium through Playwright): the exported
page of `explain --beam K --html`, and the live page rerunning a sentence with a head switched off. The numbers
the page shows are compared with the model's, computed here independently."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from live_support import wait_for, wait_until
from test_viz_browser import click_step, shown
from test_whatif_server import expected as server_translation  # what the server must answer

from clearformer.explain.html import write_html
from clearformer.explain.search import explain_search
from clearformer.generate import DecodingOptions
from clearformer.record import trace
from clearformer.tokenize import encode_source

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

HEAD = "decoder.layers.0.cross_attention.head.1"


def test_exported_beam_tree_walks_step_by_step(page, tiny_model, tmp_path):
    model, tokenizer = tiny_model
    walk = explain_search(model, tokenizer, "I love you", DecodingOptions(beam=3, max_new=6))
    tree = walk.beam
    path = write_html(walk, tmp_path / "beam.html")
    requests: list[str] = []
    page.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
    page.goto(path.as_uri())
    wait_for(page, "#cf-beam .cf-beam-node", "the beam search's tree to draw its nodes")
    assert requests == [path.as_uri()]  # the tree's script and styles are in the file: nothing else is fetched
    hypotheses = sum(len(s["hypotheses"]) for s in tree["steps"])
    finished = sum(len(s["finished"]) for s in tree["steps"])
    assert page.locator("#cf-beam .cf-beam-node").count() == hypotheses + finished
    chosen = page.eval_on_selector_all('#cf-beam .cf-beam-node[data-chosen="true"]', "n => n.map(x => x.dataset.id)")
    assert chosen[: len(tree["chosen_path"])] == tree["chosen_path"] and len(chosen) == len(tree["chosen_path"]) + 1
    # Step by step: the later steps are faded, each step's table lists its hypotheses' candidates.
    assert page.inner_text("#cf-beam-step") == f"step 1 of {len(tree['steps'])}"
    assert page.locator("#cf-beam .cf-beam-node.cf-future").count() == hypotheses + finished - 1 - (
        len(tree["steps"][0]["finished"]))
    for t, step in enumerate(tree["steps"]):
        if not page.is_checked("#cf-beam-every"):  # by default the pruned candidates are cut to the best one
            fates = page.eval_on_selector_all("#cf-beam-table .cf-beam-cand", "rows => rows.map(r => r.dataset.fate)")
            assert fates.count("continues") == sum(c["fate"] == "continues" for h in step["hypotheses"]
                                                   for c in h["candidates"])
            page.check("#cf-beam-every")
        fates = page.eval_on_selector_all("#cf-beam-table .cf-beam-cand", "rows => rows.map(r => r.dataset.fate)")
        assert fates == [c["fate"] for h in step["hypotheses"] for c in h["candidates"]]
        # Beside it, the translation's hypotheses' cross-attention (last layer, mean of the heads), checked against
        # a teacher-forced pass of the model over the translation's words.
        values, _ = shown(page, "#cf-beam-matrix")
        # Every source column, <eos> included, is in view: the side panel grows to its matrix (nothing clipped).
        assert page.eval_on_selector("#cf-beam-matrix", "e => e.scrollWidth <= e.clientWidth + 1")
        assert page.eval_on_selector("#cf-beam-attention", "e => e.scrollWidth <= e.clientWidth + 1")
        tokens = tree["ranking"][0]["tokens"]
        ids = encode_source(tokenizer, "I love you")
        with trace.Recorder() as recorder:
            model(torch.tensor([ids]), torch.tensor([[tokenizer.bos_id, *tokens[:-1]]]))
        cross = recorder.get(f"decoder.layers.{model.config.n_decoder_layers - 1}.cross_attention.weights")[0]
        expected = cross.mean(dim=0)[: min(t, len(tree["chosen_path"]) - 1) + 1].double().numpy()
        # the server's beam search (one step at a time, from its cache) against one teacher-forced pass here:
        # two float32 reduction orders, a few ulp apart (6e-8 at 1); 1e-5 is torch.testing's float32 default
        np.testing.assert_allclose(values, expected, rtol=0, atol=1e-5)
        if t < len(tree["steps"]) - 1:
            page.click("#cf-beam-next")
    ranking = page.locator("#cf-beam-ranking li")
    assert ranking.count() == len(tree["ranking"])
    assert ranking.first.inner_text().endswith("← the translation")
    assert page.inner_text("#cf-result") == walk.result
    # A node clicked shows its own heads' attention.
    node = tree["steps"][1]["hypotheses"][-1]
    page.click(f'#cf-beam .cf-beam-node[data-id="{node["id"]}"]')
    values, _ = shown(page, "#cf-beam-matrix")
    np.testing.assert_allclose(values, np.array(node["attention"][-1]), rtol=0, atol=1e-12)
    # The exported page cannot rerun: a head clicked shows the command that does.
    page.click(f'#cf-whatif button[data-ablate="{HEAD}"]')
    assert f'clearformer explain "I love you" --beam 3 --ablate {HEAD}' in page.inner_text("#cf-whatif-command")


def test_live_page_reruns_with_a_head_off(page, live_server, tiny_model):
    page.goto(live_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    page.fill("#cf-sentence", "I love you")
    page.click("#cf-explain")
    wait_for(page, f'#cf-whatif button[data-ablate="{HEAD}"]', f"the what-if button of head {HEAD}")
    original = server_translation(tiny_model, "I love you")
    assert page.inner_text("#cf-result") == original
    page.click(f'#cf-whatif button[data-ablate="{HEAD}"]')
    wait_for(page, "#cf-whatif-compare", "the what-if comparison of the two translations")
    changed = server_translation(tiny_model, "I love you", [HEAD])
    assert page.inner_text("#cf-whatif-original").strip() == original
    assert page.inner_text("#cf-whatif-changed").strip() == changed
    assert page.inner_text("#cf-result") == changed
    assert page.get_attribute(f'#cf-whatif button[data-ablate="{HEAD}"]', "aria-pressed") == "true"
    # Every step reran: the head switched off puts weight 0 on every source word, at every generation step.
    click_step(page, "decoder.layers.0.cross_attention.weights")
    page.select_option("#cf-head", "1")
    values, _ = shown(page, "#cf-matrices")
    assert values.shape[1] == 4 and not values.any()
    # With beam search: the tree of the changed model's search, and the original's translation beside it.
    page.select_option("#cf-whatif-beam", "3")
    wait_for(page, "#cf-beam .cf-beam-node", "the beam search's tree to draw its nodes")
    wait_until(page, "the what-if rerun's translation",
               f"document.querySelector('#cf-result').textContent === "
               f"{server_translation(tiny_model, 'I love you', [HEAD], 3)!r}")
    assert page.inner_text("#cf-whatif-original").strip() == server_translation(tiny_model, "I love you", beam=3)
    # Reset: the original model again.
    page.click("#cf-whatif-reset")
    wait_for(page, "#cf-whatif-compare", "the what-if comparison of the two translations to close", state="detached")
    assert page.inner_text("#cf-result") == server_translation(tiny_model, "I love you", beam=3)


def test_claims_run_their_experiment_on_the_sentence(page, live_server, tiny_model):
    page.goto(live_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    page.fill("#cf-sentence", "I love you")
    page.click("#cf-explain")
    wait_for(page, "#cf-whatif", "the what-if panel")
    click_step(page, "src_embed.positions.PE")  # claim 3: positions
    assert page.get_attribute("#cf-claim-try", "data-ablate") == "encoder.positions"
    page.click("#cf-claim-try")
    wait_for(page, "#cf-whatif-compare", "the what-if comparison of the two translations")
    assert page.inner_text("#cf-whatif-changed").strip() == server_translation(tiny_model, "I love you",
                                                                                 ["encoder.positions"])
    click_step(page, "decoder.layers.0.cross_attention.head_outputs")  # claim 4: heads
    page.select_option("#cf-head", "1")
    assert page.get_attribute("#cf-claim-try", "data-ablate") == HEAD
    page.click("#cf-claim-try")
    wait_until(page, f"the comparison naming head {HEAD}",
               "document.querySelector('#cf-whatif-compare') && document.querySelector("
               f"'#cf-whatif-compare').textContent.includes('{HEAD}')")
    assert page.inner_text("#cf-whatif-changed").strip() == server_translation(tiny_model, "I love you", [HEAD])


def test_the_beam_pages_cross_attention_keeps_every_column_in_view(page, tiny_model, tmp_path):
    model, tokenizer = tiny_model
    sentence = "She does not love you and I love you"  # eight source columns and <eos>, numbers in the cells
    walk = explain_search(model, tokenizer, sentence, DecodingOptions(beam=2, max_new=4))
    page.goto(write_html(walk, tmp_path / "beam.html").as_uri())
    wait_for(page, "#cf-beam-matrix", "the beam step's score matrix")
    labels = page.eval_on_selector_all("#cf-beam-matrix .cf-col-label", "ls => ls.map(l => l.textContent)")
    assert labels[-1] == "<eos>"
    # The last column's right edge lies inside the panel: the side panel grows to its matrix, nothing is clipped.
    assert page.eval_on_selector("#cf-beam-matrix", "e => e.scrollWidth <= e.clientWidth + 1")
    assert page.eval_on_selector("#cf-beam-attention", "e => e.scrollWidth <= e.clientWidth + 1")


def test_masked_placeholders_are_shown_on_the_page_and_in_the_beam_view(page, tmp_path):
    """A run that masks placeholders: the page's summary and the beam view both say which sentence the model
    read (reserved tokens) and what it wrote, and the result shown holds the source's placeholders again."""
    from clearformer.config import preset
    from clearformer.model.transformer import Transformer
    from clearformer.train.corpus import build_tokenizer
    from clearformer.train.options import Vocabulary

    pairs = [("copy %1$s to %2$s", "copier %2$s vers %1$s"), ("the cat sleeps", "le chat dort")] * 5
    tokenizer = build_tokenizer(Vocabulary(tokenizer="words", vocab_size=100, mask_placeholders=True), pairs)
    tokenizer.source_eos = True
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=16)
    torch.manual_seed(3)
    model = Transformer(config).eval()
    sentence = "copy %1$s to %2$s"
    walk = explain_search(model, tokenizer, sentence, DecodingOptions(beam=2, max_new=6))
    assert walk.masked_source == "copy ｟ph0｠ to ｟ph1｠" and "%1$s" in walk.result and "｟" not in walk.result
    page.goto(write_html(walk, tmp_path / "masked.html").as_uri())
    wait_for(page, "#cf-beam .cf-beam-node", "the beam search's tree to draw its nodes")
    summary = page.inner_text("#cf-masked")
    assert walk.masked_source in summary and walk.masked_result in summary
    assert page.inner_text("#cf-result") == walk.result
    note = page.inner_text("#cf-beam-masked")
    assert walk.masked_source in note and walk.masked_result in note and walk.result in note
    # The tree's nodes hold what the model wrote: the reserved tokens, never the restored text.
    words = " ".join(page.eval_on_selector_all("#cf-beam .cf-beam-node text", "n => n.map(x => x.textContent)"))
    assert "｟ph" in words and "%1$s" not in words
