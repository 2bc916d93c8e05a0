"""Class 6: the server bounds each answer and its cache in bytes, answers 4xx to any JSON it cannot use, and
serves claim results only from regular files inside the claims folder (issue 22)."""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

from clearformer.claims.common import result_paths
from clearformer.claims.registry import CLAIMS
from clearformer.limits import MAX_ANSWER_BYTES, SERVER_CACHE_BYTES
from clearformer.serve import explainer as explainer_module
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
    monkeypatch.setattr(explainer_module, "MAX_ANSWER_BYTES", len(small.content) // 2)
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
