"""The live server: page and files, refusals (4xx JSON, never a 500), load, and `serve`'s start-up checks."""

from __future__ import annotations

import asyncio
import json
import socket

import numpy as np
import pytest
from fastapi.testclient import TestClient

from clearformer.cli import main
from clearformer.explain.html import LIVE_SCRIPTS, STYLE, asset
from clearformer.serve.app import create_app
from clearformer.serve.explainer import MAX_BODY_BYTES, MAX_SENTENCE_CHARS, NO_MODEL_NOTICE, load


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    return TestClient(create_app(load(tiny_checkpoint)), base_url="http://127.0.0.1", raise_server_exceptions=False)


@pytest.fixture(scope="module")
def seeds_client():
    return TestClient(create_app(None), base_url="http://127.0.0.1", raise_server_exceptions=False)


def _refused(response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    message = response.json()["error"]
    assert isinstance(message, str) and message and "\n" not in message
    return message


def test_page_info_and_static_files(client):
    page = client.get("/")
    assert page.status_code == 200 and 'id="cf-data"' in page.text and "static/live.js" in page.text
    info = client.get("/api/info").json()
    assert info["model"]["name"] == "tiny" and info["model"]["max_len"] == 12 and info["notice"] is None
    assert info["examples"] == ["i-love-you", "india-is-great"]
    for name in (STYLE, *LIVE_SCRIPTS):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200 and response.text == asset(name)
    assert client.get("/static/walkthrough.js").headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize("path", ["/static/walkthrough.html", "/static/../app.py", "/static/..%2Fapp.py",
                                  "/static/%2e%2e/%2e%2e/cli.py", "/static/..%5C..%5Ccli.py", "/static/",
                                  "/static/__init__.py", "/../pyproject.toml", "/docs", "/openapi.json",
                                  "/etc/passwd", "/static/walkthrough.js/../../explainer.py"])
def test_serves_only_its_own_files(client, path):
    _refused(client.get(path), 404)


def test_explain_a_sentence(client, tiny_model):
    response = client.post("/api/explain", json={"sentence": "I love you"})
    assert response.status_code == 200
    walk = response.json()
    assert walk["source_tokens"] == ["I", "love", "you"]  # as translate encodes it: no <eos> (source_eos False)
    assert walk["target_tokens"][0] == "<bos>"
    chosen = [s for s in walk["steps"] if s["name"] == "generate.chosen"]
    assert [s["decode_step"] for s in chosen] == list(range(len(chosen)))
    assert len(chosen) <= 11  # max_len 12 bounds the generation


def test_explain_an_example(seeds_client, golden):
    walk = seeds_client.post("/api/explain", json={"example": "i-love-you"}).json()
    weights = next(s for s in walk["steps"] if s["name"] == "self_attention.weights")
    expected = golden["seed_002_i_love_you"]["weights"]
    np.testing.assert_allclose(weights["matrices"][0]["values"], expected, atol=1e-4)


def test_without_a_model_only_the_examples(seeds_client):
    info = seeds_client.get("/api/info").json()
    assert info["model"] is None and info["notice"] == NO_MODEL_NOTICE
    assert "clearformer train --preset toy-translate" in seeds_client.get("/").text
    refusal = seeds_client.post("/api/explain", json={"sentence": "I love you"})
    assert "seed examples" in _refused(refusal, 409)


@pytest.mark.parametrize(("body", "status", "says"), [
    (b"", 400, "JSON"),
    (b"{not json", 400, "JSON"),
    (b"\xff\xfe\x00", 400, "JSON"),
    (b"[1, 2]", 400, "object"),
    (b'"I love you"', 400, "object"),
    (b"{}", 400, "exactly one"),
    (b'{"sentence": ""}', 400, "empty"),
    (b'{"sentence": "   "}', 400, "empty"),
    (b'{"sentence": 42}', 400, "string"),
    (b'{"sentence": null}', 400, "string"),
    (b'{"sentence": ["I"]}', 400, "string"),
    (b'{"sentence": "I love you", "example": "i-love-you"}', 400, "exactly one"),
    (b'{"text": "I love you"}', 400, "unknown field"),
    (b'{"example": "nope"}', 404, "unknown example"),
    (b'{"sentence": "zzz qqq"}', 400, "unknown"),
    (json.dumps({"sentence": " ".join(["love"] * 13)}).encode(), 400, "at most 12"),
    (json.dumps({"sentence": "love " * (MAX_SENTENCE_CHARS // 5 + 1)}).encode(), 413, "characters"),
    (b"[" * 5000 + b"]" * 5000, 400, "JSON"),
])
def test_bad_requests_get_a_4xx_json_error(client, body, status, says):
    response = client.post("/api/explain", content=body, headers={"content-type": "application/json"})
    message = _refused(response, status)
    assert says in message


def test_oversized_and_wrong_method_requests(client):
    _refused(client.post("/api/explain", content=b"x" * (MAX_BODY_BYTES + 1)), 413)
    _refused(client.get("/api/explain"), 405)
    _refused(client.put("/api/info", content=b"{}"), 405)


def test_fifty_concurrent_explanations(live_server):
    """50 explain requests at once on loopback (sentences and examples mixed): every one answered 200."""
    import httpx

    # Five sentences (the server computes each once, then answers repeats from its cache) and the examples.
    sentences = ["I love you", "I love the cat", "the cat", "you love the cat", "le chat"]
    bodies = [{"sentence": sentences[i % len(sentences)]} if i % 5 else
              {"example": ["i-love-you", "india-is-great"][i % 2]} for i in range(50)]

    async def storm():
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(base_url=live_server, timeout=120, limits=limits) as http:
            return await asyncio.gather(*(http.post("api/explain", json=body) for body in bodies))

    responses = asyncio.run(storm())
    assert [r.status_code for r in responses] == [200] * 50
    for body, response in zip(bodies, responses, strict=True):
        walk = response.json()
        if "sentence" in body:
            assert walk["title"] == f"Translating {body['sentence']!r}"


def _serve(capsys, *argv) -> tuple[int, str]:
    code = main(["serve", *argv])
    return code, capsys.readouterr().err


def test_serve_stops_at_start_on_a_bad_checkpoint(tmp_path, tiny_checkpoint, capsys, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    code, err = _serve(capsys, "--checkpoint", str(tmp_path / "nowhere"))
    assert code == 2 and err.count("\n") == 1 and "no such checkpoint" in err
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for item in tiny_checkpoint.iterdir():
        (damaged / item.name).write_bytes(item.read_bytes())
    (damaged / "model.safetensors").write_bytes(b"\x00garbage")
    code, err = _serve(capsys, "--checkpoint", str(damaged))
    assert code == 2 and err.count("\n") == 1 and "damaged" in err and "Traceback" not in err
    (damaged / "config.json").write_text("{ not json", encoding="utf-8")
    code, err = _serve(capsys, "--checkpoint", str(damaged))
    assert code == 2 and err.count("\n") == 1 and "config.json" in err
    # A LATEST marker that points to a deleted run is an error too, not a silent fallback.
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "LATEST").write_text(str(tmp_path / "deleted") + "\n", encoding="utf-8")
    code, err = _serve(capsys)
    assert code == 2 and err.count("\n") == 1 and "no longer exists" in err


def test_serve_refuses_a_busy_port_in_one_line(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        code, err = _serve(capsys, "--seeds-only", "--port", str(busy.getsockname()[1]))
    assert code == 2 and err.count("\n") == 1 and "in use" in err
