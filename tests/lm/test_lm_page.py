"""A language model on the page and in the server: `lm explain --html/--plots` and `clearformer serve` on an LM
run draw the walkthrough `lm explain` prints (`lm generate --greedy` run under the recorder)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from live_support import assert_bars_show, serve, wait_for, wait_until

import clearformer.explain.lm as lm_explain
from clearformer.cli import main
from clearformer.data.lm import prompt_ids
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.load import load_model
from clearformer.record import trace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

PROMPT = "the dog ran to"
LOCAL = "http://127.0.0.1:8000"


def embedded(page: str) -> dict:
    """The {"config": ..., "walk": ...} a page carries."""
    match = re.search(r'<script type="application/json" id="cf-data">(.*?)</script>', page, re.S)
    assert match, "no embedded walkthrough"
    return json.loads(match.group(1))


def chosen(walk: dict) -> list[int]:
    return [int(step["matrices"][0]["values"][0][0]) for step in walk["steps"] if step["name"] == "generate.chosen"]


def greedy(run: Path, prompt: str, tokens: int = 3) -> tuple[list[int], list[int], object]:
    """(prompt ids, the ids `lm generate --greedy` adds, the tokenizer), from the run's files."""
    model, tokenizer, _ = load_model(run)
    ids = prompt_ids(tokenizer, prompt)
    return ids, generate(model, ids, tokens, SamplingOptions(greedy=True)), tokenizer


def generate_cli(run: Path, prompt: str, capsys, tokens: int = 3) -> str:
    assert main(["lm", "generate", prompt, "--checkpoint", str(run), "--greedy", "--max-new-tokens", str(tokens)]) == 0
    return capsys.readouterr().out.strip()


# ----------------------------------------------------------------------------- the page and the figures


def test_page_holds_the_walkthrough_the_terminal_prints(trained_lm, tmp_path, capsys):
    """One `lm explain --format json --html FILE`: the page carries the very walkthrough printed (one trace), and
    its tokens are the ones `lm generate --greedy` gives."""
    path = tmp_path / "dog.html"
    argv = ["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--format", "json", "--html", str(path)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err.strip() == f"wrote {path}"
    page = path.read_text(encoding="utf-8")
    data = embedded(page)
    assert data["config"]["live"] is False  # and, in a checkout, the link to docs/claims.md
    walk = data["walk"]
    assert walk == json.loads(out)  # the same recorded trace as the terminal's
    ids, new, tokenizer = greedy(trained_lm, PROMPT)
    assert chosen(walk) == new and len(new) == 3
    words = [tokenizer.id_to_token(i) for i in new]
    assert walk["model_kind"] == "lm" and walk["target_tokens"] == walk["source_tokens"] + words
    assert walk["source_tokens"] == [tokenizer.id_to_token(i) for i in ids]
    assert walk["result"] == generate_cli(trained_lm, PROMPT, capsys)
    assert all(json.dumps(word)[1:-1] in page for word in words)
    # Every recorded intermediate is on the page, at every generation step: embeddings, per-head Q K V,
    # scores, weights, outputs, the next-token distribution and the choice.
    names = {(step["name"], step["decode_step"]) for step in walk["steps"]}
    layers = load_model(trained_lm)[0].config.n_decoder_layers
    for t in range(3):
        for name in ("embed.token_ids", "embed.tokens.lookup", "embed.X", "output.probabilities", "generate.chosen"):
            assert (name, t) in names
        for layer in range(layers):
            for part in ("Q", "K", "V", "scores", "scaled", "weights", "head_outputs", "output"):
                assert (f"decoder.layers.{layer}.self_attention.{part}", t) in names
    assert ("kv_cache.per_token", None) in names


def test_page_refuses_to_overwrite_unless_told(trained_lm, tmp_path, capsys, monkeypatch):
    path = tmp_path / "page.html"
    path.write_text("keep me", encoding="utf-8")
    ran = []
    real = lm_explain.explain_text
    monkeypatch.setattr(lm_explain, "explain_text", lambda *a, **k: ran.append(1) or real(*a, **k))
    argv = ["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--html", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "--overwrite" in err and "Traceback" not in err
    assert path.read_text(encoding="utf-8") == "keep me" and ran == []  # refused before the model ran
    assert main([*argv, "--overwrite"]) == 0
    capsys.readouterr()
    assert embedded(path.read_text(encoding="utf-8"))["walk"]["model_kind"] == "lm"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]  # no temporary left behind
    assert main(["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--html", str(tmp_path)]) == 2
    assert "folder" in capsys.readouterr().err


def test_no_overwrite_write_refuses_a_file_that_appears_meanwhile(tmp_path):
    from clearformer.store.atomic import atomic_write

    path = tmp_path / "page.html"

    def write(temporary: str) -> None:
        Path(temporary).write_text("new", encoding="utf-8")
        path.write_text("someone else's", encoding="utf-8")  # appears while the page is written

    with pytest.raises(FileExistsError):
        atomic_write(path, write, overwrite=False)
    assert path.read_text(encoding="utf-8") == "someone else's"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]
    atomic_write(tmp_path / "fresh.html", lambda t: Path(t).write_text("new", encoding="utf-8"), overwrite=False)
    assert (tmp_path / "fresh.html").read_text(encoding="utf-8") == "new"


def test_plots_of_a_language_model(trained_lm, tmp_path, capsys):
    plots = tmp_path / "plots"
    assert main(["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--plots", str(plots)]) == 0
    capsys.readouterr()
    layers = load_model(trained_lm)[0].config.n_decoder_layers
    expected = {"input_vectors.png", *(f"attention_decoder_self_layer{i}.png" for i in range(layers)),
                *(f"probabilities_step{t:02d}.png" for t in range(3))}
    names = {p.name for p in plots.iterdir()}
    assert expected <= names
    assert all((plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in names)
    assert main(["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--plots", str(plots)]) == 2
    assert "already holds figures" in capsys.readouterr().err
    assert main(["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--plots", str(plots), "--overwrite"]) == 0


# ----------------------------------------------------------------------------- the server


def local_client(app):
    from fastapi.testclient import TestClient

    return TestClient(app, base_url=LOCAL, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def lm_client(trained_lm):
    pytest.importorskip("fastapi")
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    return local_client(create_app(load(trained_lm)))


def test_server_info_names_a_language_model(lm_client, trained_lm):
    info = lm_client.get("/api/info").json()
    model = info["model"]
    config = load_model(trained_lm)[0].config
    assert model["kind"] == "lm" and model["name"] == trained_lm.name and info["notice"] is None
    assert model["encoder_layers"] == 0 and model["decoder_layers"] == config.n_decoder_layers
    assert model["max_new_tokens"] == 3 and model["attention"] == config.attention
    assert str(trained_lm) not in lm_client.get("/").text


def test_server_explains_a_prompt_as_lm_explain_does(lm_client, trained_lm, capsys):
    response = lm_client.post("/api/explain", json={"prompt": PROMPT})
    assert response.status_code == 200
    walk = response.json()
    _, new, _ = greedy(trained_lm, PROMPT)
    assert walk["model_kind"] == "lm" and chosen(walk) == new
    assert walk["result"] == generate_cli(trained_lm, PROMPT, capsys)
    assert main(["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--format", "json"]) == 0
    assert walk == json.loads(capsys.readouterr().out)  # the same function, the same walkthrough


def _refused(response, status: int) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert message and "\n" not in message
    return message


def test_parallel_explanations_do_not_mix_their_records(trained_lm):
    """The server explains in worker threads: each thread's recorder holds its own prompt's records only."""
    from concurrent.futures import ThreadPoolExecutor

    from clearformer.serve.explainer import Explainer, load

    explainer = Explainer(load(trained_lm))
    prompts = ["the dog", "a man looked at", "my son went into the", "the king"]
    alone = [json.loads(explainer.compute("prompt", p)) for p in prompts]
    with ThreadPoolExecutor(4) as pool:
        together = [json.loads(answer) for answer in pool.map(lambda p: explainer.compute("prompt", p), prompts * 2)]
    assert together == alone * 2
    assert [chosen(walk) for walk in alone] == [greedy(trained_lm, p)[1] for p in prompts]


def test_server_refusals_for_a_language_model(lm_client, trained_lm):
    assert '"prompt"' in _refused(lm_client.post("/api/explain", json={"sentence": PROMPT}), 400)
    assert "empty" in _refused(lm_client.post("/api/explain", json={"prompt": "  "}), 400)
    context = load_model(trained_lm)[0].config.max_len
    assert "context" in _refused(lm_client.post("/api/explain", json={"prompt": "the " * context}), 400)
    assert lm_client.post("/api/explain", json={"example": "i-love-you"}).status_code == 200


def test_server_new_tokens_option(trained_lm, capsys):
    pytest.importorskip("fastapi")
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    client = local_client(create_app(load(trained_lm), lm_new_tokens=5))
    assert client.get("/api/info").json()["model"]["max_new_tokens"] == 5
    assert chosen(client.post("/api/explain", json={"prompt": PROMPT}).json()) == greedy(trained_lm, PROMPT, 5)[1]
    for argv in (["--checkpoint", str(trained_lm), "--max-new-tokens", "0"], ["--seeds-only", "--max-new-tokens", "5"]):
        assert main(["serve", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--max-new-tokens" in err


def test_translation_server_refuses_a_prompt(tmp_path):
    pytest.importorskip("fastapi")
    from clearformer.config import preset
    from clearformer.model.transformer import Transformer
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load
    from clearformer.store.checkpoint import save_model
    from clearformer.tokenize import SPECIALS, WordTokenizer

    tokenizer = WordTokenizer(list(SPECIALS) + "I love you Je t' aime".split())
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=12)
    client = local_client(create_app(load(save_model(tmp_path / "t", Transformer(config), tokenizer))))
    assert client.get("/api/info").json()["model"]["kind"] == "translation"
    assert '"sentence"' in _refused(client.post("/api/explain", json={"prompt": "I love you"}), 400)
    assert client.post("/api/explain", json={"sentence": "I love you"}).json()["model_kind"] == "translation"
    seeds = local_client(create_app(None))
    assert "seed examples" in _refused(seeds.post("/api/explain", json={"prompt": "I love you"}), 409)


# ----------------------------------------------------------------------------- GPT-2, imported


def interop_helpers():
    """tests/interop/interop_helpers.py (tests/ is no package): its offline random GPT-2 builder."""
    if "interop_helpers" in sys.modules:
        return sys.modules["interop_helpers"]
    path = Path(__file__).parents[1] / "interop" / "interop_helpers.py"
    spec = importlib.util.spec_from_file_location("interop_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imported_gpt2_explained_as_a_page_and_served(tmp_path, capsys):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    folder, theirs = interop_helpers().gpt2_folder(tmp_path / "hf")
    run = tmp_path / "gpt2"
    assert main(["lm", "import", "gpt2", str(folder), "--out", str(run)]) == 0
    text = "the cat sat on the"
    path = tmp_path / "gpt2.html"
    assert main(["lm", "explain", text, "--checkpoint", str(run), "--layer", "all", "--html", str(path)]) == 0
    out = capsys.readouterr().out
    walk = embedded(path.read_text(encoding="utf-8"))["walk"]
    ids, new, tokenizer = greedy(run, text)
    with torch.no_grad():  # GPT-2's own greedy tokens (Transformers), for the same ids
        expected = theirs.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=3, min_new_tokens=3,
                                   pad_token_id=tokenizer.eos_id)[0, len(ids):].tolist()
    assert chosen(walk) == new == expected
    assert walk["result"] == tokenizer.decode(ids + new) and walk["result"] in out
    positions = [s for s in walk["steps"] if s["name"] == "embed.positions.PE"]
    assert len(positions) == 3 and positions[0]["title"] == "Learned position embedding"
    heads = theirs.config.n_head
    weights = [s for s in walk["steps"] if s["name"] == "decoder.layers.1.self_attention.weights"]
    assert [len(s["matrices"]) for s in weights] == [heads] * 3
    pytest.importorskip("fastapi")
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    client = local_client(create_app(load(run)))
    assert client.get("/api/info").json()["model"]["positional"] == "learned"
    assert chosen(client.post("/api/explain", json={"prompt": text}).json()) == expected


# ----------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def lm_server(trained_lm, tmp_path_factory):
    """`clearformer serve --checkpoint <the tiny LM>` as a real process on a free loopback port -> its URL."""
    yield from serve(trained_lm, tmp_path_factory)


def where(tab) -> tuple[str, int | None]:
    view = tab.locator("#cf-view")
    decode = view.get_attribute("data-decode-step")
    return view.get_attribute("data-step-name"), (int(decode) if decode else None)


def press_until(tab, key: str, name: str, decode_step: int | None = None) -> None:
    for _ in range(600):
        if where(tab) == (name, decode_step):
            return
        tab.keyboard.press(key)
    raise AssertionError(f"never reached {name} at step {decode_step} with {key}")


def shown(tab, selector: str) -> np.ndarray:
    cells = tab.eval_on_selector_all(f"{selector} .cf-cell",
                                     "cells => cells.map(c => [+c.dataset.row, +c.dataset.col, +c.dataset.value])")
    values = np.zeros((max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1))
    for row, col, value in cells:
        values[row, col] = value
    return values


def recorded_self_attention(run: Path, prompt: str, layer: int) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """`lm generate --greedy`'s own records (not the walkthrough code): the new ids, the last pass's
    probabilities, and `layer`'s attention weights as every row so far (each pass's rows stacked)."""
    model, tokenizer, _ = load_model(run)
    ids = prompt_ids(tokenizer, prompt)
    with trace.Recorder() as recorder:
        new = generate(model, ids, 3, SamplingOptions(greedy=True))
    name = f"decoder.layers.{layer}.self_attention.weights"
    rows = [recorder.get(name, t)[0] for t in range(3)]  # (heads, rows_t, keys_t)
    keys = rows[-1].shape[-1]
    stacked = torch.cat([torch.nn.functional.pad(r, (0, keys - r.shape[-1])) for r in rows], dim=-2)
    return new, torch.softmax(recorder.get("output.logits", 2)[0, -1].float(), dim=-1), stacked


def test_live_page_continues_a_prompt_token_by_token(page, lm_server, trained_lm):
    model, tokenizer, _ = load_model(trained_lm)
    last = model.config.n_decoder_layers - 1
    page.goto(lm_server)
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    assert "prompt" in page.get_attribute("#cf-sentence", "placeholder")
    assert page.inner_text("#cf-explain") == "Continue (3 tokens) and explain"
    page.fill("#cf-sentence", PROMPT)
    page.click("#cf-explain")
    wait_until(page, "the walkthrough of the prompt",
               "document.querySelector('#cf-summary h1').textContent.startsWith("
               f"\"Language model continuing '{PROMPT}'\")")
    new, probabilities, weights = recorded_self_attention(trained_lm, PROMPT, last)
    words = [tokenizer.id_to_token(i) for i in new]
    assert page.inner_text("#cf-result") == tokenizer.decode(prompt_ids(tokenizer, PROMPT) + new)
    decode_options = page.eval_on_selector_all("#cf-decode option", "options => options.map(o => o.textContent)")
    assert "encoder (source)" not in decode_options and decode_options[1:] == [f"{t} → {w}" for t, w in
                                                                                 enumerate(words, start=1)]
    assert not page.locator("text=Cross-attention").count()
    page.locator("body").click(position={"x": 5, "y": 300})
    press_until(page, "ArrowRight", "generate.chosen", 0)  # the prompt pass chose the first token
    assert page.locator("#cf-produced .cf-token").all_inner_texts() == words[:1]
    page.keyboard.press("End")
    assert page.locator("#cf-produced .cf-token").all_inner_texts() == words
    press_until(page, "ArrowLeft", "output.probabilities", 2)
    assert_bars_show(page, probabilities, tokenizer, words[-1])
    # The side panel: the last layer's masked self-attention, every row so far, mean of the heads.
    # float32's rounding: the server decodes with the layout every command loads (generate/layout.py)
    np.testing.assert_allclose(shown(page, "#cf-alignment"), weights.double().mean(0).numpy(), rtol=1e-5,
                               atol=1e-9)
    blocked = page.eval_on_selector_all("#cf-alignment .cf-cell", "cells => cells.map(c => !!c.dataset.blocked)")
    rows = weights.shape[-2]
    assert blocked == [j > i for i in range(rows) for j in range(rows)]


def test_exported_lm_page_works_offline(page, trained_lm, tmp_path, capsys):
    path = tmp_path / "dog.html"
    assert main(["lm", "explain", PROMPT, "--checkpoint", str(trained_lm), "--html", str(path)]) == 0
    capsys.readouterr()
    requests: list[str] = []
    page.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
    page.goto(path.as_uri())
    wait_for(page, "#cf-view[data-step-name]", "the walkthrough to show its first step")
    assert requests == [path.as_uri()]  # nothing but the file itself
    assert page.is_hidden("#cf-form")
    _, new, tokenizer = greedy(trained_lm, PROMPT)
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("End")
    assert where(page) == ("kv_cache.per_token", None)
    assert page.locator("#cf-produced .cf-token").all_inner_texts() == [tokenizer.id_to_token(i) for i in new]
    press_until(page, "ArrowLeft", "decoder.layers.0.self_attention.weights", 2)
    assert page.locator("#cf-matrices .cf-matrix").count() == load_model(trained_lm)[0].config.n_heads
