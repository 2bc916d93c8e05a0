"""The hostile-input suite's fixtures: one tiny trained toy run, a random language-model run, Marian and GPT-2
folders, and `run_child`: a command in a child process under a memory and a time limit.

A child process is used where an unbounded read or allocation (or a crash in torch) would otherwise take the
test process, or the machine, with it; everything else runs in-process through cli.main.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "interop"))

CHILD_MEMORY_BYTES = 3 * 1024**3  # torch needs about 2 GiB of address space to import
CHILD_SECONDS = 120
PEAKS: dict[str, int] = {}  # case -> the child's peak resident memory in KiB (ru_maxrss)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    peak_kib: int


def run_child(case: str, argv: list[str], cwd: Path, stdin=None, env: dict[str, str | None] | None = None,
              memory: int = CHILD_MEMORY_BYTES, seconds: float = CHILD_SECONDS, signal_after: float | None = None,
              signal_number: int = 2, stdout_to: str | None = None) -> Outcome:
    """`python -m clearformer.cli ARGV` with RLIMIT_AS = `memory` and a wall-clock limit; the child's own
    peak memory (from wait4) is recorded under `case`. signal_after: `signal_number` (SIGINT) after that many
    seconds. stdout_to: a path the child's standard output is opened on (/dev/full) instead of a file read back."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        # A suite started in the background (`nohup pytest &`) ignores SIGINT, and an ignored signal stays
        # ignored across exec: the child gets Python's own handler back, as a terminal's command does.
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    environment = {**os.environ, **(env or {})}  # a value of None removes the variable
    environment = {name: value for name, value in environment.items() if value is not None}
    out_path, err_path = cwd / f".out-{os.getpid()}", cwd / f".err-{os.getpid()}"
    with open(stdout_to or out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "clearformer.cli", *argv], cwd=cwd, stdin=stdin,
                                   stdout=out, stderr=err, env=environment, preexec_fn=limit)
        started = time.monotonic()
        signalled = False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            elapsed = time.monotonic() - started
            if signal_after is not None and not signalled and elapsed > signal_after:
                process.send_signal(signal_number)
                signalled = True
            if elapsed > seconds:
                process.kill()
                os.wait4(process.pid, 0)
                raise AssertionError(f"{case}: still running after {seconds} s: {argv}")
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
    PEAKS[case] = usage.ru_maxrss
    stdout = "" if stdout_to else out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    out_path.unlink(missing_ok=True)
    err_path.unlink()
    return Outcome(process.returncode, stdout, stderr, usage.ru_maxrss)


def one_line(outcome_or_err, code: int = 2) -> str:
    """The single stderr line of a refused command (exit `code`), checked to be no traceback."""
    if isinstance(outcome_or_err, Outcome):
        assert outcome_or_err.code == code, (outcome_or_err.code, outcome_or_err.stderr[-2000:])
        err = outcome_or_err.stderr
    else:
        err = outcome_or_err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def tree_hashes(*roots: Path) -> dict[str, str]:
    """SHA-256 of every file (and the target of every link) under `roots`: what must not change."""
    hashes = {}
    for root in roots:
        root = Path(root)
        paths = [root] if not root.is_dir() or root.is_symlink() else sorted(root.rglob("*"))
        for path in paths:
            if path.is_symlink():
                hashes[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                hashes[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                hashes[str(path)] = "dir"
    return hashes


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> Path:
    """One tiny trained toy-translate run (a few steps: seconds), shared by the whole suite; read-only."""
    from clearformer.cli import main

    run = tmp_path_factory.mktemp("hostile") / "toy"
    assert main(["train", "--out", str(run), "--steps", "4", "--save-every", "2", "--eval-every", "2",
                 "--bleu-sentences", "2", "--log-every", "1", "--keep", "2", "--quiet"]) == 0
    return run


@pytest.fixture(scope="session")
def spm_run(tmp_path_factory) -> Path:
    """A tiny toy run with a SentencePiece vocabulary (what the CTranslate2 export needs): seconds; read-only."""
    from clearformer.cli import main

    run = tmp_path_factory.mktemp("hostile-spm") / "spm"
    assert main(["train", "--out", str(run), "--tokenizer", "sentencepiece", "--vocab-size", "600", "--source-eos",
                 "--steps", "2", "--save-every", "2", "--eval-every", "2", "--bleu-sentences", "2", "--quiet"]) == 0
    return run


@pytest.fixture
def run_copy(toy_run, tmp_path) -> Path:
    """A copy of the toy run a test may damage."""
    copy = tmp_path / "run"
    shutil.copytree(toy_run, copy, ignore=shutil.ignore_patterns(".clearformer-lock"))
    return copy


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory) -> Path:
    """A random 2-layer decoder-only language model (a language-model run as `lm train` writes one)."""
    from clearformer.config import preset
    from clearformer.model.lm import LanguageModel
    from clearformer.store.checkpoint import save_model
    from clearformer.tokenize import SPECIALS, WordTokenizer

    tokenizer = WordTokenizer(list(SPECIALS) + "the dog ran a cat sat on mat".split())
    config = preset("lm-tiny", tgt_vocab_size=len(tokenizer), d_model=16, n_heads=2, n_decoder_layers=2, d_ff=32,
                    max_len=64)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("hostile-lm") / "lm"
    save_model(directory, LanguageModel(config), tokenizer, {"kind": "lm"})
    return directory


@pytest.fixture(scope="session")
def marian_source(tmp_path_factory) -> Path:
    from interop_helpers import marian_folder

    return marian_folder(tmp_path_factory.mktemp("hostile-marian") / "marian")[0]


@pytest.fixture(scope="session")
def gpt2_source(tmp_path_factory) -> Path:
    from interop_helpers import gpt2_folder

    return gpt2_folder(tmp_path_factory.mktemp("hostile-gpt2") / "gpt2")[0]


def pytest_terminal_summary(terminalreporter):
    if PEAKS:
        case, peak = max(PEAKS.items(), key=lambda item: item[1])
        terminalreporter.write_line(f"hostile suite: {len(PEAKS)} child processes; the largest peak "
                                    f"resident memory was {peak / 1024:.0f} MiB ({case})")


@pytest.fixture(autouse=True)
def _own_folder(tmp_path, monkeypatch):
    """Every case runs in its own folder with its own runs/ and home: nothing of the real user is near."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("CLEARFORMER_CACHE", "off")
    yield


@pytest.fixture
def in_process(capsys):
    """cli.main(ARGV) -> (exit code, stdout, stderr)."""
    from clearformer.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
