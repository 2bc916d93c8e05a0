"""`import marian` records the languages its name says (opus-mt-en-de: en -> de) in the run's meta.json, so
`serve`'s /languages and a template's header know them without --languages (issue 49)."""

from __future__ import annotations

from interop_helpers import marian_folder

from clearformer.cli import main
from clearformer.languages import Languages, run_languages
from clearformer.store.safeio import read_json_object


def test_import_marian_records_the_languages_its_name_says(tmp_path, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    named, _ = marian_folder(tmp_path / "opus-mt-en-de")
    assert main(["import", "marian", str(named), "--out", str(tmp_path / "run")]) == 0
    meta = read_json_object(tmp_path / "run" / "meta.json")
    assert meta["languages"] == {"source": "en", "target": "de"}
    assert run_languages(meta) == Languages("en", "de")
    unnamed, _ = marian_folder(tmp_path / "my-model")
    assert main(["import", "marian", str(unnamed), "--out", str(tmp_path / "other")]) == 0
    assert "languages" not in read_json_object(tmp_path / "other" / "meta.json")  # nothing to say: --languages
