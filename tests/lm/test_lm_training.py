"""The LM training loop: loss falls, the schedule, MFU's FLOP count, and exact resumption."""

from __future__ import annotations

import pytest
import torch
from lm_helpers import tiny_config

from clearformer import mfu
from clearformer.checkpoint import load_model
from clearformer.lm.training import LMTrainSettings, learning_rate, train_lm
from clearformer.model.lm import LanguageModel
from clearformer.tokenize import WordTokenizer

SETTINGS = dict(steps=6, eval_every=3, log_every=1, batch_size=4, block_size=16, eval_batches=1, lr=1e-2,
                warmup=2)


@pytest.fixture()
def data():
    tokenizer = WordTokenizer.build([" ".join(f"w{i}" for i in range(36))])
    generator = torch.Generator().manual_seed(0)
    train = torch.randint(4, 40, (400,), generator=generator)
    return tokenizer, train, train[:100].clone()


def fresh_model(variant="mha"):
    torch.manual_seed(0)
    return LanguageModel(tiny_config(variant))


def test_schedule_warms_up_then_decays_to_the_floor():
    s = LMTrainSettings(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert learning_rate(0, s) == pytest.approx(0.1) and learning_rate(9, s) == pytest.approx(1.0)
    assert learning_rate(55, s) == pytest.approx(0.55) and learning_rate(100, s) == pytest.approx(0.1)


def test_flops_per_token_is_nanogpts_formula_for_mha():
    model = fresh_model()
    c = model.config
    n = sum(p.numel() for p in model.parameters())  # tied output: the embedding is a matmul too
    assert mfu.flops_per_token(model, 32) == 6 * n + 12 * c.n_decoder_layers * c.n_heads * c.head_dim * 32


def test_resume_continues_exactly(tmp_path, data):
    tokenizer, train, valid = data
    settings = LMTrainSettings(**SETTINGS)
    straight = fresh_model("mla")
    train_lm(straight, tokenizer, train, valid, settings, tmp_path / "a", log=lambda line: None)

    def stop_after_first_checkpoint(line: str) -> None:
        if line.startswith("step      4/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_lm(fresh_model("mla"), tokenizer, train, valid, settings, tmp_path / "b",
                 log=stop_after_first_checkpoint)
    resumed, tokenizer_b, meta = load_model(tmp_path / "b")
    assert meta["step"] == 3
    resumed.train()
    summary = train_lm(resumed, tokenizer_b, train, valid, settings, tmp_path / "b", resume=True,
                       log=lambda line: None)
    assert summary["step"] == 6
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_training_lowers_the_loss(data):
    tokenizer, _, _ = data
    pattern = torch.tensor([5, 6, 7, 8, 9] * 80)
    settings = LMTrainSettings(**{**SETTINGS, "steps": 30})
    summary = train_lm(fresh_model(), tokenizer, pattern, pattern[:60], settings, None, log=lambda line: None)
    assert summary["val_loss"] < 0.5  # a period-5 sequence is predictable; ln(40) = 3.7 at the start
