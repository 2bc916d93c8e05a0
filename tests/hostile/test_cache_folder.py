"""Issue 41, root 6: the cache folder's toy model (learn/toy.py, store/cachedir.py). What stands in the cache is
checked, never trusted: each odd case is one line, a folder of the user's at toy-translate/ is never removed,
and with CLEARFORMER_CACHE=off nothing (no lock) is left in $TMPDIR."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import one_line, tree_hashes

QUICK = {"steps": 2, "eval_every": 2, "bleu_sentences": 2}


@pytest.fixture
def quick_toy(monkeypatch):
    import clearformer.learn.toy

    monkeypatch.setattr(clearformer.learn.toy, "TOY_TRAINING", QUICK)


def read_only_cache(tmp_path):
    if os.geteuid() == 0:
        return "/sys/clearformer-cache", "cannot be made"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return str(folder), "cannot be written"


@pytest.mark.parametrize("case", ["cache is a file", "read-only cache", "toy is a link", "toy is a file",
                                  "lock is a FIFO", "lock is a link"])
def test_each_odd_cache_is_one_line(case, tmp_path, monkeypatch, in_process, quick_toy):
    cache = tmp_path / "cache"
    cache.mkdir()
    words = "stands where clearformer keeps"
    if case == "cache is a file":
        cache = tmp_path / "cache-file"
        cache.write_text("mine\n")
        words = "is a file, not a folder"
    elif case == "read-only cache":
        cache, words = read_only_cache(tmp_path)
    elif case == "toy is a link":
        (tmp_path / "elsewhere").mkdir()
        (cache / "toy-translate").symlink_to(tmp_path / "elsewhere")
    elif case == "toy is a file":
        (cache / "toy-translate").write_text("mine\n")
    elif case == "lock is a FIFO":
        os.mkfifo(cache / "toy-translate.lock")
    else:
        (tmp_path / "target").write_text("mine\n")
        (cache / "toy-translate.lock").symlink_to(tmp_path / "target")
    watched = [p for p in tmp_path.iterdir() if p.name != "home"]
    before = tree_hashes(*watched)
    monkeypatch.setenv("CLEARFORMER_CACHE", str(cache))
    code, out, err = in_process("learn", "--vocab")
    assert code == 2 and words in one_line(err), err
    assert tree_hashes(*watched) == before


@pytest.mark.parametrize("content", ["a file", "a subfolder", "an unfinished run"])
def test_a_folder_of_the_users_at_toy_translate_is_never_removed(content, tmp_path, monkeypatch, in_process,
                                                                quick_toy):
    mine = tmp_path / "cache" / "toy-translate"
    mine.mkdir(parents=True)
    if content == "a file":
        (mine / "thesis.tex").write_text("months of work\n")
    elif content == "a subfolder":
        (mine / "notes").mkdir()
        (mine / "notes" / "a.txt").write_text("mine\n")
    else:
        (mine / "config.json").write_text("{}\n")
    before = tree_hashes(mine)
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    code, _, err = in_process("learn", "--vocab")
    assert code == 2 and "a folder clearformer did not make" in one_line(err)
    assert tree_hashes(mine) == before


def test_clearformers_own_toy_folder_is_trained_marked_and_read_again(tmp_path, monkeypatch, in_process, quick_toy):
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "toy-translate").mkdir(parents=True)  # an empty folder: taken
    code, out, err = in_process("learn", "--vocab")
    assert code == 0, err
    toy = tmp_path / "cache" / "toy-translate"
    assert (toy / "model.safetensors").exists() and (toy / ".clearformer-toy").exists()
    assert in_process("learn", "--vocab")[0] == 0


def test_with_the_cache_off_nothing_is_left_in_tmpdir(tmp_path):
    """What is left once the process has ended (a child: at-exit clean-ups count), with a two-step toy (the full
    training adds minutes and nothing to what is checked)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    quick = f"import clearformer.learn.toy as toy; toy.TOY_TRAINING = {QUICK!r}"
    child = subprocess.run([sys.executable, "-c", f"{quick}; from clearformer.cli import main; "
                            "raise SystemExit(main(['learn', '--vocab']))"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300,
                           env={**os.environ, "CLEARFORMER_CACHE": "off", "TMPDIR": str(temporary)})
    assert child.returncode == 0, child.stderr
    assert sorted(p.name for p in temporary.iterdir()) == []


@pytest.mark.parametrize("content", ["a file", "a subfolder"])
def test_a_users_folder_named_toy_translate_partial_is_never_removed(content, tmp_path, monkeypatch, in_process,
                                                                     quick_toy):
    """Issue 51: any folder ending in `.partial` was taken for clearformer's own and removed with the user's
    notes.txt; only a folder clearformer marked (a run's marker, the toy's mark) or an empty one is."""
    mine = tmp_path / "cache" / "toy-translate.partial"
    mine.mkdir(parents=True)
    if content == "a file":
        (mine / "notes.txt").write_text("mine\n")
    else:
        (mine / "drafts").mkdir()
        (mine / "drafts" / "a.txt").write_text("mine\n")
    before = tree_hashes(mine)
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    code, _, err = in_process("learn", "--vocab")
    assert code == 2 and "toy-translate.partial" in one_line(err) and "did not make" in one_line(err)
    assert tree_hashes(mine) == before


def test_an_interrupted_trainings_partial_folder_is_cleared_and_trained_again(tmp_path, monkeypatch, in_process,
                                                                             quick_toy):
    partial = tmp_path / "cache" / "toy-translate.partial"
    partial.mkdir(parents=True)
    (partial / ".clearformer-run").write_text("training\n")  # what train writes first (store/lock.py)
    (partial / "metrics.csv").write_text("step\n")
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    code, _, err = in_process("learn", "--vocab")
    assert code == 0, err
    assert not partial.exists() and (tmp_path / "cache" / "toy-translate" / "model.safetensors").exists()


def test_an_imports_stale_partial_folder_is_removed_only_when_clearformer_marked_it(tmp_path):
    """The class of the case above: lesson 16's import folders `NAME.partial-PID` of a process that ended."""
    from clearformer.learn.browser import remove_stale_partials
    from clearformer.store.cachedir import make_marked

    run_dir = tmp_path / "cache" / "firefox-en-pt"
    users = tmp_path / "cache" / "firefox-en-pt.partial-999999999"
    users.mkdir(parents=True)
    (users / "notes.txt").write_text("mine\n")
    ours = make_marked(tmp_path / "cache" / "firefox-en-pt.partial-999999998")
    (ours / "model.safetensors").write_bytes(b"half")
    before = tree_hashes(users)
    remove_stale_partials(run_dir)
    assert tree_hashes(users) == before and not ours.exists()
