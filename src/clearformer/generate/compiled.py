"""The decoder a search calls at every step: `model.decode` itself, or compiled by `torch.compile`.

Decided once, when a search starts (`decoder_for`), as gpt-fast compiles its `decode_one_token` at the
top: eager decoding (the default) calls the model's own bound `decode` and nothing between, so no
wrapper runs at any step. `DecodingOptions.compile`: "on", "off", or "auto". Compiling changes no number a
test can see (tests/generate/test_compiled.py) and only the speed; the first compiled call of a process
pays the compilation (inductor keeps compiled kernels in its on-disk cache, `clearformer.store.cachedir`,
so a later process pays less). If compiling is unavailable or fails, decoding goes on eagerly after one
warning line (`devices.CompiledOrEager`, the project's one fallback, which training's step uses too).

"auto" (the default) runs the step eagerly: compiling did not pay on the CPU in
`benchmarks/decode_speed.py --ab compile` (BENCHMARKS.md, "Decoding: each switch on against off
(alternating A/B)"), and its first call costs far more than a sentence's translation; "on" compiles.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable

from clearformer.devices import compiled_or_eager
from clearformer.record import trace

# model -> its compiled decoder, reused by every later search of the process (and, once compiling
# failed, eager from then on without a second warning).
COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def decode_with(model, *inputs):
    """`model.decode(*inputs)`: the function compiled, with the model as an argument (a bound method kept
    as the value of COMPILED would keep its model, the key, alive for ever)."""
    return model.decode(*inputs)


def decoder_for(model, compile: str = "off") -> Callable:
    """What a search calls as `decode(tokens, memory, src_mask, cache, position)`: `model.decode` itself
    unless `compile` is "on" (see the module docstring for "auto"); never compiled while a recorder or a
    hook is active (they see the eager modules)."""
    if compile != "on" or trace.recording() or trace.intervening():
        return model.decode
    compiled = COMPILED.get(model)
    if compiled is None:
        compiled = COMPILED[model] = compiled_or_eager(decode_with, "clearformer", "decoding")
    return functools.partial(compiled, model)
