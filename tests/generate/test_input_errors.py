"""Bad input to translate/evaluate/check/data build: one line, the documented exit code (2), never a traceback."""

from __future__ import annotations

import io
import json
import sys

import pytest

from clearformer.cli import main
from clearformer.explain.checker import MAX_EXAMPLE_BYTES


def one_line_error(capsys, args, code=2) -> str:
    assert main(args) == code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def usage_error(capsys, args) -> str:
    """A bad option value: argparse stops with exit 2 and one line (no usage text)."""
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_check_on_deeply_nested_json_is_a_one_line_input_error(tmp_path, capsys):
    path = tmp_path / "nested.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert "nested too deeply" in one_line_error(capsys, ["check", str(path)])
    path.write_text(json.dumps({"tokens": ["a"], "form": "x" * 10_000}), encoding="utf-8")
    assert len(one_line_error(capsys, ["check", str(path)])) < 300


def test_check_refuses_a_file_over_its_size_limit(tmp_path, capsys):
    path = tmp_path / "huge.json"
    path.write_text("[" + "0," * (MAX_EXAMPLE_BYTES // 2) + "0]", encoding="utf-8")
    assert "over the limit" in one_line_error(capsys, ["check", str(path)])


def test_translate_output_a_directory(checkpoint, tmp_path, capsys):
    err = one_line_error(capsys, ["translate", "I love you", "--output", str(tmp_path), "--checkpoint",
                                  str(checkpoint)])
    assert "is a directory" in err


def test_evaluate_output_a_directory(checkpoint, tmp_path, capsys):
    err = one_line_error(capsys, ["evaluate", "--output", str(tmp_path), "--checkpoint", str(checkpoint)])
    assert "is a directory" in err


def test_data_build_custom_out_an_existing_file(tmp_path, capsys):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("a\tb\n", encoding="utf-8")
    err = one_line_error(capsys, ["data", "build", "custom", "--tsv", str(corpus), "--out", str(corpus)])
    assert "is a file" in err


@pytest.mark.parametrize("option, value", [
    ("--alpha", "nan"), ("--alpha", "inf"), ("--alpha", "-1")])
def test_translate_rejects_non_finite_and_out_of_range_numbers(checkpoint, capsys, option, value):
    err = usage_error(capsys, ["translate", "I love you", "--beam", "4", option, value, "--checkpoint",
                               str(checkpoint)])
    assert value in err


@pytest.mark.parametrize("args", [
    ["evaluate", "--alpha", "nan"], ["train", "--minutes", "inf"], ["train", "--dropout", "nan"],
    ["train", "--lr-factor", "0"], ["lm", "generate", "x", "--temperature", "nan"],
    ["lm", "generate", "x", "--top-p", "inf"], ["lm", "train", "--lr", "inf"],
    ["data", "build", "custom", "--valid-fraction", "nan"]])
def test_other_float_options_reject_nan_and_inf(capsys, args):
    usage_error(capsys, args)


def test_unknown_word_error_does_not_echo_a_huge_input(checkpoint, capsys):
    word = "z" * 100_000
    err = one_line_error(capsys, ["translate", word, "--checkpoint", str(checkpoint)])
    assert "every word is unknown" in err and len(err) < 300


def test_invalid_utf8_on_stdin_names_the_line(checkpoint, capsys, monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b"I love you\nthe dog \xff sleeps\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert "<stdin>:2: not UTF-8 text" in one_line_error(capsys, ["translate", "--checkpoint", str(checkpoint)])


def test_invalid_utf8_in_a_file_names_file_and_line(checkpoint, tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_bytes(b"I love you\n\nthe dog \xc3 sleeps\n")
    err = one_line_error(capsys, ["translate", "--file", str(path), "--checkpoint", str(checkpoint)])
    assert f"{path}:3: not UTF-8 text" in err


def test_a_lone_surrogate_in_an_argument_is_not_text(checkpoint, capsys):
    err = one_line_error(capsys, ["translate", "I love \udcff you", "--checkpoint", str(checkpoint)])
    assert "not UTF-8 text" in err
