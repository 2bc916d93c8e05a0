"""Checks of what users type: numeric options (argparse `type=`), UTF-8 input, and error-message excerpts.

nan, inf and out-of-range values stop at the command line:
`float("nan")` parses, and a NaN length penalty or temperature then decodes to an empty line with exit 0;
these types turn such values into argparse's one-line usage error (exit 2) naming the option's value.

    parser.add_argument("--alpha", type=finite_float(minimum=0), default=0.6)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from clearformer.errors import UserError


def finite_float(minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None) -> Callable[[str], float]:
    """A float that is finite and within [minimum, maximum] (and > above, when given)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is below the minimum of {minimum:g}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text} is above the maximum of {maximum:g}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"{text} must be greater than {above:g}")
        return value
    parse.__name__ = "number"  # argparse names the type in "invalid number value: ..."
    return parse


def bounded_int(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """An integer within [minimum, maximum]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is below the minimum of {minimum}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text} is above the maximum of {maximum}")
        return value
    parse.__name__ = "integer"
    return parse


def decode_utf8(data: bytes, name: str) -> str:
    """`data` as text, or a UserError "NAME:LINE: not UTF-8 text" at the first bad byte's line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UserError(f"{name}:{line}: not UTF-8 text (byte {data[error.start]:#04x})") from None


def check_encodable(text: str, name: str) -> None:
    """A lone surrogate (from a command-line argument or a str with undecodable bytes) is not text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        line = text.count("\n", 0, error.start) + 1
        raise UserError(f"{name}:{line}: not UTF-8 text (a lone surrogate, {text[error.start]!a})") from None


def shorten(text: str, limit: int = 40) -> str:
    """`text` cut to `limit` characters for an error message (a message never echoes a whole input)."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def one_line_usage_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make `parser` report a bad option as one line (exit 2) instead of its whole usage text, then the error."""
    def error(message: str):
        parser.exit(2, f"{parser.prog}: error: {message} (see --help)\n")
    parser.error = error
    return parser
