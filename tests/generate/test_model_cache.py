"""The model's own cache (model/cache.py) drives every search: one-token steps through `model.decode`
with the cache give the uncached decoder's logits (to 1e-5) and tokens; the cross-attention keys and
values are computed once per sentence, repeated to its beams once, and left in place by a reorder
among them; finished sentences leave the cache; and a forward hook on every DecoderLayer fires at
every step of `translate`, greedy and beam."""

from __future__ import annotations

import pytest
import torch
from gen_helpers import SENTENCES, random_model
from tolerance import assert_float32_close, transformer_depth

from clearformer.config import variant_overrides
from clearformer.generate import DecodingOptions, beam_search, encode_source, greedy_decode, search_tokens, translate
from clearformer.model.attention import attention, explicit_attention
from clearformer.model.cache import DecoderCache, KVCache, LayerCache
from clearformer.record import trace
from clearformer.tokenize import WordTokenizer

VARIANTS = {
    "paper (post-norm, relu)": {},
    "pre-norm, gelu": {"norm_first": True, "activation": "gelu"},
    "no biases": {"bias": False},
    "pre-norm, no biases": {"norm_first": True, "bias": False},
    "mqa, rope": {"n_kv_heads": 1, "positional": "rope"},
    "gqa (4 heads, 2 kv heads)": {"n_heads": 4, "n_kv_heads": 2},
    "mla, rope": {"positional": "rope", **variant_overrides("mla", 16, 2)},
}


def sources(seed: int = 0, lengths=(5, 3, 7)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, 30, (length,), generator=generator)
    return src


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("beams", [1, 3])  # greedy; 3 rows per sentence
@torch.inference_mode()
def test_cached_steps_equal_the_uncached_decoder(variant, beams):
    model = random_model(dtype=torch.float32, **VARIANTS[variant])
    src = sources().repeat_interleave(beams, 0)
    memory, src_mask = model.encode(src)
    tokens = torch.randint(4, 30, (src.shape[0], 6), generator=torch.Generator().manual_seed(2))
    tokens[:, 0] = 2
    full = model.project(model.decode(tokens, memory, src_mask))  # the reference: every position at once
    cache = model.new_cache()
    for position in range(tokens.shape[1]):
        step = model.project(model.decode(tokens[:, position:position + 1], memory if position == 0 else None,
                                          src_mask, cache, position))[:, 0]
        assert_float32_close(step, full[:, position], transformer_depth(model.config))  # tests/tolerance.py
    kv_heads = model.decoder.layers[0].cross_attention.n_kv_heads
    for layer in cache:  # one row per decoded sequence, the source's keys once, the target's per position
        assert layer.cross_attention.k.shape == (src.shape[0], kv_heads, src.shape[1], model.config.head_dim)
        for tensor in layer.self_attention.tensors():  # MHA/GQA/MQA: k, v; MLA: latent, k_rope
            assert tensor.shape[0] == src.shape[0] and tensor.shape[-2] == tokens.shape[1]


def decodings(model, src, **options) -> list[list[list[int]]]:
    decoding = DecodingOptions(max_extra=6, **options)
    return [greedy_decode(model, src, decoding).sequences(),
            beam_search(model, src, decoding.but(beam=3, alpha=0.6)).sequences()]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_uncached_and_recorded_searches_choose_the_same_tokens(variant):
    model = random_model(**VARIANTS[variant])
    src = sources(seed=3)
    cached = decodings(model, src)
    with trace.Recorder() as recorder:
        recorded = decodings(model, src)
    assert recorder.find("output.logits")  # the model's own projection ran
    assert recorder.find("decoder.layers.0.cross_attention.weights")
    assert cached == recorded == decodings(model, src, use_cache=False)


def layer_calls(model) -> tuple[list, list]:
    """Hooks on every DecoderLayer: (calls as (layer index, rows, position)), (the hook handles)."""
    calls, handles = [], []
    for index, layer in enumerate(model.decoder.layers):
        def hook(module, args, index=index):
            calls.append((index, args[0].shape[0], args[5] if len(args) > 5 else 0, args[4]))
        handles.append(layer.register_forward_pre_hook(hook))
    return calls, handles


@pytest.mark.parametrize("beam", [1, 3])
def test_a_hook_on_every_decoder_layer_fires_at_every_step_of_translate(beam):
    tokenizer = WordTokenizer(["<pad>", "<unk>", "<bos>", "<eos>"] + sorted({w for s in SENTENCES for w in s.split()}))
    model = random_model(vocab=len(tokenizer), dtype=torch.float32)  # every id it can write is a word
    calls, handles = layer_calls(model)
    try:
        translation = translate(model, tokenizer, ["I love you"], DecodingOptions(beam=beam, max_extra=5))[0]
    finally:
        for handle in handles:
            handle.remove()
    positions = sorted({position for _, _, position, _ in calls})
    assert positions == list(range(len(positions)))
    if beam == 1:  # one step per generated token (<eos> included): as many as greedy_decode takes
        tokens = search_tokens(model, tokenizer)
        src = torch.tensor([encode_source(tokenizer, "I love you")])
        decoded = greedy_decode(model, src, DecodingOptions(max_extra=5), tokens)
        assert len(positions) == int(decoded.lengths[0]) and tokenizer.decode(decoded.sequences()[0]) == translation
    else:
        assert len(positions) >= 1
    for position in positions:  # every layer, once per step
        assert sorted(index for index, _, p, _ in calls if p == position) == list(range(len(model.decoder.layers)))
    assert all(cache is not None for *_, cache in calls)  # always the cached one-token step


def test_cross_keys_are_computed_once_and_follow_the_beams_only_when_sentences_change():
    model = random_model(dtype=torch.float32)
    src = sources(seed=5, lengths=(6, 4, 5))
    seen, projections = [], []

    def hook(module, args):
        cache = args[4]
        seen.append((args[0].shape[0], cache.cross_attention.k, cache.self_attention.k))
    handles = [model.decoder.layers[0].register_forward_pre_hook(hook),
               model.decoder.layers[0].cross_attention.w_k.register_forward_hook(
                   lambda module, args, out: projections.append(args[0].shape[0]))]
    try:
        decoded = beam_search(model, src, DecodingOptions(beam=4, max_new=5, min_length=5))
    finally:
        for handle in handles:
            handle.remove()
    assert projections == [3]  # W^K of the encoder output: once, one row per sentence
    assert [rows for rows, _, _ in seen] == [3] + [12] * 4  # step 0 once per sentence, then 4 beams each
    crosses = [cross for _, cross, _ in seen]
    assert all(cross is crosses[1] for cross in crosses[2:])  # beam reorders leave the source's keys alone
    assert all(self_k.shape[0] == rows for rows, _, self_k in seen[1:])
    uncached = beam_search(model, src, DecodingOptions(beam=4, max_new=5, min_length=5, use_cache=False))
    assert decoded.sequences() == uncached.sequences()


def test_reorder_moves_every_row_and_the_cross_rows_only_when_asked():
    def filled(rows: int) -> LayerCache:
        self_cache, cross = KVCache(), KVCache()
        self_cache.update(torch.arange(float(rows)).view(rows, 1, 1, 1), torch.zeros(rows, 1, 1, 1))
        cross.update(torch.arange(float(rows)).view(rows, 1, 1, 1), torch.zeros(rows, 1, 1, 1))
        return LayerCache(self_cache, cross)

    cache = DecoderCache([filled(6), filled(6)])
    cache.reorder(torch.tensor([1, 0, 2, 3, 5, 4]), source=False)  # within rows of one source
    assert cache[0].self_attention.k.flatten().tolist() == [1, 0, 2, 3, 5, 4]
    assert cache[0].cross_attention.k.flatten().tolist() == [0, 1, 2, 3, 4, 5]
    cache.reorder(torch.tensor([4, 5]))  # the last source's rows stay
    assert cache[1].self_attention.k.flatten().tolist() == [5, 4]
    assert cache[1].cross_attention.k.flatten().tolist() == [4, 5]
    assert cache[1].self_attention.update(torch.ones(2, 1, 1, 1), torch.ones(2, 1, 1, 1))[0].shape == (2, 1, 2, 1)


@pytest.mark.parametrize("recording", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])  # MHA, GQA, MQA
def test_explicit_and_fused_attention_agree_with_shared_key_heads(recording, kv_heads):
    """Query heads sharing a key/value head (GQA/MQA) = every head reading its own copy, on both paths;
    the recorder sees the paper's (batch, heads, q, k) shapes."""
    torch.manual_seed(0)
    batch, heads, q_len, t, d = 3, 4, 5, 7, 8
    q = torch.randn(batch, heads, q_len, d)
    k, v = torch.randn(batch, kv_heads, t, d), torch.randn(batch, kv_heads, t, d)
    mask = torch.ones(batch, 1, q_len, t, dtype=torch.bool)
    mask[1, ..., 4:] = False

    def repeated(x):
        return x.repeat_interleave(heads // kv_heads, 1)

    expected = torch.nn.functional.scaled_dot_product_attention(q, repeated(k), repeated(v), attn_mask=mask)
    if recording:
        with trace.Recorder() as recorder:
            out = attention(q, k, v, mask, 0.0, d ** -0.5, recorder_prefix="test")
        assert recorder.find("test.weights")[0].value.shape == (batch, heads, q_len, t)
    else:
        out = attention(q, k, v, mask, 0.0, d ** -0.5, recorder_prefix="test")
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(explicit_attention(q, k, v, mask, 0.0, d ** -0.5)[0], expected, atol=1e-6, rtol=1e-5)
