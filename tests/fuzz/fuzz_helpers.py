"""What every fuzz test asserts of an error message."""

from __future__ import annotations


def one_line(message: str) -> bool:
    return bool(message) and "\n" not in message and "Traceback" not in message
