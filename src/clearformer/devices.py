"""Choosing the torch device a command runs on (one resolver, one set of one-line errors), and what
suits that device: the optimizer implementation, the autocast dtype, compiling, the batch size on a GPU.

`CompiledOrEager` is the project's one "compile, else eager" fallback: training's step (train/step.py)
and decoding's (generate/compiled.py) both go through it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable

import torch

from clearformer.errors import UserError
from clearformer.store import cachedir


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


def optimizer_implementation(device: torch.device) -> dict:
    """Adam's implementation for parameters on `device`, as keyword arguments of torch.optim.Adam.

    On CUDA the fused kernels update every parameter in a few kernel launches instead of several
    per tensor; elsewhere (and with a torch whose Adam has no fused kernels) the foreach
    implementation batches the per-tensor operations. Both compute the same update.
    """
    if device.type == "cuda" and "fused" in inspect.signature(torch.optim.Adam).parameters:
        return {"fused": True, "foreach": None}
    return {"fused": None, "foreach": True}


def autocast_dtype(device: torch.device, bf16: bool) -> torch.dtype | None:
    """The autocast dtype of a run: bfloat16 with --bf16 (matrix products in bf16, the loss and
    softmax in fp32), None (plain fp32) without. One-line error on a GPU without bf16 support."""
    if not bf16:
        return None
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError(f"--bf16: {torch.cuda.get_device_name(device)} has no bfloat16 support (drop --bf16)")
    return torch.bfloat16


def use_compile(setting: str, device: torch.device) -> bool:
    """--compile on|off|auto -> whether the training step is compiled with torch.compile.

    auto stays eager on every device, until a measurement shows compiling pays for a run: on a
    CPU it did not pay in the A/B of docs/gpu.md ("Compiling on a CPU"), and on an H200 a 2-minute
    run spent its whole budget compiling (BENCHMARKS.md, "Translation quality after 2 GPU minutes,
    compiled step"). `on` compiles anywhere.
    """
    if setting not in ("auto", "on", "off"):
        raise UserError(f"--compile must be auto, on or off, not {setting!r}")
    return setting == "on"


class CompiledOrEager:
    """torch.compile(function), falling back to `function` itself, for good, with one warning line on
    stderr, when compiling fails (no compiler, an unsupported platform, a compiler error):

        clearformer train: warning: torch.compile failed (RuntimeError: no C compiler); training eagerly

    `command` names the line's sender ("clearformer train"), `doing` what goes on eagerly ("training").
    Decided once, where a command starts its work: code that runs eagerly never holds one of these.
    """

    def __init__(self, function: Callable, command: str, doing: str, dynamic: bool | None = True) -> None:
        self.eager = function
        self.command, self.doing = command, doing
        cachedir.use_for_compiled_code()  # compiled kernels kept where the README says (clearformer.store.cachedir)
        # Batches change shape every step (token-count batching, a growing cache): dynamic shapes compile once.
        self.compiled = torch.compile(function, dynamic=dynamic)
        self.failed: str | None = None

    def __call__(self, *args, **kwargs):
        if self.failed is None:
            try:
                return self.compiled(*args, **kwargs)
            except torch.OutOfMemoryError:
                raise  # the batch does not fit: eager would not fit either
            except Exception as error:  # noqa: BLE001 - any compiler failure; eager re-raises real errors
                first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
                self.failed = f"{type(error).__name__}: {first_line}"
                print(f"{self.command}: warning: torch.compile failed ({self.failed}); {self.doing} eagerly",
                      file=sys.stderr, flush=True)
        return self.eager(*args, **kwargs)


def compiled_or_eager(function: Callable, command: str, doing: str, dynamic: bool | None = True) -> Callable:
    """`function` in a `CompiledOrEager`; `function` itself, after one warning line, where this torch has
    no torch.compile."""
    if not hasattr(torch, "compile"):
        print(f"{command}: warning: this torch has no torch.compile; {doing} eagerly", file=sys.stderr, flush=True)
        return function
    return CompiledOrEager(function, command, doing, dynamic)


# The batch-size rule of `gpu_batch_tokens`: activation bytes one token leaves for the backward
# pass in one layer, per unit of d_model, with 16-bit activations (Korthikanti et al. 2022,
# "Reducing Activation Recomputation in Large Transformer Models", section 4.1: 34 s b h bytes).
ACTIVATION_BYTES_PER_WIDTH = 34
# The output layer keeps, per target token and vocabulary entry, the bf16 logits, their fp32
# copy, the fp32 log-probabilities and the gradients of both.
OUTPUT_BYTES_PER_VOCAB = 16
GPU_BATCH_MIN, GPU_BATCH_MAX = 4096, 24576  # the paper's batches held about 25,000 tokens per side


def gpu_batch_tokens(config, free_bytes: int, share: float = 0.5, k_len: int = 128) -> int:
    """Padded tokens per batch side for a GPU with `free_bytes` free: `share` of the free memory
    divided by the activation bytes of one source and one target token, in multiples of 1024,
    clamped to [GPU_BATCH_MIN, GPU_BATCH_MAX].

    Per token: encoder layers + 1.5 x decoder layers (their cross-attention) x (34 d_model bytes +
    5 heads k_len bytes of attention scores), plus 16 bytes per vocabulary entry at the output.
    The other half of the memory is left to the weights, Adam's moments, the compiler's buffers
    and the allocator's fragmentation.
    """
    per_layer = ACTIVATION_BYTES_PER_WIDTH * config.d_model + 5 * config.n_heads * k_len
    layers = config.n_encoder_layers + 1.5 * config.n_decoder_layers
    per_token = layers * per_layer + OUTPUT_BYTES_PER_VOCAB * config.tgt_vocab_size
    tokens = int(share * free_bytes / per_token) // 1024 * 1024
    return max(GPU_BATCH_MIN, min(GPU_BATCH_MAX, tokens))


def free_gpu_bytes(device: torch.device) -> int:
    """Free memory of a CUDA device as the driver reports it."""
    free, _ = torch.cuda.mem_get_info(device)
    return int(free)
