"""What-if interventions in the language models: MHA, GQA and MLA (both of its paths) with a head switched off
equal the model whose output projection lost that head's columns; uniform weights hold under the causal mask;
`lm generate` runs the interventions and leaves the model as it was."""

from __future__ import annotations

import copy

import pytest
import torch
from lm_helpers import tiny_model

from clearformer.explain.interventions import parse_interventions
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.record import trace

IDS = torch.tensor([[1, 7, 12, 5, 30, 2, 9]])


@pytest.mark.parametrize("variant, absorb", [("mha", False), ("gqa", False), ("mla", False), ("mla", True)])
def test_head_off_equals_zero_columns_of_the_output_projection(variant, absorb):
    model = tiny_model(variant)
    model.set_mla_path(absorb)
    name = "decoder.layers.1.self_attention.head.2"
    with trace.Interventions(parse_interventions(model, [name])):
        got = model(IDS)
    edited = copy.deepcopy(model)
    attention = edited.decoder.layers[1].self_attention
    projection = attention.wo if variant == "mla" else attention.w_o
    size = projection.weight.shape[1] // 4
    with torch.no_grad():
        projection.weight[:, 2 * size:3 * size] = 0
    torch.testing.assert_close(got, edited(IDS), rtol=0, atol=1e-9)
    assert not torch.allclose(got, model(IDS), atol=1e-6)


@pytest.mark.parametrize("absorb", [False, True])
def test_uniform_weights_under_the_causal_mask(absorb):
    model = tiny_model("mla")
    model.set_mla_path(absorb)
    with trace.Recorder() as recorder, trace.Interventions(
            parse_interventions(model, ["decoder.layers.0.self_attention.head.1.uniform"])):
        model(IDS)
    suffix = "absorbed.weights" if absorb else "self_attention.weights"
    weights = recorder.find(suffix)[0].value[0, 1]
    causal = torch.tril(torch.ones(7, 7, dtype=torch.float64))
    torch.testing.assert_close(weights, causal / causal.sum(dim=1, keepdim=True), rtol=0, atol=1e-12)


def test_generate_under_an_intervention_then_without():
    model = tiny_model("mha", positional="learned")
    prompt = IDS[0].tolist()
    plain = generate(model, prompt, 6, SamplingOptions(greedy=True))
    edited = copy.deepcopy(model)
    with torch.no_grad():
        edited.embed.positions.weight.zero_()
    with trace.Interventions(parse_interventions(model, ["decoder.positions"])):
        assert generate(model, prompt, 6, SamplingOptions(greedy=True)) == \
            generate(edited, prompt, 6, SamplingOptions(greedy=True))
    assert generate(model, prompt, 6, SamplingOptions(greedy=True)) == plain


def test_server_reruns_a_prompt_with_a_head_off(trained_lm):
    """POST /api/whatif {"prompt", "ablate"}: the continuation of the intervened model, every step rerun."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from clearformer.data.lm import prompt_ids
    from clearformer.load import load_model
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    client = TestClient(create_app(load(trained_lm)), base_url="http://127.0.0.1:8000")
    model, tokenizer, _ = load_model(trained_lm)
    name = "decoder.layers.0.self_attention.head.0"
    answer = client.post("/api/whatif", json={"prompt": "The dog", "ablate": [name]}).json()
    ids = prompt_ids(tokenizer, "The dog")
    with trace.Interventions(parse_interventions(model, [name])):
        new = generate(model, ids, 3, SamplingOptions(greedy=True))
    chosen = [int(s["matrices"][0]["values"][0][0]) for s in answer["steps"] if s["name"] == "generate.chosen"]
    assert chosen == new and answer["ablated"] == [name] and answer["sentence"] == "The dog"
    refused = client.post("/api/whatif", json={"prompt": "The dog", "beam": 4})
    assert refused.status_code == 400 and "greedily" in refused.json()["error"]
