"""The SSRU (model/ssru.py) as the decoder's self-attention alternative, and Marian's other config choices:
its equations, its cache entry (one cell per row, reordered like any other), every search with and
without the cache, the recorder's names, the "halves" sinusoid and the zero start vector."""

from __future__ import annotations

import json
import math

import pytest
import torch
from gen_helpers import random_model
from test_model_cache import sources

from clearformer.config import ConfigError, ModelConfig
from clearformer.generate import DecodingOptions, beam_search, greedy_decode
from clearformer.model.cache import RecurrentCache
from clearformer.model.embedding import sinusoidal_table
from clearformer.record import trace

MARIAN = dict(autoregressive_layer="ssru", position_layout="halves", zero_start=True, tie_embeddings="all",
              layer_norm_eps=1e-6)


def test_ssru_follows_its_equations():
    model = random_model(**MARIAN)
    ssru = model.decoder.layers[0].recurrence
    assert model.decoder.layers[0].self_attention is None  # the SSRU is no attention: it has its own slot
    x = torch.randn(2, 5, model.config.d_model, dtype=torch.float64)
    with torch.no_grad():
        out = ssru(x)
        forget = torch.sigmoid(x @ ssru.w_f.weight.T + ssru.w_f.bias)
        candidate = x @ ssru.w.weight.T
    assert ssru.w.bias is None
    cell = torch.zeros(2, model.config.d_model, dtype=torch.float64)
    for t in range(5):
        cell = forget[:, t] * cell + (1 - forget[:, t]) * candidate[:, t]
        torch.testing.assert_close(out[:, t], torch.relu(cell))


@pytest.mark.parametrize("beams", [1, 3])
@torch.inference_mode()
def test_cached_steps_equal_the_uncached_decoder(beams):
    model = random_model(**MARIAN)
    src = sources().repeat_interleave(beams, 0)
    memory, src_mask = model.encode(src)
    tokens = torch.randint(4, 30, (src.shape[0], 6), generator=torch.Generator().manual_seed(2))
    full = model.project(model.decode(tokens, memory, src_mask))
    cache = model.new_cache()
    for position in range(tokens.shape[1]):
        step = model.project(model.decode(tokens[:, position:position + 1], memory if position == 0 else None,
                                          src_mask, cache, position))[:, 0]
        torch.testing.assert_close(step, full[:, position], atol=1e-9, rtol=1e-9)
    for layer in cache:  # one cell per row, whatever the length decoded
        assert isinstance(layer.self_attention, RecurrentCache)
        assert layer.self_attention.cell.shape == (src.shape[0], model.config.d_model)
    order = torch.tensor([2, 0, 0])
    cache.reorder(order)
    assert cache[0].self_attention.cell.shape[0] == 3


def test_reorder_moves_each_cell_with_its_row():
    cache = RecurrentCache(torch.arange(6.0).reshape(3, 2))
    cache.reorder(torch.tensor([2, 2, 0]))
    assert cache.cell.tolist() == [[4.0, 5.0], [4.0, 5.0], [0.0, 1.0]]
    assert cache.nbytes() == 6 * 4


@pytest.mark.parametrize("beam", [1, 4])
def test_searches_equal_with_and_without_cache_and_under_the_recorder(beam):
    model = random_model(**MARIAN)
    src = sources(seed=3)
    search = greedy_decode if beam == 1 else beam_search
    options = DecodingOptions(beam=beam, max_extra=8, alpha=0.6)
    cached = search(model, src, options).sequences()
    with trace.Recorder() as recorder:
        recorded = search(model, src, options).sequences()
    assert cached == recorded == search(model, src, options.but(use_cache=False)).sequences()
    for name in ("forget_gate", "cell", "candidate", "relu_cell"):
        assert recorder.find(f"decoder.layers.0.recurrence.{name}"), name
    assert recorder.find("tgt_embed.start")  # the zero start vector, at the first step
    assert not recorder.find("decoder.layers.0.self_attention.weights")  # no attention there
    assert not recorder.find("decoder.layers.0.recurrence.weights")


def test_halves_layout_is_the_paper_table_permuted_and_the_start_is_zero():
    paper, marian = sinusoidal_table(7, 8), sinusoidal_table(7, 8, layout="halves")
    torch.testing.assert_close(marian, torch.cat([paper[:, 0::2], paper[:, 1::2]], dim=1))
    assert marian[0].tolist() == [0.0] * 4 + [1.0] * 4
    model = random_model(**MARIAN)
    x = model.tgt_embed(torch.tensor([[5, 6]]))
    start = sinusoidal_table(1, model.config.d_model, layout="halves")[0].to(x.dtype)
    torch.testing.assert_close(x[0, 0], start)  # a zero vector at position 0, whatever the token's row


def test_tensor2tensor_timescales_run_from_1_to_exactly_1_over_10000():
    """Marian's C++ table: pair i turns at 10000^(-i/(d/2 - 1)), written here as its log increment; the paper's
    pair i at 10000^(-2i/d). Equal at position 0 and for the fastest pair, apart further on."""
    d, length = 16, 40
    marian = sinusoidal_table(length, d, layout="halves", timescales="tensor2tensor").double()
    increment = math.log(10000.0) / (d // 2 - 1)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * torch.exp(-increment * torch.arange(d // 2))[None]
    torch.testing.assert_close(marian, torch.cat([angle.sin(), angle.cos()], dim=1), atol=1e-6, rtol=0)
    torch.testing.assert_close(angle[1, -1], torch.tensor(1e-4, dtype=torch.float64))  # the slowest: exactly 1/10000
    paper = sinusoidal_table(length, d, layout="halves").double()
    torch.testing.assert_close(marian[0], paper[0])
    torch.testing.assert_close(marian[:, 0], paper[:, 0])
    assert (marian[20] - paper[20]).abs().max() > 0.01
    with pytest.raises(ConfigError, match="position_timescales"):
        ModelConfig(position_timescales="marian")
    model = random_model(**MARIAN, position_timescales="tensor2tensor")
    expected = sinusoidal_table(length, model.config.d_model, layout="halves", timescales="tensor2tensor",
                                dtype=torch.float64)  # the table is kept in float64, cast where it is added
    torch.testing.assert_close(model.tgt_embed.positions.encoding(length), expected, rtol=0, atol=0)


def test_configs_round_trip_and_old_configs_load(tmp_path):
    config = ModelConfig(d_model=8, n_heads=2, **MARIAN)
    config.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == config
    old = json.loads((tmp_path / "config.json").read_text())
    for name in ("position_layout", "position_timescales", "zero_start"):  # written before these fields existed
        old.pop(name)
    old["attention"] = "mha"
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = ModelConfig.load(tmp_path / "old.json")
    assert (loaded.position_layout, loaded.position_timescales, loaded.zero_start) == ("interleaved", "paper", False)
    with pytest.raises(ValueError, match="position_layout"):
        ModelConfig(position_layout="sideways")


def test_a_run_saved_with_the_ssru_in_the_attention_slot_still_loads(tmp_path):
    """Before the recurrence had its own name, a config said attention="ssru" and the SSRU's tensors were saved
    as decoder.layers.N.self_attention.{w,w_f}: such a run reads into the same model, translating the same."""
    from safetensors.torch import load_file, save_file

    from clearformer.load import load_model
    from clearformer.store.checkpoint import save_model
    from clearformer.tokenize import SPECIALS, WordTokenizer

    model = random_model(**MARIAN)
    tokenizer = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(model.config.tgt_vocab_size - len(SPECIALS))])
    save_model(tmp_path / "run", model, tokenizer, {"kind": "translation"})
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    config.pop("autoregressive_layer")
    config["attention"] = "ssru"
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    tensors = load_file(tmp_path / "run" / "model.safetensors")
    old = {name.replace(".recurrence.", ".self_attention."): value for name, value in tensors.items()}
    assert any(".self_attention.w_f." in name for name in old)
    save_file(old, tmp_path / "run" / "model.safetensors")
    loaded = load_model(tmp_path / "run")[0]
    assert loaded.config.autoregressive_layer == "ssru" and loaded.config.attention == "mha"
    for name, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name].double(), value)
    src = sources(seed=4)
    assert greedy_decode(loaded.double(), src).sequences() == greedy_decode(model, src).sequences()
    with pytest.raises(ConfigError, match="autoregressive_layer='ssru'"):
        ModelConfig(attention="ssru", autoregressive_layer="self_attention")
