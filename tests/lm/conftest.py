"""Tiny language models, a tiny corpus and a trained tiny checkpoint for the LM tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lm_helpers import PLACES, SUBJECTS, VERBS
from seeds import seed_args
from shared import built_once
from threads import kept_thread_count


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """A small, very regular English corpus (one sentence per line)."""
    lines = [f"{s} {v} {p} ." for s in SUBJECTS for v in VERBS for p in PLACES]
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _keep_thread_count():
    """`--threads` sets torch's process-wide thread count; give other tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _known_peak(monkeypatch):
    """Training logs MFU against a measured matmul peak; tests use a fixed one instead of timing."""
    monkeypatch.setattr("clearformer.train.mfu.matmul_peak", lambda device="cpu", refresh=False, dtype=None: 1e10)


@pytest.fixture(scope="session")
def trained_lm(tmp_path_factory, corpus_file):
    """`clearformer lm train` on the tiny corpus: a checkpoint directory (trained once for all the workers:
    tests/shared.py)."""
    from clearformer.cli import main
    from clearformer.train import mfu

    def train(out: Path) -> None:
        original = mfu.matmul_peak
        mfu.matmul_peak = lambda device="cpu", refresh=False, dtype=None: 1e10
        try:
            with kept_thread_count():
                code = main(["lm", "train", "--corpus", str(corpus_file), "--out", str(out), "--preset", "lm-tiny",
                             "--tokenizer", "words", "--steps", "150", "--batch-size", "16", "--block-size", "32",
                             "--eval-every", "150", "--lr", "3e-3", "--threads", "1", *seed_args()])
        finally:
            mfu.matmul_peak = original
        assert code == 0

    return built_once(tmp_path_factory, "lm", train)
