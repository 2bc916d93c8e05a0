"""A config.json with a wrong JSON type in a field is a one-line ConfigError, not a TypeError (found by fuzzing)."""

import json

import pytest

from clearformer.config import ConfigError, ModelConfig, preset
from clearformer.errors import UserError
from clearformer.load import load_model
from clearformer.model.transformer import Transformer
from clearformer.store.checkpoint import save_model
from clearformer.tokenize import SPECIALS, WordTokenizer


@pytest.mark.parametrize("field, value", [("d_model", None), ("n_heads", "2"), ("dropout", [1]), ("max_len", True),
                                          ("positional", 3), ("n_kv_heads", 1.5), ("extra", [])])
def test_wrong_types_are_config_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        ModelConfig.from_dict({field: value})


def test_right_types_load():
    assert ModelConfig.from_dict({"d_model": 8, "n_heads": 2, "dropout": 0, "n_kv_heads": None}).dropout == 0


def test_a_checkpoint_with_a_null_width_is_a_user_error(tmp_path):
    tokenizer = WordTokenizer(list(SPECIALS) + ["I", "love", "you"])
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    directory = save_model(tmp_path / "ckpt", Transformer(config), tokenizer)
    data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    (directory / "config.json").write_text(json.dumps({**data, "d_model": None}), encoding="utf-8")
    with pytest.raises(UserError, match="d_model"):
        load_model(directory)
