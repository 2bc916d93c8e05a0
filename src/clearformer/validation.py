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
