"""Checkpoint files: a directory of `config.json` + `model.safetensors` + the tokenizer, written atomically,
and its weights read back (safetensors: never unpickled) into a model built from its config.

The ground floor: it reads and writes tensors and asks the model and tokenizer it is given to save
themselves (config.json carries the folder's `format_version`, config.py). Building a model and a tokenizer
from a folder is `clearformer.load`, above model/ and tokenize/. Every way a weights file can be wrong
(missing, damaged, of another config) raises a `UserError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write, atomic_write_text

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


def save_model(directory: str | Path, model, tokenizer, meta: dict | None = None, facts=None) -> Path:
    """Write a loadable checkpoint directory: config, weights, tokenizer, the run's decoding facts (`facts`, a
    generate/facts.py `DecodingFacts`: decoding.json; every producer of a run gives its own) and optional
    meta.json, each file atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.save(directory / CONFIG_FILE)
    atomic_save_tensors(directory / WEIGHTS_FILE, model_tensors(model))
    tokenizer.save(directory)
    if facts is not None:
        facts.save(directory)
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
