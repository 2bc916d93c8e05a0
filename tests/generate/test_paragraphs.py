"""One input path (issue 32): a paragraph of 2, 7 or 20 sentences is cut by the one sentence rule, read by
`generate.source.prepare_sources`, and gives the same translation through every entry point: the command
line, the library's `translate`, `explain` (terminal, JSON, page), serve's API and the CTranslate2 engine
(tests/interop/test_ct2_engine.py: it needs a SentencePiece run).
The toy model is the session's (tests/conftest.py `toy_model`)."""

from __future__ import annotations

import html
import json
import re
import sys

import pytest

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.generate import translate
from clearformer.generate.source import prepare_sources
from clearformer.load import load_decoding_facts, load_model

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SENTENCES = ["I love you.", "We eat bread.", "The cat sees the dog.", "She reads a book.", "They drink water.",
             "He loves the big red car.", "You know Paris."]
PARAGRAPHS = {
    2: "I love the big red cat and the dog and the house and the car. We eat the bread and the apple and the "
       "fish and the rice and the soup.",
    7: " ".join(SENTENCES),                       # 27 words, as the example
    20: " ".join((SENTENCES * 3)[:20]),           # 80 tokens whole: longer than the toy model's max_len
}


@pytest.fixture(scope="module")
def toy(toy_model):
    model, tokenizer, _ = load_model(toy_model)
    return toy_model, model, tokenizer


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("count", sorted(PARAGRAPHS))
def test_a_paragraph_is_cut_into_its_sentences_once(toy, count):
    _, model, tokenizer = toy
    pieces = prepare_sources(tokenizer, [PARAGRAPHS[count]], model.config.max_len)
    assert len(pieces.texts) == count and pieces.owners == [0] * count
    assert all(len(ids) <= model.config.max_len for ids in pieces.sources)
    whole = prepare_sources(tokenizer, [PARAGRAPHS[count]], model.config.max_len * 4, split=False)
    assert len(whole.texts) == 1


@pytest.mark.parametrize("count", sorted(PARAGRAPHS))
def test_every_entry_point_gives_the_same_translation(toy, count, capsys, tmp_path):
    run, model, tokenizer = toy
    text = PARAGRAPHS[count]
    facts = load_decoding_facts(run, tokenizer)  # the run's brevity rule, as every command decodes it
    library = translate(model, tokenizer, [text], facts=facts)[0]
    pieces = translate(model, tokenizer, prepare_sources(tokenizer, [text], model.config.max_len).texts, facts=facts)
    assert library == " ".join(p for p in pieces if p)  # sentence by sentence, joined

    code, out, err = cli(capsys, "translate", "--checkpoint", str(run), text)
    assert code == 0 and out == library + "\n"
    assert err.count("\n") == 1 and "unknown word(s) translated as <unk>: " in err  # one warning line
    assert "." in err.split(": ")[-1].strip().split(", ")

    code, out, _ = cli(capsys, "explain", "--checkpoint", str(run), text)
    assert code == 0 and f"translation of the whole text: {library}\n" in out
    assert f"Your text has {count} sentences" in out and "shows sentence 1" in out

    code, out, _ = cli(capsys, "explain", "--checkpoint", str(run), text, "--format", "json", "--piece", "2")
    walk = json.loads(out)
    assert code == 0 and walk["result"] == library and walk["piece"] == 2 and len(walk["pieces"]) == count
    assert walk["title"].endswith(f"(sentence 2 of {count} of your text)") and "." in walk["unknown"]

    page = tmp_path / "page.html"
    assert cli(capsys, "explain", "--checkpoint", str(run), text, "--html", str(page))[0] == 0
    data = re.search(r'<script type="application/json" id="cf-data">(.*?)</script>', page.read_text("utf-8"),
                     re.DOTALL)
    assert json.loads(html.unescape(data.group(1)))["walk"]["result"] == library


@pytest.mark.parametrize("count", sorted(PARAGRAPHS))
def test_serve_translates_a_paragraph_as_translate_does(toy, count, monkeypatch):
    from fastapi.testclient import TestClient

    import clearformer.serve.requests as requests_module
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    # What is compared here is the paragraph path, not the answer bound (tests/hostile/test_server.py): the
    # session's toy model may babble to the page's length limit on a given CPU or seed, and the walkthrough of
    # a 16-word sentence then passes 8 MiB. No answer reaches these bounds, so serve answers whatever the
    # model writes.
    monkeypatch.setattr(requests_module, "MAX_ANSWER_BYTES", sys.maxsize)
    monkeypatch.setattr(requests_module, "ANSWER_NUMBERS", sys.maxsize)
    run, model, tokenizer = toy
    client = TestClient(create_app(load(run)), base_url="http://127.0.0.1:8000")
    answer = client.post("/api/explain", json={"sentence": PARAGRAPHS[count]})
    assert answer.status_code == 200
    walk = answer.json()
    facts = load_decoding_facts(run, tokenizer)
    assert walk["result"] == translate(model, tokenizer, [PARAGRAPHS[count]], facts=facts)[0]
    assert len(walk["pieces"]) == count and walk["piece"] == 1


def test_a_bad_sentence_is_named_with_its_place(toy, capsys, tmp_path):
    run, model, tokenizer = toy
    text = " ".join(SENTENCES[:4]) + " Zebras giraffes. " + " ".join(SENTENCES[4:])
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), text)
    assert code == 2 and "sentence 5 of 8: every word is unknown" in err and err.count("\n") == 1
    source = tmp_path / "in.txt"
    source.write_text(f"I love you\n{' '.join(['cat'] * 70)}\n", encoding="utf-8")
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "--file", str(source))
    assert code == 2 and f"{source}:2: sentence of 71 tokens" in err
    with pytest.raises(UserError, match="sentence 5 of 8: every word is unknown"):
        translate(model, tokenizer, [text])
    assert translate(model, tokenizer, ["", "I love you"])[0] == ""  # an empty input: an empty translation
