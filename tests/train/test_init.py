"""`train --init RUN`: fine-tuning from a run's weights, keeping its tokenizer and architecture (train/init.py)."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from seeds import seed_args
from train_helpers import TINY, kill_when_saved, losses, run_subprocess, tiny_args, weights

from clearformer.cli import main
from clearformer.tokenize import load_tokenizer
from clearformer.train.state import step_checkpoints

pytestmark = pytest.mark.slow  # its fixture trains a run (pyproject: -m 'not slow' skips it)


@pytest.fixture(scope="module")
def start_run(tmp_path_factory):
    """A tiny toy-translate run, 30 steps: what the tests fine-tune."""
    out = tmp_path_factory.mktemp("init") / "start"
    assert main(tiny_args(out, "--steps", "30")) == 0
    return out


def init_args(start, out, *extra: str) -> list[str]:
    return ["train", "--init", str(start), "--out", str(out), "--batch-tokens", "120", "--threads", "1", "--quiet",
            "--bleu-sentences", "4", *seed_args(), *extra]


def metrics_rows(run) -> list[dict]:
    with open(run / "metrics.csv", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_fine_tuning_keeps_the_tokenizer_and_records_where_it_started(start_run, tmp_path, capsys):
    out = tmp_path / "tuned"
    assert main(init_args(start_run, out, "--steps", "12", "--eval-every", "6")) == 0
    log = capsys.readouterr().out
    assert "step 0: valid loss" in log and "(the starting weights)" in log
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256((start_run / "model.safetensors").read_bytes()).hexdigest()
    assert meta["init"]["weights_sha256"] == digest and meta["init"]["name"] == "start"
    assert meta["init"]["step"] == 30 and isinstance(meta["init"]["valid_loss_at_start"], float)
    theirs, ours = load_tokenizer(start_run), load_tokenizer(out)
    assert [ours.id_to_token(i) for i in range(len(ours))] == [theirs.id_to_token(i) for i in range(len(theirs))]
    assert json.loads((out / "config.json").read_text())["d_model"] == 16  # the run's architecture, not the preset's
    rows = [r for r in metrics_rows(out) if r["valid_loss"]]
    assert [int(r["step"]) for r in rows] == [0, 6, 12]
    assert float(rows[0]["valid_vs_start"]) == 0.0
    assert float(rows[1]["valid_vs_start"]) == pytest.approx(
        float(rows[1]["valid_loss"]) - float(rows[0]["valid_loss"]), abs=1e-4)
    # the fine-tuning recipe is the default: a lower learning rate, a short warmup, no smoothing (train/init.py)
    recipe = json.loads((step_checkpoints(out)[-1] / "trainer_state.json").read_text())["options"]["recipe"]
    assert (recipe["lr_factor"], recipe["warmup"], recipe["label_smoothing"]) == (0.02, 20, 0.0)


def test_frozen_parts_do_not_change(start_run, tmp_path):
    out = tmp_path / "frozen"
    assert main(init_args(start_run, out, "--steps", "10", "--freeze", "embeddings,encoder", "--lr-factor", "3")) == 0
    before, after = weights(start_run), weights(step_checkpoints(out)[-1])
    frozen = [n for n in before if n.startswith(("src_embed.", "tgt_embed.", "encoder."))]
    moving = [n for n in before if n.startswith("decoder.") and n.endswith("weight")]
    assert frozen and moving
    for name in frozen:
        torch.testing.assert_close(after[name], before[name], rtol=0, atol=0, msg=name)
    assert all(not torch.equal(after[name], before[name]) for name in moving)


def test_a_run_that_only_gets_worse_says_so(start_run, tmp_path, capsys):
    out = tmp_path / "worse"
    # a learning rate far too high: every validation is worse than the starting weights'
    assert main(init_args(start_run, out, "--steps", "8", "--eval-every", "4", "--lr-factor", "300",
                          "--warmup", "1")) == 0
    log = capsys.readouterr().out
    assert "WORSE than the run it started from" in log and "fine-tuning never beat the validation loss" in log
    rows = [r for r in metrics_rows(out) if r["valid_loss"]]
    assert all(float(r["valid_vs_start"]) > 0 for r in rows[1:])
    # the run's model is the starting weights (the best validation loss was step 0's)
    for name, tensor in weights(start_run).items():
        torch.testing.assert_close(weights(out)[name], tensor, rtol=0, atol=0)


@pytest.mark.parametrize("flag", [["--preset", "small"], ["--set", "d_model=32"], ["--tokenizer", "sentencepiece"],
                                  ["--vocab-size", "500"], ["--arch", "rnn"], ["--tie", "none"]])
def test_flags_that_would_change_the_model_are_refused_by_name(start_run, tmp_path, capsys, flag):
    assert main(init_args(start_run, tmp_path / "x", *flag)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"clearformer train: error: {flag[0]}") and "--init RUN keeps" in err and "\n" not in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv, message", [
    (["--freeze", "encoder"], "--freeze needs --init RUN"),
    (["--init", "{start}", "--freeze", "encoder,attention"], "--freeze 'attention': not a part"),
    (["--init", "{missing}"], "no such run directory"),
    (["--init", "{start}", "--out", "{start}", "--overwrite"], "cannot be --out"),
])
def test_bad_init_and_freeze_are_one_line_errors(start_run, tmp_path, capsys, argv, message):
    argv = [a.format(start=start_run, missing=tmp_path / "nothing") for a in argv]
    out = ["--out", str(tmp_path / "y")] if "--out" not in argv else []
    assert main(["train", *out, *argv, "--quiet", "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert (start_run / "model.safetensors").exists()


OPTIONS = ["--steps", "24", "--save-every", "6", "--eval-every", "8", "--dropout", "0.1", "--log-every", "1",
           "--keep", "10", "--freeze", "embeddings"]


def test_resume_of_an_init_run_after_kill_equals_a_straight_one(start_run, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert main(init_args(start_run, straight, *OPTIONS)) == 0
    kill_when_saved(run_subprocess(init_args(start_run, killed, *OPTIONS), slowed=0.25), killed, "step-00000012")
    assert main(["train", "--out", str(killed), "--resume", "--quiet"]) == 0
    a, b = weights(step_checkpoints(straight)[-1]), weights(step_checkpoints(killed)[-1])
    assert step_checkpoints(killed)[-1].name == "step-00000024"
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    assert losses(straight) == pytest.approx(losses(killed), abs=0)
    for name, tensor in weights(start_run).items():  # --freeze holds across the resume
        if name.startswith(("src_embed.", "tgt_embed.")):
            torch.testing.assert_close(b[name], tensor, rtol=0, atol=0)
    meta_a, meta_b = (json.loads((run / "meta.json").read_text()) for run in (straight, killed))
    assert meta_a["init"] == meta_b["init"]


def test_tiny_options_are_the_ones_the_helpers_use():
    assert "--set" in TINY  # the start run is the helpers' tiny model: --init must not need its --set flags


def test_validation_skips_sources_longer_than_the_started_run_reads(start_run, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    short = "".join(f"the cat sleeps {i}\tle chat dort {i}\n" for i in range(30))
    long_source = " ".join(["the cat sleeps"] * 40)  # far beyond the toy preset's max_len of 64 tokens
    for split in ("train", "test"):
        (corpus / f"{split}.tsv").write_text(short, encoding="utf-8")
    (corpus / "valid.tsv").write_text(f"{long_source}\t{long_source}\n" + short[:200], encoding="utf-8")
    assert main(init_args(start_run, tmp_path / "long", "--data", str(corpus), "--steps", "2")) == 0
    assert "step 0: valid loss" in capsys.readouterr().out


def test_a_fine_tuned_run_blends_with_its_start(start_run, tmp_path, capsys):
    """`average RUN --with-start W`: W x the start's weights + (1 - W) x the run's, the start checked by its
    SHA-256; refused in one line for a run that did not start from another, a share outside (0, 1), a start
    whose weights changed."""
    tuned = tmp_path / "tuned"
    assert main(init_args(start_run, tuned, "--steps", "6", "--lr-factor", "3")) == 0
    # The run's model is its best validation, which may be step 0 (the start itself: CPUs and seeds differ);
    # its last step checkpoint has taken 6 optimizer steps, so its weights moved whatever the losses did.
    last = step_checkpoints(tuned)[-1]
    assert last.name == "step-00000006"
    start = weights(start_run)
    for blended, out in ((tuned, tmp_path / "blend"), (last, tmp_path / "blend-last")):
        assert main(["average", str(blended), "--with-start", "0.25", "--out", str(out)]) == 0
        ours, blend = weights(blended), weights(out)
        for name in start:
            torch.testing.assert_close(blend[name],
                                       (0.25 * start[name].double() + 0.75 * ours[name].double()).float())
        meta = json.loads((out / "meta.json").read_text())
        assert meta["with_start"]["weight"] == 0.25 and meta["init"]["name"] == "start"
    assert any(not torch.equal(start[n], weights(last)[n]) for n in start)
    capsys.readouterr()
    for argv, message in ((["average", str(start_run), "--with-start", "0.5", "--out", str(tmp_path / "x")],
                           "not a fine-tuned run"),
                          (["average", str(tuned), "--with-start", "1", "--out", str(tmp_path / "x")],
                           "above 0 and below 1"),
                          (["average", str(tuned), "--with-start", "nan", "--out", str(tmp_path / "x")],
                           "finite number"),
                          (["average", str(tuned), "--with-start", "0.5", "--last", "3", "--out",
                            str(tmp_path / "x")], "takes no --last")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    moved = tmp_path / "moved-start"
    shutil.copytree(start_run, moved)
    meta = json.loads((tuned / "meta.json").read_text())
    meta["init"]["run"] = str(moved)
    (tuned / "meta.json").write_text(json.dumps(meta))
    # other weights there: the blend of the last step, which moved
    (moved / "model.safetensors").write_bytes((out / "model.safetensors").read_bytes())
    assert main(["average", str(tuned), "--with-start", "0.5", "--out", str(tmp_path / "y")]) == 2
    assert "SHA-256 changed" in capsys.readouterr().err
    assert not (tmp_path / "y").exists() and not (tmp_path / "x").exists()


def test_a_start_named_relatively_is_found_from_any_folder(start_run, tmp_path, monkeypatch):
    """`train --init runs/x` in one folder, `average --with-start` in another: the start is recorded by its full
    path, so the blend finds it."""
    monkeypatch.chdir(start_run.parent)
    assert main(init_args(Path(start_run.name), tmp_path / "tuned", "--steps", "2")) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["average", str(tmp_path / "tuned"), "--with-start", "0.5", "--out", "blend"]) == 0
    assert (elsewhere / "blend" / "model.safetensors").is_file()
