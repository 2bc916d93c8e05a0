"""Step checkpoints: the model plus everything `--resume` needs to continue a killed run exactly.

    run_dir/checkpoints/step-00001000/
        config.json  model.safetensors  tokenizer.*  meta.json     a loadable model checkpoint
        optimizer.safetensors    Adam's moment tensors + every process's RNG state
        trainer_state.json       step, data position, clock, early-stopping record, options,
                                 optimizer hyper-parameters

Each step directory is built under a hidden temporary name and renamed into place, so a run
killed mid-write (even by SIGKILL) leaves either the complete directory or none of it. Nothing
is pickled: tensors go to safetensors, the rest to JSON.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.load import read_config, read_run_weights
from clearformer.store.atomic import atomic_write_text
from clearformer.store.checkpoint import atomic_save_tensors, read_weights, save_model
from clearformer.store.safeio import read_json

STEP_DIR = re.compile(r"^step-(\d{8})$")
OPTIMIZER_FILE = "optimizer.safetensors"
IMPLEMENTATION = ("fused", "foreach", "capturable")  # optimizer flags that follow the device
STATE_FILE = "trainer_state.json"
FORMAT = 1


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def step_checkpoints(run_dir: Path) -> list[Path]:
    """Complete step checkpoints of a run, oldest first."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := STEP_DIR.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Adam's state as flat tensors ("state.<param index>.<name>") and JSON-able rest."""
    state_dict = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, entries in state_dict["state"].items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{name}"] = value
            else:
                scalars[f"{index}.{name}"] = value
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], rest: dict) -> None:
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    for key, value in rest.get("scalars", {}).items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    # JSON turned tuples such as Adam's betas into lists; give them back their type.
    groups = [{key: tuple(value) if isinstance(value, list) and key != "params" else value
               for key, value in group.items()} for group in rest["param_groups"]]
    # The implementation (fused on a GPU, foreach on a CPU) is the device's, not the checkpoint's:
    # a run saved on one continues on the other.
    for group, current in zip(groups, optimizer.param_groups, strict=False):
        group.update({key: current[key] for key in IMPLEMENTATION if key in current})
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def save_step_checkpoint(run_dir: Path, step: int, model, tokenizer, meta: dict, optimizer,
                         rng_states: dict[str, torch.Tensor], trainer_state: dict, keep: int, facts=None) -> Path:
    """Write run_dir/checkpoints/step-NNNNNNNN atomically; keep only the newest `keep` of them."""
    folder = Path(run_dir) / "checkpoints"
    final = folder / step_dir_name(step)
    temporary = folder / f".tmp-{step_dir_name(step)}-{os.getpid()}"
    if temporary.exists():
        shutil.rmtree(temporary)
    save_model(temporary, model, tokenizer, meta, facts)
    tensors, rest = optimizer_tensors(optimizer)
    tensors.update({f"rng.{name}": value for name, value in rng_states.items()})
    atomic_save_tensors(temporary / OPTIMIZER_FILE, tensors)
    body = {"format": FORMAT, **trainer_state, "optimizer": rest}
    atomic_write_text(temporary / STATE_FILE, json.dumps(body, indent=2) + "\n")
    if final.exists():  # the same step written again (a resumed run): swap, then drop the old one
        stale = folder / f".old-{final.name}-{os.getpid()}"
        os.replace(final, stale)
        os.replace(temporary, final)
        shutil.rmtree(stale, ignore_errors=True)
    else:
        os.replace(temporary, final)
    _fsync_dir(folder)
    for old in step_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (a power cut after it keeps the new directory)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def load_step_checkpoint(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict]:
    """(model weights, optimizer + RNG tensors, trainer state) of a step checkpoint; UserError if damaged."""
    path = Path(path)
    read_config(path)  # a folder of another format is refused first, naming its format_version
    weights = read_run_weights(path / "model.safetensors")
    extra = read_weights(path / OPTIMIZER_FILE)
    state_path = path / STATE_FILE
    state = read_json(state_path, missing="missing (not a resumable checkpoint)")
    required = ("format", "step", "stream", "options", "optimizer", "elapsed_s")
    if not isinstance(state, dict) or any(key not in state for key in required):
        raise UserError(f"{state_path}: damaged (missing fields)")
    if state["format"] != FORMAT:
        raise UserError(f"{state_path}: unsupported trainer state format {state['format']!r}")
    return weights, extra, state


def average_weights(directories: list[Path], shares: list[float] | None = None) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights of several checkpoints of one model (in float64); with `shares`
    (one per checkpoint, summing to 1) the weighted mean."""
    if not directories:
        raise UserError("no checkpoints to average")
    shares = [1 / len(directories)] * len(directories) if shares is None else shares
    total: dict[str, torch.Tensor] = {}
    reference: dict[str, torch.Tensor] = {}
    for directory, share in zip(directories, shares, strict=True):
        weights = read_run_weights(Path(directory) / "model.safetensors")
        if not reference:
            reference = weights
            total = {name: torch.zeros_like(t, dtype=torch.float64) for name, t in weights.items()}
        if set(weights) != set(reference) or any(weights[n].shape != reference[n].shape for n in weights):
            raise UserError(f"{directory}: weights do not match {directories[0]} (another model?)")
        for name, tensor in weights.items():
            total[name] += share * tensor.double()
    return {name: t.to(reference[name].dtype) for name, t in total.items()}
