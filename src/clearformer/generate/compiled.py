"""The one-token decoding step, run eagerly or compiled by `torch.compile`.

The step is the model's own: `model.decode` over the newest token with the model's cache, then
`model.project` (`DecodingOptions.compile`: "on", "off", or "auto"). Compiling changes no number a
test can see (tests/generate/test_compiled.py) and only the speed; the first compiled call of a
process pays the compilation (inductor keeps compiled kernels in its on-disk cache, by default under
the system's temporary folder, `torchinductor_<user>`, so a later process pays less). If compiling
is unavailable or fails, the step runs eagerly after one warning line.

"auto" (the default) runs the step eagerly: compiling did not pay on the CPU in
`benchmarks/decode_speed.py --ab compile` (BENCHMARKS.md, "Decoding: each switch on against off
(alternating A/B)"), and its first call costs far more than a sentence's translation; "on" compiles.
"""

from __future__ import annotations

import sys
import weakref

import torch

from clearformer.record import trace
from clearformer.store import cachedir as cache

COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its compiled step
FAILED: weakref.WeakSet = weakref.WeakSet()  # models whose compilation failed: eager from then on


def eager_step(model, tokens, memory, src_mask, cache, position):
    """tokens (rows, 1) at absolute `position` -> next-token logits (rows, vocab), through the model."""
    return model.project(model.decode(tokens, memory, src_mask, cache, position))[:, -1]


def decode_step(model, compile: str = "off"):
    """The step function for `model` (see `eager_step`): compiled when `compile` is "on" (see the module
    docstring for "auto"); never while a recorder is active (the recorder sees the eager modules)."""
    if compile != "on" or trace.recording() or trace.intervening() or model in FAILED:
        return lambda *inputs: eager_step(model, *inputs)
    compiled = COMPILED.get(model)
    if compiled is None:
        cache.use_for_compiled_code()  # compiled kernels kept where the README says (clearformer.store.cachedir)
        compiled = COMPILED[model] = torch.compile(eager_step, dynamic=True)

    def step(*inputs):
        if model in FAILED:
            return eager_step(model, *inputs)
        try:
            return compiled(model, *inputs)
        except Exception as error:  # noqa: BLE001 - any compiler failure falls back to eager
            FAILED.add(model)
            reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
            print(f"clearformer: warning: torch.compile unavailable ({reason}); decoding eagerly", file=sys.stderr)
            return eager_step(model, *inputs)

    return step
