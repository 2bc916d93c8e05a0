"""Two processes under torchrun (DDP, gloo on CPU) train like one process with the same global batch."""

import os
import subprocess
import sys

import pytest
import torch
from train_helpers import losses, tiny_args, weights

from clearformer.cli import main
from clearformer.train.state import step_checkpoints

OPTIONS = ["--steps", "8", "--log-every", "1", "--eval-every", "4", "--save-every", "4",
           "--bleu-sentences", "4"]


def test_two_processes_equal_one_with_the_same_global_batch(tmp_path):
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "clearformer.cli", *tiny_args(ddp, *OPTIONS)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 processes" in result.stdout
    # Each process trains on one batch per step; one process accumulating 2 batches sees the same ones.
    assert main(tiny_args(single, *OPTIONS, "--accum", "2")) == 0
    loss_ddp, loss_single = losses(ddp), losses(single)
    assert sorted(loss_ddp) == list(range(1, 9))
    for step in loss_single:
        assert loss_ddp[step] == pytest.approx(loss_single[step], abs=1e-4)
    a, b = weights(step_checkpoints(ddp)[-1]), weights(step_checkpoints(single)[-1])
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)


def test_language_model_two_processes_equal_one_with_the_same_global_batch(tmp_path):
    """The LM task runs on the same trainer, so DDP holds for it too."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the dog ran to the house .\nthe cat sat in the field .\n" * 30, encoding="utf-8")
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    common = ["lm", "train", "--corpus", str(corpus), "--preset", "lm-tiny", "--tokenizer", "words", "--steps", "4",
              "--batch-size", "2", "--block-size", "8", "--eval-every", "2", "--threads", "1", "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "clearformer.cli", *common, "--out", str(ddp)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert main([*common, "--out", str(single), "--accum", "2"]) == 0
    a, b = weights(step_checkpoints(ddp)[-1]), weights(step_checkpoints(single)[-1])
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)
