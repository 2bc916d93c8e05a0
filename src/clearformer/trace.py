"""The recorder: the modules that train write their named intermediates here while computing.

Nothing is recorded unless a `Recorder` is active (`with Recorder() as rec:`), so training pays
one `if` per call. Each module gets a dotted name from its place in the model (for example
`encoder.layers.0.self_attention`) by `name_modules`, and emits tensors under that prefix:

    emit(self, "scores", scores)   ->   "encoder.layers.0.self_attention.scores"

Because the explain view, the plots and the web page read these records, they always show the
numbers of the very code that trains; there is no second copy of the math.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

import torch
from torch import nn

_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("clearformer_recorder", default=None)


@dataclass
class Record:
    """One recorded intermediate: its dotted name, a detached copy of the tensor, free-form notes."""

    name: str
    value: torch.Tensor
    step: int | None = None
    meta: dict = field(default_factory=dict)


class Recorder:
    """Collects `Record`s in the order they are computed.

    `step` lets generation tag every record with the decoding step that produced it, so one
    recorder can hold a whole autoregressive translation.
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.step: int | None = None
        self._token: contextvars.Token | None = None

    def __enter__(self) -> Recorder:
        self._token = _active.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _active.reset(self._token)
        self._token = None

    def add(self, name: str, value: torch.Tensor, **meta) -> None:
        self.records.append(Record(name, value.detach().clone().cpu(), self.step, meta))

    def names(self) -> list[str]:
        return [r.name for r in self.records]

    def get(self, name: str, step: int | None = None) -> torch.Tensor:
        """The last tensor recorded under `name` (at decoding `step`, if given)."""
        for record in reversed(self.records):
            if record.name == name and (step is None or record.step == step):
                return record.value
        raise KeyError(f"nothing recorded under {name!r}" + (f" at step {step}" if step is not None else ""))

    def find(self, suffix: str, step: int | None = None) -> list[Record]:
        """All records whose name ends with `suffix` (for example every layer's `.weights`)."""
        return [r for r in self.records if r.name.endswith(suffix) and (step is None or r.step == step)]


def active() -> Recorder | None:
    """The recorder in force, or None (the common, training case).

    None inside torch.compile: the compiler cannot trace a ContextVar (each lookup would cut the
    compiled graph in pieces), and nothing that records (explain, the plots) runs compiled."""
    if torch.compiler.is_compiling():
        return None
    return _active.get()


def recording() -> bool:
    return active() is not None


def emit(module: nn.Module | str, what: str, value: torch.Tensor, **meta) -> None:
    """Record `value` as `<module's trace name>.<what>` if a recorder is active."""
    recorder = active()
    if recorder is None:
        return
    prefix = module if isinstance(module, str) else getattr(module, "trace_name", type(module).__name__)
    recorder.add(f"{prefix}.{what}" if prefix else what, value, **meta)


def name_modules(root: nn.Module, prefix: str = "") -> None:
    """Give every submodule its dotted path as `trace_name` (called once when a model is built)."""
    for name, module in root.named_modules():
        full = ".".join(part for part in (prefix, name) if part)
        object.__setattr__(module, "trace_name", full)
