"""The engine on the language model: logits equal the model's forward to 1e-5, and `generate`
chooses the same tokens through the engine, through the model, and under a recorder, for every
attention variant (MHA, GQA, MQA, MLA naive and absorbed)."""

from __future__ import annotations

import pytest
import torch
from lm_helpers import tiny_model

from clearformer import trace
from clearformer.generate.engine import SETTINGS, Engine
from clearformer.generate.sampling import SamplingSettings, generate

CASES = [("mha", None), ("gqa", None), ("mqa", None), ("mla", False), ("mla", True)]


def model_for(variant: str, absorb, **overrides):
    model = tiny_model(variant, **overrides)
    if absorb is not None:
        model.set_mla_path(absorb)
    return model


@pytest.mark.parametrize("variant,absorb", CASES)
@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "activation": "gelu", "bias": False}])
@torch.inference_mode()
def test_engine_logits_equal_the_forward(variant, absorb, overrides):
    model = model_for(variant, absorb, **overrides)
    ids = torch.randint(4, 40, (2, 10), generator=torch.Generator().manual_seed(1))
    full = model(ids)
    cache = model.new_cache()
    model(ids[:, :3], cache, 0)
    engine = Engine(model)
    engine.adopt(cache)
    for position in range(3, ids.shape[1]):
        torch.testing.assert_close(engine.step(ids[:, position], position), full[:, position], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant,absorb", CASES)
def test_generate_chooses_the_same_tokens_on_every_path(variant, absorb):
    model = model_for(variant, absorb)
    greedy = SamplingSettings(greedy=True)
    sampled = SamplingSettings(temperature=0.8, top_k=10, seed=3)
    engine = [generate(model, [5, 9, 7], 12, s) for s in (greedy, sampled)]
    with trace.Recorder() as recorder:
        recorded = [generate(model, [5, 9, 7], 12, s) for s in (greedy, sampled)]
    chosen = [r for r in recorder.find("generate.chosen")]
    assert [int(r.value[0]) for r in chosen[:12]] == recorded[0]
    assert [r.step for r in chosen[:12]] == list(range(12))
    SETTINGS.engine = False
    try:
        plain = [generate(model, [5, 9, 7], 12, s) for s in (greedy, sampled)]
    finally:
        SETTINGS.engine = True
    assert engine == recorded == plain
