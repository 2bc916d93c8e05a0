"""What every server route shares: one request parser, one bound on the answer.

    body = await read_body(request)               the bytes, at most MAX_BODY_BYTES (else 413)
    data = parse_body(body, FIELDS, shape)        one JSON object whose fields have the declared types:
                                                  400 for anything else (not JSON, a 5,000-digit number,
                                                  NaN, a lone surrogate, a wrong type, an unknown field)
    check_estimate(estimate, what)                413 before the work when a lower bound of the answer's
                                                  size is already over MAX_ANSWER_BYTES
    with answer_budget(): ...                     the work itself may record at most ANSWER_NUMBERS numbers
                                                  (the recorder stops it: 413), and bounded_answer(bytes)
                                                  refuses a finished answer over MAX_ANSWER_BYTES (413)

A new route declares its fields (`Field`), parses with `parse_body` and runs its work in the server's
pool, which applies the budget and the byte bound to every answer (serve/app.py); tests/hostile sends
every malformed body to every POST route the app has.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

from clearformer.limits import (
    MAX_ANSWER_BYTES,
    MAX_BODY_BYTES,
    MAX_SENTENCE_CHARS,
    REQUEST_BODY_SECONDS,
    has_surrogates,
)
from clearformer.record.trace import OverBudget, RecordBudget

# A walkthrough's JSON spends at least this many bytes on each number it shows ("0.1," or "12,"), so an
# answer of MAX_ANSWER_BYTES shows at most MAX_ANSWER_BYTES / 4 numbers; recording more is refused while
# it happens (measured on the toy model: 4.9 to 30 bytes of answer per recorded number, beam 8 to greedy).
MIN_BYTES_PER_NUMBER = 4
ANSWER_NUMBERS = MAX_ANSWER_BYTES // MIN_BYTES_PER_NUMBER
MAX_NAME_CHARS = 200  # one intervention name
MAX_NAMES = 64


class RequestError(Exception):
    """A request the server refuses: `status` is the 4xx code, the message says why in one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Field:
    """A body field: "text" (a non-empty string of at most MAX_SENTENCE_CHARS), "names" (a list of short
    strings) or "integer" (a whole number from `low` to `high`)."""

    kind: str
    low: int = 0
    high: int = 0


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_body(body: bytes, fields: dict[str, Field], shape: str) -> dict:
    """The JSON object in `body`, every field checked against `fields`; a RequestError (4xx) otherwise."""
    if len(body) > MAX_BODY_BYTES:
        raise RequestError(413, f"request body over {MAX_BODY_BYTES} bytes")
    try:
        # ValueError: JSON's own, an integer of more than 4,300 digits, NaN or Infinity (refused here)
        data = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RequestError(400, f"request body must be JSON: {shape}") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"request body must be a JSON object: {shape}")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        shown = ", ".join(repr(name[:MAX_NAME_CHARS]) for name in unknown[:5])
        raise RequestError(400, f"unknown field(s) {shown}; send {shape}")
    return {name: check_field(name, value, fields[name]) for name, value in data.items()}


def check_field(name: str, value, field: Field):
    if field.kind == "text":
        if not isinstance(value, str):
            raise RequestError(400, f"{name} must be a string, not {type(value).__name__}")
        if not value.strip():
            raise RequestError(400, f"empty {name}")
        if has_surrogates(value):  # "\ud800" in the JSON: no UTF-8 text, as translate refuses it
            raise RequestError(400, f"{name} is not valid Unicode text (a lone surrogate)")
        if len(value) > MAX_SENTENCE_CHARS:
            raise RequestError(413, f"{name} of {len(value)} characters; at most {MAX_SENTENCE_CHARS}")
        return value.strip()
    if field.kind == "names":
        if not isinstance(value, list) or len(value) > MAX_NAMES or not all(
                isinstance(n, str) and len(n) <= MAX_NAME_CHARS and not has_surrogates(n) for n in value):
            raise RequestError(400, f"{name} must be a list of at most {MAX_NAMES} names (strings)")
        return tuple(sorted({n.strip() for n in value}))
    if isinstance(value, bool) or not isinstance(value, int) or not field.low <= value <= field.high:
        raise RequestError(400, f"{name} must be a whole number from {field.low} to {field.high}")
    return value


def exactly_one(data: dict, names: tuple[str, ...]) -> str:
    """The one of `names` present in `data` (a 400 when none or several are)."""
    present = [name for name in names if name in data]
    if len(present) != 1:
        raise RequestError(400, f"send exactly one of {', '.join(names[:-1])} or {names[-1]}")
    return present[0]


async def read_body(request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body; 413 when it is (declared or streamed) over `limit` bytes (MAX_BODY_BYTES: one sentence;
    the LibreTranslate route takes a page of them, MAX_TRANSLATE_BODY_BYTES)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or len(declared) > 12 or int(declared) > limit):
        raise RequestError(413, f"request body over {limit} bytes")
    from starlette.requests import ClientDisconnect

    body = b""
    try:
        async with asyncio.timeout(REQUEST_BODY_SECONDS):  # a client that stops sending is let go (serve/deadline.py)
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise RequestError(413, f"request body over {limit} bytes")
    except ClientDisconnect:  # the client hung up mid-body: nobody to answer, nothing for the terminal
        raise RequestError(400, "the client hung up before the request body was complete") from None
    except TimeoutError:
        raise RequestError(408, f"the request body did not arrive within {REQUEST_BODY_SECONDS:g} s") from None
    return body


def too_large(what: str, size: str) -> RequestError:
    return RequestError(413, f"the walkthrough of this {what} is {size}, over the server's limit of "
                             f"{MAX_ANSWER_BYTES:,} bytes (a walkthrough grows with layers x heads x tokens "
                             f"squared, and with the beam): send a shorter {what} or a smaller beam")


def answer_estimate(config, tokens: int, beam: int = 1) -> int:
    """A lower bound of an answer's bytes, before the work: every layer of both stacks shows at least one
    d_model vector per input token (and each of `beam` hypotheses one per decoder layer), each number in
    at least MIN_BYTES_PER_NUMBER bytes."""
    layers = config.n_encoder_layers + config.n_decoder_layers
    return MIN_BYTES_PER_NUMBER * config.d_model * (layers * tokens + beam * config.n_decoder_layers)


def check_estimate(estimate: int, what: str) -> None:
    if estimate > MAX_ANSWER_BYTES:
        raise too_large(what, f"at least {estimate:,} bytes")


@contextlib.contextmanager
def answer_budget(what: str = "request"):
    """The work of one answer records at most ANSWER_NUMBERS numbers: past them it stops with a 413."""
    try:
        with RecordBudget(ANSWER_NUMBERS):
            yield
    except OverBudget:
        raise too_large(what, f"more than {ANSWER_NUMBERS:,} numbers") from None


def bounded_answer(answer: bytes, what: str = "request") -> bytes:
    """`answer`, or a 413 when it is over MAX_ANSWER_BYTES (every route's answer passes here)."""
    if len(answer) > MAX_ANSWER_BYTES:
        raise too_large(what, f"{len(answer):,} bytes")
    return answer
