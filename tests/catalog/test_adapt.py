"""`translate --po FILE --adapt MINUTES` (commands/adapt.py), end to end in a child process on the toy run: the run
learns the catalogue's translated entries into a new run folder, which fills the untranslated ones; the user's run
and runs/LATEST are left as they were; a catalogue with too few translations is one line, exit 2."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import polib

from clearformer.cli import main
from clearformer.commands.adapt import MIN_ADAPT_ENTRIES, adapted_run_dir
from clearformer.commands.train import init_options
from clearformer.data.toy import toy_splits
from clearformer.train.corpus import load_splits
from clearformer.train.init import CATALOGUE_PATIENCE
from clearformer.train.options import DataOptions

HEADER = {"Language": "fr", "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
          "Plural-Forms": "nplurals=2; plural=(n > 1);"}


def catalogue(path, translated: int, untranslated: int):
    splits = toy_splits()
    po = polib.POFile()
    po.metadata = dict(HEADER)
    for source, target in splits["train"][:translated]:
        po.append(polib.POEntry(msgid=source, msgstr=target))
    for source, _ in splits["valid"][:untranslated]:
        po.append(polib.POEntry(msgid=source, msgstr=""))
    po.save(str(path))
    return path


def translate(argv, tmp_path, runs):
    environment = {**os.environ, "CLEARFORMER_RUNS": str(runs)}
    return subprocess.run([sys.executable, "-m", "clearformer.cli", "translate", *argv], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=300)


def digest(folder):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())
            if path.is_file()}


def test_adapt_learns_the_catalogue_into_a_new_run_and_fills_it(tmp_path, toy_model, monkeypatch):
    po = catalogue(tmp_path / "app.po", MIN_ADAPT_ENTRIES + 10, 6)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "LATEST").write_text("/somewhere/the-users-run\n", encoding="utf-8")
    before = digest(toy_model)
    out = tmp_path / "filled.po"
    done = translate(["--checkpoint", str(toy_model), "--po", str(po), "--adapt", "0.02", "--out", str(out),
                      "--threads", "1"], tmp_path, runs)
    assert done.returncode == 0, done.stderr
    adapted = runs / f"{toy_model.name}-adapted-app"
    assert (adapted / "model.safetensors").is_file() and (adapted / "meta.json").is_file()
    assert f"the adapted run is kept in {adapted}" in done.stderr
    assert "54 training pairs, 6 validation pairs" in done.stderr  # a tenth of the 60 pairs chooses the model
    filled = [entry for entry in polib.pofile(str(out)) if "fuzzy" in entry.flags]
    assert len(filled) == 6 and all(entry.msgstr for entry in filled)
    assert digest(toy_model) == before  # the user's run is not touched
    assert (runs / "LATEST").read_text(encoding="utf-8") == "/somewhere/the-users-run\n"
    monkeypatch.setenv("CLEARFORMER_RUNS", str(runs))
    assert adapted_run_dir(toy_model, po) == runs / f"{toy_model.name}-adapted-app-2"  # never the kept one


def test_too_few_translated_entries_is_one_line(tmp_path, toy_model, monkeypatch, capsys):
    """Refusals before any work: in-process (the journey through a real process is the test above)."""
    po = catalogue(tmp_path / "young.po", 12, 3)
    runs = tmp_path / "runs"
    monkeypatch.setenv("CLEARFORMER_RUNS", str(runs))
    monkeypatch.chdir(tmp_path)

    def refused(*argv: str) -> str:
        code = main(["translate", *argv])
        captured = capsys.readouterr()
        assert code == 2 and captured.out == "", (code, captured)
        return captured.err

    assert refused("--checkpoint", str(toy_model), "--po", str(po), "--adapt", "1").strip().splitlines() == [
        f"clearformer translate: error: {po}: 12 translated entries; --adapt learns from at least "
        f"{MIN_ADAPT_ENTRIES} (translate without --adapt, or translate more first)"]
    assert not runs.exists()
    assert "--adapt -1: give minutes of training" in refused("--checkpoint", str(toy_model), "--po", str(po),
                                                             "--adapt", "-1")
    template = catalogue(tmp_path / "app.pot", 0, 3)
    assert "a .po file), not a template" in refused("--checkpoint", str(toy_model), "--po", str(template),
                                                    "--adapt", "1")
    assert "--adapt applies to --po" in refused("--checkpoint", str(toy_model), "--adapt", "1", "hello")


def test_a_catalogue_validates_a_tenth_about_once_an_epoch(tmp_path, toy_model):
    """`train --init RUN --data CATALOGUE.po`: a tenth of the pairs held out (the kept model's judges), a validation
    at least every 3 steps and early stopping after 5 without progress; flags still override them."""
    po = catalogue(tmp_path / "app.po", 60, 2)
    splits, _, _ = load_splits(DataOptions(data_dir=str(po)), "toy-translate")
    assert (len(splits["train"]), len(splits["valid"])) == (54, 6)
    chosen = init_options({"init": str(toy_model), "data_dir": str(po), "run_dir": str(tmp_path / "run")}, [])
    assert (chosen.loop.eval_every, chosen.loop.patience) == (3, CATALOGUE_PATIENCE)
    given = init_options({"init": str(toy_model), "data_dir": str(po), "run_dir": str(tmp_path / "run"),
                          "eval_every": 7}, [])
    assert given.loop.eval_every == 7
