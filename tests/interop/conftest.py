"""Fixtures of the interop tests: a toy translator trained with SentencePiece pieces (about 10 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from seeds import seed_args
from shared import built_once

# Never reach for the network: every model here is built and saved locally (set before Transformers loads).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """toy-translate, a SentencePiece vocabulary of ~600 pieces, </s> after every source (as Marian reads
    sources), 300 steps on the built-in phrase set (trained once for all the workers: tests/shared.py)."""

    def train(out: Path) -> None:
        out.mkdir(parents=True)
        env = dict(os.environ, OMP_NUM_THREADS="1", CLEARFORMER_RUNS=str(out / "runs"))
        subprocess.run([sys.executable, "-m", "clearformer.cli", "train", "--preset", "toy-translate", "--tokenizer",
                        "sentencepiece", "--vocab-size", "600", "--source-eos", "--steps", "300", "--out",
                        str(out / "run"), "--threads", "1", "--quiet", *seed_args()], env=env, check=True,
                       capture_output=True)

    return built_once(tmp_path_factory, "interop-trained", train) / "run"
