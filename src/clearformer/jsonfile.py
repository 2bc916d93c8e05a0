"""Reading a JSON object from a file, with one-line errors naming the file (bounded: clearformer.safeio)."""

from __future__ import annotations

from pathlib import Path

from clearformer.safeio import read_json_object as read_bounded


def read_json_object(path: Path, missing: str = "missing") -> dict:
    """The JSON object in `path`; a UserError "`path`: <missing>" if absent, or naming what is wrong."""
    return read_bounded(path, missing=missing)
