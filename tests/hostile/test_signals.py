"""Issue 33, point 3: SIGTERM stops training as Ctrl-C does: the step finishes, a checkpoint is written, and
the command exits (143 for SIGTERM, 130 for Ctrl-C) with one line saying how to continue; the advised
command is run here and continues from that checkpoint. Outside the training loop SIGTERM ends a command
like Ctrl-C: one line, exit 143. Real signals, in child processes under a time limit."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import one_line, run_child
from slowed_cli import slowed_command

from clearformer.cli import main
from clearformer.train.state import step_checkpoints

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


def train_until_stepping(run: Path) -> subprocess.Popen:
    """`clearformer train` with checkpoints only every 1,000 steps, once it has done a step or two."""
    env = {**os.environ, "CLEARFORMER_CACHE": "off", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(slowed_command(0.1, "train", "--out", run, "--steps", "100000", "--save-every", "1000",
                                              "--eval-every", "1000", "--log-every", "1", "--quiet"), env=env,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    metrics = run / "metrics.csv"
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"training never started: {process.communicate()}")
        time.sleep(0.1)
    return process


@pytest.mark.parametrize("signum, code, name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_a_signal_finishes_the_step_writes_a_checkpoint_and_says_how_to_resume(signum, code, name, tmp_path,
                                                                                 in_process):
    run = tmp_path / "run"
    process = train_until_stepping(run)
    process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    line = one_line(err)
    assert process.returncode == code, (process.returncode, err)
    saved = step_checkpoints(run)
    assert len(saved) == 1, saved  # written because of the signal (the next scheduled one is at step 1,000)
    step = int(saved[0].name.removeprefix("step-"))
    assert line == (f"clearformer train: stopped at step {step}; checkpoint {saved[0]}; continue with "
                    f"`clearformer train --out {run} --resume`")
    assert f"stopped by {name} after {step} steps" in out
    advised = shlex.split(line.split("`")[1])
    assert advised[:1] == ["clearformer"]
    code, out, err = in_process(*advised[1:], "--steps", str(step + 1))
    assert code == 0, err
    assert f"resuming from {saved[0]}" in out and "reached" in out
    assert [p.name for p in step_checkpoints(run)] == [saved[0].name, f"step-{step + 1:08d}"]


def test_sigterm_before_training_is_one_line_and_143(tmp_path):
    read, write = os.pipe()  # a stdin that never ends: still waiting when the signal comes
    try:
        outcome = run_child("SIGTERM while translating stdin", ["translate", "--file", "/dev/stdin", "--checkpoint",
                                                                 str(tmp_path / "none")], tmp_path, stdin=read,
                            signal_after=1.5, signal_number=signal.SIGTERM)
    finally:
        os.close(read)
        os.close(write)
    assert one_line(outcome, code=143).endswith("terminated (SIGTERM)")


def test_main_restores_the_signal_handlers():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert main(["info"]) == 0
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
