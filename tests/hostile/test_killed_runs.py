"""Issue 33, point 2: a run killed before its first checkpoint is recognised as such. `train` with the same
--out starts it again (it holds only what clearformer wrote at its start), and the advice of every message
of `train` and `train --resume` about a folder's run is run here, as the user would type it, and works."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import one_line
from seeds import seed_args

from clearformer.store import lock
from clearformer.train.state import step_checkpoints

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SHORT = ["--steps", "2", "--save-every", "2", "--eval-every", "2", "--bleu-sentences", "2", "--quiet", *seed_args()]


@pytest.fixture(scope="module")
def killed_early(tmp_path_factory) -> Path:
    """A `clearformer train` killed with SIGKILL after some steps but before its first checkpoint (or model)."""
    run = tmp_path_factory.mktemp("killed") / "run"
    env = {**os.environ, "CLEARFORMER_CACHE": "off"}
    process = subprocess.Popen([sys.executable, "-m", "clearformer.cli", "train", "--out", str(run), "--steps",
                                "100000", "--save-every", "1000", "--eval-every", "1000", "--log-every", "1",
                                "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    metrics = run / "metrics.csv"
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 2):
        assert process.poll() is None and time.monotonic() < deadline, "training never started"
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not step_checkpoints(run) and not (run / "model.safetensors").exists()
    return run


@pytest.fixture
def killed(killed_early, tmp_path) -> Path:
    copy = tmp_path / "killed"
    shutil.copytree(killed_early, copy)
    return copy


def advised(line: str) -> list[str]:
    """The command between backquotes in a message, without its leading `clearformer`."""
    words = shlex.split(line.split("`")[1])
    assert words[0] == "clearformer", line
    return words[1:]


def test_train_starts_a_run_killed_before_its_first_checkpoint_again(killed, in_process):
    code, out, err = in_process("train", "--out", killed, *SHORT)
    assert code == 0, err
    assert f"{killed} was stopped before its first checkpoint: starting it again" in out
    assert [p.name for p in step_checkpoints(killed)] == ["step-00000002"]


def test_resume_of_a_run_killed_before_its_first_checkpoint_advises_what_works(killed, in_process):
    code, _, err = in_process("train", "--out", killed, "--resume")
    line = one_line(err)
    assert code == 2 and f"{killed} was stopped before its first checkpoint: nothing to resume" in line, line
    code, _, err = in_process(*advised(line), *SHORT)
    assert code == 0, err
    assert step_checkpoints(killed)


def test_train_on_a_run_with_checkpoints_advises_resume_which_works(run_copy, in_process):
    code, _, err = in_process("train", "--out", run_copy, *SHORT)
    line = one_line(err)
    assert code == 2 and "already holds a run: continue it with" in line, line
    code, out, err = in_process(*advised(line), "--steps", "5")
    assert code == 0 and "resuming from" in out, err
    assert step_checkpoints(run_copy)[-1].name == "step-00000005"


@pytest.mark.parametrize("resume", [False, True])
def test_a_model_without_checkpoints_is_replaced_only_on_the_advised_overwrite(resume, run_copy, in_process):
    shutil.rmtree(run_copy / "checkpoints")
    before = (run_copy / "model.safetensors").read_bytes()
    code, _, err = in_process("train", "--out", run_copy, *(["--resume"] if resume else SHORT))
    line = one_line(err)
    assert code == 2 and "--overwrite`" in line, line
    assert (run_copy / "model.safetensors").read_bytes() == before
    code, _, err = in_process(*advised(line), *SHORT)
    assert code == 0, err
    assert step_checkpoints(run_copy) and (run_copy / lock.MARKER_FILE).is_file()


def test_resume_of_a_folder_without_a_run_advises_starting_one(tmp_path, in_process):
    code, _, err = in_process("train", "--out", tmp_path / "nothing", "--resume")
    line = one_line(err)
    assert code == 2 and "no checkpoint to resume from; start a run there" in line, line
    code, _, err = in_process(*advised(line), *SHORT)
    assert code == 0, err
