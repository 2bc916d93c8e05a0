"""Word tokenizer round trips, config presets and parameter counts."""

from __future__ import annotations

import json

import pytest

from clearformer.config import ConfigError, ModelConfig, preset
from clearformer.model.transformer import Transformer
from clearformer.tokenize import WordTokenizer, detokenize, load_tokenizer, split_words


def test_split_keeps_elisions_and_punctuation_apart():
    assert split_words("Je t'aime.") == ["Je", "t'", "aime", "."]
    assert split_words("J'aime l'IA !") == ["J'", "aime", "l'", "IA", "!"]
    assert split_words("I don't know, really?") == ["I", "don't", "know", ",", "really", "?"]
    assert detokenize(["Je", "t'", "aime", "."]) == "Je t'aime."


def test_round_trip_and_unknown_words(tmp_path):
    tok = WordTokenizer.build(["I love you", "Je t'aime", "hello world"])
    assert tok.itos[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"]
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    for sentence in ["I love you", "Je t'aime", "hello world"]:
        assert tok.decode(tok.encode(sentence)) == sentence
    ids = tok.encode("I love cheese")
    assert ids[-1] == tok.unk_id and tok.unknown_words("I love cheese") == ["cheese"]
    assert tok.decode([tok.bos_id] + tok.encode("I love you") + [tok.eos_id, tok.pad_id]) == "I love you"
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again.itos == tok.itos


def test_presets_have_the_papers_sizes_and_parameter_counts():
    base = Transformer(preset("base", src_vocab_size=37000, tgt_vocab_size=37000, tie_embeddings="all"))
    assert 60e6 < base.num_parameters() < 66e6  # the paper: 65M
    big = preset("big", src_vocab_size=37000, tgt_vocab_size=37000, tie_embeddings="all")
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout) == (1024, 16, 4096, 0.3)
    small = preset("small")
    assert (small.d_model, small.n_heads, small.n_encoder_layers, small.d_ff) == (256, 4, 3, 1024)
    assert preset("toy").d_model == 4 and preset("toy").scale_embedding is False


def test_big_parameter_count_is_near_213m():
    import torch

    config = preset("big", src_vocab_size=37000, tgt_vocab_size=37000, tie_embeddings="all")
    with torch.device("meta"):
        assert 205e6 < Transformer(config).num_parameters() < 220e6  # the paper: 213M


def test_config_json_round_trip_and_validation(tmp_path):
    config = preset("small", src_vocab_size=100, tgt_vocab_size=100)
    config.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == config
    assert json.loads((tmp_path / "config.json").read_text())["d_model"] == 256
    with pytest.raises(ConfigError, match="not divisible"):
        ModelConfig(d_model=10, n_heads=3)
    with pytest.raises(ConfigError, match="unknown config field"):
        ModelConfig.from_dict({"d_model": 8, "bogus": 1})
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("huge")
