"""The trained toy model the lessons read, trained once per session into a temporary runs/ folder.

A small model (the explain tests' sizes, 150 steps: a few seconds) stands in for `runs/toy-translate`:
CLEARFORMER_RUNS points at the temporary folder during the tests that use it (and in the notebooks'
kernel), so the lessons and `clearformer learn` find it where they look for the real one.
"""

from __future__ import annotations

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
    """A runs/ folder holding toy-translate (trained once per session)."""
    from clearformer.cli import main

    runs = tmp_path_factory.mktemp("learn") / "runs"
    threads = torch.get_num_threads()
    try:
        assert main(["train", "--preset", "toy-translate", "--out", str(runs / "toy-translate"), *TINY]) == 0
    finally:
        torch.set_num_threads(threads)
    return runs


@pytest.fixture(autouse=True)
def _runs_env(request, monkeypatch):
    """CLEARFORMER_RUNS points at the toy runs/ folder during each test that uses it (and only then)."""
    if "toy_runs" in request.fixturenames:
        monkeypatch.setenv("CLEARFORMER_RUNS", str(request.getfixturevalue("toy_runs")))


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
