"""Multi-Head Latent Attention: the paper's equations, naive == absorbed, cache, records, bad configs."""

from __future__ import annotations

import math

import pytest
import torch

from clearformer.config import ConfigError, MLAConfig, ModelConfig
from clearformer.model.attention import causal_mask
from clearformer.model.cache import LatentCache
from clearformer.model.latent import MultiHeadLatentAttention
from clearformer.record.trace import Recorder, name_modules


def make_mla(q_lora_rank: int = 0, rope: int = 4, dtype=torch.float64, bias: bool = True):
    torch.manual_seed(1)
    sizes = MLAConfig(kv_lora_rank=10, qk_nope_head_dim=6, v_head_dim=5, qk_rope_head_dim=rope,
                      q_lora_rank=q_lora_rank)
    mla = MultiHeadLatentAttention(ModelConfig(d_model=24, n_heads=3, bias=bias, max_len=16, attention="mla",
                                               positional="rope" if rope else "none", mla=sizes))
    for parameter in mla.parameters():  # non-trivial norm gains too
        torch.nn.init.normal_(parameter, std=0.3)
    name_modules(mla, "mla")
    return mla.to(dtype).eval()


def rms(x, gain, eps=1e-6):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain


def rotate(x, position):
    """RoPE on the last axis as complex multiplication (independent of clearformer.model.rope)."""
    dim = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.arange(position, position + x.shape[-2], dtype=torch.float64)[:, None] * theta
    z = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous()) * torch.polar(
        torch.ones_like(angles), angles)
    return torch.view_as_real(z).flatten(-2).to(x.dtype)


def reference_mla(m: MultiHeadLatentAttention, h: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V2 eqs. (9)-(19), one head at a time, for causal self-attention over h (batch, seq, d)."""
    d_c, d_r, d_n, d_v = m.kv_lora_rank, m.rope_dim, m.nope_dim, m.v_dim
    seq = h.shape[1]
    w_dkv_kr = m.wkv_a.weight
    c_kv = rms(h @ w_dkv_kr[:d_c].T + m.wkv_a.bias[:d_c], m.kv_norm.weight)          # (9)
    k_r = rotate(h @ w_dkv_kr[d_c:].T + m.wkv_a.bias[d_c:], 0) if d_r else None     # (14)
    if m.q_lora_rank:
        c_q = rms(h @ m.wq_a.weight.T + m.wq_a.bias, m.q_norm.weight)               # (12)
        q_all = c_q @ m.wq_b.weight.T + m.wq_b.bias                                  # (13), (15)
    else:
        q_all = h @ m.wq.weight.T + m.wq.bias
    w_ukv = m.wkv_b.weight.view(m.n_heads, d_n + d_v, d_c)
    allowed = torch.ones(seq, seq, dtype=torch.bool).tril()
    heads = []
    for i in range(m.n_heads):
        q_i = q_all[..., i * (d_n + d_r):(i + 1) * (d_n + d_r)]
        q_c, q_r = q_i[..., :d_n], q_i[..., d_n:]
        k_c = c_kv @ w_ukv[i, :d_n].T                                                 # (10)
        v_c = c_kv @ w_ukv[i, d_n:].T                                                 # (11)
        if d_r:
            q = torch.cat([q_c, rotate(q_r, 0)], -1)                                  # (16)
            k = torch.cat([k_c, k_r], -1)                                             # (17)
        else:
            q, k = q_c, k_c
        scores = (q @ k.transpose(-1, -2) / math.sqrt(d_n + d_r)).masked_fill(~allowed, float("-inf"))
        heads.append(torch.softmax(scores, -1) @ v_c)                                 # (18)
    return torch.cat(heads, -1) @ m.wo.weight.T + m.wo.bias                           # (19)


@pytest.mark.parametrize("q_lora_rank,rope", [(0, 4), (8, 4), (0, 0), (8, 0)])
def test_naive_matches_the_papers_equations(q_lora_rank, rope):
    mla = make_mla(q_lora_rank, rope)
    mla.absorb = False
    x = torch.randn(2, 7, 24, dtype=torch.float64)
    torch.testing.assert_close(mla(x, mask=causal_mask(7)), reference_mla(mla, x), atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("q_lora_rank,rope", [(0, 4), (8, 4), (0, 0)])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_absorbed_equals_naive(q_lora_rank, rope, dtype, tol):
    mla = make_mla(q_lora_rank, rope, dtype)
    x = torch.randn(2, 9, 24, dtype=dtype)
    mla.absorb = False
    naive = mla(x, mask=causal_mask(9))
    mla.absorb = True
    absorbed = mla(x, mask=causal_mask(9))
    torch.testing.assert_close(absorbed, naive, atol=tol, rtol=tol)


@pytest.mark.parametrize("absorb", [False, True])
def test_cached_decoding_equals_full_and_caches_only_the_latent(absorb):
    mla = make_mla(q_lora_rank=8)
    mla.absorb = absorb
    x = torch.randn(2, 8, 24, dtype=torch.float64)
    full = mla(x, mask=causal_mask(8))
    cache = mla.new_cache()
    steps = [mla(x[:, :3], mask=causal_mask(3, 3), cache=cache, position=0)]
    for t in range(3, 8):
        steps.append(mla(x[:, t:t + 1], mask=causal_mask(1, t + 1), cache=cache, position=t))
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-10, rtol=1e-10)
    assert isinstance(cache, LatentCache)  # the latent and the rotary key, nothing per head
    assert cache.latent.shape == (2, 8, 10) and cache.k_rope.shape == (2, 8, 4)


def test_records_latent_up_projections_rope_scores_and_weights():
    mla = make_mla()
    x = torch.randn(1, 5, 24, dtype=torch.float64)
    with Recorder() as naive_run:
        mla(x, mask=causal_mask(5))  # no cache: the naive path
    for name in ("latent", "K_rope", "Q_rope", "K_nope", "V", "Q", "K", "scores", "scaled", "mask", "weights",
                 "head_outputs", "output"):
        assert f"mla.{name}" in naive_run.names(), name
    assert naive_run.get("mla.latent").shape == (1, 5, 10)
    assert naive_run.get("mla.K_nope").shape == (1, 3, 5, 6) and naive_run.get("mla.V").shape == (1, 3, 5, 5)
    shared_rope = naive_run.get("mla.K_rope")[:, None].expand(1, 3, 5, 4)
    torch.testing.assert_close(naive_run.get("mla.K")[..., 6:], shared_rope)
    mla.absorb = True
    with Recorder() as absorbed_run:
        mla(x, mask=causal_mask(5))
    assert absorbed_run.get("mla.Q_absorbed").shape == (1, 3, 5, 10)
    # the same scores and weights, computed against the latent instead of up-projected keys
    torch.testing.assert_close(absorbed_run.get("mla.absorbed.scores"), naive_run.get("mla.scores"))
    torch.testing.assert_close(absorbed_run.get("mla.absorbed.weights"), naive_run.get("mla.weights"))
    assert torch.equal(absorbed_run.get("mla.absorbed.mask"), naive_run.get("mla.mask"))
    weights = naive_run.get("mla.weights")[0, 0]
    assert torch.all(weights.triu(1) == 0)


def test_mla_in_the_translation_decoder_caches_and_matches_full_decoding():
    from clearformer.model.transformer import Transformer

    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=4, d_ff=32,
                         n_encoder_layers=1, n_decoder_layers=2, positional="rope", attention="mla",
                         mla=MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4))
    model = Transformer(config).double().eval()
    src, tgt = torch.randint(4, 30, (2, 6)), torch.randint(4, 30, (2, 5))
    memory, src_mask = model.encode(src)
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, t:t + 1], memory, src_mask, cache, position=t) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-10, rtol=1e-10)
    assert isinstance(cache[0].self_attention, LatentCache)


@pytest.mark.parametrize("fields,words", [
    (dict(kv_lora_rank=0), "kv_lora_rank"),
    (dict(qk_rope_head_dim=3), "qk_rope_head_dim"),
    (dict(qk_rope_head_dim=0), "qk_rope_head_dim > 0"),
    (dict(positional="sinusoidal"), "positional='rope'"),
    (dict(v_head_dim=0), "v_head_dim"),
    (dict(q_lora_rank=-1), "q_lora_rank"),
    (dict(n_kv_heads=2), "n_kv_heads"),
])
def test_mla_dimensions_that_do_not_fit_are_config_errors(fields, words):
    good = dict(d_model=16, n_heads=4, positional="rope", attention="mla")
    sizes = dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
    mla_fields = {name: value for name, value in fields.items() if name in sizes or name == "q_lora_rank"}
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as error:
        ModelConfig(**{**good, **{k: v for k, v in fields.items() if k not in mla_fields}},
                    mla=MLAConfig(**{**sizes, **mla_fields}))
    assert "\n" not in str(error.value)
