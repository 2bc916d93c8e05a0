"""`clearformer lm import gpt2`: random GPT2LMHeadModels saved with save_pretrained compute the same logits
in clearformer (1e-5) and generate the same tokens greedily; their byte-level BPE reads text the same."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from interop_helpers import gpt2_depth, gpt2_folder  # noqa: E402
from tolerance import assert_float32_close  # noqa: E402

from clearformer.errors import UserError  # noqa: E402
from clearformer.generate.sampling import SamplingOptions, generate  # noqa: E402
from clearformer.interop.gpt2 import import_gpt2, load_gpt2  # noqa: E402

TEXTS = ["the cat sat on the mat", "We read a book today, in the park!", "é ü — 42"]
CONFIGS = [
    ("gpt2-default", {}),
    ("gelu-4-heads-3-layers", dict(activation_function="gelu", n_head=4, n_layer=3)),
    ("inner-40-eps-1e-6", dict(n_inner=40, layer_norm_epsilon=1e-6)),
    ("untied-relu", dict(tie_word_embeddings=False, activation_function="relu")),
]


@pytest.fixture(scope="module", params=CONFIGS, ids=[c[0] for c in CONFIGS])
def pair(request, tmp_path_factory):
    name, overrides = request.param
    folder, theirs = gpt2_folder(tmp_path_factory.mktemp(name), seed=len(name), **overrides)
    ours, tokenizer = load_gpt2(str(folder))
    return theirs, ours, tokenizer, folder


def test_tokenizer_reads_text_as_gpt2_tokenizer_does(pair):
    from transformers import GPT2Tokenizer

    _, _, tokenizer, folder = pair
    theirs = GPT2Tokenizer.from_pretrained(str(folder))
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert ids == theirs(text).input_ids
        assert tokenizer.decode(ids) == text == theirs.decode(ids)


def test_logits_equal_gpt2s(pair):
    theirs, ours, tokenizer, _ = pair
    ids = torch.tensor([[tokenizer.eos_id] + tokenizer.encode(TEXTS[1])])
    with torch.no_grad():
        expected = theirs(ids).logits
        got = ours(ids)
    assert expected.abs().max() > 1.0
    assert_float32_close(got, expected, gpt2_depth(theirs.config))  # tests/tolerance.py
    assert ours.config.tie_embeddings == ("decoder" if theirs.config.tie_word_embeddings else "none")


def test_greedy_generation_gives_gpt2s_tokens(pair):
    theirs, ours, tokenizer, _ = pair
    for text in TEXTS[:2]:
        prompt = [tokenizer.eos_id] + tokenizer.encode(text)
        with torch.no_grad():
            expected = theirs.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=15, min_new_tokens=15,
                                       pad_token_id=tokenizer.eos_id)[0, len(prompt):].tolist()
        got = generate(ours, prompt, 15, SamplingOptions(greedy=True))
        assert got == expected


def test_import_writes_a_run_that_loads(pair, tmp_path):
    from clearformer.load import load_model

    _, _, _, folder = pair
    import_gpt2(str(folder), tmp_path / "run")
    model, tokenizer, meta = load_model(tmp_path / "run")
    assert tokenizer.kind == "gpt2" and meta["format"] == "gpt2"
    ours, _ = load_gpt2(str(folder))  # built plain, as the run loads (the pair's has decoded: generate/layout.py)
    ids = torch.tensor([tokenizer.encode(TEXTS[0])])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), ours(ids), atol=0, rtol=0)


@pytest.mark.parametrize("field, value, says", [
    ("n_embd", 15, "'n_embd' = 15 is not divisible by n_head = 2"),
    ("scale_attn_by_inverse_layer_idx", True, "'scale_attn_by_inverse_layer_idx' = True is not supported"),
    ("vocab_size", 7, "7"),
    ("n_positions", 64, "'transformer.wpe.weight' has shape (48, 16), the config implies (64, 16)"),
    ("model_type", "llama", "not 'gpt2'"),
])
def test_bad_config_fields_are_named(tmp_path, field, value, says):
    import json

    folder, _ = gpt2_folder(tmp_path / "gpt2")
    config = json.loads((folder / "config.json").read_text())
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=re.escape(says)):
        load_gpt2(str(folder))
