"""What the learner's code returned or raised, on its way from the child to the checker: plain JSON, never pickle.

The child (learn/child.py, the process that runs the learner's code) sends each result with `encode` or
`raised_record`; the checker (learn/check.py, learn/capstone_judge.py: a process that never imports the learner's
file) reads it back with `decode` or `read_raised`. What comes back is untrusted data: every field is checked for
its type and size, and anything else raises `Malformed` with the reason in words. A value is one JSON object:

    {"tensor": {"dtype": "float64", "shape": [2, 3], "data": BASE64}}   its cells: row-major, this machine's order
    {"tensor": {"dtype": "float64", "shape": [9999, 9999], "data": null, "unsent": "too large"}}   the shape alone
    {"int": 3}  {"float": 0.5}  {"bool": true}
    {"list": [VALUE, ...], "length": N}  {"tuple": [...], "length": N}  the first MAX_ITEMS items; N the true length
    {"other": "NoneType"}                                                anything else: its type's name

The child sends a tensor's cells within a budget of bytes (`Budget`, per result); a tensor past it is sent as its
shape alone (`Unsent`), which is all a comparison needs of a result far larger than the expected one.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass

import torch

MAX_ITEMS = 1000            # items of a list or tuple sent (an expected one has at most a few dozen)
MAX_DEPTH = 6               # nesting of lists and tuples sent (an expected result: two)
MAX_DIMS = 16
MAX_CELLS = 1 << 40         # a shape the checker believes (an Unsent tensor's cells are never allocated)
MAX_NAME = 100              # characters of a type's name
MAX_TEXT = 2000             # characters of an exception's message, or of a line of the learner's file
RESULT_BYTES = 256 * 1024   # the cells of one exercise case's result sent back (the largest expected: 6 KiB)

DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex128, torch.complex64, torch.int64,
    torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}


class Malformed(Exception):
    """What the child sent is not what a child of this checker sends (the learner's code wrote it): the reason."""


@dataclass(frozen=True)
class Unsent:
    """A tensor whose cells were not sent (past the budget, or not a dense tensor): its shape and dtype."""

    shape: tuple[int, ...]
    dtype: str
    why: str


@dataclass(frozen=True)
class Other:
    """A value that is neither a tensor, a number nor a list or tuple: the name of its type."""

    name: str


@dataclass(frozen=True)
class Raised:
    """What the learner's code raised, as the child describes it (text from the learner's process, bounded)."""

    kind: str                  # the exception's class name
    classes: tuple[str, ...]   # the names of its classes, itself first (what `isinstance` would have looked at)
    text: str                  # str(error) (the first MAX_TEXT characters)
    where: str                 # FILE:LINE in the learner's files, or FILE
    function: str              # the exercise's function it was raised in
    line: str                  # that line of the learner's file

    def isa(self, name: str) -> bool:
        return name in self.classes

    def describe(self, quoted: int = 200) -> str:
        """'Kind: the first line of its message' (cut at `quoted` characters)."""
        text = self.text.splitlines()[0] if self.text.strip() else ""
        if len(text) > quoted:
            text = text[:quoted] + "..."
        return self.kind + (f": {text}" if text else "")


def type_name(value) -> str:
    """The name of `value`'s type as a report says it ("returned list"), a value the child could not send included."""
    return value.name if isinstance(value, Other) else type(value).__name__


# ----------------------------------------------------------------------------- the child's side


class Budget:
    """Bytes of tensor cells still to be sent for one result."""

    def __init__(self, size: int = RESULT_BYTES) -> None:
        self.left = size


def encode(value, budget: Budget | None = None, depth: int = 0) -> dict:
    """`value` as JSON data (the format above). Runs in the learner's process, on anything the learner's code
    returned: a value that raises while it is read raises here (the caller reports it as the learner's error)."""
    budget = budget if budget is not None else Budget()
    if isinstance(value, torch.Tensor):
        return {"tensor": encode_tensor(value, budget)}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": int(value)} if -(1 << 63) <= value < (1 << 63) else {"other": "int"}
    if isinstance(value, float):
        return {"float": float(value)}
    if isinstance(value, (list, tuple)) and depth < MAX_DEPTH:
        kind = "tuple" if isinstance(value, tuple) else "list"
        items = [encode(item, budget, depth + 1) for item in list(value)[:MAX_ITEMS]]
        return {kind: items, "length": len(value)}
    return {"other": type(value).__name__[:MAX_NAME]}


def encode_tensor(tensor: torch.Tensor, budget: Budget) -> dict:
    tensor = torch.Tensor.detach(tensor)
    shape = [int(size) for size in tensor.shape]
    dtype = str(tensor.dtype).removeprefix("torch.")
    size = tensor.numel() * tensor.element_size()
    why = None
    if dtype not in DTYPES:
        why = f"dtype {dtype}"
    elif tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type == "meta":
        why = f"not a dense tensor ({tensor.layout}, {tensor.device.type})"
    elif size > budget.left:
        why = "too large"
    if why is not None:
        return {"dtype": dtype, "shape": shape, "data": None, "unsent": why}
    budget.left -= size
    flat = tensor.to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return {"dtype": dtype, "shape": shape, "data": base64.b64encode(data).decode("ascii")}


def raised_record(error: BaseException, where: str, function: str, line: str) -> dict:
    """What the learner's code raised, as JSON data (`where`, `function`, `line`: found by the caller)."""
    try:
        text = str(error)
    except BaseException:  # a learner's exception whose __str__ fails
        text = ""
    classes = [cls.__name__[:MAX_NAME] for cls in type(error).__mro__][:32]
    return {"kind": classes[0], "classes": classes, "text": text[:MAX_TEXT], "where": where[:MAX_TEXT],
            "function": function[:MAX_NAME], "line": line[:MAX_TEXT]}


# ----------------------------------------------------------------------------- the checker's side


def decode(data, depth: int = 0):
    """The value `encode` wrote: a tensor, Unsent, an int, float or bool, a list or tuple of values, or Other;
    Malformed for anything else."""
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise Malformed("a value that is not one of the checker's")
    if depth > MAX_DEPTH:
        raise Malformed(f"a value nested deeper than {MAX_DEPTH}")
    if "tensor" in data and len(data) == 1:
        return decode_tensor(data["tensor"])
    for kind, types in (("int", int), ("float", (int, float)), ("bool", bool)):
        if kind in data and len(data) == 1:
            value = data[kind]
            if not isinstance(value, types) or (kind != "bool" and isinstance(value, bool)):
                raise Malformed(f"a value marked {kind} that is a {type(value).__name__}")
            return float(value) if kind == "float" else value
    if "other" in data and len(data) == 1:
        return Other(text(data["other"], MAX_NAME, "a type's name"))
    for kind, build in (("list", list), ("tuple", tuple)):
        if kind in data and "length" in data:
            items, length = data[kind], data["length"]
            if not isinstance(items, list) or not whole(length) or not (
                    length == len(items) or (len(items) == MAX_ITEMS and length > MAX_ITEMS)):
                raise Malformed(f"a {kind} whose items do not match its length")
            return build(decode(item, depth + 1) for item in items)
    raise Malformed("a value that is not one of the checker's")


def decode_tensor(data) -> torch.Tensor | Unsent:
    if not isinstance(data, dict) or set(data) - {"dtype", "shape", "data", "unsent"}:
        raise Malformed("a tensor that is not one of the checker's")
    dtype, shape = data.get("dtype"), data.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(whole(size) for size in shape):
        raise Malformed("a tensor whose shape is not a list of sizes")
    cells = math.prod(shape)
    if cells > MAX_CELLS:
        raise Malformed(f"a tensor of {cells:.3g} cells")
    if data.get("data") is None:
        return Unsent(tuple(shape), text(dtype, MAX_NAME, "a dtype"), text(data.get("unsent"), MAX_NAME, "a reason"))
    if dtype not in DTYPES:
        raise Malformed(f"a tensor of dtype {str(dtype)[:MAX_NAME]!r}")
    if not isinstance(data["data"], str) or len(data["data"]) > 4 * (cells * 16 // 3 + 1):  # 16: complex128
        raise Malformed("a tensor whose cells are not base64 text of its size")
    try:
        raw = base64.b64decode(data["data"], validate=True)
    except (binascii.Error, ValueError):
        raise Malformed("a tensor whose cells are not base64") from None
    kind = DTYPES[dtype]
    if len(raw) != cells * torch.empty((), dtype=kind).element_size():
        raise Malformed(f"a tensor of {len(raw)} bytes for {cells} cells of {dtype}")
    if cells == 0:
        return torch.empty(shape, dtype=kind)
    return torch.frombuffer(bytearray(raw), dtype=kind).reshape(shape)


def read_raised(data) -> Raised:
    """A `raised_record` read back; Malformed for anything else."""
    if not isinstance(data, dict) or set(data) != {"kind", "classes", "text", "where", "function", "line"}:
        raise Malformed("an exception record that is not one of the checker's")
    classes = data["classes"]
    if not isinstance(classes, list) or not 0 < len(classes) <= 32:
        raise Malformed("an exception record whose classes are not a list")
    return Raised(text(data["kind"], MAX_NAME, "a class name"),
                  tuple(text(name, MAX_NAME, "a class name") for name in classes),
                  text(data["text"], MAX_TEXT, "a message", lines=True), text(data["where"], MAX_TEXT, "a place"),
                  text(data["function"], MAX_NAME, "a function name"), text(data["line"], MAX_TEXT, "a line"))


def whole(value) -> bool:
    """A size or a count: an int (not a bool) from 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def text(value, limit: int, what: str, lines: bool = False) -> str:
    """A string of the child's, at most `limit` characters, its control characters (a terminal's escapes, and line
    breaks unless `lines`) shown as '?': it is printed in the report."""
    if not isinstance(value, str) or len(value) > limit:
        raise Malformed(f"{what} that is not text of at most {limit} characters")
    keep = "\n" if lines else ""
    return "".join(c if c.isprintable() or c in keep else ("    " if c == "\t" else "?") for c in value)
