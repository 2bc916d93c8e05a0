"""`clearformer explain` never silently replaces a user's file: --html, --output and --plots refuse an
existing target (one line, exit 2, before any work) unless --overwrite is given."""

from __future__ import annotations

import pytest

from clearformer.cli import main


@pytest.mark.parametrize("option, name", [("--html", "page.html"), ("--output", "walk.txt")])
def test_an_existing_file_is_refused_then_replaced_with_overwrite(tmp_path, capsys, option, name):
    target = tmp_path / name
    target.write_text("the user's own file", encoding="utf-8")
    assert main(["explain", "--example", "i-love-you", option, str(target)]) == 2
    error = capsys.readouterr().err
    assert "exists: pass --overwrite" in error and "Traceback" not in error
    assert target.read_text(encoding="utf-8") == "the user's own file"
    assert main(["explain", "--example", "i-love-you", option, str(target), "--overwrite"]) == 0
    assert target.read_text(encoding="utf-8") != "the user's own file"


def test_a_folder_as_output_file_is_refused(tmp_path, capsys):
    assert main(["explain", "--example", "i-love-you", "--output", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_figures_already_in_the_plots_folder_are_kept(tmp_path, capsys):
    figures = tmp_path / "figures"
    assert main(["explain", "--example", "i-love-you", "--plots", str(figures)]) == 0
    written = {p.name: p.read_bytes() for p in figures.iterdir()}
    capsys.readouterr()
    assert main(["explain", "--example", "i-love-you", "--plots", str(figures)]) == 2
    assert "already holds figures" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in figures.iterdir()} == written
    assert main(["explain", "--example", "i-love-you", "--plots", str(figures), "--overwrite"]) == 0
