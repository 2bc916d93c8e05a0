"""Class 2: every size, count and number is checked against clearformer.limits before anything is allocated."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import one_line, run_child, tree_hashes
from safetensors.torch import load_file, save_file

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


@pytest.mark.parametrize("case, argv, expected", [
    ("--beam 1000000", ["translate", "hello", "--beam", "1000000"], "--beam must be at most 64"),
    ("--threads 1000000", ["translate", "hello", "--threads", "1000000"], "--threads must be at most 1024"),
    ("--threads 100000", ["translate", "hello", "--threads", "100000"], "--threads must be at most 1024"),
    ("train --threads 1000000", ["train", "--out", "t", "--threads", "1000000"], "--threads must be at most"),
])
def test_absurd_options_are_refused_before_work(case, argv, expected, toy_run, tmp_path):
    outcome = run_child(case, [*argv, "--checkpoint", str(toy_run)] if argv[0] == "translate" else argv, tmp_path)
    assert expected in one_line(outcome)
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("argv, expected", [
    (["translate", "hello", "--batch-size", "1000000000"], "--batch-size must be at most 4096"),
    (["translate", "hello", "--max-extra", "1000000000"], "--max-extra must be at most 4096"),
    (["translate", "hello", "--alpha", "1e308"], "--alpha must be at most 10"),
    (["translate", "hello", "--alpha", "-1"], "--alpha must be at least 0"),
    (["evaluate", "--beam", "100000"], "--beam must be at most 64"),
    (["lm", "generate", "the", "--temperature", "1e-300"], "--temperature must be at least 0.001"),
    (["lm", "generate", "the", "--temperature", "1e300"], "--temperature must be at most 100"),
    (["lm", "generate", "the", "--seed", str(2**70)], f"--seed must be at most {2**63 - 1}"),
    (["lm", "generate", "the", "--max-new-tokens", "1000000000"], "--max-new-tokens must be at most 4096"),
    (["train", "--seed", str(2**70)], "--seed must be at most"),
    (["lm", "train", "--batch-size", "100000000"], "--batch-size must be at most 4096"),
    (["lm", "explain", "the", "--max-new-tokens", "100000"], "--max-new-tokens must be at most 4096"),
])
def test_numbers_out_of_range_are_one_line(argv, expected, in_process):
    code, _, err = in_process(*argv)
    assert code == 2 and expected in one_line(err)


def with_config(run, **fields):
    config = json.loads((run / "config.json").read_text())
    config.update(fields)
    (run / "config.json").write_text(json.dumps(config))
    return run


@pytest.mark.parametrize("field, value", [("d_model", 10**9), ("tgt_vocab_size", 10**10), ("max_len", 10**11),
                                          ("n_decoder_layers", 10**8), ("d_ff", -5), ("n_encoder_layers", 10**8)])
def test_a_run_config_out_of_range_is_refused_before_building(field, value, run_copy, tmp_path):
    with_config(run_copy, **{field: value}, **({"src_vocab_size": value} if "vocab" in field else {}))
    before = tree_hashes(run_copy)
    line = one_line(run_child(f"run config {field}={value}", ["translate", "hello", "--checkpoint", str(run_copy)],
                              tmp_path))
    assert f"{'vocab_size' if 'vocab' in field else field}={value}" in line
    assert "is out of range" in line and "config.json" in line
    assert tree_hashes(run_copy) == before


def test_a_model_that_cannot_fit_in_memory_is_refused_naming_the_figure(run_copy, tmp_path):
    with_config(run_copy, d_model=16384, n_heads=16, d_ff=131072, n_encoder_layers=64, n_decoder_layers=64)
    line = one_line(run_child("model bigger than memory", ["translate", "hello", "--checkpoint", str(run_copy)],
                              tmp_path))
    assert "the model's weights need about" in line and "GiB of memory" in line


def test_serve_refuses_a_run_with_negative_d_ff_at_start(run_copy, in_process):
    with_config(run_copy, d_ff=-5)
    code, _, err = in_process("serve", "--checkpoint", run_copy, "--port", "0")
    assert code == 2 and "d_ff=-5 is out of range" in one_line(err)


@pytest.mark.parametrize("setting, expected", [("d_ff=-5", "d_ff=-5 is out of range"),
                                               ("d_model=1000000000", "d_model=1000000000 is out of range"),
                                               ("n_encoder_layers=100000000", "n_encoder_layers=100000000")])
def test_train_set_out_of_range_is_refused_before_any_work(setting, expected, in_process, tmp_path):
    code, _, err = in_process("train", "--out", tmp_path / "t", "--set", setting, "--steps", "1", "--quiet")
    assert code == 2 and expected in one_line(err)
    assert not (tmp_path / "t").exists()  # refused before the run folder was made


def test_imported_marian_config_out_of_range_is_refused(marian_source, tmp_path):
    folder = tmp_path / "marian"
    folder.mkdir()
    for entry in marian_source.iterdir():
        (folder / entry.name).symlink_to(entry)
    config = json.loads((marian_source / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**config, "d_model": 10**9, "encoder_layers": 10**8}))
    line = one_line(run_child("marian d_model 1e9", ["import", "marian", str(folder), "--out", "m"], tmp_path))
    assert "is out of range" in line and "config.json" in line


@pytest.mark.parametrize("field, value", [("n_layer", 10**8), ("n_embd", 10**9), ("n_positions", 10**11)])
def test_imported_gpt2_config_out_of_range_is_refused_before_building(field, value, gpt2_source, tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for entry in gpt2_source.iterdir():
        (folder / entry.name).symlink_to(entry)
    config = json.loads((gpt2_source / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**config, field: value}))
    line = one_line(run_child(f"gpt2 {field}", ["lm", "import", "gpt2", str(folder), "--out", "g"], tmp_path))
    assert "is out of range" in line or "GiB" in line


@pytest.mark.parametrize("damage", ["int64", "nan", "inf"])
def test_weights_that_are_not_finite_floats_are_refused_on_load(damage, run_copy, in_process):
    tensors = load_file(str(run_copy / "model.safetensors"))
    name = sorted(tensors)[0]
    if damage == "int64":
        tensors[name] = tensors[name].to(torch.int64)
    else:
        tensors[name] = torch.full_like(tensors[name], float(damage))
    save_file(tensors, str(run_copy / "model.safetensors"))
    code, out, err = in_process("translate", "I love you", "--checkpoint", run_copy)
    line = one_line(err)
    assert code == 2 and out == "" and name in line
    assert ("not a floating-point type" in line) if damage == "int64" else ("NaN or infinite" in line)
