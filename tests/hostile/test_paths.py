"""Classes 4 and 5: outputs never land on inputs; nothing is written outside the named paths (issue 22)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import one_line, run_child, tree_hashes

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


def sources(tmp_path: Path) -> Path:
    path = tmp_path / "sentences.txt"
    path.write_text("I love you\nHello world\n")
    return path


@pytest.mark.parametrize("spelling", ["same", "relative", "link", "hard link"])
def test_translate_output_onto_its_file_is_refused(spelling, toy_run, tmp_path, in_process):
    source = sources(tmp_path)
    output = {"same": source, "relative": Path("./sentences.txt")}.get(spelling)
    if spelling == "link":
        output = tmp_path / "out.txt"
        output.symlink_to(source)
    elif spelling == "hard link":
        output = tmp_path / "out.txt"
        os.link(source, output)
    before = tree_hashes(source)
    code, _, err = in_process("translate", "--file", source, "--output", output, "--checkpoint", toy_run)
    assert code == 2 and "is the --file file" in one_line(err)
    assert tree_hashes(source) == before


@pytest.mark.parametrize("data_as", ["file", "folder"])
def test_evaluate_output_onto_its_corpus_is_refused(data_as, toy_run, tmp_path, in_process):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    test = corpus / "test.tsv"
    test.write_text("I love you\tJe t'aime\n")
    before = tree_hashes(corpus)
    data = test if data_as == "file" else corpus
    code, _, err = in_process("evaluate", "--data", data, "--output", test, "--checkpoint", toy_run)
    assert code == 2 and "is the --data file" in one_line(err)
    assert tree_hashes(corpus) == before


def test_train_writes_only_its_run_folder_and_the_documented_cache(tmp_path):
    home = tmp_path / "home"
    outcome = run_child("train (writes)", ["train", "--out", "run", "--steps", "2", "--eval-every", "2",
                                           "--bleu-sentences", "2", "--quiet"], tmp_path,
                        env={"HOME": str(home), "CLEARFORMER_CACHE": None, "XDG_CACHE_HOME": None})
    assert outcome.code == 0, outcome.stderr
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert written and all(p.startswith(".cache/clearformer/") for p in written), written  # docs/reliability.md
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "run"]


def test_with_the_cache_off_train_writes_nothing_outside_its_run_not_even_in_tmpdir(tmp_path):
    """Nothing in the home folder, and nothing left in TMPDIR once the process has ended (a child: at-exit
    clean-ups count; a command that never compiles must not leave torch's or matplotlib's folders there)."""
    home, temporary = tmp_path / "home", tmp_path / "tmp"
    temporary.mkdir()
    outcome = run_child("train (cache off)", ["train", "--out", "run", "--steps", "2", "--eval-every", "2",
                                              "--bleu-sentences", "2", "--quiet"], tmp_path,
                        env={"HOME": str(home), "CLEARFORMER_CACHE": "off", "TMPDIR": str(temporary),
                             "TORCHINDUCTOR_CACHE_DIR": None, "MPLCONFIGDIR": None})  # not an in-process command's
    assert outcome.code == 0, outcome.stderr
    assert not any(home.rglob("*"))
    assert sorted(p.name for p in temporary.iterdir()) == []


@pytest.mark.parametrize("name", ["../../x", "..", "a/b", ".hidden", "/abs"])
def test_data_build_name_is_a_plain_folder_name(name, tmp_path, in_process):
    (tmp_path / "pairs.tsv").write_text("I love you\tJe t'aime\n" * 20)
    code, _, err = in_process("data", "build", "custom", "--name", name, "--tsv", "pairs.tsv")
    assert code == 2 and "a corpus name is a plain folder name" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "pairs.tsv"]


@pytest.mark.parametrize("argv", [["import", "marian", "models/marian-en-frr", "--out", "m"],
                                  ["lm", "import", "gpt2", "gpt2-misspelt", "--out", "g"],
                                  ["import", "marian", "Helsinki-NLP/opus-mt-en-frr", "--out", "m"]])
def test_a_missing_local_folder_is_an_error_not_a_hub_request(argv, in_process, monkeypatch):
    import huggingface_hub

    def no_network(*args, **kwargs):
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    code, _, err = in_process(*argv)
    line = one_line(err)
    assert code == 2 and "no such folder" in line and "hf:OWNER/NAME" in line
    assert not Path("m").exists() and not Path("g").exists()


def test_only_the_hf_prefix_asks_the_hub(in_process, monkeypatch):
    import huggingface_hub

    asked = []

    def offline(name, **kwargs):
        asked.append(name)
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    code, _, err = in_process("import", "marian", "hf:Helsinki-NLP/opus-mt-en-fr", "--out", "m")
    assert code == 2 and asked == ["Helsinki-NLP/opus-mt-en-fr"] and "not downloadable" in one_line(err)
    assert not Path("m").exists()
