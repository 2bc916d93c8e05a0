"""Sentences (any Unicode, controls, lone surrogates, huge), model configs and HTTP bodies."""

from __future__ import annotations

import copy
import json
import sys

import pytest
import torch
from fastapi.testclient import TestClient
from fuzz_helpers import one_line
from hypothesis import given
from hypothesis import strategies as st

from clearformer.config import FORMAT_VERSION, ModelConfig
from clearformer.errors import UserError
from clearformer.generate.source import check_source
from clearformer.limits import MAX_BODY_BYTES, MAX_SENTENCE_CHARS
from clearformer.serve.explainer import RequestError, parse_request
from clearformer.tokenize import SPECIALS, WordTokenizer, encode_source

WORDS = "I love you the cat Je t' aime le chat".split()
MAX_LEN = 12
# Every code point, surrogates and controls included; words the model knows; and sentences past the limit.
any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
sentences = st.one_of(st.text(any_char, max_size=40),
                      st.lists(st.sampled_from([*WORDS, " ", "\t", "\x00", "\u200b", "\udcff", "zebra"]),
                               max_size=20).map(" ".join),
                      st.integers(MAX_SENTENCE_CHARS - 2, MAX_SENTENCE_CHARS + 50000).map(lambda n: "love " * (n // 5)))


@pytest.fixture(scope="module")
def tokenizer():
    words = WordTokenizer(list(SPECIALS) + WORDS)
    words.source_eos = True  # as `clearformer train` saves it by default
    return words


@given(text=sentences)
def test_translate_input_checks(tokenizer, text, capsys):
    try:
        ids = check_source(tokenizer, text, MAX_LEN, "input.txt:3", warn=lambda m: print(m, file=sys.stderr))
    except UserError as error:
        assert one_line(str(error)) and str(error).startswith("input.txt:3: ") and len(str(error)) < 600
    else:  # accepted: it encodes, fits (its <eos> counted), and any warning is one short line
        assert ids == tokenizer.encode(text) + [tokenizer.eos_id] and 0 < len(ids) <= MAX_LEN
    warning = capsys.readouterr().err
    assert warning == "" or (warning.count("\n") == 1 and len(warning) < 600)


@given(text=sentences)
def test_explain_input_checks(tokenizer, text):
    try:
        ids = check_source(tokenizer, text[:MAX_SENTENCE_CHARS], MAX_LEN)
    except UserError as error:
        assert one_line(str(error))
    else:
        # The source as translate encodes it: no <eos> for a model trained without one.
        assert ids == encode_source(tokenizer, text[:MAX_SENTENCE_CHARS]) and 0 < len(ids) <= MAX_LEN


config_fields = st.sampled_from(["d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "max_len",
                                 "src_vocab_size", "tgt_vocab_size", "dropout", "attention", "norm", "nonsense"])
config_values = st.one_of(st.integers(-3, 1 << 40), st.floats(), st.text(max_size=6), st.none(), st.booleans(),
                          st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                              max_size=2))


@given(changes=st.dictionaries(config_fields, config_values, max_size=3), raw=st.booleans(),
       junk=st.binary(max_size=40))
def test_config_json(tmp_path, changes, raw, junk):
    """ModelConfig.load on edited configs and on junk: a config that validates, or a one-line ConfigError."""
    base = ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, n_encoder_layers=1,
                       n_decoder_layers=1, d_ff=32, max_len=12).to_dict()
    base["format_version"] = FORMAT_VERSION
    path = tmp_path / "config.json"
    path.write_bytes(junk if raw else json.dumps({**base, **changes}).encode())
    try:
        config = ModelConfig.load(path)
    except UserError as error:  # ConfigError is a UserError
        assert one_line(str(error))
    else:
        config.validate()


@pytest.fixture(scope="module")
def client(tmp_path_factory, tokenizer):
    from clearformer.config import preset
    from clearformer.model.transformer import Transformer
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load
    from clearformer.store.checkpoint import save_model

    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=MAX_LEN)
    torch.manual_seed(0)
    trained = copy.copy(tokenizer)
    trained.source_eos = True  # as `clearformer train` saves it by default
    directory = save_model(tmp_path_factory.mktemp("fuzz") / "tiny", Transformer(config), trained)
    return TestClient(create_app(load(directory)), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


json_bodies = st.one_of(
    st.binary(max_size=100),
    st.fixed_dictionaries({}, optional={"sentence": sentences | st.integers() | st.none(),
                                        "prompt": sentences | st.integers(),
                                        "example": st.text(max_size=12) | st.sampled_from(["i-love-you"]),
                                        "other": st.integers()}).map(lambda d: json.dumps(d).encode()),
    sentences.map(lambda s: json.dumps({"sentence": s}).encode("utf-8", "surrogatepass")),
)


@given(body=json_bodies)
def test_parse_request(body):
    try:
        kind, value = parse_request(body)
    except RequestError as error:
        assert 400 <= error.status < 500 and one_line(error.message)
    else:
        assert kind in ("sentence", "prompt", "example") and value == value.strip() and value
        assert len(value) <= MAX_SENTENCE_CHARS and len(body) <= MAX_BODY_BYTES


@given(body=json_bodies, content_type=st.sampled_from(["application/json", "text/plain", "", "x/\u00ff"]))
def test_http_bodies(client, body, content_type):
    response = client.post("/api/explain", content=body, headers={"content-type": content_type.encode("latin-1")})
    assert response.status_code in (200, 400, 404, 409, 413)
    if response.status_code == 200:
        walk = response.json()
        request = json.loads(body)
        # The source as translate encodes it (this model was trained with a source <eos>, the default).
        assert walk["steps"] and ("example" in request or walk["source_tokens"][-1] == "<eos>")
    else:
        assert one_line(response.json()["error"])
