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

from clearformer.cli import main
from clearformer.store.checkpoint import load_model
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


V2 = FIXTURES.parent / "runs_v2"  # written by the release whose config.json was one flat object (README there)
EXPECTED_V2 = json.loads((V2 / "expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", ["translate_greedy", "translate_beam4"])
def test_v2_translation_run_translates_as_that_release_did(tmp_path, capsys, case):
    run = tmp_path / "translate"
    shutil.copytree(V2 / "translate", run)
    assert main(["translate", "--checkpoint", str(run), *EXPECTED_V2[case]["args"]]) == 0
    assert capsys.readouterr().out.strip() == EXPECTED_V2[case]["out"]


def test_v2_translation_run_keeps_its_tokenizer_facts_and_resumes_exactly(tmp_path):
    run = tmp_path / "translate"
    shutil.copytree(V2 / "translate", run)
    old_config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    model, tokenizer, _ = load_model(run)
    assert tokenizer.source_eos is old_config["source_eos"] is True  # from the old config.json
    assert tokenizer.length_ratio == old_config["length_ratio"] > 0
    assert main(["train", "--out", str(run), "--resume", "--steps", "12", "--quiet", "--threads", "2"]) == 0
    final = step_checkpoints(run)[-1]
    assert final.name == "step-00000012"
    assert digest(final / "model.safetensors") == EXPECTED_V2["translate_resumed_to_12"]
    # The resumed run is written in the current format: the facts now live in tokenizer.json.
    written = json.loads((final / "config.json").read_text(encoding="utf-8"))
    assert "source_eos" not in written and "length_ratio" not in written and "extra" not in written
    facts = json.loads((final / "tokenizer.json").read_text(encoding="utf-8"))
    assert facts["source_eos"] is True and facts["length_ratio"] == old_config["length_ratio"]
    assert load_model(final)[1].source_eos is True


def test_v2_mla_language_model_loads_its_flat_sizes_and_generates_as_before(tmp_path, capsys):
    run = tmp_path / "lm-mla"
    shutil.copytree(V2 / "lm-mla", run)
    old = json.loads((run / "config.json").read_text(encoding="utf-8"))
    model, _, _ = load_model(run)
    assert model.config.attention == "mla"
    assert {name: getattr(model.config.mla, name) for name in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
                                                              "qk_rope_head_dim", "v_head_dim")} == \
        {name: old[name] for name in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                      "v_head_dim")}
    assert main(["lm", "generate", "--checkpoint", str(run), *EXPECTED_V2["lm_mla_greedy"]["args"]]) == 0
    assert capsys.readouterr().out.strip() == EXPECTED_V2["lm_mla_greedy"]["out"]


def test_info_shows_the_facts_an_old_config_carried(capsys):
    assert main(["info", "--checkpoint", str(V2 / "translate"), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["tokenizer"] == {"kind": "words", "vocab_size": 329, "source_eos": True, "length_ratio": 1.0531}
    assert "source_eos" not in info["config"] and info["config"]["mla"] is None
