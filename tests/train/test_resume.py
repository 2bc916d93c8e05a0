"""--resume after SIGKILL continues exactly: the final weights, optimizer and losses of a straight run."""

import signal
import time

import pytest
import torch
from safetensors.torch import load_file
from train_helpers import losses, run_subprocess, tiny_args, weights

from clearformer.cli import main
from clearformer.train.state import step_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

# Dropout on, validation and checkpoints mid-run: the RNG, the early-stopping record and the data
# position all have to come back for the runs to agree.
OPTIONS = ["--steps", "24", "--save-every", "6", "--eval-every", "8", "--bleu-sentences", "4",
           "--dropout", "0.1", "--log-every", "1", "--keep", "10"]


def test_resume_after_kill_equals_straight_run(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert main(tiny_args(straight, *OPTIONS)) == 0

    process = run_subprocess(tiny_args(killed, *OPTIONS), slowed=0.25)
    deadline = time.monotonic() + 120
    while not (killed / "checkpoints" / "step-00000012").is_dir():
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert step_checkpoints(killed)[-1].name in ("step-00000012", "step-00000018")  # killed mid-run

    assert main(["train", "--out", str(killed), "--resume", "--quiet"]) == 0
    final_straight, final_resumed = step_checkpoints(straight)[-1], step_checkpoints(killed)[-1]
    assert final_straight.name == final_resumed.name == "step-00000024"
    a, b = weights(final_straight), weights(final_resumed)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    opt_a = load_file(str(final_straight / "optimizer.safetensors"))
    opt_b = load_file(str(final_resumed / "optimizer.safetensors"))
    for name in opt_a:
        torch.testing.assert_close(opt_a[name], opt_b[name], rtol=0, atol=0, msg=name)
    loss_a, loss_b = losses(straight), losses(killed)
    assert sorted(loss_a) == sorted(loss_b) == list(range(1, 25))
    assert loss_a == pytest.approx(loss_b, abs=0)
