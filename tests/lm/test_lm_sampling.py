"""Sampling: temperature, top-k, top-p, greedy, seeds, and the generation loop with its cache."""

from __future__ import annotations

import math

import pytest
import torch
from lm_helpers import tiny_model

from clearformer.errors import UserError
from clearformer.generate.sampling import (
    SamplingOptions,
    filter_logits,
    generate,
    next_token_distribution,
    sample_next,
)

LOGITS = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))


def entropy(p: torch.Tensor) -> float:
    return float(-(p * p.clamp_min(1e-30).log()).sum())


def test_temperature_one_is_the_softmax_and_lower_is_sharper():
    p1 = next_token_distribution(LOGITS, SamplingOptions(temperature=1.0))
    torch.testing.assert_close(p1, torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    cold = next_token_distribution(LOGITS, SamplingOptions(temperature=0.5))
    hot = next_token_distribution(LOGITS, SamplingOptions(temperature=2.0))
    # p^(1/T) renormalised
    expected = torch.tensor([0.5, 0.25, 0.15, 0.1]) ** 2
    torch.testing.assert_close(cold[0], expected / expected.sum())
    assert entropy(cold) < entropy(p1) < entropy(hot)


def test_top_k_keeps_the_k_most_probable():
    p = next_token_distribution(LOGITS, SamplingOptions(top_k=2))
    torch.testing.assert_close(p, torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]))
    assert torch.isinf(filter_logits(LOGITS, top_k=1)[0, 1:]).all()


@pytest.mark.parametrize("top_p,kept", [(0.5, 1), (0.6, 2), (0.75, 2), (0.8, 3), (0.9, 3), (0.95, 4),
                                        (1.0, 4)])
def test_top_p_keeps_the_smallest_set_reaching_p(top_p, kept):
    p = next_token_distribution(LOGITS, SamplingOptions(top_p=top_p))[0]
    assert int((p > 0).sum()) == kept
    base = torch.tensor([0.5, 0.25, 0.15, 0.1])[:kept]
    torch.testing.assert_close(p[:kept], base / base.sum())


def test_top_p_works_on_unsorted_rows():
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3], [0.3, 0.1, 0.6]]))
    p = next_token_distribution(logits, SamplingOptions(top_p=0.7))
    assert p[0].nonzero().flatten().tolist() == [1, 2]
    assert p[1].nonzero().flatten().tolist() == [0, 2]


def test_greedy_is_argmax():
    assert sample_next(LOGITS, SamplingOptions(greedy=True)).tolist() == [0]


def test_sampling_follows_the_distribution_and_the_seed():
    generator = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_next(LOGITS, SamplingOptions(), generator) for _ in range(4000)])
    frequencies = torch.bincount(draws.flatten(), minlength=4).double() / 4000
    assert torch.allclose(frequencies, torch.tensor([0.5, 0.25, 0.15, 0.1], dtype=torch.float64), atol=0.03)


@pytest.mark.parametrize("settings,words", [
    (SamplingOptions(temperature=0.0), "temperature"), (SamplingOptions(temperature=-1.0), "temperature"),
    (SamplingOptions(top_p=0.0), "top-p"), (SamplingOptions(top_p=1.5), "top-p"),
    (SamplingOptions(top_k=-1), "top-k"), (SamplingOptions(temperature=math.nan), "temperature"),
])
def test_bad_settings_are_one_line_user_errors(settings, words):
    with pytest.raises(UserError, match=words):
        settings.check()


def test_generate_is_reproducible_with_a_seed_and_uses_the_cache():
    model = tiny_model("mla", dtype=torch.float32)
    settings = SamplingOptions(temperature=1.5, seed=7)
    first = generate(model, [3, 5, 6], 12, settings)
    assert first == generate(model, [3, 5, 6], 12, settings)
    assert first != generate(model, [3, 5, 6], 12, SamplingOptions(temperature=1.5, seed=8))
    # greedy decoding with the cache equals argmax over full recomputation, step by step
    greedy = generate(model, [3, 5, 6], 8, SamplingOptions(greedy=True))
    ids = [3, 5, 6]
    for _ in range(8):
        ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    assert greedy == ids[3:]


def test_generate_stops_at_the_context_and_rejects_long_or_empty_prompts():
    model = tiny_model(dtype=torch.float32)  # max_len 64
    assert len(generate(model, [3] * 60, 100, SamplingOptions(seed=0))) == 4
    with pytest.raises(UserError, match="context"):
        generate(model, [3] * 64, 5, SamplingOptions())
    with pytest.raises(UserError, match="empty"):
        generate(model, [], 5, SamplingOptions())
