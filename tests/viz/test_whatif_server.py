"""POST /api/whatif: the page's reruns with parts of the model switched off, and with beam search."""

from __future__ import annotations

import pytest
import torch
from test_viz_server import _refused, local_client

from clearformer.explain.interventions import parse_interventions, valid_interventions
from clearformer.generate import DecodingOptions, search_tokens
from clearformer.generate.translator import decode_ids
from clearformer.record import trace
from clearformer.serve.app import create_app
from clearformer.serve.explainer import load
from clearformer.tokenize import encode_source

HEAD = "decoder.layers.0.cross_attention.head.1"


@pytest.fixture(scope="module")
def client(tiny_checkpoint):
    return local_client(create_app(load(tiny_checkpoint)))


def expected(tiny_model, sentence: str, names=(), beam: int = 1) -> str:
    """The translation the server must give: translate's call, with the server's length bound."""
    model, tokenizer = tiny_model
    ids = encode_source(tokenizer, sentence)
    limit = max(1, min(model.config.max_len - 1, 2 * len(ids) + 8))
    with trace.Interventions(parse_interventions(model, names)):
        options = DecodingOptions(beam=beam, max_new=limit, placeholders="free")
        out = decode_ids(model, torch.tensor([ids]), options, search_tokens(model, tokenizer, options))
    return tokenizer.decode(out[0])


def test_info_lists_the_interventions(client, tiny_model):
    info = client.get("/api/info").json()
    assert info["whatif"]["names"] == list(valid_interventions(tiny_model[0]))
    assert HEAD in info["whatif"]["names"]


def test_rerun_with_a_head_off(client, tiny_model):
    plain = client.post("/api/explain", json={"sentence": "I love you"}).json()
    same = client.post("/api/whatif", json={"sentence": "I love you", "ablate": []}).json()
    assert same["result"] == plain["result"] and same["ablated"] == [] and same["original"] is None
    changed = client.post("/api/whatif", json={"sentence": "I love you", "ablate": [HEAD], "beam": 1}).json()
    assert changed["ablated"] == [HEAD]
    assert changed["result"] == expected(tiny_model, "I love you", [HEAD])
    assert changed["original"]["result"] == plain["result"] == expected(tiny_model, "I love you")
    model, _ = tiny_model
    weights = [s for s in changed["steps"] if s["name"] == "decoder.layers.0.cross_attention.head_outputs"]
    assert weights and all(v == 0 for s in weights for v in sum(s["matrices"][1]["values"], []))  # head 1: zeros
    assert any(v != 0 for s in weights for v in sum(s["matrices"][0]["values"], []))


def test_rerun_with_beam_search(client, tiny_model):
    answer = client.post("/api/whatif", json={"sentence": "I love you", "ablate": [HEAD], "beam": 3}).json()
    assert answer["result"] == answer["beam"]["result"] == expected(tiny_model, "I love you", [HEAD], beam=3)
    assert answer["original"]["result"] == expected(tiny_model, "I love you", beam=3)
    assert answer["beam"]["beam"] == 3 and answer["beam"]["chosen_path"]


@pytest.mark.parametrize("body, status, words", [
    ({"sentence": "I love you", "ablate": ["decoder.layers.5.cross_attention.head.0"]}, 400, "is not a part"),
    ({"sentence": "I love you", "ablate": "decoder.positions"}, 400, "ablate must be a list"),
    ({"sentence": "I love you", "beam": 0}, 400, "beam must be"),
    ({"sentence": "I love you", "beam": True}, 400, "beam must be"),
    ({"sentence": "I love you", "beam": 99}, 400, "beam must be"),
    ({"prompt": "I love you"}, 400, "translation model"),
    ({"sentence": "I love you", "prompt": "x"}, 400, "exactly one"),
    ({"sentence": "I love you", "color": 1}, 400, "unknown field"),
    ({"ablate": []}, 400, "exactly one"),
])
def test_refusals(client, body, status, words):
    assert words in _refused(client.post("/api/whatif", json=body), status)


def test_unknown_name_lists_valid_ones(client):
    message = _refused(client.post("/api/whatif", json={"sentence": "I love you", "ablate": ["encoder.nothing"]}), 400)
    assert "decoder.layers.0.cross_attention.head.{0-1}[.uniform]" in message and "encoder.positions" in message


def test_seeds_only_server_refuses(tiny_checkpoint):
    client = local_client(create_app(None))
    assert "no trained model" in _refused(client.post("/api/whatif", json={"sentence": "I love you"}), 409)
