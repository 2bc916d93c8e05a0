"""The recorder and the hook points: the modules that train pass their named intermediates through here.

Each module gets a dotted name from its place in the model (for example
`encoder.layers.0.self_attention`) by `name_modules`, and passes tensors under that prefix through
`emit`, one line per point, which returns the tensor the computation goes on with:

    scores = trace.emit(self, "scores", scores)   # "encoder.layers.0.self_attention.scores"

Every name is a hook point, as TransformerLens's `HookPoint`s: readable (`with Recorder() as rec:`
keeps a copy of every value) and writable (`with Hooks({name: fn}):` replaces the value by
`fn(value, point)` while it flows). The what-if interventions (`--ablate`), the logit lens, activation
patching and attribution (`clearformer.explain.why`) are all writes or reads at these names. Two kinds of
record are views, not values the computation goes on with: an attention's `mask` (recorded expanded) and
`output.probabilities` (recorded only for the reader); a hook there changes nothing downstream. With
neither a recorder nor a hook active, `emit` returns its value at once, so training pays one check per call.

Because the explain view, the plots and the web page read these records, they always show the
numbers of the very code that trains; there is no second copy of the math.
"""

from __future__ import annotations

import contextvars
import difflib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from clearformer.record.points import summarize

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


def emit(module: nn.Module | str, what: str, value: torch.Tensor, **meta) -> torch.Tensor:
    """The hook point `<module's trace name>.<what>`: `value` as the active hooks replace it (unchanged
    without any), recorded if a recorder is active. `meta` goes with the record and to the hooks (the
    attention weights pass their mask, so that a hook can give a head uniform weights)."""
    # `active()` and `active_hooks()` inlined: every layer of every decoding step passes here, nearly always with
    # neither, and one sentence at a time the two calls were a measurable share of its time (BENCHMARKS.md,
    # "Firefox's en-pt student")
    if torch.compiler.is_compiling():
        return value
    recorder, hooks = _active.get(), _hooks.get()
    if recorder is None and hooks is None:
        return value
    prefix = module if isinstance(module, str) else getattr(module, "trace_name", type(module).__name__)
    name = f"{prefix}.{what}" if prefix else what
    if hooks is not None:
        for seen in _seen.get():  # the names reached, for each Hooks block's check of its own names
            seen.add(name)
        for hook in hooks.get(name, ()):
            replaced = hook(value, Point(name, None if recorder is None else recorder.step, meta))
            value = value if replaced is None else replaced
    if recorder is not None:
        recorder.add(name, value, **meta)
    return value


def name_modules(root: nn.Module, prefix: str = "") -> None:
    """Give every submodule its dotted path as `trace_name` (called once when a model is built)."""
    for name, module in root.named_modules():
        full = ".".join(part for part in (prefix, name) if part)
        object.__setattr__(module, "trace_name", full)


def name_as(new: nn.Module, old: nn.Module) -> None:
    """A module swapped in for `old` where a run is loaded for decoding (generate/int8.py, generate/shortlist.py)
    answers to `old`'s name, so that every view and --ablate name it as before."""
    object.__setattr__(new, "trace_name", old.trace_name)


# ----------------------------------------------------------------------------- hooks: writing at a name
#
# `with Hooks({name: fn, ...}):` makes `emit` pass the value at `name` through `fn(value, point)` (a
# `Point`: the name, the recorder's step, the emit's notes) and go on with what `fn` returns (None:
# unchanged), in this context only (a server thread's, a test's). The model is never modified. Hooks
# nest: an inner block adds its hooks after the outer block's.
#
# A name that is no point of the model is an error, never a hook that silently does nothing (as
# TransformerLens refuses a name its model has no HookPoint for): with `points` (the model's names, e.g.
# record/points.py `hook_points(model)`, listed without running it) at once, and in any case when the block ends: if the
# block ran the model (some point was reached) and one of its names never was, `UnknownHookPoint` names
# it and the nearest names the model does have.

_hooks: contextvars.ContextVar[dict | None] = contextvars.ContextVar("clearformer_hooks", default=None)
_seen: contextvars.ContextVar[tuple[set[str], ...]] = contextvars.ContextVar("clearformer_seen", default=())

Hook = Callable[[torch.Tensor, "Point"], "torch.Tensor | None"]


@dataclass(frozen=True)
class Point:
    """Where a hook runs: the recorded `name`, the decoding `step` (None outside generation or without a
    recorder) and the emit's `meta` (for the attention weights: `mask`, True = may attend)."""

    name: str
    step: int | None
    meta: dict


class UnknownHookPoint(KeyError):
    """A hook (or intervention) at a name that is no point of the model; the message lists the nearest."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


MAX_PATTERNS = 16  # patterns of the model's points an error lists when no name is near


def unknown_point(name: str, points: Collection[str]) -> UnknownHookPoint:
    """The error for a hook at `name`, listing the (at most 3) nearest of the model's `points` (difflib), or, with
    none near, the model's points as patterns (`encoder.layers.{0-5}.self_attention.weights`)."""
    nearest = difflib.get_close_matches(name, sorted(points), n=3, cutoff=0.5)
    shown = " or ".join([", ".join(nearest[:-1]), nearest[-1]] if len(nearest) > 1 else nearest)
    patterns = summarize(sorted(points))
    listed = ", ".join(patterns[:MAX_PATTERNS]) + (", ..." if len(patterns) > MAX_PATTERNS else "")
    hint = f"did you mean {shown}?" if nearest else f"its points: {listed or 'none'}"
    return UnknownHookPoint(f"{name!r} is not a hook point of this model ({hint})")


def check_points(names: Iterable[str], points: Collection[str]) -> None:
    """UnknownHookPoint for the first of `names` that is not in `points`."""
    for name in names:
        if name not in points:
            raise unknown_point(name, points)


class Hooks:
    """`with Hooks({name: hook or [hooks]}):` replaces the values at those recorded names while the block runs.

    points: the model's hook point names, to refuse an unknown name at once (`check_points`); without it the
    names are checked when the block ends, against the points the block's forward passes reached."""

    def __init__(self, hooks: dict[str, Hook | list[Hook]] | None = None,
                 points: Collection[str] | None = None) -> None:
        self.table: dict[str, list[Hook]] = {}
        self.points = points
        for name, hook in (hooks or {}).items():
            self.add(name, hook)
        self._tokens: tuple[contextvars.Token, contextvars.Token] | None = None
        self.reached: set[str] = set()

    def add(self, name: str, hook: Hook | list[Hook]) -> None:
        if self.points is not None:
            check_points([name], self.points)
        self.table.setdefault(name, []).extend(hook if isinstance(hook, list) else [hook])

    def __enter__(self) -> Hooks:
        outer = _hooks.get() or {}
        merged = {name: list(hooks) for name, hooks in outer.items()}
        for name, hooks in self.table.items():
            merged.setdefault(name, []).extend(hooks)
        self.reached = set()
        self._tokens = (_hooks.set(merged or None), _seen.set((*_seen.get(), self.reached)))
        return self

    def __exit__(self, error_type, *exc) -> None:
        hooks_token, seen_token = self._tokens
        _hooks.reset(hooks_token)
        _seen.reset(seen_token)
        self._tokens = None
        if error_type is None and self.reached:  # the block ran the model: every name must have been reached
            check_points(self.table, self.reached)


def points_reached(run: Callable[[], object]) -> set[str]:
    """The hook point names `run()` passes through, with hooks in force that change nothing (so attention
    takes its explicit path, where its weights are a point) and nothing recorded."""
    reached: set[str] = set()
    tokens = (_hooks.set(_hooks.get() or {}), _seen.set((*_seen.get(), reached)))
    try:
        run()
    finally:
        _hooks.reset(tokens[0])
        _seen.reset(tokens[1])
    return reached


def active_hooks() -> dict[str, list[Hook]] | None:
    """The hooks in force by name, or None (never inside torch.compile, as `active`)."""
    if torch.compiler.is_compiling():
        return None
    return _hooks.get()


def intervening() -> bool:
    """Whether some hook is active (attention then takes the explicit path, where the weights and the
    heads' outputs are)."""
    return active_hooks() is not None


# ----------------------------------------------------------------------------- interventions (what-if)
#
# An `Intervention` is a hook with a name for people: `clearformer.explain.interventions` names them
# (`decoder.layers.0.cross_attention.head.2`) and checks the names against a model. Each one writes at a
# recorded name, `<module>.<point>`:
#
#   "weights"  a multi-head attention's weights, (batch, heads, q_len, k_len), with the mask of allowed keys:
#              a head switched off gets weights 0 (so its output, 0 · V, is 0), or uniform ones
#   "PE"       a positional encoding's rows, (seq, d_model): zeros, no positions
#   "skip"     an Add & Norm's skip input x of x + Sublayer(x), (batch, seq, d_model): zeros, no residual

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

    @property
    def hook_name(self) -> str:
        """The recorded name it writes at."""
        return f"{self.module}.{self.point}" if self.module else self.point

    def hook(self, value: torch.Tensor, point: Point) -> torch.Tensor:
        return self.apply(value, point.meta.get("mask"))

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


class Interventions(Hooks):
    """`with Interventions(changes):` applies `changes` (a list of `Intervention`) to every forward pass
    inside the block: each is a hook at the recorded name it writes (an empty list: no hook, the fast path stays)."""

    def __init__(self, changes) -> None:
        self.changes: list[Intervention] = list(changes)
        super().__init__()
        for change in self.changes:
            self.add(change.hook_name, change.hook)

    def names(self) -> list[str]:
        return [change.name for change in self.changes]
