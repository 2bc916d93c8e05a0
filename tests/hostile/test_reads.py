"""Class 1: every file or stream a user hands in is read with a bound counted while reading (issue 22).

/dev/zero, FIFOs and stdin have no size to stat(); each case runs in a child process under a memory limit,
so an unbounded read fails the test instead of the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest
from conftest import one_line, run_child, tree_hashes
from hypothesis import given, settings
from hypothesis import strategies as st

from clearformer.errors import UserError
from clearformer.store import safeio

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

ZERO = "/dev/zero"


@pytest.mark.parametrize("case, argv, stdin", [
    ("check /dev/zero", ["check", ZERO], None),
    ("check /dev/stdin", ["check", "/dev/stdin"], ZERO),
    ("translate --file /dev/zero", ["translate", "--file", ZERO, "--checkpoint", "{run}"], None),
    ("translate < /dev/zero", ["translate", "--checkpoint", "{run}"], ZERO),
    ("evaluate --data /dev/zero", ["evaluate", "--data", ZERO, "--checkpoint", "{run}"], None),
    ("train --tsv /dev/zero", ["train", "--tsv", ZERO, "--out", "new-run", "--steps", "1"], None),
    ("lm train --corpus /dev/zero", ["lm", "train", "--corpus", ZERO, "--out", "new-lm", "--steps", "1"], None),
])
def test_devices_and_stdin_are_bounded(case, argv, stdin, toy_run, tmp_path):
    before = tree_hashes(toy_run)
    with open(stdin or os.devnull, "rb") as stream:
        outcome = run_child(case, [a.replace("{run}", str(toy_run)) for a in argv], tmp_path, stdin=stream)
    line = one_line(outcome)
    assert "larger than" in line and "MiB" in line, line
    assert tree_hashes(toy_run) == before
    assert not (tmp_path / "new-run").exists() or not any((tmp_path / "new-run").glob("*.safetensors"))


def test_a_fifo_fed_without_end_is_bounded(tmp_path):
    fifo = tmp_path / "sentences"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat /dev/zero > {fifo}"])
    try:
        line = one_line(run_child("check FIFO", ["check", str(fifo)], tmp_path))
    finally:
        writer.kill()
        writer.wait()
    assert "larger than 1 MiB" in line


@pytest.mark.parametrize("name", ["config.json", "vocab.json", "source.spm"])
def test_marian_files_linked_to_a_device_are_bounded(name, marian_source, tmp_path):
    folder = tmp_path / "marian"
    folder.mkdir()
    for entry in marian_source.iterdir():
        (folder / entry.name).symlink_to(ZERO if entry.name == name else entry)
    line = one_line(run_child(f"import marian {name} -> /dev/zero", ["import", "marian", str(folder), "--out", "m"],
                              tmp_path))
    assert name in line and "larger than" in line
    assert not (tmp_path / "m").exists()  # a failed import leaves no folder behind


@pytest.mark.parametrize("name", ["merges.txt", "vocab.json"])
def test_gpt2_files_linked_to_a_device_are_bounded(name, gpt2_source, tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for entry in gpt2_source.iterdir():
        (folder / entry.name).symlink_to(ZERO if entry.name == name else entry)
    argv = ["lm", "import", "gpt2", str(folder), "--out", "g"]
    line = one_line(run_child(f"lm import gpt2 {name} -> /dev/zero", argv, tmp_path))
    assert name in line and "larger than" in line


def test_run_folder_files_linked_to_a_device_are_bounded(run_copy, tmp_path):
    for name in ("tokenizer.json", "meta.json"):
        (run_copy / name).unlink()
        (run_copy / name).symlink_to(ZERO)
    line = one_line(run_child("run tokenizer.json -> /dev/zero", ["translate", "hello", "--checkpoint", str(run_copy)],
                              tmp_path))
    assert "larger than" in line


# ----------------------------------------------------------------------------- the readers themselves (Hypothesis)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=3000), limit=st.integers(min_value=0, max_value=2500))
def test_read_stream_returns_everything_up_to_the_limit_and_refuses_more(data, limit):
    read, write = os.pipe()
    feeder = threading.Thread(target=lambda: (os.write(write, data), os.close(write)))
    feeder.start()
    try:
        with os.fdopen(read, "rb", buffering=0) as stream:
            if len(data) <= limit:
                assert safeio.read_stream(stream, limit, "<pipe>") == data
            else:
                with pytest.raises(UserError, match="<pipe>: larger than"):
                    safeio.read_stream(stream, limit, "<pipe>")
    finally:
        feeder.join()


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}é\n', max_size=6),
                           lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.text(alphabet='k"[{\\', max_size=3), children, max_size=3),
                           max_leaves=30)


def depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES)
def test_nesting_depth_is_the_documents_depth(value):
    text = json.dumps(value, ensure_ascii=False)
    assert safeio.nesting_depth(text) == depth(value)
    assert safeio.loads_json(text, "x.json") == value


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet='[]{}":,0123456789.eE-+ntrufals\\\n é', max_size=200))
def test_any_text_is_json_or_a_one_line_error(text):
    try:
        safeio.loads_json(text, "x.json", max_depth=8)
    except UserError as error:
        assert str(error).startswith("x.json") and "\n" not in str(error)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000,
                                  "[" + "9" * 5000 + "]"])
def test_deep_or_huge_json_is_one_line(text):
    with pytest.raises(UserError, match=r"^x.json: damaged"):
        safeio.loads_json(text, "x.json")


def test_readers_name_a_folder_and_a_missing_file(tmp_path):
    with pytest.raises(UserError, match="is a directory, not a file"):
        safeio.read_bytes(tmp_path, 10)
    with pytest.raises(UserError, match="no such file"):
        safeio.read_bytes(tmp_path / "absent", 10)
