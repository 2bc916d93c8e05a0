"""Tiny trained translation models (word-level and SentencePiece) for the explain tests, trained once a session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from seeds import seed_args
from shared import built_once
from threads import kept_thread_count, one_thread  # noqa: F401  (autouse: one torch thread for the tiny models)

# A model small enough that 150 steps take a couple of seconds on the built-in phrase set.
TINY = ["--set", "d_model=32", "--set", "n_heads=2", "--set", "d_ff=64", "--set", "n_encoder_layers=1",
        "--set", "n_decoder_layers=1", "--batch-tokens", "200", "--warmup", "20", "--threads", "1", "--quiet",
        "--steps", "150", *seed_args()]


def _train(tmp_path_factory, name: str, *extra: str):
    """(model, tokenizer) of TINY + `extra`, trained once for all the workers (tests/shared.py)."""
    from clearformer.cli import main
    from clearformer.load import load_model

    def train(base: Path) -> None:
        runs = os.environ.get("CLEARFORMER_RUNS")
        os.environ["CLEARFORMER_RUNS"] = str(base / "runs")  # `train` marks its run as the latest there
        try:
            with kept_thread_count():
                assert main(["train", "--out", str(base / "model"), *TINY, *extra]) == 0
        finally:
            if runs is None:
                del os.environ["CLEARFORMER_RUNS"]
            else:
                os.environ["CLEARFORMER_RUNS"] = runs

    model, tokenizer, _ = load_model(built_once(tmp_path_factory, f"explain-{name}", train) / "model")
    return model, tokenizer


@pytest.fixture(scope="session")
def word_model(tmp_path_factory):
    """(model, tokenizer): word-level vocabulary."""
    return _train(tmp_path_factory, "words")


@pytest.fixture(scope="session")
def subword_model(tmp_path_factory):
    """(model, tokenizer): a SentencePiece vocabulary of 400 pieces."""
    return _train(tmp_path_factory, "subwords", "--tokenizer", "sentencepiece", "--vocab-size", "400")
