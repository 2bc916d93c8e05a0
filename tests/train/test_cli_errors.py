"""Bad input to `train` and `average`: one line on stderr naming the problem, exit code 2, no traceback."""

import pytest
from train_helpers import tiny_args

from clearformer.cli import main


def error_of(capsys, args):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("args, message", [
    (["train", "--steps", "0"], "--steps must be at least 1"),
    (["train", "--label-smoothing", "1.5"], "--label-smoothing must be in [0, 1)"),
    (["train", "--dropout", "-0.1"], "--dropout must be in [0, 1)"),
    (["train", "--batch-tokens", "0"], "--batch-tokens must be at least 8"),
    (["train", "--preset", "huge"], "unknown preset 'huge'"),
    (["train", "--set", "d_model=30", "--set", "n_heads=4"], "not divisible"),
    (["train", "--set", "colour=blue"], "colour"),
    (["train", "--src", "a.txt"], "--src and --tgt go together"),
    (["train", "--tsv", "missing.tsv"], "missing.tsv: no such file"),
    (["train", "--preset", "small", "--data", "nowhere"], "nowhere: no such corpus directory"),
    (["train", "--resume", "--out", "empty-run"], "no checkpoint to resume from"),
    (["average", "no-such-run"], "no-such-run: no such run directory"),
])
def test_one_line_errors(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert message in error_of(capsys, args)


def test_bad_corpus_line_names_file_and_line(capsys, tmp_path):
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("I love you\tJe t'aime\nno tab on this line\nHello\tBonjour\n", encoding="utf-8")
    err = error_of(capsys, tiny_args(tmp_path / "run", "--tsv", str(corpus), "--steps", "1"))
    assert f"{corpus}:2" in err


def test_missing_corpus_split(capsys, tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "train.tsv").write_text("a\tb\n", encoding="utf-8")
    err = error_of(capsys, tiny_args(tmp_path / "run", "--data", str(tmp_path / "corpus"), "--steps", "1"))
    assert "valid.tsv: missing" in err


def test_damaged_checkpoint_on_resume(capsys, tmp_path):
    run = tmp_path / "run"
    assert main(tiny_args(run, "--steps", "2", "--save-every", "2", "--bleu-sentences", "0")) == 0
    weights = run / "checkpoints" / "step-00000002" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    capsys.readouterr()
    err = error_of(capsys, ["train", "--out", str(run), "--resume", "--steps", "4"])
    assert "model.safetensors: damaged" in err
    err = error_of(capsys, ["train", "--out", str(run), "--resume", "--dropout", "0.2"])
    assert "only --steps, --minutes" in err
