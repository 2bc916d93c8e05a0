"""Corpus files (a TSV, or two files aligned by line): any bytes -> valid pairs or a one-line UserError."""

from __future__ import annotations

from fuzz_helpers import one_line
from hypothesis import given
from hypothesis import strategies as st

from clearformer.data.parallel import MAX_CHARS, read_parallel
from clearformer.errors import UserError
from clearformer.train.corpus import read_pairs

# Bytes that look like text files: words, tabs, newlines, CRs, BOMs, invalid UTF-8, controls.
pieces = st.sampled_from([b"I love you", b"Je t'aime", b"\t", b"\n", b"\r\n", b"\xef\xbb\xbf", b"\xff", b"\xc3(",
                          b" ", b"\x00", b"\x1b[31m", "é".encode(), "\u2028".encode(), b"x" * 2100, b"\xed\xa0\x80"])
files = st.one_of(st.binary(max_size=200), st.lists(pieces, max_size=30).map(b"".join))


def valid(pairs) -> None:
    for source, target in pairs:
        for side in (source, target):
            assert side and side == side.strip() and "\t" not in side and len(side) <= MAX_CHARS


def read(paths, skip_bad: bool):
    for reader in (lambda: read_parallel(paths, skip_bad=skip_bad, log=lambda _: None),
                   lambda: read_pairs(tuple(str(p) for p in paths), skip_bad=skip_bad)):
        try:
            valid(reader())
        except UserError as error:
            assert one_line(str(error))


@given(data=files, skip_bad=st.booleans())
def test_tsv(tmp_path, data, skip_bad):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(data)
    read([path], skip_bad)


@given(source=files, target=files, skip_bad=st.booleans())
def test_aligned_files(tmp_path, source, target, skip_bad):
    (tmp_path / "src.txt").write_bytes(source)
    (tmp_path / "tgt.txt").write_bytes(target)
    read([tmp_path / "src.txt", tmp_path / "tgt.txt"], skip_bad)


@given(data=files)
def test_data_build_custom(tmp_path_factory, data):
    """The whole `data build custom` on the file: a corpus folder, or a one-line error and exit 2."""
    from clearformer.cli import main

    folder = tmp_path_factory.mktemp("custom")
    (folder / "pairs.tsv").write_bytes(data)
    code = main(["data", "build", "custom", "--tsv", str(folder / "pairs.tsv"), "--out", str(folder / "out"),
                 "--skip-bad"])
    assert code in (0, 2)
    assert (folder / "out" / "manifest.json").exists() == (code == 0)
