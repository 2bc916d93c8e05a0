"""Issue 33, point 1: every file clearformer creates or rewrites at a fixed name inside a folder is opened,
never followed (store/fixed.py). A symbolic link, a FIFO, a folder or a hard link at such a name is a
one-line error naming it, and the file it points to is unchanged; a FIFO never hangs a command (those
cases run in a child process under a time limit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import one_line, run_child, tree_hashes
from seeds import seed_args

from clearformer.store import lock
from clearformer.store.fixed import check_fixed, open_fixed, read_fixed, write_fixed

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SHORT = ["--steps", "2", "--save-every", "2", "--eval-every", "2", "--bleu-sentences", "2", "--quiet", *seed_args()]


def precious(tmp_path: Path) -> Path:
    target = tmp_path / "precious.txt"
    target.write_text("the user's own text\n")
    return target


def stand(kind: str, path: Path, target: Path) -> None:
    """Put a `kind` (link, fifo, folder, hardlink) at `path`."""
    if path.exists() or path.is_symlink():
        path.unlink()
    {"link": lambda: path.symlink_to(target), "fifo": lambda: os.mkfifo(path),
     "folder": lambda: path.mkdir(), "hardlink": lambda: os.link(target, path)}[kind]()


# ----------------------------------------------------------------------------- the helper itself
@pytest.mark.parametrize("kind, says", [("link", "a symbolic link"), ("fifo", "a FIFO"), ("folder", "a folder")])
def test_the_helper_refuses_what_is_not_a_regular_file(kind, says, tmp_path):
    target = precious(tmp_path)
    path = tmp_path / "fixed"
    stand(kind, path, target)
    for attempt in (lambda: check_fixed(path), lambda: read_fixed(path, 100), lambda: write_fixed(path, "x"),
                    lambda: open_fixed(path, os.O_RDWR | os.O_CREAT)):
        with pytest.raises(Exception) as error:
            attempt()
        assert f"{path}: {says} stands where clearformer keeps its own file" in str(error.value)
    assert target.read_text() == "the user's own text\n"


def test_the_helper_reads_writes_and_allows_absence(tmp_path):
    path = tmp_path / "fixed"
    assert read_fixed(path, 10) is None
    check_fixed(path)
    write_fixed(path, "hello")
    assert read_fixed(path, 10) == b"hello"
    with pytest.raises(Exception, match="larger than"):
        read_fixed(path, 3)
    with pytest.raises(Exception, match="a file stands where its folder should be"):
        write_fixed(path / "below", "x")


# ----------------------------------------------------------------------------- RUN/.clearformer-lock
@pytest.mark.parametrize("kind", ["link", "hardlink", "folder"])
@pytest.mark.parametrize("argv", [
    ["train", "--out", "{run}", "--resume", "--steps", "5", "--quiet"],
    ["average", "--checkpoints", "{toy}/checkpoints/step-00000004", "--out", "{run}", "--overwrite"],
    ["import", "marian", "{marian}", "--out", "{run}", "--overwrite"],
])
def test_lock_file_never_written_through(kind, argv, run_copy, toy_run, marian_source, tmp_path, in_process):
    target = precious(tmp_path)
    stand(kind, run_copy / lock.LOCK_FILE, target)
    before = tree_hashes(run_copy, target)
    argv = [a.replace("{run}", str(run_copy)).replace("{toy}", str(toy_run)).replace("{marian}", str(marian_source))
            for a in argv]
    code, _, err = in_process(*argv)
    line = one_line(err)
    assert code == 2 and f"{run_copy / lock.LOCK_FILE}: a " in line and "never writes through it" in line, line
    assert tree_hashes(run_copy, target) == before


def test_fifo_at_the_lock_is_one_line_not_a_traceback(run_copy, tmp_path):
    stand("fifo", run_copy / lock.LOCK_FILE, run_copy)
    outcome = run_child("FIFO at the lock", ["train", "--out", str(run_copy), "--resume", "--steps", "5", "--quiet"],
                        tmp_path, seconds=60)
    assert f"{run_copy / lock.LOCK_FILE}: a FIFO stands" in one_line(outcome)


# ----------------------------------------------------------------------------- RUN/.clearformer-run
@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_marker_never_followed(kind, run_copy, tmp_path, in_process):
    target = precious(tmp_path)
    stand(kind, run_copy / lock.MARKER_FILE, target)
    before = tree_hashes(run_copy, target)
    code, _, err = in_process("train", "--out", run_copy, "--resume", "--steps", "5", "--quiet")
    line = one_line(err)
    assert code == 2 and f"{run_copy / lock.MARKER_FILE}: a " in line, line
    after = tree_hashes(run_copy, target)
    after.pop(str(run_copy / lock.LOCK_FILE), None)
    assert after == before  # nothing followed, nothing changed (at most the lock file was made)


def test_a_linked_marker_proves_nothing(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"mine")
    (folder / lock.MARKER_FILE).symlink_to(precious(tmp_path))
    assert not lock.is_clearformer_run(folder)


# ----------------------------------------------------------------------------- runs/LATEST
@pytest.mark.parametrize("kind", ["link", "folder"])
def test_latest_never_followed_nor_replaced(kind, toy_run, tmp_path, in_process):
    runs = Path(os.environ["CLEARFORMER_RUNS"])
    runs.mkdir()
    target = tmp_path / "pointer.txt"
    target.write_text(str(toy_run) + "\n")
    stand(kind, runs / "LATEST", target)
    before = tree_hashes(runs, target)
    code, _, err = in_process("translate", "I love you")
    assert code == 2 and f"{runs / 'LATEST'}: a " in one_line(err)
    code, _, err = in_process("train", "--out", runs / "toy", *SHORT)  # would write LATEST at its end
    assert code == 2 and f"{runs / 'LATEST'}: a " in one_line(err)
    assert not (runs / "toy").exists()  # refused before training
    assert tree_hashes(runs, target) == before


def test_fifo_at_latest_never_hangs(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkfifo(runs / "LATEST")
    outcome = run_child("FIFO at runs/LATEST", ["translate", "I love you"], tmp_path, seconds=60,
                        env={"CLEARFORMER_RUNS": str(runs)})
    assert f"{runs / 'LATEST'}: a FIFO stands" in one_line(outcome)


# ----------------------------------------------------------------------------- the cache's matmul_peak.json
PEAK = ("import sys; from clearformer.errors import UserError; from clearformer.train import mfu\n"
        "try:\n    mfu.matmul_peak(refresh=False)\nexcept UserError as error:\n    sys.exit(str(error))")


@pytest.mark.parametrize("kind", ["fifo", "link", "folder"])
def test_cache_file_never_followed_nor_waited_on(kind, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    target = precious(tmp_path)
    stand(kind, cache / "matmul_peak.json", target)
    # what `train` calls for its MFU figure, in a child under a time limit (a FIFO once hung it)
    done = subprocess.run([sys.executable, "-c", PEAK], env={**os.environ, "CLEARFORMER_CACHE": str(cache)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and f"{cache / 'matmul_peak.json'}: a " in one_line(done.stderr, code=1), done.stderr
    assert target.read_text() == "the user's own text\n"


# ----------------------------------------------------------------------------- learn --notebooks DIR
def test_notebooks_are_written_and_refused_in_one_line(tmp_path, in_process):
    pytest.importorskip("nbformat")
    folder = tmp_path / "nb"
    code, out, err = in_process("learn", "--notebooks", folder)
    assert code == 0, err
    written = sorted(folder.iterdir())
    target = precious(tmp_path)
    first = written[0]
    for kind in ("link", "folder", "fifo"):
        stand(kind, first, target)
        code, _, err = in_process("learn", "--notebooks", folder, "--overwrite")
        assert code == 2 and f"{first}: a " in one_line(err), err
        assert target.read_text() == "the user's own text\n"
        if first.is_dir() and not first.is_symlink():
            first.rmdir()
        else:
            first.unlink()
    file = tmp_path / "a-file"
    file.write_text("x")
    code, _, err = in_process("learn", "--notebooks", file / "below")
    assert code == 2 and f"--notebooks {file / 'below'}: a file stands on its path ({file})" in one_line(err)
    code, _, err = in_process("learn", "--notebooks", file)
    assert code == 2 and "not a folder" in one_line(err)
    code, _, err = in_process("learn", "--notebooks", "/")
    assert code == 2 and "is a system or home folder" in one_line(err)


def test_notebooks_into_a_read_only_folder(tmp_path, in_process):
    pytest.importorskip("nbformat")
    if os.geteuid() == 0:  # root writes into any mode; sysfs refuses new files to everyone
        folder = Path("/sys/kernel")
    else:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
    code, _, err = in_process("learn", "--notebooks", folder)
    line = one_line(err)
    assert code == 2 and str(folder) in line and ("cannot" in line), line



# ----------------------------------------------------------------------------- compiling writes only into the cache
COMPILE_PATHS = (
    "import os, json, tempfile\n"
    "from clearformer.store.cachedir import use_for_compiled_code\n"
    "use_for_compiled_code()\n"
    "from torch._inductor import codecache\n"
    "from torch._inductor.runtime import cache_dir_utils, runtime_utils\n"
    "print(json.dumps([os.environ['TORCHINDUCTOR_CACHE_DIR'], os.environ['TRITON_CACHE_DIR'],"
    " cache_dir_utils.cache_dir(), runtime_utils.default_cache_dir(), cache_dir_utils.default_cache_dir(),"
    " codecache._HEADER_DIR, codecache._HEADER_LOCK_DIR]))\n")


@pytest.mark.parametrize("cache", ["folder", "off"])
def test_every_compiler_cache_lies_in_the_cache_folder(cache, tmp_path):
    """Every folder torch.compile writes to (Inductor's kernels, Triton's, the precompiled C++ headers that
    once appeared as /tmp/torchinductor_USER) is inside clearformer's cache (with the cache off: inside the
    temporary folders removed at exit). Measured end to end once (docs/reliability.md): a compiled function in
    a child with TMPDIR set leaves nothing in TMPDIR."""
    root = tmp_path / "cache"
    env = {**os.environ, "CLEARFORMER_CACHE": str(root) if cache == "folder" else "off", "TMPDIR": str(tmp_path)}
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", COMPILE_PATHS], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    paths = json.loads(done.stdout)
    inside = str(root) if cache == "folder" else str(tmp_path / "clearformer-")
    assert all(path.startswith(inside) for path in paths), paths
    assert not any("torchinductor_" in path for path in paths), paths
