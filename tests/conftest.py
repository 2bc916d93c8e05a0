"""Shared fixtures: the golden values of the seeds' examples (the true numbers, not the seeds' printed ones),
and the sandbox every test runs in.

The sandbox: for the whole session CLEARFORMER_RUNS, CLEARFORMER_DATA and CLEARFORMER_CACHE point into one
temporary folder (set before collection, so every test, every child process started with the environment
and every notebook kernel sees it), and the checkout is compared before and after the suite: a file
created, changed or removed under the repository (.git, .venv, caches and __pycache__ aside) fails the
session with the list of what changed. The toy model the lessons read is trained once per session into
the sandbox's cache, where `learn` looks for it (`toy_model`). Every process the session starts computes on one
thread and keeps its bytecode in the sandbox (`process_environment`).

CLEARFORMER_TEST_SEED (a whole number, default 0) shifts every seed the tests' models use: the toy model's and
every training fixture's `--seed`, the child processes' that train, and the seed each test starts from
(`_deterministic`). The suite passes with 0 and with 1 (CI runs the training folders' quick subset with 1:
.ci/run); an assertion that holds for one seed only is wrong. tests/seeds.py holds the value for the folders'
helpers; the session refuses anything but a whole number here.

The suite's helpers, beside this file (importable from every folder; a folder's own `conftest` is not, as
pytest imports each folder's conftest under that one name): tests/shared.py `built_once` (a model a session
fixture trains or imports is built once for all the xdist workers, each taking its own copy: the toy model
here, interop's, explain's, lm's, Firefox's students), tests/threads.py (`one_thread`, the autouse fixture of
the folders whose models are tiny), tests/tolerance.py (the one rule for float32 comparisons: depth x float32
epsilon x scale). LONGEST_FILES start first, so that pytest -n 2 --dist loadfile ends both workers together.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from seeds import RAW, VARIABLE, seed, seed_args, valid
from shared import built_once
from threads import kept_thread_count

GOLDEN = Path(__file__).parent / "golden" / "seed_examples.json"
REPOSITORY = Path(__file__).resolve().parents[1]
SANDBOX_VARIABLES = {"CLEARFORMER_RUNS": "runs", "CLEARFORMER_DATA": "data", "CLEARFORMER_CACHE": "cache"}
NOT_WATCHED = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}
# The lessons' toy model: the toy-translate preset itself, half its steps (a few seconds). A model that translates
# matters to the suite's time: a smaller one (d_model 32, 150 steps) babbled to the n + 50 length limit, and the
# notebooks, the why tools and the paragraph tests then spent minutes on 60-token outputs (the files that read
# this model took 2.5 times as long in one A/B run).
TOY_TRAINING = ["--threads", "1", "--quiet", "--steps", "200", *seed_args()]

# The files that take longest (`python -m benchmarks.suite_time`: setup included, summed by file), sent
# to the workers first: pytest -n 2 --dist loadfile hands out one file at a time in collection order, and a long
# file met last keeps one worker busy while the other idles (the longest-first rule). Order within: longest first.
LONGEST_FILES = ["hostile/test_learn_check.py", "generate/test_batch_invariance.py", "learn/test_notebooks.py",
                 "firefox/test_export.py", "firefox/test_parity.py", "hostile/test_marian_files.py",
                 "hostile/test_sizes.py", "interop/test_batch_invariance_marian.py", "train/test_ddp.py",
                 "hostile/test_reads.py", "train/test_gpu_window.py", "viz/test_page_fits.py", "firefox/test_views.py",
                 "generate/test_compiled.py", "core/test_python_api.py", "hostile/test_cache_folder.py",
                 "hostile/test_catalogues.py", "hostile/test_signals.py", "catalog/test_catalogue_fidelity.py",
                 "catalog/test_adapt.py", "firefox/test_batch_invariance_firefox.py", "train/test_toy.py",
                 "hostile/test_fixed_names.py", "learn/test_lessons.py", "hostile/test_killed_runs.py",
                 "lm/test_lm_page.py", "viz/test_confidence_browser.py", "interop/test_ct2_engine.py",
                 "learn/test_capstone.py", "hostile/test_paths.py", "train/test_resume.py",
                 "learn/test_browser_lesson.py"]

_sandbox: dict = {}
# What every process the session starts (the xdist workers, the commands' child processes, notebook kernels, the
# GPU window's stages) inherits, set before the workers start: `process_environment`.
PROCESS_VARIABLES = ("OMP_NUM_THREADS", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")


def process_environment(folder: Path, environment) -> dict[str, str]:
    """The variables the session's processes get (a variable the user set is kept, but PYTHONDONTWRITEBYTECODE:
    - OMP_NUM_THREADS=1: two workers share a 2-core machine, and a process with torch's default two threads
      beside the other worker waits for its second thread at every small product (the GPU window's CPU rehearsal
      among them; tests/threads.py says the same of the tiny models in-process);
    - Python's compiled bytecode kept in the sandbox (PYTHONPYCACHEPREFIX) where the user's environment says
      not to write it beside the sources (PYTHONDONTWRITEBYTECODE): otherwise every child process compiles every
      module it imports again, and the suite starts hundreds of children (BENCHMARKS.md, "The test suite's time
      on this machine"); nothing is written in the checkout or site-packages either way)."""
    wanted = {}
    if "OMP_NUM_THREADS" not in environment:
        wanted["OMP_NUM_THREADS"] = "1"
    if environment.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in environment:
        wanted["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        wanted["PYTHONDONTWRITEBYTECODE"] = ""  # empty: Python writes bytecode again (into the prefix)
    return wanted


def checkout_state(root: Path = REPOSITORY) -> dict[str, tuple[int, int]]:
    """Every file under the checkout (but NOT_WATCHED folders) -> (size, modification time in ns)."""
    state = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name not in NOT_WATCHED and not name.endswith(".egg-info")]
        for name in files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            state[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
    return state


def checkout_changes(before: dict, after: dict) -> list[str]:
    added = [f"added {p}" for p in sorted(set(after) - set(before))]
    removed = [f"removed {p}" for p in sorted(set(before) - set(after))]
    changed = [f"changed {p}" for p in sorted(set(before) & set(after)) if before[p] != after[p]]
    return added + removed + changed


def pytest_configure(config):
    if not valid():
        raise pytest.UsageError(f"{VARIABLE}={RAW!r}: give a whole number (0, 1, ...) to shift the tests' seeds by")
    if _sandbox:
        return
    folder = Path(tempfile.mkdtemp(prefix="clearformer-tests-"))
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:  # compiled kernels stay in the user's cache (outside the
        from clearformer.store.cachedir import cache_dir  # checkout): a fresh one would recompile every session

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir("inductor"))
        _sandbox["inductor"] = True
    # Hypothesis keeps its example database and constants cache in ./.hypothesis: in the sandbox instead.
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(folder / "hypothesis")
    _sandbox.update(folder=folder, saved={name: os.environ.get(name) for name in SANDBOX_VARIABLES},
                    before=checkout_state())
    for name, sub in SANDBOX_VARIABLES.items():
        os.environ[name] = str(folder / sub)
    _sandbox["processes"] = {name: os.environ.get(name) for name in PROCESS_VARIABLES}
    os.environ.update(process_environment(folder, os.environ))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """LONGEST_FILES first (in that order), then every other file in pytest's own order (a stable sort)."""
    rank = {name: index for index, name in enumerate(LONGEST_FILES)}

    def place(item) -> int:
        path = Path(str(item.path)).resolve()
        relative = path.relative_to(REPOSITORY / "tests").as_posix() if path.is_relative_to(REPOSITORY) else ""
        return rank.get(relative, len(rank))

    items.sort(key=place)


def pytest_sessionfinish(session, exitstatus):
    if not _sandbox or "before" not in _sandbox:
        return
    changes = checkout_changes(_sandbox.pop("before"), checkout_state())
    if changes:
        shown = "\n  ".join(changes[:20]) + (f"\n  ... and {len(changes) - 20} more" if len(changes) > 20 else "")
        message = f"FAILED: the test suite changed the checkout {REPOSITORY}:\n  {shown}"
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line(message, red=True) if reporter else print(message)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    if not _sandbox:
        return
    if _sandbox.pop("inductor", False):
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    for name, value in [*_sandbox.pop("saved").items(), *_sandbox.pop("processes").items()]:
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(_sandbox.pop("folder"), ignore_errors=True)


@pytest.fixture(scope="session")
def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory) -> Path:
    """The lessons' toy model, trained once per session (small; one training for all the xdist workers:
    tests/shared.py) and copied into the sandbox's cache, where `learn`, the notebooks and the page look for it
    (`learn.toy.toy_run_dir`)."""
    from clearformer.cli import main
    from clearformer.learn.toy import toy_run_dir

    def train(folder: Path) -> None:
        with kept_thread_count():
            assert main(["train", "--preset", "toy-translate", "--out", str(folder), *TOY_TRAINING]) == 0

    run = toy_run_dir()
    if not (run / "model.safetensors").exists():
        built_once(tmp_path_factory, "toy-model", train, into=run)
    return run


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(seed(0))
    yield


@pytest.fixture(scope="module")
def browser():
    """Headless chromium for a module's browser tests (live_support.chromium: skipped without it, failed in CI)."""
    from live_support import chromium

    yield from chromium()


@pytest.fixture
def page(browser):
    """A fresh tab; any page or console error fails the test (a module may override this to allow one)."""
    from live_support import browser_tab

    yield from browser_tab(browser)
