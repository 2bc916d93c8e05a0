"""Helpers for the training tests: a tiny model on the toy phrase set, run through the CLI."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from seeds import seed_args
from slowed_cli import slowed_command

# A model small enough that a few dozen steps take a second or two.
TINY = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32", "--set", "n_encoder_layers=1",
        "--set", "n_decoder_layers=1", "--batch-tokens", "120", "--warmup", "10", "--threads", "1", "--quiet",
        *seed_args()]


def tiny_args(out: Path, *extra: str) -> list[str]:
    return ["train", "--out", str(out), *TINY, *extra]


def run_subprocess(args: list[str], slowed: float = 0.0, **kwargs) -> subprocess.Popen:
    """`clearformer ARGS` in a child process; slowed=S sleeps S seconds after every training step
    (tests/slowed_cli.py), so that a test can strike a run that is still going."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = slowed_command(slowed, *args) if slowed else [sys.executable, "-m", "clearformer.cli", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(str(checkpoint / "model.safetensors"))


def losses(run: Path) -> dict[int, float]:
    """Training loss by step from a run's metrics.csv."""
    with open(run / "metrics.csv", encoding="utf-8") as stream:
        return {int(r["step"]): float(r["train_loss"]) for r in csv.DictReader(stream) if r["train_loss"]}


def kill_when_saved(process: subprocess.Popen, run: Path, step_folder: str, timeout_s: float = 120) -> None:
    """SIGKILL a training process as soon as its checkpoint `step_folder` (e.g. "step-00000012") exists."""
    import signal
    import time

    deadline = time.monotonic() + timeout_s
    while not (run / "checkpoints" / step_folder).is_dir():
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
