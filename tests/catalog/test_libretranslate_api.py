"""`clearformer serve` speaks LibreTranslate's API: the real `libretranslatepy` client against a live server, the
answers and errors Weblate reads, markup kept, and the batch queue that decodes requests together."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient
from libretranslatepy import LibreTranslateAPI
from live_support import serve

from clearformer.generate import DecodingOptions, translate
from clearformer.load import load_decoding_facts, load_model
from clearformer.serve.app import create_app
from clearformer.serve.batcher import Batching, BatchQueue
from clearformer.serve.explainer import load
from clearformer.serve.pool import Busy

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

# ----------------------------------------------------------------------------- the batch queue


class Blocking:
    """A decode that records each call's sentences and, while `gate` is closed, holds the worker in the first."""

    def __init__(self) -> None:
        self.calls: list[list] = []
        self.gate, self.entered = threading.Event(), threading.Event()

    def __call__(self, sources):
        self.calls.append(list(sources))
        self.entered.set()
        assert self.gate.wait(30)
        return [f"t{ids[0]}" for ids in sources]


def test_requests_that_arrive_together_are_decoded_together_within_the_batch():
    decode = Blocking()
    queue = BatchQueue(decode, max_batch=4, wait_s=0.0, capacity=6)
    try:
        first = queue.submit([[1]])
        assert decode.entered.wait(30)  # the worker holds the first request alone
        waiting = [queue.submit([[2], [3]]), queue.submit([[4]]), queue.submit([[5]]), queue.submit([[6], [7]])]
        with pytest.raises(Busy):  # 6 sentences wait: one more is refused at once, not queued
            queue.submit([[8]])
        with pytest.raises(Busy):  # a request larger than the queue too, while others wait
            queue.submit([[9]] * 10)
        decode.gate.set()
        assert first.result(30) == ["t1"]
        assert [f.result(30) for f in waiting] == [["t2", "t3"], ["t4"], ["t5"], ["t6", "t7"]]
    finally:
        queue.close()
    # whole requests, in arrival order, at most max_batch sentences a call
    assert decode.calls == [[[1]], [[2], [3], [4], [5]], [[6], [7]]]


def test_a_request_larger_than_the_capacity_is_admitted_when_nothing_waits():
    queue = BatchQueue(lambda sources: [f"t{ids[0]}" for ids in sources], max_batch=4, wait_s=0.0, capacity=3)
    try:  # 10 sentences, a queue of 3: taken whole (the 429 "0 sentences waiting" of issue 49 is gone)
        assert queue.submit([[n] for n in range(10)]).result(30) == [f"t{n}" for n in range(10)]
    finally:
        queue.close()


def test_a_failed_decode_fails_its_batch_only():
    calls = []

    def decode(sources):
        calls.append(sources)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return ["ok"] * len(sources)

    queue = BatchQueue(decode, max_batch=1, wait_s=0.0, capacity=8)
    try:
        with pytest.raises(RuntimeError):
            queue.submit([[1]]).result(30)
        assert queue.submit([[2]]).result(30) == ["ok"]
    finally:
        queue.close()


# ----------------------------------------------------------------------------- the routes


def client(app) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


@pytest.fixture(scope="module")
def api(masking_run):
    return client(create_app(load(masking_run)))


def expected(run, texts):
    model, tokenizer, _ = load_model(run)  # decoded by the run's facts (decoding.json), as the server decodes it
    return translate(model, tokenizer, texts, DecodingOptions(batch_size=32), facts=load_decoding_facts(run, tokenizer))


def test_translate_answers_as_libretranslate_for_a_string_a_list_and_a_form(api, masking_run):
    texts = ["Delete %d files from %s?", "Open the file", "the cat sleeps"]
    one = api.post("/translate", json={"q": texts[0], "source": "en", "target": "fr", "api_key": None})
    assert one.status_code == 200 and one.json() == {"translatedText": expected(masking_run, texts[:1])[0]}
    many = api.post("/translate", json={"q": texts, "source": "auto", "target": "fr", "format": "text"}).json()
    assert many["translatedText"] == expected(masking_run, texts)  # batched together: the same translations
    # source auto: each text's language by the identifier (serve/detect.py), never a constant
    assert [found["language"] for found in many["detectedLanguage"]] == ["en"] * 3
    assert all(0 < found["confidence"] <= 100 for found in many["detectedLanguage"])
    form = api.post("/translate", data={"q": texts[1], "source": "en", "target": "fr", "api_key": "x"})
    assert form.json() == {"translatedText": expected(masking_run, texts[1:2])[0]}
    assert api.get("/languages").json() == [{"code": "en", "name": "English", "targets": ["fr"]},
                                            {"code": "fr", "name": "French", "targets": []}]


@pytest.mark.parametrize("fixture", ["masking_run", "plain_run"])
def test_html_keeps_the_markup_exactly(fixture, request):
    app = client(create_app(load(request.getfixturevalue(fixture))))
    html = '<p class="x">Open <b>the file</b></p>\n<a href="/a?b=1&amp;c">Quit</a> &nbsp; <!-- note -->'
    out = app.post("/translate", json={"q": html, "source": "en", "target": "fr", "format": "html"}).json()
    markup = ['<p class="x">', "<b>", "</b>", "</p>", '<a href="/a?b=1&amp;c">', "</a>", "&nbsp;", "<!-- note -->"]
    text = out["translatedText"]
    assert all(text.count(tag) == 1 for tag in markup), text
    assert text.count("\n") == 1


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"source": "en", "target": "fr"}, 400, "missing q"),
    ({"q": "hi", "target": "fr"}, 400, "missing source"),
    ({"q": "hi", "source": "de", "target": "fr"}, 400, "de is not supported"),
    ({"q": "hi", "source": "en", "target": "es"}, 400, "es is not supported"),
    ({"q": 3, "source": "en", "target": "fr"}, 400, "q must be a string or a list"),
    ({"q": ["a"] * 129, "source": "en", "target": "fr"}, 400, "at most 128"),
    ({"q": "a" * 2001, "source": "en", "target": "fr"}, 400, "exceeds text limit"),
    ({"q": "hi", "source": "en", "target": "fr", "format": "pdf"}, 400, "is not text or html"),
    ({"q": "zzz qqq", "source": "en", "target": "fr"}, 400, "every word is unknown"),
    ({"q": "hi", "source": "en", "target": "fr", "voice": 1}, 400, "unknown field"),
    ({"q": "<b>zzz</b> <i>qqq</i>", "source": "en", "target": "fr", "format": "html"}, 400, "every word is unknown"),
])
def test_errors_have_libretranslates_shape_and_codes(api, body, status, words):
    response = api.post("/translate", json=body)
    assert response.status_code == status and list(response.json()) == ["error"]
    assert words in response.json()["error"] and "\n" not in response.json()["error"]


def test_a_request_larger_than_the_queue_is_answered_and_a_language_model_server_says_it_has_no_translator(
        masking_run, lm_like_app):
    app = client(create_app(load(masking_run), batching=Batching(capacity=1)))  # one sentence may wait
    response = app.post("/translate", json={"q": ["Open the file", "Quit", "Save the file"], "source": "en",
                                            "target": "fr"})
    assert response.status_code == 200 and len(response.json()["translatedText"]) == 3
    refused = lm_like_app.post("/translate", json={"q": "hi", "source": "en", "target": "fr"})
    assert refused.status_code == 400 and "no translation model" in refused.json()["error"]
    assert lm_like_app.get("/languages").json() == []


@pytest.fixture
def lm_like_app():
    return client(create_app(None))


# ----------------------------------------------------------------------------- the real client, a live server


@pytest.fixture(scope="module")
def live_url(masking_run, tmp_path_factory):
    yield from serve(masking_run, tmp_path_factory)


def test_the_libretranslatepy_client_works_against_a_live_server(live_url, masking_run):
    api = LibreTranslateAPI(live_url)
    assert api.languages() == [{"code": "en", "name": "English", "targets": ["fr"]},
                               {"code": "fr", "name": "French", "targets": []}]
    assert api.translate("Save the file", "en", "fr") == expected(masking_run, ["Save the file"])[0]
    assert api.detect("Salve o arquivo antes de fechar a janela")[0]["language"] == "pt"
    assert api.detect("Save the file before you close the window")[0]["language"] == "en"


@pytest.mark.parametrize(("flags", "words"), [(["--batch", "0"], "--batch must be between 1"),
                                              (["--batch-wait", "-1"], "--batch-wait must be between"),
                                              (["--batch-queue", "0"], "--batch-queue must be between"),
                                              (["--languages", "english"], "give SOURCE:TARGET"),
                                              (["--threads", "0"], "--threads")])
def test_the_api_options_are_checked_before_the_model_loads(flags, words, capsys):
    from clearformer.cli import main

    assert main(["serve", "--checkpoint", "/nonexistent", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_a_page_of_strings_fits_and_a_body_over_the_bound_is_413(api):
    page = {"q": ["Open the file " * 10] * 100, "source": "en", "target": "fr"}  # ~15 KB of strings, 100 texts
    assert api.post("/translate", json=page).status_code == 200
    huge = {"q": ["Open the file " * 135] * 300, "source": "en", "target": "fr"}  # 570 KB, over the 512 KiB
    response = api.post("/translate", json=huge)
    assert response.status_code == 413 and "request body over" in response.json()["error"]


def test_confidence_is_an_extra_field_equal_to_translate_confidence(api, masking_run, capsys):
    """confidence=true: each text's confidence (clearformer/quality/), as `translate --confidence` gives it, in a
    field clients ignore; a text of several sentences takes its least confident one's; refused with
    alternatives, and a value that is not true or false is a 400."""
    from clearformer.cli import main

    texts = ["Open the file", "the cat sleeps"]
    answer = api.post("/translate", json={"q": texts, "source": "en", "target": "fr", "confidence": True}).json()
    assert main(["translate", "--checkpoint", str(masking_run), "--confidence", *texts]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert answer["translatedText"] == [text for text, _ in lines]
    assert [f"{value:.2f}" for value in answer["confidence"]] == [value for _, value in lines]
    assert all(0 <= value <= 1 for value in answer["confidence"])
    plain = api.post("/translate", json={"q": texts[0], "source": "en", "target": "fr"}).json()
    assert "confidence" not in plain and plain["translatedText"] == answer["translatedText"][0]
    for extra, says in (({"confidence": "maybe"}, "true or false"), ({"confidence": True, "alternatives": 2},
                                                                      "not with alternatives")):
        refused = api.post("/translate", json={"q": "hi", "source": "en", "target": "fr", **extra})
        assert refused.status_code == 400 and says in refused.json()["error"]
