"""Recompute a hand-worked self-attention example and point at the wrong cells (`clearformer check FILE`,
registered by commands/check.py).

The file (JSON) gives the inputs and claims any subset of the steps

    embeddings (+ PE) -> X -> Q, K, V -> scores = Q K^T -> scaled = scores / sqrt(d_k)
                      -> weights = softmax(scaled, masked cells 0) -> output = weights V

    {"tokens": [...], "d_k": 4, "mask": "none" | "causal",
     "given": {"embeddings": [[...]], "positional": "sinusoidal" | "none", "W_Q": .., "W_K": .., "W_V": ..}
            | {"X": [[...]], "W_Q": .., "W_K": .., "W_V": ..}  |  {"Q": [[...]], "K": .., "V": ..},
     "claimed": {"PE": .., "X": .., "Q": .., "K": .., "V": .., "scores": .., "scaled": .., "weights": ..,
                 "output": ..},
     "source": "...", "note": "..."}                      (source and note: free text, not checked)

A claimed cell is right when it lies within half a unit of its own last written decimal (inclusive;
`0.50` has two, `3` none) of the value computed from the *claimed* previous steps, so honest
rounding passes and one mistake is not blamed on every later step. A cell that is the correctly
rounded value computed from the given inputs is right as well: printouts of full-precision runs
(8 decimals of every step) differ from their own rounded previous step by more than half a unit.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.limits import MAX_CHECK_FILE_BYTES, MAX_JSON_DEPTH
from clearformer.model.attention import causal_mask, masked_softmax
from clearformer.model.embedding import sinusoidal_table
from clearformer.store import safeio

STEPS = ("PE", "X", "Q", "K", "V", "scores", "scaled", "weights", "output")
TOKEN_COLUMNS = {"scores", "scaled", "weights"}  # their columns are the keys (tokens), not dimensions
FORMS = {"embeddings": ("embeddings", "positional", "W_Q", "W_K", "W_V"),
         "X": ("X", "W_Q", "W_K", "W_V"), "Q": ("Q", "K", "V")}
TOP_KEYS = ("tokens", "d_k", "mask", "given", "claimed", "source", "note")
# Float64 recomputation error, relative: far below any decimal a person writes.
FLOAT_SLACK = 1e-12


@dataclass
class WrongCell:
    row: int
    col: int
    claimed: float
    expected: float      # computed from the claimed previous steps: the value used for judging
    from_inputs: float   # computed from the given inputs alone
    claimed_text: str    # the number as written in the file


@dataclass
class StepResult:
    step: str
    ok: bool
    wrong: list[WrongCell] = field(default_factory=list)
    after_claims: bool = False  # True when an earlier claimed step fed this step's expected values


@dataclass
class CheckResult:
    ok: bool
    steps: list[StepResult]
    tokens: list[str]
    given: str  # "embeddings", "X" or "Q" (the form of `given`)
    d_k: int
    mask: str

    def to_dict(self) -> dict:
        """{"ok", "steps": [{"step", "ok", "wrong": [{"row", "col", "claimed", "expected", ...}]}]}"""
        return {"ok": self.ok, "steps": [
            {"step": s.step, "ok": s.ok, "wrong": [
                {"row": w.row, "col": w.col, "claimed": w.claimed, "expected": w.expected,
                 "from_inputs": w.from_inputs} for w in s.wrong]} for s in self.steps]}


@dataclass
class Example:
    tokens: list[str]
    form: str
    d_k: int
    mask: str
    positional: str                            # "sinusoidal" or "none" (used with given embeddings)
    given: dict[str, torch.Tensor]             # float64 (rows, cols), by name (X, W_Q, ...)
    claimed: dict[str, list[list[Decimal]]]    # the numbers as written, by step


# ----------------------------------------------------------------------------- reading


def read_example(path: str | Path) -> dict:
    """The file's JSON with every number kept as a Decimal of its literal text (`0.50` stays 0.50).

    Files over MAX_CHECK_FILE_BYTES and JSON nested too deeply to parse are one-line UserErrors.
    """
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = 0  # missing or unreadable: the reader below says which
    if size > MAX_CHECK_FILE_BYTES:
        raise UserError(f"{path}: {size:,} bytes; a worked example is at most {MAX_CHECK_FILE_BYTES:,}")
    # Counted while reading too: stat() says 0 bytes for /dev/zero, a FIFO or /dev/stdin.
    text = safeio.read_text(path, MAX_CHECK_FILE_BYTES)
    if safeio.nesting_depth(text) > MAX_JSON_DEPTH:
        raise UserError(f"{path}: JSON nested too deeply (a worked example needs lists of lists)")
    try:
        # NaN / Infinity stay strings, so they are reported as "not a number" at their place.
        return json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=str)
    except json.JSONDecodeError as error:
        raise UserError(f"{path}:{error.lineno}:{error.colno}: not JSON: {error.msg}") from None
    except (RecursionError, ValueError) as error:
        raise UserError(f"{path}: unusable JSON ({str(error).splitlines()[0][:120]})") from None


def _number(value, where: str) -> Decimal:
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        number = Decimal(int(value))
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = Decimal(repr(float(value)))  # shortest round-trip text: 0.5 -> one decimal
    else:
        raise ValueError(f"{where} is not a number ({json.dumps(value, default=str)})")
    if not number.is_finite() or not math.isfinite(float(number)):
        raise ValueError(f"{where} is not a finite number ({value})")
    return number


def _matrix(value, where: str) -> list[list[Decimal]]:
    """A non-empty list of equally long, non-empty rows of numbers."""
    if not isinstance(value, list) or not value or not all(isinstance(row, list) and row for row in value):
        raise ValueError(f"{where} is not a matrix (a list of rows, each a non-empty list of numbers)")
    width = len(value[0])
    for r, row in enumerate(value):
        if len(row) != width:
            raise ValueError(f"{where} row {r} has {len(row)} numbers, row 0 has {width}")
    return [[_number(cell, f"{where}[{r}][{c}]") for c, cell in enumerate(row)]
            for r, row in enumerate(value)]


def _tensor(grid: list[list[Decimal]]) -> torch.Tensor:
    return torch.tensor([[float(cell) for cell in row] for row in grid], dtype=torch.float64)


def _shape(t: torch.Tensor | tuple[int, int]) -> str:
    rows, cols = tuple(t.shape) if isinstance(t, torch.Tensor) else t
    return f"{rows}x{cols}"


def _choice(data: dict, key: str, allowed: tuple[str, ...], default: str, where: str = "") -> str:
    value = data.get(key, default)
    if value not in allowed:
        shown = json.dumps(value, default=str)
        raise ValueError(f"{where}{key} is {shown}; use one of: {', '.join(allowed)}")
    return value


def _parse_given(given_raw, n: int) -> tuple[str, str, dict[str, torch.Tensor], int, int]:
    """-> (form, positional, matrices, width of Q and K, width of V), shapes checked."""
    if not isinstance(given_raw, dict):
        raise ValueError("given is missing or not an object (embeddings + W_Q/W_K/W_V, X + W_Q/W_K/W_V, "
                         "or Q/K/V)")
    forms = [form for form in FORMS if form in given_raw]
    if len(forms) != 1:
        found = f"both {' and '.join(forms)}" if forms else "none of embeddings, X, Q"
        raise ValueError(f"given must hold exactly one of embeddings, X or Q (found {found})")
    form = forms[0]
    for key in FORMS[form]:
        if key not in given_raw and key != "positional":
            raise ValueError(f"given has {form} but no {key}")
    for key in given_raw:
        if key not in FORMS[form]:
            raise ValueError(f"given.{key} does not belong with given.{form} "
                             f"(expected: {', '.join(FORMS[form])})")
    positional = _choice(given_raw, "positional", ("sinusoidal", "none"), "sinusoidal", "given.")
    given = {key: _tensor(_matrix(given_raw[key], f"given.{key}"))
             for key in FORMS[form] if key != "positional"}

    first = given[form]
    if first.shape[0] != n:
        raise ValueError(f"given.{form} has {first.shape[0]} rows but there are {n} tokens")
    if form == "Q":
        for key in ("K", "V"):
            if given[key].shape[0] != n:
                raise ValueError(f"given.{key} has {given[key].shape[0]} rows but there are {n} tokens")
        if given["K"].shape[1] != given["Q"].shape[1]:
            raise ValueError(f"given.K is {_shape(given['K'])} but Q is {_shape(given['Q'])}: QK^T needs "
                             "equal widths")
        d_q, d_v = given["Q"].shape[1], given["V"].shape[1]
    else:
        d_model = first.shape[1]
        for key in ("W_Q", "W_K", "W_V"):
            if given[key].shape[0] != d_model:
                raise ValueError(f"given.{key} has {given[key].shape[0]} rows but {form} has width {d_model}")
        if given["W_K"].shape[1] != given["W_Q"].shape[1]:
            raise ValueError(f"given.W_K is {_shape(given['W_K'])} but W_Q is {_shape(given['W_Q'])}: "
                             "Q and K need equal widths")
        d_q, d_v = given["W_Q"].shape[1], given["W_V"].shape[1]
    return form, positional, given, d_q, d_v


def parse_example(data) -> Example:
    """Validate the JSON object (as `read_example` returns it); ValueError names the first problem."""
    if not isinstance(data, dict):
        raise ValueError("the top level is not a JSON object")
    for key in data:
        if key not in TOP_KEYS:
            raise ValueError(f"unknown key {key!r} (known: {', '.join(TOP_KEYS)})")
    tokens = data.get("tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise ValueError("tokens is missing or not a non-empty list of strings")
    mask = _choice(data, "mask", ("none", "causal"), "none")
    n = len(tokens)
    form, positional, given, d_q, d_v = _parse_given(data.get("given"), n)
    d_k = d_q
    if "d_k" in data:
        number = _number(data["d_k"], "d_k")
        if number != number.to_integral_value() or number <= 0:
            raise ValueError(f"d_k is {data['d_k']}; it must be a positive whole number")
        d_k = int(number)

    claimed_raw = data.get("claimed")
    if not isinstance(claimed_raw, dict) or not claimed_raw:
        raise ValueError("claimed is missing or empty: nothing to check")
    width = given[form].shape[1]
    shapes = {"PE": (n, width), "X": (n, width), "Q": (n, d_q), "K": (n, d_q), "V": (n, d_v),
              "scores": (n, n), "scaled": (n, n), "weights": (n, n), "output": (n, d_v)}
    available = set(STEPS[STEPS.index(form if form != "embeddings" else "PE"):])
    if form == "embeddings" and positional == "none":
        available.discard("PE")
    claimed = {}
    for step, value in claimed_raw.items():
        if step not in STEPS:
            raise ValueError(f"claimed has unknown step {step!r} (known: {', '.join(STEPS)})")
        if step not in available:
            why = "positional is none" if step == "PE" and form == "embeddings" else f"given starts at {form}"
            raise ValueError(f"claimed.{step} cannot be checked: {why}")
        grid = _matrix(value, f"claimed.{step}")
        rows, cols = len(grid), len(grid[0])
        if (rows, cols) != shapes[step]:
            what = "tokens x tokens" if step in TOKEN_COLUMNS else "tokens x dimensions"
            raise ValueError(f"claimed.{step} is {rows}x{cols}; expected {_shape(shapes[step])} ({what})")
        claimed[step] = grid
    return Example(tokens, form, d_k, mask, positional, given, claimed)


# ----------------------------------------------------------------------------- recomputing


def _recipes(example: Example) -> dict:
    """step -> (the steps it is computed from, how); the project's own PE and masked softmax."""
    n = len(example.tokens)
    mask = causal_mask(n) if example.mask == "causal" else None
    recipes = {
        "Q": (("X", "W_Q"), torch.matmul),
        "K": (("X", "W_K"), torch.matmul),
        "V": (("X", "W_V"), torch.matmul),
        "scores": (("Q", "K"), lambda q, k: q @ k.T),
        "scaled": (("scores",), lambda s: s / math.sqrt(example.d_k)),
        "weights": (("scaled",), lambda s: masked_softmax(s, mask)),
        "output": (("weights", "V"), torch.matmul),
    }
    if example.form == "embeddings":
        width = example.given["embeddings"].shape[1]
        if example.positional == "sinusoidal":
            recipes["PE"] = ((), lambda: sinusoidal_table(n, width, dtype=torch.float64))
            recipes["X"] = (("embeddings", "PE"), torch.add)
        else:
            recipes["X"] = (("embeddings",), torch.clone)
    return recipes


def recompute(example: Example) -> tuple[dict, dict, dict]:
    """Two chains through the steps: `judged` computes each step from the claimed previous steps
    where the file claims them, `from_inputs` from the given inputs alone; `after_claims[step]`
    says whether a claimed step fed `judged[step]`. Given steps are the same in both."""
    from_inputs = dict(example.given)
    basis = dict(from_inputs)
    judged, after_claims = dict(from_inputs), {}
    recipes = _recipes(example)
    for step in STEPS:
        if step in example.given or step not in recipes:
            continue
        deps, compute = recipes[step]
        from_inputs[step] = compute(*(from_inputs[d] for d in deps))
        judged[step] = compute(*(basis[d] for d in deps))
        after_claims[step] = any(d in example.claimed or after_claims.get(d, False) for d in deps)
        basis[step] = _tensor(example.claimed[step]) if step in example.claimed else judged[step]
    return judged, from_inputs, after_claims


def within_half_unit(claimed: Decimal, value: float) -> bool:
    """|claimed - value| <= half a unit of claimed's last written decimal (inclusive), exactly."""
    half_unit = Decimal(5).scaleb(claimed.as_tuple().exponent - 1)
    slack = Decimal(FLOAT_SLACK * max(1.0, abs(value)))
    return abs(claimed - Decimal(value)) <= half_unit + slack


def check(example: Example) -> CheckResult:
    judged, from_inputs, after_claims = recompute(example)
    steps = []
    for step in STEPS:
        if step not in example.claimed:
            continue
        wrong = []
        for r, row in enumerate(example.claimed[step]):
            for c, cell in enumerate(row):
                expected, true = float(judged[step][r, c]), float(from_inputs[step][r, c])
                if not (within_half_unit(cell, expected) or within_half_unit(cell, true)):
                    wrong.append(WrongCell(r, c, float(cell), expected, true, str(cell)))
        steps.append(StepResult(step, not wrong, wrong, after_claims.get(step, False)))
    return CheckResult(all(s.ok for s in steps), steps, example.tokens, example.form, example.d_k,
                       example.mask)


def check_example(data_or_path: dict | str | Path) -> CheckResult:
    """Check a worked example: a path to its JSON file, or the object itself.

    From a file every number keeps its written decimals; in an object, Decimal values keep theirs
    and a float's decimals are those of its shortest repr (0.50 becomes 0.5). Raises `UserError`
    (one line naming the problem) when the example is unusable.
    """
    source = "example" if isinstance(data_or_path, dict) else str(data_or_path)
    data = data_or_path if isinstance(data_or_path, dict) else read_example(data_or_path)
    try:
        return check(parse_example(data))
    except ValueError as error:
        raise UserError(f"{source}: {error}") from None


# ----------------------------------------------------------------------------- printing


def _fmt(value: float, decimals: int) -> str:
    text = f"{value:.{max(6, decimals + 2)}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def format_text(result: CheckResult, source: str) -> str:
    """One block per claimed step (`X ... OK` or its wrong cells), then a one-line summary."""
    tokens = result.tokens
    lines = [f"{source}: {len(tokens)} tokens ({' '.join(tokens)}), given {result.given}, "
             f"d_k = {result.d_k}, mask {result.mask}"]
    for step in result.steps:
        if step.ok:
            lines.append(f"{step.step} ... OK")
            continue
        lines.append(f"{step.step}: {len(step.wrong)} wrong cell{'s' if len(step.wrong) != 1 else ''}")
        for w in step.wrong:
            col = tokens[w.col] if step.step in TOKEN_COLUMNS else f"d{w.col}"
            decimals = max(0, -Decimal(w.claimed_text).as_tuple().exponent)
            where = f"  row {w.row} ({tokens[w.row]}), col {w.col} ({col}): claimed {w.claimed_text}, "
            if step.after_claims:
                lines.append(where + f"expected {_fmt(w.expected, decimals)} (from your previous step), "
                             f"from the given inputs {_fmt(w.from_inputs, decimals)}")
            else:
                lines.append(where + f"expected {_fmt(w.from_inputs, decimals)} (from the given inputs)")
    bad = [s for s in result.steps if not s.ok]
    if not bad:
        lines.append(f"all right: {len(result.steps)} claimed steps, every cell within half a unit of its "
                     "last decimal")
    else:
        cells = sum(len(s.wrong) for s in bad)
        lines.append(f"wrong: {cells} cell{'s' if cells != 1 else ''} in {len(bad)} of {len(result.steps)} "
                     f"claimed steps ({', '.join(s.step for s in bad)})")
    return "\n".join(lines)
