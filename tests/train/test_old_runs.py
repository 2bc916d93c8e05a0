"""Run folders carry their format: config.json says `format_version` (written by every save, checked by
every load). A folder of another format (format 0: written before 0.1.0, without the field; or a number
this release does not read) is refused in one line naming the format, by every command that opens it:
translate, train --resume, lm generate, lm train --resume. Pre-release folders are not converted: no
release ever wrote them (docs/reliability.md, "Formats")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from seeds import seed_args

from clearformer.cli import main
from clearformer.config import FORMAT_VERSION, ModelConfig
from clearformer.errors import UserError
from clearformer.load import load_model
from clearformer.train.state import step_checkpoints
from tests.train.train_helpers import tiny_args

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

LM_TINY = ["--preset", "lm-tiny", "--tokenizer", "words", "--vocab-size", "64", "--block-size", "16",
           "--batch-size", "4", "--eval-every", "2", "--threads", "1", "--quiet", *seed_args()]


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("formats") / "translate"
    assert main(tiny_args(run, "--steps", "2", "--save-every", "2", "--eval-every", "2", "--bleu-sentences",
                          "2")) == 0
    return run


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("formats-lm")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(f"the dog ran to the house number {i} and back" for i in range(60)) + "\n",
                      encoding="utf-8")
    run = folder / "lm"
    assert main(["lm", "train", "--corpus", str(corpus), "--out", str(run), "--steps", "2", *LM_TINY]) == 0
    return run


def set_format(run: Path, version) -> None:
    """Rewrite every config.json of a run (the folder's and its step checkpoints') with `version`
    (None: without the field, as format 0 wrote them)."""
    for path in [run / "config.json", *(step / "config.json" for step in step_checkpoints(run))]:
        data = json.loads(path.read_text(encoding="utf-8"))
        data.pop("format_version", None)
        if version is not None:
            data = {"format_version": version, **data}
        path.write_text(json.dumps(data), encoding="utf-8")


def copy_of(run: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / run.name
    shutil.copytree(run, target)
    return target


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_every_save_writes_the_format_and_every_load_reads_it(translation_run, tmp_path):
    for path in [translation_run / "config.json", *(s / "config.json" for s in step_checkpoints(translation_run))]:
        assert json.loads(path.read_text(encoding="utf-8"))["format_version"] == FORMAT_VERSION
    config = ModelConfig(d_model=8, n_heads=2)
    config.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == config
    assert load_model(translation_run)[0].config.d_model == 16


@pytest.mark.parametrize("version, says", [(None, "a run of format 0 (written before clearformer 0.1.0"),
                                           (2, "format_version 2, but this clearformer reads format 1"),
                                           ("1", "format_version \"1\", but this clearformer reads format 1")])
def test_a_translation_run_of_another_format_is_refused_in_one_line(translation_run, tmp_path, capsys, version,
                                                                    says):
    run = copy_of(translation_run, tmp_path)
    set_format(run, version)
    assert says in one_line_error(capsys, ["translate", "--checkpoint", str(run), "I love you"])
    assert says in one_line_error(capsys, ["train", "--out", str(run), "--resume", "--steps", "4", "--quiet"])
    with pytest.raises(UserError, match="format"):
        load_model(run)


def test_a_language_model_run_of_format_0_is_refused_in_one_line(lm_run, tmp_path, capsys):
    run = copy_of(lm_run, tmp_path)
    set_format(run, None)
    says = "a run of format 0 (written before clearformer 0.1.0, without format_version)"
    assert says in one_line_error(capsys, ["lm", "generate", "the dog", "--checkpoint", str(run), "--greedy"])
    assert says in one_line_error(capsys, ["lm", "train", "--out", str(run), "--resume", "--steps", "4", "--quiet"])


def test_runs_of_this_format_resume(translation_run, lm_run, tmp_path):
    run = copy_of(translation_run, tmp_path)
    assert main(["train", "--out", str(run), "--resume", "--steps", "3", "--quiet"]) == 0
    assert step_checkpoints(run)[-1].name == "step-00000003"
    lm = copy_of(lm_run, tmp_path)
    assert main(["lm", "train", "--out", str(lm), "--resume", "--steps", "3", "--quiet", "--threads", "1"]) == 0
    assert load_model(lm)[2]["step"] == 3
