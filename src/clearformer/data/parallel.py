"""A user's own parallel corpus: one TSV (source TAB target) or two aligned text files, validated.

Every problem is reported with the file and line it is on: files whose line counts differ, an
empty side, bytes that are not UTF-8, a line with the wrong number of fields, a side far too long
to be a sentence or absurdly out of proportion with the other. With `skip_bad=True` bad lines are
skipped and counted instead (files of different lengths are never skipped: every pair after the
first missing line would be wrong).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path

from clearformer.errors import UserError
from clearformer.limits import MAX_CORPUS_FILE_BYTES
from clearformer.store.safeio import read_bytes

MAX_CHARS = 2_000   # longer than any sentence: a paragraph, a whole file on one line, or binary junk
MAX_RATIO = 9.0     # a side nine times longer (in characters) than the other is not its translation
RATIO_FROM_CHARS = 20

PathArg = str | PathLike


class BadLine(Exception):
    """One line that fails validation; `str()` is 'file:line: what is wrong'."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _read_lines(path: Path) -> list[bytes]:
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: not a file")
    data = read_bytes(path, MAX_CORPUS_FILE_BYTES)  # counted while reading: /dev/zero and FIFOs stop too
    if not data.strip():
        raise UserError(f"{path}: the file is empty")
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the newline that ends the last line
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def _decode(raw: bytes, where: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad_byte = raw[error.start:error.start + 1]
        raise BadLine(f"{where}: not valid UTF-8 (byte {error.start + 1}: {bad_byte!r})") from None
    return text.removeprefix("\ufeff")


def check_pair(source: str, target: str, where_source: str, where_target: str) -> tuple[str, str]:
    """The pair with its ends stripped, or BadLine naming the first problem found."""
    source, target = source.strip(), target.strip()
    for side, text, where in (("source", source, where_source), ("target", target, where_target)):
        if not text:
            raise BadLine(f"{where}: empty {side}")
        if len(text) > MAX_CHARS:
            raise BadLine(f"{where}: {side} has {len(text):,} characters (more than {MAX_CHARS:,}): "
                          "not one sentence")
        if "\t" in text:
            raise BadLine(f"{where}: {side} contains a TAB")
    longer, shorter = max(len(source), len(target)), min(len(source), len(target))
    if longer >= RATIO_FROM_CHARS and longer > MAX_RATIO * shorter:
        raise BadLine(f"{where_source}: one side is {longer / shorter:.0f} times longer than the other "
                      f"({len(source)} vs {len(target)} characters): not a translation of it")
    return source, target


def _tsv_rows(path: Path) -> list[tuple[str, str, str, str] | BadLine]:
    rows: list[tuple[str, str, str, str] | BadLine] = []
    for number, raw in enumerate(_read_lines(path), start=1):
        where = f"{path}:{number}"
        try:
            fields = _decode(raw, where).split("\t")
            if len(fields) != 2:
                raise BadLine(f"{where}: expected source TAB target, found {len(fields)} field(s)")
            rows.append((fields[0], fields[1], where, where))
        except BadLine as bad:
            rows.append(bad)
    return rows


def _two_file_rows(source_path: Path, target_path: Path) -> list[tuple[str, str, str, str] | BadLine]:
    source_lines, target_lines = _read_lines(source_path), _read_lines(target_path)
    if len(source_lines) != len(target_lines):
        raise UserError(f"{source_path} has {len(source_lines):,} lines but {target_path} has "
                        f"{len(target_lines):,}: the files must be aligned line by line")
    rows: list[tuple[str, str, str, str] | BadLine] = []
    for number, (source_raw, target_raw) in enumerate(zip(source_lines, target_lines, strict=True), start=1):
        where_source, where_target = f"{source_path}:{number}", f"{target_path}:{number}"
        try:
            rows.append((_decode(source_raw, where_source), _decode(target_raw, where_target),
                         where_source, where_target))
        except BadLine as bad:
            rows.append(bad)
    return rows


def read_parallel(path_or_paths: PathArg | Sequence[PathArg], skip_bad: bool = False,
                  log: Callable[[str], None] = _stderr) -> list[tuple[str, str]]:
    """[(source, target), ...] from a TSV file (a path, or a list of one) or (source file, target file).

    Raises UserError naming file:line at the first bad line, or, with `skip_bad`, skips bad lines
    and logs how many (with the first one's reason).
    """
    return read_parallel_counted(path_or_paths, skip_bad, log)[0]


def read_parallel_counted(path_or_paths: PathArg | Sequence[PathArg], skip_bad: bool = False,
                          log: Callable[[str], None] = _stderr) -> tuple[list[tuple[str, str]], int]:
    """`read_parallel`, and how many bad lines were skipped."""
    paths = [Path(path_or_paths)] if isinstance(path_or_paths, (str, PathLike)) else \
        [Path(path) for path in path_or_paths]
    if len(paths) == 1:
        rows, name = _tsv_rows(paths[0]), str(paths[0])
    elif len(paths) == 2:
        rows, name = _two_file_rows(*paths), f"{paths[0]} + {paths[1]}"
    else:
        raise UserError(f"expected one TSV file or two aligned files, got {len(paths)} paths")
    pairs, skipped = [], []
    for row in rows:
        try:
            if isinstance(row, BadLine):
                raise row
            pairs.append(check_pair(*row))
        except BadLine as bad:
            if not skip_bad:
                raise UserError(f"{bad} (pass --skip-bad to skip bad lines)") from None
            skipped.append(str(bad))
    if skipped:
        log(f"skipped {len(skipped):,} bad line(s) of {len(rows):,} in {name} (first: {skipped[0]})")
    if not pairs:
        raise UserError(f"{name}: no usable pairs")
    return pairs, len(skipped)
