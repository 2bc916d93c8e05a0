"""A compact training loop for the language model (nanoGPT's recipe).

    random windows of block_size tokens -> next-token cross-entropy -> AdamW (decay on matrices only)
    -> gradient clipping -> linear warmup then cosine decay of the learning rate

The log prints loss, learning rate, tokens/s and MFU (against this machine's measured fp32 matmul
peak, see `clearformer.mfu`) every `log_every` steps, and the validation loss every `eval_every`
steps, when the checkpoint is written. The optimizer state, step and data order are saved beside
the checkpoint (`train_state.safetensors`, safetensors only), so `--resume` continues exactly.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from clearformer import mfu
from clearformer.atomic import atomic_write_text
from clearformer.checkpoint import atomic_save_tensors, read_weights, save_model
from clearformer.errors import UserError

STATE_FILE = "train_state.safetensors"
STATE_META = "train_state.json"


@dataclass
class LMTrainSettings:
    steps: int = 1000
    max_minutes: float = 0.0  # 0 = no time limit; otherwise stop after this much training time
    batch_size: int = 32
    block_size: int = 128
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 250
    eval_batches: int = 20
    log_every: int = 25
    seed: int = 0


def windows(tokens: torch.Tensor, starts: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs tokens[s : s+block] and targets tokens[s+1 : s+block+1] for each start: (batch, block) each."""
    offsets = torch.arange(block + 1)
    chunk = tokens[starts[:, None] + offsets[None, :]]
    return chunk[:, :-1], chunk[:, 1:]


def random_batch(tokens: torch.Tensor, batch: int, block: int, generator: torch.Generator):
    starts = torch.randint(0, len(tokens) - block - 1, (batch,), generator=generator)
    return windows(tokens, starts, block)


@torch.no_grad()
def evaluate(model, tokens: torch.Tensor, batch: int, block: int, batches: int) -> float:
    """Mean next-token loss over fixed, evenly spaced windows of `tokens` (the same every call)."""
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
    model.train()
    return total / n


def learning_rate(step: int, s: LMTrainSettings) -> float:
    """Linear warmup to s.lr, then cosine decay to s.lr * s.min_lr_ratio at s.steps."""
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = min(1.0, (step - s.warmup) / max(1, s.steps - s.warmup))
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model, s: LMTrainSettings) -> torch.optim.AdamW:
    """AdamW(0.9, 0.95); weight decay on matrices only (not on biases, norms or gains)."""
    params = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": s.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=s.lr, betas=(0.9, 0.95))


def save_state(directory: Path, optimizer, step: int, generator: torch.Generator, extra: dict) -> None:
    tensors = {"rng": generator.get_state()}
    for index, state in optimizer.state_dict()["state"].items():
        for name, value in state.items():
            tensors[f"{index}.{name}"] = value if torch.is_tensor(value) else torch.tensor(value)
    atomic_save_tensors(directory / STATE_FILE, tensors)
    atomic_write_text(directory / STATE_META, json.dumps({"step": step, **extra}, indent=2) + "\n")


def load_state(directory: Path, optimizer, generator: torch.Generator) -> dict:
    """Restore optimizer moments and the data generator; returns the saved meta (with "step")."""
    try:
        meta = json.loads((directory / STATE_META).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"{directory / STATE_META}: cannot resume ({error})") from None
    tensors = read_weights(directory / STATE_FILE)
    generator.set_state(tensors.pop("rng"))
    state = optimizer.state_dict()
    per_param: dict[int, dict] = {}
    for key, value in tensors.items():
        index, name = key.split(".", 1)
        per_param.setdefault(int(index), {})[name] = value
    state["state"] = per_param
    optimizer.load_state_dict(state)
    return meta


def train_lm(model, tokenizer, train_tokens: torch.Tensor, valid_tokens: torch.Tensor, s: LMTrainSettings,
             out_dir: str | Path | None, meta: dict | None = None, resume: bool = False, log=print) -> dict:
    """Train `model` in place; returns {"step", "train_loss", "val_loss", "tokens_per_second", "mfu", ...}."""
    out_dir = Path(out_dir) if out_dir is not None else None
    device = next(model.parameters()).device
    block = min(s.block_size, model.config.max_len)
    if len(train_tokens) < block + 2 or len(valid_tokens) < 3:
        raise UserError(f"the corpus is too small: {len(train_tokens)} tokens for windows of {block}")
    torch.manual_seed(s.seed)
    generator = torch.Generator().manual_seed(s.seed)
    optimizer = make_optimizer(model, s)
    step = 0
    if resume:
        step = int(load_state(out_dir, optimizer, generator)["step"])
        log(f"resumed at step {step}")
    first_step = step
    flops = mfu.flops_per_token(model, block)
    peak = mfu.matmul_peak(device)
    log(f"model: {model.num_parameters():,} parameters, {flops / 1e6:.1f} MFLOPs per token (fwd+bwd); "
        f"measured fp32 matmul peak {peak / 1e9:.1f} GFLOP/s; {len(train_tokens):,} training tokens, "
        f"batch {s.batch_size} x {block}")
    model.train()
    summary = {"step": step, "val_loss": None, "train_loss": None}
    window_tokens, window_time, started, trained_time = 0, 0.0, time.perf_counter(), 0.0
    losses: list[float] = []
    while step < s.steps:
        tick = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, s)
        x, y = random_batch(train_tokens, s.batch_size, block, generator)
        logits = model(x.to(device))
        loss = F.cross_entropy(logits.flatten(0, 1), y.to(device).flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
        optimizer.step()
        step += 1
        losses.append(loss.item())
        elapsed = time.perf_counter() - tick
        window_tokens += x.numel()
        window_time += elapsed
        trained_time += elapsed
        if step % s.log_every == 0 or step == s.steps:
            rate = window_tokens / window_time
            summary.update(tokens_per_second=rate, mfu=mfu.mfu(rate, flops, peak))
            log(f"step {step:>6}/{s.steps} | loss {sum(losses) / len(losses):.4f} "
                f"| lr {learning_rate(step - 1, s):.2e} | {rate:,.0f} tok/s "
                f"| MFU {100 * summary['mfu']:.2f}% "
                f"| {time.perf_counter() - started:,.0f}s")
            summary["train_loss"] = sum(losses) / len(losses)
            losses, window_tokens, window_time = [], 0, 0.0
        out_of_time = s.max_minutes > 0 and trained_time >= 60 * s.max_minutes
        if step % s.eval_every == 0 or step == s.steps or out_of_time:
            val = evaluate(model, valid_tokens, s.batch_size, block, s.eval_batches)
            summary.update(step=step, val_loss=val, train_seconds=trained_time)
            log(f"step {step:>6} | val loss {val:.4f} | ppl {math.exp(min(val, 50)):,.1f}")
            if out_dir is not None:
                record = {**(meta or {}), "step": step, "val_loss": val, "settings": asdict(s)}
                save_model(out_dir, model, tokenizer, record)
                save_state(out_dir, optimizer, step, generator, {"val_loss": val})
        if out_of_time:
            log(f"time budget of {s.max_minutes:g} minutes reached at step {step}")
            break
    summary["step"] = step
    if trained_time > 0:  # the whole run's rate, beside the last log window's
        done_tokens = (step - first_step) * s.batch_size * block
        summary["average_tokens_per_second"] = done_tokens / trained_time
        summary["average_mfu"] = mfu.mfu(summary["average_tokens_per_second"], flops, peak)
    return summary
