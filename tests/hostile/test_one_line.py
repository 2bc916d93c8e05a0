"""Class 7: what gave a traceback, or a quiet wrong answer, is one line and exit 2 (130 for Ctrl-C) (issue 22)."""

from __future__ import annotations

import json
import os

import pytest
from conftest import one_line, run_child, tree_hashes

DEEP = "[" * 50_000 + "]" * 50_000


@pytest.mark.parametrize("name", ["config.json", "meta.json", "tokenizer.json"])
def test_deeply_nested_json_in_a_run_is_one_line(name, run_copy, in_process):
    (run_copy / name).write_text(DEEP)
    code, out, err = in_process("translate", "I love you", "--checkpoint", run_copy)
    line = one_line(err)
    assert code == 2 and name in line and "nested 50000 deep" in line


def test_deeply_nested_trainer_state_is_one_line(run_copy, in_process):
    newest = sorted((run_copy / "checkpoints").iterdir())[-1]
    (newest / "trainer_state.json").write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    code, _, err = in_process("train", "--out", run_copy, "--resume", "--steps", "9", "--quiet")
    assert code == 2 and "trainer_state.json: damaged (JSON nested 5000 deep" in one_line(err)


@pytest.mark.parametrize("fmt, name", [("marian", "vocab.json"), ("marian", "config.json"), ("gpt2", "vocab.json"),
                                       ("gpt2", "config.json")])
def test_deeply_nested_json_in_an_import_is_one_line(fmt, name, marian_source, gpt2_source, tmp_path, in_process):
    source = marian_source if fmt == "marian" else gpt2_source
    folder = tmp_path / fmt
    folder.mkdir()
    for entry in source.iterdir():
        (folder / entry.name).symlink_to(entry)
    (folder / name).unlink()
    (folder / name).write_text(DEEP)
    argv = ["import", "marian"] if fmt == "marian" else ["lm", "import", "gpt2"]
    code, _, err = in_process(*argv, folder, "--out", tmp_path / "out")
    assert code == 2 and name in one_line(err) and "nested" in err
    assert not (tmp_path / "out").exists()


def test_a_gpt2_merges_file_that_is_not_utf8_is_one_line(gpt2_source, tmp_path, in_process):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for entry in gpt2_source.iterdir():
        (folder / entry.name).symlink_to(entry)
    (folder / "merges.txt").unlink()
    (folder / "merges.txt").write_bytes(b"#version: 0.2\n\xc4 \xa0\n")
    code, _, err = in_process("lm", "import", "gpt2", folder, "--out", tmp_path / "out")
    assert code == 2 and "merges.txt:2: not UTF-8 text" in one_line(err)


@pytest.mark.parametrize("broken", ["not utf-8", "a directory", "a link to a device", "a dangling link",
                                    "points nowhere"])
def test_a_broken_latest_pointer_is_one_line(broken, tmp_path, in_process):
    runs = tmp_path / "runs"
    runs.mkdir()
    latest = runs / "LATEST"
    if broken == "not utf-8":
        latest.write_bytes(b"/tmp/\xff\xfe\n")
    elif broken == "a directory":
        latest.mkdir()
    elif broken == "a link to a device":
        latest.symlink_to("/dev/zero")
    elif broken == "a dangling link":
        latest.symlink_to(tmp_path / "gone")
    else:
        latest.write_text(str(tmp_path / "gone") + "\n")
    for argv in (["translate", "hello"], ["explain", "hello"], ["evaluate"], ["average"]):
        code, _, err = in_process(*argv)
        line = one_line(err)
        assert code == 2 and "LATEST" in line, line


def test_explain_on_a_language_model_run_is_one_line(lm_run, in_process):
    code, _, err = in_process("explain", "the dog", "--checkpoint", lm_run)
    assert code == 2 and "decoder-only language model" in one_line(err) and "lm explain" in err


@pytest.mark.parametrize("option, value", [("--layer", "99"), ("--layer", "-1"), ("--head", "-1"), ("--head", "99")])
def test_explain_layer_and_head_out_of_range_are_refused(option, value, toy_run, in_process):
    code, _, err = in_process("explain", "I love you", "--checkpoint", toy_run, option, value)
    assert code == 2 and f"{option} {value}: choose a" in one_line(err)
    code, _, err = in_process("explain", "--example", "i-love-you", option, value)
    assert code == 2 and f"{option} {value}: choose a" in one_line(err)


def test_lm_explain_layer_and_head_out_of_range_are_refused(lm_run, in_process):
    for option, value in (("--layer", "99"), ("--head", "-1")):
        code, _, err = in_process("lm", "explain", "the dog", "--checkpoint", lm_run, option, value)
        assert code == 2 and f"{option} {value}" in one_line(err)


@pytest.mark.parametrize("argv", [["explain", "caf\udce9 au lait"], ["translate", "caf\udce9"],
                                  ["lm", "explain", "the \udcff"], ["lm", "generate", "the \udcff"]])
def test_arguments_that_are_not_utf8_are_refused_alike(argv, toy_run, lm_run, in_process):
    checkpoint = lm_run if argv[0] == "lm" else toy_run
    code, _, err = in_process(*argv, "--checkpoint", checkpoint)
    assert code == 2 and "not UTF-8 text" in one_line(err)


@pytest.mark.slow
@pytest.mark.parametrize("argv, after", [(["info"], 0.4), (["translate", "I love you", "--checkpoint", "{run}"], 0.8),
                                         (["train", "--out", "new", "--quiet"], 1.0),
                                         (["translate", "--file", "/dev/stdin", "--checkpoint", "{run}"], 1.5)])
def test_ctrl_c_in_the_first_second_is_one_line_and_130(argv, after, toy_run, tmp_path):
    before = tree_hashes(toy_run)
    read, write = os.pipe()  # a stdin that never ends: the command is still waiting when Ctrl-C comes
    try:
        outcome = run_child(f"Ctrl-C after {after} s", [a.replace("{run}", str(toy_run)) for a in argv], tmp_path,
                            stdin=read, signal_after=after)
    finally:
        os.close(read)
        os.close(write)
    assert "interrupted" in one_line(outcome, code=130)
    assert tree_hashes(toy_run) == before


def test_the_toy_run_config_is_clearformers(toy_run):
    # The suite's fixtures hold what they claim: a marked run with a clearformer config.
    assert json.loads((toy_run / "config.json").read_text())["d_model"] == 64
    assert (toy_run / ".clearformer-run").is_file()
