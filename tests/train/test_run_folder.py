"""Run folder rules (issue 14): one run per folder, no litter from killed processes, nothing outside --out;
and the options every command shares (--threads, --checkpoint/--model, --source-eos)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from seeds import seed, seed_args
from train_helpers import tiny_args, weights

from clearformer.cli import main
from clearformer.load import load_model
from clearformer.store.atomic import atomic_write_text
from clearformer.store.runs import runs_root
from clearformer.train.rundir import remove_stale_temporaries
from clearformer.train.state import step_checkpoints

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SHORT = ["--steps", "4", "--save-every", "2", "--eval-every", "2", "--bleu-sentences", "2", "--log-every", "1"]


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def dead_pid() -> int:
    """The PID of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_train_into_a_run_folder_needs_resume_or_overwrite(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(tiny_args(run, *SHORT)) == 0
    before = weights(run)
    rows = (run / "metrics.csv").read_text(encoding="utf-8")
    err = one_line_error(capsys, tiny_args(run, *SHORT, "--seed", str(seed(7))))
    assert "--resume" in err and "--overwrite" in err
    assert weights(run).keys() == before.keys()
    assert all((weights(run)[k] == before[k]).all() for k in before)  # the old run is untouched
    assert (run / "metrics.csv").read_text(encoding="utf-8") == rows

    assert main(tiny_args(run, "--steps", "3", "--save-every", "3", "--eval-every", "3", "--log-every", "1",
                          "--seed", str(seed(7)), "--overwrite")) == 0
    assert [p.name for p in step_checkpoints(run)] == ["step-00000003"]  # none of the old run's
    with open(run / "metrics.csv", encoding="utf-8") as stream:
        steps = [int(r["step"]) for r in csv.DictReader(stream) if r["train_loss"]]
    assert steps == [1, 2, 3]
    assert json.loads((run / "meta.json").read_text())["options"]["loop"]["seed"] == seed(7)


def test_resume_and_overwrite_exclude_each_other(tmp_path, capsys):
    assert "exclude" in one_line_error(capsys, tiny_args(tmp_path / "r", *SHORT, "--resume", "--overwrite"))


def test_lm_train_into_a_run_folder_needs_resume_or_overwrite(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the dog ran .\nthe cat sat .\n" * 40, encoding="utf-8")
    argv = ["lm", "train", "--corpus", str(corpus), "--out", str(tmp_path / "lm"), "--preset", "lm-tiny",
            "--tokenizer", "words", "--steps", "2", "--batch-size", "2", "--block-size", "8", "--threads", "1",
            "--quiet", *seed_args()]
    assert main(argv) == 0
    err = one_line_error(capsys, argv)
    assert "--resume" in err and "--overwrite" in err
    assert main([*argv, "--overwrite"]) == 0


def test_stale_temporaries_of_dead_processes_are_removed_at_the_next_start(tmp_path):
    run = tmp_path / "run"
    assert main(tiny_args(run, *SHORT)) == 0
    dead, alive = dead_pid(), os.getppid()
    checkpoints = run / "checkpoints"
    litter = [checkpoints / f".tmp-step-00000006-{dead}", run / f".model.safetensors.{dead}-abc123x_",
              checkpoints / "step-00000004" / f".optimizer.safetensors.{dead}-q1w2e3r4"]
    kept = [checkpoints / f".tmp-step-00000006-{alive}", run / f".meta.json.{alive}-zzzzzzzz",
            run / "notes.txt", run / ".hidden-user-file"]
    for path in litter + kept:
        if path.name.startswith(".tmp-step"):
            path.mkdir()
            (path / "model.safetensors").write_bytes(b"half")
        else:
            path.write_text("x", encoding="utf-8")
    assert main(["train", "--out", str(run), "--resume", "--steps", "5", "--quiet"]) == 0
    assert not any(p.exists() for p in litter)
    assert all(p.exists() for p in kept)


def test_atomic_temporaries_carry_their_pid(tmp_path):
    """A write killed mid-way leaves `.<name>.<pid>-<random>`: the name the sweep recognises."""
    target = tmp_path / "config.json"

    def fail(temporary: str) -> None:
        assert Path(temporary).name.startswith(f".config.json.{os.getpid()}-")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        from clearformer.store.atomic import atomic_write

        atomic_write(target, fail)
    atomic_write_text(target, "{}")
    leftover = tmp_path / f".config.json.{dead_pid()}-abcdefgh"
    leftover.write_text("", encoding="utf-8")
    # A user's dotfile of the same shape but not a name a run writes is never swept.
    users = tmp_path / f".notes.{dead_pid()}-backup"
    users.write_text("mine", encoding="utf-8")
    assert remove_stale_temporaries(tmp_path) == [leftover]
    assert users.read_text(encoding="utf-8") == "mine"


def test_train_out_writes_nothing_outside_out(tmp_path):
    assert main(tiny_args(tmp_path / "elsewhere", *SHORT)) == 0
    assert not (runs_root() / "LATEST").exists()  # --out named: the latest-run pointer is left alone


def test_default_run_folder_sets_the_latest_pointer(tmp_path):
    run = runs_root() / "toy-translate"
    assert main(tiny_args(run, *SHORT)) == 0
    assert Path((runs_root() / "LATEST").read_text().strip()) == run.resolve()


@pytest.mark.parametrize("argv", [
    ["train", "--threads", "0", "--steps", "1"],
    ["translate", "hello", "--threads", "0"],
    ["lm", "generate", "hi", "--threads", "0"],
    ["lm", "train", "--threads", "-1"],
])
def test_threads_must_be_at_least_one(argv, capsys, tmp_path):
    assert "--threads must be at least 1" in one_line_error(capsys, argv)


@pytest.mark.parametrize("flag,expected", [("--source-eos", True), ("--no-source-eos", False)])
def test_source_eos_is_kept_by_the_tokenizer(tmp_path, flag, expected):
    run = tmp_path / "eos"
    assert main(tiny_args(run, *SHORT, flag)) == 0
    _, tokenizer, meta = load_model(run)
    assert tokenizer.source_eos is expected
    assert (meta["source_format"] == "source tokens then <eos>") is expected
    _, tokenizer, _ = load_model(step_checkpoints(run)[-1])
    assert tokenizer.source_eos is expected
    assert "source_eos" not in (run / "config.json").read_text(encoding="utf-8")


def test_set_source_eos_points_to_the_option(tmp_path, capsys):
    assert main(tiny_args(tmp_path / "r", *SHORT, "--set", "source_eos=true")) == 2
    assert "--source-eos or --no-source-eos" in capsys.readouterr().err
