"""Shared fixtures of the viz tests: a tiny random translation checkpoint and a live `clearformer serve`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from live_support import serve
from seeds import seed

WORDS = "I love you the cat Je t' aime le chat".split()


def build_checkpoint(directory: Path, toy_size: bool = False) -> Path:
    """A 1+1-layer, 2-head, d_model 16 Transformer with random weights and a vocabulary for "I love you"
    (`toy_size`: the toy-translate preset's own sizes, 2+2 layers of d_model 64). <eos> is never chosen, so a
    translation always decodes to the length limit, whatever the seed (CLEARFORMER_TEST_SEED=1's random weights
    chose <eos> first: an empty translation, and a page with no result to show); at toy size an explanation is
    then as costly as the trained toy model's, or more."""
    from clearformer.config import preset
    from clearformer.model.transformer import Transformer
    from clearformer.store.checkpoint import save_model
    from clearformer.tokenize import SPECIALS, WordTokenizer

    tokenizer = WordTokenizer(list(SPECIALS) + WORDS)
    tokenizer.source_eos = True  # as `clearformer train` saves it by default
    sizes = {} if toy_size else dict(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32,
                                     max_len=12)
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), **sizes)
    torch.manual_seed(seed(0))
    model = Transformer(config)
    with torch.no_grad():
        model.output.linear.bias[tokenizer.eos_id] = -1e4
    save_model(directory, model, tokenizer, {"note": "random weights, for tests"})
    return directory


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return build_checkpoint(tmp_path_factory.mktemp("viz") / "tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_checkpoint):
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(tiny_checkpoint)
    return model, tokenizer


@pytest.fixture(scope="module")
def toy_size_server(tmp_path_factory):
    """`clearformer serve` of a random-weight model of the toy-translate preset's sizes -> its base URL."""
    yield from serve(build_checkpoint(tmp_path_factory.mktemp("viz") / "toy-size", toy_size=True),
                     tmp_path_factory)


@pytest.fixture(scope="session")
def live_server(tiny_checkpoint, tmp_path_factory):
    """`clearformer serve --checkpoint <tiny>` as a real process on a free loopback port -> its base URL."""
    yield from serve(tiny_checkpoint, tmp_path_factory)
