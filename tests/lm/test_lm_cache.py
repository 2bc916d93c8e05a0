"""The language model's cache (model/cache.py): one-token steps through the model with its cache give
the full forward's logits (within float32 rounding: tests/tolerance.py), and `generate` chooses the same
tokens with and without a recorder, for every attention variant (MHA, GQA, MQA, MLA naive and absorbed)."""

from __future__ import annotations

import pytest
import torch
from lm_helpers import tiny_model
from tolerance import assert_float32_close, depth_of

from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.record import trace

CASES = [("mha", None), ("gqa", None), ("mqa", None), ("mla", False), ("mla", True)]


def model_for(variant: str, absorb, **overrides):
    model = tiny_model(variant, dtype=torch.float32, **overrides)
    if absorb is not None:
        model.set_mla_path(absorb)
    return model


@pytest.mark.parametrize("variant,absorb", CASES)
@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "activation": "gelu", "bias": False}])
@torch.inference_mode()
def test_cached_steps_equal_the_forward(variant, absorb, overrides):
    model = model_for(variant, absorb, **overrides)
    ids = torch.randint(4, 40, (2, 10), generator=torch.Generator().manual_seed(1))
    full = model(ids)
    cache = model.new_cache()
    c = model.config  # a decoder-only layer: one attention block and one feed-forward block
    depth = depth_of(c.d_model, c.d_ff, encoder_layers=c.n_decoder_layers, vocabulary=True)
    assert_float32_close(model(ids[:, :3], cache, 0), full[:, :3], depth)  # the prompt
    for position in range(3, ids.shape[1]):
        step = model(ids[:, position:position + 1], cache, position)[:, 0]
        assert_float32_close(step, full[:, position], depth)
    assert all(layer.cross_attention is None for layer in cache)  # no encoder: no cross-attention cache


@pytest.mark.parametrize("variant,absorb", CASES)
def test_generate_chooses_the_same_tokens_with_and_without_a_recorder(variant, absorb):
    model = model_for(variant, absorb)
    greedy = SamplingOptions(greedy=True)
    sampled = SamplingOptions(temperature=0.8, top_k=10, seed=3)
    plain = [generate(model, [5, 9, 7], 12, s) for s in (greedy, sampled)]
    with trace.Recorder() as recorder:
        recorded = [generate(model, [5, 9, 7], 12, s) for s in (greedy, sampled)]
    chosen = [r for r in recorder.find("generate.chosen")]
    assert [int(r.value[0]) for r in chosen[:12]] == recorded[0]
    assert [r.step for r in chosen[:12]] == list(range(12))
    assert plain == recorded
