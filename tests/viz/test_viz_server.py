"""The live server: page and files, refusals (4xx JSON, never a 500), Host and Origin checks, the worker
pool (parallel, coalescing, 503 when full), load, and `serve`'s start-up checks."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest
from fastapi.testclient import TestClient
from tolerance import golden_close

from clearformer.cli import main
from clearformer.explain.html import LIVE_SCRIPTS, STYLE, asset
from clearformer.limits import MAX_BODY_BYTES, MAX_SENTENCE_CHARS
from clearformer.serve.app import create_app
from clearformer.serve.explainer import NO_MODEL_NOTICE, load
from clearformer.serve.pool import AnswerPool, Busy
from clearformer.serve.whatif import ExplainKey

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

LOCAL = "http://127.0.0.1:8000"


def local_client(app) -> TestClient:
    """A client that talks to the app as the page does: Host 127.0.0.1:8000 (TestClient's default
    Host, 'testserver', is refused like any foreign name)."""
    return TestClient(app, base_url=LOCAL, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    return local_client(create_app(load(tiny_checkpoint)))


@pytest.fixture(scope="module")
def seeds_client():
    return local_client(create_app(None))


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
    assert walk["source_tokens"] == ["I", "love", "you", "<eos>"]  # as translate encodes it (source_eos, the default)
    assert walk["target_tokens"][0] == "<bos>"
    chosen = [s for s in walk["steps"] if s["name"] == "generate.chosen"]
    assert [s["decode_step"] for s in chosen] == list(range(len(chosen)))
    assert len(chosen) <= 11  # max_len 12 bounds the generation


def test_explain_an_example(seeds_client, golden):
    walk = seeds_client.post("/api/explain", json={"example": "i-love-you"}).json()
    weights = next(s for s in walk["steps"] if s["name"] == "self_attention.weights")
    expected = golden["seed_002_i_love_you"]["weights"]
    assert golden_close(weights["matrices"][0]["values"], expected)  # tests/tolerance.py


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
    (json.dumps({"sentence": " ".join(["love"] * 13)}).encode(), 400, "maximum length (12)"),
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


# ----------------------------------------------------------------------------- Host, Origin, paths


def test_no_absolute_path_in_any_answer(client, tiny_checkpoint):
    info = client.get("/api/info")
    assert info.json()["model"]["name"] == "tiny" and "path" not in info.json()["model"]
    for response in (info, client.get("/")):
        assert str(tiny_checkpoint) not in response.text and str(tiny_checkpoint.parent) not in response.text


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8000", "127.0.0.1.nip.io:8000",
                                  "localhost.evil.example", "[::1", "127.0.0.1:port", "", "testserver"])
def test_foreign_host_headers_are_refused(client, host):
    """DNS rebinding: a page whose name now points at 127.0.0.1 sends its own name as Host."""
    for response in (client.get("/api/info", headers={"host": host}),
                     client.post("/api/explain", json={"example": "i-love-you"}, headers={"host": host})):
        assert "Host" in _refused(response, 400)


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.0.0.1"])
def test_local_host_headers_are_served(client, host):
    assert client.get("/api/info", headers={"host": host}).status_code == 200


def test_the_bound_address_is_a_host_too(tiny_checkpoint):
    on_lan = local_client(create_app(None, bound_host="192.168.1.5"))
    assert on_lan.get("/api/info", headers={"host": "192.168.1.5:8000"}).status_code == 200
    _refused(on_lan.get("/api/info", headers={"host": "192.168.1.6:8000"}), 400)
    everywhere = local_client(create_app(None, bound_host="0.0.0.0"))
    assert everywhere.get("/api/info", headers={"host": "10.0.0.7:8000"}).status_code == 200
    _refused(everywhere.get("/api/info", headers={"host": "evil.example.com:8000"}), 400)


@pytest.mark.parametrize("origin", ["http://evil.example.com", "http://127.0.0.1:8001", "https://127.0.0.1:8000",
                                    "null", "http://localhost:8000", "not a url", "http://[::1"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/json", "application/x-www-form-urlencoded"])
def test_cross_origin_posts_are_refused(client, origin, content_type):
    """A "simple" POST (text/plain, form) needs no CORS preflight: the server itself must refuse it."""
    response = client.post("/api/explain", content=b'{"example": "i-love-you"}',
                           headers={"origin": origin, "content-type": content_type})
    assert "cross-origin" in _refused(response, 403)


def test_same_origin_and_origin_less_posts_are_served(client):
    for headers in ({"origin": LOCAL}, {"origin": "http://localhost:8000", "host": "localhost:8000"}, {}):
        assert client.post("/api/explain", json={"example": "i-love-you"}, headers=headers).status_code == 200


# ----------------------------------------------------------------------------- the worker pool


def test_distinct_requests_run_in_parallel():
    """Two distinct keys are computed at the same time: each waits at a barrier for the other (a global
    lock would make the first wait forever, and the barrier's timeout would fail the test)."""
    barrier = threading.Barrier(2, timeout=30)
    pool = AnswerPool(lambda key: (barrier.wait(), key.encode())[1], workers=2, queue=0, cache_bytes=0)
    try:
        first, second = pool.submit("a"), pool.submit("b")
        assert (first.result(timeout=60), second.result(timeout=60)) == (b"a", b"b")
    finally:
        pool.shutdown()


def test_identical_requests_share_one_computation_and_the_cache_is_bounded():
    release, calls = threading.Event(), []

    def compute(key):
        calls.append(key)
        release.wait(30)
        return key.encode()

    pool = AnswerPool(compute, workers=1, queue=0, cache_bytes=5)  # "same" is 4 bytes, "b" and "c" 1 each
    try:
        futures = [pool.submit("same") for _ in range(20)]
        assert len({id(f) for f in futures}) == 1 and pool.in_flight() == 1
        with pytest.raises(Busy):  # one worker, no queue: a second distinct key is refused
            pool.submit("other")
        release.set()
        assert [f.result(timeout=60) for f in futures] == [b"same"] * 20
        for key in ("b", "c", "same"):
            pool.submit(key).result(timeout=60)
        assert calls == ["same", "b", "c", "same"]  # "same" was evicted by c (4 + 1 + 1 > 5 bytes)
        pool.submit("c").result(timeout=60)
        assert calls[-1] == "same"  # "c" came from the cache
    finally:
        release.set()
        pool.shutdown()


def test_full_queue_answers_503(tiny_checkpoint):
    app = create_app(load(tiny_checkpoint), workers=1, queue=1)
    release = threading.Event()
    app.state.explainer.compute = lambda kind, value: (release.wait(30), b"{}")[1]
    try:
        app.state.pool.submit(ExplainKey("sentence", "I love you"))
        app.state.pool.submit(ExplainKey("sentence", "the cat"))
        response = local_client(app).post("/api/explain", json={"sentence": "I love the cat"})
        assert "busy" in _refused(response, 503) and response.headers["retry-after"] == "1"
    finally:
        release.set()
        app.state.pool.shutdown()


# ----------------------------------------------------------------------------- load


def test_fifty_concurrent_explanations_of_one_sentence(toy_size_server):
    """50 concurrent /api/explain requests for one sentence on a toy-sized model (each explanation decodes to
    its length limit): all 200 and all the same, correct walkthrough. How long they take is measured by
    `python -m benchmarks.server_load` (BENCHMARKS.md), never asserted here; that identical requests share
    one computation and distinct ones run in parallel is checked above without timing."""
    import httpx

    async def storm() -> list:
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(base_url=toy_size_server, timeout=120, limits=limits) as http:
            return await asyncio.gather(*(http.post("api/explain", json={"sentence": "you love"})
                                          for _ in range(50)))

    responses = asyncio.run(storm())
    assert [r.status_code for r in responses] == [200] * 50
    assert len({r.content for r in responses}) == 1
    assert responses[0].json()["title"] == "Translating 'you love'"


def test_serves_the_claims_results_it_found_at_start(tmp_path):
    from clearformer.claims.common import result_paths

    full = result_paths(tmp_path, 2, "scaling", quick=False)
    quick = result_paths(tmp_path, 2, "scaling", quick=True)
    only_quick = result_paths(tmp_path, 3, "positions", quick=True)
    for index, path in enumerate((*full, *quick, *only_quick)):
        path.write_bytes(b"\x89PNG-" + bytes([index]) if path.suffix == ".png" else b'{"claim": %d}' % index)
    result_paths(tmp_path, 4, "heads", quick=True)[0].write_text("{}")  # a JSON without its figure: not linked
    (tmp_path / "notes.txt").write_text("not a result")
    client = local_client(create_app(None, claims_dir=tmp_path))
    info = client.get("/api/info").json()
    assert info["claims"] == {"2": {"json": "claims/claim2-scaling.json", "figure": "claims/claim2-scaling.png"},
                              "3": {"json": "claims/claim3-positions-quick.json",
                                    "figure": "claims/claim3-positions-quick.png"}}
    assert '"claims":{"2"' in client.get("/").text  # the page's config carries the index
    figure = client.get("/claims/claim2-scaling.png")
    assert figure.status_code == 200 and figure.headers["content-type"] == "image/png"
    assert figure.content == full[1].read_bytes()
    assert client.get("/claims/claim3-positions-quick.json").json() == json.loads(only_quick[0].read_text())
    for path in ("/claims/notes.txt", "/claims/claim4-heads-quick.json", "/claims/../app.py", "/claims/"):
        _refused(client.get(path), 404)
    assert local_client(create_app(None)).get("/api/info").json()["claims"] == {}
