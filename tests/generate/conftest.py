"""Fixtures for the decoding tests: a word vocabulary and a saved random-weight checkpoint."""

from __future__ import annotations

import pytest
import torch
from gen_helpers import SENTENCES, random_model
from threads import one_thread  # noqa: F401  (autouse: one torch thread for the folder's tiny models)

from clearformer.store.checkpoint import save_model
from clearformer.tokenize import WordTokenizer


@pytest.fixture
def tokenizer() -> WordTokenizer:
    return WordTokenizer.build(SENTENCES)


@pytest.fixture
def checkpoint(tmp_path, tokenizer):
    """A saved random-weight checkpoint directory with the word vocabulary of SENTENCES."""
    model = random_model(len(tokenizer), seed=1, dtype=torch.float32)
    return save_model(tmp_path / "ckpt", model, tokenizer, meta={"preset": "test"})
