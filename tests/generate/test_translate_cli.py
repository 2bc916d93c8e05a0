"""`clearformer translate`: argument, stdin or file input; order and empty lines kept; bad input: one line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from clearformer.cli import main
from clearformer.generate import DecodingOptions, translate
from clearformer.generate.facts import DecodingFacts
from clearformer.load import load_decoding_facts, load_model
from clearformer.store.checkpoint import WEIGHTS_FILE, save_model

LINES = ["I love you", "", "the dog sleeps", "   ", "we eat bread .", "I love the cat"]


def run_cli(args: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def expected(checkpoint: Path, sentences: list[str], beam: int = 1, **options) -> list[str]:
    """Each sentence translated alone through the Python API (by the run's decoding facts, as `translate`)."""
    model, tokenizer, _ = load_model(checkpoint)
    decoding, facts = DecodingOptions(beam=beam, **options), load_decoding_facts(checkpoint, tokenizer)
    return [translate(model, tokenizer, [s.strip()], decoding, facts=facts)[0] for s in sentences]


def test_translate_argument(checkpoint, capsys):
    code, out, err = run_cli(["translate", "I love you", "--checkpoint", str(checkpoint)], capsys)
    assert code == 0
    assert out == expected(checkpoint, ["I love you"])[0] + "\n"


def test_several_arguments_are_several_sentences_as_stdin_lines_are(checkpoint, capsys, monkeypatch):
    """`translate "A" "B"` is `printf 'A\nB\n' | translate`: one translation per argument, per line."""
    sentences = ["I love you", "the dog sleeps", "we eat bread ."]
    code, out, _ = run_cli(["translate", *sentences, "--checkpoint", str(checkpoint)], capsys)
    assert code == 0
    assert out.split("\n")[:-1] == expected(checkpoint, sentences)
    _, piped, _ = run_cli(["translate", "--checkpoint", str(checkpoint)], capsys,
                          stdin="".join(s + "\n" for s in sentences), monkeypatch=monkeypatch)
    assert out == piped
    words = run_cli(["translate", "I", "love", "you", "--checkpoint", str(checkpoint)], capsys)[1]
    assert len(words.split("\n")[:-1]) == 3  # three words, three sentences: not glued into one
    code, out, err = run_cli(["translate", "I love you", " ", "--checkpoint", str(checkpoint)], capsys)
    assert code == 2 and out == "" and "argument 2: empty sentence" in err
    code, out, err = run_cli(["translate", "I love you", "qwerty", "--checkpoint", str(checkpoint)], capsys)
    assert code == 2 and "argument 2: every word is unknown" in err


def test_translate_help_says_each_argument_is_a_sentence(capsys):
    with pytest.raises(SystemExit):
        main(["translate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "one per argument and one translation per line" in help_text


def test_translate_stdin_keeps_order_and_empty_lines(checkpoint, capsys, monkeypatch):
    code, out, _ = run_cli(["translate", "--checkpoint", str(checkpoint)], capsys,
                           stdin="\n".join(LINES) + "\n", monkeypatch=monkeypatch)
    assert code == 0
    assert out.split("\n")[:-1] == expected(checkpoint, LINES)
    assert out.split("\n")[1] == "" and out.split("\n")[3] == ""


def test_translate_file_with_beam_and_output(checkpoint, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    target = tmp_path / "out.txt"
    code, out, _ = run_cli(["translate", "--file", str(source), "--beam", "3", "--batch-size", "2",
                            "--output", str(target), "--checkpoint", str(checkpoint)], capsys)
    assert code == 0 and out == ""
    assert target.read_text(encoding="utf-8").split("\n")[:-1] == expected(checkpoint, LINES, beam=3)


def test_translate_early_stopping_rule_and_alpha_reach_beam_search(checkpoint, capsys):
    args = ["translate", "--beam", "3", "--alpha", "1.5", "--early-stop", "current", "--checkpoint", str(checkpoint)]
    code, out, _ = run_cli([*args, "--", LINES[0]], capsys)
    assert code == 0
    assert out == expected(checkpoint, [LINES[0]], beam=3, alpha=1.5, stop="current")[0] + "\n"


def test_translate_uses_latest_run_without_checkpoint(checkpoint, tmp_path, capsys, monkeypatch):
    from clearformer.store.runs import mark_latest

    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    mark_latest(checkpoint)
    code, out, _ = run_cli(["translate", "I love you"], capsys)
    assert code == 0 and out == expected(checkpoint, ["I love you"])[0] + "\n"


def test_some_unknown_words_warn_on_stderr(checkpoint, capsys):
    code, out, err = run_cli(["translate", "I love zebras", "--checkpoint", str(checkpoint)], capsys)
    assert code == 0 and out.strip() == expected(checkpoint, ["I love zebras"])[0]
    assert "warning" in err and "zebras" in err and len(err.strip().splitlines()) == 1


def damaged(checkpoint: Path) -> Path:
    (checkpoint / WEIGHTS_FILE).write_bytes(b"not safetensors at all")
    return checkpoint


def other_config(checkpoint: Path) -> Path:
    config = json.loads((checkpoint / "config.json").read_text())
    config["d_ff"] = 64
    (checkpoint / "config.json").write_text(json.dumps(config))
    return checkpoint


def language_model(checkpoint: Path) -> Path:
    from clearformer.config import preset
    from clearformer.model.lm import LanguageModel
    from clearformer.tokenize import load_tokenizer

    tokenizer = load_tokenizer(checkpoint)
    model = LanguageModel(preset("lm-tiny", tgt_vocab_size=len(tokenizer)))
    return save_model(checkpoint.parent / "lm", model, tokenizer)


@pytest.mark.parametrize("case, args, stdin, needle", [
    ("empty argument", ["translate", ""], None, "empty sentence"),
    ("only unknown words", ["translate", "zebras giraffes"], None, "every word is unknown"),
    ("too long", ["translate", " ".join(["cat"] * 40)], None, "longer than the model's maximum length (32)"),
    ("bad line in stdin", ["translate"], "I love you\n\nzebras\n", "<stdin>:3: every word is unknown"),
    ("bad beam", ["translate", "I love you", "--beam", "0"], None, "--beam must be at least 1"),
])
def test_bad_sentences_are_one_line_errors(checkpoint, capsys, monkeypatch, case, args, stdin, needle):
    code, out, err = run_cli(args + ["--checkpoint", str(checkpoint)], capsys, stdin, monkeypatch)
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err


def test_bad_line_in_file_names_file_and_line(checkpoint, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("I love you\n\nthe dog sleeps\nqwerty\n", encoding="utf-8")
    code, out, err = run_cli(["translate", "--file", str(source), "--checkpoint", str(checkpoint)], capsys)
    assert code != 0 and out == ""
    assert f"{source}:4: every word is unknown" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("breaker, needle", [
    (lambda c: c / "nowhere", "no such checkpoint directory"),
    (damaged, "damaged weights file"),
    (other_config, "config.json implies"),
    (language_model, "decoder-only language model"),
])
def test_bad_checkpoints_are_one_line_errors(checkpoint, capsys, breaker, needle):
    code, out, err = run_cli(["translate", "I love you", "--checkpoint", str(breaker(checkpoint))], capsys)
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err


def test_missing_file_and_no_trained_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    code, _, err = run_cli(["translate", "I love you"], capsys)
    assert code != 0 and "no trained model yet" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["translate", "--file", str(tmp_path / "missing.txt")], capsys)
    assert code != 0 and "missing.txt: no such file" in err


@pytest.mark.slow
def test_real_entry_point_reads_stdin(checkpoint):
    """The installed command, end to end: stdin in, one translation per line out, no traceback on error."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "clearformer.cli", "translate", "--checkpoint", str(checkpoint)]
    text = "I love you\n\nthe dog sleeps\n"
    ok = subprocess.run(command, input=text, capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split("\n")[:-1] == expected(checkpoint, ["I love you", "", "the dog sleeps"])
    bad = subprocess.run(command, input="\nqwerty\n", capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "clearformer translate: error: <stdin>:2: every word is unknown to the " \
                                 "model's vocabulary (qwerty)"


@pytest.mark.slow
def test_translate_api_keeps_order_across_batches(checkpoint):
    model, tokenizer, _ = load_model(checkpoint)
    sentences = ["I love the cat", "", "we eat bread", "I love you", "the dog sleeps ."] * 3
    calls = []
    together = translate(model, tokenizer, sentences, DecodingOptions(batch_size=4), progress=calls.append)
    assert together == [translate(model, tokenizer, [s])[0] for s in sentences]
    assert sum(calls) == len(sentences)
    assert together[1] == ""
    assert torch.is_inference_mode_enabled() is False


# ----------------------------------------------------------------------------- reliability (issue 14)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_non_finite_numbers_are_one_line_errors(checkpoint, capsys, command, value):
    args = [command, "--beam", "4", f"--alpha={value}", "--checkpoint", str(checkpoint)]
    code, out, err = run_cli([*args, "I love you"] if command == "translate" else args, capsys)
    assert code == 2 and out == ""
    assert err.strip() == f"clearformer {command}: error: --alpha must be a finite number, not {float(value)}"


@pytest.mark.parametrize("argv", [["lm", "generate", "In", "--temperature", "nan"],
                                  ["lm", "generate", "In", "--top-p", "inf"],
                                  ["train", "--minutes", "nan"], ["train", "--lr-factor=-inf"],
                                  ["data", "build", "custom", "--valid-fraction", "nan"]])
def test_no_float_option_of_any_command_takes_nan_or_inf(capsys, argv):
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "must be a finite number" in err


def test_output_that_is_a_directory_is_a_one_line_error(checkpoint, tmp_path, capsys):
    code, out, err = run_cli(["translate", "I love you", "--output", str(tmp_path), "--checkpoint",
                              str(checkpoint)], capsys)
    assert code == 2 and out == "" and err.strip().endswith("is a folder; give a file name")
    (tmp_path / "file").write_text("x")
    code, _, err = run_cli(["translate", "I love you", "--output", str(tmp_path / "file" / "out.txt"),
                            "--checkpoint", str(checkpoint)], capsys)
    assert code == 2 and "is a file, not a folder" in err and len(err.strip().splitlines()) == 1


def test_unknown_word_errors_do_not_echo_a_huge_input(checkpoint, capsys):
    code, out, err = run_cli(["translate", "z" * 100_000, "--checkpoint", str(checkpoint)], capsys)
    assert code == 2 and err.strip().endswith("error: sentence of 100,000 characters; at most 2,000")
    word = "z" * 1_500  # under the sentence limit: quoted up to 200 characters, then an ellipsis
    code, out, err = run_cli(["translate", word, "--checkpoint", str(checkpoint)], capsys)
    assert code == 2 and len(err) < 400 and "every word is unknown" in err and "... (1,500 characters" in err
    code, out, err = run_cli(["translate", f"I love {word}", "--checkpoint", str(checkpoint)], capsys)
    assert code == 0 and len(err) < 400 and "warning" in err and "... (1,500 characters" in err


@pytest.mark.slow
def test_invalid_utf8_is_named_with_its_line(checkpoint, tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "clearformer.cli", "translate", "--checkpoint", str(checkpoint)]
    bad = subprocess.run(command, input=b"I love you\n\xff\xfe cat\n", capture_output=True, env=env)
    assert bad.returncode == 2 and bad.stdout == b""
    assert bad.stderr.decode().strip() == "clearformer translate: error: <stdin>:2: not UTF-8 text"
    source = tmp_path / "in.txt"
    source.write_bytes(b"I love you\n\nthe cat\n\xc3\x28\n")
    bad = subprocess.run([*command, "--file", str(source)], capture_output=True, env=env)
    assert bad.returncode == 2 and bad.stderr.decode().strip().endswith(f"{source}:4: not UTF-8 text")


def test_undecodable_text_in_stdin_or_argument(checkpoint, capsys, monkeypatch):
    """Python hands bytes that are not UTF-8 over as lone surrogates (argv, some stdin settings)."""
    code, _, err = run_cli(["translate", "--checkpoint", str(checkpoint)], capsys,
                           stdin="I love you\nthe \udcff cat\n", monkeypatch=monkeypatch)
    assert code == 2 and "<stdin>:2: not UTF-8 text" in err
    code, _, err = run_cli(["translate", "I love \udcff", "--checkpoint", str(checkpoint)], capsys)
    assert code == 2 and err.strip().endswith("error: not UTF-8 text")


def test_brevity_option_reaches_decoding_and_rejects_negative_weights(checkpoint, capsys):
    model, tokenizer, meta = load_model(checkpoint)
    # as if measured by `train`: translations three times the source
    save_model(checkpoint, model, tokenizer, meta=meta, facts=DecodingFacts(length_ratio=3.0))
    for weight in ("0", "2.5"):
        code, out, _ = run_cli(["translate", "--brevity", weight, "--checkpoint", str(checkpoint), "I love you"],
                               capsys)
        assert code == 0 and out == expected(checkpoint, ["I love you"], brevity=float(weight))[0] + "\n"
    beam = ["translate", "--beam", "3", "--brevity", "4", "--checkpoint", str(checkpoint), "I love you"]
    code, out, _ = run_cli(beam, capsys)
    assert code == 0 and out == expected(checkpoint, ["I love you"], beam=3, brevity=4.0)[0] + "\n"
    code, out, err = run_cli(["translate", "--brevity", "-1", "--checkpoint", str(checkpoint), "I love you"], capsys)
    assert code != 0 and out == ""
    assert err.strip() == "clearformer translate: error: --brevity must be at least 0, not -1"


def test_device_chooses_where_the_pytorch_engine_decodes(checkpoint, capsys):
    on_cpu = run_cli(["translate", "--checkpoint", str(checkpoint), "I love you"], capsys)
    assert run_cli(["translate", "--checkpoint", str(checkpoint), "--device", "cpu", "I love you"], capsys) == on_cpu
    if torch.cuda.is_available():  # a GPU machine: the same words from the model on the GPU
        code, out, _ = run_cli(["translate", "--checkpoint", str(checkpoint), "--device", "cuda", "I love you"], capsys)
        assert code == 0 and out == on_cpu[1]
    else:
        code, _, err = run_cli(["translate", "--checkpoint", str(checkpoint), "--device", "cuda", "I love you"], capsys)
        assert code == 2 and "no CUDA GPU" in err and len(err.strip().splitlines()) == 1
