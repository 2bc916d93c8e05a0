"""Class 3: run folders are owned: one writer at a time, --overwrite only on clearformer's own runs, no
stray sweeps, no run replaced without --overwrite, no system folder as --out (issue 22)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import one_line, tree_hashes
from seeds import seed_args
from slowed_cli import slowed_command

from clearformer.store import lock

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

SHORT = ["--steps", "2", "--save-every", "2", "--eval-every", "2", "--bleu-sentences", "2", "--quiet", *seed_args()]


@pytest.fixture(scope="module")
def busy_run(tmp_path_factory):
    """A `clearformer train --out DIR` running (slowed down) in another process: DIR's lock is held."""
    run = tmp_path_factory.mktemp("busy") / "run"
    env = {**os.environ, "CLEARFORMER_CACHE": "off"}
    # A checkpoint every 4 steps: the folder is a run's (checkpoints/ written) within seconds of the start, where
    # the default 200 steps took most of a minute; the sleep keeps the endless run's share of a core small.
    process = subprocess.Popen(slowed_command(0.5, "train", "--out", run, "--steps", "100000", "--save-every", "4",
                                              "--eval-every", "4", "--bleu-sentences", "2", "--keep", "2",
                                              "--quiet"), env=env,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        held = (run / lock.LOCK_FILE).read_text() if (run / lock.LOCK_FILE).exists() else ""
        if f"PID {process.pid}" in held and (run / "checkpoints").exists():
            break
        assert process.poll() is None, "the first train ended early"
        time.sleep(0.2)
    else:
        process.kill()
        raise AssertionError("the first train never took its folder")
    yield run, process.pid
    process.kill()
    process.wait()


@pytest.mark.parametrize("argv", [
    ["train", "--out", "{run}", *SHORT],
    ["train", "--out", "{run}", "--overwrite", *SHORT],
    ["train", "--out", "{run}", "--resume", "--steps", "3", "--quiet"],
    ["average", "--checkpoints", "{toy}/checkpoints/step-00000004", "--out", "{run}", "--overwrite"],
    ["import", "marian", "{marian}", "--out", "{run}", "--overwrite"],
])
def test_a_second_writer_is_refused_naming_the_holder(argv, busy_run, toy_run, marian_source, in_process):
    run, pid = busy_run
    argv = [a.replace("{run}", str(run)).replace("{toy}", str(toy_run)).replace("{marian}", str(marian_source))
            for a in argv]
    code, _, err = in_process(*argv)
    line = one_line(err)
    assert code == 2 and f"{run} is in use by PID {pid}: clearformer train --out {run}" in line, line
    assert (run / "checkpoints").is_dir()  # the running run was not deleted


def test_export_into_a_locked_folder_is_refused(toy_run, tmp_path, in_process):
    out = tmp_path / "exported"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from clearformer.store import lock; "
                               "lock.acquire(sys.argv[1]); print('held', flush=True); time.sleep(120)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = in_process("export", str(out), "--checkpoint", toy_run, "--to", "marian")
        assert code == 2 and f"is in use by PID {holder.pid}" in one_line(err)
    finally:
        holder.kill()
        holder.wait()


def user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "settings"}')
    (folder / "tokenizer.json").write_text('{"mine": true}')
    (folder / "summary.json").write_text("{}")
    (folder / "thesis.tex").write_text("\\documentclass{article}")
    return folder


@pytest.mark.parametrize("extra", [[], ["--overwrite"]])
def test_train_into_a_folder_that_is_not_a_run_is_refused(extra, tmp_path, in_process):
    folder = user_folder(tmp_path)
    before = tree_hashes(folder)
    code, _, err = in_process("train", "--out", folder, *extra, *SHORT)
    assert code == 2 and "holds files that are not a clearformer run's (thesis.tex)" in one_line(err)
    assert tree_hashes(folder) == before


def hugging_face_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "hf"
    (folder / "checkpoints" / "checkpoint-500").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "marian", "d_model": 512}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "checkpoints" / "checkpoint-500" / "model.safetensors").write_bytes(b"older weights")
    return folder


@pytest.mark.parametrize("argv", [
    ["train", "--out", "{out}", "--overwrite", *SHORT],
    ["lm", "train", "--out", "{out}", "--overwrite", "--corpus", "corpus.txt", "--steps", "1", "--quiet"],
    ["import", "marian", "{marian}", "--out", "{out}", "--overwrite"],
    ["lm", "import", "gpt2", "{gpt2}", "--out", "{out}", "--overwrite"],
])
def test_overwrite_never_deletes_a_hugging_face_folder(argv, tmp_path, marian_source, gpt2_source, in_process):
    folder = hugging_face_folder(tmp_path)
    Path("corpus.txt").write_text("the dog ran\nthe cat sat\n" * 20)
    before = tree_hashes(folder)
    argv = [a.replace("{out}", str(folder)).replace("{marian}", str(marian_source)).replace("{gpt2}", str(gpt2_source))
            for a in argv]
    code, _, err = in_process(*argv)
    line = one_line(err)
    assert code == 2 and "not a clearformer run's" in line, line
    assert tree_hashes(folder) == before


@pytest.mark.parametrize("argv", [
    ["import", "marian", "{marian}", "--out", "{run}"],
    ["lm", "import", "gpt2", "{gpt2}", "--out", "{run}"],
    ["average", "--checkpoints", "{run}/checkpoints/step-00000004", "--out", "{run}"],
])
def test_import_and_average_never_replace_a_run_without_overwrite(argv, run_copy, marian_source, gpt2_source,
                                                                  in_process):
    before = tree_hashes(run_copy)
    argv = [a.replace("{run}", str(run_copy)).replace("{marian}", str(marian_source))
            .replace("{gpt2}", str(gpt2_source)) for a in argv]
    code, _, err = in_process(*argv)
    assert code == 2 and "already holds a run: add --overwrite" in one_line(err)
    assert {k: v for k, v in tree_hashes(run_copy).items() if lock.LOCK_FILE not in k} == \
        {k: v for k, v in before.items() if lock.LOCK_FILE not in k}


def test_import_with_overwrite_replaces_a_clearformer_run(run_copy, marian_source, in_process):
    (run_copy / "notes.txt").unlink(missing_ok=True)
    code, _, err = in_process("import", "marian", marian_source, "--out", run_copy, "--overwrite")
    assert code == 0, err
    assert not (run_copy / "checkpoints").exists() and (run_copy / lock.MARKER_FILE).exists()


def test_a_folder_without_the_marker_is_not_a_run(run_copy, in_process):
    """Only the marker proves a run (no release ever wrote runs without one): run files alone are refused."""
    before = tree_hashes(run_copy)
    (run_copy / lock.MARKER_FILE).unlink()
    assert not lock.is_clearformer_run(run_copy)
    code, _, err = in_process("train", "--out", run_copy, "--overwrite", *SHORT)
    assert code == 2 and "holds files that are not a clearformer run's" in one_line(err), err
    assert {k: v for k, v in tree_hashes(run_copy).items() if lock.LOCK_FILE not in k} == \
        {k: v for k, v in before.items() if lock.LOCK_FILE not in k and lock.MARKER_FILE not in k}


def test_the_sweep_keeps_a_users_dotfiles(run_copy, in_process):
    mine = [run_copy / ".notes.12345-draft", run_copy / ".config.json.1-x", run_copy / "checkpoints" / ".a.99999-b"]
    for path in mine:
        path.write_text("mine")
    code, _, err = in_process("train", "--out", run_copy, "--resume", "--steps", "5", "--quiet")
    assert code == 0, err
    assert all(path.read_text() == "mine" for path in mine)


@pytest.mark.parametrize("out", ["/", "{home}", "/etc", "/usr"])
@pytest.mark.parametrize("command", [["train", *SHORT], ["import", "marian", "{marian}"]])
def test_system_folders_are_refused_as_out(out, command, marian_source, in_process):
    home = os.environ["HOME"]
    before = sorted(os.listdir(home))
    argv = [a.replace("{marian}", str(marian_source)) for a in command] + ["--out", out.replace("{home}", home)]
    code, _, err = in_process(*argv)
    assert code == 2 and "is a system or home folder" in one_line(err)
    assert sorted(os.listdir(home)) == before


def test_lock_is_released_at_the_end_of_a_command(run_copy, in_process):
    code, _, err = in_process("train", "--out", run_copy, "--resume", "--steps", "5", "--quiet")
    assert code == 0, err
    probe = subprocess.run([sys.executable, "-c", "import sys; from clearformer.store import lock; "
                            "lock.acquire(sys.argv[1]); print('ok')", str(run_copy)], capture_output=True, text=True)
    assert probe.stdout.strip() == "ok", probe.stderr
    shutil.rmtree(run_copy)
