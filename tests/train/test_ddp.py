"""Two processes under torchrun (DDP, gloo on CPU) train like one process with the same global batch."""

import os
import subprocess
import sys

import pytest
import torch
from seeds import seed_args
from train_helpers import losses, tiny_args, weights

from clearformer.cli import main
from clearformer.train.state import step_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)


def torchrun_environment(tmp_path, **extra: str) -> dict[str, str]:
    """One thread per worker; TMPDIR in the test's folder: torchrun's agent leaves a torchelastic_* folder there."""
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", TMPDIR=str(tmp_path), **extra)


OPTIONS = ["--steps", "8", "--log-every", "1", "--eval-every", "4", "--save-every", "4",
           "--bleu-sentences", "4"]


def test_two_processes_equal_one_with_the_same_global_batch(tmp_path):
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    env = torchrun_environment(tmp_path)
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
              "--batch-size", "2", "--block-size", "8", "--eval-every", "2", "--threads", "1", "--quiet",
              *seed_args()]
    env = torchrun_environment(tmp_path)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "clearformer.cli", *common, "--out", str(ddp)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert main([*common, "--out", str(single), "--accum", "2"]) == 0
    a, b = weights(step_checkpoints(ddp)[-1]), weights(step_checkpoints(single)[-1])
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)


def test_sigterm_to_torchrun_stops_every_worker_at_one_step_with_a_checkpoint(tmp_path):
    """torchrun forwards SIGTERM to its workers (as a job scheduler's or `docker stop`'s SIGTERM reaches them):
    they finish the same step, process 0 writes the checkpoint and says once how to continue."""
    import signal
    import time

    run = tmp_path / "ddp"
    env = torchrun_environment(tmp_path, CLEARFORMER_CACHE="off")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "clearformer.cli", *tiny_args(run, "--steps", "100000", "--log-every", "1", "--save-every",
                                                   "1000", "--eval-every", "1000", "--bleu-sentences", "2")]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    metrics = run / "metrics.csv"
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=240)
    saved = step_checkpoints(run)
    assert len(saved) == 1, (saved, err[-3000:])
    step = int(saved[0].name.removeprefix("step-"))
    advice = [line for line in err.splitlines() if line.startswith("clearformer train: stopped")]
    assert advice == [f"clearformer train: stopped at step {step}; checkpoint {saved[0]}; continue with "
                      f"`clearformer train --out {run} --resume`"], err[-3000:]
    assert f"stopped by SIGTERM after {step} steps" in out
