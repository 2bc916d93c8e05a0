"""The training forward pass as one module: (src, <bos> y, y <eos>) -> summed label-smoothed loss.

Two things make it cheaper than `loss(model(src, tgt_in), tgt_out)` while computing the same value:
  * the output projection and the softmax over the vocabulary (the widest matrices of the model)
    run only on the target positions that hold a label, not on padding;
  * dropout sits where the model's config puts it (`ModelConfig.dropout`, `attention_dropout`,
    `ffn_dropout`; the last two off by default: on a CPU, drawing those random masks costs about as
    much as the matrix products they follow).

Wrapping the model in this module lets DistributedDataParallel see the whole computation in one
`forward`, as it requires. `TrainingForward` adds autocast, and `compile_forward` compiles the
result with torch.compile (forward and backward of model + loss), falling back to eager with one
warning line when the compiler fails (`devices.CompiledOrEager`).

On a GPU the host must not wait for the device inside a step: the labels are counted on the host
before the batch is copied (`to_device`), so selecting the labelled rows needs no device-to-host
copy, and the loop reads losses back only at its logging interval.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from clearformer.data.batching import Batch
from clearformer.devices import compiled_or_eager
from clearformer.train.loss import fused_label_smoothed_sums, label_smoothed_sums


class TranslationLoss(nn.Module):
    """model + label-smoothed cross-entropy over the non-pad target positions."""

    def __init__(self, model: nn.Module, smoothing: float, fused: bool = False) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing
        self.loss = fused_label_smoothed_sums if fused else label_smoothed_sums  # train/loss.py

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor,
                label_count: int | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """src (batch, src_len), tgt_in / tgt_out (batch, tgt_len) ->
        (summed smoothed loss, summed nll, number of labels).

        label_count: the non-pad labels of tgt_out when the caller knows it (counted on the host),
        so no step asks the device how many rows it selected."""
        pad_id = self.model.config.pad_id
        memory, src_mask = self.model.encode(src)
        hidden = self.model.decode(tgt_in, memory, src_mask)  # (batch, tgt_len, d_model)
        if label_count is not None and label_count == tgt_out.numel():
            # Every cell counted (fixed-shape batches, train/shapes.py): project them all, the loss
            # skips the <pad> labels; no selection whose size changes from batch to batch.
            hidden, labels = hidden.flatten(0, 1), tgt_out.flatten()
        elif label_count is None:
            labelled = tgt_out != pad_id
            hidden, labels = hidden[labelled], tgt_out[labelled]
        else:
            rows = labelled_rows(tgt_out, pad_id, label_count)
            hidden, labels = hidden.flatten(0, 1).index_select(0, rows), tgt_out.flatten().index_select(0, rows)
        logits = self.model.project(hidden)  # (labels, vocab): no row for padding
        loss, nll = self.loss(logits, labels, pad_id, self.smoothing)
        return loss, nll, labels.shape[0]


def labelled_rows(tgt_out: torch.Tensor, pad_id: int, label_count: int) -> torch.Tensor:
    """(label_count,) flat indices of the non-pad cells of tgt_out (batch, tgt_len), in order:
    what boolean indexing selects, found by a stable sort (labels first) whose size is known on
    the host (boolean indexing must copy its row count back from the device)."""
    padding = (tgt_out == pad_id).flatten().to(torch.int32)
    return torch.argsort(padding, stable=True)[:label_count]


@dataclasses.dataclass
class CountedBatch(Batch):
    """A Batch on the device with its label count, counted on the host before the copy (a field, so
    DistributedDataParallel's copy of its inputs keeps it)."""

    host_label_count: int | None = None


def to_device(batch, device: torch.device):
    """A copy of `batch` (a dataclass of tensors) on `device`; a translation Batch becomes a
    CountedBatch. On CUDA the tensors go through pinned memory and are copied without blocking,
    so the host prepares the next step meanwhile."""
    def move(tensor: torch.Tensor) -> torch.Tensor:
        if device.type == "cuda":
            return tensor.pin_memory().to(device, non_blocking=True)
        return tensor.to(device)

    moved = {field.name: move(value) if isinstance(value := getattr(batch, field.name), torch.Tensor) else value
             for field in dataclasses.fields(batch)}
    if isinstance(batch, Batch):
        moved.pop("host_label_count", None)
        return CountedBatch(**moved, host_label_count=batch.target_tokens)
    return type(batch)(**moved)


class TrainingForward(nn.Module):
    """network(batch) under autocast to `dtype` (None: fp32): the part of a step compile_forward compiles."""

    def __init__(self, network: nn.Module, device_type: str, dtype: torch.dtype | None) -> None:
        super().__init__()
        self.network = network
        self.device_type = device_type
        self.dtype = dtype

    def forward(self, *args, **kwargs):
        if self.dtype is None:
            return self.network(*args, **kwargs)
        with torch.autocast(device_type=self.device_type, dtype=self.dtype):
            return self.network(*args, **kwargs)


def compile_forward(forward: nn.Module, enabled: bool):
    """The step's forward, compiled when `enabled`, else eager on a compiler failure
    (`devices.compiled_or_eager`, the project's one fallback)."""
    if not enabled:
        return forward
    return compiled_or_eager(forward, "clearformer train", "training")
