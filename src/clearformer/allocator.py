"""Keep freed memory in the process, so decoding does not pay the kernel for the same pages every step.

A decoding step allocates and frees the same large tensors again and again: the logits of every
hypothesis (128 rows x 8,000 tokens = 4 MB at beam 4), their log-probabilities, the grown and
reordered key/value caches. glibc's malloc serves blocks above its mmap threshold with a fresh
`mmap` and hands them back with `munmap` when freed, and it trims the top of its heap back to the
kernel once more than its trim threshold lies free there. Either way the next step's tensor lands on
pages the kernel must map and zero again, one page fault per 4 KB touched. On this project's 2-core
VM a beam 4 run over 128 sentences (batches of 32, 30 tokens) took 85,000-125,000 page faults this
way, about 750 per step, and none with the setting below (tests/core/test_allocator.py checks the
same on a small model). What that is worth in time varied: in fresh processes that only decode, as
`clearformer translate` does, that beam search ran 5-40% faster with it across runs (a noisy
machine), while `benchmarks/decode_speed.py`, which times long-lived worker processes, measured no
difference (its "glibc's default malloc" row). It costs nothing measurable either way.

`keep_freed_memory()` raises both thresholds (mallopt M_MMAP_THRESHOLD to glibc's 32 MB maximum,
M_TRIM_THRESHOLD to 1 GB): blocks up to 32 MB come from the heap and freed ones stay there for the
next step. The process keeps its peak heap instead of returning it, which is what PyTorch's CPU
performance guide gets from jemalloc or tcmalloc; this gets it from the malloc already loaded. The
`clearformer` command calls it at start; library users may call it themselves. Set
CLEARFORMER_MALLOC=system to leave malloc as it is (and to measure the difference).
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc rejects more on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 1024 * 1024 * 1024

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc malloc as the module docstring says; True when it is (now or already) tuned.

    Does nothing, and returns False, without glibc (macOS, Windows, musl) or when
    CLEARFORMER_MALLOC=system. Safe to call any number of times.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("CLEARFORMER_MALLOC", "").strip().lower() == "system":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; setting either value also turns off glibc's self-adjusting
    # thresholds, which would otherwise drop back to mmap for some sizes.
    _applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _applied
