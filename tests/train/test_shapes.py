"""train/shapes.py and the fused loss: fixed-shape batches hold every pair once, in a few shapes, and a
step compiled for fixed shapes compiles once per shape however the lengths vary (torch._dynamo's own
count); the fused cross_entropy equals the explicit label-smoothed loss; projecting every cell of a
fixed-shape batch gives the loss of projecting only the labelled ones."""

from __future__ import annotations

import random

import pytest
import torch

from clearformer.config import preset
from clearformer.data.batching import Example
from clearformer.model.transformer import Transformer
from clearformer.train.loss import fused_label_smoothed_sums, label_smoothed_sums
from clearformer.train.shapes import FixedShapes
from clearformer.train.step import TrainingForward, TranslationLoss

PAD, BOS, EOS = 0, 1, 2


def examples(count: int, longest: int, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    return [Example(tuple(rng.randrange(3, 40) for _ in range(rng.randint(1, longest))),
                    tuple(rng.randrange(3, 40) for _ in range(rng.randint(1, longest)))) for _ in range(count)]


def test_fixed_shape_batches_hold_every_pair_once_in_the_few_shapes():
    shapes = FixedShapes(budget=256, lengths=(8, 16, 32))
    pairs = examples(200, 30)
    batches = shapes.batches(pairs, seed=3, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    assert {tuple(b.src.shape) for b in batches} <= set(shapes.shapes())
    assert all(b.src.shape == b.tgt_in.shape == b.tgt_out.shape for b in batches)
    seen = sorted((tuple(t for t in row.tolist() if t != PAD), tuple(t for t in out.tolist() if t != PAD))
                  for b in batches for row, out in zip(b.src, b.tgt_out, strict=True) if (row != PAD).any())
    assert seen == sorted((p.src, p.tgt + (EOS,)) for p in pairs)
    assert sum(b.target_tokens for b in batches) == sum(p.tgt_len for p in pairs)
    again = shapes.batches(pairs, seed=3, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    assert all(torch.equal(a.src, b.src) for a, b in zip(batches, again, strict=True))  # seeded


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="rise"):
        FixedShapes(budget=256, lengths=(16, 8))
    with pytest.raises(ValueError, match="longer than the longest bucket"):
        FixedShapes(budget=256, lengths=(8,)).length_for(Example((3,) * 9, (4,)))


class CountingBackend:
    """A torch.compile backend that counts the graphs dynamo hands it and runs them as they are."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def tiny_model():
    config = preset("toy-translate", src_vocab_size=40, tgt_vocab_size=40, pad_id=PAD, dropout=0.0)
    return Transformer(config).train()


def test_a_compiled_step_over_fixed_shapes_compiles_once_per_shape():
    """Batches of varying lengths, padded to 3 shapes: dynamo compiles at most once per shape (the count of
    its graphs stops growing after one batch of each shape), where batches of their own lengths recompile."""
    torch._dynamo.reset()
    shapes = FixedShapes(budget=128, lengths=(8, 16, 32))
    batches = shapes.batches(examples(120, 30, seed=1), seed=0, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    backend = CountingBackend()
    network = TrainingForward(TranslationLoss(tiny_model(), 0.1, fused=True), "cpu", None)
    step = torch.compile(network, backend=backend, dynamic=False)
    seen_shapes: set = set()
    per_shape = None
    for batch in batches + batches:  # two epochs: the second compiles nothing
        loss, _, _ = step(batch.src, batch.tgt_in, batch.tgt_out, batch.tgt_out.numel())
        loss.backward()
        seen_shapes.add(tuple(batch.src.shape))
        if len(seen_shapes) == 1 and per_shape is None:
            per_shape = backend.graphs
    assert len(seen_shapes) == 3 and len({tuple(b.src.shape) for b in batches}) == 3
    assert 1 <= backend.graphs <= 3 * per_shape, (backend.graphs, per_shape)
    # The unpadded batches of the same pairs: one shape per batch, and a compile for each new one. Four
    # shapes are enough to pass the padded batches' count (at most 3 * per_shape): each compile is seconds.
    torch._dynamo.reset()
    free = CountingBackend()
    step = torch.compile(network, backend=free, dynamic=False)
    lengths = set()
    for batch in batches:
        rows = (batch.src != PAD).any(1) | (batch.tgt_out != PAD).any(1)
        cols = max(int((batch.src != PAD).sum(1).max()), int((batch.tgt_out != PAD).sum(1).max()))
        src, tgt_in, tgt_out = (t[rows][:, :cols] for t in (batch.src, batch.tgt_in, batch.tgt_out))
        lengths.add(tuple(src.shape))
        step(src, tgt_in, tgt_out, int((tgt_out != PAD).sum()))
        if len(lengths) > 3:
            break
    assert free.graphs > backend.graphs and len(lengths) > 3
    torch._dynamo.reset()


def test_projecting_every_cell_equals_projecting_the_labelled_ones():
    torch.manual_seed(0)
    model = tiny_model().eval()
    batch = FixedShapes(budget=64, lengths=(8, 16)).batches(examples(6, 7), seed=0, pad_id=PAD, bos_id=BOS,
                                                            eos_id=EOS)[0]
    network = TranslationLoss(model, 0.1)
    labelled = network(batch.src, batch.tgt_in, batch.tgt_out, batch.target_tokens)
    every = network(batch.src, batch.tgt_in, batch.tgt_out, batch.tgt_out.numel())
    torch.testing.assert_close(every[0], labelled[0], rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(every[1], labelled[1], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_fused_loss_equals_the_explicit_one(dtype):
    torch.manual_seed(0)
    x, w = torch.randn(300, 64), torch.randn(1000, 64) * 0.3
    labels = torch.randint(0, 1000, (300,))
    labels[::7] = PAD
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        logits = (x @ w.T).requires_grad_()
        explicit = label_smoothed_sums(logits, labels, PAD, 0.1)
        fused = fused_label_smoothed_sums(logits, labels, PAD, 0.1)
    assert logits.dtype == dtype
    torch.testing.assert_close(fused[0], explicit[0], rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(fused[1], explicit[1], rtol=1e-5, atol=1e-3)
    (grad_explicit,) = torch.autograd.grad(explicit[0], logits)
    (grad_fused,) = torch.autograd.grad(fused[0], logits)
    torch.testing.assert_close(grad_fused.float(), grad_explicit.float(), rtol=1e-2, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by benchmarks/gpu_window.sh)")
@pytest.mark.parametrize("fixed", [False, True])
def test_a_training_step_never_waits_for_the_gpu(fixed):
    """The trainer's step (pinned copy, bf16 forward + loss, backward, clipping, fused Adam) under
    torch.cuda.set_sync_debug_mode("error"): any device-to-host wait inside it raises."""
    from clearformer import devices
    from clearformer.train.step import to_device

    device = torch.device("cuda")
    model = tiny_model().to(device)
    network = TrainingForward(TranslationLoss(model, 0.1, fused=fixed), "cuda", torch.bfloat16)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, **devices.optimizer_implementation(device))
    shapes = FixedShapes(budget=128, lengths=(16, 32))
    batches = shapes.batches(examples(60, 30), seed=0, pad_id=PAD, bos_id=BOS, eos_id=EOS)

    def step(batch):
        moved = to_device(batch, device)
        labels = batch.tgt_out.numel() if fixed else moved.host_label_count
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = network(moved.src, moved.tgt_in, moved.tgt_out, labels)
        (loss / batch.target_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()

    step(batches[0])  # first use: the libraries' one-time set-up may wait
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        losses = [step(batch) for batch in batches[1:4]]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(torch.isfinite(loss) for loss in losses)
