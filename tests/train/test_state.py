"""Step checkpoints (model + optimizer + RNG + trainer state), their rotation, and checkpoint averaging."""

import json

import pytest
import seeds
import torch
from train_helpers import tiny_args, weights

from clearformer.cli import main
from clearformer.config import preset
from clearformer.errors import UserError
from clearformer.load import load_model
from clearformer.model.transformer import Transformer
from clearformer.store.runs import latest_checkpoint, runs_root
from clearformer.tokenize import WordTokenizer
from clearformer.train.setup import new_optimizer
from clearformer.train.state import (
    average_weights,
    load_step_checkpoint,
    restore_optimizer,
    save_step_checkpoint,
    step_checkpoints,
)

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

TOKENIZER = WordTokenizer.build(["I love you", "Je t'aime"])


def trained_model(seed=0, steps=2):
    torch.manual_seed(seeds.seed(seed))
    config = preset("toy-translate", d_model=16, n_heads=2, d_ff=32, src_vocab_size=len(TOKENIZER),
                    tgt_vocab_size=len(TOKENIZER), tie_embeddings="all")
    model = Transformer(config)
    optimizer = new_optimizer(model)
    for group in optimizer.param_groups:
        group["lr"] = 1e-3
    src = torch.tensor([[4, 5, 6]])
    for _ in range(steps):
        optimizer.zero_grad()
        model(src, torch.tensor([[2, 7, 8]])).logsumexp(-1).sum().backward()
        optimizer.step()
    return model, optimizer


def save(run, step, model, optimizer, keep=5):
    rng = {"cpu.rank0": torch.get_rng_state()}
    state = {"step": step, "stream": {"epoch": 0, "index": step}, "elapsed_s": 1.5, "options": {"seed": 1}}
    return save_step_checkpoint(run, step, model, TOKENIZER, {"step": step}, optimizer, rng, state, keep)


def test_save_load_equality(tmp_path):
    model, optimizer = trained_model()
    rng_at_save = torch.get_rng_state()
    path = save(tmp_path, 2, model, optimizer)
    model_weights, extra, state = load_step_checkpoint(path)
    assert state["step"] == 2 and state["stream"] == {"epoch": 0, "index": 2}
    for name, tensor in model.state_dict().items():
        if name in model_weights:
            assert torch.equal(model_weights[name], tensor)
    restored_model, _, _ = load_model(path)
    for name, tensor in model.state_dict().items():
        assert torch.equal(restored_model.state_dict()[name], tensor), name
    fresh = new_optimizer(restored_model)
    restore_optimizer(fresh, extra, state["optimizer"])
    before, after = optimizer.state_dict(), fresh.state_dict()
    assert before["param_groups"] == after["param_groups"]
    for index, entries in before["state"].items():
        for key, value in entries.items():
            assert torch.equal(after["state"][index][key], value), (index, key)
    assert torch.equal(extra["rng.cpu.rank0"], rng_at_save)
    leftovers = [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")]
    assert not leftovers  # no temporary directories left behind


def test_keep_rotates_and_rewrite_replaces(tmp_path):
    model, optimizer = trained_model()
    for step in (1, 2, 3, 4):
        save(tmp_path, step, model, optimizer, keep=2)
    assert [p.name for p in step_checkpoints(tmp_path)] == ["step-00000003", "step-00000004"]
    save(tmp_path, 4, model, optimizer, keep=2)
    assert [p.name for p in step_checkpoints(tmp_path)] == ["step-00000003", "step-00000004"]


def test_damaged_checkpoint_is_one_line_error(tmp_path):
    model, optimizer = trained_model()
    path = save(tmp_path, 1, model, optimizer)
    data = (path / "optimizer.safetensors").read_bytes()
    (path / "optimizer.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="damaged"):
        load_step_checkpoint(path)
    path = save(tmp_path, 2, model, optimizer)
    (path / "trainer_state.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError, match="trainer_state.json: damaged"):
        load_step_checkpoint(path)


def test_average_is_the_mean(tmp_path):
    first, optimizer = trained_model(seed=0)
    second, _ = trained_model(seed=1)
    a, b = save(tmp_path, 1, first, optimizer), save(tmp_path, 2, second, optimizer)
    mean = average_weights([a, b])
    wa, wb = weights(a), weights(b)
    for name in wa:
        torch.testing.assert_close(mean[name], (wa[name] + wb[name]) / 2)


def test_average_command(tmp_path, capsys):
    tmp_path = runs_root()  # a run in its default place: the average in it becomes the latest (issue 32)
    first, optimizer = trained_model(seed=0, steps=1)
    save(tmp_path / "run", 1, first, optimizer)
    second, _ = trained_model(seed=0, steps=3)
    save(tmp_path / "run", 2, second, optimizer)
    assert main(["average", str(tmp_path / "run"), "--last", "2"]) == 0
    out = tmp_path / "run" / "averaged"
    model, _, meta = load_model(out)
    assert len(meta["averaged"]) == 2 and latest_checkpoint() == out.resolve()
    expected = (first.state_dict()["encoder.layers.0.feed_forward.linear_1.weight"]
                + second.state_dict()["encoder.layers.0.feed_forward.linear_1.weight"]) / 2
    torch.testing.assert_close(model.state_dict()["encoder.layers.0.feed_forward.linear_1.weight"], expected)
    assert main(["average", str(tmp_path / "run"), "--last", "3"]) == 2
    assert "only 2 checkpoint(s)" in capsys.readouterr().err
    assert json.loads((out / "meta.json").read_text())["step"] == 2
    assert main(["average", str(tmp_path / "run"), "--last", "2", "--out", str(tmp_path.parent / "avg")]) == 0
    assert latest_checkpoint() == out.resolve()  # an --out outside runs/ leaves LATEST alone


def test_early_stopping(tmp_path):
    """With a learning rate of ~0 the validation loss cannot improve: patience 2 stops after 3 validations."""
    run = tmp_path / "run"
    assert main(tiny_args(run, "--steps", "50", "--eval-every", "1", "--patience", "2", "--lr-factor", "1e-9",
                          "--bleu-sentences", "0", "--save-every", "100")) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stopped_because"].startswith("early stopping") and summary["step"] == 3
    assert summary["best_step"] == 1
    assert json.loads((run / "meta.json").read_text())["step"] == 1  # the run's model is the best one
