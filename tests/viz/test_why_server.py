"""POST /api/why: the lens, patching and attribution through the server, bounded and checked as /api/explain is."""

from __future__ import annotations

import pytest
from test_viz_server import local_client

from clearformer.explain.why import lens_report
from clearformer.limits import MAX_BODY_BYTES
from clearformer.serve.app import create_app
from clearformer.serve.explainer import load

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    return local_client(create_app(load(tiny_checkpoint)))


def test_lens_answer_is_the_commands(client, tiny_model):
    answer = client.post("/api/why", json={"tool": "lens", "sentence": "I love you"})
    assert answer.status_code == 200
    data = answer.json()
    assert data["tool"] == "lens" and data["steps"] == lens_report(*tiny_model, "I love you")["steps"]


@pytest.mark.parametrize("body, status, message", [
    ({"tool": "explain", "sentence": "I love you"}, 400, "tool must be one of"),
    ({"tool": "lens", "sentence": "I love you", "extra": 1}, 400, "unknown field"),
    ({"tool": "patch", "sentence": "I love you"}, 400, "patch needs corrupted"),
    ({"tool": "patch", "sentence": "I love you", "corrupted": "I love the cat"}, 400, "same number of tokens"),
    ({"tool": "attribute", "sentence": "I love you", "method": "lime"}, 400, "method must be one of"),
    ({"tool": "lens", "prompt": "I love"}, 400, "this server holds a translation model"),
])
def test_refusals_are_one_line(client, body, status, message):
    answer = client.post("/api/why", json=body)
    assert answer.status_code == status and message in answer.json()["error"]
    assert "\n" not in answer.json()["error"]


def test_body_over_the_bound_is_413(client):
    answer = client.post("/api/why", content=b" " * (MAX_BODY_BYTES + 1), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413
