"""Tokenizer files beside a checkpoint's `tokenizer.json`, each checked against the SHA-256 recorded there.

Used by the tokenizers made of several files (Marian's two SentencePiece models and shared vocabulary,
GPT-2's vocab.json and merges.txt): a damaged or swapped file is caught when the run is loaded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from clearformer.errors import UserError
from clearformer.limits import MAX_TOKENIZER_FILE_BYTES
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.safeio import loads_json, read_bytes, read_json_object

JSON_FILE = "tokenizer.json"


def save_files(directory: str | Path, kind: str, files: dict[str, tuple[str, bytes]], **fields) -> None:
    """Write each file (role -> (file name, bytes)) and a tokenizer.json naming them with their SHA-256."""
    directory = Path(directory)
    info = {"kind": kind, **fields, "files": {}}
    for role, (name, data) in files.items():
        atomic_write_bytes(directory / name, data)
        info["files"][role] = {"name": name, "sha256": hashlib.sha256(data).hexdigest()}
    atomic_write_text(directory / JSON_FILE, json.dumps(info, ensure_ascii=False, indent=1) + "\n")


def load_files(directory: str | Path, roles: tuple[str, ...]) -> tuple[dict, dict[str, bytes]]:
    """(tokenizer.json's fields, role -> bytes) for a tokenizer written by `save_files`."""
    directory = Path(directory)
    path = directory / JSON_FILE
    info = read_json_object(path, missing="missing (not a clearformer checkpoint?)")
    listed = info.get("files")
    contents = {}
    for role in roles:
        entry = listed.get(role) if isinstance(listed, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UserError(f"{path}: the {role!r} file is not listed")
        file = directory / Path(entry["name"]).name  # never outside the checkpoint
        data = read_bytes(file, MAX_TOKENIZER_FILE_BYTES, missing="missing tokenizer file")
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise UserError(f"{file}: damaged (checksum differs from {JSON_FILE})")
        contents[role] = data
    return info, contents


def read_vocabulary(data: bytes, name: str) -> dict[str, int]:
    """A vocab.json ({token: id}) whose ids are exactly 0 .. n-1, or a one-line error naming the file."""
    vocab = loads_json(data, name)
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise UserError(f"{name}: a vocabulary must map tokens to integer ids")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise UserError(f"{name}: the ids are not 0 .. {len(vocab) - 1}, each once")
    return vocab
