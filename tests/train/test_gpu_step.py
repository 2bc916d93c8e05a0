"""The GPU path of training, checked on a CPU where it can be: the compiled step against eager,
the host-counted label selection, the optimizer / autocast / compile / batch-size choices per
device, and optimizer state that moves between implementations. CUDA-only paths are skipped here
and run on a machine with a GPU."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from clearformer import devices
from clearformer.config import preset
from clearformer.data.batching import Example, collate
from clearformer.devices import CompiledOrEager
from clearformer.errors import UserError
from clearformer.model.transformer import Transformer
from clearformer.train import state
from clearformer.train.step import TrainingForward, TranslationLoss, labelled_rows, to_device
from clearformer.train.task import TranslationLossOfBatch, paper_adam

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def tiny_model(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    config = preset("toy-translate", d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                    src_vocab_size=20, tgt_vocab_size=20, tie_embeddings="all", dropout=0.0)
    return Transformer(config).train()


def batches():
    yield collate([Example((4, 5, 6, 7), (8, 9)), Example((4,), (10, 11, 12, 13, 14))], 0, 2, 3)
    yield collate([Example((5, 6), (8,)), Example((4, 9, 9), (10, 11)), Example((7,), (12, 13, 14))], 0, 2, 3)


def step_grads(forward, model, batch):
    model.zero_grad(set_to_none=True)
    loss, nll, count = forward(to_device(batch, torch.device("cpu")))
    loss.backward()
    return loss.detach(), nll, count, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_host_counted_selection_is_boolean_indexing():
    """labelled_rows (no device sync) selects the same cells, in the same order, as tgt_out != pad."""
    for batch in batches():
        rows = labelled_rows(batch.tgt_out, 0, batch.target_tokens)
        assert torch.equal(batch.tgt_out.flatten()[rows], batch.tgt_out[batch.tgt_out != 0])
    model = tiny_model()
    batch = next(batches())
    plain = TranslationLoss(model, 0.1)(batch.src, batch.tgt_in, batch.tgt_out)
    counted = TranslationLoss(model, 0.1)(batch.src, batch.tgt_in, batch.tgt_out, batch.target_tokens)
    torch.testing.assert_close(plain[0], counted[0], rtol=0, atol=0)
    assert plain[2] == counted[2] == batch.target_tokens == 9


def test_to_device_carries_the_host_label_count():
    batch = next(batches())
    moved = to_device(batch, torch.device("cpu"))
    assert moved.host_label_count == batch.target_tokens == 9
    assert dataclasses.replace(moved).host_label_count == 9  # DistributedDataParallel copies its inputs so
    assert torch.equal(moved.src, batch.src) and torch.equal(moved.tgt_out, batch.tgt_out)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_compiled_step_matches_eager():
    """torch.compile of forward + loss (train/step.py) gives eager's loss and gradients, over two
    batch shapes (dynamic shapes: one compilation)."""
    if not hasattr(torch, "compile"):
        pytest.skip("this torch has no torch.compile")
    model = tiny_model()
    eager = TrainingForward(TranslationLossOfBatch(model, 0.1), "cpu", None)
    compiled = CompiledOrEager(eager, "clearformer train", "training")
    for batch in batches():
        expected = step_grads(eager, model, batch)
        got = step_grads(compiled, model, batch)
        if compiled.failed:
            pytest.skip(f"torch.compile is not usable here: {compiled.failed}")
        torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got[1], expected[1], rtol=1e-5, atol=1e-5)
        assert got[2] == expected[2] == batch.target_tokens
        for name, grad in expected[3].items():
            torch.testing.assert_close(got[3][name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_compile_failure_falls_back_to_eager_with_one_warning(capsys):
    model = tiny_model()
    eager = TrainingForward(TranslationLossOfBatch(model, 0.1), "cpu", None)
    forward = CompiledOrEager(eager, "clearformer train", "training")

    def broken(*args, **kwargs):
        raise RuntimeError("no C compiler\nsecond line")

    forward.compiled = broken
    batch = next(batches())
    for _ in range(2):
        loss, _, _ = forward(to_device(batch, torch.device("cpu")))
    torch.testing.assert_close(loss, eager(to_device(batch, torch.device("cpu")))[0])
    err = capsys.readouterr().err
    assert err.count("warning: torch.compile failed") == 1 and "no C compiler" in err and "second" not in err


def test_bf16_autocast_forward_runs_in_bf16_with_an_fp32_loss():
    model = tiny_model()
    forward = TrainingForward(TranslationLossOfBatch(model, 0.1), "cpu", torch.bfloat16)
    loss, nll, _ = forward(to_device(next(batches()), torch.device("cpu")))
    assert loss.dtype == torch.float32 and nll.dtype == torch.float32  # log_softmax in fp32
    fp32 = TrainingForward(TranslationLossOfBatch(model, 0.1), "cpu", None)(next(batches()))[0]
    torch.testing.assert_close(loss, fp32, rtol=0.05, atol=0.05)
    assert not torch.equal(loss, fp32)  # the products did run in bf16


def test_optimizer_implementation_per_device():
    assert devices.optimizer_implementation(torch.device("cuda")) == {"fused": True, "foreach": None}
    assert devices.optimizer_implementation(torch.device("cpu")) == {"fused": None, "foreach": True}
    optimizer = paper_adam(tiny_model())
    assert optimizer.param_groups[0]["foreach"] is True and not optimizer.param_groups[0]["fused"]
    assert optimizer.param_groups[0]["betas"] == (0.9, 0.98) and optimizer.param_groups[0]["eps"] == 1e-9


def test_autocast_dtype_and_compile_choice():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert devices.autocast_dtype(cpu, False) is None
    assert devices.autocast_dtype(cpu, True) is torch.bfloat16
    assert not devices.use_compile("auto", cuda) and not devices.use_compile("auto", cpu)  # BENCHMARKS.md
    assert devices.use_compile("on", cpu) and not devices.use_compile("off", cuda)
    with pytest.raises(UserError, match="--compile must be auto, on or off"):
        devices.use_compile("yes", cpu)


def test_gpu_batch_rule():
    """Free memory -> tokens per batch side: half the free memory over the per-token activation
    estimate, a multiple of 1024, within [4096, 24576]."""
    base = preset("base", src_vocab_size=8000, tgt_vocab_size=8000)
    per_token = ((base.n_encoder_layers + 1.5 * base.n_decoder_layers) * (34 * 512 + 5 * 8 * 128) + 16 * 8000)
    gib = 1024**3
    assert devices.gpu_batch_tokens(base, 80 * gib) == devices.GPU_BATCH_MAX  # an H100: the paper's batch
    assert devices.gpu_batch_tokens(base, 1 * gib) == devices.GPU_BATCH_MIN  # never below the CPU's size
    eight = devices.gpu_batch_tokens(base, 8 * gib)
    assert eight == int(0.5 * 8 * gib / per_token) // 1024 * 1024 and eight % 1024 == 0
    small = preset("small", src_vocab_size=8000, tgt_vocab_size=8000)
    assert devices.gpu_batch_tokens(small, 8 * gib) > eight  # a smaller model fits more tokens


def test_cpu_keeps_the_preset_batch(tmp_path):
    from clearformer.commands.train import gpu_batch_tokens_for

    assert gpu_batch_tokens_for("base", "cpu", 8000, 4096) == 4096
    if not torch.cuda.is_available():
        assert gpu_batch_tokens_for("base", "auto", 8000, 4096) == 4096


def test_optimizer_state_moves_between_implementations():
    """A checkpoint saved by fused Adam resumes under foreach (and back): the flags follow the
    device, the moments are kept."""
    model = tiny_model()
    fused = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)  # CPU fused kernels exist in torch >= 2.4
    for batch in batches():
        model.zero_grad()
        TranslationLoss(model, 0.1)(batch.src, batch.tgt_in, batch.tgt_out)[0].backward()
        fused.step()
    tensors, rest = state.optimizer_tensors(fused)
    rest = json.loads(json.dumps(rest))  # as trainer_state.json holds it
    restored = paper_adam(model)
    state.restore_optimizer(restored, tensors, rest)
    assert restored.param_groups[0]["foreach"] is True and not restored.param_groups[0]["fused"]
    first = next(iter(model.parameters()))
    torch.testing.assert_close(restored.state[first]["exp_avg"], fused.state[first]["exp_avg"])
    model.zero_grad()
    TranslationLoss(model, 0.1)(*dataclasses.astuple(next(batches()))[:3])[0].backward()
    restored.step()  # the restored state is usable by the other implementation


@CUDA
def test_cuda_step_is_fused_pinned_and_matches_cpu():
    """On a GPU: fused Adam, pinned non-blocking batch copies, and a bf16 compiled step whose loss
    is the CPU fp32 loss to bf16 precision."""
    device = torch.device("cuda")
    model = tiny_model().to(device)
    optimizer = paper_adam(model)
    assert optimizer.param_groups[0]["fused"] is True
    batch = next(batches())
    moved = to_device(batch, device)
    assert moved.src.is_cuda and moved.host_label_count == batch.target_tokens
    forward = CompiledOrEager(TrainingForward(TranslationLossOfBatch(model, 0.1), "cuda", torch.bfloat16),
                              "clearformer train", "training")
    loss, _, _ = forward(moved)
    loss.backward()
    for group in optimizer.param_groups:
        group["lr"] = 1e-3
    optimizer.step()
    assert forward.failed is None
    cpu_loss = TranslationLossOfBatch(tiny_model(), 0.1)(batch)[0]
    torch.testing.assert_close(loss.float().cpu(), cpu_loss, rtol=0.05, atol=0.05)


@CUDA
def test_cuda_batch_rule_reads_free_memory():
    from clearformer.commands.train import gpu_batch_tokens_for

    tokens = gpu_batch_tokens_for("base", "cuda", 8000, 4096)
    assert devices.GPU_BATCH_MIN <= tokens <= devices.GPU_BATCH_MAX and tokens % 1024 == 0


def test_compile_option_is_checked_and_resumable():
    from clearformer.commands.train import RESUMABLE
    from clearformer.train import TrainOptions

    with pytest.raises(UserError, match="--compile must be one of auto, on, off, not 'yes'"):
        TrainOptions.from_values(steps=1, compile="yes").check()
    assert TrainOptions.from_values(steps=1, compile="on").check().hardware.compile == "on"
    assert "compile" in RESUMABLE
