"""What the trainer needs to know about a model: batches in, loss out.

The loop (train/loop.py) owns everything the two models share: the step (gradient accumulation,
DDP, clipping, optimizer update), the clock and stopping rules, metrics.csv and curve.png, the
progress bar and MFU, validation bookkeeping and the atomic, resumable step checkpoints. A task
owns the rest:

    batches(n)            the next n batches of its endless, resumable data stream
    position / restore    that stream's position (JSON), saved in every step checkpoint
    network(model)        the module whose forward(batch) returns (summed loss, summed nll, labels)
    learning_rate(step)   the schedule (step counts from 1)
    new_optimizer(model)  the optimizer, its lr set by the loop each step
    validate(model, ...)  (loss, nll, BLEU or None) per label on the validation data
    flops(batch)          training FLOPs of a batch (forward + backward), for MFU
    meta()                what the run's meta.json records about data and model

Batches have `.to(device)`, `target_tokens` (labels), `real_tokens` and `padded_tokens`.

TranslationTask is the paper's recipe: token-count batches of sentence pairs, label smoothing,
Adam (0.9, 0.98, 1e-9) with the warmup schedule, greedy BLEU at validation. The language model's
task (nanoGPT's recipe) is clearformer.train.lm.LanguageModelTask.
"""

from __future__ import annotations

from typing import Protocol

import torch

from clearformer.config import ARCHITECTURES
from clearformer.data.batching import BatchStream
from clearformer.devices import optimizer_implementation
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.report.flops import FlopCount
from clearformer.train.schedule import noam_lr
from clearformer.train.step import TranslationLoss
from clearformer.train.validate import validation_bleu, validation_loss


def paper_adam(model: torch.nn.Module) -> torch.optim.Optimizer:
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98, eps = 1e-9; the schedule sets lr each step.
    Fused kernels when the model is on a GPU, foreach otherwise (devices.optimizer_implementation)."""
    device = next(model.parameters()).device
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9,
                            **optimizer_implementation(device))


class Task(Protocol):
    kind: str
    keep_best: bool  # the run folder's model: the best validation loss (True) or the newest (False)
    can_validate: bool

    def batches(self, count: int) -> list: ...
    @property
    def position(self) -> dict: ...
    @property
    def epoch(self) -> int: ...
    def restore(self, position: dict) -> None: ...
    def network(self, model: torch.nn.Module) -> torch.nn.Module: ...
    def learning_rate(self, step: int) -> float: ...
    def new_optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer: ...
    def validate(self, model, device, autocast) -> tuple[float, float, float | None]: ...
    def flops(self, batch) -> float: ...
    def meta(self) -> dict: ...
    def describe(self) -> str: ...


class TranslationLossOfBatch(TranslationLoss):
    """TranslationLoss called with a whole Batch (the trainer's calling convention)."""

    def forward(self, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        # host_label_count: set by step.to_device, so selecting the labels needs no device sync.
        return super().forward(batch.src, batch.tgt_in, batch.tgt_out, getattr(batch, "host_label_count", None))


class TranslationTask:
    kind = "translate"
    keep_best = True

    def __init__(self, options, tokenizer, config, train, valid, valid_pairs, source: str, data_record: dict,
                 dropped: int, flop_count: FlopCount, folded: str = "", facts: DecodingFacts = NO_FACTS) -> None:
        self.recipe = options.recipe
        self.config = config
        self.flop_count = flop_count  # report/flops.py: the model's training FLOPs per batch
        self.tokenizer = tokenizer
        self.facts = facts  # the run's decoding facts: its BLEU decodes as `translate` will (generate/facts.py)
        self.train, self.valid, self.valid_pairs = train, valid, valid_pairs
        self.source, self.data_record, self.dropped = source, data_record, dropped
        self.folded = folded  # TargetFold.summary(): "" when the vocabulary writes every character
        self.stream = BatchStream(train, options.recipe.batch_tokens, options.loop.seed, tokenizer.pad_id,
                                  tokenizer.bos_id, tokenizer.eos_id)

    @property
    def can_validate(self) -> bool:
        return bool(self.valid)

    def batches(self, count: int) -> list:
        return self.stream.take(count)

    @property
    def position(self) -> dict:
        return self.stream.position

    @property
    def epoch(self) -> int:
        return self.stream.epoch

    def restore(self, position: dict) -> None:
        self.stream.epoch, self.stream.index = position["epoch"], position["index"]

    def network(self, model):
        return TranslationLossOfBatch(model, self.recipe.label_smoothing)

    def learning_rate(self, step: int) -> float:
        return noam_lr(step, self.config.d_model, self.recipe.warmup, self.recipe.lr_factor)

    def new_optimizer(self, model):
        return paper_adam(model)

    def validate(self, model, device, autocast):
        loss, nll = validation_loss(model, self.valid, self.tokenizer, self.recipe.batch_tokens,
                                    self.recipe.label_smoothing, device, autocast)
        bleu = None
        if self.recipe.bleu_sentences:
            bleu = validation_bleu(model, self.tokenizer, self.valid_pairs, self.recipe.bleu_sentences, self.facts)
        return loss, nll, bleu

    def flops(self, batch) -> float:
        return self.flop_count.batch(batch.src, batch.tgt_out, self.config.pad_id)

    def meta(self) -> dict:
        return {"architecture": self.config.architecture, "data": self.source, **self.data_record,
                "tokenizer": self.tokenizer.kind,
                "vocab_size": len(self.tokenizer),
                "source_format": "source tokens then <eos>" if self.tokenizer.source_eos
                else "source tokens only (no <bos>/<eos>)",
                "target_format": "decoder input <bos> y, labels y <eos>"}

    def describe(self) -> str:
        dropped = f" ({self.dropped} too long, skipped)" if self.dropped else ""
        default = next(iter(ARCHITECTURES))  # the Transformer needs no word
        model = f"--arch {self.config.architecture}, " if self.config.architecture != default else ""
        return (f"{model}{self.tokenizer.kind} vocabulary of {len(self.tokenizer)}; {len(self.train)} training pairs"
                f"{dropped}, {len(self.valid)} validation pairs from {self.source}"
                + (f"; {self.folded}" if self.folded else ""))
