"""The language model's task for the one trainer (train/loop.py): nanoGPT's recipe.

    random windows of block_size tokens -> next-token cross-entropy -> AdamW (decay on matrices only)
    -> gradient clipping -> linear warmup then cosine decay of the learning rate

The loop, the run folder, step checkpoints and --resume, metrics.csv, the progress bar with
tokens/s and MFU, device choice and DDP are the translation model's (train/); this module says
only what differs: the data stream, the loss, the schedule, the optimizer and the validation.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from clearformer.config import attention_variant
from clearformer.data import lm as lm_data
from clearformer.errors import UserError
from clearformer.limits import MAX_BATCH_SIZE
from clearformer.options import Options, option, part
from clearformer.report.flops import FlopCount
from clearformer.train.options import Hardware, LoopOptions
from clearformer.train.setup import finish_setup, open_run, restored_model


@dataclass
class LMOptions(Options):
    """A language-model run: the preset and corpus, nanoGPT's recipe, and the one trainer's loop and
    hardware (the same parts as TrainOptions', with the LM's defaults)."""

    preset: str = option("lm-small", "--preset", "lm-tiny, lm-small (default) or lm-base",
                         choices=("lm-tiny", "lm-small", "lm-base"))
    corpus: str = option("", "--corpus", "a text file (one passage per line) or a directory with train.txt and "
                         "valid.txt (default: data/en-web, the World English Bible, built from its package if "
                         "missing)")
    batch_size: int = option(32, "--batch-size", "windows per batch", at_least=1, at_most=MAX_BATCH_SIZE)
    block_size: int = option(128, "--block-size", "tokens per training window (default 128)", at_least=1)
    lr: float = option(2e-3, "--lr", "peak learning rate", above=0.0)
    min_lr_ratio: float = option(0.1, at_least=0.0, at_most=1.0)
    warmup: int = option(100, "--warmup", "warmup steps before the cosine decay (default 100)", at_least=1)
    weight_decay: float = option(0.1, at_least=0.0)
    eval_batches: int = option(20, at_least=1)
    loop: LoopOptions = part(LoopOptions, steps=1000, patience=0, run_dir="runs/lm", save_every=250, keep=2,
                             eval_every=250, log_every=25, seed=0)
    hardware: Hardware = part(Hardware)


def windows(tokens: torch.Tensor, starts: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs tokens[s : s+block] and targets tokens[s+1 : s+block+1] for each start: (batch, block) each."""
    offsets = torch.arange(block + 1)
    chunk = tokens[starts[:, None] + offsets[None, :]]
    return chunk[:, :-1], chunk[:, 1:]


@dataclass
class WindowBatch:
    """inputs, targets: (batch, block) next-token windows; no padding."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def to(self, device) -> WindowBatch:
        return WindowBatch(self.inputs.to(device), self.targets.to(device))

    @property
    def target_tokens(self) -> int:
        return self.targets.numel()

    real_tokens = padded_tokens = target_tokens


class NextTokenLoss(torch.nn.Module):
    """model + summed next-token cross-entropy (the trainer divides by the labels of the whole step)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch: WindowBatch) -> tuple[torch.Tensor, torch.Tensor, int]:
        logits = self.model(batch.inputs)  # (batch, block, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="sum")
        return loss, loss.detach(), batch.targets.numel()


@torch.no_grad()
def evaluate(model, tokens: torch.Tensor, batch: int, block: int, batches: int) -> float:
    """Mean next-token loss over fixed, evenly spaced windows of `tokens` (the same every call)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    block = min(block, len(tokens) - 2)
    count = min(batches * batch, max(1, len(tokens) - block - 1))
    starts = torch.linspace(0, len(tokens) - block - 2, count).long()
    total, n = 0.0, 0
    for i in range(0, count, batch):
        x, y = windows(tokens, starts[i:i + batch], block)
        logits = model(x.to(device))
        total += F.cross_entropy(logits.flatten(0, 1), y.to(device).flatten(), reduction="sum").item()
        n += y.numel()
    model.train(was_training)
    return total / n


def learning_rate(step: int, o: LMOptions) -> float:
    """Linear warmup to o.lr, then cosine decay to o.lr * o.min_lr_ratio at o.steps (step counts from 0)."""
    if step < o.warmup:
        return o.lr * (step + 1) / o.warmup
    progress = min(1.0, (step - o.warmup) / max(1, (o.loop.steps or step + 1) - o.warmup))
    return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model, o: LMOptions) -> torch.optim.AdamW:
    """AdamW(0.9, 0.95); weight decay on matrices only (not on biases, norms or gains)."""
    params = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": o.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=o.lr, betas=(0.9, 0.95))


class LanguageModelTask:
    kind = "lm"
    keep_best = False  # the run folder holds the newest model, as `lm generate` expects
    can_validate = True

    def __init__(self, options: LMOptions, tokenizer, config, train: torch.Tensor, valid: torch.Tensor,
                 corpus: str, words: int, flop_count: FlopCount) -> None:
        self.options, self.tokenizer, self.config = options, tokenizer, config
        self.train, self.valid, self.corpus, self.words = train, valid, corpus, words
        self.block = min(options.block_size, config.max_len)
        if len(train) < self.block + 2 or len(valid) < 3:
            raise UserError(f"the corpus is too small: {len(train)} tokens for windows of {self.block}")
        self.flops_per_token = flop_count.per_token(self.block)  # report/flops.py, nanoGPT's count
        self.generator = torch.Generator().manual_seed(options.loop.seed)
        self.draws = 0
        self.last_valid: float | None = None

    def batches(self, count: int) -> list[WindowBatch]:
        out = []
        for _ in range(count):
            starts = torch.randint(0, len(self.train) - self.block - 1, (self.options.batch_size,),
                                   generator=self.generator)
            out.append(WindowBatch(*windows(self.train, starts, self.block)))
            self.draws += 1
        return out

    @property
    def position(self) -> dict:
        state_bytes = bytes(self.generator.get_state().tolist())
        return {"draws": self.draws, "generator": base64.b64encode(state_bytes).decode("ascii")}

    @property
    def epoch(self) -> int:
        return self.draws * self.options.batch_size * self.block // len(self.train)

    def restore(self, position: dict) -> None:
        raw = base64.b64decode(position["generator"])
        self.generator.set_state(torch.tensor(list(raw), dtype=torch.uint8))
        self.draws = int(position["draws"])

    def network(self, model):
        return NextTokenLoss(model)

    def learning_rate(self, step: int) -> float:
        return learning_rate(step - 1, self.options)

    def new_optimizer(self, model):
        return make_optimizer(model, self.options)

    def validate(self, model, device, autocast):
        with autocast():
            loss = evaluate(model, self.valid, self.options.batch_size, self.block, self.options.eval_batches)
        self.last_valid = loss
        return loss, loss, None

    def flops(self, batch: WindowBatch) -> float:
        return self.flops_per_token * batch.inputs.numel()

    def meta(self) -> dict:
        return {"kind": "lm", "corpus": self.corpus, "corpus_words": self.words, "tokenizer": self.tokenizer.kind,
                "variant": attention_variant(self.config), "val_loss": self.last_valid}

    def describe(self) -> str:
        return (f"{self.tokenizer.kind} vocabulary of {len(self.tokenizer)}; {len(self.train):,} training tokens "
                f"from {self.corpus}, batches of {self.options.batch_size} x {self.block}")


def prepare_language_model(options: LMOptions, resume: bool, overwrite: bool = False, fresh=None):
    """A RunSetup for the LM task. fresh() -> (tokenizer, model, train_lines, valid_lines) builds a new run;
    on --resume the tokenizer and model come from the run's newest checkpoint."""
    options.check()
    run_dir = Path(options.loop.run_dir)
    start = open_run(options, resume, run_dir, overwrite, command="lm train")
    if resume:
        tokenizer, model = restored_model(start)
        train_lines, valid_lines = lm_data.load_corpus(Path(options.corpus) if options.corpus
                                                       else lm_data.default_corpus())
    else:
        tokenizer, model, train_lines, valid_lines = fresh()
    model.to(start.device).train()
    streams = lm_data.build_streams(tokenizer, train_lines, valid_lines)
    task = LanguageModelTask(options, tokenizer, model.config, streams.train, streams.valid, options.corpus,
                             streams.words, FlopCount.of(model))
    return finish_setup(start, options, tokenizer, model, task)
