"""One config per concern: the architecture-only ModelConfig with MLA's sizes in their own section, the
tokenizer's facts (source_eos, length_ratio) in tokenizer.json, and the one conversion (config_compat.py)
that reads config.json files of the release before."""

from __future__ import annotations

import dataclasses
import json

import pytest

from clearformer.config import ConfigError, MLAConfig, ModelConfig, preset, variant_overrides
from clearformer.errors import UserError
from clearformer.model.build import build_model
from clearformer.model.latent import MultiHeadLatentAttention
from clearformer.store.checkpoint import load_model, save_model
from clearformer.store.compat import read_config_file, upgrade_config_dict, upgrade_train_options
from clearformer.tokenize import SPECIALS, WordTokenizer, encode_source, load_tokenizer
from clearformer.train.options import TrainOptions

# config.json as the release before wrote it (tests/data/runs_v2 holds whole run folders of it)
V2_FLAT = {"src_vocab_size": 12, "tgt_vocab_size": 12, "d_model": 16, "n_heads": 2, "n_kv_heads": None,
           "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 32, "dropout": 0.0, "max_len": 32,
           "positional": "sinusoidal", "norm_first": False, "scale_embedding": True, "tie_embeddings": "all",
           "bias": True, "activation": "relu", "layer_norm_eps": 1e-05, "pad_id": 0, "attention": "mha",
           "kv_lora_rank": 0, "q_lora_rank": 0, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0, "v_head_dim": 0,
           "rope_base": 10000.0, "source_eos": True, "scale_attention": True, "architecture": "transformer",
           "length_ratio": 1.25, "extra": {}}


def test_the_config_holds_the_architecture_only():
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    assert not names & {"source_eos", "length_ratio", "extra", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
                        "qk_rope_head_dim", "v_head_dim"}
    config = preset("lm-tiny", tgt_vocab_size=20, **variant_overrides("mla", 64, 4))
    assert config.mla == MLAConfig(kv_lora_rank=64, qk_nope_head_dim=16, v_head_dim=16, qk_rope_head_dim=8)
    again = ModelConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and isinstance(again.mla, MLAConfig)
    assert preset("toy-translate").to_dict()["mla"] is None


def test_a_flat_config_of_the_release_before_upgrades_in_one_function():
    current, facts = upgrade_config_dict(V2_FLAT)
    assert facts == {"source_eos": True, "length_ratio": 1.25}
    assert ModelConfig.from_dict(current) == ModelConfig(**{k: v for k, v in current.items()})
    assert not set(current) & {"source_eos", "length_ratio", "extra", "kv_lora_rank", "v_head_dim"}
    mla = {**V2_FLAT, "positional": "rope", "attention": "mla", "kv_lora_rank": 8, "qk_nope_head_dim": 8,
           "qk_rope_head_dim": 4, "v_head_dim": 8, "tgt_vocab_size": 12}
    current, _ = upgrade_config_dict(mla)
    assert ModelConfig.from_dict(current).mla == MLAConfig(kv_lora_rank=8, qk_nope_head_dim=8, v_head_dim=8,
                                                           qk_rope_head_dim=4, q_lora_rank=0)
    older = {k: v for k, v in V2_FLAT.items() if k not in ("source_eos", "length_ratio")}
    assert upgrade_config_dict(older)[1] == {"source_eos": False, "length_ratio": 0.0}  # trained without it
    this_release = preset("toy-translate").to_dict()
    assert upgrade_config_dict(this_release) == (this_release, {})


@pytest.mark.parametrize("change,words", [({"source_eos": "yes"}, "source_eos"), ({"length_ratio": -1}, "length_ratio"),
                                          ({"kv_lora_rank": "8"}, "kv_lora_rank"), ({"bogus": 1}, "bogus")])
def test_a_damaged_old_config_is_a_one_line_error(tmp_path, change, words):
    path = tmp_path / "config.json"
    data = {**V2_FLAT, **change}
    if "kv_lora_rank" in change:
        data.update(attention="mla", positional="rope")
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=words) as error:
        read_config_file(path)
    assert "\n" not in str(error.value)


def test_an_old_run_folder_hands_its_facts_to_the_tokenizer_and_saves_them_there(tmp_path):
    tokenizer = WordTokenizer(list(SPECIALS) + ["I", "love", "you", "Je", "t'aime"])
    config = ModelConfig.from_dict(upgrade_config_dict({**V2_FLAT, "src_vocab_size": len(tokenizer),
                                                        "tgt_vocab_size": len(tokenizer)})[0])
    old = save_model(tmp_path / "old", build_model(config), tokenizer)
    (old / "config.json").write_text(json.dumps({**V2_FLAT, "src_vocab_size": len(tokenizer),
                                                 "tgt_vocab_size": len(tokenizer)}), encoding="utf-8")
    v2_tokenizer = {"kind": "words", "tokens": tokenizer.itos, "specials": tokenizer.specials}  # no facts yet
    (old / "tokenizer.json").write_text(json.dumps(v2_tokenizer), encoding="utf-8")
    model, loaded, _ = load_model(old)
    assert loaded.source_eos is True and loaded.length_ratio == 1.25
    assert encode_source(loaded, "I love you") == loaded.encode("I love you") + [loaded.eos_id]
    new = save_model(tmp_path / "new", model, loaded)
    assert set(json.loads((new / "config.json").read_text(encoding="utf-8"))) == {
        f.name for f in dataclasses.fields(ModelConfig)}
    again = load_tokenizer(new)
    assert (again.source_eos, again.length_ratio) == (True, 1.25)


def test_tokenizer_facts_are_checked_on_loading(tmp_path):
    tokenizer = WordTokenizer(list(SPECIALS) + ["a"])
    tokenizer.save(tmp_path)
    data = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert (data["source_eos"], data["length_ratio"]) == (False, 0.0)
    (tmp_path / "tokenizer.json").write_text(json.dumps({**data, "source_eos": 1}), encoding="utf-8")
    with pytest.raises(UserError, match="source_eos"):
        load_tokenizer(tmp_path)


def test_saved_train_options_move_source_eos_out_of_the_overrides():
    old = {"preset": "toy-translate", "overrides": {"source_eos": False, "d_model": 16}}
    options = TrainOptions.from_dict(upgrade_train_options(old))
    assert options.source_eos is False and options.overrides == {"d_model": 16}
    assert TrainOptions.from_dict(old).source_eos is False
    assert TrainOptions.from_dict({"preset": "toy-translate"}).source_eos is True


@pytest.mark.parametrize("fields,words", [
    (dict(architecture="rnn", d_model=8, n_heads=2), "n_heads does not apply to architecture='rnn'"),
    (dict(mla={"kv_lora_rank": 8, "qk_nope_head_dim": 4, "v_head_dim": 4}), "attention='mla'"),
    (dict(attention="mla", positional="rope"), "needs its sizes"),
    (dict(attention="mla", positional="rope", mla={"kv_lora_rank": "8"}), "mla.kv_lora_rank"),
    (dict(attention="mla", positional="rope", mla=[8]), "mla must be an object"),
])
def test_sections_that_do_not_fit_are_one_line_config_errors(fields, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as error:
        ModelConfig.from_dict({"d_model": 8, **fields})
    assert "\n" not in str(error.value)


def test_build_model_picks_the_model_and_the_attention_from_the_config():
    lm = build_model(preset("lm-tiny", tgt_vocab_size=20, d_model=16, n_heads=2, d_ff=32,
                            **variant_overrides("mla", 16, 2)))
    assert type(lm).__name__ == "LanguageModel"
    assert all(isinstance(layer.self_attention, MultiHeadLatentAttention) for layer in lm.decoder.layers)
    assert type(build_model(ModelConfig(d_model=8, architecture="rnn"))).__name__ == "RNNSeq2Seq"
    assert type(build_model(ModelConfig(d_model=8, n_heads=2))).__name__ == "Transformer"
