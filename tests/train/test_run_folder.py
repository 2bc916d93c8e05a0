"""A run folder holds one run: no silent overwrite, killed writers' litter swept up, nothing written outside --out."""

import fcntl
import os
import subprocess
import sys

import pytest
from train_helpers import tiny_args, weights

from clearformer.cli import main
from clearformer.run_folder import LOCK_FILE, claim_run_folder, remove_stale_temporaries
from clearformer.runs import mark_latest


def one_line_error(capsys, args) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid  # exited and reaped: no process has this id (until the system reuses it)


@pytest.fixture
def trained_run(tmp_path):
    run = tmp_path / "run"
    assert main(tiny_args(run, "--steps", "2", "--save-every", "2", "--bleu-sentences", "0")) == 0
    return run


def test_training_into_a_run_without_resume_stops_and_changes_nothing(capsys, trained_run):
    before = {path: path.read_bytes() for path in trained_run.rglob("*") if path.is_file()}
    err = one_line_error(capsys, tiny_args(trained_run, "--steps", "3", "--seed", "5"))
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    after = {path: path.read_bytes() for path in trained_run.rglob("*") if path.is_file()}
    assert {p: b for p, b in after.items() if p.name != LOCK_FILE} == \
           {p: b for p, b in before.items() if p.name != LOCK_FILE}


def test_overwrite_moves_the_old_run_aside(capsys, trained_run):
    old_weights = weights(trained_run)
    old_metrics = (trained_run / "metrics.csv").read_text(encoding="utf-8")
    assert main(tiny_args(trained_run, "--steps", "3", "--seed", "5", "--overwrite",
                          "--bleu-sentences", "0")) == 0
    moved = [p for p in trained_run.parent.iterdir() if p.name.startswith("run.replaced-")]
    assert len(moved) == 1
    assert weights(moved[0]).keys() == old_weights.keys()
    assert all((weights(moved[0])[k] == v).all() for k, v in old_weights.items())
    assert (moved[0] / "metrics.csv").read_text(encoding="utf-8") == old_metrics
    new_rows = (trained_run / "metrics.csv").read_text(encoding="utf-8").splitlines()
    assert not set(new_rows[1:]) & set(old_metrics.splitlines()[1:]), "metrics.csv holds one run's rows"
    capsys.readouterr()
    both = ["train", "--out", str(trained_run), "--resume", "--overwrite"]
    assert "--resume and --overwrite" in one_line_error(capsys, both)


def test_stale_temporaries_of_dead_processes_are_removed_at_the_next_start(trained_run):
    pid = dead_pid()
    checkpoints = trained_run / "checkpoints"
    litter = [checkpoints / f".tmp-step-00000004-{pid}", checkpoints / f".old-step-00000002-{pid}"]
    for folder in litter:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"half")
    files = [trained_run / ".model.safetensors.k2j4_x9a", checkpoints / "step-00000002" / ".meta.json.abcd1234"]
    for path in files:
        path.write_bytes(b"half")
    keep = [trained_run / "notes.txt", trained_run / ".hidden"]
    for path in keep:
        path.write_text("mine", encoding="utf-8")
    with claim_run_folder(trained_run, resume=True):
        pass
    assert not any(path.exists() for path in litter + files)
    assert all(path.exists() for path in keep)
    assert (checkpoints / "step-00000002" / "model.safetensors").exists()


def test_a_live_process_keeps_its_temporaries(trained_run):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = trained_run / "checkpoints" / f".tmp-step-00000004-{live.pid}"
        folder.mkdir()
        assert remove_stale_temporaries(trained_run) == []
        assert folder.exists()
    finally:
        live.kill()
        live.wait()


def test_a_folder_in_use_is_refused(capsys, trained_run):
    with open(trained_run / LOCK_FILE, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        code = subprocess.run([sys.executable, "-m", "clearformer.cli", "train", "--out", str(trained_run), "--resume"],
                              capture_output=True, text=True, env=dict(os.environ))
    assert code.returncode == 2 and "in use by a running clearformer process" in code.stderr


def test_latest_is_written_only_for_runs_under_runs_root(tmp_path, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    marker = tmp_path / "runs" / "LATEST"
    mark_latest(tmp_path / "elsewhere")
    assert not marker.exists()
    mark_latest(tmp_path / "runs" / "toy-translate")
    assert marker.read_text(encoding="utf-8").strip() == str((tmp_path / "runs" / "toy-translate").resolve())


def test_train_out_elsewhere_leaves_latest_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLEARFORMER_RUNS")
    assert main(tiny_args(tmp_path / "other", "--steps", "1", "--bleu-sentences", "0")) == 0
    assert not (tmp_path / "runs").exists()


def test_lm_train_into_a_language_model_run_stops(capsys, tmp_path):
    run = tmp_path / "lm-run"
    run.mkdir()
    (run / "train_state.json").write_text("{}", encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line number {i} of a small corpus\n" for i in range(200)), encoding="utf-8")
    err = one_line_error(capsys, ["lm", "train", "--corpus", str(corpus), "--out", str(run), "--preset", "lm-tiny",
                                  "--tokenizer", "words", "--vocab-size", "50", "--steps", "1"])
    assert "already holds a run" in err and "--overwrite" in err
