"""Class 6: the server bounds each answer and its cache in bytes, answers 4xx to any JSON it cannot use, and
serves claim results only from regular files inside the claims folder (issue 22)."""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

from clearformer.claims.common import result_paths
from clearformer.claims.registry import CLAIMS
from clearformer.limits import MAX_ANSWER_BYTES, SERVER_CACHE_BYTES
from clearformer.serve import requests as requests_module
from clearformer.serve.app import create_app
from clearformer.serve.claim_results import read_claim_results
from clearformer.serve.explainer import load
from clearformer.serve.pool import AnswerPool


def client(app) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


def refused(response, status: int) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert isinstance(message, str) and "\n" not in message
    return message


@pytest.fixture(scope="module")
def lm_client(lm_run):
    return client(create_app(load(lm_run)))


def test_a_language_model_answer_over_the_limit_is_413_naming_it(lm_client, monkeypatch):
    small = lm_client.post("/api/explain", json={"prompt": "the dog"})
    assert small.status_code == 200
    # The same growth as a 4 KB prompt on a bigger model: a limit just under this prompt's answer.
    monkeypatch.setattr(requests_module, "MAX_ANSWER_BYTES", len(small.content) // 2)
    message = refused(lm_client.post("/api/explain", json={"prompt": "the dog ran " * 15}), 413)
    assert f"over the server's limit of {len(small.content) // 2:,}" in message


def test_the_answer_limit_is_far_above_an_honest_answer(lm_client):
    answer = lm_client.post("/api/explain", json={"prompt": "the dog ran"})
    assert answer.status_code == 200 and len(answer.content) < MAX_ANSWER_BYTES / 10


def test_the_cache_is_bounded_in_bytes_not_answers():
    pool = AnswerPool(lambda key: b"x" * key, workers=1, queue=0, cache_bytes=1000)
    try:
        for size in (400, 400, 400, 5000):
            pool.submit(size).result(timeout=30)
        cached = pool._done
        assert sum(map(len, cached.values())) <= 1000 and 5000 not in cached
    finally:
        pool.shutdown()
    assert SERVER_CACHE_BYTES >= 4 * MAX_ANSWER_BYTES  # a few of the largest answers fit


@pytest.mark.parametrize("body", [
    b'{"prompt": ' + b"9" * 5000 + b"}",
    b'{"prompt": "a", "x": ' + b"1" * 5000 + b"}",
    b"[" * 10000 + b"]" * 10000,
    b'{"prompt": 1e999}',
    b'{"prompt": NaN}',
    b"\xff\xfe",
    b'{"prompt": "\\ud800"}',
])
def test_json_it_cannot_use_is_4xx(lm_client, body):
    response = lm_client.post("/api/explain", content=body, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text


def claims_folder(tmp_path):
    folder = tmp_path / "claims"
    folder.mkdir()
    entry = CLAIMS[0]
    json_path, png_path = result_paths(folder, entry.number, entry.slug, quick=True)
    return folder, json_path, png_path


@pytest.mark.parametrize("target", ["/etc/passwd", "/dev/zero", "outside"])
def test_claims_never_follow_a_link_out_of_the_folder(target, tmp_path):
    folder, json_path, png_path = claims_folder(tmp_path)
    outside = tmp_path / "outside"
    outside.write_bytes(b"secret")
    json_path.symlink_to(outside if target == "outside" else target)
    png_path.write_bytes(b"\x89PNG")
    files, index = read_claim_results(folder)
    assert files == {} and index == {}
    app_client = client(create_app(None, claims_dir=folder))
    refused(app_client.get(f"/claims/{json_path.name}"), 404)


def test_claims_serve_regular_files_inside_the_folder(tmp_path):
    folder, json_path, png_path = claims_folder(tmp_path)
    json_path.write_text("{}")
    png_path.write_bytes(b"\x89PNG")
    files, _ = read_claim_results(folder)
    assert files == {json_path.name: b"{}", png_path.name: b"\x89PNG"}
    os.mkfifo(tmp_path / "fifo")
    json_path.unlink()
    json_path.symlink_to(tmp_path / "fifo")
    assert read_claim_results(folder)[0] == {}  # a FIFO (through a link or not) is no result: no hang


# ----------------------------------------------------------------------------- issue 33, point 5
# Every POST route the app has gets every malformed body: one parser, one size rule (serve/requests.py).
# A route added later (the lens views) is covered by being in app.routes.
HUGE = b"9" * 5000
BAD_BODIES = {
    "5,000-digit integer as the text": b'{"sentence": ' + HUGE + b"}",
    "5,000-digit integer as the prompt": b'{"prompt": ' + HUGE + b"}",
    "5,000-digit beam": b'{"sentence": "I love you", "beam": ' + HUGE + b"}",
    "4,000-digit beam": b'{"sentence": "I love you", "beam": ' + b"7" * 4000 + b"}",
    "5,000-digit integer in an unknown field": b'{"x": ' + HUGE + b"}",
    "lone surrogate in the sentence": b'{"sentence": "I love \\ud800"}',
    "lone surrogate in the prompt": b'{"prompt": "\\udfff the"}',
    "lone surrogate in a name": b'{"sentence": "I love you", "ablate": ["\\ud800"]}',
    "lone surrogate as a field name": b'{"\\ud800": "x"}',
    "number as the sentence": b'{"sentence": 42}',
    "list as the sentence": b'{"sentence": ["I"]}',
    "object as the sentence": b'{"sentence": {"a": 1}}',
    "null as the sentence": b'{"sentence": null}',
    "string as the beam": b'{"sentence": "I love you", "beam": "2"}',
    "fraction as the beam": b'{"sentence": "I love you", "beam": 1.5}',
    "true as the beam": b'{"sentence": "I love you", "beam": true}',
    "numbers as names": b'{"sentence": "I love you", "ablate": [1, 2]}',
    "string as names": b'{"sentence": "I love you", "ablate": "decoder.positions"}',
    "NaN": b'{"sentence": "I love you", "beam": NaN}',
    "1e999": b'{"sentence": "I love you", "beam": 1e999}',
    "nested 10,000 deep": b"[" * 8000 + b"]" * 8000,
    "not UTF-8": b'{"sentence": "caf\xe9"}',
    "not JSON": b"{sentence: 1}",
    "empty": b"",
    "a list": b"[]",
    "a string": b'"I love you"',
    "null": b"null",
    "no field": b"{}",
    "over 16 KiB": b'{"sentence": "' + b"a" * (17 * 1024) + b'"}',
    "2,001 characters": b'{"sentence": "' + b"a " * 1000 + b'a"}',
}


def post_routes(app) -> list[str]:
    return sorted(route.path for route in app.routes if "POST" in getattr(route, "methods", ()))


@pytest.fixture(scope="module")
def toy_app(toy_run):
    return create_app(load(toy_run))


@pytest.fixture(scope="module")
def lm_app(lm_run):
    return create_app(load(lm_run))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["toy_app", "lm_app"])
@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_every_malformed_body_is_4xx_on_every_route(which, case, request):
    app = request.getfixturevalue(which)
    routes = post_routes(app)
    assert {"/api/explain", "/api/whatif"} <= set(routes)
    app_client = client(app)
    for route in routes:
        response = app_client.post(route, content=BAD_BODIES[case], headers={"content-type": "application/json"})
        assert 400 <= response.status_code < 500, (route, response.status_code, response.text[:300])
        message = response.json()["error"]
        assert isinstance(message, str) and "\n" not in message and len(message) < 1000, (route, message)


@pytest.mark.slow
def test_a_huge_answer_is_refused_while_it_is_computed(toy_app):
    # Before: 19.9 MB for this sentence at beam 8 (and 69-75 MB on bigger models), all held in memory.
    sentence = "I love you and the cat sat on the mat"
    for route, body in (("/api/whatif", {"sentence": sentence, "beam": 8}),
                        ("/api/explain", {"sentence": sentence + " and the dog ran"})):
        message = refused(client(toy_app).post(route, json=body), 413)
        assert "over the server's limit of 8,388,608 bytes" in message, message


def test_an_answer_surely_over_the_bound_is_refused_before_any_work(toy_app, monkeypatch):
    from clearformer.serve.requests import answer_estimate

    def no_work(*_):
        raise AssertionError("the work started")

    monkeypatch.setattr(toy_app.state.explainer, "compute", no_work)
    config = toy_app.state.explainer.loaded.model.config
    monkeypatch.setattr(requests_module, "MAX_ANSWER_BYTES", answer_estimate(config, 3, 1) - 1)
    for route, body in (("/api/explain", {"sentence": "I love you"}), ("/api/whatif", {"sentence": "I love you"})):
        message = refused(client(toy_app).post(route, json=body), 413)
        assert "is at least" in message, message
