"""`translate --po` runs `translate`'s own translator: the same engine choice, the same refusals, the same --threads,
and the progress bar the docs promise (docs/catalogs.md) on a terminal, also one that does not say its size."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
import torch

from clearformer.cli import main

ABLATE = "decoder.layers.0.cross_attention.head.0"


def test_po_applies_threads_on_the_pytorch_engine(masking_run, template, tmp_path, capsys):
    before = torch.get_num_threads()
    wanted = 1 if before != 1 else 2
    try:
        assert main(["translate", "--checkpoint", str(masking_run), "--po", str(template), "--out",
                     str(tmp_path / "fr.po"), "--threads", str(wanted)]) == 0
        assert torch.get_num_threads() == wanted
    finally:
        torch.set_num_threads(before)
    assert "entries filled" in capsys.readouterr().err


@pytest.mark.parametrize("po", [False, True], ids=["translate", "translate --po"])
def test_ablate_with_ctranslate2_is_refused_in_one_line_by_both(po, masking_run, template, tmp_path, capsys):
    given = ["--po", str(template), "--out", str(tmp_path / "fr.po")] if po else ["hello"]
    out = tmp_path / "fr.po"
    code = main(["translate", "--checkpoint", str(masking_run), "--engine", "ctranslate2", "--ablate", ABLATE,
                 *given])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == ("clearformer translate: error: --ablate changes clearformer's own decoder; it does not apply "
                   "to --engine ctranslate2")
    assert not out.exists()


def test_quantize_int8_with_ablate_is_refused_by_po_too(masking_run, template, capsys):
    """clearformer's own int8 decoding fills a catalogue as `translate` does; --ablate (a float model's what-if)
    is refused by both in one line."""
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(template), "--quantize", "int8",
                 "--ablate", ABLATE]) == 2
    assert capsys.readouterr().err.strip() == ("clearformer translate: error: --ablate switches parts of the float "
                                               "model off; it does not apply to --quantize int8")


def test_the_po_progress_bar_shows_on_a_terminal_of_unknown_size(masking_run, template, tmp_path):
    """stderr a pseudo-terminal that reports 0 x 0 (as `script`, editors and CI runners make one): the bar is
    drawn at 80 columns, counting the catalogue's lines, and stays when done."""
    leader, follower = pty.openpty()  # a new pty says 0 rows, 0 columns
    env = {**os.environ, "COLUMNS": "", "LINES": ""}
    env.pop("COLUMNS")
    env.pop("LINES")
    try:
        child = subprocess.run([sys.executable, "-m", "clearformer.cli", "translate", "--checkpoint",
                                str(masking_run), "--po", str(template), "--out", str(tmp_path / "fr.po")],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=env,
                               timeout=300)
        os.close(follower)
        shown = b""
        while True:
            try:
                block = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not block:
                break
            shown += block
    finally:
        os.close(leader)
    assert child.returncode == 0
    text = shown.decode("utf-8", "replace")
    assert "translating app.pot" in text and "100%" in text and "line" in text, text
