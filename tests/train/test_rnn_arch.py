"""`clearformer train --arch rnn`: the GRU baseline through the one trainer, and every command on its run."""

from __future__ import annotations

import json

import pytest
import torch
from seeds import seed_args
from train_helpers import weights

from clearformer.cli import main
from clearformer.config import ModelConfig
from clearformer.generate import DecodingOptions
from clearformer.load import load_model
from clearformer.model import build_model
from clearformer.model.rnn import RNNSeq2Seq
from clearformer.model.transformer import Transformer

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

# The toy preset's GRU, made tiny: one GRU layer a side of width 16.
TINY_RNN = ["--arch", "rnn", "--set", "d_model=16", "--set", "n_encoder_layers=1", "--set", "n_decoder_layers=1",
            "--batch-tokens", "120", "--warmup", "10", "--threads", "1", "--quiet", "--bleu-sentences", "5",
            *seed_args()]


def train(out, *extra) -> int:
    return main(["train", "--out", str(out), *TINY_RNN, *extra])


@pytest.fixture(scope="module")
def rnn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rnn") / "run"
    assert train(out, "--steps", "8", "--save-every", "4", "--eval-every", "4") == 0
    return out


def test_the_run_is_a_gru_and_says_so(rnn_run):
    config = json.loads((rnn_run / "config.json").read_text())
    assert config["architecture"] == "rnn" and config["d_model"] == 16 and config["n_encoder_layers"] == 1
    model, tokenizer, meta = load_model(rnn_run)
    assert isinstance(model, RNNSeq2Seq) and meta["architecture"] == "rnn" and meta["step"] == 8
    assert model.config.tgt_vocab_size == len(tokenizer)
    rows = (rnn_run / "metrics.csv").read_text().splitlines()
    assert len(rows) > 1 and "valid_bleu" in rows[0]  # the trainer's metrics, BLEU included
    assert [p.name for p in sorted((rnn_run / "checkpoints").iterdir())][-1].endswith("8")


def test_resume_continues_exactly_as_a_straight_run(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    common = ("--save-every", "3", "--eval-every", "100")
    assert train(straight, "--steps", "6", *common) == 0
    assert train(resumed, "--steps", "3", *common) == 0
    assert main(["train", "--out", str(resumed), "--resume", "--steps", "6", "--quiet", "--threads", "1"]) == 0
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and any("gru" in name for name in a)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)


def test_translate_evaluate_and_explain_run_on_it(rnn_run, capsys, tmp_path):
    capsys.readouterr()
    assert main(["translate", "I love you", "--checkpoint", str(rnn_run)]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    assert main(["translate", "I love you", "--checkpoint", str(rnn_run), "--beam", "3"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    assert main(["evaluate", "--checkpoint", str(rnn_run), "--limit", "3", "--threads", "1",
                 "--output", str(tmp_path / "hyp.txt")]) == 0
    assert "BLEU" in capsys.readouterr().out and len((tmp_path / "hyp.txt").read_text().splitlines()) == 3
    page = tmp_path / "page.html"
    assert main(["explain", "I love you", "--checkpoint", str(rnn_run), "--html", str(page)]) == 0
    shown = capsys.readouterr().out
    # The alignment: one row per produced word over the source words, Luong's formula above it.
    assert "Attention weights (alignment)" in shown and "softmax(h_t · W_a · memoryᵀ)" in shown
    assert "I" in shown and "love" in shown and "you" in shown
    assert "decoder.cross_attention.weights" in page.read_text()


def test_alignment_rows_are_the_models_attention(rnn_run):
    from clearformer.explain.translation import explain_translation

    model, tokenizer, _ = load_model(rnn_run)
    walk = explain_translation(model, tokenizer, "I love you", DecodingOptions(max_new=3))
    last = walk.find("decoder.cross_attention.weights")[-1].matrices[0]
    assert last.col_labels == ["I", "love", "you", "<eos>"]  # sources end in <eos> (the default)
    assert all(sum(row) == pytest.approx(1.0) for row in last.values)


@pytest.mark.parametrize("args, message", [
    (["--set", "n_heads=2"], "--set n_heads: does not apply to --arch rnn"),
    (["--set", "d_ff=32"], "--set d_ff: does not apply to --arch rnn"),
    (["--attention-dropout", "0.1"], "--attention-dropout: does not apply to --arch rnn"),
    (["--set", "d_model=15"], "even d_model"),
])
def test_what_the_gru_cannot_honour_is_a_one_line_error(args, message, tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "r"), *TINY_RNN, "--steps", "1", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_architecture_is_chosen_with_arch_and_kept_on_resume(rnn_run, tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "r"), "--steps", "1", "--set", "architecture=rnn"]) == 2
    assert "--arch" in capsys.readouterr().err
    assert main(["train", "--out", str(rnn_run), "--resume", "--arch", "transformer", "--steps", "9"]) == 2
    assert "a run of --arch rnn" in capsys.readouterr().err


def test_a_config_without_the_field_is_a_transformer():
    data = ModelConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2).to_dict()
    del data["architecture"]
    config = ModelConfig.from_dict(data)
    assert config.architecture == "transformer" and type(build_model(config)) is Transformer
    assert type(build_model(ModelConfig(d_model=8, architecture="rnn"))) is RNNSeq2Seq


def test_export_refuses_the_gru(rnn_run, tmp_path, capsys):
    assert main(["export", "--checkpoint", str(rnn_run), "--to", "marian", str(tmp_path / "out")]) == 2
    assert "GRU baseline has no Marian equivalent" in capsys.readouterr().err
