"""Fuzzed sentences (translate, explain) and HTTP bodies (the server): a result or a one-line refusal, never a crash."""

from __future__ import annotations

import io
import json
import sys

import pytest
from fuzz_helpers import ANY_CHARACTER, FUZZ, JSON_VALUES, SENTENCES, one_line
from hypothesis import given, settings
from hypothesis import strategies as st

from clearformer.cli import main


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    from fastapi.testclient import TestClient

    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    return TestClient(create_app(load(tiny_checkpoint)), base_url="http://127.0.0.1",
                      raise_server_exceptions=False)


def cli(capsys, args: list[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@FUZZ
@given(sentence=SENTENCES)
def test_translate_argument(tiny_checkpoint, capsys, sentence):
    code, out, err = cli(capsys, ["translate", sentence, "--checkpoint", str(tiny_checkpoint)])
    assert code in (0, 2), err
    if code == 2:
        assert one_line(err) and len(err) < 400 and "Traceback" not in err
    else:
        assert out.endswith("\n") and out.count("\n") == 1


@FUZZ
@given(data=st.binary(max_size=120))
def test_translate_stdin_bytes(tiny_checkpoint, capsys, monkeypatch, data):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, out, err = cli(capsys, ["translate", "--checkpoint", str(tiny_checkpoint)])
    assert code in (0, 2), err
    if code == 2:
        assert one_line(err) and len(err) < 400
    else:
        assert out.count("\n") == len(data.decode("utf-8").splitlines())


@settings(FUZZ, max_examples=12)  # each explanation records every intermediate: the slowest target here
@given(sentence=SENTENCES)
def test_explain_sentence(tiny_checkpoint, capsys, sentence):
    code, out, err = cli(capsys, ["explain", sentence, "--checkpoint", str(tiny_checkpoint), "--format", "json"])
    assert code in (0, 2), err
    if code == 2:
        assert one_line(err) and len(err) < 400
    else:
        json.loads(out)


def answered(response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert one_line(response.json()["error"])
    else:
        assert "steps" in response.json()


@FUZZ
@given(body=st.binary(max_size=200))
def test_http_random_bodies(client, body):
    answered(client.post("/api/explain", content=body, headers={"content-type": "application/json"}))


@FUZZ
@given(value=JSON_VALUES)
def test_http_random_json(client, value):
    answered(client.post("/api/explain", content=json.dumps(value).encode()))


@FUZZ
@given(sentence=SENTENCES.filter(lambda s: len(s) < 3000), kind=st.sampled_from(["sentence", "example"]))
def test_http_sentences(client, sentence, kind):
    body = json.dumps({kind: sentence}).encode()  # lone surrogates become \\ud800 escapes: valid JSON
    answered(client.post("/api/explain", content=body))


@FUZZ
@given(host=st.text(ANY_CHARACTER.filter(lambda c: c.isprintable() and c.isascii()), max_size=30),
       origin=st.one_of(st.none(), st.text(ANY_CHARACTER.filter(lambda c: c.isascii() and c.isprintable()),
                                           max_size=30)))
def test_http_random_host_and_origin(client, host, origin):
    headers = {"host": host} | ({"origin": origin} if origin is not None else {})
    response = client.post("/api/explain", json={"example": "i-love-you"}, headers=headers)
    assert response.status_code in (200, 403, 421), response.text
