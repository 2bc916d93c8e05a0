"""Weblate for real, on Firefox's en-pt student imported by `clearformer import firefox en-pt` (no --languages):
Weblate 5.14.3's own requests replayed byte for byte (weblate-5.14.3.jsonl, captured from its LibreTranslate
backend: tests/catalog/weblate_driver.py), its placeholder clean-up run on the answers, HTML snippets, the
beam's alternatives, /detect on Portuguese, a page with strings the model cannot read, and, where Weblate is
installed in a virtual environment of its own (WEBLATE_PYTHON, or /tmp/weblate/wlvenv), Weblate's backend class
itself against a live `clearformer serve`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from libretranslatepy import LibreTranslateAPI
from live_support import serve

from clearformer.languages import Languages, run_languages
from clearformer.serve.app import create_app
from clearformer.serve.explainer import load
from clearformer.serve.markup import tag_sequence
from clearformer.store.safeio import read_json_object

pytestmark = pytest.mark.slow  # an import and a few pages of translations: seconds

CAPTURED = Path(__file__).parent / "weblate-5.14.3.jsonl"
DRIVER = Path(__file__).parents[1] / "catalog" / "weblate_driver.py"
PLACEHOLDER = re.compile(r"\[X\d+X\]")


def captured() -> list[dict]:
    lines = CAPTURED.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def en_pt(firefox_runs) -> Path:
    return firefox_runs["en-pt"]


@pytest.fixture(scope="module")
def api(en_pt) -> TestClient:
    return TestClient(create_app(load(en_pt)), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


def replay(api: TestClient, request: dict, body: bytes | None = None):
    """One captured request, its headers and body as Weblate sent them (the body replaced where given)."""
    return api.request(request["method"], request["path"], headers=dict(request["headers"]),
                       content=request["body"].encode("utf-8") if body is None else body)


def uncleanup(source: str, text: str) -> str:
    """Weblate 5.14.3's clean-up of an answer (machinery/base.py `uncleanup_text`): each [X{n}X] it sent found by
    re.escape(text[:-1]) + " *" + re.escape(text[-1:]) and replaced; here by a marker, to count what was found."""
    for placeholder in PLACEHOLDER.findall(source):
        text = re.sub(re.escape(placeholder[:-1]) + " *" + re.escape(placeholder[-1:]), "\0", text)
    return text


def test_the_import_records_its_languages_and_serve_answers_for_them(en_pt, api):
    assert read_json_object(en_pt / "meta.json")["languages"] == {"source": "en", "target": "pt"}
    assert run_languages(read_json_object(en_pt / "meta.json")) == Languages("en", "pt")
    languages, _ = captured()
    answer = replay(api, languages)
    assert answer.status_code == 200
    assert answer.json() == [{"code": "en", "name": "English", "targets": ["pt"]},
                             {"code": "pt", "name": "Portuguese", "targets": []}]
    from clearformer.commands.serve import api_line

    assert "en -> pt" in api_line(api.app.state.translation)


@pytest.mark.parametrize("target", ["pt", "pt-BR", "pt_BR", "pt-br"])
def test_weblates_page_of_20_keeps_every_placeholder_for_each_code_a_client_sends(api, target):
    _, translate = captured()
    body = json.loads(translate["body"])
    assert len(body["q"]) == 20 and body["api_key"] == "weblate-key"  # what Weblate 5.14.3 sent
    sent = translate["body"].encode("utf-8") if target == "pt" else \
        json.dumps(dict(body, target=target)).encode("utf-8")  # as json.dumps wrote Weblate's (requests' json=)
    answer = replay(api, translate, sent)
    assert answer.status_code == 200, answer.text
    translations = answer.json()["translatedText"]
    assert len(translations) == 20 and all(translations)
    for source, text in zip(body["q"], translations, strict=True):
        assert sorted(PLACEHOLDER.findall(text)) == sorted(PLACEHOLDER.findall(source)), (source, text)
        assert uncleanup(source, text).count("\0") == len(PLACEHOLDER.findall(source))  # Weblate finds each


def test_placeholders_with_numbers_of_their_own_and_deepl_tags_in_one_batch(api):
    texts = [f"Step {n} of [X{8 + len(str(n))}X]" for n in range(1, 8)]
    texts += [f'Press <x id="{n}"/> to save file {n}' for n in range(1, 7)]
    texts += ['Open <x id="0"></x> or <x id="1"></x>', "Delete [X7X] files from [X21X]?", "[X0X] of [X5X] done",
              "Copy [X5X] to [X11X] and [X17X]", "Rename [X7X] to [X18X]", "Hello [X6X]", "Page 1 of [X10X]"]
    assert len(texts) == 20
    answer = api.post("/translate", json={"q": texts, "source": "en", "target": "pt-BR", "api_key": ""}).json()
    pattern = re.compile(r"\[X\d+X\]|<x id=\"\d+\"(?:/>|></x>)")
    for source, text in zip(texts, answer["translatedText"], strict=True):
        assert sorted(pattern.findall(text)) == sorted(pattern.findall(source)), (source, text)


SNIPPETS = [
    "<p>Click the button to <b>save</b> the file.</p>",
    "Tom &amp; Jerry &lt;3 <i>rocks</i> &amp; rolls",
    '<a href="https://example.org/?a=1&amp;b=2">Read the <em>full</em> documentation</a> before you start.',
    "Press <kbd>Ctrl</kbd>+<kbd>S</kbd> to save.<br>Then close the window.",
    "This is <b>very <i>important</i></b> news.",
    "<ul><li>Open the <strong>Settings</strong> menu</li><li>Choose a language</li></ul>",
    'Open <code>config.json</code> and the <span class="menu">Tools</span> menu.',
    "<p>Your changes have been saved.<!-- status --></p>",
]


def test_html_snippets_come_back_with_the_same_tags_and_entities_in_a_batch(api):
    answer = api.post("/translate", json={"q": SNIPPETS, "source": "en", "target": "pt", "format": "html"})
    assert answer.status_code == 200
    for source, text in zip(SNIPPETS, answer.json()["translatedText"], strict=True):
        assert tag_sequence(text) == tag_sequence(source), (source, text)
        for entity in ("&amp;", "&lt;"):  # what the source spelled as a reference stays one
            assert text.count(entity) >= (1 if entity in source else 0), (source, text)
        assert "<!-- status -->" in text if "<!--" in source else True
    first = answer.json()["translatedText"][0]
    assert re.fullmatch(r"<p>[^<>]+<b>[^<>]+</b>[^<>]+</p>", first), first  # the tag wraps the word "save" went to
    single = api.post("/translate", json={"q": SNIPPETS[0], "source": "en", "target": "pt", "format": "html"}).json()
    assert single["translatedText"] == first  # alone or in a batch: the same


def test_alternatives_are_the_beams_distinct_n_best(api):
    texts = ["Save the file before closing the window.", "Delete %d files from %s?"]
    answer = api.post("/translate", json={"q": texts, "source": "en", "target": "pt", "alternatives": 3}).json()
    for text, alternatives in zip(answer["translatedText"], answer["alternatives"], strict=True):
        assert 1 <= len(alternatives) <= 3 and len(set(alternatives)) == len(alternatives)
        assert text not in alternatives and all(alternatives)
    assert all("%d" in a and "%s" in a for a in answer["alternatives"][1])  # the placeholders in each one
    one = api.post("/translate", json={"q": texts[0], "source": "en", "target": "pt", "alternatives": 2}).json()
    assert isinstance(one["alternatives"], list) and 1 <= len(one["alternatives"]) <= 2


def test_one_unreadable_string_does_not_fail_the_page(api):
    page = [f"Open file number {n}" for n in range(17)]
    page.insert(4, "\ud800 lone")  # a lone surrogate: no text at all
    page.insert(9, "\U000f0000\U000f0001 \U000f0002")  # private-use characters: every word unknown to the model
    page.insert(12, "x" * 2001)  # over LibreTranslate's character limit
    body = json.dumps({"q": page, "source": "en", "target": "pt"}).encode("ascii")  # "\ud800" escaped, as JSON allows
    answer = api.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 200
    body = answer.json()
    bad = {4, 9, 12}
    assert [i for i, text in enumerate(body["translatedText"]) if not text] == sorted(bad)
    assert [i for i, notes in enumerate(body["notes"]) if notes] == sorted(bad)
    assert all(body["notes"][i][0].startswith(f"not translated: q[{i}]") for i in bad)
    alone = api.post("/translate", json={"q": "x" * 2001, "source": "en", "target": "pt"})
    assert alone.status_code == 400 and "exceeds text limit" in alone.json()["error"]


@pytest.fixture(scope="module")
def live_url(en_pt, tmp_path_factory):
    yield from serve(en_pt, tmp_path_factory)


def test_libretranslatepy_against_the_live_server(live_url):
    client = LibreTranslateAPI(live_url)
    assert client.translate("Save the file", "en", "pt-BR")
    assert client.detect("Salve o arquivo antes de fechar a janela.")[0]["language"] == "pt"
    assert client.detect("Save the file before you close the window.")[0]["language"] == "en"


def weblate_python() -> str | None:
    candidate = os.environ.get("WEBLATE_PYTHON", "/tmp/weblate/wlvenv/bin/python")
    if not Path(candidate).exists():
        return None
    found = subprocess.run([candidate, "-c", "import django, weblate.machinery"], capture_output=True)
    return candidate if found.returncode == 0 else None


def test_weblates_own_backend_class_against_the_live_server(live_url):
    python = weblate_python()
    if python is None:
        pytest.skip("Weblate is not installed in a virtual environment here: set WEBLATE_PYTHON "
                    "(pip install weblate==5.14.3 needs liblz4, libcairo2 and gobject-introspection headers)")
    _, translate = captured()
    page = [{"text": text, "flags": "c-format"} for text in
            ["Delete %d files from %s?", "Page %d of %d", "%s has been saved", "Copy %s to %s"]]
    page += [{"text": "Welcome, %(user)s!", "flags": "python-format"},
             {"text": "The file {name} already exists.", "flags": "python-brace-format"},
             {"text": "\U000f0000\U000f0001"}]  # private-use characters only: the model cannot read it
    plan = {"source": "en", "target": "pt_BR", "pages": [page]}
    run = subprocess.run([python, str(DRIVER), live_url], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["weblate"].startswith("5.14") and out["pair"] == ["en", "pt"]  # pt_BR -> pt-BR -> pt
    results = out["pages"][0]
    assert "error" not in results, results
    for item in page[:-1]:
        suggestion = results[item["text"]][0]
        for placeholder in re.findall(r"%\(\w+\)s|%\w|\{\w+\}", item["text"]):
            assert suggestion.count(placeholder) == item["text"].count(placeholder), (item, suggestion)
    assert results[page[-1]["text"]] == [""]  # no suggestion for the one it could not read; the others stand
