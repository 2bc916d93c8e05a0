"""Everything a run needs before its first step: device, data, tokenizer, model, optimizer, position.

A fresh run builds the tokenizer from the training split and the model from the preset; a
resumed run (`--resume`) takes the tokenizer, config, weights, optimizer moments, data position,
clock and random generator states from the run's newest step checkpoint instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from clearformer.batching import Example, drop_long
from clearformer.config import ConfigError, ModelConfig, preset
from clearformer.errors import UserError
from clearformer.model.transformer import Transformer
from clearformer.train import corpus, distributed, state
from clearformer.train.options import TrainOptions
from clearformer.train.step import place_dropout


@dataclass
class RunSetup:
    options: TrainOptions
    device: torch.device
    world: distributed.World
    run_dir: Path
    tokenizer: object
    model: Transformer
    optimizer: torch.optim.Optimizer
    train: list[Example]
    valid: list[Example]
    valid_pairs: list[tuple[str, str]]
    source: str
    data_record: dict = field(default_factory=dict)
    dropped: int = 0
    resumed_from: Path | None = None
    trainer_state: dict = field(default_factory=dict)


def resolve_device(name: str, world_local_rank: int = 0) -> torch.device:
    """'auto' -> CUDA when present; 'cuda' under torchrun -> this process's GPU; one-line error if absent."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name!r} is not a device (cpu, cuda, cuda:N, auto)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda: no CUDA GPU is available here (use --device cpu)")
        if device.index is None:
            device = torch.device("cuda", world_local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise UserError(f"--device {name!r}: only cpu and cuda are supported")
    return device


def new_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98, eps = 1e-9; the schedule sets lr each step."""
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)


def model_config(options: TrainOptions, vocab_size: int, pad_id: int) -> ModelConfig:
    fields = dict(options.overrides)
    if options.dropout is not None:
        fields["dropout"] = options.dropout
    try:
        return preset(options.preset, src_vocab_size=vocab_size, tgt_vocab_size=vocab_size,
                      tie_embeddings=options.tie, pad_id=pad_id, **fields)
    except TypeError as error:
        raise UserError(f"--set: {error}") from None
    except ConfigError as error:
        raise UserError(str(error)) from None


def prepare(options: TrainOptions, resume: bool, run_dir: Path) -> RunSetup:
    """Build (or restore) a run; raises UserError for anything the user can fix."""
    options.validate()
    # Under torchrun each process takes the GPU of its LOCAL_RANK (when --device names none).
    device = resolve_device(options.device, int(os.environ.get("LOCAL_RANK", "0")))
    world = distributed.setup(device)
    resumed_from, trainer_state, weights, extra = None, {}, None, {}
    if resume:
        checkpoints = state.step_checkpoints(run_dir)
        if not checkpoints:
            raise UserError(f"{run_dir / 'checkpoints'}: no checkpoint to resume from")
        resumed_from = checkpoints[-1]
        weights, extra, trainer_state = state.load_step_checkpoint(resumed_from)
    torch.manual_seed(options.seed + world.rank)
    splits, source, data_record = corpus.load_splits(options)
    if resume:
        from clearformer.checkpoint import load_weights_into
        from clearformer.tokenize import load_tokenizer

        tokenizer = load_tokenizer(resumed_from)
        try:
            config = ModelConfig.load(resumed_from / "config.json")
        except (ConfigError, TypeError) as error:
            raise UserError(f"{resumed_from / 'config.json'}: damaged ({error})") from None
        model = Transformer(config)
        load_weights_into(model, weights, resumed_from / "model.safetensors")
    else:
        tokenizer = corpus.build_tokenizer(options, splits["train"])
        model = Transformer(model_config(options, len(tokenizer), tokenizer.pad_id))
    place_dropout(model, options.attention_dropout, options.ffn_dropout)
    model.to(device).train()
    limit = min(model.config.max_len, options.batch_tokens)
    train, dropped = drop_long(corpus.encode_pairs(tokenizer, splits["train"], model.config.source_eos), limit)
    valid_pairs = splits["valid"]
    valid, _ = drop_long(corpus.encode_pairs(tokenizer, valid_pairs, model.config.source_eos), limit)
    if not train:
        raise UserError(f"{source}: no training pair fits {limit} tokens (raise --batch-tokens or max_len)")
    optimizer = new_optimizer(model)
    if resume:
        try:
            state.restore_optimizer(optimizer, extra, trainer_state["optimizer"])
        except (KeyError, ValueError, RuntimeError) as error:
            raise UserError(f"{resumed_from}: optimizer state does not fit the model ({error})") from None
        if trainer_state.get("world_size", 1) == world.size:
            distributed.restore_rng_state(extra, world)
    return RunSetup(options, device, world, run_dir, tokenizer, model, optimizer, train, valid, valid_pairs,
                    source, data_record, dropped, resumed_from, trainer_state)
