"""Issue 41, root 2: every `--output`/`-o` (and explain's --html, claims' --out) goes through store/output.py.

A folder, a missing folder, a path under a file, a read-only place, a FIFO and a symbolic link are refused in
one line each before any work, and nothing there changes; a character device (a private copy of /dev/null
made with mknod, so the machine's own is never at stake) and /dev/stdout are written through as streams and
stay what they were; a regular file is replaced atomically.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import one_line, run_child, tree_hashes

COMMANDS = {
    "lens": lambda run, path: ["lens", "I love you", "--checkpoint", run, "-o", path],
    "patch": lambda run, path: ["patch", "I love you", "I like you", "--checkpoint", run, "-o", path],
    "attribute": lambda run, path: ["attribute", "I love you", "--steps", "4", "--checkpoint", run, "-o", path],
    "explain --output": lambda run, path: ["explain", "--example", "i-love-you", "--output", path],
    "explain --html": lambda run, path: ["explain", "--example", "i-love-you", "--html", path],
    "translate --output": lambda run, path: ["translate", "I love you", "--checkpoint", run, "--output", path],
    "evaluate --output": lambda run, path: ["evaluate", "--checkpoint", run, "--limit", "2", "--output", path],
}


def read_only_place(tmp_path: Path) -> Path:
    """A folder no new file can be made in: /sys for root (permission bits do not stop root), else mode 555."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def hostile_path(case: str, tmp_path: Path) -> tuple[Path, str]:
    """(the --output path, the words its one-line refusal must hold)."""
    if case == "folder":
        (tmp_path / "folder").mkdir()
        return tmp_path / "folder", "is a folder"
    if case == "missing folder":
        return tmp_path / "no" / "such" / "out.txt", "does not exist"
    if case == "under a file":
        (tmp_path / "file").write_text("the user's\n")
        return tmp_path / "file" / "out.txt", "is a file, not a folder"
    if case == "read-only":
        return read_only_place(tmp_path) / "out.txt", "cannot write in"
    if case == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo", "is a FIFO"
    if case == "link":
        (tmp_path / "target.txt").write_text("the user's own file\n")
        (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
        return tmp_path / "link.txt", "is a symbolic link"
    raise ValueError(case)


@pytest.mark.parametrize("case", ["folder", "missing folder", "under a file", "read-only", "fifo", "link"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_output_is_one_line_before_any_work(command, case, toy_run, tmp_path, in_process):
    path, words = hostile_path(case, tmp_path)
    watched = [p for p in (tmp_path / "folder", tmp_path / "file", tmp_path / "fifo", tmp_path / "link.txt",
                           tmp_path / "target.txt") if os.path.lexists(p)]
    before = tree_hashes(*watched)
    modes = {p: os.lstat(p).st_mode for p in watched}
    code, out, err = in_process(*COMMANDS[command](toy_run, path))
    line = one_line(err)
    assert code == 2 and words in line and str(path) in line, line
    assert tree_hashes(*watched) == before and {p: os.lstat(p).st_mode for p in watched} == modes
    assert not (tmp_path / "no").exists()


@pytest.fixture
def private_null(tmp_path) -> Path:
    """A character device like /dev/null (major 1, minor 3) in the test's own folder (root only: mknod)."""
    if os.geteuid() != 0:
        return Path("/dev/null")  # a user who cannot replace /dev/null cannot hurt it either
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return device


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("through_link", [False, True])
def test_a_character_device_is_written_as_a_stream_never_replaced(command, through_link, private_null, toy_run,
                                                                  tmp_path, in_process):
    path = private_null
    if through_link:
        path = tmp_path / "to-null"
        path.symlink_to(private_null)
    code, _, err = in_process(*COMMANDS[command](toy_run, path))
    assert code == 0, err
    assert stat.S_ISCHR(os.lstat(private_null).st_mode)
    assert not through_link or os.path.islink(path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left beside it


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_dev_stdout_is_this_process_stream_not_a_file(name, toy_run, tmp_path):
    before = os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None
    outcome = run_child(f"lens -o {name}", ["lens", "I love you", "--checkpoint", str(toy_run), "--format", "json",
                                            "-o", name], tmp_path, seconds=120)
    assert outcome.code == 0, outcome.stderr
    assert '"steps"' in outcome.stdout  # the report went to the child's stdout (a file here)
    assert (os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None) == before


def test_an_existing_regular_file_is_replaced_atomically(toy_run, tmp_path, in_process):
    path = tmp_path / "report.txt"
    path.write_text("old\n")
    code, _, err = in_process("lens", "I love you", "--checkpoint", toy_run, "-o", path)
    assert code == 0, err
    assert "old" not in path.read_text() and "Logit lens" in path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "report.txt"]


def test_a_file_with_another_hard_link_is_not_parted(toy_run, tmp_path, in_process):
    path = tmp_path / "report.txt"
    path.write_text("old\n")
    os.link(path, tmp_path / "other-name.txt")
    code, _, err = in_process("lens", "I love you", "--checkpoint", toy_run, "-o", path)
    assert code == 2 and "hard links" in one_line(err)
    assert (tmp_path / "other-name.txt").read_text() == "old\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a file of another user")
def test_a_file_of_another_user_is_not_replaced(toy_run, tmp_path, in_process):
    path = tmp_path / "report.txt"
    path.write_text("someone else's\n")
    os.chown(path, 65534, 65534)
    code, _, err = in_process("lens", "I love you", "--checkpoint", toy_run, "-o", path)
    assert code == 2 and "belongs to another user" in one_line(err)
    assert path.read_text() == "someone else's\n"


@pytest.mark.parametrize("case", ["read-only", "a file", "link"])
def test_claims_out_is_checked_in_one_line(case, tmp_path, in_process):
    if case == "read-only":
        out, words = read_only_place(tmp_path) / "claims", "cannot be made"
        if os.geteuid() != 0:
            out, words = read_only_place(tmp_path), "cannot write in"
    elif case == "a file":
        out, words = tmp_path / "claims", "cannot be made"
        out.write_text("x")
    else:
        out, words = tmp_path / "claims", "is a symbolic link"
        out.mkdir()
        (tmp_path / "mine.json").write_text("{}")
        (out / "claim3-positions-quick.json").symlink_to(tmp_path / "mine.json")
    code, _, err = in_process("claims", "3", "--quick", "--out", out, "--overwrite")
    assert code == 2 and words in one_line(err), err
    assert (tmp_path / "mine.json").read_text() == "{}" if case == "link" else True


def test_the_atomic_writer_itself_never_renames_over_a_link_or_a_device(tmp_path):
    from clearformer.store.atomic import atomic_write_text

    (tmp_path / "target").write_text("kept\n")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError, match="never replaces"):
        atomic_write_text(tmp_path / "link", "new\n")
    assert os.path.islink(tmp_path / "link") and (tmp_path / "target").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "link", "target"]


pytestmark = [pytest.mark.slow]  # seconds on its own: -m 'not slow' skips it (pyproject)
if sys.platform != "linux":  # /proc/self/fd and mknod are Linux's
    pytestmark.append(pytest.mark.skip("Linux only"))
