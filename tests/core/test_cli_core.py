"""The core CLI: explain, info, and one-line errors for bad input (no tracebacks)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tolerance import golden_close

from clearformer.cli import main
from clearformer.config import ModelConfig
from clearformer.model.transformer import Transformer
from clearformer.store.checkpoint import save_model
from clearformer.tokenize import WordTokenizer


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_example_prints_the_seeds_steps_with_labels(capsys):
    code, out, _ = run(capsys, "explain", "--example", "i-love-you", "--decimals", "3")
    assert code == 0
    for expected in ("Token ids", "Positional encoding", "Queries Q", "Scores QKᵀ", "Scaled scores",
                     "Attention weights", "Masked example", "Probabilities", "'Je'", "0.613", "4.148"):
        assert expected in out, expected
    assert "3.21" not in out  # the seed's wrong score is not reproduced


def test_explain_json_holds_every_intermediate(capsys, golden):
    code, out, _ = run(capsys, "explain", "--example", "india-is-great", "--format", "json")
    assert code == 0
    data = json.loads(out)
    names = [s["name"] for s in data["steps"]]
    assert "multi_head.concat" in names and "multi_head.output" in names
    step = next(s for s in data["steps"] if s["name"] == "self_attention.weights")
    expected = golden["seed_001_india_is_great"]["weights"]
    assert golden_close(step["matrices"][0]["values"], expected)  # tests/tolerance.py


def test_info_prints_the_parameter_count(capsys):
    code, out, _ = run(capsys, "info", "--preset", "base", "--vocab", "37000")
    assert code == 0 and "63.1M parameters" in out
    code, out, _ = run(capsys, "info", "--preset", "big", "--vocab", "37000", "--format", "json")
    assert code == 0 and 205e6 < json.loads(out)["parameters"] < 220e6


@pytest.mark.parametrize("attention, share", [("mha", "100.0%"), ("gqa", "25.0%"), ("mqa", "12.5%"),
                                              ("mla", "28.1%")])
def test_info_reports_the_kv_cache_of_each_attention_variant(capsys, attention, share):
    code, out, _ = run(capsys, "info", "--preset", "lm-small", "--vocab", "4000", "--attention", attention)
    assert code == 0 and f"{share} of MHA's" in out
    code, out, _ = run(capsys, "info", "--preset", "lm-small", "--vocab", "4000", "--attention", attention,
                       "--format", "json")
    layers, d_model = 4, 256
    expected = {"mha": 2 * d_model, "gqa": 2 * 2 * 32, "mqa": 2 * 32, "mla": 4 * 32 + 16}[attention]
    assert json.loads(out)["kv_cache_bytes_per_token"]["bytes_total"] == expected * 4 * layers


@pytest.fixture
def checkpoint(tmp_path):
    tok = WordTokenizer.build(["I love you", "Je t'aime"])
    tok.source_eos = True  # as `clearformer train` sets it by default
    config = ModelConfig(src_vocab_size=len(tok), tgt_vocab_size=len(tok), d_model=8, n_heads=2, d_ff=16,
                         max_len=6, n_encoder_layers=1, n_decoder_layers=1)
    save_model(tmp_path / "ckpt", Transformer(config), tok)
    return tmp_path / "ckpt"


def test_explain_a_sentence_with_a_checkpoint(capsys, checkpoint):
    code, out, _ = run(capsys, "explain", "I love you", "--checkpoint", str(checkpoint), "--format", "json")
    assert code == 0
    data = json.loads(out)
    stages = {s["stage"] for s in data["steps"]}
    assert {"input", "encoder", "decoder", "output"} <= stages
    cross = [s for s in data["steps"] if s["name"].endswith("cross_attention.weights")]
    assert cross and cross[0]["matrices"][0]["col_labels"] == ["I", "love", "you", "<eos>"]  # source_eos


@pytest.mark.parametrize("argv, message", [
    (["explain", "", "--checkpoint", "{ckpt}"], "empty sentence"),
    (["explain", "zzz qqq", "--checkpoint", "{ckpt}"], "unknown"),
    (["explain", "I love you I love you I", "--checkpoint", "{ckpt}"], "maximum length (6)"),
    (["explain", "I love you", "--checkpoint", "{missing}"], "no such checkpoint"),
    (["explain", "--example", "nope"], "unknown example"),
    (["explain"], "nothing to explain"),
    (["info", "--preset", "huge"], "unknown preset"),
    (["info", "--preset", "lm-small", "--attention", "mha", "--kv-heads", "2"], "applies only to --attention gqa"),
    (["info", "--preset", "lm-small", "--attention", "gqa", "--kv-heads", "3"], "not a multiple"),
])
def test_bad_input_gets_one_line_and_a_non_zero_exit(capsys, checkpoint, tmp_path, argv, message):
    argv = [a.format(ckpt=checkpoint, missing=tmp_path / "missing") for a in argv]
    code, _, err = run(capsys, *argv)
    assert code != 0
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_damaged_and_mismatched_checkpoints(capsys, checkpoint):
    weights = checkpoint / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:100])
    code, _, err = run(capsys, "explain", "I love you", "--checkpoint", str(checkpoint))
    assert code != 0 and "damaged weights" in err and len(err.strip().splitlines()) == 1
    weights.write_bytes(good)
    config = json.loads((checkpoint / "config.json").read_text())
    config["d_model"] = 16
    (checkpoint / "config.json").write_text(json.dumps(config))
    code, _, err = run(capsys, "explain", "I love you", "--checkpoint", str(checkpoint))
    assert code != 0 and ("do not match config.json" in err or "shape" in err)
    (checkpoint / "config.json").write_text("{not json")
    code, _, err = run(capsys, "explain", "I love you", "--checkpoint", str(checkpoint))
    assert code != 0 and "config.json" in err


@pytest.mark.slow
def test_console_script_runs_without_traceback():
    result = subprocess.run([sys.executable, "-m", "clearformer.cli", "explain", "--example", "nope"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "unknown example" in result.stderr
