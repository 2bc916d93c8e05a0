"""Choosing the torch device a command runs on: one resolver, one set of one-line errors."""

from __future__ import annotations

import torch

from clearformer.errors import UserError


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """'auto' -> CUDA when present; 'cuda' under torchrun -> this process's GPU; one-line error if absent."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device {name!r} is not a device (cpu, cuda, cuda:N, auto)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: no CUDA GPU is available here (use --device cpu)")
        if device.index is None:
            device = torch.device("cuda", local_rank)
        if device.index >= torch.cuda.device_count():
            raise UserError(f"--device {name}: this machine has {torch.cuda.device_count()} GPU(s)")
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise UserError(f"--device {name!r}: only cpu and cuda are supported")
    return device
