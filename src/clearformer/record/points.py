"""The hook points of a model, listed without running it (as TransformerLens lists its `HookPoint`s).

Every module that passes values through `trace.emit` declares the points it emits, beside the emit calls, by
mixing in `EmitsPoints`: a class-level tuple `POINTS` (the `what` of each `trace.emit(self, what, value)`), or,
where a point exists only in some configurations (the token scaling, Marian's zero start, MLA's query latent and
its two paths), a `points()` method that reads the module's own settings. `hook_points(model)` joins each
declared point to its module's dotted name (`trace.name_modules`):

    hook_points(model)  ->  {"encoder.layers.0.self_attention.weights", "decoder.layers.1.feed_forward.hidden", ...}

tests/core/test_hook_points.py holds every model kind the project builds to it: the names listed are exactly
the names a real forward pass and a real decoding reach, both ways. The search's own records (`generate.chosen`,
`beam.*`, `glossary.forced`) are the search's, not the model's: they are not hook points of a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from torch import nn


class EmitsPoints:
    """Mixed into a module class that calls `trace.emit(self, what, ...)`: the `what`s it emits."""

    POINTS: ClassVar[tuple[str, ...]] = ()

    def points(self) -> tuple[str, ...]:
        """The points this module emits, as it is configured now (default: the class's `POINTS`)."""
        return self.POINTS


def hook_points(model: nn.Module) -> frozenset[str]:
    """Every hook point name of `model` (`<module's dotted name>.<what>`), read from the modules' declarations;
    nothing runs."""
    return frozenset(f"{module.trace_name}.{what}" if module.trace_name else what
                     for module in model.modules() if isinstance(module, EmitsPoints) for what in module.points())


def _ranges(values: set[str]) -> str:
    numbers = sorted(int(v) for v in values)
    if len(numbers) == 1:
        return str(numbers[0])
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{{{numbers[0]}-{numbers[-1]}}}"
    return "{" + ",".join(map(str, numbers)) + "}"


def summarize(names: Iterable[str]) -> list[str]:
    """Names shortened to patterns: every number becomes the range it takes, and a head name with and
    without `.uniform` is written once as `...head.{0-3}[.uniform]`."""
    groups: dict[str, list[set[str]]] = {}
    for name in names:
        numbers = re.findall(r"(?<=[._])\d+(?=\.|$)", name)
        pattern = re.sub(r"(?<=[._])\d+(?=\.|$)", "#", name)
        slots = groups.setdefault(pattern, [set() for _ in numbers])
        for slot, number in zip(slots, numbers, strict=True):
            slot.add(number)
    shown = []
    for pattern, slots in groups.items():
        if pattern.endswith(".uniform") and pattern[: -len(".uniform")] in groups:
            continue
        text = pattern + ("[.uniform]" if f"{pattern}.uniform" in groups else "")
        for slot in slots:
            text = text.replace("#", _ranges(slot), 1)
        shown.append(text)
    return shown
