"""Exercises: starters, reference solutions that pass, planted bugs that are caught with a reason, unusable files."""

from __future__ import annotations

import ast
import re

import pytest
import torch
from planted import BUGS, MISLEADING, NOTES, SOLUTIONS

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.learn import reference
from clearformer.learn.check import check_here, format_report
from clearformer.learn.exercises import EXERCISES, exercise

REQUIRED = {"positional-encoding": "positional_encoding(seq_len: int, d_model: int) -> torch.Tensor",
            "attention": "scaled_dot_product_attention(q, k, v, mask=None)",
            "causal-mask": "causal_mask(size: int) -> torch.Tensor"}


def test_every_exercise_has_a_solution_and_at_least_three_bugs():
    names = {e.name for e in EXERCISES}
    assert names == set(SOLUTIONS) == set(BUGS)
    assert len(names) >= 8
    assert all(len(BUGS[name]) >= 3 for name in names)


@pytest.mark.slow
def test_starters_have_the_issues_signatures_and_are_never_written_twice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for item in EXERCISES:
        assert main(["learn", "exercise", item.name]) == 0
        source = (tmp_path / item.filename).read_text(encoding="utf-8")
        tree = ast.parse(source)
        defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        assert defined == list(item.functions)
        assert source.count("raise NotImplementedError") == len(item.functions)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                assert re.search(r"\([\w.]+,", ast.get_docstring(node)), f"{node.name}: no shape in the docstring"
        if item.name in REQUIRED:
            assert "def " + REQUIRED[item.name] in source
        before = (tmp_path / item.filename).read_bytes()
        assert main(["learn", "exercise", item.name]) == 2
        err = capsys.readouterr().err
        assert "exists" in err and err.count("\n") == 1
        assert (tmp_path / item.filename).read_bytes() == before
        # The untouched starter is unusable (not implemented): exit 2, one line (the child's own verdict, here).
        with pytest.raises(UserError, match="not implemented yet"):
            check_here(item, tmp_path / item.filename)
    assert main(["learn", "check", "attention", "attention.py"]) == 2     # once through the command and its child
    assert "not implemented yet" in capsys.readouterr().err


def checked_here(name: str, source: str, folder) -> tuple[bool, str]:
    """The checker's verdict and report, run in this process (check_here: the child's own code, no child)."""
    path = folder / "mine.py"
    path.write_text(source, encoding="utf-8")
    report = check_here(exercise(name), path)
    return report.ok, format_report(report)


@pytest.mark.parametrize("name", sorted(SOLUTIONS))
def test_the_reference_solution_passes_every_case(name, tmp_path):
    ok, out = checked_here(name, SOLUTIONS[name], tmp_path)
    assert ok, out
    assert out.splitlines()[-1].startswith("all right: ")
    assert " ... OK" in out and "WRONG" not in out


@pytest.mark.parametrize(("name", "bug", "source", "words"),
                         [(name, bug, source, words) for name, bugs in sorted(BUGS.items())
                          for bug, source, words in bugs])
def test_each_planted_bug_is_caught_and_named(name, bug, source, words, tmp_path):
    ok, out = checked_here(name, source, tmp_path)
    assert not ok, bug
    assert "... WRONG" in out and out.splitlines()[-1].startswith("wrong: ")
    assert words in out, f"{bug}: the report does not say {words!r}:\n{out}"
    assert bug not in MISLEADING or MISLEADING[bug] not in out, f"{bug}: the report misleads:\n{out}"
    if "first wrong cell" in out:
        assert re.search(r"first wrong cell \[[\d, ]+\]: expected \S+, got \S+", out)


@pytest.mark.parametrize(("name", "variant", "source", "words"),
                         [(name, variant, source, words) for name, items in sorted(NOTES.items())
                          for variant, source, words in items])
def test_an_edge_case_the_transformer_never_meets_is_a_note(name, variant, source, words, tmp_path):
    ok, out = checked_here(name, source, tmp_path)
    assert ok, out
    assert "note: " in out and words in out and "does not count against you" in out


@pytest.mark.slow
def test_a_fully_masked_row_gets_zero_weights_and_a_zero_output():
    """What the attention exercise expects for a query with nothing to attend to: clearformer's masked_softmax."""
    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    output, weights = reference.attention(q, k, v, mask)
    assert torch.equal(weights[0, 0, 1], torch.zeros(3)) and torch.equal(output[0, 0, 1], torch.zeros(4))
    torch.testing.assert_close(weights[0, 0, 0].sum(), torch.tensor(1.0))


def test_the_references_are_clearformers_modules(golden):
    """The expected values of the seeds' cases are the golden ones."""
    pe = exercise("positional-encoding").cases()[0].expected
    torch.testing.assert_close(pe, torch.tensor(golden["seed_003_positional_encoding_5x6"]["PE"],
                                                dtype=torch.float64), atol=1e-6, rtol=0)
    output, weights = exercise("attention").cases()[0].expected
    seed = golden["seed_002_i_love_you"]
    torch.testing.assert_close(weights[0, 0], torch.tensor(seed["weights"], dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(output[0, 0], torch.tensor(seed["output"], dtype=torch.float64), atol=1e-6, rtol=0)
    norm = exercise("layer-norm").cases()[1]
    x, gamma, beta, eps = norm.args
    torch.testing.assert_close(norm.expected, torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps))
    mask_case = exercise("causal-mask").cases()[0]
    assert torch.equal(mask_case.expected, torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    attention_names = [c.name for c in exercise("attention").cases()]
    assert any("padding" in n for n in attention_names) and any("fully masked" in n for n in attention_names)
    greedy = [c.expected for c in exercise("greedy-decode").cases()]
    assert greedy[0] == [3] and greedy[1][-1] == 3 and 3 not in greedy[2]   # <eos> first, midway, never


UNUSABLE = {
    "syntax error": ("def positional_encoding(seq_len, d_model:\n    return 1\n", ":1: syntax error"),
    "no such function": ("def positional_encodings(seq_len, d_model):\n    return 1\n",
                         "defines no function positional_encoding()"),
    "an exception while importing": ("import no_such_module_anywhere\n", "importing it raised ModuleNotFoundError"),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(UNUSABLE))
def test_an_unusable_file_is_one_line_and_exit_2(what, tmp_path, capsys):
    source, words = UNUSABLE[what]
    path = tmp_path / "mine.py"
    path.write_text(source, encoding="utf-8")
    assert main(["learn", "check", "positional-encoding", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clearformer learn: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert words in err


def test_an_error_in_the_learners_function_is_a_wrong_answer_at_its_line(tmp_path):
    planted = dict((bug, source) for bug, source, _ in BUGS["attention"])
    ok, out = checked_here("attention", planted["k.T on a 4-D tensor"], tmp_path)
    assert not ok and f"{tmp_path / 'mine.py'}:6: scaled_dot_product_attention() raised RuntimeError" in out
    ok, out = checked_here("heads", dict((bug, source) for bug, source, _ in BUGS["heads"])[
        "merge with .view on a transposed tensor"], tmp_path)
    assert not ok and "merge_heads() raised RuntimeError: view size is not compatible" in out
    assert ".reshape(...)" in out and "split_heads(x, n_heads)" not in out   # split is right


def test_unusable_commands_are_exit_2(tmp_path, capsys):
    for argv in (["learn", "exercise", "no-such"], ["learn", "check", "attention"], ["learn", "exercise"],
                 ["learn", "check", "attention", str(tmp_path / "missing.py")],
                 ["learn", "check", "attention", str(tmp_path)], ["learn", "exercises", "extra"]):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.startswith("clearformer learn: error: ")


def test_the_exercise_list_names_every_exercise(capsys):
    assert main(["learn", "exercises"]) == 0
    out = capsys.readouterr().out
    assert all(item.name in out for item in EXERCISES)

