"""Reading a JSON object from a file, with one-line errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from clearformer.errors import UserError


def read_json_object(path: Path, missing: str = "missing") -> dict:
    """The JSON object in `path`; a UserError "`path`: <missing>" if absent, or naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: {missing}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: unreadable ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a JSON object")
    return data
