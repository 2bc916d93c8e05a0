"""DecoderLayer.decode_step (the cached one-token step without the general plumbing) equals `forward`."""

from __future__ import annotations

import pytest
import torch

from clearformer import trace
from clearformer.config import preset
from clearformer.generate import beam_search, greedy_decode
from clearformer.model.layers import DecoderLayer
from clearformer.model.transformer import Transformer

VARIANTS = {
    "paper (post-norm, relu)": {},
    "pre-norm, gelu": {"norm_first": True, "activation": "gelu"},
    "no biases": {"bias": False},
}


def small_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = preset("toy-translate", src_vocab_size=50, tgt_vocab_size=60, dropout=0.0, **overrides)
    return Transformer(config).eval()


def decode_states(model, src, rows_per_sentence: int, steps: int, plain: bool, monkeypatch) -> list[torch.Tensor]:
    """The decoder output of `steps` cached steps over the same random tokens, through the fast step
    (plain=True) or through `forward` only."""
    with monkeypatch.context() as patch, torch.inference_mode():
        if not plain:
            patch.setattr(DecoderLayer, "steps_plainly", lambda *args: False)
        memory, src_mask = model.encode(src)
        rows = src.shape[0] * rows_per_sentence
        cache = model.new_cache()
        generator = torch.Generator().manual_seed(1)
        states = []
        for position in range(steps):
            tokens = torch.randint(4, 60, (rows, 1), generator=generator)
            states.append(model.decode(tokens, memory, src_mask, cache, position=position))
    return states


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rows_per_sentence", [1, 3])  # greedy; beams sharing their sentence's memory row
def test_decode_step_equals_forward(variant, rows_per_sentence, monkeypatch):
    model = small_model(**VARIANTS[variant])
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])  # the second sentence is padded
    calls = []
    step = DecoderLayer.decode_step
    monkeypatch.setattr(DecoderLayer, "decode_step", lambda self, *a: calls.append(1) or step(self, *a))
    fast = decode_states(model, src, rows_per_sentence, 5, True, monkeypatch)
    assert len(calls) == 4 * len(model.decoder.layers)  # every step but the first (which caches the memory's keys)
    general = decode_states(model, src, rows_per_sentence, 5, False, monkeypatch)
    for a, b in zip(fast, general, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_recording_training_and_gradients_take_forward():
    model = small_model()
    layer = model.decoder.layers[0]
    x, cache = torch.randn(2, 1, model.config.d_model), {"cross": {"k": torch.zeros(1)}}
    with torch.inference_mode():
        assert layer.steps_plainly(x, None, cache)
        assert not layer.steps_plainly(x, torch.ones(1, 1, dtype=torch.bool), cache)  # a mask
        assert not layer.steps_plainly(torch.randn(2, 3, model.config.d_model), None, cache)  # several tokens
        assert not layer.steps_plainly(x, None, {})  # the memory's keys not cached yet
        with trace.Recorder():
            assert not layer.steps_plainly(x, None, cache)
        layer.self_attention.explicit = True
        assert not layer.steps_plainly(x, None, cache)
        layer.self_attention.explicit = False
        layer.train()
        assert not layer.steps_plainly(x, None, cache)
    layer.eval()
    assert not layer.steps_plainly(x, None, cache)  # gradients on


def test_translations_are_unchanged_by_the_fast_step(monkeypatch):
    model = small_model()
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 14, 0, 0, 0]])
    fast = greedy_decode(model, src, max_extra=8), beam_search(model, src, beam=3, max_extra=8)
    monkeypatch.setattr(DecoderLayer, "steps_plainly", lambda *args: False)
    general = greedy_decode(model, src, max_extra=8), beam_search(model, src, beam=3, max_extra=8)
    for a, b in zip(fast, general, strict=True):
        assert torch.equal(a.tokens, b.tokens)
        torch.testing.assert_close(a.scores, b.scores)
