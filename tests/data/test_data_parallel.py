"""User corpora: validation errors name file and line; `data build custom` splits deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearformer.cli import main
from clearformer.data.corpus import split_key, split_of, split_pairs
from clearformer.data.parallel import read_parallel
from clearformer.data.paths import default_data_dir, downloads_dir
from clearformer.errors import UserError

GOOD = [("Hello.", "Bonjour."), ("Open the file.", "Ouvrez le fichier."), ("Thank you!", "Merci !")]


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_reads_tsv_and_two_files(tmp_path):
    tsv = write(tmp_path / "pairs.tsv", "\ufeff" + "".join(f"{s}\t{t}\r\n" for s, t in GOOD))
    assert read_parallel(tsv) == GOOD
    src = write(tmp_path / "en.txt", "".join(f" {s}\n" for s, _ in GOOD))
    tgt = write(tmp_path / "fr.txt", "".join(f"{t}\n" for _, t in GOOD))
    assert read_parallel([src, tgt]) == GOOD
    assert read_parallel([tsv]) == GOOD  # a list of one path is a TSV
    from clearformer.data.corpus import read_parallel as reexported
    assert reexported is read_parallel


@pytest.mark.parametrize("content, message", [
    ("Hello.\tBonjour.\n\tVide.\n", "bad.tsv:2: empty source"),
    ("Hello.\tBonjour.\nHi.\t  \n", "bad.tsv:2: empty target"),
    ("Hello.\tBonjour.\nNo tab here\n", "bad.tsv:2: expected source TAB target, found 1 field"),
    ("A\tB\tC\n", "bad.tsv:1: expected source TAB target, found 3 field"),
    (b"Hello.\tBonjour.\nCaf\xe9\tCaf\xc3\xa9\n", "bad.tsv:2: not valid UTF-8"),
    ("Hello.\t" + "x" * 3000 + "\n", "bad.tsv:1: target has 3,000 characters"),
    ("Yes.\tThis is a whole paragraph that cannot possibly translate a single word.\n",
     "bad.tsv:1: one side is 18 times longer than the other (4 vs 71"),
])
def test_bad_tsv_lines_are_named_by_file_and_line(tmp_path, content, message):
    path = write(tmp_path / "bad.tsv", content)
    with pytest.raises(UserError) as error:
        read_parallel(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_two_files_of_different_lengths_cannot_be_skipped(tmp_path):
    src = write(tmp_path / "en.txt", "a\nb\nc\n")
    tgt = write(tmp_path / "fr.txt", "a\nb\n")
    with pytest.raises(UserError, match=r"en.txt has 3 lines but .*fr.txt has 2"):
        read_parallel([src, tgt], skip_bad=True)


def test_bad_line_in_target_file_names_that_file(tmp_path):
    src = write(tmp_path / "en.txt", "one\ntwo\n")
    tgt = write(tmp_path / "fr.txt", b"un\nd\xffux\n")
    with pytest.raises(UserError, match=r"fr\.txt:2: not valid UTF-8"):
        read_parallel([src, tgt])


def test_skip_bad_skips_and_counts(tmp_path):
    path = write(tmp_path / "mixed.tsv", "Hello.\tBonjour.\n\tvide\nno tab\nThanks.\tMerci.\n")
    messages = []
    assert read_parallel(path, skip_bad=True, log=messages.append) == [("Hello.", "Bonjour."),
                                                                        ("Thanks.", "Merci.")]
    assert len(messages) == 1 and messages[0].startswith("skipped 2 bad line(s) of 4")


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_parallel(tmp_path / "nope.tsv")
    with pytest.raises(UserError, match="the file is empty"):
        read_parallel(write(tmp_path / "empty.tsv", "\n"))


def test_cli_error_is_one_line_without_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_DATA", str(tmp_path / "data"))
    path = write(tmp_path / "bad.tsv", "Hello.\tBonjour.\nBroken line\n")
    assert main(["data", "build", "custom", "--tsv", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:2:" in err and "Traceback" not in err
    assert not (tmp_path / "data" / "custom").exists()


def test_cli_rejects_custom_options_on_a_recipe(capsys):
    assert main(["data", "build", "en-web", "--tsv", "x.tsv"]) == 2
    assert "only apply to `clearformer data build custom`" in capsys.readouterr().err


def test_custom_build_is_deterministic_and_skips_with_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_DATA", str(tmp_path / "data"))
    lines = [f"Sentence number {i}.\tPhrase numéro {i}." for i in range(300)]
    lines += ["broken", "Dup.\tDoublon."] * 2
    path = write(tmp_path / "pairs.tsv", "\n".join(lines) + "\n")
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / run
        assert main(["data", "build", "custom", "--tsv", str(path), "--skip-bad", "--out", str(out)]) == 0
        outputs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs[0] == outputs[1]
    assert "skipped 2 bad line(s)" in capsys.readouterr().out
    manifest = json.loads(outputs[0]["manifest.json"])
    assert manifest["cleaning"] == {"pairs_read": 302, "bad_lines_skipped": 2, "duplicates_removed": 1}
    assert manifest["pairs"]["total"] == 301 == sum(manifest["pairs"][s] for s in ("train", "valid", "test"))
    assert manifest["pairs"]["valid"] > 0 and manifest["pairs"]["test"] > 0

    # Without --out it lands in $CLEARFORMER_DATA/<name>, where other commands look.
    assert main(["data", "build", "custom", "--tsv", str(path), "--skip-bad", "--name", "mine"]) == 0
    assert default_data_dir("mine") == tmp_path / "data" / "mine"
    assert (tmp_path / "data" / "mine" / "train.tsv").read_bytes() == outputs[0]["train.tsv"]


def test_default_paths_follow_the_environment(monkeypatch):
    monkeypatch.delenv("CLEARFORMER_DATA", raising=False)
    assert default_data_dir("en-fr-software") == Path("data") / "en-fr-software"
    monkeypatch.setenv("CLEARFORMER_DATA", "/srv/corpora")
    assert default_data_dir("en-web") == Path("/srv/corpora/en-web")
    assert downloads_dir() == Path("/srv/corpora/downloads")


def test_split_depends_on_the_normalised_source_only():
    assert split_key("  Open File... ") == split_key("open file") == "open file"
    assert split_of("Open File...", 0.3, 0.3) == split_of("open file", 0.3, 0.3)
    pairs = [(f"sentence {i}", f"phrase {i}") for i in range(4000)]
    splits = split_pairs(pairs, 0.1, 0.1)
    reordered = split_pairs(list(reversed(pairs)), 0.1, 0.1)
    assert {name: set(rows) for name, rows in splits.items()} == \
        {name: set(rows) for name, rows in reordered.items()}
    assert 300 < len(splits["valid"]) < 500 and 300 < len(splits["test"]) < 500
    with pytest.raises(UserError):
        split_pairs(pairs, 0.6, 0.5)
