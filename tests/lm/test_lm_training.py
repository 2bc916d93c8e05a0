"""The LM task on the one trainer: loss falls, the schedule, MFU's FLOP count, exact resumption after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import torch
from lm_helpers import tiny_config
from safetensors.torch import load_file
from seeds import seed, seed_args
from slowed_cli import slowed_command

from clearformer.cli import main
from clearformer.load import load_model
from clearformer.model.lm import LanguageModel
from clearformer.report.flops import FlopCount
from clearformer.train.lm import LMOptions, learning_rate
from clearformer.train.state import step_checkpoints

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

TRAIN = ["--preset", "lm-tiny", "--tokenizer", "words", "--batch-size", "4", "--block-size", "16",
         "--lr", "1e-2", "--warmup", "2", "--threads", "1", "--quiet", *seed_args()]


def fresh_model(variant="mha"):
    torch.manual_seed(seed(0))
    return LanguageModel(tiny_config(variant))


def test_schedule_warms_up_then_decays_to_the_floor():
    o = LMOptions.from_values(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1).check()
    assert learning_rate(0, o) == pytest.approx(0.1) and learning_rate(9, o) == pytest.approx(1.0)
    assert learning_rate(55, o) == pytest.approx(0.55) and learning_rate(100, o) == pytest.approx(0.1)


def test_flops_per_token_is_nanogpts_formula_for_mha():
    model = fresh_model()
    c = model.config
    n = sum(p.numel() for p in model.parameters())  # tied output: the embedding is a matmul too
    assert FlopCount.of(model).per_token(32) == 6 * n + 12 * c.n_decoder_layers * c.n_heads * c.head_dim * 32


def test_resume_after_kill_equals_straight_run(tmp_path, corpus_file):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    length = ["--steps", "12", "--eval-every", "4", "--save-every", "3", "--attention", "mla"]
    assert main(["lm", "train", "--corpus", str(corpus_file), "--out", str(straight), *TRAIN, *length]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(slowed_command(0.25, "lm", "train", "--corpus", corpus_file, "--out", killed, *TRAIN,
                                              *length), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (killed / "checkpoints" / "step-00000006").is_dir():
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert step_checkpoints(killed)[-1].name in ("step-00000006", "step-00000009")  # killed mid-run
    assert main(["lm", "train", "--out", str(killed), "--resume", "--quiet"]) == 0
    a, b = step_checkpoints(straight)[-1], step_checkpoints(killed)[-1]
    assert a.name == b.name == "step-00000012"
    for name in ("model.safetensors", "optimizer.safetensors"):
        wa, wb = load_file(str(a / name)), load_file(str(b / name))
        assert wa.keys() == wb.keys()
        for key in wa:
            torch.testing.assert_close(wa[key], wb[key], rtol=0, atol=0, msg=key)
    model_a, _, _ = load_model(straight)
    model_b, _, meta = load_model(killed)
    assert meta["kind"] == "lm" and meta["step"] == 12
    for (name, x), y in zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)


def test_training_lowers_the_loss(tmp_path):
    corpus = tmp_path / "pattern.txt"
    corpus.write_text("a b c d e\n" * 200, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["lm", "train", "--corpus", str(corpus), "--out", str(out), *TRAIN, "--steps", "30",
                 "--eval-every", "30"]) == 0
    _, _, meta = load_model(out)
    assert meta["val_loss"] < 0.5  # a period-6 sequence is predictable; ln(vocab) ~ 2.2 at the start
