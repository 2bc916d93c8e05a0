"""The trained toy model the lessons read, trained once per session into a temporary runs/ folder.

A small model (the explain tests' sizes, 150 steps: a few seconds) stands in for `runs/toy-translate`:
CLEARFORMER_RUNS points at the temporary folder for the whole session, so the lessons, the notebooks'
kernel and `clearformer learn` all find it where they look for the real one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))  # planted.py

TINY = ["--set", "d_model=32", "--set", "n_heads=2", "--set", "d_ff=64", "--set", "n_encoder_layers=1",
        "--set", "n_decoder_layers=2", "--batch-tokens", "200", "--warmup", "20", "--threads", "1", "--quiet",
        "--steps", "150"]


@pytest.fixture(scope="session")
def toy_runs(tmp_path_factory) -> Path:
    """A runs/ folder holding toy-translate; CLEARFORMER_RUNS points at it until the session ends."""
    from clearformer.cli import main

    runs = tmp_path_factory.mktemp("learn") / "runs"
    previous, threads = os.environ.get("CLEARFORMER_RUNS"), torch.get_num_threads()
    os.environ["CLEARFORMER_RUNS"] = str(runs)
    try:
        assert main(["train", "--preset", "toy-translate", "--out", str(runs / "toy-translate"), *TINY]) == 0
    finally:
        torch.set_num_threads(threads)
    yield runs
    if previous is None:
        del os.environ["CLEARFORMER_RUNS"]
    else:
        os.environ["CLEARFORMER_RUNS"] = previous


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
