"""Issue 33, point 4: the CTranslate2 folder is checked, not trusted. `translate`/`evaluate --engine
ctranslate2` verify the export they made against its manifest (the run's weights hash, every file written
and its hash): a damaged export of clearformer's own is exported again; anything at the reserved name that
clearformer did not write (a file, a folder, a file added to the export) is never replaced (one line naming
it); every error of the engine is one line; no export into a run whose lock another command holds."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import one_line, tree_hashes

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

pytest.importorskip("ctranslate2")
pytest.importorskip("transformers")

from clearformer.errors import UserError  # noqa: E402
from clearformer.interop.ct2_engine import STAMP, CTranslate2Engine  # noqa: E402
from clearformer.load import load_model  # noqa: E402
from clearformer.store import lock  # noqa: E402

SENTENCE = "I love you"


@pytest.fixture(scope="module")
def exported(spm_run, tmp_path_factory):
    """The tiny SentencePiece run with its CTranslate2 export made by `translate --engine ctranslate2`, and
    that command's translation."""
    from clearformer.cli import main

    run = tmp_path_factory.mktemp("exported") / "run"
    shutil.copytree(spm_run, run, ignore=shutil.ignore_patterns(lock.LOCK_FILE))
    assert main(["translate", SENTENCE, "--checkpoint", str(run), "--engine", "ctranslate2"]) == 0
    assert (run / "ctranslate2" / STAMP).is_file()
    return run


@pytest.fixture
def run(exported, tmp_path, capsys) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(exported, copy, ignore=shutil.ignore_patterns(lock.LOCK_FILE))
    capsys.readouterr()
    return copy


def translate(in_process, run, *extra):
    return in_process("translate", SENTENCE, "--checkpoint", run, "--engine", "ctranslate2", *extra)


def garbage(folder: Path) -> None:
    (folder / "model.bin").write_bytes(b"\x00garbage" * 100)


def newer_version(folder: Path) -> None:
    data = (folder / "model.bin").read_bytes()
    (folder / "model.bin").write_bytes(struct.pack("<I", 99) + data[4:])  # CTranslate2's binary version field


def no_vocabulary(folder: Path) -> None:
    (folder / "shared_vocabulary.json").unlink()


def broken_json(folder: Path) -> None:
    (folder / "config.json").write_text('{"add_source_bos": fal')


DAMAGES = {"garbage model.bin": garbage, "model.bin of a newer binary version": newer_version,
           "missing vocabulary": no_vocabulary, "broken config.json": broken_json}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_export_of_ours_is_exported_again(damage, run, exported, in_process):
    DAMAGES[damage](run / "ctranslate2")
    code, out, err = translate(in_process, run)
    assert code == 0, err
    assert "exported the run for CTranslate2" in err and "Traceback" not in err
    _, expected, _ = translate(in_process, exported)
    assert out == expected
    assert tree_hashes(run / "ctranslate2") == tree_hashes(exported / "ctranslate2").__class__(
        {k.replace(str(exported), str(run)): v for k, v in tree_hashes(exported / "ctranslate2").items()})


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_every_engine_error_is_one_line(damage, run):
    """The engine on a damaged folder (as if its manifest had been forged): a UserError of one line."""
    DAMAGES[damage](run / "ctranslate2")
    model, tokenizer, _ = load_model(run)
    try:
        engine = CTranslate2Engine(run / "ctranslate2", tokenizer, model.config.max_len)
        engine.translate_ids([[5, 6, 2]])
    except UserError as error:
        assert "\n" not in str(error) and str(run / "ctranslate2") in str(error), str(error)
    else:  # a config.json CTranslate2 does not need may load: then it must translate
        assert damage == "broken config.json"


def test_a_users_file_at_the_reserved_name_is_never_replaced(run, in_process):
    shutil.rmtree(run / "ctranslate2")
    (run / "ctranslate2").write_text("my notes\n")
    before = tree_hashes(run)
    code, _, err = translate(in_process, run)
    line = one_line(err)
    assert code == 2 and f"{run / 'ctranslate2'}: a file stands at the name" in line and "never replaces" in line
    assert tree_hashes(run) == before


def test_a_users_folder_at_the_reserved_name_is_never_replaced(run, in_process):
    shutil.rmtree(run / "ctranslate2")
    (run / "ctranslate2").mkdir()
    (run / "ctranslate2" / "MY-NOTES.txt").write_text("mine\n")
    before = tree_hashes(run)
    code, _, err = translate(in_process, run)
    assert code == 2 and f"{run / 'ctranslate2'}: it holds no {STAMP}" in one_line(err)
    code, _, err = in_process("evaluate", "--checkpoint", run, "--engine", "ctranslate2")
    assert code == 2 and f"{run / 'ctranslate2'}: it holds no {STAMP}" in one_line(err)
    assert tree_hashes(run) == before


@pytest.mark.parametrize("stale", [False, True])
def test_notes_put_inside_the_export_survive(stale, run, in_process):
    (run / "ctranslate2" / "MY-NOTES.txt").write_text("mine\n")
    if stale:  # the weights changed since the export: it would be exported again, but holds a user's file
        manifest = json.loads((run / "ctranslate2" / STAMP).read_text())
        (run / "ctranslate2" / STAMP).write_text(json.dumps(dict(manifest, weights_sha256="0" * 64)))
    before = tree_hashes(run)
    code, _, err = translate(in_process, run)
    assert code == 2 and "it holds MY-NOTES.txt, so clearformer did not write it" in one_line(err)
    assert tree_hashes(run) == before


def test_a_damaged_manifest_makes_the_folder_foreign(run, in_process):
    (run / "ctranslate2" / STAMP).write_text("{not json")
    before = tree_hashes(run)
    code, _, err = translate(in_process, run)
    assert code == 2 and f"its {STAMP} is not the manifest clearformer writes" in one_line(err)
    assert tree_hashes(run) == before


def test_no_export_while_train_resume_holds_the_lock(run, in_process):
    shutil.rmtree(run / "ctranslate2")
    env = {**os.environ, "CLEARFORMER_CACHE": "off"}
    process = subprocess.Popen([sys.executable, "-m", "clearformer.cli", "train", "--out", str(run), "--resume",
                                "--steps", "100000", "--quiet"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while f"PID {process.pid}" not in ((run / lock.LOCK_FILE).read_text() if (run / lock.LOCK_FILE).exists()
                                           else ""):
            assert process.poll() is None and time.monotonic() < deadline, "train --resume never took the lock"
            time.sleep(0.2)
        code, _, err = translate(in_process, run)
        line = one_line(err)
        assert code == 2 and f"{run} is in use by PID {process.pid}: clearformer train --out {run} --resume" in line
        assert not (run / "ctranslate2").exists() and not list(run.glob(".ctranslate2-*"))
    finally:
        process.kill()
        process.wait()


def test_a_link_inside_the_export_is_refused_and_not_followed(run, tmp_path, in_process):
    target = tmp_path / "precious.txt"
    target.write_text("the user's own text\n")
    model_bin = run / "ctranslate2" / "model.bin"
    model_bin.unlink()
    model_bin.symlink_to(target)
    before = tree_hashes(run, target)
    code, _, err = translate(in_process, run)
    line = one_line(err)
    assert code == 2 and "a symbolic link stands at its model.bin" in line and "never replaces it" in line, line
    assert tree_hashes(run, target) == before
