"""Where corpora live: `data/<name>/` under the current directory, or under $CLEARFORMER_DATA.

Other commands import `default_data_dir(name)` to find a corpus without being told where it is.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "CLEARFORMER_DATA"


def data_root() -> Path:
    """The folder that holds one sub-folder per corpus: $CLEARFORMER_DATA, else ./data."""
    return Path(os.environ.get(DATA_ENV) or "data")


def default_data_dir(name: str) -> Path:
    """The folder corpus `name` is built into and read from, e.g. data/en-fr-software."""
    return data_root() / name


def downloads_dir() -> Path:
    """Downloaded packages (.deb, wheels), shared by the recipes, so a rebuild does not download again."""
    return data_root() / "downloads"
