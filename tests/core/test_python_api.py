"""The Python API: `import clearformer` is cheap, its public names resolve, its version is pyproject's,
and the README's Python example runs as written."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import clearformer

ROOT = Path(__file__).resolve().parents[2]


def child_env(tmp_path: Path) -> dict:
    """This process's environment (PYTHONPATH included), with clearformer's folders under tmp_path."""
    return dict(os.environ, CLEARFORMER_RUNS=str(tmp_path / "runs"), CLEARFORMER_DATA=str(tmp_path / "data"),
                CLEARFORMER_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")


def readme_python_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, "the section holds one Python example"
    return blocks[0]


def test_the_readme_python_example_runs(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_python_block(), encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    env = dict(child_env(tmp_path), TMPDIR=str(tmp_path / "tmp"))  # the example's mkdtemp() lands in tmp_path
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, timeout=300, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    translations, recorded = done.stdout.strip().splitlines()[-2:]  # after the trainer's log lines
    assert len(ast.literal_eval(translations)) == 1  # one translation, as a list of str
    assert "recorded steps" in recorded and int(recorded.split(" - ")[1].split()[0]) > 10
    [run] = (tmp_path / "tmp").iterdir()
    assert (run / "model.safetensors").is_file() and (run / "checkpoints").is_dir()
    assert not (tmp_path / "runs").exists()  # nothing written but the folder the example named


def test_import_is_cheap_and_names_load_on_use(tmp_path):
    code = ("import sys, clearformer; assert 'torch' not in sys.modules, 'torch imported'; "
            "print(clearformer.__version__); clearformer.translate; assert 'torch' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], env=child_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == clearformer.__version__


def test_every_public_name_is_the_one_its_module_defines():
    import importlib

    for name, module in clearformer.PUBLIC.items():
        defined = getattr(importlib.import_module(module), clearformer.ALIASES.get(name, name))
        assert getattr(clearformer, name) is defined
    assert set(clearformer.__all__) == {"__version__", *clearformer.PUBLIC}
    assert callable(clearformer.train_model) and clearformer.train_model.__name__ == "train"


def test_the_version_is_written_once_and_pyproject_reads_it():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # (tomllib is Python 3.11+; 3.10 is supported)
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^dynamic = \["version"\]', project, re.MULTILINE)
    assert not re.search(r"^version\s*=", project, re.MULTILINE)
    assert 'version = { attr = "clearformer.__version__" }' in text.split("[tool.setuptools.dynamic]", 1)[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+", clearformer.__version__)
