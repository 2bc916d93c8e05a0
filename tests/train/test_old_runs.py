"""Run folders written by the code before the one trainer (tests/data/runs_v1, see its README) still load,
translate / generate, and --resume to the very weights the old code reached."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clearformer.checkpoint import load_model
from clearformer.cli import main
from clearformer.train.state import step_checkpoints

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "runs_v1"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _two_threads():
    """The expected digests were taken with 2 torch threads; a float sum's order (and so the last bit
    of a trained weight) depends on the thread count, e.g. under OMP_NUM_THREADS=1."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def digest(path: Path) -> str:
    """sha256 over sorted names and raw bytes, as tests/data/runs_v1/README.md says."""
    tensors = load_file(str(path))
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def test_old_translation_run_translates_and_resumes_exactly(tmp_path, capsys):
    run = copy("translate", tmp_path)
    assert main(["translate", "--checkpoint", str(run), "I love you"]) == 0
    assert capsys.readouterr().out.strip()  # an untrained toy model, but a translation
    assert main(["train", "--out", str(run), "--resume", "--steps", "12", "--quiet"]) == 0
    final = step_checkpoints(run)[-1]
    assert final.name == "step-00000012"
    assert digest(final / "model.safetensors") == EXPECTED["translate_resumed_to_12"]
    header = (run / "metrics.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "mfu" in header.split(",")  # the old CSV was rewritten under the new columns, not mixed


def test_old_lm_run_generates_and_resumes(tmp_path, capsys):
    run = copy("lm", tmp_path)
    shutil.copy(FIXTURES / "lm-corpus.txt", tmp_path / "lm-corpus.txt")
    for option in ("--checkpoint", "--model"):
        assert main(["lm", "generate", "the dog", option, str(run), "--max-new-tokens", "3", "--greedy"]) == 0
        assert capsys.readouterr().out.strip().startswith("the dog")
    assert main(["lm", "train", "--out", str(run), "--resume", "--steps", "9", "--quiet",
                 "--corpus", str(tmp_path / "lm-corpus.txt")]) == 0
    model, _, meta = load_model(run)
    assert meta["step"] == 9 and meta["kind"] == "lm"
    assert [p.name for p in step_checkpoints(run)][-1] == "step-00000009"
    old = load_file(str(FIXTURES / "lm" / "model.safetensors"))
    moved = [name for name, tensor in model.state_dict().items() if name in old and not torch.equal(tensor, old[name])]
    assert moved  # it trained on from the old weights
    assert digest(run / "model.safetensors") == EXPECTED["lm_resumed_to_9"]  # the weights the old loop reached
