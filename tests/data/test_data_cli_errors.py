"""`clearformer data build`: an --out that cannot be a corpus folder is a one-line error before any work."""

from __future__ import annotations

from clearformer.cli import main


def test_out_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("I love you\tJe t'aime\nthe cat\tle chat\n", encoding="utf-8")
    existing = tmp_path / "exists"
    existing.write_text("keep me", encoding="utf-8")
    for out in (existing, existing / "inside"):
        code = main(["data", "build", "custom", "--tsv", str(tsv), "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and "is a file, not a folder" in err
    assert existing.read_text(encoding="utf-8") == "keep me"
    assert main(["data", "build", "custom", "--tsv", str(tsv), "--out", str(tmp_path / "corpus")]) == 0
    assert (tmp_path / "corpus" / "train.tsv").exists()
