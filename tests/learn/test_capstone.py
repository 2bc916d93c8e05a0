"""Lesson 15 and the worked solutions: every solution passes its own check, independently written right answers
pass, the capstone's solution reads the toy run's weights and translates as clearformer does, its planted bugs are
named by the first module that differs, and `learn train` trains it into a run clearformer itself can read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from clearformer.cli import main
from clearformer.learn.capstone_source import skeleton_text, solution_text
from clearformer.learn.check import check_here, format_report
from clearformer.learn.exercises import EXERCISES, exercise
from clearformer.learn.solutions import solution_text as worked
from clearformer.load import load_model

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

# Written from seed 002 and the Annotated Transformer (not from clearformer's solution): blocked cells -1e9 or
# -inf, softmax, times V; it differs from clearformer only on a row the Transformer never creates.
TEXTBOOK = {
    "annotated": '''
import math
import torch

def scaled_dot_product_attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn
''',
    "seed 002 (-inf)": '''
import numpy as np
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(k.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ v, weights
''',
    "heads with einops-style reshape": '''
def split_heads(x, n_heads):
    b, s, d = x.shape
    return x.reshape(b, s, n_heads, d // n_heads).permute(0, 2, 1, 3)

def merge_heads(x):
    b, h, s, d = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(b, s, h * d)
''',
}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("item", EXERCISES, ids=[e.name for e in EXERCISES])
def test_every_worked_solution_passes_its_own_check(item, tmp_path):
    report = check_here(item, write(tmp_path, item.filename, worked(item.name)))
    assert report.ok, format_report(report)


@pytest.mark.parametrize("name", sorted(TEXTBOOK))
def test_right_answers_written_independently_pass(name, tmp_path):
    item = exercise("heads" if "heads" in name else "attention")
    report = check_here(item, write(tmp_path, "mine.py", TEXTBOOK[name]))
    assert report.ok, format_report(report)


def test_solution_never_writes_over_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["learn", "solution", "attention"]) == 0
    (tmp_path / "attention.py").write_text("mine", encoding="utf-8")
    assert main(["learn", "solution", "attention"]) == 2
    assert "exists" in capsys.readouterr().err and (tmp_path / "attention.py").read_text() == "mine"
    assert main(["learn", "solution", "no-such"]) == 2


def test_the_skeleton_and_the_solution_are_one_file():
    solution, skeleton = solution_text(), skeleton_text()
    assert "# yours:" not in solution and "raise NotImplementedError" not in solution
    assert 140 <= len(solution.splitlines()) <= 230
    classes = [n.name for n in ast.parse(solution).body if isinstance(n, ast.ClassDef)]
    assert classes == ["Embedding", "MultiHeadAttention", "FeedForward", "LayerNorm", "EncoderLayer", "DecoderLayer",
                       "Transformer"]                    # the paper's order
    assert [n.name for n in ast.parse(skeleton).body if isinstance(n, ast.ClassDef)] == classes
    assert skeleton.count("raise NotImplementedError") == 7
    for module in ("attention", "causal_mask", "greedy_decode", "heads", "layer_norm", "positional_encoding"):
        assert f"from {module} import" in skeleton       # built from the learner's own exercise files


@pytest.fixture
def capstone_folder(tmp_path):
    for item in EXERCISES:
        write(tmp_path, item.filename, worked(item.name))
    write(tmp_path, "transformer.py", solution_text())
    return tmp_path


def run_check_here(path: Path, run_dir: Path) -> tuple[bool, str]:
    """The child's side and the checker's, in this process (the files are clearformer's own)."""
    from clearformer.learn.capstone_run import check_capstone_here

    report = check_capstone_here(path, run_dir)
    return report.ok, format_report(report)


def test_the_capstone_solution_checks_against_the_toy_run(capstone_folder, toy_runs, capsys, monkeypatch):
    monkeypatch.chdir(capstone_folder)
    assert main(["learn", "check", "transformer", "transformer.py", "--checkpoint",
                 str(toy_runs / "toy-translate")]) == 0
    out = capsys.readouterr().out
    assert "greedy translation ... OK" in out and "logits with" in out and out.splitlines()[-1].startswith("all right")


BUGS = {
    "no sqrt(d_model) scale": ("x = self.table(ids) * math.sqrt(self.d_model)", "x = self.table(ids)",
                               "src_embed"),
    "cross-attention reads the decoder": ("self.cross_attn(x, memory, src_mask)", "self.cross_attn(x, x, None)",
                                          "decoder.0.cross_attn"),
    "pre-norm instead of the paper's post-norm": ("self.norm2(x + self.ffn(x))\n        # end\n\n\n# 3.1 Decoder",
                                                  "x + self.ffn(self.norm2(x))\n        # end\n\n\n# 3.1 Decoder",
                                                  "encoder.0.ffn"),   # its input is norm2(x)
    "no causal mask": ("x = layer(x, memory, src_mask, tgt_mask)", "x = layer(x, memory, src_mask, None)",
                       "decoder.0.self_attn"),
    # one sentence alone has no <pad>: only the padded batch shows it
    "no encoder padding mask": ("src_mask = (src_ids != self.pad_id)[:, None, None, :]\n        x = self.src_embed",
                                "src_mask = None\n        x = self.src_embed", "encoder.0.self_attn"),
    "no padding mask in the cross-attention": ("self.cross_attn(x, memory, src_mask)",
                                               "self.cross_attn(x, memory, None)", "decoder.0.cross_attn"),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_capstone_bug_is_named_by_the_first_module_that_differs(bug, capstone_folder, toy_runs):
    from clearformer.learn import capstone_source

    old, new, module = BUGS[bug]
    assert old in capstone_source.SOLUTION
    source = capstone_source.BLOCK.sub(lambda m: "".join(line + "\n" for line in m.group(0).splitlines()[1:-1]),
                                       capstone_source.SOLUTION.replace(old, new))
    path = write(capstone_folder, "transformer.py", source)
    ok, out = run_check_here(path, toy_runs / "toy-translate")
    assert not ok, out
    assert f"the first module whose output differs is {module} " in out, out


def test_learn_train_trains_the_learners_model_into_a_clearformer_run(capstone_folder, toy_runs, capsys,
                                                                       monkeypatch):
    monkeypatch.chdir(capstone_folder)
    out_dir = capstone_folder / "mine"
    assert main(["learn", "train", "transformer.py", "--out", str(out_dir), "--steps", "3", "--checkpoint",
                 str(toy_runs / "toy-translate")]) == 0
    out = capsys.readouterr().out
    assert "trained your model for 3 steps" in out and "translates 'I love you' as" in out
    model, tokenizer, _ = load_model(out_dir)       # the mapping of names, backwards: a clearformer run
    assert model.config.d_model == 64 and torch.isfinite(model.output.linear.bias).all()


def test_only_the_padded_batch_shows_a_missing_padding_mask(capstone_folder, toy_runs):
    from clearformer.learn import capstone_source

    old, new, _ = BUGS["no encoder padding mask"]
    source = capstone_source.BLOCK.sub(lambda m: "".join(line + "\n" for line in m.group(0).splitlines()[1:-1]),
                                       capstone_source.SOLUTION.replace(old, new))
    ok, out = run_check_here(write(capstone_folder, "transformer.py", source), toy_runs / "toy-translate")
    wrong = [line for line in out.splitlines() if line.endswith("WRONG")]
    assert not ok and len(wrong) == 1 and "a padded batch of 4 sentences" in wrong[0], out
    ok, out = run_check_here(write(capstone_folder, "transformer.py", solution_text()), toy_runs / "toy-translate")
    assert ok and "a padded batch of 4 sentences" in out, out


def test_a_starter_that_raises_is_named_by_its_own_file(capstone_folder, toy_runs, capsys, monkeypatch):
    """A learner's transformer.py that is right, beside an attention.py whose block still raises: the report names
    attention.py and its line, not the line of transformer.py that called it (the real command, in its child)."""
    monkeypatch.chdir(capstone_folder)
    source = worked("attention").replace("    scores = q @ k.transpose(-2, -1)",
                                         "    raise NotImplementedError\n    scores = q @ k.transpose(-2, -1)")
    write(capstone_folder, "attention.py", source)
    line = source.splitlines().index("    raise NotImplementedError") + 1
    assert main(["learn", "check", "transformer", "transformer.py", "--checkpoint",
                 str(toy_runs / "toy-translate")]) == 1
    out = capsys.readouterr().out
    assert f"attention.py:{line}: your model raised NotImplementedError" in out, out
    assert "transformer.py:" not in out.split("exercise transformer", 1)[1], out


def test_an_untouched_starter_is_never_the_learners_work(capstone_folder, toy_runs, capsys, monkeypatch):
    from clearformer.learn.exercises import starter_text
    from clearformer.learn.session import write_missing_solutions

    monkeypatch.chdir(capstone_folder)
    write(capstone_folder, "attention.py", starter_text(exercise("attention")))   # what lesson 4's notebook wrote
    args = ["transformer.py", "--checkpoint", str(toy_runs / "toy-translate")]
    assert main(["learn", "check", "transformer", *args]) == 2
    err = capsys.readouterr().err
    assert "imports attention.py, but attention.py is still the untouched starter" in err and err.count("\n") == 1
    assert main(["learn", "train", *args, "--steps", "1"]) == 2
    assert "untouched starter" in capsys.readouterr().err
    mine = worked("layer-norm").replace("eps=1e-5", "eps=1e-05")           # the learner's own, even if close
    write(capstone_folder, "layer_norm.py", mine)
    written = write_missing_solutions(capstone_folder)                       # lesson 15's notebook cell
    assert written == ["attention.py"] and "untouched starter" in capsys.readouterr().out
    assert (capstone_folder / "attention.py").read_text(encoding="utf-8") == worked("attention")
    assert (capstone_folder / "layer_norm.py").read_text(encoding="utf-8") == mine   # never over the learner's
    assert main(["learn", "check", "transformer", *args]) == 0
