"""GQA/MQA against MHA with repeated key/value weights; cached decoding against full recomputation for
every variant; cache bytes per token from the real tensors against DeepSeek-V2's formulas."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from lm_helpers import tiny_model

from clearformer.config import ModelConfig, attention_variant, preset, variant_overrides
from clearformer.model.attention import MultiHeadAttention, causal_mask, padding_mask
from clearformer.model.cache import kv_cache_bytes_per_token, measured_bytes_per_token


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_grouped_and_multi_query_equal_mha_with_repeated_kv_weights(kv_heads):
    torch.manual_seed(0)
    config = ModelConfig(d_model=16, n_heads=4, positional="rope", max_len=16)
    grouped = MultiHeadAttention(dataclasses.replace(config, n_kv_heads=kv_heads)).double().eval()
    full = MultiHeadAttention(config).double().eval()
    group = 4 // kv_heads
    with torch.no_grad():
        full.w_q.load_state_dict(grouped.w_q.state_dict())
        full.w_o.load_state_dict(grouped.w_o.state_dict())
        for name in ("w_k", "w_v"):
            source, target = getattr(grouped, name), getattr(full, name)
            # kv head j serves query heads j*group .. j*group+group-1: repeat its rows for each
            repeated = source.weight.view(kv_heads, 4, 16).repeat_interleave(group, 0)
            target.weight.copy_(repeated.reshape(16, 16))
            target.bias.copy_(source.bias.view(kv_heads, 4).repeat_interleave(group, 0).reshape(16))
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    padded = padding_mask(torch.tensor([[5, 5, 5, 5, 0, 0], [5, 5, 5, 5, 5, 5]]), 0)  # (2, 1, 1, 6)
    for mask in (causal_mask(6), padded & causal_mask(6), padded, None):
        torch.testing.assert_close(grouped(x, mask=mask), full(x, mask=mask))
    grouped.explicit = full.explicit = True  # and the explicit (recorded) path agrees too
    torch.testing.assert_close(grouped(x, mask=causal_mask(6)), full(x, mask=causal_mask(6)))


def test_variant_names():
    assert [attention_variant(tiny_model(v).config) for v in ("mha", "gqa", "mqa", "mla")] == \
        ["mha", "gqa", "mqa", "mla"]


def decode_step_by_step(model, ids, prefix: int):
    cache = model.new_cache()
    logits = [model(ids[:, :prefix], cache, 0)]
    for t in range(prefix, ids.shape[1]):
        logits.append(model(ids[:, t:t + 1], cache, t))
    return torch.cat(logits, 1), cache


@pytest.mark.parametrize("variant", ["mha", "gqa", "mqa", "mla"])
@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "learned"])
def test_cached_incremental_decoding_equals_full_recomputation(variant, positional):
    model = tiny_model(variant, positional)
    ids = torch.randint(4, 40, (2, 11))
    full = model(ids)
    for absorb in ([None, False] if variant == "mla" else [None]):
        model.set_mla_path(absorb)
        incremental, _ = decode_step_by_step(model, ids, prefix=4)
        torch.testing.assert_close(incremental, full, atol=1e-10, rtol=1e-10)


def test_lm_is_causal():
    model = tiny_model("mla")
    ids = torch.randint(4, 40, (1, 8))
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 1 - 4) % 36 + 4
    torch.testing.assert_close(model(ids)[:, :5], model(changed)[:, :5])
    assert not torch.allclose(model(ids)[:, 5:], model(changed)[:, 5:])


@pytest.mark.parametrize("variant,per_layer", [("mha", lambda c: 2 * c.n_heads * c.head_dim),
                                               ("gqa", lambda c: 2 * c.kv_heads * c.head_dim),
                                               ("mqa", lambda c: 2 * c.head_dim),
                                               ("mla", lambda c: c.mla.kv_lora_rank + c.mla.qk_rope_head_dim)])
def test_cache_bytes_per_token_from_real_tensors_equal_the_formulas(variant, per_layer):
    model = tiny_model(variant, dtype=torch.float32)
    batch, length = 3, 9
    _, cache = decode_step_by_step(model, torch.randint(4, 40, (batch, length)), prefix=2)
    measured = measured_bytes_per_token(cache, batch, length)
    expected = per_layer(model.config) * 4
    assert measured == [expected] * model.config.n_decoder_layers
    info = kv_cache_bytes_per_token(model.config, dtype_bytes=4)
    assert info["bytes_per_layer"] == expected
    assert info["bytes_total"] == expected * model.config.n_decoder_layers


def test_paper_proportions_mla_holds_4_5_heads_against_mhas_16():
    """d_model=512, 8 heads (d_h=64), d_c = 4 d_h, d_h^R = d_h / 2: MLA caches 4.5 d_h, MHA 16 d_h (28%)."""
    mha = preset("lm-base", tgt_vocab_size=100)
    mla = preset("lm-base", tgt_vocab_size=100, **variant_overrides("mla", 512, 8))
    d_h = 64
    assert kv_cache_bytes_per_token(mha, 1)["elements_per_layer"] == 16 * d_h
    assert kv_cache_bytes_per_token(mla, 1)["elements_per_layer"] == 4.5 * d_h
    assert kv_cache_bytes_per_token(mla)["fraction_of_mha"] == pytest.approx(0.28125)
