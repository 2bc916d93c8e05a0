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
        budget = _budget.get()
        if budget is not None:  # the server's bound on one answer (serve/requests.py): stop the work early
            budget.spend(value.numel())
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


class OverBudget(Exception):
    """More numbers recorded than a `RecordBudget` allows."""


class RecordBudget:
    """At most `numbers` recorded values (over every Recorder of this context); OverBudget past them."""

    def __init__(self, numbers: int) -> None:
        self.numbers = numbers
        self.spent = 0

    def spend(self, count: int) -> None:
        self.spent += count
        if self.spent > self.numbers:
            raise OverBudget(f"more than {self.numbers:,} numbers recorded")

    def __enter__(self) -> RecordBudget:
        self._token = _budget.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _budget.reset(self._token)


_budget: contextvars.ContextVar[RecordBudget | None] = contextvars.ContextVar("clearformer_budget", default=None)


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


# ----------------------------------------------------------------------------- interventions (what-if)
#
# The recorder reads; an `Intervention` writes. Modules pass a few named tensors through
# `intervene(self, point, tensor)` (one line at each point); while interventions are active
# (`with Interventions([...]):`) the ones registered for that module and point replace the tensor,
# otherwise the tensor passes through untouched. The points:
#
#   "weights"  a multi-head attention's weights, (batch, heads, q_len, k_len), with the mask of allowed keys:
#              a head switched off gets weights 0 (so its output, 0 · V, is 0), or uniform ones
#   "PE"       a positional encoding's rows, (seq, d_model)
#   "skip"     an Add & Norm's skip input x of x + Sublayer(x), (batch, seq, d_model)
#
# `clearformer.record.interventions` names them for people (`decoder.layers.0.cross_attention.head.2`) and
# checks the names against a model.

_interventions: contextvars.ContextVar[dict | None] = contextvars.ContextVar("clearformer_interventions",
                                                                             default=None)

INTERVENTION_KINDS = ("zero", "zero_head", "uniform_head")


@dataclass(frozen=True)
class Intervention:
    """One change to the forward pass: at `point` of the module named `module` (its trace name),
    `kind` "zero" (the whole tensor, e.g. no positions or no skip), "zero_head" (head `head`'s
    weights, hence its output) or "uniform_head" (head `head`'s weights replaced by uniform ones over the allowed keys).
    `name` is how a person wrote it."""

    name: str
    module: str
    point: str
    kind: str
    head: int | None = None

    def apply(self, value: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.kind == "zero":
            return torch.zeros_like(value)
        changed = value.clone()
        if self.kind == "zero_head":
            changed[:, self.head] = 0
            return changed
        if self.kind == "uniform_head":
            changed[:, self.head] = uniform_weights(value, mask)[:, self.head]
            return changed
        raise ValueError(f"unknown intervention kind {self.kind!r}; one of {', '.join(INTERVENTION_KINDS)}")


def uniform_weights(weights: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Weights (batch, heads, q_len, k_len) -> the same shape, each row 1/n over its n allowed keys
    (`mask` True = may attend, broadcastable; None = every key); a row with no allowed key stays 0."""
    allowed = torch.ones_like(weights) if mask is None else mask.expand(weights.shape).to(weights.dtype)
    return allowed / allowed.sum(dim=-1, keepdim=True).clamp(min=1)


class Interventions:
    """`with Interventions(changes):` applies `changes` (a list of `Intervention`) to every forward pass
    inside the block, in this context only (a server thread's, a test's). The model is never modified."""

    def __init__(self, changes) -> None:
        self.changes: list[Intervention] = list(changes)
        self.table: dict[tuple[str, str], list[Intervention]] = {}
        for change in self.changes:
            self.table.setdefault((change.module, change.point), []).append(change)
        self._token: contextvars.Token | None = None

    def __enter__(self) -> Interventions:
        self._token = _interventions.set(self.table or None)
        return self

    def __exit__(self, *exc) -> None:
        _interventions.reset(self._token)
        self._token = None

    def names(self) -> list[str]:
        return [change.name for change in self.changes]


def intervening() -> bool:
    """Whether some intervention is active (attention then takes the explicit path, where the weights are)."""
    return _interventions.get() is not None


def intervene(module: nn.Module | str, point: str, value: torch.Tensor,
              mask: torch.Tensor | None = None) -> torch.Tensor:
    """`value` as the active interventions for this module and point change it (unchanged without any)."""
    table = _interventions.get()
    if table is None:
        return value
    name = module if isinstance(module, str) else getattr(module, "trace_name", "")
    for change in table.get((name, point), ()):
        value = change.apply(value, mask)
    return value
