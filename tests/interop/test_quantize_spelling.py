"""One spelling of quantization across commands: `--quantize` (translate, evaluate, export); the old
`export --quantization` is a one-line error naming the new spelling; a type a format cannot take is named."""

from __future__ import annotations

import pytest

from clearformer.cli import main


@pytest.mark.parametrize("argv, said", [
    (["--to", "ctranslate2", "--quantization", "int8"],
     "--quantization is spelled --quantize, as in every command: --quantize int8"),
    (["--to", "marian", "--quantize", "int8"], "--quantize int8 applies only to --to ctranslate2 (int8, "),
    (["--to", "marian-bin", "--quantize", "float16"], "--quantize float16 applies only to --to ctranslate2 ("),
])
def test_export_spells_quantization_as_every_command_does(argv, said, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", str(out), "--checkpoint", str(tmp_path / "no-run"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"clearformer export: error: {said}") and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_translate_and_evaluate_take_the_same_flag(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--quantize {none,int8}" in capsys.readouterr().out
