"""Choosing the torch device a command runs on (one resolver, one set of one-line errors), and what
suits that device: the optimizer implementation, the autocast dtype, compiling, the batch size on a GPU."""

from __future__ import annotations

import inspect

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
