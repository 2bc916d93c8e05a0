"""The fuzz suite's fixture: a tiny random translation checkpoint (what it tests: fuzz_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fuzz_helpers import WORDS


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    from clearformer.checkpoint import save_model
    from clearformer.config import preset
    from clearformer.model.transformer import Transformer
    from clearformer.tokenize import SPECIALS, WordTokenizer

    tokenizer = WordTokenizer(list(SPECIALS) + WORDS)
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=12)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("fuzz") / "tiny"
    save_model(directory, Transformer(config), tokenizer, {"note": "random weights, for the fuzz suite"})
    return directory
