"""Checks of what a user typed that argparse cannot do: finite numbers, quoted text kept short.

`reject_non_finite(args)` runs on every parsed command line (cli.main), so no float option of any
command (--alpha, --temperature, --top-p, --minutes, --lr, ...) can be NaN or infinite: argparse's
`float` accepts "nan" and "inf", which would otherwise flow into the arithmetic and come out as an
empty translation with exit status 0.
"""

from __future__ import annotations

import argparse
import math

from clearformer.errors import UserError
from clearformer.limits import MAX_QUOTED_CHARS


def option_name(dest: str) -> str:
    """'top_p' -> '--top-p' (how the option was spelled on the command line)."""
    return "--" + dest.replace("_", "-")


def reject_non_finite(args: argparse.Namespace) -> None:
    """A UserError naming the first float option whose value is NaN or infinite."""
    for dest, value in sorted(vars(args).items()):
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{option_name(dest)} must be a finite number, not {value}")


def require_finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise UserError(f"{name} must be a finite number, not {value}")
    return value


def shorten(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """`text` if short, else its first `limit` characters and an ellipsis saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters in all)"


def has_surrogates(text: str) -> bool:
    """Whether `text` holds lone surrogates: how Python carries bytes that were not UTF-8 (argv, stdin)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def require_utf8(name: str, text: str | None) -> None:
    """A UserError when a text argument (a sentence, a prompt) was not UTF-8 on the command line."""
    if text is not None and has_surrogates(text):
        raise UserError(f"{name}: not UTF-8 text")
