"""The model's own cache (model/cache.py) drives every search: one-token steps through `model.decode`
with the cache give the uncached decoder's logits (to 1e-5) and tokens; the cross-attention keys and
values are computed once per sentence and shared by its beams; finished sentences leave the cache;
and a forward hook on every DecoderLayer fires at every step of `translate`, greedy and beam."""

from __future__ import annotations

import pytest
import torch
from gen_helpers import SENTENCES, random_model

from clearformer.generate import DecodingOptions, beam_search, encode_source, greedy_decode, search_tokens, translate
from clearformer.model.attention import shared_kv_attention
from clearformer.model.cache import DecoderCache
from clearformer.record import trace
from clearformer.tokenize import WordTokenizer

VARIANTS = {
    "paper (post-norm, relu)": {},
    "pre-norm, gelu": {"norm_first": True, "activation": "gelu"},
    "no biases": {"bias": False},
    "pre-norm, no biases": {"norm_first": True, "bias": False},
    "gqa, rope": {"n_kv_heads": 1, "positional": "rope"},
}


def sources(seed: int = 0, lengths=(5, 3, 7)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, 30, (length,), generator=generator)
    return src


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("beams", [1, 3])  # greedy; beams sharing their sentence's memory row
@torch.inference_mode()
def test_cached_steps_equal_the_uncached_decoder(variant, beams):
    model = random_model(dtype=torch.float32, **VARIANTS[variant])
    src = sources()
    memory, src_mask = model.encode(src)
    tokens = torch.randint(4, 30, (src.shape[0] * beams, 6), generator=torch.Generator().manual_seed(2))
    tokens[:, 0] = 2
    # The reference: every position at once, each hypothesis with its own copy of the memory.
    full = model.project(model.decode(tokens, memory.repeat_interleave(beams, 0), src_mask.repeat_interleave(beams, 0)))
    cache = model.new_cache()
    for position in range(tokens.shape[1]):
        step = model.project(model.decode(tokens[:, position:position + 1], memory if position == 0 else None,
                                          src_mask, cache, position))[:, 0]
        torch.testing.assert_close(step, full[:, position], atol=1e-5, rtol=1e-5)
    kv_heads = model.decoder.layers[0].cross_attention.n_kv_heads
    for layer in cache:  # one cross-attention row per sentence, one self-attention row per hypothesis
        assert layer["cross"]["memory_k"].shape == (src.shape[0], kv_heads, src.shape[1], model.config.head_dim)
        assert layer["self"]["k"].shape[:3] == (src.shape[0] * beams, kv_heads, tokens.shape[1])


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
    assert recorder.find("output.probabilities")  # the model's own projection ran
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
    model = random_model(vocab=40, dtype=torch.float32)
    tokenizer = WordTokenizer(["<pad>", "<unk>", "<bos>", "<eos>"] + sorted({w for s in SENTENCES for w in s.split()}))
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


def test_beams_share_one_cross_attention_row_per_sentence():
    model = random_model(dtype=torch.float32)
    src = sources(seed=5, lengths=(6, 4))
    seen = []

    def hook(module, args):
        cache = args[4]
        seen.append((args[0].shape[0], cache["cross"].get("memory_k"), cache["self"].get("k")))
    handle = model.decoder.layers[0].register_forward_pre_hook(hook)
    try:
        beam_search(model, src, DecodingOptions(beam=4, max_new=5, min_length=5))
    finally:
        handle.remove()
    rows_by_step = [rows for rows, _, _ in seen]
    assert rows_by_step[0] == 2 and all(rows == 8 for rows in rows_by_step[1:])  # step 0 once per sentence
    for rows, memory_k, self_k in seen[1:]:
        assert memory_k.shape[0] == 2  # one row per sentence, read by its 4 beams
        assert self_k.shape[0] == rows


def test_finished_sentences_leave_the_cache():
    cache = DecoderCache(2)
    for layer in cache:
        layer["self"]["k"] = torch.arange(6.0).view(6, 1, 1, 1)
        layer["cross"]["memory_k"] = torch.arange(3.0).view(3, 1, 1, 1)
    cache.select(torch.tensor([1, 0, 5, 4]))  # a beam reorder: the cross rows stay
    assert cache[0]["cross"]["memory_k"].flatten().tolist() == [0, 1, 2]
    cache.select(torch.tensor([2, 3]), sentences=torch.tensor([2]))  # sentences 0 and 1 finished
    assert cache[1]["self"]["k"].flatten().tolist() == [5, 4]
    assert cache[1]["cross"]["memory_k"].flatten().tolist() == [2]


@pytest.mark.parametrize("recording", [False, True])
def test_shared_keys_equal_attention_over_repeated_keys(recording):
    """Beams reading their sentence's one memory row, query heads sharing a key head (GQA) =
    every row and head reading its own copy; the recorder sees the paper's (batch, heads, q, k) shapes."""
    torch.manual_seed(0)
    sentences, beams, kv_heads, group, t, d = 3, 4, 2, 2, 7, 8
    q = torch.randn(sentences * beams, kv_heads * group, 1, d)
    k, v = torch.randn(sentences, kv_heads, t, d), torch.randn(sentences, kv_heads, t, d)
    mask = torch.ones(sentences, 1, 1, t, dtype=torch.bool)
    mask[1, ..., 4:] = False

    def repeated(x):
        return x.repeat_interleave(beams, 0).repeat_interleave(group, 1)

    expected = torch.nn.functional.scaled_dot_product_attention(
        q, repeated(k), repeated(v), attn_mask=mask.repeat_interleave(beams, 0))
    if recording:
        with trace.Recorder() as recorder:
            out = shared_kv_attention(q, k, v, mask, 0.0, d ** -0.5, recorder_prefix="test")
        assert recorder.find("test.weights")[0].value.shape == (sentences * beams, kv_heads * group, 1, t)
    else:
        out = shared_kv_attention(q, k, v, mask, 0.0, d ** -0.5, recorder_prefix="test")
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
