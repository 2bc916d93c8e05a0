"""Checkpoints: a directory of `config.json` + `model.safetensors` + the tokenizer, written atomically.

`load_model` builds the model with `model.build.build_model`. config.json carries the folder's
`format_version` (config.py: written by every save, checked by every load).

Loading never unpickles anything: weights come from safetensors, everything else from JSON.
Every way a checkpoint can be wrong (missing, damaged, of another config) raises a `UserError`
naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from clearformer.config import ConfigError, ModelConfig
from clearformer.errors import UserError
from clearformer.limits import check_model_size
from clearformer.model.build import build_model
from clearformer.store.atomic import atomic_write, atomic_write_text
from clearformer.store.safeio import read_json
from clearformer.tokenize import load_tokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
META_FILE = "meta.json"


def atomic_save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    tensors = {name: t.detach().contiguous().cpu() for name, t in tensors.items()}
    atomic_write(path, lambda temporary: save_file(tensors, temporary, metadata=metadata))


def model_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with tied (shared) tensors stored once, as safetensors requires."""
    seen: dict[int, str] = {}
    tensors = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key in seen and tensor.numel() > 0:
            continue
        seen[key] = name
        tensors[name] = tensor
    return tensors


def save_model(directory: str | Path, model, tokenizer, meta: dict | None = None) -> Path:
    """Write a loadable checkpoint directory: config, weights, tokenizer (and optional meta.json)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save(directory / CONFIG_FILE)
    atomic_save_tensors(directory / WEIGHTS_FILE, model_tensors(model))
    tokenizer.save(directory)
    if meta is not None:
        atomic_write_text(directory / META_FILE, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return directory


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise UserError(f"{path}: missing (not a clearformer checkpoint?)")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        raise UserError(f"{path}: damaged weights file ({str(error).splitlines()[0]})") from None


def load_weights_into(model: torch.nn.Module, tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Copy tensors into `model`, failing with one line if names or shapes differ (another config)."""
    expected = model_tensors(model)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise UserError(f"{path}: weights do not match config.json ({detail})")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise UserError(f"{path}: {name} has shape {tuple(tensor.shape)}, "
                            f"config.json implies {tuple(expected[name].shape)}")
        check_finite_weight(name, tensor, expected[name], path)
    model.load_state_dict(tensors, strict=False)


def check_finite_weight(name: str, tensor: torch.Tensor, expected: torch.Tensor, path: Path) -> None:
    """A weight must be floating point where the model's is, and finite: an int64 or NaN tensor would
    translate every sentence to an empty line."""
    if expected.is_floating_point() and not tensor.is_floating_point():
        raise UserError(f"{path}: {name} has dtype {tensor.dtype}, not a floating-point type")
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise UserError(f"{path}: {name} holds NaN or infinite values")


def read_config(directory: Path) -> ModelConfig:
    """A checkpoint's config.json (of this format: config.FORMAT_VERSION), or a UserError naming it."""
    config_path = Path(directory) / CONFIG_FILE
    if not config_path.exists():
        raise UserError(f"{config_path}: missing (not a clearformer checkpoint?)")
    try:
        return ModelConfig.load(config_path)
    except ConfigError as error:
        message = str(error)
        raise UserError(message if message.startswith(str(config_path)) else f"{config_path}: {message}") from None


def load_config_and_tokenizer(directory: str | Path):
    """(config, tokenizer) of a checkpoint directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such checkpoint directory")
    return read_config(directory), load_tokenizer(directory)


def load_model(directory: str | Path, device: str | torch.device = "cpu"):
    """(model in eval mode, tokenizer, meta dict) from a checkpoint directory."""
    directory = Path(directory)
    config, tokenizer = load_config_and_tokenizer(directory)
    check_model_size(config, str(directory / CONFIG_FILE))  # before anything is allocated (clearformer.limits)
    model = build_model(config)
    load_weights_into(model, read_weights(directory / WEIGHTS_FILE), directory / WEIGHTS_FILE)
    if len(tokenizer) != config.tgt_vocab_size:
        raise UserError(f"{directory}: tokenizer has {len(tokenizer)} tokens but config.json says "
                        f"tgt_vocab_size={config.tgt_vocab_size}")
    meta = {}
    if (directory / META_FILE).exists():
        meta = read_json(directory / META_FILE)
    return model.to(device).eval(), tokenizer, meta
