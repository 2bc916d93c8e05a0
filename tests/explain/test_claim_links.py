"""Each `clearformer claims` experiment is linked from the walkthrough step it measures."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from clearformer.config import preset
from clearformer.explain.claim_links import claim_link, claim_number
from clearformer.explain.examples import run_example
from clearformer.explain.translation import explain_translation
from clearformer.generate import DecodingOptions
from clearformer.model.transformer import Transformer
from clearformer.tokenize import SPECIALS, WordTokenizer

DOCS = Path(__file__).resolve().parents[2] / "docs" / "claims.md"


def tiny_translation():
    tokenizer = WordTokenizer(list(SPECIALS) + "I love you Je t' aime".split())
    torch.manual_seed(0)
    model = Transformer(preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer),
                               d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32))
    return explain_translation(model.eval(), tokenizer, "I love you", DecodingOptions(max_new=2))


EXPECTED = {  # step name -> claim (None: no claim is about it)
    "src_embed.tokens.scaled": None,  # E · sqrt(d_model): not the attention scaling
    "src_embed.positions.PE": 3,
    "src_embed.X": None,
    "encoder.layers.0.self_attention.scores": None,
    "encoder.layers.0.self_attention.scaled": 2,
    "encoder.layers.0.self_attention.weights": None,
    "encoder.layers.0.self_attention.head_outputs": 4,
    "encoder.layers.0.self_attention.concat": 4,
    "encoder.layers.0.add_norm_1.residual": 5,
    "encoder.layers.0.add_norm_2.norm": 5,
    "encoder.layers.0.feed_forward.hidden": None,
    "encoder.output": 1,
    "decoder.layers.0.cross_attention.scaled": 2,
    "decoder.layers.0.add_norm_3.norm": 5,
    "output.probabilities": None,
}


def test_translation_steps_link_the_claim_they_belong_to():
    walk = tiny_translation()
    seen = {step.name: (step.claim or {}).get("number") for step in walk.steps}
    for name, number in EXPECTED.items():
        assert seen[name] == number, name
    scaled = walk.find("encoder.layers.0.self_attention.scaled")[0].claim
    assert scaled == {"number": 2, "statement": scaled["statement"], "command": "clearformer claims 2 --quick",
                      "docs": "docs/claims.md#claim-2", "experiment": None}
    assert "sqrt(d_k)" in scaled["statement"]


def test_claims_3_to_5_link_their_experiment_on_the_sentence():
    """Each names an intervention the model really has (docs/whatif.md), {head} = the head the page shows."""
    from clearformer.explain.interventions import valid_interventions

    walk = tiny_translation()
    model = Transformer(preset("toy-translate", src_vocab_size=9, tgt_vocab_size=9, d_model=16, n_heads=2,
                               n_encoder_layers=1, n_decoder_layers=1, d_ff=32))
    valid = valid_interventions(model)
    expected = {"src_embed.positions.PE": "encoder.positions", "tgt_embed.positions.PE": "decoder.positions",
                "decoder.layers.0.cross_attention.head_outputs": "decoder.layers.0.cross_attention.head.{head}",
                "encoder.layers.0.self_attention.concat": "encoder.layers.0.self_attention.head.{head}",
                "decoder.layers.0.add_norm_2.norm": "decoder.layers.0.add_norm_2.residual"}
    for name, ablate in expected.items():
        experiment = walk.find(name)[0].claim["experiment"]
        assert experiment["ablate"] == ablate and experiment["ablate"].format(head=1) in valid
    assert claim_link("decoder.layers.0.self_attention.absorbed.head_outputs")["experiment"]["ablate"] == \
        "decoder.layers.0.self_attention.head.{head}"


def test_seed_examples_link_them_too():
    walk, _ = run_example("i-love-you")
    numbers = {step.name: (step.claim or {}).get("number") for step in walk.steps}
    assert numbers["embedding.positions.PE"] == 3 and numbers["self_attention.scaled"] == 2
    assert numbers["self_attention.head_outputs"] == 4 and numbers["self_attention.weights"] is None
    walk, _ = run_example("india-is-great")
    assert walk.find("multi_head.concat")[0].claim["number"] == 4


def test_the_gru_baselines_steps_link_claim_1():
    assert claim_number("decoder.states") == 1 and claim_number("encoder.output") == 1
    assert claim_link("decoder.cross_attention.weights") is None


def test_every_linked_anchor_exists_in_the_docs():
    anchors = set(re.findall(r'<a id="(claim-\d)"></a>', DOCS.read_text(encoding="utf-8")))
    for number in range(1, 6):
        assert f"claim-{number}" in anchors
