"""Model FLOPs utilisation (MFU), as nanoGPT and the PaLM paper (appendix B) define it.

    MFU = (model FLOPs per token x tokens per second) / peak FLOP/s of the machine

Model FLOPs are counted once, for every model, by clearformer.report.flops (nanoGPT's 6 N + 12 L H Q T per
token for a language model). The peak is not a datasheet number: it is
measured with large matrix products on this machine (with the thread count in use), in the dtype
the products run in (fp32, or bf16 under --bf16 autocast: a GPU's tensor cores run bf16 many times
faster than fp32), and the best rate ever seen per device and dtype is kept in
clearformer's cache folder (clearformer.store.cachedir: ~/.cache/clearformer/matmul_peak.json unless
CLEARFORMER_CACHE says otherwise).
A peak is a maximum: one measurement taken while something else used the cores reads low (and
would put MFU above 100%), so a new measurement only ever raises the stored value.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.limits import MAX_JSON_FILE_BYTES
from clearformer.store.atomic import atomic_write_text
from clearformer.store.cachedir import cache_root
from clearformer.store.fixed import check_fixed, read_fixed
from clearformer.store.safeio import loads_json


def cache_file() -> Path | None:
    """Where the measured peaks are kept (None: CLEARFORMER_CACHE=off, nothing is kept)."""
    root = cache_root()
    return None if root is None else root / "matmul_peak.json"


def cpu_name() -> str:
    """The processor's model name (/proc/cpuinfo), else what `platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key(device: torch.device, dtype: torch.dtype = torch.float32) -> str:
    """What the peak depends on: processor, thread count, torch version, device, dtype."""
    cpu = cpu_name()
    if device.type == "cuda":
        cpu = torch.cuda.get_device_name(device)
    return (f"{cpu}|threads={torch.get_num_threads()}|torch={torch.__version__}|{device.type}"
            f"|{str(dtype).removeprefix('torch.')}")


def measure_matmul_peak(size: int | None = None, repeats: int = 5, device: str | torch.device = "cpu",
                        dtype: torch.dtype = torch.float32) -> float:
    """Best FLOP/s of (size x size) @ (size x size) and of a (4 size x size/8) @ (size/8 x size/2)
    product (a transformer layer's tall, thin shape) over `repeats` timed runs of each.
    size: 2048 on a CPU, 8192 on a GPU (smaller products leave a GPU's units partly idle)."""
    device = torch.device(device)
    size = size or (8192 if device.type == "cuda" else 2048)
    best = 0.0
    # A generator of its own: measuring must not move the global random state, or a run that measures
    # (the first of a process) and one that reads the stored peak would draw different dropout masks.
    generator = torch.Generator(device=device).manual_seed(0)
    for m, k, n in ((size, size, size), (4 * size, size // 8, size // 2)):
        a = torch.randn(m, k, device=device, dtype=dtype, generator=generator)
        b = torch.randn(k, n, device=device, dtype=dtype, generator=generator)
        for attempt in range(repeats + 1):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            a @ b
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if attempt:  # the first run warms caches and thread pools
                best = max(best, 2 * m * k * n / (time.perf_counter() - start))
    return best


def matmul_peak(device: str | torch.device = "cpu", refresh: bool = True,
                dtype: torch.dtype = torch.float32) -> float:
    """This machine's matmul peak in `dtype` in FLOP/s: the best of a new measurement (about a
    second; skipped with refresh=False when a stored value exists) and every earlier one."""
    device = torch.device(device)
    path = cache_file()
    key = machine_key(device, dtype)
    # A link, FIFO or folder at the cache file's name is a one-line error (store/fixed.py), never followed.
    data = read_fixed(path, MAX_JSON_FILE_BYTES) if path is not None else None
    try:
        known = loads_json(data, str(path)) if data is not None else {}
    except UserError:  # damaged: measured again
        known = {}
    if not isinstance(known, dict):
        known = {}
    stored = known.get(key)
    stored = float(stored) if isinstance(stored, (int, float)) and stored > 0 else 0.0
    if stored and not refresh:
        return stored
    peak = max(stored, measure_matmul_peak(device=device, dtype=dtype))
    if peak == stored:
        return peak
    known[key] = peak
    if path is None:
        return peak
    check_fixed(path)
    try:
        atomic_write_text(path, json.dumps(known, indent=2) + "\n")
    except OSError:
        pass  # a read-only home only costs a re-measurement next time
    return peak


def mfu(tokens_per_second: float, flops_per_token_: float, peak: float) -> float:
    """Fraction of the measured peak that the model's arithmetic used."""
    return tokens_per_second * flops_per_token_ / peak


class MeasuredPeak:
    """The matmul peak a run's MFU is measured against (issue 41: a stored peak measured on a busy machine read
    low, and a run printed "MFU 116.9%"). It starts from the stored best (`matmul_peak`, refresh=False); the
    first time the run's own arithmetic beats it, the peak is measured again (best of several tries, the
    stored value raised), and a share still over 100% is a measurement error: `share` says None and `text`
    says so, never a figure over 100%."""

    def __init__(self, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                 value: float | None = None) -> None:
        self.device, self.dtype = torch.device(device), dtype
        self.value = matmul_peak(self.device, refresh=False, dtype=dtype) if value is None else value
        self.remeasured = False

    def share(self, flops_per_second: float) -> float | None:
        """flops_per_second / the peak, in [0, 1]; None when the arithmetic beat even a new measurement."""
        if not self.value or flops_per_second <= 0:
            return None if not self.value else 0.0
        if flops_per_second > self.value and not self.remeasured:
            self.remeasured = True
            self.value = max(self.value, matmul_peak(self.device, refresh=True, dtype=self.dtype))
        return flops_per_second / self.value if flops_per_second <= self.value else None

    def text(self, flops_per_second: float) -> str:
        """The share as shown ("42.0%"), or "n/a" for one over the measured peak (a measurement error)."""
        share = self.share(flops_per_second)
        return "n/a" if share is None else f"{share:.1%}"
