"""generate/engine.py: the engine's one-token steps give the model's own numbers and tokens.

The model path (`model.decode` + `model.project`, what runs under a recorder) is the reference:
the engine's logits equal it to 1e-5 at every step, and greedy and beam search choose the same
tokens through the engine, through the model path, under a recorder, and with each optimisation
switched off.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from gen_helpers import random_model

from clearformer import trace
from clearformer.generate import beam_search, greedy_decode
from clearformer.generate.engine import SETTINGS, Engine, few_query_attention, linear

VARIANTS = {
    "paper (post-norm, relu)": {},
    "pre-norm, gelu": {"norm_first": True, "activation": "gelu"},
    "no biases": {"bias": False},
    "gqa, rope": {"n_kv_heads": 1, "positional": "rope"},
}
SWITCHES = [field.name for field in dataclasses.fields(SETTINGS)]


@pytest.fixture
def settings():
    """SETTINGS as the test found them, restored afterwards."""
    saved = dataclasses.replace(SETTINGS)
    yield SETTINGS
    for field in SWITCHES:
        setattr(SETTINGS, field, getattr(saved, field))


def sources(seed: int = 0, lengths=(5, 3, 7)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, 30, (length,), generator=generator)
    return src


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("beams", [1, 3])  # greedy; beams sharing their sentence's memory row
@torch.inference_mode()
def test_engine_logits_equal_the_model_forward(variant, beams):
    model = random_model(dtype=torch.float32, **VARIANTS[variant])
    src = sources()
    memory, src_mask = model.encode(src)
    engine = Engine(model, memory, src_mask)
    tokens = torch.randint(4, 30, (src.shape[0] * beams, 6), generator=torch.Generator().manual_seed(2))
    tokens[:, 0] = 2
    full = model.project(model.decode(tokens, memory.repeat_interleave(beams, 0), src_mask.repeat_interleave(beams, 0)))
    for position in range(tokens.shape[1]):
        step = engine.step(tokens[:, position], position)
        torch.testing.assert_close(step, full[:, position], atol=1e-5, rtol=1e-5)


def decodings(model, src) -> list[list[list[int]]]:
    return [greedy_decode(model, src, max_extra=6).sequences(),
            beam_search(model, src, beam=3, alpha=0.6, max_extra=6).sequences()]


@pytest.mark.parametrize("variant", VARIANTS)
def test_engine_model_path_and_recorder_choose_the_same_tokens(variant, settings):
    model = random_model(**VARIANTS[variant])
    src = sources(seed=3)
    engine = decodings(model, src)
    with trace.Recorder() as recorder:
        recorded = decodings(model, src)
    assert recorder.find("output.probabilities")  # the model's own projection ran
    settings.engine = False
    assert decodings(model, src) == engine == recorded
    assert greedy_decode(model, src, max_extra=6, use_cache=False).sequences() == engine[0]


@pytest.mark.parametrize("switch", [name for name in SWITCHES if name != "engine"])
def test_each_optimisation_switched_off_changes_no_token(switch, settings):
    model = random_model(n_kv_heads=1)
    src = sources(seed=4)
    expected = decodings(model, src)
    setattr(settings, switch, False)
    assert decodings(model, src) == expected


def test_few_query_attention_equals_attention_over_repeated_keys():
    """Beams reading their sentence's one memory row, query heads sharing a key head (GQA) =
    every row and head reading its own copy."""
    torch.manual_seed(0)
    sentences, beams, kv_heads, group, t, d = 3, 4, 2, 2, 7, 8
    q = torch.randn(sentences * beams, kv_heads * group, d)
    k, v = torch.randn(sentences, kv_heads, t, d), torch.randn(sentences, kv_heads, t, d)
    mask = torch.ones(sentences, 1, 1, t, dtype=torch.bool)
    mask[1, ..., 4:] = False

    def repeated(x):
        return x.repeat_interleave(beams, 0).repeat_interleave(group, 1)

    expected = torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None], repeated(k), repeated(v), attn_mask=mask.repeat_interleave(beams, 0))[:, :, 0]
    torch.testing.assert_close(few_query_attention(q, k, v, d ** -0.5, mask), expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows", [1, 5, 32])
@pytest.mark.parametrize("skinny", [True, False])
def test_products_laid_out_for_skinny_inputs_equal_the_linear_layer(bias, rows, skinny, settings):
    """(W x^T + b)^T, the engine's layout for a step's few rows, is the module's x W^T + b."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 40, bias=bias)
    x = torch.randn(rows, 16)
    settings.skinny_products = skinny
    out = linear(layer, x)
    assert out.shape == (rows, 40)
    torch.testing.assert_close(out, layer(x), atol=1e-6, rtol=1e-5)
